"""torch.fft (through aten::_fft_r2c, _fft_c2c, _fft_c2r), the complex64
pieces it needs (view_as_real/view_as_complex, conj), and roll (fftshift),
against CPU."""

import pytest
import torch
from reference import assert_close, check_op

# complex64 results: float32 tolerances on real and imaginary parts; FFT sums
# n terms, so the error grows with the signal length.
C_ATOL, C_RTOL = 2e-5, 2e-5
NORMS = [None, "forward", "ortho", "backward"]


def real_view(fn):
    """fn with complex results seen as (..., 2) float32, so gradients flow."""

    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        return torch.view_as_real(out.resolve_conj()) if out.is_complex() else out

    wrapped.__name__ = getattr(fn, "__name__", "fn")
    return wrapped


def crand(*shape):
    return torch.randn(shape, dtype=torch.complex64)


# ---- complex64 foundation ----------------------------------------------------
def test_complex64_round_trips_to_device_and_back():
    x = crand(3, 4)
    assert_close(x.to("tpu"), x, atol=0, rtol=0)


def test_complex64_elementwise_add_mul_neg_match_cpu():
    a, b = crand(5), crand(5)
    check_op(lambda x, y: x + y * x - y, a, b, atol=1e-6, rtol=1e-6)
    check_op(torch.neg, a, atol=0, rtol=0)


def test_view_as_real_and_view_as_complex_alias_the_same_storage():
    x = crand(2, 3).to("tpu")
    r = torch.view_as_real(x)
    assert r.shape == (2, 3, 2) and r.dtype == torch.float32
    assert_close(r, torch.view_as_real(x.cpu()), atol=0, rtol=0)
    r[0, 1, 1] = 7.0  # writes through to the complex tensor
    assert x.cpu()[0, 1].imag == 7.0
    back = torch.view_as_complex(r)
    assert_close(back, x.cpu(), atol=0, rtol=0)


def test_real_and_imag_of_transposed_complex_view():
    x = crand(3, 4)
    check_op(lambda t: t.t().real * 2 + t.t().imag, x, atol=1e-6, rtol=1e-6)


def test_conj_resolves_in_copies_and_conj_physical():
    x = crand(4, 3)
    assert_close(x.to("tpu").conj().resolve_conj(), x.conj().resolve_conj(), atol=0, rtol=0)
    assert_close(torch.conj_physical(x.to("tpu")), torch.conj_physical(x), atol=0, rtol=0)
    torch.testing.assert_close(x.to("tpu").conj().cpu(), x.conj(), atol=0, rtol=0)
    y = x.to("tpu")
    y.conj_physical_()
    assert_close(y, x.conj(), atol=0, rtol=0)


def test_conj_physical_of_real_tensor_is_a_copy():
    x = torch.randn(5)
    check_op(torch.conj_physical, x, atol=0, rtol=0)


# ---- 1-D transforms --------------------------------------------------------------
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("fn", [torch.fft.fft, torch.fft.ifft], ids=["fft", "ifft"])
def test_complex_1d_transforms_match_cpu(fn, norm):
    check_op(fn, crand(3, 16), norm=norm, atol=C_ATOL, rtol=C_RTOL)


@pytest.mark.parametrize("n", [None, 5, 12])
@pytest.mark.parametrize("dim", [-1, 0])
def test_fft_of_real_input_pads_or_trims_to_n_with_gradients(n, dim):
    check_op(real_view(torch.fft.fft), torch.randn(8, 7), n=n, dim=dim, atol=C_ATOL, rtol=C_RTOL, grad=True)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("length", [1, 7, 8])
def test_rfft_keeps_the_nonnegative_frequencies_with_gradients(length, norm):
    check_op(real_view(torch.fft.rfft), torch.randn(2, length), norm=norm, atol=C_ATOL, rtol=C_RTOL, grad=True)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 6, 9])
def test_irfft_produces_n_real_outputs(n, norm):
    check_op(torch.fft.irfft, crand(4, 5), n=n, norm=norm, atol=C_ATOL, rtol=C_RTOL)


def test_irfft_gradient_matches_cpu():
    x = torch.randn(3, 5)  # real input: promoted to complex, the gradient is real
    check_op(torch.fft.irfft, x, n=8, atol=C_ATOL, rtol=C_RTOL, grad=True)


def test_hfft_and_ihfft_match_cpu():
    check_op(torch.fft.hfft, crand(6), n=10, atol=C_ATOL, rtol=C_RTOL)
    check_op(real_view(torch.fft.ihfft), torch.randn(2, 9), atol=C_ATOL, rtol=C_RTOL, grad=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_fft_of_integer_and_bool_input_computes_in_float(dtype):
    x = torch.randint(0, 2, (9,)).to(dtype)
    check_op(torch.fft.rfft, x, atol=C_ATOL, rtol=C_RTOL)


def test_fft_of_non_contiguous_input():
    x = torch.randn(6, 10)
    check_op(lambda t: torch.fft.fft(t.t()[::2]), x, atol=C_ATOL, rtol=C_RTOL)


# ---- n-D transforms ----------------------------------------------------------------
@pytest.mark.parametrize("norm", NORMS)
def test_fftn_over_more_than_three_dims_matches_cpu(norm):
    # stablehlo.fft transforms at most 3 trailing dims: 4 dims take two passes.
    check_op(torch.fft.fftn, crand(2, 3, 4, 5), norm=norm, atol=1e-4, rtol=1e-4)


def test_fft2_and_ifft2_over_leading_dims():
    check_op(torch.fft.fft2, crand(4, 5, 3), dim=(0, 1), atol=C_ATOL, rtol=C_RTOL)
    check_op(torch.fft.ifft2, crand(4, 5, 3), dim=(2, 0), atol=C_ATOL, rtol=C_RTOL)


@pytest.mark.parametrize("s", [None, (4, 6)])
def test_rfft2_and_irfft2_round_trip_with_gradients(s):
    x = torch.randn(2, 4, 6)
    check_op(real_view(torch.fft.rfft2), x, s=s, atol=1e-4, rtol=1e-4, grad=True)
    check_op(lambda t: torch.fft.irfft2(torch.fft.rfft2(t), s=(4, 6)), x, atol=1e-5, rtol=1e-5, grad=True)


def test_rfftn_and_irfftn_over_all_dims():
    check_op(real_view(torch.fft.rfftn), torch.randn(3, 4, 5, 6), atol=1e-4, rtol=1e-4)
    check_op(torch.fft.irfftn, crand(3, 4, 5), atol=1e-4, rtol=1e-4)


def test_hfftn_and_ihfftn_match_cpu():
    check_op(torch.fft.hfftn, crand(3, 4, 5), atol=1e-4, rtol=1e-4)
    check_op(real_view(torch.fft.ihfftn), torch.randn(3, 4, 5), atol=1e-5, rtol=1e-5)


def test_fft_out_variant_writes_into_given_tensor():
    x = crand(8)
    out = torch.empty(8, dtype=torch.complex64, device="tpu")
    r = torch.fft.fft(x.to("tpu"), out=out)
    assert r is out
    assert_close(out, torch.fft.fft(x), atol=C_ATOL, rtol=C_RTOL)


def test_fft_of_zero_length_signal_raises_like_cpu():
    with pytest.raises(RuntimeError):
        torch.fft.fft(torch.randn(0).to("tpu"))


# ---- fftshift / roll -------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5,), (4, 7), (2, 3, 4)])
def test_fftshift_and_ifftshift_match_cpu(shape):
    x = torch.randn(shape)
    check_op(torch.fft.fftshift, x, atol=0, rtol=0, grad=True)
    check_op(torch.fft.ifftshift, x, atol=0, rtol=0, grad=True)
    check_op(torch.fft.fftshift, x, dim=-1, atol=0, rtol=0)


@pytest.mark.parametrize("shifts,dims", [(2, None), (-3, 0), ((1, -2), (0, 1)), (13, 1)])
def test_roll_matches_cpu(shifts, dims):
    x = torch.arange(24.0).reshape(4, 6)
    check_op(torch.roll, x, shifts, dims, atol=0, rtol=0, grad=True)


def test_roll_of_int64_and_empty_tensors():
    check_op(torch.roll, torch.arange(10).reshape(2, 5), 3, 1, atol=0, rtol=0)
    check_op(torch.roll, torch.randn(0, 3), 1, 1, atol=0, rtol=0)


# ---- stft ---------------------------------------------------------------------------------
def test_stft_without_centering_matches_cpu():
    x, window = torch.randn(2, 64), torch.hann_window(16)
    check_op(
        lambda t, w: torch.view_as_real(torch.stft(t, 16, hop_length=4, window=w, center=False, return_complex=True)),
        x,
        window,
        atol=1e-4,
        rtol=1e-4,
    )

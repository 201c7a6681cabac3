"""The op table (csrc/device/op_table.cpp) names every PrivateUse1 overload
the device implements: lowered rows and the hand-written kernels (linalg,
transformer fast paths, CTC loss, the attention choice) alike, so
torch_tpu.lowered_ops() and the coverage ledger see them all."""

import pytest
import torch

import torch_tpu

# Kernels written in C++ rather than lowered, which were registered outside
# the table before (csrc/device/hand_written_kernels.h).
HAND_WRITTEN = {
    "aten::_addmm_activation",
    "aten::_addmm_activation.out",
    "aten::_ctc_loss",
    "aten::_ctc_loss.Tensor",
    "aten::_ctc_loss_backward",
    "aten::_ctc_loss_backward.Tensor",
    "aten::_fused_sdp_choice",
    "aten::_linalg_eigvals",
    "aten::_masked_softmax",
    "aten::_native_multi_head_attention",
    "aten::_nested_tensor_from_mask",
    "aten::_nested_tensor_from_mask_left_aligned",
    "aten::_transform_bias_rescale_qkv",
    "aten::_transformer_encoder_layer_fwd",
    "aten::cholesky",
    "aten::cholesky.out",
    "aten::linalg_eig",
    "aten::linalg_eig.out",
    "aten::linalg_eigvals.out",
    "aten::linalg_lstsq.out",
    "aten::ormqr",
    "aten::ormqr.out",
}

# Metadata, transfers and value-dependent sizes: no lowering and no row
# (op_table.cpp's TORCH_LIBRARY_IMPL lists them by hand).
METADATA_AND_TRANSFERS = {
    "aten::_copy_from",
    "aten::_copy_from_and_resize",
    "aten::_efficientzerotensor",
    "aten::_has_compatible_shallow_copy_type",
    "aten::_local_scalar_dense",
    "aten::_reshape_alias",
    "aten::_unique",
    "aten::_unique2",
    "aten::as_strided",
    "aten::bincount",
    "aten::empty.memory_format",
    "aten::empty_strided",
    "aten::equal",
    "aten::masked_select",
    "aten::masked_select.out",
    "aten::nonzero",
    "aten::repeat_interleave.Tensor",
    "aten::resize_",
    "aten::set_",
    "aten::set_.source_Storage",
    "aten::set_.source_Storage_storage_offset",
    "aten::set_.source_Tensor",
    "aten::tril_indices",
    "aten::triu_indices",
    "aten::unfold",
    "aten::unique_consecutive",
    "aten::unique_dim",
    "aten::view",
    "aten::view_as_complex",
    "aten::view_as_real",
}


def _registered_for_device():
    registrations = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    return {name for name in registrations if name.startswith("aten::")}


def test_hand_written_kernels_are_rows():
    ops = set(torch_tpu.lowered_ops())
    assert HAND_WRITTEN <= ops, sorted(HAND_WRITTEN - ops)


def test_every_listed_op_has_a_device_kernel():
    missing = [
        name
        for name in torch_tpu.lowered_ops()
        if name.startswith("aten::") and not torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1")
    ]
    assert missing == []


def test_the_table_names_every_device_kernel():
    # Whatever registers an aten overload for the device goes through the
    # table: a kernel registered elsewhere would be missing from lowered_ops().
    unlisted = _registered_for_device() - set(torch_tpu.lowered_ops()) - METADATA_AND_TRANSFERS
    assert unlisted == set()


def test_the_table_names_every_nested_tensor_kernel():
    # nn.TransformerEncoder's fast path on tpu packs a padded batch into a
    # nested tensor: its two kernels are rows of the table too.
    registered = torch._C._dispatch_get_registrations_for_dispatch_key("NestedTensorPrivateUse1")
    listed = set(torch_tpu._C._nested_tensor_ops())
    assert listed == {"aten::_transformer_encoder_layer_fwd", "aten::to_padded_tensor"}
    assert {name for name in registered if name.startswith("aten::")} == listed


def test_hand_written_rows_still_run():
    # One of each file's kernels, against CPU.
    a = torch.randn(4, 4, dtype=torch.float64)
    torch.testing.assert_close(torch.linalg.eigvals(a.to("tpu")).cpu(), torch.linalg.eigvals(a))
    x, w, b = torch.randn(3, 5), torch.randn(5, 6), torch.randn(6)
    expected = torch._addmm_activation(b, x, w)
    torch.testing.assert_close(torch._addmm_activation(b.to("tpu"), x.to("tpu"), w.to("tpu")).cpu(), expected)
    log_probs = torch.randn(6, 2, 4).log_softmax(2)
    targets = torch.tensor([[1, 2], [3, 1]])
    expected = torch.nn.functional.ctc_loss(log_probs, targets, [6, 5], [2, 2])
    actual = torch.nn.functional.ctc_loss(log_probs.to("tpu"), targets.to("tpu"), [6, 5], [2, 2])
    torch.testing.assert_close(actual.cpu(), expected)


EXTREMES_OF_EMPTY = {
    "argmax": lambda t: torch.argmax(t),
    "argmin_dim0": lambda t: torch.argmin(t, 0),
    "amax": lambda t: torch.amax(t),
    "amin_dim0": lambda t: torch.amin(t, 0),
    "aminmax": lambda t: torch.aminmax(t),
    "aminmax_dim0": lambda t: torch.aminmax(t, dim=0),
    "argmax_dim1": lambda t: torch.argmax(t, 1),
    "aminmax_dim1": lambda t: torch.aminmax(t, dim=1),
}


@pytest.mark.parametrize("case", EXTREMES_OF_EMPTY)
def test_row_checks_of_extremes_of_empty_raise_as_on_cpu(case):
    # argmax/argmin, amax/amin and aminmax each name their own check in their
    # row (no check compares op names): IndexError or RuntimeError and CPU's
    # words, or CPU's result where a dim is left.
    def outcome(t):
        try:
            result = EXTREMES_OF_EMPTY[case](t)
        except (IndexError, RuntimeError) as error:
            return type(error), str(error).split("\n")[0]
        return "result", [r.shape for r in (result if isinstance(result, tuple) else (result,))]

    empty = torch.empty(0, 3)
    assert outcome(empty.to("tpu")) == outcome(empty)


def test_fake_tensors_take_their_rule_from_the_rows_meta_kernel():
    # _grouped_mm's row serves fake tensors from its C++ meta kernel: its
    # shapes for CPU's dtypes (PyTorch's fake rule admits only bfloat16) and
    # CUDA's argument checks, at trace time.
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert torch_tpu._C._fake_tensor_rule_ops() == ["aten::_grouped_mm"]
    offs = torch.tensor([3, 6], dtype=torch.int32)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        a = mode.from_tensor(torch.empty(6, 4, device="tpu"))
        b = mode.from_tensor(torch.empty(2, 4, 8, device="tpu"))
        fake_offs = mode.from_tensor(offs.to("tpu"))
        out = torch._grouped_mm(a, b, fake_offs)
        assert (out.shape, out.dtype, out.device.type) == ((6, 8), torch.float32, "tpu")
        with pytest.raises(RuntimeError, match="contraction dimension of mat_a and mat_b must match"):
            torch._grouped_mm(a, mode.from_tensor(torch.empty(2, 3, 8, device="tpu")), fake_offs)


def test_compiled_grouped_mm_with_dynamic_sizes_matches_cpu():
    # dynamic=True traces with symbolic sizes, which reach the C++ meta
    # kernel as SymInts.
    def f(a, b, offs):
        return torch._grouped_mm(a, b, offs)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    b = torch.randn(2, 4, 8)
    for rows in (6, 10, 14):
        a, offs = torch.randn(rows, 4), torch.tensor([rows // 2, rows], dtype=torch.int32)
        actual = compiled(a.to("tpu"), b.to("tpu"), offs.to("tpu"))
        torch.testing.assert_close(actual.cpu(), f(a, b, offs), atol=0.05, rtol=0.05)


UNORDERED_INPUTS = {
    "sign": lambda t: torch.sign(t),
    "max_dim": lambda t: torch.max(t, 0),
    "min_dim": lambda t: torch.min(t, 1),
    "amax": lambda t: torch.amax(t),
    "gt": lambda t: torch.gt(t, t),
    "sort": lambda t: torch.sort(t),
    "topk": lambda t: torch.topk(t, 2),
    "topk_of_bools": lambda t: torch.topk(t.real > 0, 2),
}


@pytest.mark.parametrize("case", UNORDERED_INPUTS)
def test_row_checks_of_unordered_inputs_raise_as_on_cpu(case):
    # sign, max/min, sort and topk name their own checks in their rows where
    # their words differ from the other ops' (no check compares op names).
    def outcome(t):
        try:
            UNORDERED_INPUTS[case](t)
        except (NotImplementedError, RuntimeError, TypeError) as error:
            return type(error), str(error).split("\n")[0].replace("CPU", "").replace("tpu", "").strip()
        return "result"

    complex_input = torch.randn(3, 4, dtype=torch.complex64)
    assert outcome(complex_input.to("tpu")) == outcome(complex_input)


def _like(t, values):
    return torch.tensor(values).to(t.device)


ADVANCED_INDEXING = {
    "index_put_values_too_wide": lambda t: t.index_put_((_like(t, [0, 1]),), torch.ones(3, 5).to(t.device)),
    "index_put_values_broadcast": lambda t: t.index_put_((_like(t, [0, 1]),), torch.ones(4).to(t.device)),
    "index_indices_do_not_broadcast": lambda t: t[_like(t, [0, 1]), _like(t, [0, 1, 2])],
    "index_out": lambda t: torch.ops.aten.index.Tensor_out(t, [_like(t, [2, 0])], out=torch.empty(0).to(t.device)),
}


@pytest.mark.parametrize("case", ADVANCED_INDEXING)
def test_row_checks_of_advanced_indexing_shapes_raise_as_on_cpu(case):
    # index and index_put each name their shape check; only index_put's
    # checks its values against the selection.
    def outcome(t):
        try:
            result = ADVANCED_INDEXING[case](t)
        except (IndexError, RuntimeError) as error:
            return type(error), str(error).split("\n")[0]
        return "result", result.cpu()

    x = torch.randn(3, 4)
    actual, expected = outcome(x.to("tpu")), outcome(x.clone())
    assert actual[0] == expected[0]
    if actual[0] == "result":
        torch.testing.assert_close(actual[1], expected[1])
    else:
        assert actual == expected

"""F.ctc_loss on tpu against CPU: _ctc_loss and _ctc_loss_backward composed
from device ops (csrc/device/ctc_loss_kernels.cpp), for every reduction,
lengths given as ints or as tensors, padded and concatenated targets, empty
targets and impossible alignments (infinite loss, zero_infinity), in each
eager mode and compiled."""

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close

import torch_tpu

ATOL, RTOL = 1e-5, 1e-5
T, B, C, S = 12, 3, 6, 4
INPUT_LENGTHS, TARGET_LENGTHS = [12, 10, 7], [4, 2, 3]


def inputs(concatenated):
    log_probs = torch.randn(T, B, C).log_softmax(2)
    padded = torch.randint(1, C, (B, S))
    if concatenated:
        return log_probs, torch.cat([padded[b, : TARGET_LENGTHS[b]] for b in range(B)])
    return log_probs, padded


def loss_and_gradient(log_probs, targets, input_lengths, target_lengths, weight, run=lambda f, *a: f(*a), **kwargs):
    log_probs = log_probs.detach().clone().requires_grad_()

    def loss_of(lp, tg, il, tl):
        return F.ctc_loss(lp, tg, il, tl, **kwargs)

    loss = run(loss_of, log_probs, targets, input_lengths, target_lengths)
    (loss * weight).sum().backward()
    return loss, log_probs.grad


def check_matches_cpu(log_probs, targets, input_lengths, target_lengths, mode="strict", **kwargs):
    as_tensors = isinstance(input_lengths, torch.Tensor)
    per_element = kwargs.get("reduction", "mean") == "none"
    weight = torch.linspace(0.5, 1.5, log_probs.size(1)) if per_element else torch.tensor(1.0)
    expected = loss_and_gradient(log_probs, targets, input_lengths, target_lengths, weight, **kwargs)

    def on(t):
        return t.to("tpu") if isinstance(t, torch.Tensor) else t

    args = [on(log_probs), on(targets), on(input_lengths) if as_tensors else input_lengths]
    args.append(on(target_lengths) if as_tensors else target_lengths)
    if mode == "compiled":
        run = lambda f, *a: torch.compile(f, backend="tpu")(*a)  # noqa: E731
        actual = loss_and_gradient(*args, on(weight), run=run, **kwargs)
    else:
        with torch_tpu.eager_mode(mode):
            actual = loss_and_gradient(*args, on(weight), **kwargs)
    assert_close(list(actual), list(expected), ATOL, RTOL)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compiled"])
@pytest.mark.parametrize("concatenated", [False, True])
@pytest.mark.parametrize("lengths_as", ["ints", "tensors"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss_and_gradient_match_cpu(reduction, lengths_as, concatenated, mode):
    log_probs, targets = inputs(concatenated)
    lengths = (INPUT_LENGTHS, TARGET_LENGTHS)
    if lengths_as == "tensors":
        lengths = tuple(torch.tensor(x) for x in lengths)
    check_matches_cpu(log_probs, targets, *lengths, mode=mode, reduction=reduction)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignment_is_infinite_or_zeroed_as_on_cpu(zero_infinity):
    # Element 1's target (3 labels, two alike in a row) needs 4 steps; it has 3.
    log_probs = torch.randn(5, 2, 4).log_softmax(2)
    targets = torch.tensor([[1, 2, 3], [2, 2, 3]])
    check_matches_cpu(log_probs, targets, [5, 3], [3, 3], reduction="none", zero_infinity=zero_infinity)


def test_empty_targets_and_blank_other_than_zero_match_cpu():
    log_probs = torch.randn(6, 3, 5).log_softmax(2)
    targets = torch.tensor([[0, 1, 2], [3, 3, 1], [2, 0, 0]])
    check_matches_cpu(log_probs, targets, [6, 4, 5], [3, 0, 2], reduction="none", blank=4)


# Empty targets where they once failed: after the others in concatenated
# targets (their offset is past the end), and every target empty (l' is one
# blank). transformers' CTC heads drop blank labels, so a batch of silence
# has them.
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("concatenated", [False, True])
@pytest.mark.parametrize("target_lengths", [[0, 2, 3], [3, 2, 0], [2, 0, 0], [0, 0, 0]])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_empty_targets_anywhere_in_the_batch_match_cpu(reduction, target_lengths, concatenated, mode):
    log_probs = torch.randn(T, B, C).log_softmax(2)
    padded = torch.randint(1, C, (B, S))
    targets = torch.cat([padded[b, : target_lengths[b]] for b in range(B)]) if concatenated else padded
    check_matches_cpu(log_probs, targets, INPUT_LENGTHS, target_lengths, mode=mode, reduction=reduction)


def test_bad_lengths_raise_like_cpu():
    log_probs, targets = inputs(False)
    cases = [
        lambda d: F.ctc_loss(log_probs.to(d), targets.to(d), [13, 10, 7], TARGET_LENGTHS),  # longer than T
        lambda d: F.ctc_loss(log_probs.to(d), targets.to(d), INPUT_LENGTHS, [5, 2, 3]),  # longer than targets
        lambda d: F.ctc_loss(log_probs.to(d), targets.to(d), INPUT_LENGTHS, TARGET_LENGTHS, blank=C),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as on_cpu:
            case("cpu")
        with pytest.raises(type(on_cpu.value)):
            case("tpu")

"""How the sweeps compare a model's results on tpu with CPU's: the loss of a
model without one of its own, and whether tpu's float32 results are as
accurate as CPU's against a float64 reference."""


def mean_square_loss(tensors):
    """The sweeps' loss for a model without one of its own: the sum of its
    outputs' mean squares, in their own dtype (float64 in a float64 check:
    float32 would round the loss to 1e-7 of itself, differently on each
    device), half types in float32. Empty outputs (glm5_next's cache of
    an indexer that saw no pooled keys) have no mean square and are left
    out: their mean, 0 / 0, would make both devices' losses NaN."""
    import torch

    return sum(
        (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t).pow(2).mean() for t in tensors if t.numel()
    )


def largest_error(x, reference):
    """The largest elementwise distance of `x` from `reference` (float64)."""
    return (x.detach().cpu().double() - reference).abs().max().item()


def rms_error(x, reference):
    """The root mean square distance of `x` from `reference` (float64)."""
    return (x.detach().cpu().double() - reference).pow(2).mean().sqrt().item()


def twice(reference):
    """worst_against_float64's default bound: tpu's error within twice CPU's."""
    return 2.0


def dynamos_multiplier(reference):
    """The bound Dynamo's accuracy check sets on float32 results
    (torch._dynamo.utils.same, get_multiplier): tpu's error within twice
    CPU's, three times for a tensor of under 1000 elements or a 1 x 1
    convolution's weight (4-d, its last two dims 1), where "noise might
    dominate our error metric": one activation past a ReLU kink moves a small
    tensor's root mean square a long way."""
    small = reference.numel() < 1000 or (reference.dim() == 4 and tuple(reference.shape[-2:]) == (1, 1))
    return 3.0 if small else 2.0


def worst_against_float64(actual, expected, reference, error=largest_error, multiplier=twice):
    """Whether tpu's float32 outputs are as accurate as CPU's: given the tensors of
    each (in order) and of a float64 reference (the CPU model in float64), the
    worst (tpu error, CPU error) pair, by their ratio, if every tpu tensor's
    error from the reference (`error`: the largest, or rms_error) is within
    `multiplier(reference tensor)` times CPU's own (twice, by default) plus
    1e-5 of the reference's magnitude; None if one is not, or if the shapes
    disagree.

    Dynamo's accuracy check (torch._dynamo.utils.same with fp64_ref) is
    rms_error with dynamos_multiplier and an absolute 1e-5 (its tolerance over
    10); the default here takes the largest error, and the slack is relative
    to the output's magnitude, since random deep nets' outputs reach 1e4. The
    slack matters where CPU happens to be nearly exact: Mask R-CNN's ten
    detection scores, near 1, are 2.1e-6 from float64's on CPU and 9.2e-6 on
    tpu. An ill-conditioned float32 result differs between devices by its own
    rounding; a lowering error lands far from the reference."""
    if not (len(actual) == len(expected) == len(reference)):
        return None
    errors = []
    for x, y, z in zip(actual, expected, reference):
        if not (x.shape == y.shape == z.shape):
            return None
        if not z.numel():
            continue
        z = z.detach().cpu().double()
        tpu_error, cpu_error = error(x, z), error(y, z)
        if not tpu_error <= multiplier(z) * cpu_error + 1e-5 * z.abs().max().item():
            return None
        errors.append((tpu_error, cpu_error))
    return max(errors, key=lambda e: e[0] / max(e[1], 1e-300), default=(0.0, 0.0))

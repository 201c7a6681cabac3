"""torch.histogram and torch.histogramdd on tpu against CPU: equal-width bins
(over the data's range or a given one) and bins given by their edges, with
weights and density, in each eager mode and compiled; computed on the device
without reading anything to the host; bad arguments raise CPU's errors."""

import re

import pytest
import torch
from reference import assert_close

import torch_tpu

MODES = ["strict", "defer_and_fuse", "compiled"]


def data():
    torch.manual_seed(0)
    x = torch.randn(60)
    x[:6] = torch.tensor([0.0, 1.0, -1.0, 0.5, 2.0, -2.0])  # values on bin edges
    return x


def edges(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


def to_tpu(v):
    if isinstance(v, torch.Tensor):
        return v.to("tpu")
    if isinstance(v, (list, tuple)):
        return type(v)(to_tpu(e) for e in v)
    return v


def run_on_tpu(fn, args, mode):
    args = to_tpu(args)
    if mode == "compiled":
        torch._dynamo.reset()  # each case a fresh compile, not a recompile counted against the limit
        return torch.compile(fn, backend="tpu", fullgraph=True)(*args)
    with torch_tpu.eager_mode(mode):
        torch_tpu.reset_metrics()
        result = fn(*args)
        # Every size follows from the bin counts: nothing is read to the host
        # (the check of the data's range is read at the next synchronization).
        assert torch_tpu.metrics()["host_waits"] == 0
        return result


def as_list(result):
    out = []
    for r in result if isinstance(result, (tuple, list)) else [result]:
        out.extend(r if isinstance(r, (tuple, list)) else [r])
    return out


def check_matches_cpu(fn, args, mode):
    expected = as_list(fn(*args))
    torch_tpu.reset_metrics()
    actual = as_list(run_on_tpu(fn, args, mode))
    assert torch_tpu.metrics()["cpu_fallbacks"] == {}
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.device.type == "tpu" and a.dtype == e.dtype
        assert_close(a, e)


HISTOGRAM_CASES = {
    "data range": (lambda x: torch.histogram(x, 7), []),
    "given range": (lambda x: torch.histogram(x, 8, range=(-1.0, 1.0)), []),
    "weight and density": (lambda x, w: torch.histogram(x, 5, weight=w, density=True), ["weight"]),
    "weight": (lambda x, w: torch.histogram(x, 9, range=(-2.0, 2.0), weight=w), ["weight"]),
    "edges": (lambda x, e: torch.histogram(x, e), ["edges"]),
    "edges weight density": (lambda x, e, w: torch.histogram(x, e, weight=w, density=True), ["edges", "weight"]),
    "2-d input": (lambda x: torch.histogram(x.view(6, 10), 4), []),
}


def histogram_args(x, extra, dtype=torch.float32):
    args = [x.to(dtype)]
    for name in extra:
        if name == "weight":
            args.append(torch.linspace(0.0, 2.0, x.numel()).to(dtype))
        else:
            args.append(edges(-2.5, -1.0, 0.0, 0.5, 0.75, 2.0, dtype=dtype))
    return args


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(HISTOGRAM_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histogram_matches_cpu(case, mode, dtype):
    fn, extra = HISTOGRAM_CASES[case]
    check_matches_cpu(fn, histogram_args(data(), extra, dtype), mode)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize(
    "x",
    [
        torch.full((5,), 3.0),  # one value: its range widened by 0.5 either side
        torch.tensor([]),  # no values: [0, 1]
        torch.tensor([0.5, float("nan"), 0.25, 3.0]),  # NaN is not counted
        torch.tensor([1e-8, 1.0 - 1e-8, 0.1, 0.2, 0.3, 0.7, 0.9]),  # close to edges
    ],
    ids=["one value", "empty", "nan", "near edges"],
)
def test_histogram_edge_cases_match_cpu(x, mode):
    given = not torch.isnan(x).any()
    fn = (lambda t: torch.histogram(t, 10)) if given else (lambda t: torch.histogram(t, 4, range=(0.0, 1.0)))
    check_matches_cpu(fn, [x], mode)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_histogram_of_half_precision_with_a_range_or_edges_matches_cpu(dtype):
    # CPU takes bfloat16/float16 only where it need not read the data's range.
    x = (torch.rand(64) * 4 - 2).to(dtype)
    check_matches_cpu(lambda t: torch.histogram(t, 6, range=(-2.0, 2.0)), [x], "strict")
    check_matches_cpu(lambda t, e: torch.histogram(t, e), [x, edges(-1.0, 0.0, 1.5, dtype=dtype)], "strict")


HISTOGRAMDD_CASES = {
    "data range": (lambda x: torch.histogramdd(x, [3, 4]), []),
    "one bin count": (lambda x: torch.histogramdd(x, 5), []),
    "given range": (lambda x: torch.histogramdd(x, [4, 2], range=[-1.0, 1.0, 0.0, 2.0]), []),
    "weight density": (lambda x, w: torch.histogramdd(x, [3, 3], weight=w, density=True), ["weight"]),
    "edges": (lambda x, e0, e1: torch.histogramdd(x, [e0, e1]), ["edges", "edges"]),
    "edges weight density": (
        lambda x, e0, e1, w: torch.histogramdd(x, [e0, e1], weight=w, density=True),
        ["edges", "edges", "weight"],
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(HISTOGRAMDD_CASES))
def test_histogramdd_matches_cpu(case, mode):
    fn, extra = HISTOGRAMDD_CASES[case]
    x = data().view(30, 2)
    args = [x]
    for name in extra:
        args.append(torch.rand(30) if name == "weight" else edges(-2.0, -0.5, 0.0, 0.5, 3.0))
    check_matches_cpu(fn, args, mode)


def test_histogramdd_of_three_dims_with_leading_batch_dims_matches_cpu():
    x = torch.randn(4, 5, 3)
    check_matches_cpu(lambda t: torch.histogramdd(t, [2, 3, 4]), [x], "strict")
    check_matches_cpu(lambda t, w: torch.histogramdd(t, [2, 3, 4], weight=w), [x, torch.rand(4, 5)], "strict")


def test_histogram_of_a_non_finite_data_range_raises():
    x = torch.tensor([1.0, float("inf")])
    with pytest.raises(RuntimeError, match="range .*is not finite"):
        torch.histogram(x, 3)
    with pytest.raises(RuntimeError, match="range is not finite"):
        torch.histogram(x.to("tpu"), 3).hist.cpu()


def e32(*v):
    return edges(*v)


BAD_CALLS = {
    "int input": lambda d: torch.histogram(torch.arange(5, device=d), 3),
    "int input with range": lambda d: torch.histogram(torch.arange(5, device=d), 3, range=(0.0, 4.0)),
    "bfloat16 without range": lambda d: torch.histogram(torch.ones(3, dtype=torch.bfloat16, device=d), 3),
    "zero bins": lambda d: torch.histogram(torch.ones(3, device=d), 0),
    "range of three": lambda d: torch.histogramdd(torch.ones(3, 1, device=d), [2], range=[0.0, 1.0, 2.0]),
    "inverted range": lambda d: torch.histogram(torch.ones(3, device=d), 2, range=(1.0, 0.0)),
    "infinite range": lambda d: torch.histogram(torch.ones(3, device=d), 2, range=(0.0, float("inf"))),
    "weight dtype": lambda d: torch.histogram(torch.ones(3, device=d), 2, weight=torch.ones(3, device=d).double()),
    "weight shape": lambda d: torch.histogram(torch.ones(3, device=d), 2, weight=torch.ones(4, device=d)),
    "edges dtype": lambda d: torch.histogram(torch.ones(3, device=d), e32(0, 1).double().to(d)),
    "edges 2-d": lambda d: torch.histogram(torch.ones(3, device=d), torch.ones(2, 2, device=d)),
    "one edge": lambda d: torch.histogram(torch.ones(3, device=d), e32(0).to(d)),
    "no edges": lambda d: torch.histogram(torch.ones(3, device=d), torch.ones(0, device=d)),
    "dd of 1-d input": lambda d: torch.histogramdd(torch.ones(3, device=d), [2]),
    "dd bin count list": lambda d: torch.histogramdd(torch.ones(3, 2, device=d), [2, 2, 2]),
    "dd edge list": lambda d: torch.histogramdd(torch.ones(3, 2, device=d), [e32(0, 1).to(d)]),
    "dd weight shape": lambda d: torch.histogramdd(torch.ones(3, 2, device=d), [2, 2], weight=torch.ones(2, device=d)),
    "dd zero bins": lambda d: torch.histogramdd(torch.ones(3, 2, device=d), [2, 0]),
}


@pytest.mark.parametrize("call", list(BAD_CALLS))
def test_bad_arguments_raise_cpu_errors(call):
    fn = BAD_CALLS[call]
    with pytest.raises(Exception) as on_cpu:
        fn("cpu")
    with pytest.raises(type(on_cpu.value), match=re.escape(str(on_cpu.value).splitlines()[0])):
        fn("tpu")

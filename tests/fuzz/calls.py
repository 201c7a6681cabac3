"""Mutated calls of common ops, each reproducible from (seed, index).

An op is a template: a function of a `Draw` that draws its arguments
(tensors, index tensors, masks, ints) and returns the function to call and
its arguments. A call is one template with at most one mutation applied at
one of its argument sites, chosen by the call's own random stream:

- dtype: a tensor in another dtype (bool ... complex64);
- shape: one tensor's dim one longer or shorter, or a dim more (mismatch);
- zero: one named size (shared by every tensor that uses it) set to 0;
- int: a dim, size or count made negative, out of range, or huge (sizes
  past int64's product: overflow checks, never an allocation);
- index: an index value out of range, or the indices as floats with a NaN;
- device: a tensor left on the CPU while the others are on tpu;
- noncontig: a tensor built as a strided slice of a larger one;
- nan: a float tensor holding NaN, inf and -inf.

Sizes are small (a few elements per dim) so a call costs one small program.
"""

import random
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

MUTATIONS = ("none", "dtype", "shape", "zero", "int", "index", "device", "noncontig", "nan")

DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
)

# Sizes whose products overflow int64 (checked before anything is allocated).
HUGE = (2**62, 2**63 - 1)


@dataclass
class Arg:
    """A tensor argument: its CPU values and how to make it on a device."""

    values: torch.Tensor  # contiguous CPU values
    noncontig: bool = False  # made as a strided slice of a larger tensor
    stays_on_cpu: bool = False  # the device mutation: never moved to tpu
    cpu_ok: bool = False  # CUDA accepts this argument on the CPU (advanced indices)

    def make(self, device):
        device = "cpu" if self.stays_on_cpu else device
        if not self.noncontig or self.values.dim() == 0:
            return self.values.clone().to(device)
        # Every other element of a last dim twice as long: same values, strided.
        wide = torch.stack([self.values, torch.zeros_like(self.values)], dim=-1)
        wide = wide.reshape(*self.values.shape[:-1], -1).to(device)
        return wide[..., ::2]


@dataclass
class Call:
    index: int
    op: str
    mutation: str  # the mutation applied, or "none"
    site: str  # what was mutated, for the report
    fn: object
    args: list = field(default_factory=list)
    # A mutation whose error PyTorch finds only in the values (an index out of
    # range): CUDA reports it asynchronously, so it may raise at a later read.
    value_error: bool = False

    def describe(self):
        parts = []
        for a in self.args:
            if isinstance(a, Arg):
                v = a.values
                extra = "".join([" noncontig" if a.noncontig else "", " on cpu" if a.stays_on_cpu else ""])
                parts.append(f"{str(v.dtype)[6:]}{list(v.shape)}{extra}")
            else:
                parts.append(repr(a))
        return f"#{self.index} {self.op}({', '.join(parts)}) [{self.mutation}: {self.site}]"


class Draw:
    """Draws one template's arguments. With `target` set, the target'th site
    of the mutation's kind is mutated; with target None, the sites of each
    kind are counted."""

    def __init__(self, rng, mutation, target, sizes):
        self.rng = rng
        self.mutation = mutation
        self.target = target
        self.sites = 0  # sites of the mutation's kind seen so far
        self.site = ""
        self.value_error = False
        self.sizes = dict(sizes)
        self.counts = {}  # sites of each kind, when counting

    def _hit(self, kind, name):
        if self.target is None:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            return False
        if self.mutation != kind:
            return False
        hit = self.sites == self.target
        self.sites += 1
        if hit:
            self.site = name
        return hit

    def n(self, size):
        """A size: an int, or a name shared by the template's tensors."""
        return self.sizes[size] if isinstance(size, str) else size

    def shape(self, shape):
        return [self.n(s) for s in shape]

    def _tensor_mutations(self, name, shape, dtype):
        """The shape, dtype, device and layout mutations every tensor takes."""
        shape = self.shape(shape)
        if shape and self._hit("shape", name):
            d = self.rng.randrange(len(shape) + 1)
            if d == len(shape):
                shape = shape + [2]  # one dim more
            else:
                shape[d] = shape[d] + 1 if shape[d] <= 1 or self.rng.random() < 0.5 else shape[d] - 1
        if self._hit("dtype", name):
            dtype = self.rng.choice([d for d in DTYPES if d != dtype])
        return shape, dtype

    def _place(self, name, values, cpu_ok=False):
        arg = Arg(values, cpu_ok=cpu_ok)
        if values.dim() > 0 and self._hit("device", name):
            arg.stays_on_cpu = True
        if values.dim() > 0 and self._hit("noncontig", name):
            arg.noncontig = True
        return arg

    def tensor(self, name, shape, dtype=torch.float32, low=None, high=None):
        """Values: standard normal floats, ints in [low, high), bools half true."""
        shape, dtype = self._tensor_mutations(name, shape, dtype)
        values = random_values(self.rng, shape, dtype, low, high)
        if dtype.is_floating_point and values.numel() > 0 and self._hit("nan", name):
            flat = values.view(-1)
            for special in (float("nan"), float("inf"), float("-inf")):
                flat[self.rng.randrange(flat.numel())] = special
        return self._place(name, values)

    def index(self, name, shape, bound, dtype=torch.int64, unique_dim=None, cpu_ok=False, values_checked=True):
        """Indices in [0, bound); with unique_dim, distinct along that dim (so
        scatters and index_put without accumulate are deterministic); with
        values_checked False, never mutated out of range."""
        shape, dtype = self._tensor_mutations(name, shape, dtype)
        bound = self.n(bound)
        gen = torch.Generator().manual_seed(self.rng.randrange(2**31))
        if unique_dim is not None and len(shape) > unique_dim and shape[unique_dim] <= bound:
            rest = [s for i, s in enumerate(shape) if i != unique_dim]
            rows = [torch.randperm(bound, generator=gen)[: shape[unique_dim]] for _ in range(_numel(rest))]
            values = torch.stack(rows) if rows else torch.zeros(0, shape[unique_dim], dtype=torch.int64)
            values = values.reshape(*rest, shape[unique_dim]).movedim(-1, unique_dim).contiguous()
        else:
            values = torch.randint(0, max(bound, 1), shape, generator=gen)
        if dtype in (torch.bool, torch.uint8):
            values = random_values(self.rng, shape, dtype, 0, 2)  # a mask where indices were due
        else:
            values = values.to(dtype)
        if dtype not in (torch.int32, torch.int64):
            return self._place(name, values, cpu_ok)
        if values_checked and values.numel() > 0 and self._hit("index", name):
            self.value_error = True
            flat = values.view(-1)
            spot = self.rng.randrange(flat.numel())
            choice = self.rng.randrange(3)
            if choice == 0:
                flat[spot] = bound + self.rng.randrange(3)
            elif choice == 1:
                flat[spot] = -bound - 1 - self.rng.randrange(3)
            else:  # float indices holding a NaN
                values = values.to(torch.float32)
                values.view(-1)[spot] = float("nan")
                self.value_error = False  # a dtype error, found without reading values
        return self._place(name, values, cpu_ok)

    def mask(self, name, shape, cpu_ok=False):
        shape, dtype = self._tensor_mutations(name, shape, torch.bool)
        gen = torch.Generator().manual_seed(self.rng.randrange(2**31))
        values = (torch.rand(shape, generator=gen) > 0.5).to(dtype)
        return self._place(name, values, cpu_ok)

    def int(self, name, value, role="size", rank=None):
        """A non-tensor int: a `dim` of a rank-`rank` tensor, a `size`, or a
        `count` (k of topk, a number of classes) that must fit its tensor."""
        value = self.n(value)
        if not self._hit("int", name):
            return value
        if role == "dim":
            value = self.rng.choice([rank, -rank - 1, rank + 3, HUGE[0]])
        else:
            value = self.rng.choice([-1, -3, 0, value + 50, *HUGE])
        self.site = f"{name} = {value}"
        return value


def _numel(shape):
    count = 1
    for s in shape:
        count *= s
    return count


def random_values(rng, shape, dtype, low=None, high=None):
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    lo = 0 if dtype == torch.uint8 and (low is None or low < 0) else (-5 if low is None else low)
    hi = 6 if high is None else high
    return torch.randint(lo, max(hi, lo + 1), shape, generator=gen, dtype=torch.int64).to(dtype)


# ---------------------------------------------------------------- templates
# Each returns (fn, args): fn takes the made args in order. Sizes are named
# N, C, L (drawn per call) so the zero mutation empties one of them
# everywhere at once.

OPS = {}


def op(name):
    def register(template):
        OPS[name] = template
        return template

    return register


def _binary(name, fn, dtype=torch.float32, low=None, high=None):
    def template(d):
        return fn, [d.tensor("a", ["N", "C"], dtype, low, high), d.tensor("b", ["C"], dtype, low, high)]

    op(name)(template)


def _unary(name, fn, dtype=torch.float32):
    def template(d):
        return fn, [d.tensor("x", ["N", "C"], dtype)]

    op(name)(template)


_binary("add", lambda a, b: torch.add(a, b, alpha=2))
_binary("sub", torch.sub)
_binary("mul", torch.mul)
_binary("div", torch.div)
_binary("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), torch.int64, 1, 6)
_binary("remainder", torch.remainder, torch.int64, 1, 6)
_binary("pow", lambda a, b: torch.pow(a.abs(), b))
_binary("maximum", torch.maximum)
_binary("atan2", torch.atan2)
_binary("eq", torch.eq)
_binary("lt", torch.lt)
_binary("bitwise_and", torch.bitwise_and, torch.int32)
_binary("logical_xor", torch.logical_xor, torch.bool)
_unary("exp", torch.exp)
_unary("log", lambda x: torch.log(x.abs()))
_unary("sqrt", lambda x: torch.sqrt(x.abs()))
_unary("sigmoid", torch.sigmoid)
_unary("relu", F.relu)
_unary("gelu", F.gelu)
_unary("tanh", torch.tanh)
_unary("abs", torch.abs, torch.int64)
_unary("neg", torch.neg)
_unary("round", lambda x: torch.round(x, decimals=1))
_unary("sign", torch.sign)
_unary("isnan", torch.isnan)
_unary("nan_to_num", lambda x: torch.nan_to_num(x, nan=1.5, posinf=2.0))


@op("clamp")
def _clamp(d):
    return lambda x, lo: torch.clamp(x, min=lo, max=0.5), [d.tensor("x", ["N", "C"]), d.tensor("lo", ["C"])]


@op("addcmul")
def _addcmul(d):
    return lambda a, b, c: torch.addcmul(a, b, c, value=0.5), [
        d.tensor("a", ["N", "C"]),
        d.tensor("b", ["N", "C"]),
        d.tensor("c", ["C"]),
    ]


@op("lerp")
def _lerp(d):
    return torch.lerp, [d.tensor("a", ["N", "C"]), d.tensor("b", ["N", "C"]), d.tensor("w", ["C"])]


def _reduction(name, fn, dtype=torch.float32):
    def template(d):
        dim = d.int("dim", 1, "dim", rank=2)
        return lambda x: fn(x, dim), [d.tensor("x", ["N", "C"], dtype)]

    op(name)(template)


_reduction("sum", lambda x, dim: torch.sum(x, dim))
_reduction("sum_int", lambda x, dim: torch.sum(x, dim, keepdim=True), torch.int32)
_reduction("mean", lambda x, dim: torch.mean(x, dim))
_reduction("prod", lambda x, dim: torch.prod(x, dim))
_reduction("amax", lambda x, dim: torch.amax(x, dim))
_reduction("argmax", lambda x, dim: torch.argmax(x, dim))
_reduction("max_dim", lambda x, dim: tuple(torch.max(x, dim)))
_reduction("std", lambda x, dim: torch.std(x, dim))
_reduction("var_mean", lambda x, dim: tuple(torch.var_mean(x, dim, correction=0)))
_reduction("logsumexp", lambda x, dim: torch.logsumexp(x, dim))
_reduction("all", lambda x, dim: torch.all(x, dim), torch.bool)
_reduction("any", lambda x, dim: torch.any(x, dim), torch.bool)
_reduction("norm", lambda x, dim: torch.linalg.vector_norm(x, 2, dim))
_reduction("cumsum", lambda x, dim: torch.cumsum(x, dim))
_reduction("cumsum_int", lambda x, dim: torch.cumsum(x, dim), torch.int64)
_reduction("cumprod", lambda x, dim: torch.cumprod(x, dim))
_reduction("softmax", lambda x, dim: torch.softmax(x, dim))
_reduction("log_softmax", lambda x, dim: torch.log_softmax(x, dim))
_reduction("argsort", lambda x, dim: torch.sort(x, dim, stable=True)[1])
_reduction("flip", lambda x, dim: torch.flip(x, [dim]))
_reduction("roll", lambda x, dim: torch.roll(x, 2, dim))
_reduction("unsqueeze", lambda x, dim: torch.unsqueeze(x, dim))
_reduction("squeeze", lambda x, dim: torch.squeeze(x[:1], dim))
_reduction("transpose", lambda x, dim: torch.transpose(x, 0, dim).contiguous())
_reduction("sort", lambda x, dim: _values_and_gathered(x, dim, torch.sort(x, dim)))


def _values_and_gathered(x, dim, result):
    """Values and the input read at the returned indices: equal on every
    device whatever index a tie returns."""
    values, indices = result
    return values, torch.gather(x, dim, indices)


@op("topk")
def _topk(d):
    k = d.int("k", 3, "count")
    dim = d.int("dim", 1, "dim", rank=2)
    return lambda x: _values_and_gathered(x, dim, torch.topk(x, k, dim)), [d.tensor("x", ["N", "C"])]


@op("kthvalue")
def _kthvalue(d):
    k = d.int("k", 2, "count")
    dim = d.int("dim", 1, "dim", rank=2)

    def fn(x):
        values, indices = torch.kthvalue(x, k, dim, keepdim=True)
        return values, torch.gather(x, dim, indices)

    return fn, [d.tensor("x", ["N", "C"])]


@op("mm")
def _mm(d):
    return torch.mm, [d.tensor("a", ["N", "C"]), d.tensor("b", ["C", "L"])]


@op("bmm")
def _bmm(d):
    return torch.bmm, [d.tensor("a", [2, "N", "C"]), d.tensor("b", [2, "C", "L"])]


@op("matmul")
def _matmul(d):
    return torch.matmul, [d.tensor("a", [2, "N", "C"]), d.tensor("b", ["C"])]


@op("addmm")
def _addmm(d):
    return lambda c, a, b: torch.addmm(c, a, b, beta=0.5), [
        d.tensor("c", ["L"]),
        d.tensor("a", ["N", "C"]),
        d.tensor("b", ["C", "L"]),
    ]


@op("linear")
def _linear(d):
    return F.linear, [d.tensor("x", ["N", "C"]), d.tensor("w", ["L", "C"]), d.tensor("b", ["L"])]


@op("dot")
def _dot(d):
    return torch.dot, [d.tensor("a", ["C"]), d.tensor("b", ["C"])]


@op("einsum")
def _einsum(d):
    return lambda a, b: torch.einsum("nc,lc->nl", a, b), [d.tensor("a", ["N", "C"]), d.tensor("b", ["L", "C"])]


@op("index")
def _index(d):
    return lambda x, i: x[i], [d.tensor("x", ["N", "C"]), d.index("i", ["L"], "N", cpu_ok=True)]


@op("index_two")
def _index_two(d):
    return lambda x, i, j: x[i, j], [
        d.tensor("x", ["N", "C"]),
        d.index("i", ["L"], "N", cpu_ok=True),
        d.index("j", ["L"], "C", cpu_ok=True),
    ]


@op("index_mask")
def _index_mask(d):
    return lambda x, m: x[m], [d.tensor("x", ["N", "C"]), d.mask("m", ["N", "C"], cpu_ok=True)]


@op("index_mask_rows")
def _index_mask_rows(d):
    return lambda x, m, j: x[m, j], [
        d.tensor("x", ["N", "C"]),
        d.mask("m", ["N"], cpu_ok=True),
        d.index("j", [1], "C", cpu_ok=True),
    ]


@op("index_put")
def _index_put(d):
    accumulate = d.rng.random() < 0.5

    def fn(x, i, v):
        return x.index_put_((i,), v, accumulate=accumulate)

    return fn, [
        d.tensor("x", ["N", "C"]),
        d.index("i", ["N"], "N", unique_dim=0, cpu_ok=True),
        d.tensor("v", ["N", "C"]),
    ]


@op("index_put_mask")
def _index_put_mask(d):
    def fn(x, m, v):
        x[m] = v
        return x

    return fn, [d.tensor("x", ["N", "C"]), d.mask("m", ["N", "C"], cpu_ok=True), d.tensor("v", [])]


@op("masked_fill")
def _masked_fill(d):
    return lambda x, m: x.masked_fill(m, -2.0), [d.tensor("x", ["N", "C"]), d.mask("m", ["C"])]


@op("masked_select")
def _masked_select(d):
    # CUDA's masked_select indexes with the mask, so a CPU mask is accepted.
    return torch.masked_select, [d.tensor("x", ["N", "C"]), d.mask("m", ["N", "C"], cpu_ok=True)]


@op("where")
def _where(d):
    return torch.where, [d.mask("c", ["N", "C"]), d.tensor("a", ["N", "C"]), d.tensor("b", ["C"])]


@op("nonzero")
def _nonzero(d):
    return torch.nonzero, [d.tensor("x", ["N", "C"], torch.int64, 0, 2)]


@op("gather")
def _gather(d):
    dim = d.int("dim", 1, "dim", rank=2)
    return lambda x, i: torch.gather(x, dim, i), [d.tensor("x", ["N", "C"]), d.index("i", ["N", "L"], "C")]


@op("take_along_dim")
def _take_along_dim(d):
    return lambda x, i: torch.take_along_dim(x, i, 1), [d.tensor("x", ["N", "C"]), d.index("i", ["N", "L"], "C")]


@op("scatter")
def _scatter(d):
    dim = d.int("dim", 1, "dim", rank=2)
    return lambda x, i, s: torch.scatter(x, dim, i, s), [
        d.tensor("x", ["N", "C"]),
        d.index("i", ["N", "C"], "C", unique_dim=1),
        d.tensor("s", ["N", "C"]),
    ]


@op("scatter_add")
def _scatter_add(d):
    return lambda x, i, s: torch.scatter_add(x, 1, i, s), [
        d.tensor("x", ["N", "C"]),
        d.index("i", ["N", "L"], "C"),
        d.tensor("s", ["N", "L"]),
    ]


@op("scatter_reduce")
def _scatter_reduce(d):
    reduce = d.rng.choice(["sum", "prod", "mean", "amax", "amin"])
    return lambda x, i, s: torch.scatter_reduce(x, 1, i, s, reduce, include_self=False), [
        d.tensor("x", ["N", "C"]),
        d.index("i", ["N", "L"], "C"),
        d.tensor("s", ["N", "L"]),
    ]


@op("index_select")
def _index_select(d):
    dim = d.int("dim", 0, "dim", rank=2)
    return lambda x, i: torch.index_select(x, dim, i), [d.tensor("x", ["N", "C"]), d.index("i", ["L"], "N")]


@op("index_add")
def _index_add(d):
    return lambda x, i, s: x.index_add_(0, i, s, alpha=2), [
        d.tensor("x", ["N", "C"]),
        d.index("i", ["L"], "N"),
        d.tensor("s", ["L", "C"]),
    ]


@op("index_copy")
def _index_copy(d):
    return lambda x, i, s: x.index_copy_(0, i, s), [
        d.tensor("x", ["N", "C"]),
        d.index("i", ["N"], "N", unique_dim=0),
        d.tensor("s", ["N", "C"]),
    ]


@op("index_fill")
def _index_fill(d):
    return lambda x, i: x.index_fill_(1, i, 3.0), [d.tensor("x", ["N", "C"]), d.index("i", ["L"], "C")]


@op("take")
def _take(d):
    return torch.take, [d.tensor("x", ["N", "C"]), d.index("i", ["L"], d.n("N") * d.n("C"))]


@op("cat")
def _cat(d):
    dim = d.int("dim", 0, "dim", rank=2)
    return lambda a, b: torch.cat([a, b], dim), [d.tensor("a", ["N", "C"]), d.tensor("b", ["L", "C"])]


@op("stack")
def _stack(d):
    dim = d.int("dim", 1, "dim", rank=3)
    return lambda a, b: torch.stack([a, b], dim), [d.tensor("a", ["N", "C"]), d.tensor("b", ["N", "C"])]


@op("reshape")
def _reshape(d):
    rows = d.int("rows", "C", "size")
    return lambda x: torch.reshape(x, (rows, -1)), [d.tensor("x", ["N", "C"])]


@op("view")
def _view(d):
    size = d.int("size", "N", "size")
    return lambda x: x.view(size, d.n("C")) + 1, [d.tensor("x", ["N", "C"])]


@op("expand")
def _expand(d):
    size = d.int("size", "L", "size")
    if size in HUGE:
        size = -2  # an expanded view of 2**62 rows would be read whole
    return lambda x: x.expand(size, -1).contiguous(), [d.tensor("x", [1, "C"])]


@op("repeat")
def _repeat(d):
    times = d.int("times", 2, "size")
    return lambda x: x.repeat(times, 1), [d.tensor("x", ["N", "C"])]


@op("narrow")
def _narrow(d):
    length = d.int("length", 2, "size")
    return lambda x: torch.narrow(x, 1, 1, length), [d.tensor("x", ["N", "C"])]


@op("split")
def _split(d):
    size = d.int("size", 2, "size")
    return lambda x: tuple(torch.split(x, size, 1)), [d.tensor("x", ["N", "C"])]


@op("tril")
def _tril(d):
    return lambda x: torch.tril(x, -1), [d.tensor("x", ["N", "C"])]


@op("pad")
def _pad(d):
    amount = d.int("amount", 2, "size")
    mode = d.rng.choice(["constant", "reflect", "replicate", "circular"])
    return lambda x: F.pad(x, (amount, 1), mode=mode), [d.tensor("x", [2, "N", "C"])]


@op("zeros")
def _zeros(d):
    n, c = d.int("n", "N", "size"), d.int("c", "C", "size")
    return lambda x: x.new_zeros((n, c)) + x.sum(), [d.tensor("x", [])]


@op("full")
def _full(d):
    n = d.int("n", "N", "size")
    return lambda v: torch.full((n, 2), 1.5, device=v.device) * v, [d.tensor("v", [])]


@op("arange")
def _arange(d):
    end = d.int("end", "N", "size")
    return lambda x: torch.arange(end, device=x.device) * x, [d.tensor("x", [])]


@op("one_hot")
def _one_hot(d):
    classes = d.int("classes", "C", "count")
    return lambda i: F.one_hot(i, classes), [d.index("i", ["N"], "C")]


@op("cross_entropy")
def _cross_entropy(d):
    smoothing = d.rng.choice([0.0, 0.1])
    return lambda x, t: F.cross_entropy(x, t, label_smoothing=smoothing), [
        d.tensor("x", ["N", "C"]),
        d.index("t", ["N"], "C"),
    ]


@op("nll_loss")
def _nll_loss(d):
    reduction = d.rng.choice(["mean", "sum", "none"])
    return lambda x, t, w: F.nll_loss(x, t, w, reduction=reduction), [
        d.tensor("x", ["N", "C"]),
        d.index("t", ["N"], "C"),
        d.tensor("w", ["C"]),
    ]


@op("mse_loss")
def _mse_loss(d):
    return F.mse_loss, [d.tensor("x", ["N", "C"]), d.tensor("y", ["N", "C"])]


@op("l1_loss")
def _l1_loss(d):
    return lambda x, y: F.l1_loss(x, y, reduction="sum"), [d.tensor("x", ["N", "C"]), d.tensor("y", ["N", "C"])]


@op("smooth_l1_loss")
def _smooth_l1_loss(d):
    return F.smooth_l1_loss, [d.tensor("x", ["N", "C"]), d.tensor("y", ["N", "C"])]


@op("bce")
def _bce(d):
    return lambda x, y: F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y)), [
        d.tensor("x", ["N", "C"]),
        d.tensor("y", ["N", "C"]),
    ]


@op("bce_with_logits")
def _bce_with_logits(d):
    return F.binary_cross_entropy_with_logits, [d.tensor("x", ["N", "C"]), d.tensor("y", ["N", "C"])]


@op("kl_div")
def _kl_div(d):
    return lambda x, y: F.kl_div(x, y, reduction="batchmean", log_target=True), [
        d.tensor("x", ["N", "C"]),
        d.tensor("y", ["N", "C"]),
    ]


@op("conv1d")
def _conv1d(d):
    padding = d.int("padding", 1, "size")
    return lambda x, w, b: F.conv1d(x, w, b, padding=padding), [
        d.tensor("x", [2, "C", "L"]),
        d.tensor("w", ["N", "C", 3]),
        d.tensor("b", ["N"]),
    ]


@op("conv2d")
def _conv2d(d):
    stride = d.int("stride", 1, "size")
    return lambda x, w: F.conv2d(x, w, stride=stride, padding=1), [
        d.tensor("x", [1, "C", "L", 4]),
        d.tensor("w", ["N", "C", 3, 3]),
    ]


@op("max_pool2d")
def _max_pool2d(d):
    kernel = d.int("kernel", 2, "size")
    return lambda x: F.max_pool2d(x, kernel), [d.tensor("x", [1, "C", "L", 4])]


@op("avg_pool2d")
def _avg_pool2d(d):
    kernel = d.int("kernel", 2, "size")
    return lambda x: F.avg_pool2d(x, kernel, stride=1), [d.tensor("x", [1, "C", "L", 4])]


@op("adaptive_avg_pool2d")
def _adaptive_avg_pool2d(d):
    size = d.int("size", 2, "size")
    return lambda x: F.adaptive_avg_pool2d(x, size), [d.tensor("x", [1, "C", "L", 4])]


@op("interpolate")
def _interpolate(d):
    mode = d.rng.choice(["nearest", "bilinear", "bicubic", "nearest-exact"])
    size = d.int("size", 6, "size")
    corners = None if mode.startswith("nearest") else d.rng.random() < 0.5
    return lambda x: F.interpolate(x, size=(size, 5), mode=mode, align_corners=corners), [
        d.tensor("x", [1, "C", "L", "N"])
    ]


@op("layer_norm")
def _layer_norm(d):
    return lambda x, w, b: F.layer_norm(x, (d.n("C"),), w, b), [
        d.tensor("x", ["N", "C"]),
        d.tensor("w", ["C"]),
        d.tensor("b", ["C"]),
    ]


@op("group_norm")
def _group_norm(d):
    return lambda x, w: F.group_norm(x, 2, w), [d.tensor("x", ["N", 4, "L"]), d.tensor("w", [4])]


@op("batch_norm_eval")
def _batch_norm_eval(d):
    return lambda x, m, v: F.batch_norm(x, m, v, training=False), [
        d.tensor("x", ["N", "C"]),
        d.tensor("m", ["C"]),
        d.tensor("v", ["C"], low=1, high=4),
    ]


@op("embedding")
def _embedding(d):
    return F.embedding, [d.index("i", ["N", "L"], "C"), d.tensor("w", ["C", 3])]


@op("embedding_bag")
def _embedding_bag(d):
    mode = d.rng.choice(["sum", "mean", "max"])
    return lambda i, w, o: F.embedding_bag(i, w, o, mode=mode), [
        d.index("i", ["L"], "C"),
        d.tensor("w", ["C", "N"]),
        # CPU checks offsets' values on the host, CUDA's kernel reads them as
        # they are: no out-of-range offsets.
        d.index("o", [2], 1, values_checked=False),
    ]


@op("bincount")
def _bincount(d):
    return lambda x, w: torch.bincount(x, w), [d.index("x", ["L"], "C"), d.tensor("w", ["L"])]


@op("searchsorted")
def _searchsorted(d):
    return lambda s, v: torch.searchsorted(torch.sort(s)[0], v), [d.tensor("s", ["N", "C"]), d.tensor("v", ["N", "L"])]


@op("outer")
def _outer(d):
    return torch.outer, [d.tensor("a", ["N"]), d.tensor("b", ["C"])]


@op("diag")
def _diag(d):
    offset = d.int("offset", 0, "dim", rank=1)
    return lambda x: torch.diag(x, offset), [d.tensor("x", ["N", "C"])]


@op("dropout_eval")
def _dropout_eval(d):
    return lambda x: F.dropout(x, 0.5, training=False), [d.tensor("x", ["N", "C"])]


# ------------------------------------------------------------------- calls


def make_call(seed, index):
    """Call `index` of the stream `seed`: a round-robin op, with one of the
    mutations its sites allow (or none) at one site of that kind."""
    names = sorted(OPS)
    name = names[index % len(names)]
    template = OPS[name]
    rng = random.Random(f"{seed}:{index}")
    sizes = {"N": rng.randint(1, 4), "C": rng.randint(2, 5), "L": rng.randint(1, 4)}
    template_seed = rng.randrange(2**63)
    counter = Draw(random.Random(template_seed), None, None, sizes)
    template(counter)
    mutation = rng.choice([m for m in MUTATIONS if m in ("none", "zero") or counter.counts.get(m)])
    target, site = None, ""
    if mutation == "zero":
        zeroed = rng.choice(sorted(sizes))
        sizes[zeroed] = 0
        site = f"{zeroed} = 0"
    elif mutation != "none":
        target = rng.randrange(counter.counts[mutation])
    draw = Draw(random.Random(template_seed), mutation, target if target is not None else -1, sizes)
    fn, args = template(draw)
    return Call(index, name, mutation, draw.site or site, fn, args, value_error=draw.value_error)

"""TorchRec on tpu: EmbeddingBagCollection, EmbeddingCollection and
KeyedJaggedTensor forward and backward equal to CPU on the same weights and
features, with the CPU fallback off and nothing counted as falling back
(fbgemm's jagged operators they call are device ops: csrc/lower/jagged.cpp),
and examples/dlrm/train_torchrec.py training as on CPU."""

import importlib.util
import os

import pytest
import torch
from optional_extras import require_fbgemm
from reference import to_device
from repo_paths import EXAMPLES

import torch_tpu

require_fbgemm()
torchrec = pytest.importorskip(
    "torchrec", reason="torchrec is not installed (the [rec] extra: pip install torch_tpu[rec])"
)
from torchrec import (  # noqa: E402
    EmbeddingBagCollection,
    EmbeddingBagConfig,
    EmbeddingCollection,
    EmbeddingConfig,
    JaggedTensor,
    KeyedJaggedTensor,
    KeyedTensor,
    PoolingType,
)

pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


# Three features over a batch of 4: empty bags, a bag longer than the padded
# length (3) the tests use, ids repeated within a bag.
KEYS = ["f1", "f2", "f3"]
LENGTHS = torch.tensor([2, 0, 1, 4, 3, 0, 5, 1, 0, 1, 2, 2], dtype=torch.int32)
VALUES = torch.tensor([1, 2, 3, 4, 4, 9, 0, 5, 6, 7, 1, 1, 2, 3, 8, 9, 2, 5, 0, 7, 3])
WEIGHTS = torch.linspace(0.5, 1.5, len(VALUES))


def _features(device, weighted=False, offsets=False):
    kwargs = dict(keys=KEYS, values=VALUES.to(device))
    if offsets:
        lengths = LENGTHS.to(torch.int64)
        kwargs["offsets"] = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(device)
    else:
        kwargs["lengths"] = LENGTHS.to(device)
    if weighted:
        kwargs["weights"] = WEIGHTS.to(device)
    return KeyedJaggedTensor(**kwargs)


def _bag_tables():
    return [
        EmbeddingBagConfig(name="t1", embedding_dim=4, num_embeddings=10, feature_names=["f1", "f3"]),
        EmbeddingBagConfig(
            name="t2", embedding_dim=3, num_embeddings=10, feature_names=["f2"], pooling=PoolingType.MEAN
        ),
    ]


def _pair(build):
    """A module built on CPU from one seed, and its copy on tpu."""
    torch.manual_seed(0)
    cpu = build()
    tpu = build().to("tpu")
    tpu.load_state_dict(to_device(cpu.state_dict(), "tpu"))
    return cpu, tpu


def _grads(module):
    return {name: p.grad for name, p in module.named_parameters()}


def _assert_close(actual, expected):
    if isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for k in expected:
            _assert_close(actual[k], expected[k])
        return
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("offsets", [False, True], ids=["lengths", "offsets"])
def test_embedding_bag_collection_forward_backward_equal_cpu(mode, offsets):
    cpu, tpu = _pair(lambda: EmbeddingBagCollection(tables=_bag_tables(), device=torch.device("cpu")))
    with torch_tpu.eager_mode(mode):
        results = []
        for module, device in ((cpu, "cpu"), (tpu, "tpu")):
            pooled = module(_features(device, offsets=offsets))
            # Each feature's pooled vectors weighted differently, so every row's gradient differs.
            dense = pooled.values()
            scale = torch.arange(1, dense.shape[1] + 1, dtype=dense.dtype, device=device)
            (dense.square() * scale).sum().backward()
            results.append((pooled.to_dict(), _grads(module)))
        torch_tpu.sync()
    (cpu_pooled, cpu_grads), (tpu_pooled, tpu_grads) = results
    assert list(tpu_pooled) == list(cpu_pooled) == ["f1", "f3", "f2"]  # table order
    _assert_close(tpu_pooled, cpu_pooled)
    _assert_close(tpu_grads, cpu_grads)


def test_weighted_embedding_bag_collection_equals_cpu():
    tables = [EmbeddingBagConfig(name="t", embedding_dim=4, num_embeddings=10, feature_names=KEYS)]
    cpu, tpu = _pair(lambda: EmbeddingBagCollection(tables=tables, is_weighted=True, device=torch.device("cpu")))
    outs = []
    for module, device in ((cpu, "cpu"), (tpu, "tpu")):
        pooled = module(_features(device, weighted=True))
        pooled.values().square().sum().backward()
        outs.append((pooled.to_dict(), _grads(module)))
    _assert_close(outs[1][0], outs[0][0])
    _assert_close(outs[1][1], outs[0][1])


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_embedding_collection_forward_backward_equal_cpu(mode):
    tables = [
        EmbeddingConfig(name="t1", embedding_dim=4, num_embeddings=10, feature_names=["f1", "f2"]),
        EmbeddingConfig(name="t2", embedding_dim=4, num_embeddings=10, feature_names=["f3"]),
    ]
    cpu, tpu = _pair(lambda: EmbeddingCollection(tables=tables, device=torch.device("cpu")))
    with torch_tpu.eager_mode(mode):
        results = []
        for module, device in ((cpu, "cpu"), (tpu, "tpu")):
            jagged = module(_features(device))
            # Each sequence padded to 3 (fbgemm's jagged_to_padded_dense, forward and backward).
            padded = {k: jt.to_padded_dense(desired_length=3) for k, jt in jagged.items()}
            weight = torch.linspace(-1, 1, 3 * 4, device=device).reshape(3, 4)
            loss = sum((p * weight).square().sum() for p in padded.values())
            loss = loss + sum(jt.values().sum() for jt in jagged.values())
            loss.backward()
            results.append(({k: p.detach() for k, p in padded.items()}, _grads(module)))
        torch_tpu.sync()
    (cpu_padded, cpu_grads), (tpu_padded, tpu_grads) = results
    _assert_close(tpu_padded, cpu_padded)
    _assert_close(tpu_grads, cpu_grads)


def _kjt_views(features):
    """What TorchRec's pipelines do with a KeyedJaggedTensor: offsets from
    lengths, per-key views, a feature permutation (one repeated), splits,
    concatenation, and padded dense per key."""
    permuted = features.permute([2, 0, 2])
    split = features.split([1, 2])
    joined = KeyedJaggedTensor.concat([split[1], split[0]])
    per_key = features.to_dict()
    return {
        "offsets": features.offsets(),
        "permuted_values": permuted.values(),
        "permuted_lengths": permuted.lengths(),
        "permuted_weights": permuted.weights(),
        "split_values": split[1].values(),
        "joined_lengths": joined.lengths(),
        "f2_padded": per_key["f2"].to_padded_dense(desired_length=3),
        "f3_dense_weights": per_key["f3"].to_padded_dense_weights(desired_length=2),
        "length_per_key": torch.tensor(features.length_per_key()),
    }


def test_keyed_jagged_tensor_operations_equal_cpu():
    expected = _kjt_views(_features("cpu", weighted=True))
    actual = _kjt_views(_features("tpu", weighted=True))
    actual["length_per_key"] = actual["length_per_key"].to("tpu")
    _assert_close(actual, expected)


def test_keyed_tensor_regroup_and_jagged_tensor_gradients_equal_cpu():
    def run(device):
        values = torch.linspace(-2, 2, 21, device=device).reshape(7, 3).requires_grad_()
        jt = JaggedTensor(values=values, lengths=torch.tensor([2, 0, 4, 1], device=device))
        padded = jt.to_padded_dense(desired_length=3)
        kt = KeyedTensor(keys=["a", "b"], length_per_key=[2, 1], values=padded.sum(1))
        grouped = KeyedTensor.regroup([kt], [["b"], ["a", "b"]])
        # fbgemm's permute_pooled_embs, forward and backward.
        named = KeyedTensor.regroup_as_dict([kt], [["b"], ["a"]], ["g1", "g2"])
        loss = grouped[0].square().sum() + grouped[1].sum() * 2 + (named["g1"] * named["g2"]).sum()
        loss.backward()
        return {
            "padded": padded.detach(),
            "grad": values.grad,
            "grouped": grouped[1].detach(),
            "g2": named["g2"].detach(),
        }

    _assert_close(run("tpu"), run("cpu"))


def test_compiled_embedding_bag_collection_equals_cpu():
    cpu, tpu = _pair(lambda: EmbeddingBagCollection(tables=_bag_tables(), device=torch.device("cpu")))

    def loss_of(module, features):
        return module(features).values().square().sum()

    expected = loss_of(cpu, _features("cpu"))
    expected.backward()
    actual = torch.compile(loss_of, backend="tpu")(tpu, _features("tpu"))
    actual.backward()
    # Sums reduce in another order in the program: float32 rounding apart.
    torch.testing.assert_close(actual.cpu(), expected.detach(), rtol=1e-6, atol=1e-6)
    _assert_close(_grads(tpu), _grads(cpu))


def _example():
    spec = importlib.util.spec_from_file_location(
        "example_dlrm_torchrec", os.path.join(EXAMPLES, "dlrm", "train_torchrec.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dlrm_example_trains_as_on_cpu():
    example = _example()
    argv = ["--steps", "4", "--batch-size", "32", "--rows", "100", "--tables", "4", "--eval-size", "64"]
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # the CPU reference: see tests/training/test_examples.py's _one_cpu_thread
    try:
        cpu = example.run(example.parse_args(argv + ["--device", "cpu"]))
    finally:
        torch.set_num_threads(previous)
    tpu = example.run(example.parse_args(argv + ["--device", "tpu"]))
    torch.testing.assert_close(torch.tensor(tpu["losses"]), torch.tensor(cpu["losses"]), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tpu["logits"], cpu["logits"], rtol=1e-4, atol=1e-5)

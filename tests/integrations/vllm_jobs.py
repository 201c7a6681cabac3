"""One vLLM engine run in a process of its own (tests/integrations/test_vllm.py starts it
with a timeout): the platform is resolved once per process, from the
environment (VLLM_TARGET_DEVICE=cpu: vLLM's CPU platform, the reference;
otherwise ours). Prints one JSON line starting with RESULT.

    python tests/integrations/vllm_jobs.py JOB MODEL_DIR
"""

import collections
import json
import os
import sys

# The engine runs in this process: nothing to spawn, nothing left behind.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

PROMPTS = [
    "Hello, how are you",
    "The quick brown fox jumps over the lazy dog. A tiny model answers every question",
    "Serving",
    "Tensors live in device buffers; programs are compiled once",
]
SHARED_PREFIX = "The quick brown fox jumps over the lazy dog. " * 3
# New tokens per prompt: the decode batch shrinks 4 -> 3 -> 2 -> 1 as
# requests finish, so decode steps run in the buckets of 4 (3 padded to 4),
# 2 and 1 (torch_tpu/vllm/model_runner.py).
LENGTHS = [12, 7, 3, 10]


def _llm(model, **kwargs):
    from vllm import LLM

    return LLM(model=model, dtype="float32", max_model_len=256, enforce_eager=True, max_num_seqs=8, seed=0, **kwargs)


def _greedy(max_tokens=12):
    from vllm import SamplingParams

    return SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)


def _greedy_each():
    return [_greedy(n) for n in LENGTHS]


def _decode_steps():
    """Our runner's decode steps per bucket (tpu only: the CPU platform has none)."""
    from vllm.platforms import current_platform

    if current_platform.device_type != "tpu":
        return None
    from torch_tpu.vllm import model_runner

    steps = model_runner.decode_steps
    return {"replayed": dict(steps["replayed"]), "captured": dict(steps["captured"]), "eager": steps["eager"]}


def _tokens(outputs):
    return [list(o.outputs[0].token_ids) for o in outputs]


def generate(model):
    llm = _llm(model)
    return {"tokens": _tokens(llm.generate(PROMPTS, _greedy_each())), "decode_steps": _decode_steps()}


def sampling(model):
    """Seeded random sampling: vLLM's sampler runs on the host for both platforms, on each one's logits."""
    from vllm import SamplingParams

    llm = _llm(model)
    params = [
        SamplingParams(temperature=0.8, top_p=0.9, top_k=20, seed=1234 + i, max_tokens=12, ignore_eos=True)
        for i in range(len(PROMPTS))
    ]
    return {"tokens": _tokens(llm.generate(PROMPTS, params))}


def prefix_caching(model):
    """Prompts sharing a prefix, twice: the second pass reads the first's cached blocks."""
    prompts = [SHARED_PREFIX + p for p in PROMPTS]
    llm = _llm(model, enable_prefix_caching=True, disable_log_stats=False)
    first = _tokens(llm.generate(prompts, _greedy()))
    second = _tokens(llm.generate(prompts, _greedy()))
    hits = sum(m.value for m in llm.get_metrics() if m.name == "vllm:prefix_cache_hits")
    return {"tokens": first, "again": second, "prefix_cache_hit_tokens": hits}


def chunked_and_preempted(model):
    """Long prompts prefilled in chunks of 16 tokens, in a KV cache too small for the batch:
    the scheduler preempts requests and recomputes them later."""
    prompts = [SHARED_PREFIX * 2 + p for p in PROMPTS]
    llm = _llm(
        model,
        max_num_batched_tokens=16,
        num_gpu_blocks_override=17,
        enable_prefix_caching=False,
        disable_log_stats=False,
    )
    tokens = _tokens(llm.generate(prompts, _greedy()))
    metrics = {m.name: getattr(m, "value", None) for m in llm.get_metrics()}
    return {"tokens": tokens, "preemptions": metrics.get("vllm:num_preemptions")}


def chunked_reference(model):
    """chunked_and_preempted's prompts, whole, in a cache that holds them."""
    prompts = [SHARED_PREFIX * 2 + p for p in PROMPTS]
    llm = _llm(model)
    return {"tokens": _tokens(llm.generate(prompts, _greedy()))}


def continuous_batching(model):
    """Requests join a running batch: one starts alone, others arrive while it decodes."""
    llm = _llm(model)
    engine = llm.llm_engine
    arrivals = {0: [0], 3: [1, 2], 6: [3]}  # step -> prompts added before it
    done = {}
    step = 0
    while step <= max(arrivals) or engine.has_unfinished_requests():
        for i in arrivals.get(step, []):
            engine.add_request(str(i), PROMPTS[i], _greedy(LENGTHS[i]))
        for out in engine.step():
            if out.finished:
                done[int(out.request_id)] = list(out.outputs[0].token_ids)
        step += 1
    return {"tokens": [done[i] for i in range(len(PROMPTS))], "steps": step}


def decode_replay(model):
    """The same batch twice: after the first (warm-up), no program is
    compiled or looked up anew, and each decode step (after the step that
    prefills every prompt) launches one program."""
    import torch_tpu

    # A cache large enough that a program copying one layer's cache would
    # need scratch of its size (XLA's memory report of each program this
    # process compiles or loads: torch_tpu.metrics()).
    os.environ["TORCH_TPU_VLLM_KV_CACHE_GIB"] = "0.25"
    torch_tpu.reset_metrics()
    llm = _llm(model, enable_prefix_caching=False)  # the second pass prefills all again
    warm = _tokens(llm.generate(PROMPTS, _greedy_each()))
    memory = torch_tpu.metrics()
    runner = llm.llm_engine.model_executor.driver_worker.worker.model_runner
    layer_cache_bytes = runner.kv_caches[0].nbytes
    engine = llm.llm_engine
    torch_tpu.reset_metrics()
    for i, prompt in enumerate(PROMPTS):
        engine.add_request(str(i), prompt, _greedy(LENGTHS[i]))
    done, per_step, totals = {}, [], collections.Counter()
    first = True
    while engine.has_unfinished_requests():
        before = torch_tpu.metrics()
        outputs = engine.step()
        after = torch_tpu.metrics()
        step = {k: after[k] - before[k] for k in ("programs_executed", "compiles", "cache_misses")}
        totals.update(step)
        if not first:
            per_step.append(step)
        first = False
        for out in outputs:
            if out.finished:
                done[int(out.request_id)] = list(out.outputs[0].token_ids)
    return {
        "tokens": warm,
        "again": [done[i] for i in range(len(PROMPTS))],
        "decode_step_metrics": per_step,
        "layer_cache_bytes": layer_cache_bytes,
        "program_temp_bytes_peak": memory["program_temp_bytes_peak"],
        "program_alias_bytes_peak": memory["program_alias_bytes_peak"],
        "compiles": totals["compiles"],
        "cache_misses": totals["cache_misses"],
        "programs_executed": totals["programs_executed"],
        "decode_steps": _decode_steps(),
    }


JOBS = {
    f.__name__: f
    for f in (
        generate,
        sampling,
        prefix_caching,
        chunked_and_preempted,
        chunked_reference,
        continuous_batching,
        decode_replay,
    )
}

if __name__ == "__main__":
    job, model = sys.argv[1], sys.argv[2]
    result = JOBS[job](model)
    from vllm.platforms import current_platform

    result["device_type"] = current_platform.device_type
    print("RESULT " + json.dumps(result), flush=True)
    # vLLM's engine and our device shut down in atexit handlers; the test reads the exit code too.

"""Offline vLLM serving of a tiny Llama (tests/integrations/vllm_models.py) on tpu (our
platform plugin, torch_tpu/vllm) against vLLM's own CPU platform, in one
run: 32 requests of mixed prompt lengths added at once, greedy, 32 new tokens
each. Each platform runs in a process of its own (vLLM resolves its platform
once per process); each first serves the same requests once to warm up
(on tpu: every program of every batch shape compiled), then the measured
pass. Prints output tokens/s, time to first token (median and max over the
requests), the wall time of a decode step (engine.step, median) and the
engine thread's CPU time in it (the host's work: Python, vLLM's
bookkeeping, and on tpu building, hashing and launching programs; XLA:CPU
runs programs on threads of its own);
for tpu also the programs launched and compiled per decode step. tpu runs
twice: with decode steps captured per batch-size bucket (the plugin's
default: one program per step, replayed) and with
TORCH_TPU_VLLM_CAPTURE_DECODE=0 (each decode step eager, DeferAndFuse: its
program text built and hashed every step). --strict adds a Strict row (one
program per op).

    python benchmarks/serving.py [--requests 32] [--new-tokens 32] [--strict]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

WORDS = "the quick brown fox jumps over the lazy dog while a tiny model answers every question".split()


def prompts(n):
    # Lengths 4 to 124 words, mixed by a fixed stride.
    return [" ".join(WORDS[j % len(WORDS)] for j in range(4 + (i * 37) % 121)) for i in range(n)]


def serve(engine, texts, new_tokens, metrics=None):
    """`metrics`: torch_tpu.metrics on tpu, to count each decode step's programs."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=new_tokens, ignore_eos=True)
    start = time.perf_counter()
    for i, text in enumerate(texts):
        engine.add_request(str(i), text, params)
    first_token, step_times, host_times, generated = {}, [], [], 0
    programs, compiles = 0, 0
    while engine.has_unfinished_requests():
        decoding = len(first_token) == len(texts)  # every request is past its prefill: a decode step
        before = metrics() if metrics and decoding else None
        t0, c0 = time.perf_counter(), time.thread_time()
        outputs = engine.step()
        t1, c1 = time.perf_counter(), time.thread_time()
        if decoding:
            step_times.append(t1 - t0)
            host_times.append(c1 - c0)
        if before is not None:
            after = metrics()
            programs += after["programs_executed"] - before["programs_executed"]
            compiles += after["compiles"] - before["compiles"]
        for out in outputs:
            if out.outputs[0].token_ids and out.request_id not in first_token:
                first_token[out.request_id] = t1 - start
            if out.finished:
                generated += len(out.outputs[0].token_ids)
    elapsed = time.perf_counter() - start
    ttft = sorted(first_token.values())
    return {
        "tokens_per_s": generated / elapsed,
        "ttft_median_s": statistics.median(ttft),
        "ttft_max_s": ttft[-1],
        "decode_step_ms": 1000 * statistics.median(step_times) if step_times else float("nan"),
        "decode_host_ms": 1000 * statistics.median(host_times) if host_times else float("nan"),
        "decode_steps": len(step_times),
        "programs_per_decode_step": programs / max(1, len(step_times)),
        "compiles_in_decode_steps": compiles,
    }


def child(args):
    from vllm import LLM

    # No prefix caching: the measured pass prefills as the warm-up did.
    llm = LLM(
        model=args.model, dtype="float32", max_model_len=256, enforce_eager=True, seed=0, enable_prefix_caching=False
    )
    texts = prompts(args.requests)
    engine = llm.llm_engine
    warm_start = time.perf_counter()
    serve(engine, texts, args.new_tokens)
    result = {"warm_up_s": time.perf_counter() - warm_start}
    metrics = None
    if args.platform == "tpu":
        import torch_tpu

        metrics = torch_tpu.metrics
    result.update(serve(engine, texts, args.new_tokens, metrics))
    print("RESULT " + json.dumps(result), flush=True)


def run_platform(platform, model, args, eager_mode=None, capture=True):
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE="1")
    if eager_mode:
        env["TORCH_TPU_VLLM_EAGER_MODE"] = eager_mode
    env["TORCH_TPU_VLLM_CAPTURE_DECODE"] = "1" if capture else "0"
    env.pop("VLLM_TARGET_DEVICE", None)
    if platform == "cpu":
        env["VLLM_TARGET_DEVICE"] = "cpu"
    cmd = [sys.executable, __file__, "--child", platform, "--model", model]
    cmd += ["--requests", str(args.requests), "--new-tokens", str(args.new_tokens)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3000)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{platform} run failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--strict", action="store_true", help="also a tpu row in Strict (no capture)")
    parser.add_argument("--child", choices=["tpu", "cpu"])
    parser.add_argument("--model")
    args = parser.parse_args()
    if args.child:
        args.platform = args.child
        return child(args)
    from vllm_models import make_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny_model("llama", tmp)
        results = {
            "tpu": run_platform("tpu", model, args, "defer_and_fuse"),
            "tpu eager": run_platform("tpu", model, args, "defer_and_fuse", capture=False),
        }
        if args.strict:
            results["tpu strict"] = run_platform("tpu", model, args, "strict", capture=False)
        results["vLLM cpu"] = run_platform("cpu", model, args)
    print(
        f"{args.requests} requests, {args.new_tokens} new tokens each, tiny Llama "
        "(tests/integrations/vllm_models.py), float32"
    )
    print("tpu: decode steps captured per bucket; tpu eager: TORCH_TPU_VLLM_CAPTURE_DECODE=0")
    print("decode step: wall time of engine.step; host: the engine thread's CPU time in it (time.thread_time)")
    header = f"{'':>12} {'tokens/s':>9} {'TTFT med':>9} {'TTFT max':>9} {'decode step':>12} {'host':>8} {'warm-up':>8}"
    print(header)
    for p, r in results.items():
        print(
            f"{p:>12} {r['tokens_per_s']:>9.1f} {r['ttft_median_s']:>8.3f}s {r['ttft_max_s']:>8.3f}s "
            f"{r['decode_step_ms']:>10.1f}ms {r['decode_host_ms']:>6.1f}ms {r['warm_up_s']:>7.1f}s"
        )
    for name, r in results.items():
        if name.startswith("tpu"):
            print(
                f"{name}: {r['programs_per_decode_step']:.2f} programs per decode step, "
                f"{r['compiles_in_decode_steps']} compiles in decode steps when warm"
            )


if __name__ == "__main__":
    main()

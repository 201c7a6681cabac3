"""The copies XLA adds to a training step's programs: `copy` instructions in
each program's optimized HLO, for DeferAndFuse's fused step and for the
compiled step (model and optimizer), on the small transformer encoder and
the example GPT of benchmarks/step_replay.py.

    python benchmarks/program_copies.py [--workloads encoder,gpt] [--steps 3]

A copy moves a whole buffer: XLA inserts one where an output must live in a
buffer still read afterwards, most often a donated storage whose old value
is read after its new value was written, or a donated buffer paired with
another output than its storage's new value (each donated parameter names
its output, so that pairing costs none). Each row runs in a process of its
own with an empty compilation cache (so every program is compiled, and
dumped by XLA_FLAGS=--xla_dump_to), and counts the copies of every program
its steps compiled; the largest program is the step itself for
DeferAndFuse and the backward or the optimizer graph for compiled.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = {"defer_and_fuse": False, "compiled (model and optimizer step)": True}
COPY = re.compile(r"^\s+%\S+ = \S+ copy\(", re.MULTILINE)
INSTRUCTION = re.compile(r"^\s+%\S+ = ", re.MULTILINE)


def run_steps(workload, compiled, steps):
    """In the row's process: `steps` training steps (their programs compile)."""
    import torch

    import torch_tpu

    sys.path.insert(0, HERE)
    import step_replay

    torch.set_float32_matmul_precision("high")
    torch_tpu.set_eager_mode("strict" if compiled else "defer_and_fuse")
    forward, optimizer, batch = {"encoder": step_replay.encoder, "gpt": step_replay.gpt}[workload]("tpu", compiled)
    step_forward = torch.compile(forward) if compiled else forward
    optimizer_step = torch.compile(optimizer.step) if compiled else optimizer.step
    for _ in range(steps):
        x, y = batch()
        loss = step_forward(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer_step()
    loss.item()


def entry_computation(text):
    """The ENTRY computation's text: copies inside fusions are not buffers."""
    start = text.find("\nENTRY ")
    return text[start:] if start >= 0 else ""


def count(dump_dir):
    """(copies, instructions) of each compiled program, largest first."""
    programs = []
    for path in glob.glob(os.path.join(dump_dir, "*cpu_after_optimizations.txt")):
        with open(path) as f:
            entry = entry_computation(f.read())
        programs.append((len(COPY.findall(entry)), len(INSTRUCTION.findall(entry))))
    return sorted(programs, key=lambda p: -p[1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="encoder,gpt")
    p.add_argument("--steps", type=int, default=3, help="steps per row (each compiles what it has not yet)")
    p.add_argument("--row", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.row:
        workload, row = args.row.split(":", 1)
        run_steps(workload, ROWS[row], args.steps)
        return
    for workload in args.workloads.split(","):
        print(f"{workload}: {args.steps} training steps, copies in each compiled program's optimized HLO")
        for row in ROWS:
            with tempfile.TemporaryDirectory() as tmp:
                dump, cache = os.path.join(tmp, "dump"), os.path.join(tmp, "cache")
                env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache)
                env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_dump_to={dump} --xla_dump_hlo_as_text").strip()
                cmd = [sys.executable, __file__, "--row", f"{workload}:{row}", "--steps", str(args.steps)]
                subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
                programs = count(dump)
            copies, instructions = programs[0] if programs else (0, 0)
            print(
                f"  {row:>36}: largest program {copies} copies in {instructions} instructions; "
                f"{sum(c for c, _ in programs)} copies in all {len(programs)} programs"
            )


if __name__ == "__main__":
    main()

"""The compilation cache: memory tier, then serialized executables on disk."""

import os
import subprocess
import sys
import textwrap

from repo_paths import EXAMPLES

PROGRAM = """
    import torch, torch_tpu
    x = torch.arange(64.0).reshape(8, 8).to("tpu")
    y = (x @ x.t()).softmax(-1).sum()
    print("VALUE", round(y.item(), 4))
    s = torch_tpu.cache_stats()
    print("COMPILES", s["compiles"], "DISK_HITS", s["disk"]["hits"], "CORRUPT", s["disk"]["corrupt"])
"""


def run(cache_dir, code=PROGRAM):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir))
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    fields = dict(zip(r.stdout.split()[::2], r.stdout.split()[1::2]))
    return fields, r.stderr


def test_second_process_finds_every_program_on_disk(tmp_path):
    first, _ = run(tmp_path)
    assert int(first["COMPILES"]) > 0 and int(first["DISK_HITS"]) == 0
    second, _ = run(tmp_path)
    assert int(second["COMPILES"]) == 0
    assert int(second["DISK_HITS"]) == int(first["COMPILES"])
    assert second["VALUE"] == first["VALUE"]


def test_corrupt_entry_is_rewritten_with_a_warning(tmp_path):
    first, _ = run(tmp_path)
    entries = sorted(p for p in tmp_path.iterdir() if p.suffix == ".xla")
    assert entries
    entries[0].write_bytes(entries[0].read_bytes()[:100])  # truncate one
    entries[-1].write_bytes(b"garbage")  # and scribble over another
    second, stderr = run(tmp_path)
    assert second["VALUE"] == first["VALUE"]
    assert int(second["CORRUPT"]) == 2 and int(second["COMPILES"]) == 2
    assert "unusable" in stderr
    third, _ = run(tmp_path)  # rewritten: all hits again
    assert int(third["COMPILES"]) == 0 and int(third["CORRUPT"]) == 0


def test_two_processes_on_an_empty_cache_both_succeed(tmp_path):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(PROGRAM)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    values = {dict(zip(o[0].split()[::2], o[0].split()[1::2]))["VALUE"] for o in outs}
    assert len(values) == 1
    third, _ = run(tmp_path)
    assert int(third["COMPILES"]) == 0
    assert not [p for p in tmp_path.iterdir() if ".tmp." in p.name]  # no temporary files left behind


def test_disk_tier_can_be_turned_off(tmp_path):
    out, _ = run("off")
    assert int(out["DISK_HITS"]) == 0
    out2, _ = run("off")
    assert int(out2["COMPILES"]) > 0


def test_size_bound_evicts_least_recently_used_entries(tmp_path):
    code = """
        import torch, torch_tpu
        total = 0.0
        for n in range(1, 9):  # a different shape, so a different program, each time
            total += (torch.ones(n, device="tpu") * 3).sum().item()
        print("VALUE", total)
        s = torch_tpu.cache_stats()
        print("EVICTIONS", s["disk"]["evictions"], "WRITES", s["disk"]["writes"])
    """
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_CACHE_MAX_BYTES="12000")
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    fields = dict(zip(r.stdout.split()[::2], r.stdout.split()[1::2]))
    assert int(fields["EVICTIONS"]) > 0
    total = sum(p.stat().st_size for p in tmp_path.iterdir() if p.suffix == ".xla")
    assert total <= 12000


def test_the_directory_is_scanned_once_not_after_every_write(tmp_path):
    # Each scan stats every entry; a long-used cache holds hundreds of thousands.
    code = """
        import torch, torch_tpu
        for n in range(1, 13):
            (torch.ones(n, device="tpu") * 3).sum().item()
        s = torch_tpu.cache_stats()
        print("WRITES", s["disk"]["writes"], "SCANS", s["disk"]["scans"])
    """
    fields, _ = run(tmp_path, code)
    assert int(fields["WRITES"]) >= 12
    assert int(fields["SCANS"]) == 1


def test_a_full_cache_is_not_rescanned_on_every_write(tmp_path):
    # At its bound, eviction frees a quarter of it: were it to stop just under the bound, every later write
    # would cross it again and rescan the whole directory (a long-used cache holds hundreds of thousands).
    code = """
        import torch, torch_tpu
        for n in range(1, 61):  # a different shape, so a different program, each time
            (torch.ones(n, device="tpu") * 3).sum().item()
        s = torch_tpu.cache_stats()
        print("WRITES", s["disk"]["writes"], "SCANS", s["disk"]["scans"], "EVICTIONS", s["disk"]["evictions"])
    """
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_CACHE_MAX_BYTES="150000")
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    fields = dict(zip(r.stdout.split()[::2], r.stdout.split()[1::2]))
    writes, scans = int(fields["WRITES"]), int(fields["SCANS"])
    assert int(fields["EVICTIONS"]) > 0 and writes >= 60
    total = sum(p.stat().st_size for p in tmp_path.iterdir() if p.suffix == ".xla")
    assert total <= 150000
    # Roughly 25 programs fit; after the first eviction a scan comes every ~6 writes, not after each one.
    assert scans <= writes // 4, fields


def test_gpt_example_second_process_compiles_nothing(tmp_path):
    code = f"""
        import sys
        sys.path.insert(0, {EXAMPLES!r})
        import torch, torch_tpu, train_gpt
        ds = train_gpt.CharDataset()
        cfg = train_gpt.GPTConfig(vocab_size=ds.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16)
        losses = train_gpt.train(cfg, "tpu", 3, seed=0, batch_size=2, dataset=ds)
        s = torch_tpu.cache_stats()
        print("COMPILES", s["compiles"], "DISK_HITS", s["disk"]["hits"], "LOSS", round(losses[-1], 5))
    """
    first, _ = run(tmp_path, code)
    second, _ = run(tmp_path, code)
    assert int(first["COMPILES"]) > 0
    assert int(second["COMPILES"]) == 0 and int(second["DISK_HITS"]) > 0
    assert second["LOSS"] == first["LOSS"]


def test_memory_tier_keeps_a_bounded_number_of_programs_and_reloads_evicted_ones_from_disk(tmp_path):
    code = """
        import os, torch, torch_tpu
        x = torch.arange(6.0).to("tpu")
        outs = [getattr(x, op)().sum().item() for op in ("sin", "cos", "exp", "tanh", "sigmoid", "abs", "neg",
                                                             "sqrt", "log1p", "floor")]
        s = torch_tpu.cache_stats()
        print("ENTRIES", s["memory"]["entries"], "EVICTIONS", s["memory"]["evictions"])
        again = x.sin().sum().item()  # evicted long ago: back from disk, not recompiled
        s2 = torch_tpu.cache_stats()
        print("RECOMPILES", s2["compiles"] - s["compiles"], "DISK_HITS", s2["disk"]["hits"] - s["disk"]["hits"])
        print("SAME", again == outs[0])
    """
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_CACHE_MAX_PROGRAMS="4")
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    fields = dict(zip(r.stdout.split()[::2], r.stdout.split()[1::2]))
    assert fields["ENTRIES"] == "4" and int(fields["EVICTIONS"]) >= 6
    assert fields["RECOMPILES"] == "0" and int(fields["DISK_HITS"]) >= 1
    assert fields["SAME"] == "True"

"""CUDA's memory API on tpu: torch.accelerator's memory calls, torch.tpu's
memory statistics with CUDA's keys, and memory snapshots that PyTorch's
memory_viz tools read (docs/memory.md).

The allocator caches nothing, so each storage is one allocation, one segment
and one active block: allocated, active, requested and reserved bytes move
together, and a storage up to 1 MiB counts in CUDA's "small_pool".
"""

import base64
import json
import os
import pickle
import re
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.cuda import _memory_viz

import torch_tpu

MODES = ["strict", "defer_and_fuse"]
BYTE_STATS = ["allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes"]
COUNT_STATS = ["allocation", "segment", "active"]


@pytest.fixture
def history():
    """Records memory history for one test and stops after it."""
    torch.tpu.memory._record_memory_history(stacks="python", clear_history=True)
    yield
    torch.tpu.memory._record_memory_history(enabled=None)


def _fresh_stats():
    torch.tpu.reset_peak_memory_stats()
    torch.tpu.reset_accumulated_memory_stats()
    return torch.tpu.memory_stats()


def test_every_torch_accelerator_memory_call_works_on_tpu():
    assert torch.accelerator.current_accelerator().type == "tpu"
    x = torch.empty(1000, device="tpu")
    allocated = torch.accelerator.memory_allocated()
    assert allocated == torch.tpu.memory_allocated() >= x.nbytes
    assert torch.accelerator.max_memory_allocated() == torch.tpu.max_memory_allocated() >= allocated
    assert torch.accelerator.memory_reserved() == torch.tpu.memory_reserved() == allocated
    assert torch.accelerator.max_memory_reserved() == torch.tpu.max_memory_reserved()
    assert torch.accelerator.memory_stats() == torch.tpu.memory_stats()
    free, total = torch.accelerator.get_memory_info()
    assert total == torch.tpu.mem_get_info()[1] > 0
    assert 0 <= free <= total
    torch.accelerator.empty_cache()
    torch.accelerator.empty_host_cache()
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == allocated
    torch.accelerator.reset_accumulated_memory_stats()
    assert torch.accelerator.memory_stats()["allocated_bytes.all.allocated"] == 0
    del x
    assert torch.accelerator.memory_allocated() == allocated - 4000


def test_memory_stats_have_the_keys_cuda_reports():
    stats = torch.tpu.memory_stats()
    for stat in BYTE_STATS + COUNT_STATS + ["inactive_split", "inactive_split_bytes"]:
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert isinstance(stats[f"{stat}.{pool}.{field}"], int)
    for key in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "max_split_size"):
        assert isinstance(stats[key], int)
    assert list(stats) == sorted(stats)
    nested = torch.tpu.memory_stats_as_nested_dict()
    assert nested["active_bytes"]["all"]["peak"] == stats["active_bytes.all.peak"]


@pytest.mark.parametrize("mode", MODES)
def test_memory_stats_track_a_known_allocate_free_sequence_exactly(mode):
    with torch_tpu.eager_mode(mode):
        before = _fresh_stats()
        small = torch.empty(1000, device="tpu")  # 4000 bytes: small pool
        large = torch.empty(2**20, device="tpu")  # 4 MiB: large pool
        del small
        tiny = torch.empty(10, dtype=torch.uint8, device="tpu")
        empty = torch.empty(0, device="tpu")  # CUDA counts no empty allocation
        after = torch.tpu.memory_stats()
        pools = {"small_pool": (4000 + 10, 4000, 4000), "large_pool": (2**22, 2**22, 0)}
        pools["all"] = tuple(s + g for s, g in zip(pools["small_pool"], pools["large_pool"]))
        counts = {"small_pool": (2, 1, 1), "large_pool": (1, 1, 0), "all": (3, 2, 1)}  # allocated, peak, freed
        for pool, (allocated, peak, freed) in pools.items():
            for stat in BYTE_STATS:
                key = f"{stat}.{pool}"
                assert after[f"{key}.current"] - before[f"{key}.current"] == allocated - freed, key
                assert after[f"{key}.peak"] - before[f"{key}.current"] == peak, key
                assert (after[f"{key}.allocated"], after[f"{key}.freed"]) == (allocated, freed), key
        for pool, (allocated, peak, freed) in counts.items():
            for stat in COUNT_STATS:
                key = f"{stat}.{pool}"
                assert after[f"{key}.current"] - before[f"{key}.current"] == allocated - freed, key
                assert after[f"{key}.peak"] - before[f"{key}.current"] == peak, key
                assert (after[f"{key}.allocated"], after[f"{key}.freed"]) == (allocated, freed), key
        assert (after["num_device_alloc"], after["num_device_free"]) == (3, 1)
        assert after["inactive_split_bytes.all.current"] == 0
        assert after["num_ooms"] == after["num_alloc_retries"] == 0
        del large, tiny, empty
        assert torch.tpu.memory_allocated() == before["allocated_bytes.all.current"]


def test_a_deferred_result_is_counted_at_the_call_and_stays_so_after_synchronize():
    with torch_tpu.eager_mode("defer_and_fuse"):
        x = torch.arange(256, dtype=torch.float32, device="tpu")
        torch.tpu.synchronize()
        before = _fresh_stats()
        y = x * 2 + 1  # x * 2 is a storage of its own, freed at once
        pending = torch.tpu.memory_stats()
        torch.tpu.synchronize()
        after = torch.tpu.memory_stats()
    assert pending == after
    assert after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] == y.nbytes
    assert after["allocated_bytes.all.peak"] - before["allocated_bytes.all.current"] == 2 * y.nbytes
    assert (after["allocation.all.allocated"], after["allocation.all.freed"]) == (2, 1)
    torch.testing.assert_close(y.cpu(), torch.arange(256, dtype=torch.float32) * 2 + 1)


def test_a_compiled_graph_counts_its_outputs_and_no_intermediates():
    f = torch.compile(lambda x: (x * 2).sin() + 1, backend="tpu")
    x = torch.arange(256, dtype=torch.float32, device="tpu")
    f(x)  # compiles
    torch.tpu.synchronize()
    before = _fresh_stats()
    y = f(x)
    torch.tpu.synchronize()
    after = torch.tpu.memory_stats()
    assert after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] == y.nbytes
    assert after["allocated_bytes.all.peak"] - before["allocated_bytes.all.current"] == y.nbytes
    assert (after["allocation.all.allocated"], after["allocation.all.freed"]) == (1, 0)
    torch.testing.assert_close(y.cpu(), (torch.arange(256, dtype=torch.float32) * 2).sin() + 1)


def test_reset_peak_memory_stats_restarts_peaks_from_what_is_allocated_now():
    base = torch.tpu.memory_allocated()
    big = torch.empty(2**18, device="tpu")
    del big
    assert torch.tpu.max_memory_allocated() >= base + 2**20
    torch.tpu.reset_peak_memory_stats()
    stats = torch.tpu.memory_stats()
    for stat in BYTE_STATS + COUNT_STATS:
        assert stats[f"{stat}.all.peak"] == stats[f"{stat}.all.current"], stat
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated() == base
    kept = torch.empty(100, device="tpu")
    assert torch.tpu.max_memory_allocated() == base + kept.nbytes


def test_total_memory_is_mem_get_info_total_and_not_zero():
    props = torch.tpu.get_device_properties(0)
    free, total = torch.tpu.mem_get_info(0)
    assert props.total_memory == total > 0
    assert 0 <= free <= total
    assert f"total_memory={total}" in repr(props)


def test_stats_of_a_device_that_does_not_exist_raise_as_cuda():
    n = torch.tpu.device_count()
    with pytest.raises(RuntimeError, match=f"Invalid device argument {n}"):
        torch.tpu.memory_stats(n)
    with pytest.raises(RuntimeError, match=f"Invalid device argument {n}"):
        torch.accelerator.memory_allocated(n)
    with pytest.raises(RuntimeError, match=f"Invalid device argument {n}"):
        torch.tpu.reset_peak_memory_stats(n)


@pytest.mark.parametrize("mode", MODES)
def test_out_of_memory_raises_and_counts_num_ooms(mode, history):
    with torch_tpu.eager_mode(mode):
        before = _fresh_stats()
        with pytest.raises(torch.OutOfMemoryError, match="tpu out of memory"):
            torch.empty(10**12, device="tpu")
        after = torch.tpu.memory_stats()
    assert after["num_ooms"] == 1
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert after["allocation.all.allocated"] == 0
    ooms = [e for e in torch.tpu.memory._snapshot()["device_traces"][0] if e["action"] == "oom"]
    assert [e["size"] for e in ooms] == [4 * 10**12]
    assert ooms[0]["frames"][0]["name"] == "test_out_of_memory_raises_and_counts_num_ooms"
    assert 0 <= ooms[0]["device_free"] <= torch.tpu.mem_get_info()[1]
    assert "raise OutOfMemoryError # 3.6TiB requested" in _memory_viz.trace(torch.tpu.memory._snapshot())


def allocate_for_the_snapshot_test():
    return torch.ones(300_000, device="tpu")


def _snapshot_in_html(html):
    """The snapshot memory_viz's HTML carries (base64 of its pickle)."""
    encoded = json.loads(re.search(r"const local_files = (\[.*?\])\n", html).group(1))[0]["base64"]
    return pickle.loads(base64.b64decode(encoded))


def test_a_snapshot_round_trips_through_memory_viz(history):
    kept = allocate_for_the_snapshot_test()
    freed = torch.empty(10, device="tpu")
    address = freed.untyped_storage().data_ptr()
    del freed
    snapshot = torch.tpu.memory._snapshot()

    (segment,) = [s for s in snapshot["segments"] if s["address"] == kept.untyped_storage().data_ptr()]
    assert segment["total_size"] == segment["allocated_size"] == kept.nbytes
    assert segment["segment_type"] == "large"
    (block,) = segment["blocks"]
    assert block["state"] == "active_allocated"
    assert block["size"] == block["requested_size"] == kept.nbytes
    assert block["frames"][0]["name"] == "allocate_for_the_snapshot_test"
    assert block["frames"][0]["filename"] == __file__

    actions = [(e["action"], e["size"]) for e in snapshot["device_traces"][0] if e["addr"] == address]
    assert actions == [(a, 40) for a in ("segment_alloc", "alloc", "free_requested", "free_completed", "segment_free")]
    assert snapshot["device_traces"][0][-1]["action"] == "snapshot"

    flamegraph = _memory_viz.memory(snapshot, format_flamegraph=lambda lines: lines)
    assert f"allocate_for_the_snapshot_test {kept.nbytes}" in flamegraph
    assert "total_reserved" in _memory_viz.segsum(snapshot)
    assert "= cudaMalloc(" in _memory_viz.trace(snapshot)
    assert _snapshot_in_html(_memory_viz.segment_plot(snapshot)) == snapshot
    assert _snapshot_in_html(_memory_viz.trace_plot(snapshot)) == snapshot


def test_a_dumped_snapshot_is_the_pickle_memory_viz_reads(tmp_path, history):
    kept = allocate_for_the_snapshot_test()
    path = tmp_path / "snapshot.pickle"
    torch.tpu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    assert any(s["address"] == kept.untyped_storage().data_ptr() for s in snapshot["segments"])


def test_recording_stopped_keeps_no_events_and_no_stacks(history):
    torch.tpu.memory._record_memory_history(enabled=None)
    kept = torch.empty(10, device="tpu")
    snapshot = torch.tpu.memory._snapshot()
    assert all(trace == [] for trace in snapshot["device_traces"])
    (segment,) = [s for s in snapshot["segments"] if s["address"] == kept.untyped_storage().data_ptr()]
    assert segment["blocks"][0]["frames"] == []


def test_state_history_keeps_stacks_of_live_storages_and_no_events():
    torch.tpu.memory._record_memory_history(enabled="state", stacks="python")
    try:
        kept = allocate_for_the_snapshot_test()
        snapshot = torch.tpu.memory._snapshot()
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)
    assert all(trace == [] for trace in snapshot["device_traces"])
    (segment,) = [s for s in snapshot["segments"] if s["address"] == kept.untyped_storage().data_ptr()]
    assert segment["blocks"][0]["frames"][0]["name"] == "allocate_for_the_snapshot_test"


def test_record_memory_history_checks_its_arguments_as_cuda():
    with pytest.raises(RuntimeError, match="expected state to be 'state', 'all', or None"):
        torch.tpu.memory._record_memory_history(enabled="some")
    with pytest.raises(RuntimeError, match="expected context to be"):
        torch.tpu.memory._record_memory_history(context="some")
    with pytest.raises(RuntimeError, match="expected stacks to be 'python', or 'all'"):
        torch.tpu.memory._record_memory_history(stacks="cpp")


def test_memory_summary_shows_the_stats():
    x = torch.empty(2**20, device="tpu")
    summary = torch.tpu.memory_summary()
    assert "PyTorch tpu memory summary, device ID 0" in summary
    assert re.search(r"Allocated memory\s+\|\s+\d+ [KMG]iB", summary)
    assert "from small pool" not in torch.tpu.memory_summary(abbreviated=True)
    del x


def test_torch_tpu_memory_is_a_module_as_torch_cuda_memory():
    import torch.tpu.memory
    from torch.tpu.memory import _snapshot

    assert torch.tpu.memory is torch_tpu.memory
    assert _snapshot is torch_tpu.memory._snapshot


def test_each_device_counts_its_own_storages():
    code = """
        import torch, torch_tpu
        from torch.cuda import _memory_viz
        torch.tpu.memory._record_memory_history(stacks="python")
        before = [torch.tpu.memory_allocated(i) for i in range(2)]
        x = torch.empty(1000, device="tpu:1")
        assert torch.tpu.memory_allocated(1) - before[1] == 4000, torch.tpu.memory_stats(1)
        assert torch.tpu.memory_allocated(0) == before[0]
        assert torch.accelerator.memory_allocated(1) == torch.tpu.memory_allocated(1)
        snapshot = torch.tpu.memory._snapshot()
        (segment,) = [s for s in snapshot["segments"] if s["address"] == x.untyped_storage().data_ptr()]
        assert segment["device"] == 1
        assert len(snapshot["device_traces"]) == 2
        assert [e["action"] for e in snapshot["device_traces"][1]] == ["segment_alloc", "alloc"]
        assert "Device 1" in _memory_viz.trace(snapshot)
        print("ok")
    """
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="2")
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_recording_history_while_threads_allocate_and_free_keeps_an_exact_account():
    # Stacks take the GIL at allocations made with it released (as CUDA's
    # do); threads doing so at once in both modes must neither hang nor
    # miscount. A child process, so that a hang is killed by the timeout.
    code = """
        import threading, torch, torch_tpu
        torch.tpu.memory._record_memory_history(stacks="python")
        before = torch.tpu.memory_stats()
        def work(mode):
            with torch_tpu.eager_mode(mode):
                x = torch.ones(64, device="tpu")
                for _ in range(200):
                    x = (x * 1.5 + 1).sin()
                torch.tpu.synchronize()
        threads = [threading.Thread(target=work, args=(m,)) for m in ("strict", "defer_and_fuse") * 2]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = torch.tpu.memory_stats()
        assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"], (before, after)
        allocations = after["allocation.all.allocated"] - before["allocation.all.allocated"]
        events = torch.tpu.memory._snapshot()["device_traces"][0]
        assert sum(e["action"] == "alloc" for e in events) == allocations
        assert sum(e["action"] == "free_completed" for e in events) == allocations
        with_stacks = [e for e in events if e["action"] == "alloc" and e["frames"]]
        assert any(f["name"] == "work" for e in with_stacks for f in e["frames"])
        print("ok", allocations)
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_empty_cache_hands_freed_buffers_pages_back_to_the_system():
    code = """
        import os, torch, torch_tpu

        def resident():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

        def written(n):  # n 1 MiB tensors whose pages are resident
            kept = [torch.full((256 * 1024,), 2.0, device="tpu") for _ in range(n)]
            torch_tpu.synchronize()
            return kept

        written(40)  # compiles its program, and grows the heaps once
        torch.tpu.empty_cache()
        base = resident()
        kept = written(40)
        assert resident() - base > 30 * 2**20
        del kept
        torch_tpu.synchronize()
        kept_by_malloc = resident() - base
        torch.tpu.empty_cache()
        print("RESULT", kept_by_malloc >> 20, (resident() - base) >> 20)
    """
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    kept_mib, after_mib = (int(v) for v in r.stdout.split("RESULT")[-1].split())
    assert kept_mib > 30  # glibc keeps the dead buffers' pages (fixed thresholds on the CPU plugin)
    assert after_mib < 10, (kept_mib, after_mib)

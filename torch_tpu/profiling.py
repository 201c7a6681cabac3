"""Names for the XLA:CPU plugin's compiled kernels in Linux `perf`.

XLA:CPU compiles every fusion of a program to machine code in memory, so a
`perf` profile of a tpu training loop on the CPU plugin shows most of its
time as bare `[JIT]` addresses. `write_perf_map()` writes the kernels' names
(`wrapped_reduce-window.1`, `add_multiply_fusion.3`, ...) and address ranges
to `/tmp/perf-<pid>.map`, the file `perf report` reads for JIT code:

    TORCH_TPU_CACHE_DIR=off python train.py   # calls write_perf_map() after warm-up
    perf record -g -p <pid> -- sleep 10; perf report --sort sym

The plugin registers each object file it loads with LLVM's GDB JIT interface
(`__jit_debug_descriptor`, a list of in-memory ELF files whose sections carry
their load addresses); this reads that list. Only kernels compiled in this
process are listed: programs loaded from the persistent compilation cache are
not registered, hence `TORCH_TPU_CACHE_DIR=off` while profiling. oneDNN's own
JIT kernels (the dots' sgemm) are named by `DNNL_JIT_PROFILE=2`, which
appends to the same file.
"""

import mmap
import os
import struct

import torch_tpu

_SHT_SYMTAB = 2
_STT_FUNC = 2


def _sections(blob):
    """(name offset, type, address, offset, size, link) of each ELF64 section."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise RuntimeError("not a little-endian ELF64 file")
    (shoff,) = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", blob, 0x3A)
    out = []
    for i in range(shnum):
        name, kind, _flags, addr, offset, size, link = struct.unpack_from("<IIQQQQI", blob, shoff + i * shentsize)
        out.append((name, kind, addr, offset, size, link))
    return out


def _symbols(blob, want=None):
    """Yields (name, address, size, type) of the symbols in `blob`'s symbol
    tables, addresses resolved against their sections' addresses when the
    file is relocatable; with `want`, only that name."""
    sections = _sections(blob)
    relocatable = struct.unpack_from("<H", blob, 0x10)[0] == 1  # ET_REL
    want_bytes = want.encode() if want else None
    for _name, kind, _addr, offset, size, link in sections:
        if kind != _SHT_SYMTAB:
            continue
        strtab = sections[link][3]
        for j in range(size // 24):
            st_name, st_info, _other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", blob, offset + j * 24)
            start = strtab + st_name
            if want_bytes is not None:
                if blob[start : start + len(want_bytes) + 1] != want_bytes + b"\0":
                    continue
            end = blob.find(b"\0", start)
            address = st_value
            if relocatable and 0 < st_shndx < len(sections):
                address += sections[st_shndx][2]
            yield blob[start:end].decode(errors="replace"), address, st_size, st_info & 0xF


def _mapping_base(path):
    """The address the plugin's file offset 0 is mapped at in this process."""
    real = os.path.realpath(path)
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            # The loader's private mapping (perms end in "p"), not a reader's own mmap of the file.
            if len(fields) >= 6 and fields[5] == real and int(fields[2], 16) == 0 and fields[1].endswith("p"):
                return int(fields[0].split("-")[0], 16)
    raise RuntimeError(f"{real} is not mapped in this process")


def _descriptor_address(path):
    base = _mapping_base(path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as blob:
        for _name, address, _size, _kind in _symbols(blob, "__jit_debug_descriptor"):
            return base + address
    raise RuntimeError(f"{path} has no __jit_debug_descriptor symbol: its JIT kernels cannot be named")


def jit_kernels():
    """[(address, size, name)] of the kernels the plugin compiled in this process."""
    descriptor = _descriptor_address(torch_tpu.plugin_info()["path"])
    kernels = []
    # Reads go through /proc/self/mem: an entry whose object the plugin freed
    # without unregistering it reads as an error there, not a crash.
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:

        def read(address, size):
            data = os.pread(fd, size, address)
            if len(data) != size:
                raise OSError("short read")
            return data

        # struct jit_descriptor { uint32 version, action; entry* relevant, *first; }
        _version, _action, _relevant, entry = struct.unpack("<IIQQ", read(descriptor, 24))
        seen = set()
        while entry and entry not in seen:
            seen.add(entry)
            try:
                # struct jit_code_entry { entry* next, *prev; const char* file; uint64 size; }
                next_entry, _prev, file_address, file_size = struct.unpack("<QQQQ", read(entry, 32))
                blob = read(file_address, file_size)
                for name, address, size, kind in _symbols(blob):
                    if kind == _STT_FUNC and size > 0 and address > 0:
                        kernels.append((address, size, name))
            except (OSError, RuntimeError, struct.error):
                break  # a freed entry: the list past it is not trustworthy
            entry = next_entry
    finally:
        os.close(fd)
    return kernels


def write_perf_map(path=None):
    """Appends the plugin's compiled kernels to `path` (default
    /tmp/perf-<pid>.map, where `perf report` looks) and returns how many."""
    kernels = jit_kernels()
    path = path or f"/tmp/perf-{os.getpid()}.map"
    with open(path, "a") as f:
        for address, size, name in kernels:
            f.write(f"{address:x} {size:x} {name}\n")
    return len(kernels)

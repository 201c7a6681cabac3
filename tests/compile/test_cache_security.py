"""The compilation cache's disk tier holds native code the process runs: it
loads only entries signed with the user's own key, from a directory only the
user owns and can write, never follows a link or opens a FIFO as an entry,
and evicts only files it wrote itself (docs/threat_model.md).

Each test runs the victim in a fresh process, as a user would meet the cache.
"""

import os
import stat
import struct
import subprocess
import sys
import textwrap

import pytest

# a + b and a - b, each its own one-op program (Strict eager), then read back.
SUM_AND_DIFFERENCE = """
    import torch, torch_tpu
    a = torch.tensor([5.0, 7.0]).to("tpu")
    b = torch.tensor([2.0, 3.0]).to("tpu")
    print("SUM", (a + b).cpu().tolist())
    print("DIFFERENCE", (a - b).cpu().tolist())
"""
SUM = """
    import torch, torch_tpu
    a = torch.tensor([5.0, 7.0]).to("tpu")
    b = torch.tensor([2.0, 3.0]).to("tpu")
    print("SUM", (a + b).cpu().tolist())
    s = torch_tpu.cache_stats()
    print("COMPILES", s["compiles"], "DISK_HITS", s["disk"]["hits"], "CORRUPT", s["disk"]["corrupt"])
    print("DIRECTORY", repr(s["disk"]["directory"]))
"""


def run(cache_dir, key_file, code=SUM, timeout=300):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir), TORCH_TPU_CACHE_KEY_FILE=str(key_file))
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=timeout
    )
    assert r.returncode == 0, r.stderr
    fields = {}
    for line in r.stdout.splitlines():
        name, _, value = line.partition(" ")
        fields[name] = value
    return fields, r.stderr


def stats(fields):
    words = fields["COMPILES"].split()
    return {"compiles": int(words[0]), "disk_hits": int(words[2]), "corrupt": int(words[4])}


# ---- an entry's file, as an attacker who can write the directory reads it -------
def parse_entry(data):
    """magic, identity, payload and the integrity tail of an entry file: the
    format is public (csrc/runtime/compile_cache.cpp); only the key is not."""
    magic_end = data.index(b"\n") + 1
    pos = magic_end
    (identity_size,) = struct.unpack_from("<Q", data, pos)
    identity = data[pos + 8 : pos + 8 + identity_size]
    pos += 8 + identity_size
    (payload_size,) = struct.unpack_from("<Q", data, pos)
    payload = data[pos + 8 : pos + 8 + payload_size]
    return data[:magic_end], identity, payload, data[pos + 8 + payload_size :]


def fnv1a_64(data):
    h = 1469598103934665603
    for byte in data:
        h = ((h ^ byte) * 1099511628211) % 2**64
    return h


def forge(victim, donor):
    """`victim`'s identity with `donor`'s payload, with every integrity field
    recomputed that can be without the key: an unkeyed checksum (the version 1
    format's) is recomputed; a keyed tag cannot be, so the donor's own valid
    tag is the best the attacker has."""
    magic, identity, _, _ = parse_entry(victim)
    _, _, payload, donor_tail = parse_entry(donor)
    tail = struct.pack("<Q", fnv1a_64(payload)) if magic.endswith(b"_V1\n") else donor_tail
    return magic + struct.pack("<Q", len(identity)) + identity + struct.pack("<Q", len(payload)) + payload + tail


def entries(cache_dir):
    return sorted(p for p in cache_dir.iterdir() if p.suffix == ".xla")


def entry_of(cache_dir, op):
    """The one entry whose program holds `op` (a StableHLO op name)."""
    found = [p for p in entries(cache_dir) if op.encode() in parse_entry(p.read_bytes())[1]]
    assert len(found) == 1, (op, found)
    return found[0]


def test_an_entry_forged_with_another_programs_payload_is_rejected_and_recompiled(tmp_path):
    cache, key = tmp_path / "cache", tmp_path / "key"
    first, _ = run(cache, key, SUM_AND_DIFFERENCE)
    assert first["SUM"] == "[7.0, 10.0]" and first["DIFFERENCE"] == "[3.0, 4.0]"
    add, subtract = entry_of(cache, '"stablehlo.add"'), entry_of(cache, '"stablehlo.subtract"')
    add.write_bytes(forge(add.read_bytes(), subtract.read_bytes()))

    victim, stderr = run(cache, key)
    assert victim["SUM"] == "[7.0, 10.0]"  # a + b, not the planted a - b
    assert stats(victim)["corrupt"] == 1 and stats(victim)["compiles"] == 1
    assert "is unusable (not signed with this user's cache key" in stderr

    again, stderr = run(cache, key)  # the forged entry was overwritten with a good one
    assert again["SUM"] == "[7.0, 10.0]"
    assert stats(again) == {"compiles": 0, "disk_hits": 1, "corrupt": 0}
    assert "unusable" not in stderr


def test_an_entry_signed_with_another_users_key_is_rejected(tmp_path):
    cache = tmp_path / "cache"
    run(cache, tmp_path / "someone_elses_key")
    ours, stderr = run(cache, tmp_path / "our_key")
    assert ours["SUM"] == "[7.0, 10.0]"
    assert stats(ours)["disk_hits"] == 0 and stats(ours)["corrupt"] == stats(ours)["compiles"] > 0
    assert "not signed with this user's cache key" in stderr


def test_a_fifo_at_an_entry_path_does_not_hang_the_program(tmp_path):
    cache, key = tmp_path / "cache", tmp_path / "key"
    run(cache, key)
    add = entry_of(cache, '"stablehlo.add"')
    add.unlink()
    os.mkfifo(add)  # no writer ever opens it: reading it would wait forever
    out, stderr = run(cache, key, timeout=120)
    assert out["SUM"] == "[7.0, 10.0]"
    assert stats(out)["corrupt"] == 1 and stats(out)["compiles"] == 1
    assert "is unusable (not a regular file)" in stderr
    assert stat.S_ISREG(add.lstat().st_mode)  # rewritten in its place


def test_a_symlinked_entry_is_not_followed(tmp_path):
    cache, key = tmp_path / "cache", tmp_path / "key"
    run(cache, key)
    add = entry_of(cache, '"stablehlo.add"')
    # A valid entry elsewhere: followed, it would load without complaint.
    elsewhere = tmp_path / "elsewhere.xla"
    elsewhere.write_bytes(add.read_bytes())
    add.unlink()
    add.symlink_to(elsewhere)
    out, stderr = run(cache, key)
    assert out["SUM"] == "[7.0, 10.0]"
    assert stats(out)["corrupt"] == 1 and stats(out)["compiles"] == 1
    assert "is unusable (a symbolic link, not followed)" in stderr
    assert not add.is_symlink()  # replaced by a regular entry


def test_an_entry_larger_than_any_executable_is_refused_unread(tmp_path):
    cache, key = tmp_path / "cache", tmp_path / "key"
    run(cache, key)
    add = entry_of(cache, '"stablehlo.add"')
    os.truncate(add, 2 << 30)  # 2 GiB, sparse: reading it whole would take 2 GiB of memory
    out, stderr = run(cache, key)
    assert out["SUM"] == "[7.0, 10.0]"
    assert stats(out)["corrupt"] == 1
    assert "is unusable (larger than any entry" in stderr


# ---- the directory -------------------------------------------------------------------
def test_new_directories_are_private_and_entries_and_key_are_0600(tmp_path):
    cache, key = tmp_path / "new" / "cache", tmp_path / "config" / "torch_tpu" / "cache_key"
    code = "import os; os.umask(0o022)\n" + textwrap.dedent(SUM)
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache), XDG_CONFIG_HOME=str(tmp_path / "config"))
    env.pop("TORCH_TPU_CACHE_KEY_FILE", None)  # the default place, under XDG_CONFIG_HOME
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    for directory in (tmp_path / "new", cache, tmp_path / "config", key.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert entries(cache)
    for path in [*entries(cache), key]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert key.stat().st_size == 32


def test_a_cache_directory_other_users_can_write_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    out, stderr = run(cache, tmp_path / "key")
    assert out["SUM"] == "[7.0, 10.0]" and out["DIRECTORY"] == "''"  # the memory tier serves
    assert "compilation cache directory (other users can write to it: mode 0777); disk tier off" in stderr
    assert not list(cache.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user takes root")
def test_a_cache_directory_owned_by_another_user_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    os.chown(cache, 65534, 65534)  # nobody
    out, stderr = run(cache, tmp_path / "key")
    assert out["SUM"] == "[7.0, 10.0]" and out["DIRECTORY"] == "''"
    assert "compilation cache directory (it is owned by another user (uid 65534)); disk tier off" in stderr
    assert not list(cache.iterdir())


def test_eviction_removes_only_files_the_cache_wrote(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    # A user's files, oldest of all: least recently used, were they entries.
    own = {
        "my_model.mlir": b"module {}",
        "notes.xla": b"mine",
        "0123456789abcdef0123456789abcdef.xla": b"named like a version 1 entry",
        "tt-my_model.mlir": b"our prefix, not our name",
    }
    for name, data in own.items():
        (cache / name).write_bytes(data)
        os.utime(cache / name, (0, 0))
    code = """
        import torch, torch_tpu
        for n in range(1, 9):  # a different shape, so a different program, each time
            (torch.ones(n, device="tpu") * 3).sum().item()
        print("EVICTIONS", torch_tpu.cache_stats()["disk"]["evictions"])
    """
    env = dict(
        os.environ,
        TORCH_TPU_CACHE_DIR=str(cache),
        TORCH_TPU_CACHE_KEY_FILE=str(tmp_path / "key"),
        TORCH_TPU_CACHE_MAX_BYTES="12000",
    )
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[1]) > 0
    for name, data in own.items():
        assert (cache / name).read_bytes() == data, name
    assert sum(p.stat().st_size for p in cache.iterdir() if p.name.startswith("tt-") and p.name not in own) <= 12000


# ---- the key -------------------------------------------------------------------------
def _refused_key(tmp_path, key, why):
    cache = tmp_path / "cache"
    out, stderr = run(cache, key)
    assert out["SUM"] == "[7.0, 10.0]" and out["DIRECTORY"] == "''"  # the memory tier serves
    assert f"cannot use {key} as the compilation cache's key ({why}); disk tier off" in stderr
    assert not list(cache.iterdir())


def test_a_key_file_other_users_can_read_is_refused(tmp_path):
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    _refused_key(tmp_path, key, "its mode is 0644, not 0600: other users can read or change it")
    assert key.stat().st_mode & 0o777 == 0o644  # left as it was


def test_a_symlinked_key_file_is_refused(tmp_path):
    target = tmp_path / "real_key"
    target.write_bytes(os.urandom(32))
    target.chmod(0o600)
    key = tmp_path / "key"
    key.symlink_to(target)
    _refused_key(tmp_path, key, "it is a symbolic link")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_key_file_owned_by_another_user_is_refused(tmp_path):
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    os.chown(key, 65534, 65534)  # nobody: who chose this key?
    _refused_key(tmp_path, key, "it is owned by another user (uid 65534)")


def test_processes_creating_the_key_at_once_agree_on_it(tmp_path):
    # Whether their creations overlap depends on timing here; the race itself
    # is repeated in tests/cpp/cache_key_test.cpp (threads, 20 rounds).
    cache, key = tmp_path / "cache", tmp_path / "config" / "cache_key"
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache), TORCH_TPU_CACHE_KEY_FILE=str(key))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(SUM)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    # Every entry any of them wrote is signed with the one key now on disk.
    out, stderr = run(cache, key)
    assert stats(out)["compiles"] == 0 and stats(out)["corrupt"] == 0 and stats(out)["disk_hits"] > 0
    assert "unusable" not in stderr
    assert [p.name for p in key.parent.iterdir()] == ["cache_key"]  # no temporary left behind

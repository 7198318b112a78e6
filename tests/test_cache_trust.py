"""The persistent cache runs only what graphjit wrote (graphjit/cache/trust.py's threat model).

Each test writes a real entry (a compiled call with the cache on), drops the compiled state
(``graphjit.reset()``), attacks the directory as someone who can write it but does not hold
the key (a planted, overwritten, truncated, symlinked or foreign entry carrying an
``os.system`` payload; a directory made group/world-writable; a key file others can read),
and calls again: nothing of the attacker's runs (the payload would create a marker file),
the result is eager's, and exactly one warning names each file or directory.
"""

from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import pickle
import shutil
import stat
import struct
import warnings
import zlib

import pytest
import torch

import graphjit
from graphjit import cache
from graphjit.cache import portable, store, trust

pytestmark = pytest.mark.uncached("manages the persistent cache itself")


def program(x):
    return torch.sin(x) * 2 + 1


@pytest.fixture
def on(tmp_path, monkeypatch):
    """The cache on in ``tmp_path/cache`` with the key ``tmp_path/key``."""
    monkeypatch.setattr(graphjit.config, "cache_dir", str(tmp_path / "cache"))
    monkeypatch.setattr(graphjit.config, "cache_key_file", str(tmp_path / "key"))
    monkeypatch.setattr(graphjit.config, "cache_trusted", ())
    trust.forget()
    store._warned.clear()
    trust._warned.clear()
    yield tmp_path
    trust.forget()


class Payload:
    """What an attacker writes: unpickling it runs ``os.system``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _evil(tmp_path) -> bytes:
    return pickle.dumps(Payload(tmp_path / "PWNED"))


def _entry_files(tmp_path) -> list[str]:
    return sorted(glob.glob(str(tmp_path / "cache" / "v2" / "*" / "*" / "*.entry")))


def _cold(tmp_path) -> None:
    graphjit.reset()
    x = torch.randn(5)
    torch.testing.assert_close(graphjit.compile(program, backend="eager")(x), program(x))
    assert graphjit.stats()["cache_writes"] == 1
    assert len(_entry_files(tmp_path)) == 1


def _warm(tmp_path) -> tuple[list[str], dict]:
    """Call a fresh compile of ``program``; the warnings and stats."""
    graphjit.reset()
    x = torch.randn(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = graphjit.compile(program, backend="eager")
        torch.testing.assert_close(compiled(x), program(x))
        torch.testing.assert_close(compiled(x + 1), program(x + 1))
    assert not (tmp_path / "PWNED").exists(), "the planted payload ran"
    return [str(w.message) for w in caught if "graphjit cache" in str(w.message)], graphjit.stats()


def _forge(header: dict, payload: bytes, tag: bytes = b"\0" * 32) -> bytes:
    """An entry file as someone without the key makes it: a real header with the digest of
    their payload, and a MAC they had to guess."""
    payload = zlib.compress(payload)
    head = json.dumps(dict(header, payload_sha256=hashlib.sha256(payload).hexdigest()), sort_keys=True).encode()
    return store.MAGIC + tag + struct.pack(">I", len(head)) + head + payload


def _header_of(path: str) -> dict:
    data = open(path, "rb").read()
    body = data[len(store.MAGIC) + 32:]
    (n,) = struct.unpack(">I", body[:4])
    return json.loads(body[4:4 + n])


def test_directories_and_files_are_private(on):
    _cold(on)
    (path,) = _entry_files(on)
    for d in (on / "cache", on / "cache" / "v2", os.path.dirname(os.path.dirname(path)), os.path.dirname(path)):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(on / "key").st_mode) == 0o600
    warned, stats = _warm(on)
    assert warned == [] and stats["cache_hits"] == 1 and stats["frames_total"] == 0


def test_planted_entry_does_not_run(on):
    _cold(on)
    (real,) = _entry_files(on)
    planted = os.path.join(os.path.dirname(real), "0" * 32 + ".entry")
    with open(planted, "wb") as f:
        f.write(_forge(_header_of(real), _evil(on)))
    os.utime(planted, (0, 0))  # (read first: the oldest)
    warned, stats = _warm(on)
    assert len(warned) == 1 and planted in warned[0] and "HMAC" in warned[0], warned
    assert stats["cache_hits"] == 1  # the real entry still serves


@pytest.mark.parametrize("attack", ["overwritten", "truncated", "flipped"])
def test_altered_entry_does_not_run(on, attack):
    _cold(on)
    (real,) = _entry_files(on)
    data = open(real, "rb").read()
    if attack == "overwritten":  # the real header and MAC, the attacker's payload
        header = _header_of(real)
        data = _forge(header, _evil(on), tag=data[len(store.MAGIC):len(store.MAGIC) + 32])
    elif attack == "truncated":
        data = data[: len(data) // 2]
    else:
        data = data[:-10] + bytes([data[-10] ^ 1]) + data[-9:]
    with open(real, "wb") as f:
        f.write(data)
    warned, stats = _warm(on)
    assert len(warned) == 1 and real in warned[0], warned
    assert stats["cache_hits"] == 0 and stats["frames_total"] == 1  # traced again


def test_symlinked_entry_is_not_followed(on, tmp_path):
    _cold(on)
    (real,) = _entry_files(on)
    elsewhere = tmp_path / "elsewhere.entry"
    shutil.move(real, elsewhere)  # a valid entry, reached through a link
    os.symlink(elsewhere, real)
    warned, stats = _warm(on)
    assert len(warned) == 1 and "symbolic link" in warned[0], warned
    assert stats["cache_hits"] == 0


def test_symlinked_entry_directory_is_refused(on, tmp_path):
    _cold(on)
    (real,) = _entry_files(on)
    key_dir = os.path.dirname(real)
    shutil.move(key_dir, tmp_path / "moved")
    os.symlink(tmp_path / "moved", key_dir)
    warned, stats = _warm(on)
    assert len(warned) == 1 and "symbolic link" in warned[0], warned
    assert stats["cache_hits"] == 0


def test_entry_written_with_another_key_is_foreign(on, monkeypatch):
    _cold(on)
    monkeypatch.setattr(graphjit.config, "cache_key_file", str(on / "other-key"))
    trust.forget()
    warned, stats = _warm(on)
    assert len(warned) == 1 and "HMAC" in warned[0], warned
    assert stats["cache_hits"] == 0


def test_key_holder_cannot_name_arbitrary_callables(on):
    """Defence in depth: even a correctly signed entry's pickle may name only graphjit's
    loaders and data classes (``find_class``), never ``os.system``."""
    _cold(on)
    (real,) = _entry_files(on)
    header = _header_of(real)
    key = trust.secret_key()
    forged = _forge(header, _evil(on))
    body = forged[len(store.MAGIC) + 32:]
    with open(real, "wb") as f:
        f.write(store.MAGIC + trust.mac(key, store.MAGIC, body) + body)
    warned, stats = _warm(on)
    assert len(warned) == 1 and "does not name" in warned[0], warned
    assert stats["cache_hits"] == 0


@pytest.mark.parametrize("name", ["posix.system", "os.system", "builtins.eval", "builtins.exec", "builtins.getattr",
                                  "builtins.__import__", "subprocess.Popen", "torch.load", "pickle.loads",
                                  "importlib.import_module", "torch.storage._load_from_bytes"])
def test_restricted_unpickler_refuses_globals(name, tmp_path):
    module, attr = name.rsplit(".", 1)
    data = b"\x80\x04\x8c" + bytes([len(module)]) + module.encode() + b"\x8c" + bytes([len(attr)]) + attr.encode() + \
        b"\x93\x8c\x04echo\x85R."
    with pytest.raises(pickle.UnpicklingError, match="does not name"):
        portable.loads(data)


def test_restricted_unpickler_reads_what_the_pickler_writes():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)[:, 1:]
    value = {"t": t, "dtype": torch.float16, "size": torch.Size([2, 3]), "dev": torch.device("cpu"),
             "s": {1, 2}, "f": frozenset({3}), "sl": slice(1, 2), "c": 1 + 2j, "fn": torch.sin,
             "cls": torch.nn.Linear, "op": torch.ops.aten.add.Tensor, "e": ..., "layout": torch.strided}
    back = portable.loads(portable.dumps(value))
    assert torch.equal(back["t"], t) and back["t"].stride() == t.stride()
    assert {k: v for k, v in back.items() if k != "t"} == {k: v for k, v in value.items() if k != "t"}


def test_objects_with_identity_are_never_copied():
    """The class behind seed 003's ``random`` case: an object the entry holds by identity
    (a generator, a list, a user object) is named or refused, never written by content."""
    import random

    code = compile("x", "<t>", "eval").replace(co_consts=(random._inst,))
    back = portable.loads(portable.dumps(code))
    assert back.co_consts[0] is random._inst  # found again by its name, not copied
    for held in (random.Random(1), torch.zeros(2), object(), {}.keys(), [random.Random(1)], (1, [object()])):
        with pytest.raises(portable.NotCacheable):
            portable.dumps(compile("x", "<t>", "eval").replace(co_consts=(held,)))
    # a snapshot of constants the code reads (a prologue step's arguments) is data
    back = portable.loads(portable.dumps(compile("x", "<t>", "eval").replace(co_consts=([1.5, 2.5], {"a": (1,)}))))
    assert back.co_consts == ([1.5, 2.5], {"a": (1,)})
    with pytest.raises(portable.NotCacheable, match="held by identity"):
        portable.dumps(random.Random(1))


@pytest.mark.parametrize("bits", [0o770, 0o707, 0o777])
def test_writable_cache_directory_is_refused(on, bits):
    root = on / "cache"
    root.mkdir(mode=0o700)
    os.chmod(root, bits)
    graphjit.reset()
    warned, stats = _warm(on)
    assert len(warned) == 1 and "writable" in warned[0] and "GRAPHJIT_CACHE_TRUSTED" in warned[0], warned
    assert stats["cache_writes"] == 0 and _entry_files(on) == []


def test_writable_entry_directory_is_refused(on):
    _cold(on)
    (real,) = _entry_files(on)
    os.chmod(os.path.dirname(real), 0o777)
    warned, stats = _warm(on)
    assert len(warned) == 1 and "writable" in warned[0], warned
    assert stats["cache_hits"] == 0


def test_writable_entry_file_is_refused(on):
    _cold(on)
    (real,) = _entry_files(on)
    os.chmod(real, 0o666)
    warned, stats = _warm(on)
    assert len(warned) == 1 and "writable" in warned[0], warned
    assert stats["cache_hits"] == 0


def test_trusted_directory_is_used(on, monkeypatch):
    root = on / "cache"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    monkeypatch.setattr(graphjit.config, "cache_trusted", (str(root),))
    _cold(on)
    warned, stats = _warm(on)
    assert warned == [] and stats["cache_hits"] == 1


@pytest.mark.parametrize("named", [True, False])
def test_key_file_others_can_read_is_refused(on, monkeypatch, named):
    if not named:  # the default place: private to the user
        monkeypatch.setattr(graphjit.config, "cache_key_file", None)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(on / "config"))
    path, _ = trust.key_path()
    assert trust.secret_key() is not None
    os.chmod(path, 0o604 if named else 0o640)
    trust.forget()
    warned, stats = _warm(on)
    assert len(warned) == 1 and "not using the key" in warned[0], warned
    assert stats["cache_writes"] == 0 and stats["cache_hits"] == 0


def test_one_warning_per_file(on):
    _cold(on)
    (real,) = _entry_files(on)
    with open(real, "r+b") as f:
        f.truncate(40)
    warned, _ = _warm(on)
    again, _ = _warm(on)
    assert len(warned) == 1 and again == []


def test_refused_write_is_reported_per_frame(on):
    root = on / "cache"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    graphjit.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graphjit.compile(program, backend="eager")(torch.randn(3))
    events = [str(e) for e in graphjit.stats()["cache_events"]]
    assert events and all("cache" in e for e in events)
    assert graphjit.stats()["cache_writes"] == 0

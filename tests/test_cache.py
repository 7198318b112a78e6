"""The persistent cache across processes (graphjit.cache).

Every test runs programs (tests/_cache_programs.py, copied into a temporary directory) in
new processes of this Python, with ``GRAPHJIT_CACHE_DIR`` a temporary directory: a first
process traces and writes, a later one must run with no trace (``frames_total == 0``)
and eager's results, and a changed world (an edited source, a global, a class
attribute, a parameter replaced, another static shape) must trace again and still give
eager's results.  The files themselves are attacked too: two processes writing at once,
a corrupt and a foreign file.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import graphjit

pytestmark = pytest.mark.uncached("manages the persistent cache itself")

HERE = pathlib.Path(__file__).parent
SRC = pathlib.Path(graphjit.__file__).parent.parent
BASIC = ["plain", "with_break", "nested", "cond_program", "vmap_program", "region_program", "module", "checked",
         "random"]


def _env(tmp_path: pathlib.Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CACHE_TEST_", "GRAPHJIT_"))}
    env.update(PYTHONPATH=f"{tmp_path}{os.pathsep}{SRC}", GRAPHJIT_CACHE_DIR=str(tmp_path / "cache"),
               GRAPHJIT_CACHE_KEY_FILE=str(tmp_path / "cache-key"), HF_HUB_OFFLINE="1")
    env.update(extra)
    return env


def _start(tmp_path, names, backend="eager", **extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(tmp_path / "_cache_programs.py"), ",".join(names), backend],
                            env=_env(tmp_path, **extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)


def _finish(proc: subprocess.Popen) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"the process failed:\n{err[-4000:]}"
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), err


def run(tmp_path, names, backend="eager", **extra) -> dict:
    result, _ = _finish(_start(tmp_path, names, backend, **extra))
    return result


@pytest.fixture
def programs(tmp_path):
    shutil.copy(HERE / "_cache_programs.py", tmp_path / "_cache_programs.py")
    return tmp_path


def _all_hit(results: dict) -> None:
    for name, r in results.items():
        assert r["same"], (name, r)
        assert r["frames"] == 0 and r["misses"] == 0 and r["hits"] >= 1, (name, r)


def test_second_process_runs_without_tracing(programs):
    first = run(programs, BASIC)
    for name, r in first.items():
        assert r["same"] and r["frames"] >= 1 and r["writes"] >= 1, (name, r)
    _all_hit(run(programs, BASIC))


def test_changed_global_class_attribute_and_shape_trace_again(programs):
    run(programs, ["plain", "module"])
    changed = run(programs, ["plain"], CACHE_TEST_SCALE="5.0")
    assert changed["plain"]["same"] and changed["plain"]["frames"] == 1, changed
    assert any("guard failed" in e or "miss" in e for e in changed["plain"]["events"])
    changed = run(programs, ["plain"], CACHE_TEST_FACTOR="-1.0")
    assert changed["plain"]["same"] and changed["plain"]["frames"] == 1, changed
    changed = run(programs, ["plain", "module"], CACHE_TEST_ROWS="6")  # static shapes: other sizes
    assert all(r["same"] and r["frames"] == 1 for r in changed.values()), changed
    # the entries written for each change serve the same change next time
    _all_hit(run(programs, ["plain"], CACHE_TEST_SCALE="5.0"))


def test_replaced_parameter_and_other_module_shapes_trace_again(programs):
    run(programs, ["module"])
    r = run(programs, ["module"], CACHE_TEST_REPLACE_PARAM="1")["module"]
    assert r["same"] and r["frames"] == 0 and r["hits"] == 1, r  # loaded, then ...
    assert r["after_replace"]["frames"] == 1, r  # ... the replaced parameter recompiles
    r = run(programs, ["module"], CACHE_TEST_WIDTH="16")["module"]  # parameters of other shapes
    assert r["same"] and r["frames"] == 1, r


def test_edited_source_traces_again(programs):
    run(programs, ["plain", "module"])
    path = programs / "_cache_programs.py"
    text = path.read_text()
    # an edited helper (inlined into plain's graph): plain's entry is stale; the module's is not
    path.write_text(text.replace("return torch.sin(x) * SCALE", "return torch.sin(x) * SCALE + 1"))
    r = run(programs, ["plain", "module"])
    assert r["plain"]["same"] and r["plain"]["frames"] == 1, r
    assert any("stale" in e or "is not what it was" in e for e in r["plain"]["events"]), r
    assert r["module"]["frames"] == 0 and r["module"]["same"], r
    # an edited compiled function: another key
    path.write_text(path.read_text().replace("return helper(x) + torch.cos(y) * Knob.factor",
                                             "return helper(x) - torch.cos(y) * Knob.factor"))
    r = run(programs, ["plain"])
    assert r["plain"]["same"] and r["plain"]["frames"] == 1 and r["plain"]["hits"] == 0, r


def test_two_processes_writing_at_once(programs):
    """Two ranks of a job start at once on one empty directory with no key yet: both make
    the key (one is kept), write the same entries, warn about nothing, and the next
    process runs from the cache."""
    procs = [_start(programs, ["plain", "with_break", "module"]) for _ in range(2)]
    for p in procs:
        result, err = _finish(p)
        assert all(r["same"] for r in result.values()), result
        assert "graphjit cache" not in err, err[-3000:]
    assert sorted(p.name for p in programs.iterdir() if p.name.startswith(".cache-key")) == []
    leftovers = [p for p in (programs / "cache").rglob("*") if p.name.startswith(".tmp")]
    assert not leftovers
    _all_hit(run(programs, ["plain", "with_break", "module"]))


def test_corrupt_and_foreign_files_are_skipped_with_one_warning(programs):
    run(programs, ["plain"])
    files = sorted((programs / "cache").rglob("*.entry"))
    assert files
    for f in files:  # truncate every entry
        f.write_bytes(f.read_bytes()[:-20])
    (files[0].parent / "foreign.entry").write_bytes(b"\x00not a cache entry at all")
    result, err = _finish(_start(programs, ["plain"]))
    assert result["plain"]["same"] and result["plain"]["frames"] == 1, result
    warnings = [ln for ln in err.splitlines() if "graphjit cache: ignoring" in ln]
    assert len(warnings) == len(files) + 1, err[-3000:]
    assert any("HMAC does not match" in w for w in warnings) and any("not a graphjit" in w for w in warnings)


def test_clear_and_reset(programs):
    run(programs, ["plain"])
    code = ("import graphjit, os; graphjit.reset(); "
            "print(sum(len(f) for _, _, f in os.walk(graphjit.cache.cache_dir())))")
    out = subprocess.run([sys.executable, "-c", "import graphjit.cache; " + code], env=_env(programs),
                         capture_output=True, text=True, timeout=300)
    assert int(out.stdout.split()[-1]) >= 1, out  # reset() leaves the disk alone
    out = subprocess.run([sys.executable, "-c", "import graphjit.cache; graphjit.cache.clear(); " + code],
                         env=_env(programs), capture_output=True, text=True, timeout=300)
    assert int(out.stdout.split()[-1]) == 0, out
    r = run(programs, ["plain"])
    assert r["plain"]["frames"] == 1 and r["plain"]["writes"] == 1


def test_logs_say_hit_and_miss(programs):
    _, err = _finish(_start(programs, ["plain"], GRAPHJIT_LOGS="cache"))
    assert "cache miss: plain" in err and "cache written: plain" in err
    _, err = _finish(_start(programs, ["plain"], GRAPHJIT_LOGS="cache"))
    assert "cache hit: plain" in err


def test_aot_eager_gradients(programs):
    first = run(programs, ["module", "plain"], "aot_eager")
    assert all(r["same"] and r["frames"] == 1 for r in first.values()), first
    _all_hit(run(programs, ["module", "plain"], "aot_eager"))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_repeated_blocks(programs, backend):
    """A graph calling one invoke_subgraph body per block is written and loaded; a block
    that differs in the next process (its own guards) traces again."""
    first = run(programs, ["blocks"], backend)["blocks"]
    assert first["same"] and first["frames"] == 1 and first["writes"] == 1, first
    _all_hit(run(programs, ["blocks"], backend))
    changed = run(programs, ["blocks"], backend, CACHE_TEST_BLOCK_GAIN="3.0")["blocks"]
    assert changed["same"] and changed["frames"] == 1, changed


def test_dynamic_shapes_eager(programs):
    first = run(programs, ["dynamic"])["dynamic"]
    assert first["same"] and first["frames"] == 2 and first["writes"] == 2, first  # static, then dynamic
    second = run(programs, ["dynamic"])["dynamic"]
    assert second["same"] and second["frames"] == 0 and second["hits"] == 2, second


@pytest.mark.slow
def test_inductor_uses_its_own_caches(programs):
    first = run(programs, ["module"], "inductor")["module"]
    assert first["same"] and first["frames"] == 1 and first["writes"] == 1, first
    second = run(programs, ["module"], "inductor")["module"]
    assert second["same"] and second["frames"] == 0 and second["hits"] == 1, second
    assert second["fxgraph_cache_hits"] >= 1, second  # the backend ran again on inductor's own cache


def test_cache_off(programs):
    r = run(programs, ["plain"], GRAPHJIT_CACHE_DIR="")
    assert r["plain"]["writes"] == 0 and r["plain"]["misses"] == 0
    assert not (programs / "cache").exists()


def test_in_process_default_is_off_in_tests():
    assert graphjit.config.cache_dir is None  # (conftest: the suite never reads old entries)


class _Kind:
    """A class referenced many times by what an entry writes."""


def test_a_reference_met_again_is_written_once():
    """The pickler remembers each object's persistent id for the dump (the same tuple: the
    pickle memo writes it once), and what loads back is the same objects."""
    from graphjit.cache.portable import dumps, loads
    one = dumps([_Kind])
    many = dumps([_Kind] * 50 + [{"k": _Kind}, (_Kind, json.dumps)])
    assert len(many) < 2 * len(one) + 200
    back = loads(many)
    assert all(k is _Kind for k in back[:50]) and back[50]["k"] is _Kind
    assert back[51] == (_Kind, json.dumps)
    fresh = [type(f"T{i}", (), {}) for i in range(3)]  # (not importable: refused)
    with pytest.raises(Exception):
        dumps(fresh)

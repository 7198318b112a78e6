"""Nothing a trace saw is replayed from the persistent cache unless it is guarded.

Each program computes a value from state that is neither an input the guard checks nor
part of the entry: Python's ``random`` (seed 003's example: a ``random.Random`` seeded by
a draw), ``time``, ``id()`` of its arguments and of objects it makes, the position of an
iterator passed in, the identity of objects made in the frame, a global counter, the
process id.  ``check_same`` compares three calls with eager cold; the suite's warm pass
(``tests/conftest.py``) drops the compiled state and compares them again with every entry
loaded from the disk.  The seed 003 example also runs in two new processes: a second
process loading the entry draws eager's numbers (9, 2, 4), not the traced ones again.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys
import time

import pytest
import torch

import graphjit
from graphjit.testing import check_same

SRC = pathlib.Path(graphjit.__file__).parent.parent


def seed_003(x):
    seed = random.randint(0, 100)
    rand = random.Random(seed)
    return x + rand.randrange(10)


def draws_twice(x):
    a = random.random()
    b = random.uniform(1, 2)
    return x * a + b, a < b


def clock(x):
    t0 = time.perf_counter()
    y = x.sin()
    return y, time.perf_counter() >= t0, time.time() > 1e9


def ids_of_arguments(x, box):
    return x + (id(box) % 7), id(box) == id(box)


def identity_of_new_objects(x):
    a, c = [], []
    b = a
    return x + 1, a is b, a is c, id(a) == id(b), id(a) == id(c)


def iterator_position(it, x):
    first = next(it)
    return x * first, list(it)


COUNT = 0


def global_counter(x):
    global COUNT
    COUNT += 1
    return x + COUNT


def process_id(x):
    return x + os.getpid() % 5


class Box:
    pass


PROGRAMS = [
    (seed_003, lambda: (torch.ones(1),)),
    (draws_twice, lambda: (torch.ones(3),)),
    (clock, lambda: (torch.ones(3),)),
    (identity_of_new_objects, lambda: (torch.ones(2),)),
    (iterator_position, lambda: (iter([3, 4, 5]), torch.ones(2))),
    (process_id, lambda: (torch.ones(2),)),
]


@pytest.mark.parametrize("fn,args", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_cold_and_warm_follow_eager(fn, args, backend):
    random.seed(0)
    check_same(fn, *args(), backend=backend, calls=3)


def _cold_then_warm(fn, calls, tmp_path, monkeypatch) -> list:
    """``calls()`` (a list of ``(args, expected)``) made on ``fn`` compiled with the cache
    on, then again after ``graphjit.reset()`` with every entry loaded from the disk."""
    monkeypatch.setattr(graphjit.config, "cache_dir", str(tmp_path / "cache"))
    monkeypatch.setattr(graphjit.config, "cache_key_file", str(tmp_path / "key"))
    outcomes = []
    for _ in range(2):
        graphjit.reset()
        compiled = graphjit.compile(fn, backend="eager")
        for args, expected in calls():
            got = compiled(*args)
            torch.testing.assert_close(got, expected() if callable(expected) else expected)
        outcomes.append(graphjit.stats())
    return outcomes


@pytest.mark.uncached("drives the cache itself: a warm pass of its own")
def test_ids_are_read_when_the_code_runs(tmp_path, monkeypatch):
    """``id()`` of an argument: each call's own object (never the traced one's id)."""
    boxes = [Box() for _ in range(3)]
    x = torch.ones(2)
    cold, warm = _cold_then_warm(ids_of_arguments, lambda: [((x, b), (x + id(b) % 7, True)) for b in boxes],
                                 tmp_path, monkeypatch)
    assert warm["cache_hits"] >= 1 and warm["frames_total"] == 0, warm


@pytest.mark.uncached("drives the cache itself: a warm pass of its own")
def test_global_counter_is_read_when_the_code_runs(tmp_path, monkeypatch):
    """A global the function increments: each call reads and writes the live value."""
    global COUNT
    COUNT = 0
    x = torch.ones(2)

    def calls():
        start = COUNT
        return [((x,), lambda i=i: x + start + i) for i in range(1, 4)]

    cold, warm = _cold_then_warm(global_counter, calls, tmp_path, monkeypatch)
    assert COUNT == 6
    # the global's value is guarded (as torch.compile specializes an int global): the
    # values 4, 5, 6 were never traced, so nothing written serves them; nothing is replayed
    assert cold["frames_total"] == 3 and warm["frames_total"] == 3 and warm["cache_hits"] == 0, warm


_CHILD = """
import json, random, sys, torch, graphjit
sys.path.insert(0, {tests!r})
from test_cache_replay import seed_003
random.seed(0)
eager = [seed_003(torch.ones(1)).item() for _ in range(3)]
random.seed(0)
got = [graphjit.compile(seed_003, backend="eager")(torch.ones(1)).item() for _ in range(3)]
s = graphjit.stats()
print("RESULT " + json.dumps({{"eager": eager, "got": got, "hits": s["cache_hits"], "writes": s["cache_writes"]}}))
"""


def test_seed_003_in_new_processes(tmp_path):
    """Compiled three times in a row in one process, then again in a new one: eager's
    numbers every time, the second process loading the entry instead of tracing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHJIT_")}
    env.update(PYTHONPATH=str(SRC), GRAPHJIT_CACHE_DIR=str(tmp_path / "cache"),
               GRAPHJIT_CACHE_KEY_FILE=str(tmp_path / "key"))
    code = _CHILD.format(tests=str(pathlib.Path(__file__).parent))
    results = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        results.append(json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))[7:]))
    for r in results:
        assert r["got"] == r["eager"], r
    assert len(set(results[0]["eager"])) > 1  # (the example draws different numbers)
    assert results[0]["writes"] == 1 and results[0]["hits"] == 2, results[0]  # written once, loaded twice
    assert results[1]["writes"] == 0 and results[1]["hits"] == 3, results[1]  # all loaded

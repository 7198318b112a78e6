"""Shared fixtures: every test runs with graphjit's debug checks on, and every differential
test runs twice: cold (the persistent cache on, written only) and warm (its entries loaded).

The warm pass (``graphjit.testing.warm_pass``): while a test runs, the cache is on in a
directory of its own, entries are written and never read (``cache.write_only``), and the
harness (``check_same``, ``compare_call`` and the helpers built on them) records each
differential call.  When the test has passed, the compiled state is dropped
(``graphjit.reset()``) and each recorded call is compared with eager again, its compiled
function now loading what the first pass wrote.  A test whose frames cannot all be
written says which with ``@pytest.mark.cache_limits("part of the reason")``, or with
``@pytest.mark.uncached("why")`` that it has no warm pass at all; an unexplained frame
that was not written fails the test.  ``GRAPHJIT_WARM_PASS=0``
turns the pass off; ``GRAPHJIT_WARM_REPORT=FILE`` appends one JSON line per test (frames
written, not written and why, warm hits and traces).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest
import torch

import graphjit
from graphjit import cache
from graphjit.testing import warm_pass

# the persistent cache is off in tests outside the warm pass (a test that compiles twice
# must trace twice), also in the processes tests start (an empty GRAPHJIT_CACHE_DIR: off;
# nothing is written to the user's ~/.cache); tests/test_cache*.py turn it on themselves
graphjit.config.cache_dir = None
os.environ["GRAPHJIT_CACHE_DIR"] = ""

# the helpers shared by the test files assert too: give their failures pytest's detail
pytest.register_assert_rewrite("_shared")

_WARM = os.environ.get("GRAPHJIT_WARM_PASS", "1") != "0"
_WARM_REPORT = os.environ.get("GRAPHJIT_WARM_REPORT")
_warm_root: str | None = None


def pytest_configure(config):
    config.addinivalue_line("markers", "uncached(reason): the test's frames cannot be cached; no warm pass")
    config.addinivalue_line("markers", "cache_limits(*reasons): frames the test compiles that the persistent "
                            "cache cannot write, by (part of) the reason it gives; the rest run warm")


def _root() -> str:
    global _warm_root
    if _warm_root is None:
        _warm_root = tempfile.mkdtemp(prefix="graphjit-warm-")
        os.chmod(_warm_root, 0o700)
    return _warm_root


def pytest_unconfigure(config):
    if _warm_root is not None:
        shutil.rmtree(_warm_root, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not _WARM or item.get_closest_marker("uncached") is not None:
        return (yield)
    directory = tempfile.mkdtemp(dir=_root())
    old = graphjit.config.cache_dir, graphjit.config.cache_key_file
    graphjit.config.cache_dir = directory
    graphjit.config.cache_key_file = os.path.join(_root(), "key")
    events: list = []
    cache.listeners.append(events.append)
    warm_pass.start()
    try:
        with cache.write_only():
            result = yield
        cache.flush()
        cold = list(events)
        replayed = warm_pass.replay() if warm_pass.calls else 0
        if _WARM_REPORT and (replayed or cold):
            _report(item, cold, events[len(cold):], replayed)
        if replayed:
            _check_written(item, cold, events[len(cold):])
        return result
    finally:
        cache.flush()
        warm_pass.stop()
        cache.listeners.remove(events.append)
        graphjit.config.cache_dir, graphjit.config.cache_key_file = old
        shutil.rmtree(directory, ignore_errors=True)


#: what the persistent cache does not write for any program (documented where it is decided)
_KNOWN_LIMITS = (
    # graphjit/cache/entries.py: a compiling backend would be called again at load with
    # one call's sizes, static
    "a graph with symbolic sizes or numbers for a compiling backend",
)


def _check_written(item, cold, warm) -> None:
    """Every frame the warm pass traced again because the first pass could not write it
    is one the test says cannot be (``@pytest.mark.cache_limits("part of the reason",
    ...)`` on the test or its module, or the module's ``CACHE_LIMITS``, a dict from a
    part of the test's name (a case of a parametrized test) to the reasons), or one of
    the cache's documented limits: a differential test's warm pass is not silently a
    cold one."""
    marker = item.get_closest_marker("cache_limits")
    known = [*_KNOWN_LIMITS, *(marker.args if marker is not None else ())]
    for part, reasons in getattr(item.module, "CACHE_LIMITS", {}).items():
        if part in item.name:
            known += reasons
    traced = {e.frame for e in warm if e.outcome == "miss"}
    unexplained = sorted({f"{e.frame}: {e.detail}" for e in cold
                          if e.outcome == "not written" and e.frame in traced
                          and not any(k in e.detail for k in known)})
    if unexplained:
        raise AssertionError(
            "the warm pass could not load these frames (not written to the persistent cache):\n  "
            + "\n  ".join(unexplained) + "\nmake them cacheable, or mark the test "
            "@pytest.mark.cache_limits(<part of the reason>) to say why they cannot be")


def _report(item, cold, warm, replayed) -> None:
    row = {"test": item.nodeid, "replayed": replayed,
           "written": sum(e.outcome == "written" for e in cold),
           "not_written": [f"{e.frame}: {e.detail}" for e in cold if e.outcome == "not written"],
           "warm_hits": sum(e.outcome == "hit" for e in warm),
           "warm_traced": [f"{e.frame}: {e.detail}" for e in warm if e.outcome in ("miss", "stale")]}
    with open(_WARM_REPORT, "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.fixture(autouse=True)
def _grad_mode_restored(request):
    """No test (and no compiled code it runs) may leave global grad mode changed."""
    yield
    if not torch.is_grad_enabled():
        torch.set_grad_enabled(True)
        raise AssertionError(f"grad mode left disabled by {request.node.nodeid}")


@pytest.fixture(autouse=True)
def _graphjit_debug_and_reset():
    old_debug = graphjit.config.debug_checks
    old_limit = graphjit.config.recompile_limit
    graphjit.config.debug_checks = True
    graphjit.reset()
    yield
    graphjit.config.debug_checks = old_debug
    graphjit.config.recompile_limit = old_limit

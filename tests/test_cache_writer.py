"""The persistent cache writes entries off the critical path (graphjit/cache/writer.py).

A traced frame's entry is queued and written by a background thread after the call that
traced it returns; ``stats()``, ``reset()`` and a miss in memory wait for the queue, so
counts are exact and an entry queued in this process is read as a written one.  A job
that fails is graphjit's bug: with debug checks on it is raised where the queue is
waited for, without them the frame's cache event says why it was not written.
"""

from __future__ import annotations

import threading

import pytest
import torch

import graphjit
from graphjit import InternalError, cache
from graphjit.cache import store, trust, writer

pytestmark = pytest.mark.uncached("manages the persistent cache itself")


def program(x):
    return torch.cos(x) + 1


@pytest.fixture
def on(tmp_path, monkeypatch):
    monkeypatch.setattr(graphjit.config, "cache_dir", str(tmp_path / "cache"))
    monkeypatch.setattr(graphjit.config, "cache_key_file", str(tmp_path / "key"))
    trust.forget()
    yield tmp_path
    cache.flush()
    trust.forget()


def test_counts_wait_for_the_queue(on):
    x = torch.randn(3)
    graphjit.compile(program, backend="eager")(x)
    assert graphjit.stats()["cache_writes"] == 1  # (stats() waited for the write)
    assert not writer.pending()


def test_a_second_compile_reads_what_the_first_queued(on):
    x = torch.randn(3)
    graphjit.compile(program, backend="eager")(x)
    torch.testing.assert_close(graphjit.compile(program, backend="eager")(x), program(x))
    s = graphjit.stats()
    assert s["frames_total"] == 1 and s["cache_hits"] == 1 and s["cache_writes"] == 1, s


def test_the_write_runs_on_another_thread(on, monkeypatch):
    threads = []
    real = store.write

    def write(*a, **k):
        threads.append(threading.current_thread())
        return real(*a, **k)

    monkeypatch.setattr(store, "write", write)
    graphjit.compile(program, backend="eager")(torch.randn(3))
    cache.flush()
    assert threads and all(t is not threading.main_thread() for t in threads)


def test_a_failing_job_is_raised_in_debug_mode(on, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store, "write", broken)
    x = torch.randn(3)
    torch.testing.assert_close(graphjit.compile(program, backend="eager")(x), program(x))  # the call is not hurt
    with pytest.raises(InternalError, match="disk on fire"):
        cache.flush()


def test_a_failing_job_is_a_frame_not_written_without_debug_checks(on, monkeypatch):
    monkeypatch.setattr(graphjit.config, "debug_checks", False)

    def broken(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store, "write", broken)
    graphjit.compile(program, backend="eager")(torch.randn(3))
    events = [e for e in graphjit.stats()["cache_events"] if e.outcome == "not written"]
    assert len(events) == 1 and "disk on fire" in events[0].detail

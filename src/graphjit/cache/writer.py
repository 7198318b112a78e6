"""Entries written off the critical path: a traced frame's entry is made into a file by a
background thread after the call that traced it returns, so the first call costs what it
costs without the cache.

Contract:

* :func:`submit` queues a job (a callable that writes one entry and reports it).  The
  thread starts when the dispatcher says the call that traced is over (:func:`kick`), or
  after :data:`DELAY` seconds at the latest (a frame traced deep inside a long call).
* :func:`flush` waits until every queued job is done; ``graphjit.stats()``,
  ``graphjit.reset()``, ``graphjit.cache.clear()`` and the end of the process
  (``atexit``) flush, so counts, a reset and a short script see their entries written.
  With ``config.debug_checks`` a job's unexpected exception is raised by :func:`flush`.
* A job reads only what its entry holds (the guard's recipe and constants, the graphs,
  the transformed code): nothing the program changes after the call.  A child made by
  ``fork`` starts with no queue (the parent's jobs are the parent's).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from typing import Callable

from .. import config

#: seconds a queued job waits for :func:`kick` before the thread starts anyway
DELAY = 0.25

log = logging.getLogger("graphjit")


class _Writer:
    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.jobs: list[Callable[[], None]] = []
        self.busy = 0               # jobs taken by the thread and not finished
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()
        self.errors: list[BaseException] = []
        self.seconds = 0.0          # time the thread spent writing (benchmarks report it)

    def __repr__(self) -> str:
        return f"_Writer({len(self.jobs)} queued, {self.busy} running)"

    def submit(self, job: Callable[[], None]) -> None:
        with self.cond:
            self.jobs.append(job)
            if self.thread is None:
                self.wake.clear()
                self.thread = threading.Thread(target=self._run, name="graphjit-cache-writer", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        self.wake.wait(DELAY)
        while True:
            with self.cond:
                jobs, self.jobs = self.jobs, []
                if not jobs:
                    self.thread = None
                    self.cond.notify_all()
                    return
                self.busy += len(jobs)
            for job in jobs:
                started = time.perf_counter()
                try:
                    job()
                except BaseException as e:  # (a job reports its own failures; this is graphjit's bug)
                    log.exception("graphjit cache: writing an entry failed")
                    self.errors.append(e)
                finally:
                    self.seconds += time.perf_counter() - started
                    with self.cond:
                        self.busy -= 1
                        self.cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for every queued job; ``False`` if ``timeout`` passed first."""
        with self.cond:
            if not self.jobs and not self.busy:
                ok = True
            else:
                self.wake.set()
                ok = self.cond.wait_for(lambda: not self.jobs and not self.busy, timeout)
        if self.errors and config.debug_checks:
            error, self.errors = self.errors[0], []
            raise error
        return ok


_writer = _Writer()


def submit(job: Callable[[], None]) -> None:
    _writer.submit(job)


def kick() -> None:
    """The call that traced is over: write now."""
    if _writer.thread is not None:
        _writer.wake.set()


def seconds() -> float:
    """The time the writer thread has spent writing entries in this process."""
    return _writer.seconds


def pending() -> bool:
    return bool(_writer.jobs or _writer.busy)


def flush(timeout: float | None = None) -> bool:
    if not pending() and not _writer.errors:
        return True
    if threading.current_thread() is _writer.thread:  # (a job must not wait for itself)
        return False
    return _writer.flush(timeout)


def _after_fork() -> None:
    global _writer
    _writer = _Writer()


os.register_at_fork(after_in_child=_after_fork)
atexit.register(lambda: flush(timeout=60.0))

__all__ = ["submit", "kick", "flush", "pending", "seconds", "DELAY"]

"""A world of worker processes for multi-process tests (not a test module itself).

:class:`World` spawns ``nprocs`` ranks (``torch.multiprocessing``'s spawn context), each of
which joins a gloo process group on 127.0.0.1 (a free port per world) and then serves
*programs*: module-level functions ``program(rank, world_size, **kwargs)`` named by
``"module:function"`` (the module importable from ``tests/``), run on every rank at once.
:meth:`World.run` returns each rank's result (or raises with the failing rank's
traceback).

Starting a rank (importing torch) costs seconds, so one world serves many programs; a
test module keeps one for its whole run (a fixture).  Every wait is bounded: a rank that
fails while the others wait in a collective makes the others time out (the process
group's own ``timeout``), and :meth:`World.run` gives up after its own ``timeout``,
killing the world (the next :meth:`World.run` starts a fresh one).  :meth:`World.close`
asks each rank to leave, then terminates and kills what is left: no process outlives
the world.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import os
import pickle
import queue
import socket
import sys
import time
import traceback

import torch.multiprocessing as mp

#: how long a collective waits for the other ranks before raising (the process group's:
#: long enough for one rank to compile with Inductor while the other waits)
PG_TIMEOUT_S = 300
#: once a rank has failed, how long the others may still take (they may be waiting for it
#: in a collective): then the world is ended
GRACE_S = 20


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RankFailed(AssertionError):
    """A program raised on some rank (the message holds each failing rank's traceback)."""


def _rank_main(rank: int, world_size: int, port: int, tasks, results) -> None:
    """A rank: join the group, then run programs until told to stop (``None``)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(os.getcwd(), "build", "inductor-cache"))
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=PG_TIMEOUT_S))
    except Exception:  # noqa: BLE001
        results.put((rank, "init", False, traceback.format_exc()))
        return
    results.put((rank, "init", True, None))
    try:
        while True:
            task = tasks.get()
            if task is None:
                break
            ident, name, kwargs = task
            module_name, fn_name = name.split(":")
            try:
                fn = getattr(importlib.import_module(module_name), fn_name)
                value = fn(rank, world_size, **kwargs)
                pickle.dumps(value)  # (the queue's feeder thread would only print the error)
                results.put((rank, ident, True, value))
            except BaseException:  # noqa: BLE001 (reported to the parent, the rank goes on)
                results.put((rank, ident, False, traceback.format_exc()))
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
        with contextlib.suppress(Exception):
            results.close()
            results.join_thread()  # every reply is in the pipe
        os._exit(0)  # (skips tearing torch down: seconds, nothing to save)


class World:
    """``nprocs`` ranks in one gloo group, serving programs (see the module docstring)."""

    def __init__(self, nprocs: int = 2, start_timeout: float = 120.0) -> None:
        self.nprocs, self.start_timeout = nprocs, start_timeout
        self._procs: list = []
        self._tasks: list = []
        self._results = None
        self._ident = 0

    def __repr__(self) -> str:
        return f"<World {self.nprocs} ranks, {'up' if self._procs else 'down'}>"

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self._results = ctx.Queue()
        self._tasks = [ctx.Queue() for _ in range(self.nprocs)]
        port = free_port()
        tests_dir = os.path.dirname(os.path.abspath(__file__))
        if tests_dir not in sys.path:  # the ranks import programs from tests/
            sys.path.insert(0, tests_dir)
        self._procs = [ctx.Process(target=_rank_main, daemon=True,
                                   args=(r, self.nprocs, port, self._tasks[r], self._results))
                       for r in range(self.nprocs)]
        for p in self._procs:
            p.start()
        self._collect("init", self.start_timeout)

    def _collect(self, ident, timeout: float) -> list:
        out: dict[int, object] = {}
        errors: dict[int, str] = {}
        deadline = time.monotonic() + timeout
        while len(out) + len(errors) < self.nprocs:
            left = deadline - time.monotonic()
            dead = [p for p in self._procs if not p.is_alive()]
            if left <= 0 or (dead and self._results.empty()):
                why = (f"rank(s) exited with code {[p.exitcode for p in dead]}" if dead and left > 0
                       else f"the other ranks did not finish within {GRACE_S} s" if errors
                       else f"timed out after {timeout:.0f} s")
                self.close()
                failed = "".join(f"\n--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items()))
                raise RankFailed(f"{ident}: {why}; finished ranks: {sorted(out)}{failed}")
            try:
                rank, got, ok, value = self._results.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if got != ident:  # a reply to a program an earlier timeout gave up on
                continue
            (out if ok else errors)[rank] = value
            if not ok:
                deadline = min(deadline, time.monotonic() + GRACE_S)
        if errors:
            raise RankFailed("\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items())))
        return [out[r] for r in range(self.nprocs)]

    def run(self, name: str, timeout: float = 120.0, **kwargs) -> list:
        """Run the program ``"module:function"`` on every rank; each rank's return value."""
        if not self._procs:
            self._start()
        self._ident += 1
        ident = f"{name}#{self._ident}"
        for q in self._tasks:
            q.put((ident, name, kwargs))
        return self._collect(ident, timeout)

    def close(self) -> None:
        """Stop every rank: ask, wait a little, then terminate and kill."""
        procs, self._procs = [p for p in self._procs if p.pid is not None], []  # started ones
        for q in self._tasks:
            with contextlib.suppress(Exception):
                q.put(None)
        for p in procs:
            p.join(timeout=10)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        for q in [*self._tasks, self._results]:
            if q is not None:
                with contextlib.suppress(Exception):
                    q.cancel_join_thread()  # never wait on a pipe nobody reads any more
                    q.close()
        self._tasks, self._results = [], None

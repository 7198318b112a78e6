"""Guard time per call of a graphjit-compiled callable: every guard check one call runs
(each dispatcher's entries, top level and nested), recorded with its arguments and then
replayed in a loop.  Used by ``bench_cache.py``."""

from __future__ import annotations

import time
from typing import Any, Callable

from graphjit.runtime import dispatch


def _recorder(check: Callable, calls: list) -> Callable:
    def rec(*args, **kwargs):
        calls.append((check, args, kwargs))
        return check(*args, **kwargs)

    return rec


def recorded_checks(call: Callable[[], Any]) -> list[tuple]:
    """The guard checks (with their arguments) that one ``call()`` runs."""
    calls: list = []
    saved_fast = [(cf, cf._fast) for cf in list(dispatch._live)]
    saved_nested = [(e.guard, e.guard.check) for nd in list(dispatch._nested_live) for e in nd._entries]
    try:
        for cf, fast in saved_fast:
            cf._fast = [(_recorder(check, calls), fn) for check, fn in fast]
        for guard, check in saved_nested:
            guard.check = _recorder(check, calls)
        call()
    finally:
        for cf, fast in saved_fast:
            cf._fast = fast
        for guard, check in saved_nested:
            guard.check = check
    return calls


def guard_us_per_call(call: Callable[[], Any], repeat: int = 300) -> tuple[float, int]:
    """(µs of guard checks per ``call()``, number of checks run): the median of 5 timings
    of ``repeat`` replays of the checks one call runs."""
    checks = recorded_checks(call)
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            for check, args, kwargs in checks:
                check(*args, **kwargs)
        samples.append((time.perf_counter() - t0) / repeat * 1e6)
    samples.sort()
    return samples[len(samples) // 2], len(checks)

"""Counters since the last ``graphjit.reset()`` (returned by ``graphjit.stats()``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..diagnostics.describe import check_user_text
from ..report import record as _record


@dataclasses.dataclass(frozen=True)
class SkippedFrame:
    """A frame graphjit was asked to compile that runs in Python instead (its calls are
    still intercepted and compiled), and why."""

    name: str
    filename: str
    lineno: int
    reason: str

    def __str__(self) -> str:
        return f"{self.name} ({self.filename}:{self.lineno}): {self.reason}"


_stats: dict[str, Any] = {}


def clear() -> None:
    _stats.clear()
    _stats.update(graph_breaks=0, break_reasons=[], frames_total=0, frames_ok=0, recompiles=0,
                  graphs_shared=0, graphs=[], skipped_frames=[], cache_hits=0, cache_misses=0, cache_writes=0, cache_events=[])


def bump(key: str, n: int = 1) -> None:
    _stats[key] += n


def record(key: str, item: Any) -> None:
    if key in ("break_reasons", "skipped_frames"):
        check_user_text(str(item))  # debug mode: no tracker repr in what users read
    _stats[key].append(item)
    _record.stat_recorded(key, item)  # the report's recorder (a no-op unless recording)


def snapshot() -> dict[str, Any]:
    """The public view: graph_breaks, break_reasons, frames_total, frames_ok, recompiles,
    skipped_frames, graphs_shared (graphs that took the compiled callable of an earlier
    graph of the same structure instead of calling the backend: ``graph/shared_graphs.py``),
    and the persistent cache's cache_hits, cache_misses, cache_writes and
    cache_events (one per frame looked up or written)."""
    return {
        "graph_breaks": _stats["graph_breaks"],
        "break_reasons": list(_stats["break_reasons"]),
        "frames_total": _stats["frames_total"],
        "frames_ok": _stats["frames_ok"],
        "recompiles": _stats["recompiles"],
        "graphs_shared": _stats["graphs_shared"],
        "skipped_frames": list(_stats["skipped_frames"]),
        "cache_hits": _stats["cache_hits"],
        "cache_misses": _stats["cache_misses"],
        "cache_writes": _stats["cache_writes"],
        "cache_events": list(_stats["cache_events"]),
    }


def graphs() -> list:
    return list(_stats["graphs"])


clear()

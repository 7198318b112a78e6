"""Counters since the last ``graphjit.reset()`` (returned by ``graphjit.stats()``)."""

from __future__ import annotations

from typing import Any

_stats: dict[str, Any] = {}


def clear() -> None:
    _stats.clear()
    _stats.update(graph_breaks=0, break_reasons=[], frames_total=0, frames_ok=0, recompiles=0,
                  graphs=[])


def bump(key: str, n: int = 1) -> None:
    _stats[key] += n


def record(key: str, item: Any) -> None:
    _stats[key].append(item)


def snapshot() -> dict[str, Any]:
    """The public view: graph_breaks, break_reasons, frames_total, frames_ok, recompiles."""
    return {
        "graph_breaks": _stats["graph_breaks"],
        "break_reasons": list(_stats["break_reasons"]),
        "frames_total": _stats["frames_total"],
        "frames_ok": _stats["frames_ok"],
        "recompiles": _stats["recompiles"],
    }


def graphs() -> list:
    return list(_stats["graphs"])


clear()

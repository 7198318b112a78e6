"""See what the compiler did: a structured log of a run and a static HTML report of it.

Recording (``record.py``: cheap, structured, off the dispatcher's hot path) is kept apart
from rendering (``serialize.py`` turns the records into the log, ``render.py`` the log
into ``index.html``), as tlparse keeps TorchDynamo's structured log apart from its pages.

* ``python -m graphjit report [--out DIR] SCRIPT [ARGS...]`` (``cli.py``) runs SCRIPT
  as ``__main__`` while recording, writes ``DIR/index.html`` and prints a summary;
* ``GRAPHJIT_REPORT=DIR python script.py`` records the whole run and writes the report
  when the process exits (:func:`install_from_env`, called when graphjit is imported);
* from code: :func:`start` (or ``with recording():``), then :func:`write`.

``decompile.py`` writes graphjit's transformed code and resume functions as Python;
``GRAPHJIT_LOGS=decompiled`` logs them as each entry is made.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pathlib
import sys
import time
from typing import Iterator

from .. import cache
from . import record
from .decompile import DecompileError, decompile, recompile
from .record import start, stop
from .render import render
from .serialize import serialize

__all__ = ["start", "stop", "recording", "write", "write_log", "decompile", "recompile", "DecompileError",
           "summary_text", "install_from_env"]


@contextlib.contextmanager
def recording() -> Iterator[record.Recorder]:
    """Record what is compiled inside the block (the previous recorder comes back)."""
    before = record.active()
    rec = start()
    try:
        yield rec
    finally:
        record._active = before


def write(out_dir: str | os.PathLike = "graphjit_report", rec: record.Recorder | None = None) -> dict:
    """Write ``out_dir/index.html`` and ``out_dir/graphjit_log.json`` for ``rec`` (default:
    the active recorder) and return the log.  Raises ``RuntimeError`` when nothing was
    recorded (recording is off: call :func:`start` first)."""
    rec = rec if rec is not None else record.active()
    if rec is None:
        raise RuntimeError("graphjit is not recording: call graphjit.report.start() (or run under "
                           "`python -m graphjit report` / GRAPHJIT_REPORT=DIR) before the code to report on")
    started = time.perf_counter()
    cache.flush(timeout=60.0)  # (the entries queued to be written say whether they were)
    log = serialize(rec)
    return write_log(log, out_dir, started)


def write_log(log: dict, out_dir: str | os.PathLike, started: float | None = None) -> dict:
    """Render ``log`` (a structured log, e.g. read back from ``graphjit_log.json``) into
    ``out_dir``."""
    started = time.perf_counter() if started is None else started
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "graphjit_log.json").write_text(json.dumps(log, indent=1, default=str), encoding="utf-8")
    (out / "index.html").write_text(render(log), encoding="utf-8")
    log["summary"]["write_seconds"] = time.perf_counter() - started
    return log


def summary_text(log: dict, out_dir: str | os.PathLike | None = None) -> str:
    """The terminal summary: frames, graphs, breaks, recompiles, compile time, top breaks."""
    s = log["summary"]
    lines = [f"graphjit: {s['frames']} frames compiled ({s['compiles']} compiles), {s['graphs']} graphs "
             f"({s['ops']} ops), {s['breaks']} graph breaks, {s['recompiles']} recompiles, "
             f"{s['skipped']} frames run in Python",
             f"  compile time {s['compile_seconds']:.2f} s (trace {s['trace_seconds']:.2f} s, backend "
             f"{s['backend_seconds']:.2f} s); guards {s['guard_seconds'] * 1e3:.1f} ms over {s['guard_checks']} checks"]
    if s["top_breaks"]:
        lines.append("  top break reasons:")
        lines += [f"    {n:4d}  {kind}" for kind, n in s["top_breaks"][:5]]
    if out_dir is not None:
        lines.append(f"  report: {pathlib.Path(out_dir) / 'index.html'}")
    return "\n".join(lines)


def install_from_env() -> None:
    """``GRAPHJIT_REPORT=DIR``: record from now on and write the report at exit."""
    out_dir = os.environ.get("GRAPHJIT_REPORT")
    if not out_dir or record.active() is not None:
        return
    rec = start()

    def _write_at_exit() -> None:
        log = write(out_dir, rec)
        print(summary_text(log, out_dir), file=sys.stderr)

    atexit.register(_write_at_exit)

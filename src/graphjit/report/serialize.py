"""The structured log of a run: a :class:`~.record.Recorder`'s records as plain data.

Contract: :func:`serialize` returns a JSON-able ``dict`` (``graphjit_log.json`` in the
report folder) with everything the page shows, so the page can be rendered again from
the file alone (``python -m graphjit report --from LOG``):

* ``summary``: frames, compiles, graphs, ops, breaks, recompiles, skipped frames, and
  seconds in tracing, in the backend and in guard checks (entries made while recording);
* ``frames``: one per compiled code object (a user function or a resume function): its
  file, line, source (for a resume function, its decompiled code) and its compiles;
* ``compiles``: one per trace: start and duration, the recompile's failing guard (with
  its expected and actual values), the graphs, breaks and skipped frames, the guard list,
  the transformed code as Python and the resume functions it calls (decompiled);
* ``graphs`` (FX code and an op table), ``breaks`` (reason, explanation, hints, the
  instruction, how execution went on, the chain of user frames with source lines).

No text here contains a tracker's ``repr``: reasons come from ``exc.Unsupported``'s
fields, which the debug checks of ``diagnostics/logs.py`` keep free of them.
"""

from __future__ import annotations

import linecache
import re
import types
from typing import Any

from ..bytecode import format_code
from ..diagnostics.format import graph_code
from .decompile import DecompileError, decompile
from .record import CompileRecord, Recorder

VERSION = 1
_CONTEXT = 3  # source lines shown around a break
_RECOMPILE = re.compile(r"^(?P<check>.*?) \(expected (?P<expected>.*?), actual (?P<actual>.*?)\)"
                        r"(?P<more> \(and \d+ more\))?$", re.S)


def serialize(rec: Recorder) -> dict:
    """The structured log of ``rec`` (see the module docstring)."""
    out = _Log(rec)
    for c in rec.compiles:
        out.add_compile(c)
    for b in rec.other_breaks:
        out.add_break(b, None)
    return out.finish()


class _Log:
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.frames: list[dict] = []
        self.frame_ids: dict[tuple, int] = {}
        self.compiles: list[dict] = []
        self.graphs: list[dict] = []
        self.breaks: list[dict] = []
        self.skipped: list[dict] = []

    def frame(self, code: types.CodeType, qualname: str, called: type | None = None) -> dict:
        fid = self.frame_ids.get((code, called))
        if fid is None:
            fid = self.frame_ids[(code, called)] = len(self.frames)
            resume = code.co_name.startswith("__resume_at_")
            where = getattr(getattr(called, "forward", None), "__code__", code)  # a module: its forward
            self.frames.append({
                "id": fid, "name": qualname, "file": where.co_filename, "line": where.co_firstlineno,
                "kind": "resume" if resume else "function",
                "source": _python_of(code) if resume else _source_of(code),
                "compiles": [],
            })
        return self.frames[fid]

    def add_compile(self, c: CompileRecord) -> None:
        frame = self.frame(c.code, c.qualname, c.called)
        entry = c.entry
        graphs = list(getattr(entry, "graphs", None) or [])
        item: dict[str, Any] = {
            "id": c.index, "frame": frame["id"], "name": c.qualname, "start": c.start,
            "seconds": c.seconds, "backend_seconds": c.backend_seconds,
            "trace_seconds": max(c.seconds - c.backend_seconds, 0.0),
            "outcome": _outcome(c), "error": c.error,
            "recompile": _recompile(c.recompile_reason) if c.recompile_reason else None,
            "graphs": [], "breaks": [], "skipped": [str(s) for s in c.skipped],
            "guards": list(getattr(entry, "guard_labels", None) or []),
            "transformed": None, "resumes": [],
            "guard_checks": c.entry_stats.checks if c.entry_stats else None,
            "guard_hits": c.entry_stats.hits if c.entry_stats else None,
            "guard_seconds": c.entry_stats.seconds if c.entry_stats else 0.0,
            "cache": c.cache,
        }
        frame["compiles"].append(c.index)
        self.compiles.append(item)
        for g in graphs:
            item["graphs"].append(self.add_graph(g, c.index))
        for b in c.breaks:
            item["breaks"].append(self.add_break(b, c.index))
        self.skipped += [{"compile": c.index, "text": str(s)} for s in c.skipped]
        fn = getattr(entry, "fn", None)
        if isinstance(fn, types.FunctionType) and fn.__code__ is not c.code:
            item["transformed"] = _python_of(fn.__code__)
            for const in fn.__code__.co_consts:
                resume = getattr(const, "_fn", None)
                if isinstance(resume, types.FunctionType) and resume.__code__.co_name.startswith("__resume_at_"):
                    item["resumes"].append({"name": resume.__code__.co_name,
                                            "python": _python_of(resume.__code__)})

    def add_graph(self, g, compile_id: int) -> int:
        gid = len(self.graphs)
        nodes = list(g.gm.graph.nodes)
        self.graphs.append({
            "id": gid, "name": g.name, "compile": compile_id,
            "code": g.gm.code.strip(), "table": graph_code(g.gm, g.name).split("\n\n")[0],
            "ops": sum(1 for n in nodes if n.op in ("call_function", "call_method", "call_module")),
            "inputs": sum(1 for n in nodes if n.op == "placeholder"),
        })
        return gid

    def add_break(self, b, compile_id: int | None) -> int:
        bid = len(self.breaks)
        stack = [{"file": f.filename, "line": f.lineno, "name": f.name, "source": _around(f.filename, f.lineno)}
                 for f in getattr(b, "user_stack", [])]
        self.breaks.append({
            "id": bid, "compile": compile_id, "kind": b.gb_type, "reason": b.reason,
            "explanation": b.explanation, "hints": list(b.hints),
            "instruction": getattr(b, "instruction", None), "resumed": getattr(b, "resumed", None),
            "stack": stack,
        })
        return bid

    def finish(self) -> dict:
        compiles = self.compiles
        top = [c for c in compiles]
        kinds: dict[str, int] = {}
        for b in self.breaks:
            kinds[b["kind"]] = kinds.get(b["kind"], 0) + 1
        summary = {
            "frames": len(self.frames), "compiles": len(compiles), "graphs": len(self.graphs),
            "ops": sum(g["ops"] for g in self.graphs), "breaks": len(self.breaks),
            "recompiles": sum(1 for c in compiles if c["recompile"]),
            "skipped": len(self.skipped) + len(self.rec.other_skipped),
            "compile_seconds": sum(c["seconds"] for c in top),
            "backend_seconds": sum(c["backend_seconds"] for c in top),
            "trace_seconds": sum(c["trace_seconds"] for c in top),
            "guard_seconds": sum(c["guard_seconds"] for c in top),
            "guard_checks": sum(c["guard_checks"] or 0 for c in top),
            "run_seconds": self.rec.now(),
            "top_breaks": sorted(kinds.items(), key=lambda kv: -kv[1])[:10],
        }
        return {"version": VERSION, "started": self.rec.wall_start, "summary": summary,
                "frames": self.frames, "compiles": compiles, "graphs": self.graphs,
                "breaks": self.breaks, "skipped": self.skipped
                + [{"compile": None, "text": str(s)} for s in self.rec.other_skipped]}


def _outcome(c: CompileRecord) -> str:
    if c.outcome != "done":
        return c.outcome
    e = c.entry
    if hasattr(e, "guard"):
        return "compiled" if getattr(e.fn, "__code__", None) is not c.code else "passthrough"
    if hasattr(e, "reason"):
        return "runs in Python"
    return "this call in Python"


def _recompile(reason: str) -> dict:
    m = _RECOMPILE.match(reason)
    if m is None:
        return {"reason": reason, "check": reason, "expected": None, "actual": None}
    return {"reason": reason, "check": m["check"], "expected": m["expected"], "actual": m["actual"]}


def _python_of(code: types.CodeType) -> dict:
    """``{"python": source}`` or, where it cannot be decompiled, the reason and the bytecode."""
    try:
        return {"python": decompile(code), "error": None}
    except DecompileError as e:
        return {"python": None, "error": str(e), "bytecode": format_code(code)}
    except Exception as e:  # noqa: BLE001  (a decompiler bug must not lose the report)
        return {"python": None, "error": f"decompiler error {type(e).__name__}: {e}", "bytecode": format_code(code)}


def _source_of(code: types.CodeType) -> dict:
    lines = [ln for _, _, ln in code.co_lines() if ln is not None]
    first, last = code.co_firstlineno, max(lines, default=code.co_firstlineno)
    text = [(n, linecache.getline(code.co_filename, n).rstrip("\n")) for n in range(first, last + 1)]
    if not any(t for _, t in text):
        return {"lines": [], **_python_of(code)}
    return {"lines": text}


def _around(filename: str, lineno: int) -> list:
    lo = max(1, lineno - _CONTEXT)
    return [(n, linecache.getline(filename, n).rstrip("\n")) for n in range(lo, lineno + _CONTEXT + 1)
            if linecache.getline(filename, n)]

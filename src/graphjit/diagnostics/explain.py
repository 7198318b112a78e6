"""``graphjit.explain(fn)(*args, **kwargs)``: what was captured and where it broke.

It resets graphjit, runs the function once compiled with a recording backend, and returns
an :class:`ExplainOutput` whose ``str()`` reads like ``torch._dynamo.explain``'s."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from .. import cache
from ..api import compile, reset, stats
from ..exc import Unsupported
from ..runtime.dispatch import all_entries


@dataclasses.dataclass
class ExplainOutput:
    graphs: list[torch.fx.GraphModule]
    graph_count: int
    graph_break_count: int
    break_reasons: list[Unsupported]
    op_count: int
    ops_per_graph: list[list[Any]]
    out_guards: list[str]
    compile_times: str = ""
    skipped_frames: list = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, reason in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}:")
            lines.append(f"    Reason: {reason.reason}")
            if reason.explanation:
                lines.append(f"    Explanation: {reason.explanation}")
            for hint in reason.hints:
                lines.append(f"    Hint: {hint}")
            if getattr(reason, "instruction", None):
                lines.append(f"    Broke at: {reason.instruction} ({reason.resumed})")
            lines.append("    User Stack:")
            for frame in reason.user_stack:
                lines.append(f"      <FrameSummary file {frame.filename}, line {frame.lineno} in {frame.name}>")
                lines.append(f"        {frame.line}")
        if self.skipped_frames:
            lines.append("Skipped Frames (run in Python; what they call is still compiled):")
            lines.extend(f"  {frame}" for frame in self.skipped_frames)
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Ops {i}:")
            lines.extend(f"    {_op_name(op)}" for op in ops)
        lines.append("Out Guards:")
        lines.extend(f"  Guard {i}: {g}" for i, g in enumerate(self.out_guards, 1))
        return "\n".join(lines)


def _op_name(target) -> str:
    if isinstance(target, str):
        return target
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    return f"{mod}.{name}" if mod and mod not in ("builtins", "_operator") else (
        f"operator.{name}" if mod == "_operator" else name)


def explain(fn: Callable, *, backend: Any = None) -> Callable[..., ExplainOutput]:
    """``explain(fn)(*args, **kwargs)`` runs ``fn`` compiled once and reports."""
    def run(*args, **kwargs) -> ExplainOutput:
        reset()
        graphs: list[torch.fx.GraphModule] = []

        def recording(gm, example_inputs):
            graphs.append(gm)
            return (backend or (lambda g, i: g.forward))(gm, example_inputs)

        with cache.disabled():  # (explain traces: nothing is read from or written to the disk)
            compiled = compile(fn, backend=recording)
            compiled(*args, **kwargs)
        s = stats()
        ops = [[n.target for n in g.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
               for g in graphs]
        guards = [label for entry in all_entries() for label in entry.guard_labels]
        return ExplainOutput(graphs, len(graphs), s["graph_breaks"], s["break_reasons"],
                             sum(map(len, ops)), ops, guards, skipped_frames=s["skipped_frames"])

    return run

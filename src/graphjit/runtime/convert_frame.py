"""convert_frame: trace one call of a function and build a guarded cache entry.

Contract: returns a :class:`CacheEntry` whose ``fn`` gives the same result as the
original function for every call that passes ``check``; raises ``Unsupported`` (with the
user's location) when the frame cannot be captured, and ``InternalError`` for our bugs.
"""

from __future__ import annotations

import dataclasses
import dis
import inspect
import types
from typing import Any

import torch

from ..bytecode import assemble, format_code
from ..diagnostics import logs
from ..diagnostics.format import graph_code, guards_text
from ..graph.codegen import PyCodegen
from ..graph.compile import (
    CompiledGraph,
    code_overrides,
    codegen_call_graph,
    compile_subgraph,
    graph_outputs_for,
    prefix_instructions,
)
from ..graph.output_graph import OutputGraph
from ..guards.codegen import GuardFunction, build_guard_function
from ..tracer.translator import InstructionTranslator


@dataclasses.dataclass
class CacheEntry:
    """One compiled specialization of a function."""

    guard: GuardFunction
    fn: types.FunctionType
    graphs: list[CompiledGraph]
    guard_labels: list[str]

    @property
    def check(self):
        return self.guard.check

    def __repr__(self) -> str:
        return f"CacheEntry({self.fn.__qualname__}, {len(self.graphs)} graphs, {self.guard!r})"


def bind_frame_locals(fn: types.FunctionType, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The frame's initial locals for ``fn(*args, **kwargs)`` (defaults applied)."""
    ba = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    ba.apply_defaults()
    return dict(ba.arguments)


def convert_frame(fn: types.FunctionType, args: tuple, kwargs: dict, compiler_fn) -> CacheEntry | None:
    """Trace ``fn(*args, **kwargs)``; ``None`` when the frame has no tensor work."""
    code = fn.__code__
    f_locals = bind_frame_locals(fn, args, kwargs)
    global_state = {"grad_enabled": torch.is_grad_enabled(),
                    "default_dtype": torch.get_default_dtype()}
    output = OutputGraph(fn.__globals__)
    tx = InstructionTranslator(code, fn.__globals__, output, f_locals, fn.__closure__)
    tx.run()
    ret = tx.return_value
    out_nodes = graph_outputs_for([ret])
    if output.count_calls() == 0 and not out_nodes:
        return None  # nothing for a graph: run the frame as it is
    compiled = compile_subgraph(output, out_nodes, compiler_fn)
    cg = PyCodegen(code)
    cg.extend(prefix_instructions(tx.instructions))
    codegen_call_graph(cg, compiled, out_nodes)
    ret.reconstruct(cg)
    cg.return_value()
    new_code = assemble(cg.instructions, code, **code_overrides(code, cg))
    new_fn = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new_fn.__kwdefaults__ = fn.__kwdefaults__
    new_fn.__qualname__ = fn.__qualname__
    guard = build_guard_function(list(output.guards.values()), code, fn, global_state)
    labels = [label for label, _ in guard.parts]
    _log_entry(code, new_code, compiled, labels)
    return CacheEntry(guard, new_fn, [compiled], labels)


def _log_entry(code, new_code, compiled: CompiledGraph, labels: list[str]) -> None:
    logs.emit("graph_code", graph_code(compiled.gm, compiled.name))
    if logs.enabled("bytecode"):
        logs.emit("bytecode", format_code(code, title=f"ORIGINAL BYTECODE {code.co_name} "
                                                      f"{code.co_filename} {code.co_firstlineno}"))
        logs.emit("bytecode", format_code(new_code, title="MODIFIED BYTECODE"))
    logs.emit("guards", guards_text(labels))


__all__ = ["CacheEntry", "convert_frame", "bind_frame_locals", "dis"]

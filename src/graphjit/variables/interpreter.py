"""What the interpreter answers in traced code: frame objects (``sys._getframe(n)``,
``inspect.currentframe()``) and ``importlib.import_module(name)``.

**Frames.**
A library that asks for a frame reads where it was called from (pyro's ``warn_if_nan``
reads ``f_code.co_filename`` and ``f_lineno`` of its caller for a later warning;
``typing_extensions`` reads ``f_globals["__name__"]`` and ``f_locals["origin"]`` two frames
up).  While the frame asked for is one the trace is running (the compiled function or a
function inlined into it), its answer is known at trace time: :class:`FrameVariable` stands
for it.  ``f_code`` and ``f_lineno`` are constants (the code object is guarded, the line is
where that frame is now), ``f_globals`` is the module-globals tracker ``LOAD_GLOBAL`` uses,
``f_locals`` is a new dict of the frame's locals at this point (CPython 3.11's snapshot),
``f_back`` is the next traced frame.  graphjit's polyfills stand for C functions and have
no frame of their own in eager: they are skipped.  A frame above the compiled function
(its caller, which differs from call to call) is a graph break, as is a frame object that
escapes the trace.

**``importlib.import_module(name, package)``** with constant arguments is what ``import``
statements do (``handlers_load_store.IMPORT_NAME``): the module is read from
``sys.modules`` (guarded there), imported at trace time if it is not loaded yet (eager
imports it on the first call; the trace is that call; its ``ImportError`` is the
program's).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import types

from ..exc import ObservedException, observed, unsupported
from ..sources import ConstSource, GetItemSource
from .base import VariableTracker, call_python, register_builder_by_id
from .builtins import build_builtin, register
from .constant import ConstantVariable
from .dicts import DictVariable


def _caller(tx):
    """The translator of the frame that called into ``tx`` (polyfills skipped), or None."""
    parent = tx.parent
    while parent is not None and parent.trusted:
        parent = parent.parent
    return parent


def frame_at(tx, depth: int) -> "FrameVariable":
    """``sys._getframe(depth)`` as called by the code ``tx`` runs."""
    frame = tx
    while frame.trusted and frame.parent is not None:
        frame = frame.parent
    for _ in range(depth):
        up = _caller(frame)
        if up is None:
            raise unsupported("frame above the compiled function", f"sys._getframe({depth})",
                              "The frame asked for is the compiled function's caller, which is not "
                              "known while tracing; the call runs in Python.")
        frame = up
    return FrameVariable(frame)


class FrameVariable(VariableTracker):
    """A frame the trace is running (see the module docstring)."""

    def __init__(self, frame_tx, **kwargs) -> None:
        super().__init__(**kwargs)
        self.frame_tx = frame_tx

    def _repr_body(self) -> str:
        return f"{self.frame_tx.code.co_name} @ line {self.frame_tx.lineno}"

    def python_type(self) -> type:
        return types.FrameType

    def var_getattr(self, tx, name: str) -> VariableTracker:
        frame = self.frame_tx
        if name == "f_code":
            return ConstantVariable(frame.code)
        if name == "f_lineno":
            return ConstantVariable(frame.lineno)
        if name == "f_globals":
            return tx.output.globals_tracker(tx, frame.f_globals)
        if name == "f_locals":
            return DictVariable(self._locals(tx))
        if name == "f_back":
            up = _caller(frame)
            if up is None:
                raise unsupported("frame above the compiled function", "frame.f_back",
                                  "The compiled function's caller is not known while tracing.")
            return FrameVariable(up)
        if name == "__class__":
            return VariableTracker.build(tx, types.FrameType)
        if hasattr(types.FrameType, name):
            raise unsupported("frame attribute", f"frame.{name}",
                              "Only f_code, f_lineno, f_globals, f_locals and f_back are read in traced code.")
        raise observed(AttributeError, f"'frame' object has no attribute '{name}'")

    def _locals(self, tx) -> dict:
        """The frame's bound locals and cell contents, in ``co_varnames`` order first."""
        frame, out = self.frame_tx, {}
        code = frame.code
        for name in (*code.co_varnames, *code.co_cellvars, *code.co_freevars):
            if name in out or name in frame.deleted_locals:
                continue
            cell = frame.cells.get(name)
            if cell is not None:
                try:
                    out[name] = cell.load(tx)
                except ObservedException:  # an empty cell is left out, as in CPython's snapshot
                    pass
                continue
            var = frame.local(name)
            if var is not None:
                out[name] = var
        return out

    def reconstruct(self, cg) -> None:
        raise unsupported("frame object escapes", f"frame of {self.frame_tx.code.co_name}",
                          "A frame object read in traced code cannot leave it.")


@register(sys._getframe, pure=False)
def _getframe(tx, args, kwargs):
    if kwargs or len(args) > 1 or (args and not args[0].is_python_constant()):
        return None
    depth = args[0].as_python_constant() if args else 0
    if not isinstance(depth, int):
        raise observed(TypeError, f"'{type(depth).__name__}' object cannot be interpreted as an integer")
    return frame_at(tx, depth)


def _currentframe(tx, args, kwargs):
    """``inspect.currentframe()``: the caller's frame (a Python function in ``inspect``,
    modelled like the C function it calls)."""
    if args or kwargs:
        return None
    return frame_at(tx, 0)


register(inspect.currentframe, pure=False)(_currentframe)


@register(importlib.import_module, pure=False)
def _import_module(tx, args, kwargs):
    bound = {**dict(zip(("name", "package"), args)), **kwargs}  # (bound already: arg_binding)
    if not all(v.is_python_constant() for v in bound.values()):
        return None
    name = bound["name"].as_python_constant()
    package = bound["package"].as_python_constant() if "package" in bound else None
    if not isinstance(name, str):
        return None  # (import_module's own error, at run time)
    if name.startswith("."):
        if not package:
            raise observed(TypeError, f"the 'package' argument is required to perform a relative import for {name!r}")
        name = call_python("importlib.util.resolve_name", importlib.util.resolve_name, name, package)
    if sys.modules.get(name) is None:
        call_python("import", importlib.import_module, name)
    return VariableTracker.build(tx, sys.modules[name], GetItemSource(ConstSource(sys.modules, "sys.modules"), name))


@register_builder_by_id(inspect.currentframe, importlib.import_module)
def _build_modelled_function(tx, value, source):
    """Python functions of the standard library modelled here (otherwise opaque)."""
    return build_builtin(tx, value, source)

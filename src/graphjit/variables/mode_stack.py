"""The process's torch-function state, outside traces: the real mode stack (read, cleared
while graphjit traces, set after a graph), the source of a mode active at the call, and
what compiled graphs and guards run under.  The symbolic state a trace keeps is
``torch_modes.TorchFunctionState``; this module holds what the runtime and the guards
need of it (``runtime/convert_frame``, ``graph/compile``, ``graph/breaks``).

Contract:

* :func:`torch_function_cleared` (around a trace, its guard building and its compile)
  leaves the stack and the enable flags as it found them, however the block ends.
* :data:`FUNCTION_MODE_STACK` is the real stack as a list the side-effect replay writes
  (``stack[:] = [modes]``).
* :func:`without_torch_function` wraps a compiled graph: it runs under
  ``DisableTorchFunction`` when traced under modes (the graph holds what their handlers
  called), with ``__torch_function__`` subclass inputs passed as plain tensors.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode

from ..bytecode.instruction import Instruction, create_instruction
from ..sources import GuardScope, Source

_DISABLED_IMPL = torch._C._disabled_torch_function_impl


# -- sources -----------------------------------------------------------------------------

class FunctionModeSource(Source):
    """``torch._C._get_function_stack_at(index)``: a mode active at the call."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other) -> bool:
        return type(other) is FunctionModeSource and other.index == self.index

    def __hash__(self) -> int:
        return hash(("function mode", self.index))

    def display(self) -> str:
        return f"torch_function_mode_stack[{self.index}]"

    def render(self, scope: GuardScope) -> str:
        return f"{scope.ref(torch._C._get_function_stack_at)}({self.index})"

    def reconstruct(self) -> list[Instruction]:
        return [create_instruction("PUSH_NULL"),
                create_instruction("LOAD_CONST", argval=torch._C._get_function_stack_at),
                create_instruction("LOAD_CONST", argval=self.index),
                create_instruction("PRECALL", arg=1), create_instruction("CALL", arg=1)]

    @property
    def is_global(self) -> bool:
        return True


# -- the real stack ----------------------------------------------------------------------

class _FunctionModeStack:
    """The process's torch-function mode stack as a list-like object the side-effect
    replay writes (``stack[:] = [modes]``, ``stack.append(mode)``)."""

    def __setitem__(self, index, modes) -> None:
        if index != slice(None):
            raise TypeError("only the whole torch-function mode stack can be set")
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        for mode in modes:
            torch._C._push_on_torch_function_stack(mode)

    def append(self, mode) -> None:
        torch._C._push_on_torch_function_stack(mode)

    def __repr__(self) -> str:
        return "<the torch-function mode stack>"


FUNCTION_MODE_STACK = _FunctionModeStack()


def pop_function_modes(n: int) -> None:
    """Pop ``n`` modes: what the ``__exit__`` of ``n`` ``with Mode():`` blocks do when an
    instruction run at a graph break inside them raises."""
    for _ in range(n):
        torch._C._pop_torch_function_stack()


def is_mode_exit(value: Any) -> bool:
    """Is ``value`` the bound ``__exit__`` of a ``with Mode():`` block (run time)?"""
    return isinstance(value, types.MethodType) and value.__func__ is TorchFunctionMode.__exit__


def function_modes() -> tuple:
    """The torch-function modes active now, bottom first."""
    return tuple(torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack()))


@contextlib.contextmanager
def torch_function_cleared() -> Iterator[tuple]:
    """Run with the torch-function mode stack empty and subclass dispatch off (tracing,
    building guards, compiling: a mode or subclass of the call must not see graphjit's
    own tensor work, fake propagation included); the stack and the flags are put back
    afterwards however the block ends."""
    saved, state = function_modes(), torch._C._get_torch_function_state()
    for _ in saved:
        torch._C._pop_torch_function_stack()
    if state == torch._C._TorchFunctionState.ENABLED:
        torch._C._set_torch_function_state(torch._C._TorchFunctionState.SUBCLASSES_DISABLED)
    try:
        yield saved
    finally:
        torch._C._set_torch_function_state(state)
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        for mode in saved:
            torch._C._push_on_torch_function_stack(mode)


@contextlib.contextmanager
def torch_function_as_at_call(state) -> Iterator[None]:
    """Inside :func:`torch_function_cleared`: the stack and flags as the call had them
    (``state``: the trace's ``TorchFunctionState``; a new entry's guard checked against
    the call it was traced from)."""
    old = torch._C._get_torch_function_state()
    for mode in state.initial_modes:
        torch._C._push_on_torch_function_stack(mode)
    torch._C._set_torch_function_state(
        torch._C._TorchFunctionState.ENABLED if state.initial_subclasses else
        torch._C._TorchFunctionState.SUBCLASSES_DISABLED if state.initial_modes_enabled else
        torch._C._TorchFunctionState.ALL_DISABLED)
    try:
        yield
    finally:
        torch._C._set_torch_function_state(old)
        for _ in state.initial_modes:
            torch._C._pop_torch_function_stack()


def runtime_context(initial_modes: bool):
    """What a compiled graph runs under (``None``: nothing): ``DisableTorchFunction`` when
    the trace ran under modes (the graph holds what their handlers called)."""
    return torch._C.DisableTorchFunction if initial_modes else None


def without_torch_function(fn, context, plain: tuple[int, ...] = ()):
    """``fn`` run under ``context()`` (see :func:`runtime_context`; ``None``: as it is),
    with the inputs at positions ``plain`` (``__torch_function__`` subclasses) passed as
    plain tensors: the graph holds what their ``__torch_function__`` produced."""
    if not plain:
        def run(*args):
            with context():
                return fn(*args)
    else:
        def run(*args):
            args = list(args)
            for i in plain:
                args[i] = args[i].as_subclass(torch.Tensor)
            if context is None:
                return fn(*args)
            with context():
                return fn(*args)

    run.__wrapped__ = fn
    return run


_DEFAULT_IMPL = torch.Tensor.__torch_function__.__func__


def overrides_torch_function(cls: type) -> bool:
    """Does an object of ``cls`` take part in ``__torch_function__`` dispatch (as C's
    ``check_has_torch_function``: not a plain ``Tensor``/``Parameter``, and a
    ``__torch_function__`` that is not the disabled one)?  A traceable wrapper subclass
    (``__tensor_flatten__``) keeping ``Tensor``'s default does not: as in TorchDynamo,
    its ``__torch_dispatch__`` runs on fake inner tensors instead, and AOTAutograd
    flattens it."""
    if cls is torch.Tensor or cls is torch.nn.Parameter:
        return False
    impl = getattr(cls, "__torch_function__", _DISABLED_IMPL)
    func = getattr(impl, "__func__", impl)
    if func is _DISABLED_IMPL:
        return False
    return not (func is _DEFAULT_IMPL and hasattr(cls, "__tensor_flatten__"))




__all__ = ["FunctionModeSource", "FUNCTION_MODE_STACK", "pop_function_modes", "is_mode_exit", "function_modes",
           "torch_function_cleared", "torch_function_as_at_call", "runtime_context", "without_torch_function",
           "overrides_torch_function"]

"""Autograd-mode context managers: ``torch.no_grad()``, ``torch.enable_grad()``,
``torch.set_grad_enabled(b)`` and ``torch.inference_mode(b)``.

Grad modes: entering and exiting record ``torch._C._set_grad_enabled`` in the graph and
change the traced grad mode (``OutputGraph.grad_enabled``).  A ``with`` block split by a
graph break leaves its ``__exit__`` on the stack as a constant :class:`GradModeExit`,
which the resume function's trace recognises (see ``graph/breaks.py``).

Inference mode: entering records ``_enter_inference_mode(b)`` (its result, the C++ guard
object, is the argument of the ``_exit_inference_mode`` node that leaving records) and
switches ``OutputGraph.inference_mode``, under which fake tensors are computed, so
``is_inference()`` and ``requires_grad`` of the results are eager's.  The enter/exit pair
always lies in one graph: a graph break inside the block is not resumable there (its
``__exit__`` is an :class:`InferenceModeExitVariable`), so the graph ends before the
``with`` statement."""

from __future__ import annotations

import torch

from ..exc import ObservedException, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource
from .base import VariableTracker, register_builder
from .constant import ConstantVariable
from ..diagnostics.describe import describe


class GradModeVariable(VariableTracker):
    """``torch.no_grad()``, ``torch.enable_grad()``, ``torch.set_grad_enabled(b)`` as
    context managers: entering and exiting record ``_set_grad_enabled`` in the graph."""

    def __init__(self, target: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.target = target
        self.previous: bool | None = None
        self.entered = False  # set_grad_enabled(b) switches the mode when it is called

    def _repr_body(self) -> str:
        return f"grad_enabled={self.target}"

    def reconstruct(self, cg) -> None:
        if self.entered:
            raise unsupported("set_grad_enabled object across a graph break",
                              "torch.set_grad_enabled(...) is live at a graph break")
        cg.push_null()
        cg.load_const(torch.enable_grad if self.target else torch.no_grad)
        cg.call(0)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "clone":  # _DecoratorContextManager.clone: a fresh manager of the same kind
            return VariableTracker.build(tx, torch.enable_grad if self.target else torch.no_grad)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        """``no_grad()(f)``, ``set_grad_enabled(b)(f)``: the manager as a decorator
        (``_DecoratorContextManager.__call__``) wraps ``f`` so that each call runs in this
        mode; ``set_grad_enabled``'s ``__call__`` first restores the mode its construction
        switched."""
        if len(args) != 1 or kwargs:
            return super().call_function(tx, args, kwargs)
        if self.entered:
            self.exit(tx)
            self.entered = False
        return GradModeWrappedVariable(self.target, args[0])

    def enter(self, tx) -> VariableTracker:
        if self.entered:
            return ConstantVariable(None)
        self.previous = tx.output.grad_enabled
        _set_grad(tx, self.target)
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        _set_grad(tx, self.previous)
        return ConstantVariable(None)


class GradModeWrappedVariable(VariableTracker):
    """A function decorated by a grad-mode manager (``@torch.no_grad()``, ``no_grad(f)``,
    ``set_grad_enabled(b)(f)``): a call enters the mode, calls the function and leaves the
    mode, as torch's ``context_decorator`` wrapper does; its attributes are the function's
    (``functools.wraps``).  Rebuilt as ``no_grad()(f)``/``enable_grad()(f)`` if it escapes."""

    def __init__(self, target: bool, fn: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.target, self.fn = target, fn

    def _repr_body(self) -> str:
        return f"grad_enabled={self.target}, {self.fn!r}"

    def python_type(self) -> type:
        return type(lambda: None)

    def children(self) -> list[VariableTracker]:
        return [self.fn]

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        code = getattr(self.fn, "get_code", None)
        if code is not None and code().co_flags & 0x20:  # torch wraps generator functions apart
            raise unsupported("grad-mode decorator on a generator function", describe(self.fn))
        ctx = GradModeVariable(self.target)
        ctx.enter(tx)
        try:
            result = self.fn.call_function(tx, args, kwargs)
        except ObservedException:
            ctx.exit(tx)
            raise
        ctx.exit(tx)
        return result

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__wrapped__":
            return self.fn
        return self.fn.var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(grad_mode_decorated)
        cg.load_const(self.target)
        cg.reconstruct(self.fn)
        cg.call(2)


def grad_mode_decorated(target: bool, fn):
    """``fn`` decorated by ``enable_grad()`` or ``no_grad()``, made where it escapes."""
    return (torch.enable_grad if target else torch.no_grad)()(fn)


grad_mode_decorated.__module__ = "graphjit_runtime"


def set_grad_mode(tx, enabled: bool) -> None:
    """Switch the traced grad mode (``torch._C._set_grad_enabled(b)`` called by the user's
    code): a graph node, also where the mode is already ``b`` (the call the user wrote, as
    torch.compile records it), and ``torch.is_grad_enabled()`` answers ``b`` from here on."""
    _set_grad(tx, enabled, always=True)


def _set_grad(tx, enabled: bool, always: bool = False) -> None:
    """Record a change of grad mode (a ``no_grad``/``enable_grad`` block's entry or exit:
    none where the mode is already ``enabled``)."""
    out = tx.output
    if always or out.grad_enabled != enabled:
        out.graph.create_node("call_function", torch._C._set_grad_enabled, (enabled,))
        out.grad_enabled = enabled


class GradModeExit:
    """The run-time ``__exit__`` of a grad-mode ``with`` block that a graph break split:
    generated code leaves it on the stack, and calling it restores ``previous``."""

    __slots__ = ("previous",)
    __graphjit_portable__ = True  # (a value: the persistent cache writes it by content)

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def __call__(self, *exc_info) -> None:
        torch._C._set_grad_enabled(self.previous)

    def __repr__(self) -> str:
        return f"<grad mode exit: restore {self.previous}>"


_EXITS = {True: GradModeExit(True), False: GradModeExit(False)}


class _ModeExitVariable(VariableTracker):
    """The ``__exit__`` that BEFORE_WITH pushes for a modelled mode: calling it leaves
    ``ctx``'s mode."""

    def __init__(self, ctx: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ctx = ctx

    def _repr_body(self) -> str:
        return repr(self.ctx)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.ctx.exit(tx)


class WithExitVariable(_ModeExitVariable):
    """The ``__exit__`` of a grad-mode block: rebuilt after a break (a resume point)."""

    def reconstruct(self, cg) -> None:
        cg.load_const(_EXITS[self.ctx.previous])

    @staticmethod
    def from_runtime(tx, value: GradModeExit) -> "WithExitVariable":
        ctx = GradModeVariable(tx.output.grad_enabled)
        ctx.previous = value.previous
        return WithExitVariable(ctx)


class InferenceModeVariable(VariableTracker):
    """``torch.inference_mode(mode)``: entering and leaving record the enter/exit pair in
    the graph when ``mode`` differs from the traced inference mode (nested blocks of the
    same mode are no-ops, as in eager)."""

    def __init__(self, mode: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.stack: list[tuple[bool, object]] = []  # (previous mode, enter node or None)

    def _repr_body(self) -> str:
        return f"inference_mode={self.mode}"

    def python_type(self) -> type:
        return torch.inference_mode

    def reconstruct(self, cg) -> None:
        if self.stack:
            raise unsupported("inference_mode block across a graph break",
                              "a torch.inference_mode() block is live at a graph break")
        cg.push_null()
        cg.load_const(torch.inference_mode)
        cg.load_const(self.mode)
        cg.call(1)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "clone":  # _DecoratorContextManager.clone: a fresh manager, same mode
            return _InferenceModeClone(self.mode)
        if name == "mode":
            return ConstantVariable(self.mode)
        if name == "__class__":
            return VariableTracker.build(tx, torch.inference_mode)
        return super().var_getattr(tx, name)

    def enter(self, tx) -> VariableTracker:
        out = tx.output
        previous = out.inference_mode
        node = None
        if previous != self.mode:
            node = out.graph.create_node("call_function", _enter_inference_mode, (self.mode,))
            out.inference_mode = self.mode
        self.stack.append((previous, node))
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        previous, node = self.stack.pop()
        if node is not None:
            tx.output.graph.create_node("call_function", _exit_inference_mode, (node,))
            tx.output.inference_mode = previous
        return ConstantVariable(None)


_enter_inference_mode = torch.autograd.grad_mode._enter_inference_mode
_exit_inference_mode = torch.autograd.grad_mode._exit_inference_mode


class _InferenceModeClone(VariableTracker):
    """``inference_mode_instance.clone`` (what ``@torch.inference_mode()`` calls on each
    call of the function it decorates): calling it makes a fresh manager."""

    def __init__(self, mode: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.mode = mode

    def _repr_body(self) -> str:
        return f"inference_mode({self.mode}).clone"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if args or kwargs:
            return super().call_function(tx, args, kwargs)
        return InferenceModeVariable(self.mode)


class InferenceModeExitVariable(_ModeExitVariable):
    """The ``__exit__`` of ``torch.inference_mode``.  Not a :class:`WithExitVariable`: a
    graph break cannot resume inside the block."""

    def reconstruct(self, cg) -> None:
        raise unsupported("inference_mode block across a graph break",
                          "the __exit__ of a torch.inference_mode() block is live at a graph break")


@register_builder(torch.inference_mode, exact=True)
def _build_inference_mode(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
        # the mode is read on every clone(): guard it as a constant attribute
        tx.output.add_guard(AttrSource(source, "mode"), GuardKind.CONSTANT_MATCH, value.mode)
    return InferenceModeVariable(bool(value.mode), source=source)


@register_builder(torch.no_grad, torch.enable_grad, exact=True)
def _build_grad_mode(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
    return GradModeVariable(type(value) is torch.enable_grad, source=source)


@register_builder(GradModeExit, exact=True)
def _build_grad_mode_exit(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return WithExitVariable.from_runtime(tx, value)

"""Grad-mode context managers: ``torch.no_grad()``, ``torch.enable_grad()``,
``torch.set_grad_enabled(b)``.

Entering and exiting record ``torch._C._set_grad_enabled`` in the graph and change the
traced grad mode (``OutputGraph.grad_enabled``).  A ``with`` block split by a graph break
leaves its ``__exit__`` on the stack as a constant :class:`GradModeExit`, which the
resume function's trace recognises (see ``graph/breaks.py``)."""

from __future__ import annotations

import torch

from ..exc import unsupported
from ..guards.guard import GuardKind
from .base import VariableTracker, register_builder
from .constant import ConstantVariable


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

    def enter(self, tx) -> VariableTracker:
        if self.entered:
            return ConstantVariable(None)
        self.previous = tx.output.grad_enabled
        _set_grad(tx, self.target)
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        _set_grad(tx, self.previous)
        return ConstantVariable(None)


def _set_grad(tx, enabled: bool) -> None:
    out = tx.output
    if out.grad_enabled != enabled:
        out.graph.create_node("call_function", torch._C._set_grad_enabled, (enabled,))
        out.grad_enabled = enabled


class GradModeExit:
    """The run-time ``__exit__`` of a grad-mode ``with`` block that a graph break split:
    generated code leaves it on the stack, and calling it restores ``previous``."""

    __slots__ = ("previous",)

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def __call__(self, *exc_info) -> None:
        torch._C._set_grad_enabled(self.previous)

    def __repr__(self) -> str:
        return f"<grad mode exit: restore {self.previous}>"


_EXITS = {True: GradModeExit(True), False: GradModeExit(False)}


class WithExitVariable(VariableTracker):
    """The ``__exit__`` that BEFORE_WITH pushes for a supported context manager."""

    def __init__(self, ctx: GradModeVariable, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ctx = ctx

    def _repr_body(self) -> str:
        return repr(self.ctx)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.ctx.exit(tx)

    def reconstruct(self, cg) -> None:
        cg.load_const(_EXITS[self.ctx.previous])

    @staticmethod
    def from_runtime(tx, value: GradModeExit) -> "WithExitVariable":
        ctx = GradModeVariable(tx.output.grad_enabled)
        ctx.previous = value.previous
        return WithExitVariable(ctx)


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

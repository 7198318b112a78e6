"""``torch.Size`` whose items may be symbolic (``x.shape`` of a tensor with a dynamic
dimension).

A ``torch.Size`` of numbers only is a constant (``constant.ConstantVariable``); one with
a symbolic item is a :class:`SizeVariable`: a tuple tracker of ``SymNodeVariable`` and
constant items whose type is ``torch.Size``.  It keeps ``torch.Size``'s own semantics, so
a value eager computes as a ``torch.Size`` is one after a dynamic recompile too:

* slicing (``x.shape[1:]``), ``size + tuple``, ``tuple + size``, ``size * n`` and
  ``n * size`` give a ``torch.Size`` (``torch.Size.__add__``/``__radd__``/``__mul__``);
  a plain tuple or a named tuple with a plain tuple gives a plain tuple;
* ``numel()`` is the product of the items (a graph node when one is symbolic);
* where it escapes the graph it is rebuilt as ``torch.Size((...))`` from the graph's
  outputs for its symbolic items (``TupleVariable.reconstruct``), Python ``int``\\ s at
  run time.

:func:`formatted_value` is what code that formats a value (an f-string) gets: symbolic
numbers, also inside tuples and sizes, specialized to their values with a guard, as
torch.compile's ``FORMAT_VALUE`` does.
"""

from __future__ import annotations

import operator

import torch

from .base import LazyVariableTracker, MethodVariable, VariableTracker
from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import GetItemSource
from .base import register_builder
from .constant import ConstantVariable, build_constant
from .sequences import BaseSequenceVariable, ListVariable, TupleVariable
from .sym_node import SymNodeVariable, sym_call


class SizeVariable(TupleVariable):
    """A ``torch.Size``; ``items`` are ``SymNodeVariable``\\ s and ``ConstantVariable`` ints."""

    def __init__(self, items: list[VariableTracker], **kwargs) -> None:
        kwargs.pop("namedtuple_cls", None)
        super().__init__(items, namedtuple_cls=torch.Size, **kwargs)

    def new_like(self, items: list[VariableTracker]) -> "SizeVariable":
        return SizeVariable(items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(torch.Size, name, None)):
            return MethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "numel" and not args and not kwargs:
            return size_numel(tx, self.items)
        return super().call_method(tx, name, args, kwargs)


@register_builder(torch.Size)
def _build_size(tx, value: torch.Size, source):
    """A ``torch.Size`` read from outside the trace: a constant (guarded equal), or, when
    the shape policy makes one of its numbers symbolic (a size that changed between calls
    of a resume function taking ``x.shape``), a :class:`SizeVariable` of its items, each
    guarded or symbolic by itself."""
    if source is None or not tx.output.numbers_vary(value, source):
        return build_constant(tx, value, source)
    tx.output.add_guard(source, GuardKind.LENGTH_CHECK, value)  # (its type too)
    items = [VariableTracker.build(tx, v, GetItemSource(source, i), realize=True) for i, v in enumerate(value)]
    return SizeVariable(items, source=source)


def size_numel(tx, items: list[VariableTracker]) -> VariableTracker:
    """The product of ``items`` (``torch.Size.numel``): a constant, or a graph node."""
    total: VariableTracker = ConstantVariable(1)
    for item in items:
        if isinstance(total, ConstantVariable) and isinstance(item, ConstantVariable):
            total = ConstantVariable(total.value * item.value)
        else:
            total = sym_call(tx, operator.mul, [total, item])
    return total


def as_size_operand(var: VariableTracker) -> VariableTracker:
    """A constant ``torch.Size`` as a :class:`SizeVariable` (an operand of ``+`` with one)."""
    if isinstance(var, ConstantVariable) and type(var.value) is torch.Size:
        return SizeVariable([ConstantVariable(v) for v in var.value])
    return var


def concatenation(left: BaseSequenceVariable, right: BaseSequenceVariable) -> BaseSequenceVariable | None:
    """``left + right`` of two tuples where one is a ``torch.Size``: a ``torch.Size`` (its
    ``__add__`` and ``__radd__``); ``None`` when neither is one."""
    if not (isinstance(left, SizeVariable) or isinstance(right, SizeVariable)):
        return None
    if not (issubclass(left.python_type(), tuple) and issubclass(right.python_type(), tuple)):
        return None  # the caller raises eager's TypeError
    return SizeVariable(left.items + right.items)


def formatted_value(var: VariableTracker, what: str = "formatting a non-constant"):
    """The Python value of ``var`` for code that formats it (an f-string, ``str.format``):
    a constant, or a symbolic number or a tuple, list or ``torch.Size`` holding some,
    whose symbolic numbers are specialized (guarded), as torch.compile does.  Raises a
    break naming the value's type for anything else."""
    var = var.realize() if isinstance(var, LazyVariableTracker) else var
    if var.is_python_constant():
        return var.as_python_constant()
    if isinstance(var, SymNodeVariable):
        return var.evaluate()
    if isinstance(var, (TupleVariable, ListVariable)):
        values = [formatted_value(item, what) for item in var.items]
        cls = var.python_type()
        return cls._make(values) if hasattr(cls, "_make") else cls(values)
    raise unsupported(what, f"a {_type_name(var)} value", "Formatting it needs its value in Python.")


def _type_name(var: VariableTracker) -> str:
    try:
        return var.python_type().__name__
    except Exception:  # noqa: BLE001 (a tracker that cannot say: name its kind of value)
        return "Python"


def holds_symbolic_numbers(var: VariableTracker) -> bool:
    """Whether ``var`` is a symbolic number or a tuple or list holding one (at any depth)."""
    var = var.realize() if isinstance(var, LazyVariableTracker) else var
    if isinstance(var, SymNodeVariable):
        return True
    return isinstance(var, (TupleVariable, ListVariable)) and any(holds_symbolic_numbers(v) for v in var.items)

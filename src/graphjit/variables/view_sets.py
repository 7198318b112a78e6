"""Dict views as sets: ``d.keys()`` and ``d.items()`` with ``& | - ^``, comparisons
(``== != < <= > >=``) and ``isdisjoint``, against sets, frozensets, user set subclasses,
other views and any iterable.

CPython computes these in ``dictobject.c`` (``dictviews_or``, ``dictviews_and``...), and the
order a resulting set iterates in depends on exactly how it was built (``d.keys() | s`` is
``PySet_New(d)`` then ``update(s)``; ``s & d.keys()`` iterates the smaller operand).  So
the operation is not re-derived here: the views' dicts are made again as real dicts with
the same keys in the same order (an items view's values must be constants), the real
operator runs on the real views at trace time, and a set result keeps that computation
as its recipe (``("binop", name, left, right)``): where it escapes it is computed again
the same way, so its iteration order is eager's.  An error (an unhashable value) is the
program's own.
"""

from __future__ import annotations

import operator
from typing import Any

from ..exc import unsupported
from .base import VariableTracker, call_python
from .constant import ConstantVariable, is_constant_value
from .dicts import DictViewVariable, key_of
from .sets import SetVariable, recipe_arg
from ..diagnostics.describe import describe

#: the operators a view takes as a set, by the name a recipe records
VIEW_SET_OPERATORS = {
    "or_": operator.or_, "and_": operator.and_, "sub": operator.sub, "xor": operator.xor,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
}


def is_set_view(var: VariableTracker) -> bool:
    """A keys or items view (values views are not set-like)."""
    return isinstance(var, DictViewVariable) and var.kind in ("keys", "items")


def real_view(tx, view: DictViewVariable) -> Any:
    """A real view of a real dict with the view's keys (and, for an items view, its
    values as constants) in the dict's order."""
    items = view.dict_var.realize_items(tx)
    if not all(is_constant_value(k) or isinstance(k, type) for k in items):
        raise unsupported("set operation on a view of non-constant keys", describe(view),
                          "Tensor and object keys are hashed by identity when the code runs.")
    if view.kind == "keys":
        return dict.fromkeys(items).keys()
    values = {}
    for k, v in items.items():
        if not v.is_python_constant():
            raise unsupported("set operation on an items view with non-constant values", describe(v),
                              "The pairs of the view must be hashed as eager hashes them.")
        values[k] = v.as_python_constant()
    return values.items()


def _operand(tx, var: VariableTracker) -> tuple[Any, tuple]:
    """``(real value, recipe)`` of an operand."""
    if is_set_view(var):
        value = real_view(tx, var)
        return value, ("const", value)
    if isinstance(var, SetVariable):
        return (var.keys if var.source is None else type(var.keys)(var.keys)), recipe_arg(tx, var)
    if var.is_python_constant():
        value = var.as_python_constant()
        return value, ("const", value)
    value = tuple(key_of(item, tx) for item in tx.make_iterator(var).unpack(tx))
    if not all(is_constant_value(k) or isinstance(k, type) for k in value):
        raise unsupported("set operation of a view with non-constant items", describe(var))
    return value, ("const", value)


def view_set_operation(tx, op, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    """``left <op> right`` where one side is a keys or items view."""
    name = next((n for n, f in VIEW_SET_OPERATORS.items() if f is op), None)
    if name is None:
        raise unsupported("operator on a dict view", f"{getattr(op, '__name__', op)}")
    lvalue, lrecipe = _operand(tx, left)
    rvalue, rrecipe = _operand(tx, right)
    result = call_python(name, op, lvalue, rvalue)
    if isinstance(result, (set, frozenset)):
        return SetVariable(result, frozen=type(result) is frozenset,
                           recipe=[("binop", name, lrecipe, rrecipe)])
    return VariableTracker.build(tx, result) if result is not NotImplemented else ConstantVariable(result)


def view_isdisjoint(tx, view: DictViewVariable, other: VariableTracker) -> VariableTracker:
    """``view.isdisjoint(other)``."""
    ovalue, _ = _operand(tx, other)
    return ConstantVariable(call_python("isdisjoint", real_view(tx, view).isdisjoint, ovalue))


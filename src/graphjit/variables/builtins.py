"""Python builtins and the ``operator`` module.

Handlers are registered next to their definition (``@register(len)``).  A builtin with
only constant arguments and no handler is folded when it is pure (``PURE_BUILTINS``);
an operator with a tensor argument is recorded in the graph with the ``operator``
function as target, as TorchDynamo does (``operator.add``, ``operator.getitem``).
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Callable

import torch

from ..exc import unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .sequences import BaseSequenceVariable, ListVariable, SliceVariable, TupleVariable

_HANDLERS: dict[Any, Callable] = {}

PURE_BUILTINS = {
    abs, all, any, bool, chr, divmod, float, hash, hex, int, len, max, min, oct, ord, pow,
    repr, round, sorted, str, sum, tuple, list, isinstance, issubclass, callable, complex,
    range, slice, bin, format, reversed, enumerate, zip, frozenset,
}
PURE_MODULES = (operator, math)


def register(*fns):
    """Register a handler ``handler(tx, args, kwargs) -> VariableTracker`` for ``fns``."""

    def deco(handler):
        for fn in fns:
            assert fn not in _HANDLERS, f"double registration of {fn}"
            _HANDLERS[fn] = handler
        return handler

    return deco


class BuiltinVariable(VariableTracker):
    """A builtin function (``len``, ``isinstance``, ``operator.add``, ``math.sqrt``)."""

    def __init__(self, fn: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return call_builtin(tx, self.fn, list(args), dict(kwargs))


def is_pure_builtin(fn: Any) -> bool:
    if fn in _HANDLERS or fn in PURE_BUILTINS:
        return True
    mod = getattr(fn, "__module__", None)
    return mod in ("_operator", "operator", "math")


def call_builtin(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """Call builtin ``fn``: its handler, or constant folding, or a graph break."""
    handler = _HANDLERS.get(fn)
    if handler is not None:
        result = handler(tx, args, kwargs)
        if result is not None:
            return result
    if any(a.is_tensor() for a in [*args, *kwargs.values()]):
        if getattr(fn, "__module__", None) in ("_operator", "operator"):
            return tx.output.call(tx, "call_function", fn, args, kwargs)
        raise unsupported("builtin on a tensor", f"{_name(fn)}() with a tensor argument",
                          "This builtin needs the tensor's values in Python.")
    if is_pure_builtin(fn) and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        try:
            value = fn(*[a.as_python_constant() for a in args],
                       **{k: v.as_python_constant() for k, v in kwargs.items()})
        except Exception as e:
            raise unsupported("builtin raised at trace time", f"{_name(fn)}: {type(e).__name__}: {e}",
                              "Running the frame eagerly so the error is raised as in eager mode.") from None
        return VariableTracker.build(tx, value)
    raise unsupported("unsupported builtin call", f"{_name(fn)}({', '.join(map(repr, args))})",
                      f"graphjit does not trace {_name(fn)} with these arguments.")


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))


# -- binary and unary operators (used by the BINARY_OP/COMPARE_OP handlers too) -----------

def binary_op(tx, op: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    """``op(left, right)`` for any trackers: graph node, folded constant, or sequence op."""
    if left.is_tensor() or right.is_tensor():
        if op in (operator.is_, operator.is_not):
            return _identity(op, left, right)
        return tx.output.call(tx, "call_function", op, [left, right], {})
    if isinstance(left, BaseSequenceVariable) or isinstance(right, BaseSequenceVariable):
        return _sequence_op(tx, op, left, right)
    if left.is_python_constant() and right.is_python_constant():
        try:
            return VariableTracker.build(tx, op(left.as_python_constant(), right.as_python_constant()))
        except Exception as e:
            raise unsupported("operator raised at trace time", f"{_name(op)}: {type(e).__name__}: {e}",
                              "Running the frame eagerly so the error is raised as in eager mode.") from None
    if op in (operator.is_, operator.is_not):
        return _identity(op, left, right)
    raise unsupported("unsupported operand types", f"{_name(op)}({left!r}, {right!r})")


def _identity(op, left, right) -> VariableTracker:
    """``is``/``is not``: a tensor is never None/a constant; two trackers of the same
    graph node are the same object."""
    same = None
    if left.is_tensor() and right.is_tensor():
        same = left.node is right.node
    elif left.is_tensor() or right.is_tensor():
        same = False
    if same is None:
        raise unsupported("identity comparison", f"{left!r} is {right!r}")
    return ConstantVariable(same if op is operator.is_ else not same)


def _sequence_op(tx, op, left, right) -> VariableTracker:
    if op in (operator.add, operator.iadd) and type(left) is type(right) and isinstance(
            left, BaseSequenceVariable):
        if isinstance(left, ListVariable) and op is operator.iadd:
            left.call_method(tx, "extend", [right], {})
            return left
        return type(left)(left.items + right.items)
    if op in (operator.mul, operator.imul):
        seq, n = (left, right) if isinstance(left, BaseSequenceVariable) else (right, left)
        return type(seq)(seq.items * n.as_python_constant())
    if left.is_python_constant() and right.is_python_constant():
        return VariableTracker.build(tx, op(left.as_python_constant(), right.as_python_constant()))
    if op in (operator.eq, operator.ne) and isinstance(left, BaseSequenceVariable) and isinstance(
            right, BaseSequenceVariable) and len(left.items) != len(right.items):
        return ConstantVariable(op is operator.ne)
    raise unsupported("unsupported sequence operator", f"{_name(op)} on {left!r}, {right!r}")


def unary_op(tx, op: Callable, value: VariableTracker) -> VariableTracker:
    if value.is_tensor():
        if op is operator.not_:
            value.truthiness(tx)  # raises the data-dependent break
        return tx.output.call(tx, "call_function", op, [value], {})
    if op is operator.not_:
        return ConstantVariable(not value.truthiness(tx))
    return VariableTracker.build(tx, op(value.as_python_constant()))


# -- handlers --------------------------------------------------------------------------

@register(len)
def _len(tx, args, kwargs):
    (obj,) = args
    if isinstance(obj, BaseSequenceVariable):
        return ConstantVariable(len(obj.items))
    if obj.is_tensor():
        if obj.example_value.dim() == 0:
            raise unsupported("len() of a 0-d tensor", repr(obj))
        return ConstantVariable(obj.example_value.shape[0])
    return None


@register(isinstance)
def _isinstance(tx, args, kwargs):
    obj, cls = args
    classes = cls.as_python_constant()
    ptype = obj.python_type()
    return ConstantVariable(issubclass(ptype, classes))


@register(getattr)
def _getattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    if len(args) == 3:
        try:
            return obj.var_getattr(tx, name)
        except Exception:
            if obj.is_python_constant() and not hasattr(obj.as_python_constant(), name):
                return args[2]
            raise
    return obj.var_getattr(tx, name)


@register(hasattr)
def _hasattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    if obj.is_tensor():
        return ConstantVariable(hasattr(obj.example_value, name))
    if obj.is_python_constant():
        return ConstantVariable(hasattr(obj.as_python_constant(), name))
    value = getattr(obj, "value", getattr(obj, "module", None))
    if value is not None:
        return ConstantVariable(hasattr(value, name))
    return None


@register(type)
def _type(tx, args, kwargs):
    if len(args) != 1:
        return None
    from .misc import ClassVariable

    return ClassVariable(args[0].python_type())


@register(tuple)
def _tuple(tx, args, kwargs):
    return TupleVariable(args[0].unpack(tx) if args else [])


@register(list)
def _list(tx, args, kwargs):
    return ListVariable(args[0].unpack(tx) if args else [])


@register(enumerate)
def _enumerate(tx, args, kwargs):
    from .misc import ListIteratorVariable

    start = args[1].as_python_constant() if len(args) > 1 else kwargs.get("start", ConstantVariable(0)).value
    items = args[0].unpack(tx)
    return ListIteratorVariable([TupleVariable([ConstantVariable(i + start), v]) for i, v in enumerate(items)])


@register(zip)
def _zip(tx, args, kwargs):
    from .misc import ListIteratorVariable

    if kwargs:
        return None
    seqs = [a.unpack(tx) for a in args]
    return ListIteratorVariable([TupleVariable(list(t)) for t in zip(*seqs)])


@register(reversed)
def _reversed(tx, args, kwargs):
    from .misc import ListIteratorVariable

    return ListIteratorVariable(list(reversed(args[0].unpack(tx))))


@register(iter)
def _iter(tx, args, kwargs):
    from .misc import ListIteratorVariable

    if len(args) == 1:
        return ListIteratorVariable(args[0].unpack(tx))
    return None


@register(next)
def _next(tx, args, kwargs):
    from .misc import ListIteratorVariable

    it = args[0]
    if isinstance(it, ListIteratorVariable):
        item = it.next_item()
        if item is None:
            if len(args) > 1:
                return args[1]
            raise unsupported("StopIteration", "next() on an exhausted iterator")
        return item
    return None


@register(slice)
def _slice(tx, args, kwargs):
    parts = list(args) + [ConstantVariable(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [ConstantVariable(None), args[0], ConstantVariable(None)]
    return SliceVariable(*parts)


@register(sum)
def _sum(tx, args, kwargs):
    items = args[0].unpack(tx)
    total = args[1] if len(args) > 1 else ConstantVariable(0)
    for item in items:
        total = binary_op(tx, operator.add, total, item)
    return total


def _minmax(fn):
    def handler(tx, args, kwargs):
        values = args[0].unpack(tx) if len(args) == 1 else list(args)
        if kwargs or not all(v.is_python_constant() for v in values):
            if any(v.is_tensor() for v in values):
                raise unsupported("max/min of tensors", f"builtin {fn.__name__}() compares tensor values",
                                  hints=["Use torch.maximum / torch.minimum or torch.max(t)."])
            return None
        return VariableTracker.build(tx, fn(v.as_python_constant() for v in values))

    register(fn)(handler)


_minmax(max)
_minmax(min)


@register(abs)
def _abs(tx, args, kwargs):
    if args[0].is_tensor():
        return tx.output.call(tx, "call_function", operator.abs, args, {})
    return None


@register(bool)
def _bool(tx, args, kwargs):
    if len(args) == 1:
        return ConstantVariable(args[0].truthiness(tx))
    return None


@register(print)
def _print(tx, args, kwargs):
    raise unsupported("print", "print() writes to stdout",
                      "Output cannot be part of a graph; print runs in Python between graphs.",
                      ["Remove the print from the compiled function, or accept the graph break."])


def call_builtin_class(tx, cls_var, args, kwargs) -> VariableTracker:
    """Calling a class: builtin types are builtins; other classes are not traced yet."""
    cls = cls_var.cls
    if cls in PURE_BUILTINS or cls in _HANDLERS:
        return call_builtin(tx, cls, args, kwargs)
    if cls in (torch.Size,) and all(a.is_python_constant() for a in args):
        return VariableTracker.build(tx, cls(*[a.as_python_constant() for a in args]))
    from .user_objects import NewObjectVariable, can_instantiate

    if can_instantiate(cls):
        return NewObjectVariable.create(tx, cls, list(args), dict(kwargs))
    raise unsupported("class instantiation", f"{cls.__qualname__}(...)",
                      "Creating instances of classes inside the compiled region is not traced yet.")


del builtins

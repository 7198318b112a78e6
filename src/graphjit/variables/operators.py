"""Operators on trackers: ``BINARY_OP``, ``COMPARE_OP``, ``IS_OP``, ``CONTAINS_OP`` and
the unary ones, as CPython evaluates them.

* A tensor operand puts the operator in the graph with the ``operator`` function as
  target, as TorchDynamo does.  An in-place operator whose left operand is not a tensor
  (``c = 0; c += x``) is the plain operator: ints have no ``__iadd__``.
* Constants are folded; an error is the program's (observed exception).
* Sequences, dicts and sets use their value semantics (concatenation, ``==`` item by
  item through the ``polyfills``, set algebra on keys views).
* User objects call their dunder methods (inlined), with the reflected method when the
  first returns ``NotImplemented``; ``==`` without ``__eq__`` is identity.
"""

from __future__ import annotations

import operator
import types
from typing import Callable

import torch

from ..exc import observed, unsupported
from ..polyfills import builtins as poly
from . import numpy_ufuncs, object_protocol as proto
from .base import VariableTracker, call_python
from .constant import ConstantVariable
from .dicts import DictVariable, DictViewVariable, MISSING
from .numpy_tensors import NdarrayTensorVariable
from .builtin_subclasses import MappingProxyVariable, TupleObjectVariable
from .object_ids import ObjectIdVariable
from .objects import UserObjectVariable
from .random_values import PrologueValueVariable, derived_value
from .sequences import BaseSequenceVariable, ListVariable, TupleVariable
from .sets import SetVariable, other_keys
from .view_sets import is_set_view, view_set_operation
from .sizes import as_size_operand, concatenation
from .sym_node import SymNodeVariable, specialized, sym_binary_op, sym_unary_op
from ..diagnostics.describe import describe

_INPLACE_TO_PLAIN = proto.INPLACE_TO_PLAIN
_DUNDERS = proto.BINARY_DUNDERS


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))


_COMPARISONS = frozenset({operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne})


def binary_op(tx, op: Callable, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    """``op(left, right)`` for any trackers."""
    watch = tx.output.block_watch
    if watch is not None and op in _COMPARISONS:  # (a repeated block's own index compared)
        result = watch.param_compare(tx, op, left, right)
        if result is not None:
            return ConstantVariable(result)
    if op in (operator.is_, operator.is_not):
        same = left.identity() is right.identity()
        return ConstantVariable(same if op is operator.is_ else not same)
    if isinstance(left, NdarrayTensorVariable) or isinstance(right, NdarrayTensorVariable):
        return numpy_ufuncs.call_operator(tx, op, [left, right])
    if left.is_tensor() or right.is_tensor():
        if not left.is_tensor() and op in _INPLACE_TO_PLAIN:
            op = _INPLACE_TO_PLAIN[op]
        return tensor_operator(tx, op, [left, right])
    if isinstance(left, SymNodeVariable) or isinstance(right, SymNodeVariable):
        result = sym_binary_op(tx, op, left, right)
        if result is not None:
            return result
        # not arithmetic on numbers (``[0] * n``): the value itself, guarded
        left, right = specialized([left, right])
    if isinstance(left, UserObjectVariable) or isinstance(right, UserObjectVariable):
        return _object_op(tx, op, left, right)
    if isinstance(left, PrologueValueVariable) or isinstance(right, PrologueValueVariable):
        return derived_value(tx, _INPLACE_TO_PLAIN.get(op, op), [left, right])
    if op in (operator.eq, operator.ne) and isinstance(left, ObjectIdVariable) and isinstance(right, ObjectIdVariable):
        same = left.dict_key() is right.dict_key()  # ids: the same object? (identities guarded)
        return ConstantVariable(same if op is operator.eq else not same)
    if isinstance(left, (BaseSequenceVariable, DictVariable, SetVariable, DictViewVariable)) or \
            isinstance(right, (BaseSequenceVariable, DictVariable, SetVariable, DictViewVariable)):
        return _container_op(tx, op, left, right)
    if left.is_python_constant() and right.is_python_constant():
        return VariableTracker.build(tx, call_python(_name(op), op, left.as_python_constant(),
                                                     right.as_python_constant()))
    if op in (operator.eq, operator.ne):
        same = left.identity() is right.identity()
        return ConstantVariable(same if op is operator.eq else not same)
    raise unsupported("unsupported operand types", f"{_name(op)}({describe(left)}, {describe(right)})")


def _container_op(tx, op, left, right) -> VariableTracker:
    base_op = _INPLACE_TO_PLAIN.get(op, op)
    if base_op is operator.mod and left.is_python_constant() and isinstance(left.as_python_constant(), (str, bytes)):
        return _percent_format(tx, left.as_python_constant(), right)
    if isinstance(left, BaseSequenceVariable) or isinstance(right, BaseSequenceVariable):
        left, right = _as_sequence(left), _as_sequence(right)  # ``() + (x,)``
    names = _DUNDERS.get(base_op)
    if names is not None and op not in (operator.eq, operator.ne):
        # a dict subclass's own operators, written in Python (``Counter.__add__``...)
        attempts = []
        if base_op is not op:
            attempts.append((left, "__i" + names[0][2:], right))
        attempts += [(left, names[0], right), (right, names[1], left)]
        for owner, name, other in attempts:
            method = owner.python_method(tx, name) if isinstance(owner, DictVariable) else None
            if method is not None:
                result = method.call_function(tx, [owner, other], {})
                if not (result.is_python_constant() and result.as_python_constant() is NotImplemented):
                    return result
    if isinstance(left, ListVariable) and op in (operator.iadd,):
        left.call_method(tx, "extend", [right], {})
        return left
    if isinstance(left, ListVariable) and op is operator.imul:
        times = right.as_python_constant()
        left.call_method(tx, "extend", [ListVariable(left.items * (times - 1))], {}) if times > 0 \
            else left.call_method(tx, "clear", [], {})
        return left
    if base_op is operator.add and isinstance(left, BaseSequenceVariable) and isinstance(right, BaseSequenceVariable):
        size = concatenation(left, right)  # ``torch.Size`` with a tuple: a Size
        if size is not None:
            return size
        if issubclass(left.python_type(), tuple) and issubclass(right.python_type(), tuple):
            return TupleVariable(left.items + right.items)  # a named tuple's ``+`` is tuple's
        if left.python_type() is not right.python_type():
            raise observed(TypeError, f'can only concatenate {left.python_type().__name__} (not '
                                      f'"{right.python_type().__name__}") to {left.python_type().__name__}')
        return left.new_like(left.items + right.items)
    if base_op is operator.mul and (isinstance(left, BaseSequenceVariable) or isinstance(right, BaseSequenceVariable)):
        seq, n = (left, right) if isinstance(left, BaseSequenceVariable) else (right, left)
        return seq.new_like(seq.items * n.as_python_constant())
    if op in (operator.eq, operator.ne):
        result = _container_eq(tx, left, right)
        if op is operator.ne:
            return ConstantVariable(not result.as_python_constant()) if result.is_python_constant() \
                else unary_op(tx, operator.not_, result)
        return result
    if (is_set_view(left) or is_set_view(right)) and op not in _SET_INPLACE and (
            _set_like(left) or _set_like(right)):
        return view_set_operation(tx, base_op, left, right)
    if _set_like(left) and _set_like(right):
        if isinstance(left, SetVariable) and op in _SET_INPLACE and not left.frozen:
            left.call_method(tx, _SET_INPLACE[op], [right], {})  # ``s |= t``: s itself
            return left
        if isinstance(left, SetVariable) and base_op in _SET_DUNDERS and isinstance(right, SetVariable):
            return left.apply(tx, _SET_DUNDERS[base_op], [right])
        value = call_python(_name(base_op), base_op, other_keys(tx, left), other_keys(tx, right))
        return SetVariable(value) if isinstance(value, (set, frozenset)) else ConstantVariable(value)
    if isinstance(left, DictVariable) and op is operator.ior:  # ``d |= pairs``: d.update(pairs)
        left.call_method(tx, "update", [right], {})
        return left
    if isinstance(left, DictVariable) and isinstance(right, DictVariable) and op is operator.or_:
        lt, rt = left.python_type(), right.python_type()
        if rt is not lt and issubclass(rt, lt) and right._merged_type()[0] is not dict:
            return right.call_dict_method(tx, "__ror__", [left], {})  # a subtype's slot first
        return left.call_dict_method(tx, "__or__", [right], {})
    if left.is_python_constant() and right.is_python_constant():
        return VariableTracker.build(tx, call_python(_name(op), op, left.as_python_constant(),
                                                     right.as_python_constant()))
    if isinstance(left, BaseSequenceVariable) and isinstance(right, BaseSequenceVariable) and \
            op in (operator.lt, operator.le, operator.gt, operator.ge):
        if (left.python_type() is list) != (right.python_type() is list):
            symbol = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}[op]
            raise observed(TypeError, f"'{symbol}' not supported between instances of "
                                      f"'{left.python_type().__name__}' and '{right.python_type().__name__}'")
        # item by item, as CPython compares (a tensor pair decides by its truth value)
        return tx.inline_polyfill(poly.sequence_order, [_as_sequence(left), _as_sequence(right),
                                                        VariableTracker.build(tx, op)])
    raise observed(TypeError, f"unsupported operand type(s) for {_name(op)}: "
                              f"'{left.python_type().__name__}' and '{right.python_type().__name__}'")


def _percent_format(tx, fmt: str | bytes, right: VariableTracker) -> VariableTracker:
    """``fmt % args`` (printf-style) with a tuple, list or dict of trackers: a symbolic
    number is formatted by its value (guarded, as ``str()`` of one); a value whose text is
    known only when the code runs is a graph break, never an exception eager would not
    raise.  A malformed format raises eager's error."""
    def value(var):
        var = specialized([var])[0]
        if var.is_python_constant():
            return var.as_python_constant()
        raise unsupported("%-formatting of a value computed only when the code runs", describe(var),
                          "Its text is not known while tracing; the instruction runs in Python.")

    if isinstance(right, BaseSequenceVariable) and issubclass(right.python_type(), tuple):
        args = tuple(value(item) for item in right.items)  # one argument per item
    else:
        args = value(right)  # a list or a dict is one argument (a dict also names them)
    return VariableTracker.build(tx, call_python("%", operator.mod, fmt, args))


_SET_INPLACE = {operator.ior: "update", operator.iand: "intersection_update",
                operator.isub: "difference_update", operator.ixor: "symmetric_difference_update"}
_SET_DUNDERS = {operator.or_: "__or__", operator.and_: "__and__", operator.sub: "__sub__",
                operator.xor: "__xor__"}


def _set_like(var) -> bool:
    return isinstance(var, SetVariable) or is_set_view(var)


def _container_eq(tx, left, right) -> VariableTracker:
    if (is_set_view(left) or is_set_view(right)) and _set_like(left) and _set_like(right):
        return view_set_operation(tx, operator.eq, left, right)
    if _set_like(left) and _set_like(right):
        return ConstantVariable(other_keys(tx, left) == other_keys(tx, right))
    left, right = _as_sequence(left), _as_sequence(right)
    lt, rt = left.python_type(), right.python_type()
    if isinstance(left, BaseSequenceVariable) and isinstance(right, BaseSequenceVariable):
        if (lt is list) != (rt is list):
            return ConstantVariable(False)
        return tx.inline_polyfill(poly.sequence_eq, [left, right])
    if isinstance(left, DictVariable) and isinstance(right, DictVariable):
        return left.call_method(tx, "__eq__", [right], {})  # OrderedDicts compare in order
    if isinstance(left, DictViewVariable) or isinstance(right, DictViewVariable):
        return ConstantVariable(False if not (_set_like(left) and _set_like(right)) else
                                other_keys(tx, left) == other_keys(tx, right))
    return ConstantVariable(left.identity() is right.identity())


def _as_sequence(var: VariableTracker) -> VariableTracker:
    """A constant tuple or list as a sequence tracker (``Point(2, 3) == (2, 3)``)."""
    if isinstance(var, ConstantVariable) and type(var.value) is torch.Size:
        return as_size_operand(var)
    if isinstance(var, ConstantVariable) and type(var.value) in (tuple, list):
        items = [ConstantVariable(v) for v in var.value]
        return TupleVariable(items) if type(var.value) is tuple else ListVariable(items)
    if isinstance(var, TupleObjectVariable):
        # tuple's comparisons read the stored items, never the subclass's own
        # ``__len__``/``__getitem__`` (e3nn's ``Irrep.__len__`` raises)
        return TupleVariable(list(var.items))
    return var


def _object_op(tx, op, left, right) -> VariableTracker:
    """A user object's dunder method, then the reflected one (``NotImplemented``)."""
    base_op = _INPLACE_TO_PLAIN.get(op, op)
    names = _DUNDERS.get(base_op)
    if names is None:
        raise unsupported("operator on a user object", f"{_name(op)}({describe(left)}, {describe(right)})")
    inplace = "__i" + names[0][2:] if base_op is not op else None
    attempts = []
    if inplace and isinstance(left, UserObjectVariable):
        attempts.append((left, inplace, right))
    if isinstance(left, UserObjectVariable):
        attempts.append((left, names[0], right))
    if isinstance(right, UserObjectVariable):
        attempts.append((right, names[1], left))
    for obj, dunder, other in attempts:
        impl = proto.type_attr_raw(obj.python_type(), dunder)
        if impl is MISSING or impl is getattr(object, dunder, None):
            continue
        if not isinstance(impl, types.FunctionType):
            raise unsupported("C-level operator method", f"{obj.python_type().__qualname__}.{dunder}")
        result = obj.var_getattr(tx, dunder).call_function(tx, [other], {})
        if not (result.is_python_constant() and result.as_python_constant() is NotImplemented):
            return result
    if base_op is operator.ne:  # object.__ne__: the inverse of __eq__ (unless NotImplemented)
        return unary_op(tx, operator.not_, _object_op(tx, operator.eq, left, right))
    if base_op is operator.eq:
        return ConstantVariable(left.identity() is right.identity())
    raise observed(TypeError, f"unsupported operand type(s) for {_name(op)}: "
                              f"'{left.python_type().__name__}' and '{right.python_type().__name__}'")


def tensor_operator(tx, op: Callable, args: list) -> VariableTracker:
    """``op(*args)`` with a tensor operand: its ``__torch_function__`` dispatch where eager
    dispatches (modes, subclasses: ``torch_modes``), else one graph node."""
    dispatched = tx.output.torch_function.operator(tx, op, args)
    if dispatched is not None:
        return dispatched
    return tx.output.call(tx, "call_function", op, list(args), {})


def unary_op(tx, op: Callable, value: VariableTracker) -> VariableTracker:
    if isinstance(value, NdarrayTensorVariable):
        return numpy_ufuncs.call_operator(tx, op, [value])
    if value.is_tensor():
        if op is operator.not_:
            value.truthiness(tx)  # raises the data-dependent break
        return tensor_operator(tx, op, [value])
    if op is operator.not_:
        return ConstantVariable(not value.truthiness(tx))
    if isinstance(value, PrologueValueVariable):
        return derived_value(tx, op, [value])
    if isinstance(value, SymNodeVariable):
        result = sym_unary_op(tx, op, value)
        return result if result is not None else VariableTracker.build(tx, op(value.evaluate()))
    if isinstance(value, UserObjectVariable):
        dunder = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__"}[op]
        return value.var_getattr(tx, dunder).call_function(tx, [], {})
    return VariableTracker.build(tx, call_python(_name(op), op, value.as_python_constant()))


#: iterators without ``__contains__``: ``in`` consumes them
_ITERATOR_TYPES = frozenset({types.GeneratorType, zip, map, filter, enumerate, reversed,
                             type(iter([])), type(iter(())), type(iter(range(0)))})


def contains(tx, container: VariableTracker, item: VariableTracker) -> VariableTracker:
    """``item in container`` (``CONTAINS_OP``)."""
    if container.is_tensor():
        return tx.output.call(tx, "call_method", "__contains__", [container, item], {})
    if isinstance(container, (BaseSequenceVariable, DictVariable, SetVariable, DictViewVariable)):
        return container.call_method(tx, "__contains__", [item], {})
    if isinstance(container, UserObjectVariable):
        if proto.type_attr_raw(container.python_type(), "__contains__") is not MISSING:
            return container.var_getattr(tx, "__contains__").call_function(tx, [item], {})
        # no __contains__: CPython iterates (``__iter__``/``__next__`` or ``__getitem__``)
        # and stops at the first match, so the polyfill iterates the object itself
        return tx.inline_polyfill(poly.sequence_contains, [container, item])
    if isinstance(container, MappingProxyVariable):
        return container.call_method(tx, "__contains__", [item], {})
    if container.python_type() in _ITERATOR_TYPES:  # a generator, zip, map...: consumed up to the match
        return tx.inline_polyfill(poly.sequence_contains, [container, item])
    if container.is_python_constant() and item.is_python_constant():
        return ConstantVariable(call_python("in", operator.contains, container.as_python_constant(),
                                            item.as_python_constant()))
    if container.is_python_constant():  # e.g. a tensor in a constant tuple
        items = [VariableTracker.build(tx, v) for v in container.as_python_constant()]
        return tx.inline_polyfill(poly.sequence_contains, [TupleVariable(items), item])
    raise unsupported("unsupported `in`", f"{describe(item)} in {describe(container)}")

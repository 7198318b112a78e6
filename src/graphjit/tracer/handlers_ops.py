"""Handlers: operators, subscripts, building and unpacking containers.

Opcode facts are data: :data:`BINARY_OPS` maps BINARY_OP's argument to the ``operator``
function (derived from ``dis._nb_ops``), :data:`COMPARE_OPS` maps COMPARE_OP's."""

from __future__ import annotations

import dis
import operator

from ..exc import ObservedException, observed, unsupported
from ..variables import (
    BaseSequenceVariable,
    ClassVariable,
    ConstantVariable,
    DequeVariable,
    DictVariable,
    ListVariable,
    NNModuleVariable,
    SetVariable,
    SliceVariable,
    TupleVariable,
    UserObjectVariable,
    VariableTracker,
)
from ..variables.known_tensors import tensor_index
from ..variables.base import LazyVariableTracker, call_python
from ..variables.formatting import format_value
from ..variables.dicts import MISSING, items_of, key_of
from ..variables.iterators import make_iterator
from ..variables.numpy_values import NumpyValueVariable
from ..variables.operators import binary_op, contains, tensor_operator, unary_op
from ..diagnostics.describe import describe
from ..variables.sizes import formatted_value, holds_symbolic_numbers

_NB_NAMES = {
    "ADD": "add", "AND": "and_", "FLOOR_DIVIDE": "floordiv", "LSHIFT": "lshift",
    "MATRIX_MULTIPLY": "matmul", "MULTIPLY": "mul", "REMAINDER": "mod", "OR": "or_",
    "POWER": "pow", "RSHIFT": "rshift", "SUBTRACT": "sub", "TRUE_DIVIDE": "truediv", "XOR": "xor",
}


def _binary_op_table() -> dict[int, object]:
    table = {}
    for i, (name, _sym) in enumerate(dis._nb_ops):
        name = name.removeprefix("NB_")
        inplace = name.startswith("INPLACE_")
        base = _NB_NAMES[name.removeprefix("INPLACE_")]
        table[i] = getattr(operator, ("i" + base.rstrip("_")) if inplace else base)
    return table


BINARY_OPS = _binary_op_table()
COMPARE_OPS = {i: {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
                   ">": operator.gt, ">=": operator.ge}[sym] for i, sym in enumerate(dis.cmp_op)}


class OpHandlers:
    # -- operators ------------------------------------------------------------------------
    def BINARY_OP(self, inst) -> None:
        right, left = self.pop(), self.pop()
        self.push(binary_op(self, BINARY_OPS[inst.arg], left, right))

    def COMPARE_OP(self, inst) -> None:
        right, left = self.pop(), self.pop()
        self.push(binary_op(self, COMPARE_OPS[inst.arg], left, right))

    def IS_OP(self, inst) -> None:
        right, left = self.pop(), self.pop()
        self.push(binary_op(self, operator.is_not if inst.arg else operator.is_, left, right))

    def CONTAINS_OP(self, inst) -> None:
        container, item = self.pop(), self.pop()
        found = contains(self, container, item)
        if found.is_tensor():
            self.push(unary_op(self, operator.not_, found) if inst.arg else found)
            return
        self.push(ConstantVariable(found.truthiness(self) != bool(inst.arg)))

    def _unary(self, op) -> None:
        self.push(unary_op(self, op, self.pop()))

    def UNARY_POSITIVE(self, inst) -> None:
        self._unary(operator.pos)

    def UNARY_NEGATIVE(self, inst) -> None:
        self._unary(operator.neg)

    def UNARY_NOT(self, inst) -> None:
        self._unary(operator.not_)

    def UNARY_INVERT(self, inst) -> None:
        self._unary(operator.invert)

    # -- subscripts -----------------------------------------------------------------------
    def BINARY_SUBSCR(self, inst) -> None:
        index, container = self.pop(), self.pop()
        self.push(self.subscript(container, index))

    def STORE_SUBSCR(self, inst) -> None:
        index, container, value = self.pop(), self.pop(), self.pop()
        self.store_subscript(container, index, value)

    def store_subscript(self, container: VariableTracker, index: VariableTracker,
                        value: VariableTracker) -> None:
        """``container[index] = value`` (``STORE_SUBSCR``, ``operator.setitem``)."""
        if container.is_tensor():
            tensor_operator(self, operator.setitem, [container, index, value])
        elif isinstance(container, (ListVariable, DictVariable, DequeVariable)):
            container.setitem(self, index, value)
        elif isinstance(container, UserObjectVariable):
            container.call_method(self, "__setitem__", [index, value], {})
        elif hasattr(container, "setitem"):
            container.setitem(self, index, value)
        else:
            raise unsupported("item assignment", f"{describe(container)}[{describe(index)}] = ...",
                              "Item writes on this kind of object are not traced.")

    def DELETE_SUBSCR(self, inst) -> None:
        index, container = self.pop(), self.pop()
        self.delete_subscript(container, index)

    def delete_subscript(self, container: VariableTracker, index: VariableTracker) -> None:
        """``del container[index]`` (``DELETE_SUBSCR``, ``operator.delitem``)."""
        if isinstance(container, (ListVariable, DictVariable)):
            container.delitem(self, index)
        elif isinstance(container, UserObjectVariable):
            container.call_method(self, "__delitem__", [index], {})
        elif hasattr(container, "delitem"):
            container.delitem(self, index)
        else:
            raise unsupported("item deletion", f"del {describe(container)}[{describe(index)}]")

    def as_index(self, index: VariableTracker) -> VariableTracker:
        """A sequence index as CPython takes it: objects with ``__index__`` (also as the
        parts of a slice) give their int (the method traced); anything else as it is.  An
        int not read yet stays unread (a repeated block reads ``self.layer_idx`` this way:
        ``hops/block_effects.py``)."""
        if type(index) is LazyVariableTracker and type(index.peek_value()) is int:
            return index
        if isinstance(index, SliceVariable):
            parts = [self.as_index(p) for p in index.parts]
            return SliceVariable(*parts) if any(a is not b for a, b in zip(parts, index.parts)) else index
        if isinstance(index, UserObjectVariable) and index.has_attr(self, "__index__"):
            value = index.var_getattr(self, "__index__").call_function(self, [], {})
            if not (value.is_python_constant() and type(value.as_python_constant()) is int):
                raise observed(TypeError, f"__index__ returned non-int (type {value.python_type().__name__})")
            return value
        if index.is_tensor():  # ``Tensor.__index__``: its value where the trace knows it
            value = tensor_index(self, index)
            return index if value is None else value
        return index

    def subscript(self, container: VariableTracker, index: VariableTracker) -> VariableTracker:
        """``container[index]`` for any supported container tracker."""
        if container.is_tensor():
            return tensor_operator(self, operator.getitem, [container, index])
        if isinstance(container, BaseSequenceVariable):
            return container.getitem(self, self.as_index(index))
        if isinstance(container, DictVariable):
            return container.getitem(self, index)
        if isinstance(container, NNModuleVariable):
            return container.call_method(self, "__getitem__", [index], {})
        if isinstance(container, UserObjectVariable):
            return container.call_method(self, "__getitem__", [index], {})
        if isinstance(container, NumpyValueVariable):
            return container.getitem(self, index)
        if container.is_python_constant() and not isinstance(container.as_python_constant(), dict):
            index = self.as_index(index)
        if container.is_python_constant() and index.is_python_constant():
            value = container.as_python_constant()
            try:
                item = value[index.as_python_constant()]
            except Exception as e:
                raise observed(type(e), *e.args) from None
            return VariableTracker.build(self, item)
        if hasattr(container, "getitem"):  # other mapping trackers (a mappingproxy)
            return container.getitem(self, index)
        if isinstance(container, ClassVariable) and hasattr(container.cls, "__class_getitem__"):
            # ``Cls[T]`` (a generic alias, as in an annotation): made at trace time
            item = index.as_python_constant() if index.is_python_constant() else getattr(index, "value", None)
            if item is not None:
                return VariableTracker.build(self, call_python(f"{container.cls.__qualname__}[...]",
                                                               operator.getitem, container.cls, item))
        raise unsupported("unsupported subscript", f"{describe(container)}[{describe(index)}]")

    def BUILD_SLICE(self, inst) -> None:
        parts = self.popn(inst.arg)
        if len(parts) == 2:
            parts.append(ConstantVariable(None))
        var = SliceVariable(*parts)
        self.push(ConstantVariable(var.as_python_constant()) if var.is_python_constant() else var)

    # -- building containers ----------------------------------------------------------------
    def BUILD_TUPLE(self, inst) -> None:
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst) -> None:
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst) -> None:
        self.push(SetVariable([key_of(v, self) for v in self.popn(inst.arg)]))  # added in order

    def BUILD_MAP(self, inst) -> None:
        flat = self.popn(2 * inst.arg)
        self.push(DictVariable({key_of(k, self): v for k, v in zip(flat[::2], flat[1::2])}))

    def BUILD_CONST_KEY_MAP(self, inst) -> None:
        keys = self.pop().as_python_constant()
        values = self.popn(inst.arg)
        self.push(DictVariable(dict(zip(keys, values, strict=True))))

    def BUILD_STRING(self, inst) -> None:
        parts = self.popn(inst.arg)
        self.push(ConstantVariable("".join(p.as_python_constant() for p in parts)))

    def FORMAT_VALUE(self, inst) -> None:
        spec = self.pop().as_python_constant() if inst.arg & 0x04 else ""
        value = self.pop()
        conv = {0: lambda v: v, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
        if not value.is_python_constant():
            if value.is_tensor():
                raise unsupported("f-string of a non-constant", describe(value))
            if not holds_symbolic_numbers(value):
                self.push(ConstantVariable(format_value(self, value, inst.arg & 0x03, spec)))
                return
            # a symbolic size is specialized (guarded), as torch.compile formats it
            self.push(ConstantVariable(format(conv(formatted_value(value, "f-string of a non-constant")), spec)))
            return
        self.push(ConstantVariable(call_python("format", lambda v: format(conv(v), spec),
                                               value.as_python_constant())))

    # The displays' opcodes go through the containers' methods: in a resume function the
    # container being built is an argument (it existed before), so its mutations are logged.
    def LIST_APPEND(self, inst) -> None:
        value = self.pop()
        self.stack[-inst.arg].call_method(self, "append", [value], {})

    def LIST_EXTEND(self, inst) -> None:
        value = self.pop()
        self.stack[-inst.arg].call_method(self, "extend", [value], {})

    def SET_ADD(self, inst) -> None:
        value = self.pop()
        self.stack[-inst.arg].call_method(self, "add", [value], {})

    def SET_UPDATE(self, inst) -> None:
        value = self.pop()
        self.stack[-inst.arg].call_method(self, "update", [value], {})

    def LIST_TO_TUPLE(self, inst) -> None:
        self.push(TupleVariable(self.pop().items))

    def MAP_ADD(self, inst) -> None:
        value, key = self.pop(), self.pop()
        self.stack[-inst.arg].setitem_key(self, key_of(key, self), value)

    def DICT_UPDATE(self, inst) -> None:
        other = self.pop()
        target = self.stack[-inst.arg]
        for key, value in items_of(self, other):
            target.setitem_key(self, key, value)

    def DICT_MERGE(self, inst) -> None:
        """``f(**a, **b)``: like DICT_UPDATE, but a repeated keyword is the call's TypeError."""
        other = self.pop()
        target = self.stack[-inst.arg]
        fn = self.stack[-(inst.arg + 2)]
        try:
            pairs = items_of(self, other, mapping_only=True)
        except ObservedException as e:
            if isinstance(e.exc, TypeError) and str(e.exc).startswith("argument after **"):
                raise observed(TypeError, f"{_function_name(fn)} {e.exc}") from None
            raise
        for key, value in pairs:
            if target.lookup(self, key) is not MISSING:
                raise observed(TypeError, f"{_function_name(fn)} got multiple values for keyword "
                                          f"argument '{key}'")
            target.setitem_key(self, key, value)

    # -- unpacking ------------------------------------------------------------------------
    def UNPACK_SEQUENCE(self, inst) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            if len(items) > inst.arg:
                raise observed(ValueError, f"too many values to unpack (expected {inst.arg})")
            raise observed(ValueError, f"not enough values to unpack (expected {inst.arg}, got {len(items)})")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            raise observed(ValueError, f"not enough values to unpack (expected at least "
                                       f"{before + after}, got {len(items)})")
        rest = ListVariable(items[before:len(items) - after])
        for item in reversed([*items[:before], rest, *items[len(items) - after:]]):
            self.push(item)

    def GET_ITER(self, inst) -> None:
        self.push(self.make_iterator(self.pop()))

    def make_iterator(self, value: VariableTracker) -> VariableTracker:
        return make_iterator(self, value)


def _function_name(fn: VariableTracker) -> str:
    """The callable as CPython's ``_PyObject_FunctionStr`` names it: ``module.qualname()``
    (no module for builtins)."""
    try:
        value = fn.as_python_constant()
    except Exception:
        name = getattr(fn, "get_name", None)
        if name is None:
            return "function"
        module = fn.get_globals().get("__name__") if hasattr(fn, "get_globals") else None
        return f"{module}.{name()}()" if module and module != "builtins" else f"{name()}()"
    qual = getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or type(value).__name__
    module = getattr(value, "__module__", None)
    return f"{module}.{qual}()" if isinstance(module, str) and module != "builtins" else f"{qual}()"


__all__ = ["OpHandlers", "BINARY_OPS", "COMPARE_OPS"]

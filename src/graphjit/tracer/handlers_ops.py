"""Handlers: operators, subscripts, building and unpacking containers.

Opcode facts are data: :data:`BINARY_OPS` maps BINARY_OP's argument to the ``operator``
function (derived from ``dis._nb_ops``), :data:`COMPARE_OPS` maps COMPARE_OP's."""

from __future__ import annotations

import dis
import operator

from ..exc import unsupported
from ..variables import (
    ConstantVariable,
    ListVariable,
    NNModuleVariable,
    SliceVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.builtins import binary_op, unary_op
from ..variables.misc import ListIteratorVariable
from ..variables.sequences import BaseSequenceVariable, DictVariable

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
        if isinstance(container, DictVariable):
            found = container.call_method(self, "__contains__", [item], {}).value
        elif item.is_python_constant() and (isinstance(container, BaseSequenceVariable)
                                            or container.is_python_constant()):
            value = item.as_python_constant()
            values = [v.as_python_constant() for v in container.unpack(self)
                      if v.is_python_constant()] if isinstance(container, BaseSequenceVariable) \
                else container.as_python_constant()
            found = value in values
        else:
            raise unsupported("unsupported `in`", f"{item!r} in {container!r}")
        self.push(ConstantVariable(found != bool(inst.arg)))

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
        self.push(subscript(self, container, index))

    def STORE_SUBSCR(self, inst) -> None:
        index, container, value = self.pop(), self.pop(), self.pop()
        if container.is_tensor():
            self.output.call(self, "call_function", operator.setitem, [container, index, value], {})
        elif isinstance(container, (ListVariable, DictVariable)):
            container.setitem(self, index, value)
        else:
            raise unsupported("item assignment", f"{container!r}[{index!r}] = ...",
                              "Item writes on this kind of object are not replayed yet.")

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

    def BUILD_MAP(self, inst) -> None:
        flat = self.popn(2 * inst.arg)
        self.push(DictVariable({k.as_python_constant(): v for k, v in zip(flat[::2], flat[1::2])}))

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
        if not value.is_python_constant():
            raise unsupported("f-string of a non-constant", repr(value))
        conv = {0: lambda v: v, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
        self.push(ConstantVariable(format(conv(value.as_python_constant()), spec)))

    def LIST_APPEND(self, inst) -> None:
        value = self.pop()
        self.stack[-inst.arg].items.append(value)

    def LIST_EXTEND(self, inst) -> None:
        value = self.pop()
        self.stack[-inst.arg].items.extend(value.unpack(self))

    def LIST_TO_TUPLE(self, inst) -> None:
        self.push(TupleVariable(self.pop().items))

    def MAP_ADD(self, inst) -> None:
        value, key = self.pop(), self.pop()
        self.stack[-inst.arg].items[key.as_python_constant()] = value

    def DICT_UPDATE(self, inst) -> None:
        other = self.pop()
        if not isinstance(other, DictVariable):
            raise unsupported("dict update from a non-dict", repr(other))
        self.stack[-inst.arg].items.update(other.items)

    DICT_MERGE = DICT_UPDATE

    # -- unpacking ------------------------------------------------------------------------
    def UNPACK_SEQUENCE(self, inst) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise unsupported("unpacking mismatch", f"expected {inst.arg} values, got {len(items)}",
                              "Running eagerly so Python raises the ValueError.")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            raise unsupported("unpacking mismatch", "not enough values to unpack")
        rest = ListVariable(items[before:len(items) - after])
        for item in reversed([*items[:before], rest, *items[len(items) - after:]]):
            self.push(item)

    def GET_ITER(self, inst) -> None:
        value = self.pop()
        if isinstance(value, ListIteratorVariable):
            self.push(value)
        else:
            self.push(ListIteratorVariable(value.unpack(self)))


def subscript(tx, container: VariableTracker, index: VariableTracker) -> VariableTracker:
    """``container[index]`` for any supported container tracker."""
    if container.is_tensor():
        return tx.output.call(tx, "call_function", operator.getitem, [container, index], {})
    if isinstance(container, (BaseSequenceVariable, DictVariable)):
        return container.getitem(tx, index)
    if isinstance(container, NNModuleVariable):
        return _module_getitem(tx, container, index)
    if container.is_python_constant() and index.is_python_constant():
        try:
            value = container.as_python_constant()[index.as_python_constant()]
        except Exception as e:
            raise unsupported("subscript raised at trace time", f"{type(e).__name__}: {e}",
                              "Running eagerly so Python raises the error.") from None
        return VariableTracker.build(tx, value)
    raise unsupported("unsupported subscript", f"{container!r}[{index!r}]")


def _module_getitem(tx, container, index) -> VariableTracker:
    import torch

    module, idx = container.module, index.as_python_constant()
    if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)) and isinstance(idx, int):
        keys = list(module._modules)
        key = keys[idx]
        return container.var_getattr(tx, key)
    if isinstance(module, torch.nn.ModuleDict) and isinstance(idx, str):
        return container.var_getattr(tx, idx)
    raise unsupported("module subscript", f"{type(module).__qualname__}[{idx!r}]")

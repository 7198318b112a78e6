"""Symbolic Python numbers: a size of a tensor with a dynamic dimension (``x.size(0)``),
arithmetic on it, an unspecialized ``int``/``float`` argument, a comparison of them.

A :class:`SymNodeVariable` is an fx node plus its example value, a ``torch.SymInt``,
``SymFloat`` or ``SymBool`` of the trace's ``ShapeEnv`` (see ``graph/shapes.py``).

* Arithmetic and comparisons with numbers or other symbolic values are graph nodes (the
  ``operator`` functions as targets, as TorchDynamo writes them); the example value is
  the same operation on the symbolic values, so the ShapeEnv knows what each node is.
* Where Python needs the value itself (a branch, ``range``, an index into a list, a
  constant a tracker must hold) the value is read from the symbolic one, and the ShapeEnv
  records a guard: ``bool(s0 > 4)`` guards ``s0 > 4`` (or its negation), ``int(s0)``
  guards ``s0 == 4``.  The entry is then valid exactly where that decision holds.
* ``is_python_constant()`` is false unless the value is a constant expression: probing
  must not specialize.  ``as_python_constant()`` specializes (with its guard).
"""

from __future__ import annotations

import math
import operator

import sympy
import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import (
    GuardOnDataDependentSymNode,
    is_concrete_bool,
    is_concrete_float,
    is_concrete_int,
)

from ..exc import unsupported
from ..guards.shapes import ShapeSource
from ..polyfills import builtins as poly
from ..sources import AttrSource, GetItemSource, Source
from .base import VariableTracker, probing
from .constant import ConstantVariable, known_value
from ..diagnostics.describe import describe

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PYTHON_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


_CONCRETE = {torch.SymInt: is_concrete_int, torch.SymFloat: is_concrete_float,
             torch.SymBool: is_concrete_bool}


def is_symbolic(value) -> bool:
    """A SymInt/SymFloat/SymBool that is not a constant expression."""
    return isinstance(value, SYM_TYPES) and not _CONCRETE[type(value)](value)


#: ``value`` with every symbolic number that is a constant expression as its Python
#: number, also inside tuples and ``torch.Size`` (no guard: reading it decides nothing)
as_known = known_value


class SymNodeVariable(VariableTracker):
    """A symbolic number in the graph: ``node`` computes it, ``sym`` is its example."""

    def __init__(self, node: torch.fx.Node, sym, **kwargs) -> None:
        super().__init__(**kwargs)
        self.node, self.sym = node, sym
        node.meta["example_value"] = sym

    @property
    def example_value(self):
        return self.sym

    def _repr_body(self) -> str:
        return f"{self.node.name}: {self.python_type().__name__} = {self.sym.node.expr}"

    def python_type(self) -> type:
        return _PYTHON_TYPES[type(self.sym)]

    def identity(self):
        return self.node

    def is_python_constant(self) -> bool:
        return False

    def evaluate(self):
        """The trace-time value; the ShapeEnv guards it (the entry specializes on it).  An
        unbacked value (from ``item()`` or a data-dependent size) has none: a break."""
        try:
            return self.python_type()(self.sym)
        except GuardOnDataDependentSymNode as e:
            raise _data_dependent(self, e) from None

    def as_python_constant(self):
        if probing():
            raise unsupported("symbolic value", f"{self.python_type().__name__} {self.sym.node.expr}",
                              "Probing does not specialize.")
        return self.evaluate()

    def truthiness(self, tx) -> bool:
        try:
            return bool(self.sym)
        except GuardOnDataDependentSymNode as e:
            raise _data_dependent(self, e) from None

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _METHODS.get(self.python_type(), ()):
            return _SymMethod(self, name)
        raise unsupported("attribute of a symbolic number", f"{self.python_type().__name__}.{name}",
                          "Only arithmetic, comparisons and conversions of sizes are traced.")

    def reconstruct(self, cg) -> None:
        reconstruct_graph_value(cg, self, "symbolic value")


def _data_dependent(var: SymNodeVariable, e: Exception):
    return unsupported(
        "data-dependent branch", f"Python needs the value of {var.node.name} "
        f"({var.sym.node.expr}), known only when the graph runs",
        "A branch, index or conversion decides on a value read from tensor data "
        "(Tensor.item(), or a size from nonzero/masking).",
        ["Keep the decision in tensor code (torch.where, torch.cond), use torch._check() to "
         "state what holds, or accept the graph break."])


def reconstruct_graph_value(cg, var, what: str) -> None:
    """Push the value of ``var`` (a tracker with a ``node``): the graph's output for it,
    or, for a graph input, its source, or for a symbolic number that is an input's size,
    that size read again (:func:`reload_source`)."""
    name = cg.graph_outputs.get(var.node)
    if name is not None:
        cg.load_fast(name)
    elif var.source is not None:
        cg.extend(var.source.reconstruct())
    elif isinstance(var, SymNodeVariable) and reload_source(var) is not None:
        cg.extend(reload_source(var).reconstruct())
    else:
        raise unsupported("cannot reconstruct", f"{what} {var.node.name} is not a graph output")


def reload_source(var: SymNodeVariable) -> Source | None:
    """Where generated code reads the value of ``var`` without the graph: a symbolic
    ``int`` that is exactly a size of an input tensor (``x.shape[0]`` while ``s0`` is
    free) is read again as ``x.shape[0]``, as TorchDynamo reads a size symbol from its
    ``TensorPropertySource``; a symbolic ``int`` that is exactly a number argument, from
    that argument.  It is a Python ``int`` in the program, and no graph output is needed
    for it: a graph of only such sizes is no graph."""
    expr = var.sym.node.expr
    if not isinstance(expr, sympy.Symbol):
        return None
    for src in var.sym.node.shape_env.var_to_sources.get(expr, ()):
        # the ShapeEnv's TensorPropertySource (read by its fields, as guards/shapes.py does)
        prop = getattr(getattr(src, "prop", None), "name", None)
        if type(var.sym) is torch.SymInt and prop == "SIZE" and isinstance(getattr(src, "base", None), ShapeSource):
            return GetItemSource(AttrSource(src.base.inner, "shape"), src.idx)
        if isinstance(src, ShapeSource) and type(var.sym) is torch.SymInt:
            return src.inner  # (a float stays a graph output: see OutputGraph.float_outputs_need_pinning)
    return None


def _is_integer(x):
    return x.is_integer()


_is_integer.__module__ = "graphjit_runtime"

#: methods of symbolic numbers, as torch's ``SymInt``/``SymFloat`` define them: a graph
#: node (``is_integer``: a ``SymBool``), the number itself (``conjugate``,
#: ``SymInt.as_integer_ratio``'s numerator), or the method on the value, specialized
#: with its guard (``bit_length``, ``float.as_integer_ratio``, ``hex``)
_METHODS = {int: {"__index__", "__int__", "__float__", "conjugate", "as_integer_ratio", "bit_length"},
            float: {"__int__", "__float__", "is_integer", "conjugate", "as_integer_ratio", "hex"}}
_SPECIALIZING_METHODS = {(int, "bit_length"), (float, "as_integer_ratio"), (float, "hex")}


class _SymMethod(VariableTracker):
    """A bound method of a symbolic number (``n.__index__``)."""

    def __init__(self, obj: SymNodeVariable, name: str) -> None:
        super().__init__()
        self.obj, self.name = obj, name

    def _repr_body(self) -> str:
        return f"{self.obj!r}.{self.name}"

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if args or kwargs:
            raise unsupported("method of a symbolic number with arguments", self.name)
        if self.name in ("__index__", "conjugate"):
            return self.obj
        if self.name == "is_integer":
            return sym_call(tx, _is_integer, [self.obj])
        if (self.obj.python_type(), self.name) in _SPECIALIZING_METHODS:
            return VariableTracker.build(tx, getattr(self.obj.evaluate(), self.name)())
        if self.name == "as_integer_ratio":  # ``SymInt.as_integer_ratio``: ``(self, 1)``
            return tx.inline_polyfill(poly.int_as_integer_ratio, [self.obj])
        return sym_builtin(tx, int if self.name == "__int__" else float, [self.obj])


def sym_call(tx, fn, args: list) -> VariableTracker:
    """``fn(*args)`` on symbolic values and constants as one graph node (see the module
    docstring; ``OutputGraph.wrap_result`` makes a constant result a constant)."""
    return tx.output.call(tx, "call_function", fn, args, {})


#: the operators a symbolic number supports, as graph targets
SYM_BINARY_OPS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.eq, operator.ne, operator.lt, operator.le,
    operator.gt, operator.ge, operator.and_, operator.or_,
})
SYM_UNARY_OPS = frozenset({operator.neg, operator.pos, operator.abs})
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
            operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
            operator.imod: operator.mod, operator.ipow: operator.pow,
            operator.iand: operator.and_, operator.ior: operator.or_}


def _is_number(var: VariableTracker) -> bool:
    if isinstance(var, SymNodeVariable):
        return True
    return var.is_python_constant() and type(var.as_python_constant()) in (int, float, bool)


def sym_binary_op(tx, op, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    """``op(left, right)`` where one side is symbolic: a graph node when both are numbers
    and ``op`` is an arithmetic or comparison operator, else ``None`` (the caller
    specializes the symbolic side)."""
    op = _INPLACE.get(op, op)
    if op in SYM_BINARY_OPS and _is_number(left) and _is_number(right):
        return sym_call(tx, op, [left, right])
    return None


def sym_unary_op(tx, op, value: SymNodeVariable) -> VariableTracker | None:
    return sym_call(tx, op, [value]) if op in SYM_UNARY_OPS else None


def _int(x):
    return x if isinstance(x, (int, torch.SymInt)) else torch.sym_int(x)


def _float(x):
    return torch.sym_float(x)


_int.__module__ = _float.__module__ = "graphjit_runtime"

#: builtins (and ``math`` functions) computed on symbolic numbers as graph nodes
_SYM_BUILTINS = {int: _int, float: _float, abs: operator.abs, min: torch.sym_min, max: torch.sym_max,
                 round: round, math.floor: math.floor, math.ceil: math.ceil, math.trunc: math.trunc,
                 **{getattr(math, name[5:]): getattr(torch, name) for name in dir(torch)
                    if name.startswith("_sym_") and hasattr(math, name[5:])}}


#: builtins answered from a symbolic number's type, or its truth (``s0 != 0``), not its value
_TYPE_QUERIES = {
    type: lambda tx, v: VariableTracker.build(tx, v.python_type()),
    bool: lambda tx, v: ConstantVariable(v.truthiness(tx)),
    callable: lambda tx, v: ConstantVariable(False),
}


def specialized(args: list) -> list:
    """``args`` with each symbolic number replaced by its value (guarded)."""
    return [ConstantVariable(a.evaluate()) if isinstance(a, SymNodeVariable) else a for a in args]


def sym_builtin(tx, fn, args: list) -> VariableTracker | None:
    """``fn(*args)`` with a symbolic argument as a graph node, or ``None`` (not modelled:
    the caller specializes, :func:`specialized`)."""
    if len(args) == 1 and fn in _TYPE_QUERIES:  # what needs no value: nothing specialized
        return _TYPE_QUERIES[fn](tx, args[0])
    if fn is isinstance and len(args) == 2 and isinstance(args[0], SymNodeVariable) and args[1].is_python_constant():
        return ConstantVariable(issubclass(args[0].python_type(), args[1].as_python_constant()))
    if fn in SYM_BINARY_OPS or fn in _INPLACE:  # ``operator.lt(a, b)`` called as a function
        return sym_binary_op(tx, fn, *args) if len(args) == 2 else None
    if fn in SYM_UNARY_OPS:
        return sym_call(tx, fn, args) if len(args) == 1 and _is_number(args[0]) else None
    target = _SYM_BUILTINS.get(fn)
    if target is None or not all(_is_number(a) for a in args):
        return None
    if fn in (min, max):
        if len(args) != 2:
            return None
    elif len(args) != 1:
        return None
    if fn is int and args[0].python_type() is int or fn is float and args[0].python_type() is float:
        return args[0]
    return sym_call(tx, target, args)

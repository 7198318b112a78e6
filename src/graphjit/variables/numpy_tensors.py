"""numpy on tensors, traced through ``torch._numpy`` (as torch.compile traces it).

``numpy_values`` folds numpy on trace-time constants; this module covers the arrays whose
data are a tensor's: ``t.numpy()`` of a graph tensor, and a numpy function called on a
tensor or on such an array.

Contract:

* ``t.numpy()`` (a CPU tensor that does not require grad; eager raises otherwise, so that
  stays a break) is an :class:`NdarrayTensorVariable`: an array whose data *is* ``t``'s
  (the same graph value, as eager's shares memory).
* A numpy function (``np.mean(a, 1)``, ``np.linalg.norm``), an array method
  (``a.reshape(...)``, ``a.copy()``, ``a.max(axis=0)``), an array attribute computed from
  the data (``a.T``, ``a.real``), an operator (``a + a``, ``-a``, ``a > 0``) or an index
  (``a[1:]``) is one graph node, :func:`numpy_op`, which runs ``torch._numpy``'s version
  on the tensors as ``torch._numpy`` arrays and gives back their tensors (``torch._numpy``
  is numpy's semantics on torch operations: dtypes promoted as numpy does).  A tensor
  passed to a numpy ufunc itself (``np.sin(t)``: ``__array__`` in, ``__array_wrap__``
  out) is ``numpy_ufuncs``' case; to another numpy function, a break.  Metadata (``shape``, ``ndim``, ``size``,
  ``dtype``, ``itemsize``, ``strides``, ``nbytes``) are trace-time constants.
* A 0-d result is a numpy *scalar* (``np.float64``) where numpy returns one: any function,
  method or operator result, except ``np.asarray``/``np.array``/``copy``/``reshape``
  style constructors, which keep a 0-d array (numpy's ``PyArray_Return`` rule, simplified).
* ``torch.from_numpy(a)``/``torch.as_tensor(a)`` of such an array is a tensor aliasing its
  data; ``torch.tensor(a)`` a copy.
* An array that escapes (returned, stored, live at a break) is rebuilt as
  ``tensor.numpy()`` of the graph's tensor (``[()]`` for a scalar): the one returned for
  ``t.numpy()`` itself shares ``t``'s memory as eager's does; one computed in the graph is
  new memory, as eager's.
* Not traced (a graph break with its reason): reading values into Python (``tolist``,
  ``item``, ``bool(a)``, iteration), writes into such an array (``a[0] = 1``, ``a += 1``,
  in-place methods: the tensor would change under the graph), and symbolic shapes.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np
import torch
import torch._numpy as tnp
import torch.utils._pytree as pytree

from ..bytecode.instruction import create_instruction
from ..exc import unsupported
from .base import MethodVariable, VariableTracker
from .constant import ConstantVariable, is_constant_value
from .sequences import ListVariable, SliceVariable, TupleVariable
from .tensor import METHOD_HOOKS, TensorVariable

#: metadata attributes read at trace time
_METADATA = frozenset({"shape", "ndim", "size", "dtype", "itemsize", "strides", "nbytes"})
#: what reads values into Python or writes into the array: breaks
_DATA_READS = frozenset({"tolist", "item", "tobytes", "__bool__", "__iter__", "__len__", "__int__", "__float__",
                         "__index__", "__array__", "tofile", "dump", "dumps"})
_WRITES = frozenset({"__setitem__", "__delitem__", "fill", "sort", "put", "resize", "itemset", "setfield",
                     "partition", "byteswap", "setflags"})
#: functions and methods whose 0-d result stays an array (numpy returns a scalar otherwise)
_ARRAY_RESULTS = frozenset({"asarray", "array", "copy", "reshape", "ascontiguousarray", "asanyarray",
                            "atleast_1d", "atleast_2d", "atleast_3d", "view", "squeeze", "transpose", "T"})


def _to_tnp(x: Any) -> Any:
    return tnp.ndarray(x) if isinstance(x, torch.Tensor) else x


def _from_tnp(x: Any) -> Any:
    return x.tensor if isinstance(x, tnp.ndarray) else x


def numpy_op(name: str, *args: Any, **kwargs: Any) -> Any:
    """The graph's node: numpy's ``name`` on tensors as ``torch._numpy`` arrays.  ``name``
    is a function path (``"mean"``, ``"linalg.norm"``), ``".method"``, ``"@attribute"``
    or ``"op:operator"`` (a function of the ``operator`` module)."""
    args, kwargs = pytree.tree_map(_to_tnp, (args, kwargs))
    if name.startswith("."):
        result = getattr(args[0], name[1:])(*args[1:], **kwargs)
    elif name.startswith("@"):
        result = getattr(args[0], name[1:])
    elif name.startswith("op:"):
        result = getattr(operator, name[3:])(*args)
    else:
        result = functools.reduce(getattr, name.split("."), tnp)(*args, **kwargs)
    return pytree.tree_map(_from_tnp, result)


class NumpyOp:
    """:func:`numpy_op` with its ``name`` bound: a graph node's target (named, compared by
    name, pickled by name)."""

    __module__ = "graphjit_runtime"  # (written into graph code as a global; cached by name)

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = self.__qualname__ = "numpy_" + "".join(c if c.isalnum() else "_" for c in name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return numpy_op(self.name, *args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NumpyOp) and other.name == self.name

    def __hash__(self) -> int:
        return hash((NumpyOp, self.name))

    def __reduce__(self):
        return (NumpyOp, (self.name,))

    def __repr__(self) -> str:
        return f"NumpyOp({self.name!r})"


class NdarrayTensorVariable(VariableTracker):
    """A numpy array whose data are the graph tensor ``tensor`` (see the module
    docstring); ``scalar``: it is a numpy scalar (0-d) rather than an array."""

    def __init__(self, tensor: TensorVariable, scalar: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tensor, self.scalar = tensor, scalar

    def _repr_body(self) -> str:
        return f"{'scalar' if self.scalar else 'ndarray'} of {self.tensor!r}"

    def _array(self) -> tnp.ndarray:
        return tnp.ndarray(self.tensor.example_value)

    def python_type(self) -> type:
        return np.dtype(self._array().dtype.name).type if self.scalar else np.ndarray

    def children(self) -> list[VariableTracker]:
        return [self.tensor]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _METADATA:
            value = getattr(self._array(), name)
            if name == "dtype":
                return VariableTracker.build(tx, np.dtype(value.name))
            if any(isinstance(v, torch.SymInt) for v in (value if isinstance(value, tuple) else (value,))):
                raise unsupported("symbolic shape of a numpy array", f"ndarray.{name}")
            return VariableTracker.build(tx, value)
        if name == "__class__":
            return VariableTracker.build(tx, self.python_type())
        if callable(getattr(np.ndarray, name, None)):
            return MethodVariable(self, name)
        if hasattr(np.ndarray, name):
            return call_numpy(tx, "@" + name, [self], {})
        raise unsupported("ndarray attribute", f"ndarray.{name}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in _DATA_READS:
            raise unsupported("data-dependent numpy method", f"ndarray.{name}()",
                              "It reads the array's values into Python.")
        if name in _WRITES or (name.startswith("__i") and name.endswith("__")):
            raise unsupported("write into a numpy array of a tensor", f"ndarray.{name}()",
                              "The tensor would change under the graph; the write runs in Python.")
        if name == "__getitem__":
            return call_numpy(tx, "op:getitem", [self, *args], {})
        return call_numpy(tx, "." + name, [self, *args], kwargs)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        return call_numpy(tx, "op:getitem", [self, index], {})

    def reconstruct(self, cg) -> None:
        cg.reconstruct(self.tensor)
        cg.append_method_call("numpy", 0)
        if self.scalar:
            cg.load_const(())
            cg.append(create_instruction("BINARY_SUBSCR"))


def _node_arg(tx, var: VariableTracker) -> VariableTracker:
    """A call's argument as the graph node gets it: an array as its tensor."""
    if isinstance(var, NdarrayTensorVariable):
        return var.tensor
    if isinstance(var, TensorVariable):
        if var.example_value.requires_grad:
            raise unsupported("numpy on a tensor that requires grad", "np.<fn>(tensor)",
                              "Eager raises (Can't call numpy() on Tensor that requires grad).")
        return var
    if isinstance(var, SliceVariable):
        return var
    if isinstance(var, (TupleVariable, ListVariable)):
        return type(var)([_node_arg(tx, v) for v in var.items]) if isinstance(var, TupleVariable) \
            else ListVariable([_node_arg(tx, v) for v in var.items])
    if var.is_python_constant() and (is_constant_value(var.as_python_constant()) or
                                     isinstance(var.as_python_constant(), (np.dtype, type))):
        return var
    raise unsupported("numpy call argument", f"a {var.python_type().__name__}",
                      "Only arrays of tensors, tensors and constants are traced through torch._numpy.")


def _wrap(tx, name: str, result: VariableTracker) -> VariableTracker:
    if isinstance(result, TensorVariable):
        scalar = result.example_value.dim() == 0 and name.split(".")[-1].lstrip("@") not in _ARRAY_RESULTS
        return NdarrayTensorVariable(result, scalar=scalar)
    if isinstance(result, TupleVariable):
        return TupleVariable([_wrap(tx, name, r) for r in result.items])
    if isinstance(result, ListVariable):
        return ListVariable([_wrap(tx, name, r) for r in result.items])
    return result


def call_numpy(tx, name: str, args: list, kwargs: dict) -> VariableTracker:
    """``numpy_op(name, ...)`` as one node (see :func:`numpy_op`), its tensors as arrays."""
    node_args = [_node_arg(tx, a) for a in args]
    node_kwargs = {k: _node_arg(tx, v) for k, v in kwargs.items()}
    target = NumpyOp(name)
    result = tx.output.call(tx, "call_function", target, node_args, node_kwargs)
    return _wrap(tx, name, result)


def numpy_operator(tx, op, operands: list) -> VariableTracker:
    """``a + b``, ``-a``, ``a > 0``... with an array of a tensor among the operands."""
    name = getattr(op, "__name__", "")
    if name.startswith("i") and name not in ("invert", "is_", "is_not") or name == "not_":
        raise unsupported("write into a numpy array of a tensor" if name != "not_" else
                          "data-dependent numpy operator", f"operator.{name} on an ndarray",
                          "An in-place operator would change the tensor under the graph; `not a` "
                          "reads the array's values.")
    if any(isinstance(o, TensorVariable) for o in operands):
        raise unsupported("numpy array with a tensor operand", f"operator.{name}")
    return call_numpy(tx, f"op:{name}", operands, {})


def involves_arrays(args: list, kwargs: dict) -> bool:
    """Does a numpy call get an array of a tensor, and no tensor (traced here)?  A tensor
    passed to numpy itself (``np.sin(t)``) goes through ``Tensor.__array__`` and, for a
    ufunc, ``__array_wrap__`` (a tensor comes back): left a break."""
    def leaves(v):
        if isinstance(v, (TupleVariable, ListVariable)):
            return [leaf for i in v.items for leaf in leaves(i)]
        return [v]
    flat = [leaf for v in [*args, *kwargs.values()] for leaf in leaves(v)]
    return any(isinstance(v, NdarrayTensorVariable) for v in flat) and \
        not any(isinstance(v, TensorVariable) for v in flat)


def function_path(fn: Any) -> str | None:
    """``"linalg.norm"`` for ``np.linalg.norm``: its path in ``torch._numpy``, or None."""
    module = (getattr(fn, "__module__", None) or "numpy").split(".")
    name = getattr(fn, "__name__", None)
    if name is None:
        return None
    for prefix in (".".join(m for m in module[1:] if not m.startswith("_")), ""):
        path = f"{prefix}.{name}" if prefix else name
        try:
            functools.reduce(getattr, path.split("."), tnp)
            return path
        except AttributeError:
            continue
    return None


def _tensor_numpy(tx, tensor: TensorVariable, args: list, kwargs: dict) -> VariableTracker:
    """``t.numpy()`` (see the module docstring)."""
    example = tensor.example_value
    if args or kwargs or example.requires_grad or example.device.type != "cpu" or example.is_conj() or \
            example.is_neg():
        raise unsupported("data-dependent tensor method", "Tensor.numpy()",
                          "Eager raises for this tensor, or makes an array the graph cannot stand for.")
    return NdarrayTensorVariable(tensor)


METHOD_HOOKS["numpy"] = _tensor_numpy


def tensor_as_array(tx, tensor: TensorVariable) -> NdarrayTensorVariable:
    """``tensor.numpy()`` (``Tensor.__array__`` of a numpy ufunc's operand)."""
    return _tensor_numpy(tx, tensor, [], {})


__all__ = ["NdarrayTensorVariable", "NumpyOp", "call_numpy", "function_path", "involves_arrays", "numpy_op",
           "numpy_operator", "tensor_as_array"]

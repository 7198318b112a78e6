"""A numpy ufunc applied to torch tensors (``np.sin(t)``, ``np.add(t, 1)``,
``np.maximum(t, a)``), traced through ``torch._numpy`` as torch.compile traces numpy, and
numpy's own dtype rules kept for ufuncs and operators on arrays of tensors.

Eager's protocol (``torch.Tensor`` defines ``__array__`` and ``__array_wrap__`` but not
``__array_ufunc__``): each tensor operand becomes ``t.numpy()`` (``__array__``: the same
memory; a tensor that requires grad, or is not on the CPU, raises), numpy computes the
result with its own dtype rules, and the operand with the highest ``__array_priority__``
(a tensor's is 1000) wraps it: ``Tensor.__array_wrap__`` gives ``torch.from_numpy`` of
the result, a ``bool`` result first cast to ``uint8``.  So ``np.sin(t)`` is a tensor (0-d
for a 0-d input) in new memory, and ``np.greater(t, 0)`` a ``uint8`` tensor.

Contract (:func:`call_ufunc`):

* Traced: a ufunc with one output called with ``nin`` positional operands, at least one a
  plain ``torch.Tensor`` (not a subclass: its ``__torch_function__`` may answer
  ``__array__``), each operand a tensor, an array of a tensor (``numpy_tensors``) or a
  Python number, and no keyword arguments.  The tensor operands are arrays of themselves
  (:func:`~.numpy_tensors.tensor_as_array`, which breaks where eager's ``t.numpy()``
  raises or makes an array the graph cannot stand for), the ufunc is one
  ``torch._numpy`` node (:func:`~.numpy_tensors.call_numpy`: numpy's dtype rules), and
  the result is that node's tensor, cast to ``uint8`` when it is ``bool``, copied when
  ``torch._numpy`` gave back an operand's memory (``positive``, ``conj`` of a real
  tensor): numpy's result is always new memory.
* Anything else with a tensor operand (keywords such as ``out=`` or ``where=``, a ufunc
  method such as ``np.add.reduce``, two outputs, a tensor of a dtype numpy has no type
  for) is a graph break naming the ufunc, as before.  numpy functions that are not ufuncs
  decide per function what a tensor operand means (``np.mean(t)`` calls ``t.mean(axis=...)``,
  ``np.where`` converts): they stay breaks.
* The same loop-dtype check (and copy) serves a ufunc called on arrays of tensors
  (``np.true_divide(a, b)`` of ``t.numpy()`` arrays, no keyword arguments; the result is
  an array) and the operators on such arrays (``a / b``, ``-a``, ``a > 0``: the ufunc
  numpy runs for the operator), which ``numpy_tensors`` traces: there, too, int arrays
  would otherwise get ``torch._numpy``'s dtypes (``a / b`` in ``float32``).
* torch.compile returns an ``ndarray`` for ``np.sin(t)`` where eager returns a tensor;
  graphjit returns eager's type.
"""

from __future__ import annotations

import operator

import numpy as np
import torch
import torch._numpy as tnp
from torch.multiprocessing.reductions import StorageWeakRef

from ..exc import unsupported
from .base import VariableTracker
from .numpy_tensors import NdarrayTensorVariable, call_numpy, function_path, numpy_operator, tensor_as_array
from .tensor import TensorVariable

#: tensor dtypes ``Tensor.numpy()`` gives an array for
_NUMPY_DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                           torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128})


def handles(fn, args: list, kwargs: dict) -> bool:
    """Is ``fn(*args, **kwargs)`` a ufunc call traced here (or a break naming why): one
    with a tensor operand, or with an array of a tensor and no keyword arguments?"""
    if not isinstance(fn, np.ufunc):
        return False
    return any(isinstance(a, TensorVariable) for a in args) or \
        (not kwargs and any(isinstance(a, NdarrayTensorVariable) for a in args))


def call_ufunc(tx, ufunc: np.ufunc, args: list, kwargs: dict) -> VariableTracker:
    """``ufunc(*args)`` with tensor operands (see the module docstring)."""
    name = f"numpy.{ufunc.__name__}"
    if kwargs or ufunc.nout != 1 or len(args) != ufunc.nin:
        raise unsupported("numpy ufunc on a tensor with keyword arguments or several outputs",
                          f"{name}(...)", "Only positional operands and one output are traced.")
    path = function_path(ufunc)
    if path is None:
        raise unsupported("numpy ufunc without a torch._numpy version", f"{name}(...)")
    for a in args:
        _check_operand(a, name)
    fn = tnp
    for part in path.split("."):
        fn = getattr(fn, part)
    cast = _loop_dtype(ufunc, fn, args, name)
    operands = [_operand(tx, a, cast) for a in args]
    result = call_numpy(tx, path, operands, {})
    if not isinstance(result, NdarrayTensorVariable):
        raise unsupported("numpy ufunc result of an unexpected kind", f"{name}(...)")
    if not any(isinstance(a, TensorVariable) for a in args):  # arrays in, an array out
        return _unaliased_array(tx, result, operands)
    tensor = result.tensor
    if tensor.example_value.dtype == torch.bool:  # (``__array_wrap__``: no bool tensors)
        tensor = tx.output.call(tx, "call_method", "to", [tensor, VariableTracker.build(tx, torch.uint8)], {})
    elif _aliases(tensor, operands):  # (``torch._numpy.positive`` gives its operand back)
        tensor = tx.output.call(tx, "call_method", "clone", [tensor], {})
    return tensor


#: operators on arrays and the ufuncs numpy runs for them
_OPERATOR_UFUNCS = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
                    operator.truediv: np.true_divide, operator.floordiv: np.floor_divide,
                    operator.mod: np.remainder, operator.pow: np.power, operator.lt: np.less,
                    operator.le: np.less_equal, operator.gt: np.greater, operator.ge: np.greater_equal,
                    operator.eq: np.equal, operator.ne: np.not_equal, operator.and_: np.bitwise_and,
                    operator.or_: np.bitwise_or, operator.xor: np.bitwise_xor,
                    operator.lshift: np.left_shift, operator.rshift: np.right_shift,
                    operator.neg: np.negative, operator.pos: np.positive, operator.abs: np.absolute,
                    abs: np.absolute, operator.invert: np.invert}


def call_operator(tx, op, operands: list) -> VariableTracker:
    """``a + b``, ``a / 2``... with an array of a tensor among the operands: traced by
    ``numpy_tensors.numpy_operator``, its operands first cast to the dtype numpy's ufunc
    for the operator computes in where ``torch._numpy`` would give another dtype (``a / b``
    of int arrays is ``float64``), or a break where they cannot agree."""
    ufunc = _OPERATOR_UFUNCS.get(op)
    if ufunc is None or not all(isinstance(o, NdarrayTensorVariable) or _is_number(o) for o in operands):
        return numpy_operator(tx, op, operands)  # (its own checks and breaks)
    cast = _loop_dtype(ufunc, op, operands, f"operator.{op.__name__}")
    if cast is not None:
        operands = [_operand(tx, o, cast) for o in operands]
    result = numpy_operator(tx, op, operands)
    return _unaliased_array(tx, result, operands) if isinstance(result, NdarrayTensorVariable) else result


def _is_number(var: VariableTracker) -> bool:
    return var.is_python_constant() and type(var.as_python_constant()) in (bool, int, float, complex)


def _unaliased_array(tx, result: NdarrayTensorVariable, operands: list) -> NdarrayTensorVariable:
    """``result``, copied where ``torch._numpy`` gave back an operand's memory."""
    if not _aliases(result.tensor, operands):
        return result
    return NdarrayTensorVariable(tx.output.call(tx, "call_method", "clone", [result.tensor], {}),
                                 scalar=result.scalar)


def _aliases(tensor: TensorVariable, operands: list) -> bool:
    """Does ``tensor`` share memory with an operand?  numpy's result never does."""
    storage = StorageWeakRef(tensor.example_value.untyped_storage())
    return any(isinstance(o, NdarrayTensorVariable) and
               StorageWeakRef(o.tensor.example_value.untyped_storage()) == storage for o in operands)


def _check_operand(var: VariableTracker, name: str) -> None:
    """Break on an operand this module does not trace (see the module docstring)."""
    if isinstance(var, TensorVariable):
        if var.class_type is not torch.Tensor:
            raise unsupported("numpy ufunc on a tensor subclass", f"{name}({var.class_type.__qualname__})")
        if var.example_value.dtype not in _NUMPY_DTYPES:
            raise unsupported("numpy ufunc on a tensor numpy has no dtype for",
                              f"{name}({var.example_value.dtype})", "Eager raises (Tensor.numpy()).")
    elif not isinstance(var, NdarrayTensorVariable) and not _is_number(var):
        raise unsupported("numpy ufunc operand next to a tensor", f"{name}(... a {var.python_type().__name__} ...)",
                          "Tensors, arrays of tensors and Python numbers are traced.")


def _probe(var: VariableTracker, make) -> object:
    """An empty stand-in of an operand (``make(torch dtype)``), or the Python number."""
    if isinstance(var, TensorVariable):
        return make(var.example_value.dtype)
    if isinstance(var, NdarrayTensorVariable):
        return make(var.tensor.example_value.dtype)
    return var.as_python_constant()


def _loop_dtype(ufunc: np.ufunc, fn, args: list, name: str) -> torch.dtype | None:
    """The dtype the tensor operands are cast to first, or ``None``.  numpy picks the
    ufunc's loop from the operand dtypes (``np.sin`` of ``int16`` computes in ``float32``,
    ``np.true_divide`` of ints in ``float64``); ``torch._numpy`` does not always agree.
    Both are asked on empty stand-ins of the operands: where ``torch._numpy``'s result
    dtype differs, the operands are cast to numpy's, and if that still differs the call
    is a graph break (a different dtype would be a wrong answer)."""
    try:
        want = ufunc(*[_probe(a, lambda dt: np.empty((0,), dtype=torch.empty(0, dtype=dt).numpy().dtype))
                       for a in args]).dtype
    except Exception as e:  # noqa: BLE001 (numpy refuses these operands: eager raises it)
        raise unsupported("numpy ufunc that numpy refuses for these operands", f"{name}: {e}") from None
    want_torch = torch.from_numpy(np.empty((0,), dtype=want)).dtype

    def tnp_dtype(cast):  # (``fn``: the ``torch._numpy`` function or the operator)
        stand_ins = [_probe(a, lambda dt: tnp.ndarray(torch.empty(0, dtype=cast or dt))) for a in args]
        try:
            return fn(*stand_ins).tensor.dtype
        except Exception:  # noqa: BLE001
            return None

    if tnp_dtype(None) == want_torch:
        return None
    if tnp_dtype(want_torch) == want_torch:
        return want_torch
    raise unsupported("numpy ufunc whose torch._numpy version gives another dtype", f"{name} -> {want}",
                      "torch._numpy computes it in another dtype than numpy; the call runs in Python.")


def _operand(tx, var: VariableTracker, cast: torch.dtype | None) -> VariableTracker:
    """An operand as the ufunc's loop sees it: a tensor as its array (``Tensor.__array__``),
    cast to the loop's dtype where it must be."""
    if isinstance(var, NdarrayTensorVariable):
        var = var.tensor if cast is not None else var
    if isinstance(var, TensorVariable):
        if cast is not None and var.example_value.dtype != cast:
            return NdarrayTensorVariable(
                tx.output.call(tx, "call_method", "to", [var, VariableTracker.build(tx, cast)], {}))
        return tensor_as_array(tx, var)
    return var


__all__ = ["handles", "call_ufunc", "call_operator"]

"""A numpy ufunc applied to torch tensors (``np.sin(t)``, ``np.add(t, 1)``,
``np.maximum(t, a)``), traced through ``torch._numpy`` as torch.compile traces numpy.

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
* torch.compile returns an ``ndarray`` for ``np.sin(t)`` where eager returns a tensor;
  graphjit returns eager's type.
"""

from __future__ import annotations

import numpy as np
import torch
import torch._numpy as tnp
from torch.multiprocessing.reductions import StorageWeakRef

from ..exc import unsupported
from .base import VariableTracker
from .numpy_tensors import NdarrayTensorVariable, call_numpy, function_path, tensor_as_array
from .tensor import TensorVariable

#: tensor dtypes ``Tensor.numpy()`` gives an array for
_NUMPY_DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                           torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128})


def handles(fn, args: list, kwargs: dict) -> bool:
    """Is ``fn(*args, **kwargs)`` a ufunc call with a tensor operand (traced here, or a
    break naming why)?"""
    return isinstance(fn, np.ufunc) and any(isinstance(a, TensorVariable) for a in args)


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
    cast = _loop_dtype(ufunc, path, args, name)
    operands = [_operand(tx, a, cast) for a in args]
    result = call_numpy(tx, path, operands, {})
    if not isinstance(result, NdarrayTensorVariable):
        raise unsupported("numpy ufunc result of an unexpected kind", f"{name}(...)")
    tensor = result.tensor
    if tensor.example_value.dtype == torch.bool:  # (``__array_wrap__``: no bool tensors)
        tensor = tx.output.call(tx, "call_method", "to", [tensor, VariableTracker.build(tx, torch.uint8)], {})
    elif _aliases(tensor, operands):  # (``torch._numpy.positive`` gives its operand back)
        tensor = tx.output.call(tx, "call_method", "clone", [tensor], {})
    return tensor


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
    elif not isinstance(var, NdarrayTensorVariable) and not (
            var.is_python_constant() and type(var.as_python_constant()) in (bool, int, float, complex)):
        raise unsupported("numpy ufunc operand next to a tensor", f"{name}(... a {var.python_type().__name__} ...)",
                          "Tensors, arrays of tensors and Python numbers are traced.")


def _probe(var: VariableTracker, make) -> object:
    """An empty stand-in of an operand (``make(torch dtype)``), or the Python number."""
    if isinstance(var, TensorVariable):
        return make(var.example_value.dtype)
    if isinstance(var, NdarrayTensorVariable):
        return make(var.tensor.example_value.dtype)
    return var.as_python_constant()


def _loop_dtype(ufunc: np.ufunc, path: str, args: list, name: str) -> torch.dtype | None:
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
    fn = tnp
    for part in path.split("."):
        fn = getattr(fn, part)

    def tnp_dtype(cast):
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


__all__ = ["handles", "call_ufunc"]

"""numpy on Python values: folded at trace time.

Contract:

* A numpy callable (``np.array``, ``np.prod``, ``np.ceil``, ``np.int64``, ``np.linalg.norm``...)
  called with trace-time constants (Python values, sizes, numpy values) is called while
  tracing; its result is a trace-time constant (:class:`NumpyValueVariable`).  A symbolic
  size among the arguments is specialized (its guard is recorded), as any size Python
  needs as a value.  Operators, methods, attributes, indexing, iteration, ``int()``,
  ``float()``, ``tuple()``, ``.tolist()`` on such values fold the same way.
* A numpy ufunc on a tensor (``np.sin(x)``) is traced (``numpy_ufuncs``); another numpy
  function on a tensor (``np.array(x)``, ``np.mean(x)``) is a graph break with its reason:
  the call runs in Python.  numpy on the array of a tensor (``x.numpy()``) is traced through
  ``torch._numpy``, as torch.compile traces it (``numpy_tensors``).  ``numpy.random`` (it
  draws), I/O and numpy's global settings (:data:`IMPURE`) are graph breaks.
* A numpy value that existed before the call: a scalar or dtype is guarded by value; an
  ``ndarray`` by type, its metadata where read (:class:`NdarrayMetadata`), and by its
  contents (dtype, shape, bytes: :class:`NdarrayContents`) once the trace folds anything
  from them, if it is configuration (reached through an attribute, item or global; at most
  :data:`CONTENTS_LIMIT` bytes): an array passed as an argument (or made by Python at a
  break, ``x.numpy()``) is data, and folding its values is a break (guarding them would
  recompile on every call); one graphjit rebuilt from a trace's constant for a resume
  function (:func:`rebuilt_copy`) is configuration.  The trace computes on a read-only
  snapshot: mutating such an array is a break (it runs in Python).  ``torch.from_numpy(a)``
  of one stays a graph input (``torch_function._numpy_input``).
* Arrays made in the trace are mutable there (``z[1] = n``, ``a += 1``: the trace-time
  object changes, one tracker per object).  One that escapes (returned, stored, live at a
  break) is rebuilt as a copy of its final value, once per call, each escaping object
  once; a *view* of an array the program holds cannot escape (its aliasing would be lost:
  a break).  ``torch.tensor(a)`` of one is a constant of the graph copied when the graph
  runs; ``torch.from_numpy(a)`` and ``torch.as_tensor(a)`` (memory shared with the array)
  are breaks.
* Where a numpy value meets a tensor operation, a numpy scalar is passed as the Python
  number it holds (torch treats both alike, :func:`graph_constant`); ``np.bool_`` (torch
  promotes it differently) and arrays there are breaks.  numpy's warnings (a division by
  zero) are emitted when the trace folds, not on every call.
"""

from __future__ import annotations

import dataclasses
import types
import weakref
from typing import Any

import numpy as np
import torch

from ..exc import ObservedException, unsupported
from ..guards.guard import GuardKind
from ..sources import ConvertedSource, LocalSource
from .base import (
    AttributeMutationExisting,
    MethodVariable,
    ValueMutationNew,
    VariableTracker,
    register_builder,
    register_builder_predicate,
)
from .constant import ConstantVariable, is_constant_value
from .functions import OpaqueCallableVariable, ValueCallableVariable
from .numpy_tensors import call_numpy, function_path, involves_arrays
from . import numpy_ufuncs
from .sequences import ListVariable, TupleVariable

#: A pre-existing array whose contents the trace reads is guarded by them up to this size.
CONTENTS_LIMIT = 4096

#: numpy callables that are not pure functions of their arguments: global settings, I/O,
#: printing (which reads the print options).
IMPURE = frozenset({
    "seterr", "geterr", "seterrcall", "geterrcall", "errstate", "set_printoptions",
    "get_printoptions", "printoptions", "setbufsize", "getbufsize", "save", "savez",
    "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt", "fromfile", "fromregex",
    "memmap", "info", "show_config", "show_runtime", "test", "array2string", "array_repr",
    "array_str", "format_float_positional", "format_float_scientific", "set_string_function",
})
_IMPURE_MODULES = ("numpy.random", "numpy.testing", "numpy.ctypeslib", "numpy.f2py", "numpy.distutils")

#: ndarray methods that change the array (a break on an array from outside the call)
MUTATING_METHODS = frozenset({
    "__setitem__", "__delitem__", "resize", "sort", "fill", "put", "itemset", "setfield",
    "setflags", "partition", "byteswap", "__iadd__", "__isub__", "__imul__", "__itruediv__",
    "__ifloordiv__", "__imod__", "__ipow__", "__imatmul__", "__iand__", "__ior__", "__ixor__",
    "__ilshift__", "__irshift__",
})
#: ndarray methods with effects outside the value (files, raw memory)
_OPAQUE_METHODS = frozenset({"tofile", "dump", "dumps", "__array_interface__", "ctypes", "data"})

_VALUE_TYPES = (np.ndarray, np.generic, np.dtype, np.finfo, np.iinfo)
_WHY_TENSOR = ("numpy runs on the tensor's data in Python; graphjit traces numpy ufuncs on tensors "
               "and numpy on a tensor's array (t.numpy()), and folds numpy on Python values and sizes.")


def is_numpy_value(value: Any) -> bool:
    """An ndarray, numpy scalar, dtype or finfo/iinfo."""
    return isinstance(value, _VALUE_TYPES)


def _is_numpy_callable(value: Any) -> bool:
    if isinstance(value, _VALUE_TYPES) or not callable(value):
        return False
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        owner = getattr(value, "__self__", None)  # a bound method of a numpy object
        module = type(owner).__module__ if owner is not None and not isinstance(owner, types.ModuleType) else ""
    return module == "numpy" or module.startswith("numpy.")


def _qualname(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or "numpy"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return f"{module}.{name}"


def graph_constant(value: Any) -> Any:
    """``value`` as written into a graph: numpy scalars as the Python numbers they hold
    (inside tuples and lists too); ``np.bool_`` and arrays are a break."""
    if isinstance(value, (tuple, list)):
        items = [graph_constant(v) for v in value]
        return type(value)(items) if type(value) in (tuple, list) else value
    if isinstance(value, np.ndarray):
        raise unsupported("numpy array as an operand of a tensor operation", f"array of shape {value.shape}",
                          "A numpy array is not converted to a tensor inside the graph.",
                          ["Convert it with torch.tensor(...) or torch.from_numpy(...)."])
    if isinstance(value, np.bool_):
        raise unsupported("numpy bool as an operand of a tensor operation", repr(value),
                          "torch promotes np.bool_ unlike a Python bool.", ["Use bool(...)."])
    if isinstance(value, np.generic):
        return value.item()
    return value


# -- values -----------------------------------------------------------------------------

class NumpyValueVariable(VariableTracker):
    """A numpy value known at trace time: ``value`` (made in the trace, or an immutable
    one guarded by value).  An ``ndarray`` made in the trace is mutable
    (``ValueMutationNew``); ``view_of_held`` marks a view of an array the program holds."""

    def __init__(self, value: Any, *, view_of_held: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value
        self.view_of_held = view_of_held

    def _repr_body(self) -> str:
        v = self.value
        if isinstance(v, np.ndarray):
            return f"ndarray {v.dtype}{list(v.shape)}"
        return f"{type(v).__name__} {v!r}"

    def folded(self) -> Any:
        """The object numpy computes on at trace time."""
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.folded()

    def identity(self) -> Any:
        return self.value if self.mutation_type is None else self

    def truthiness(self, tx) -> bool:
        return bool(_call(tx, "bool", bool, self.folded()))

    def unpack(self, tx) -> list[VariableTracker]:
        value = self.folded()
        if not isinstance(value, np.ndarray):
            raise unsupported("cannot iterate", f"iteration over {self._repr_body()}")
        if value.ndim == 0:
            _call(tx, "iter", iter, value)  # raises eager's TypeError
        return [wrap(tx, item) for item in value]

    # -- attributes and methods ----------------------------------------------------------
    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _OPAQUE_METHODS:
            raise unsupported("ndarray attribute with effects outside the value", f"ndarray.{name}")
        if callable(getattr(type(self.value), name, None)):  # a method: values read when called
            return MethodVariable(self, name)
        attr = _call(tx, "getattr", getattr, self.folded(), name)
        if callable(attr) and not isinstance(attr, (type, *_VALUE_TYPES)):
            return MethodVariable(self, name)
        return wrap(tx, attr, [self])

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.value, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in _OPAQUE_METHODS:
            raise unsupported("ndarray method with effects outside the value", f"ndarray.{name}()")
        self.check_mutable(name)
        cargs, ckwargs = constant_args(f"ndarray.{name}", args, kwargs)
        method = _call(tx, "getattr", getattr, self.folded(), name)
        return wrap(tx, _call(tx, name, method, *cargs, **ckwargs), [self, *args, *kwargs.values()])

    def check_mutable(self, what: str) -> None:
        """A mutation of this value (``what``) is about to be traced: fine on a value made
        in the trace (numpy itself raises eager's error on a scalar)."""

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = _constant(index, "ndarray index")
        return wrap(tx, _call(tx, "[]", lambda v: v[key], self.folded()), [self, index])

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        self.check_mutable("__setitem__")
        key, item = _constant(index, "ndarray index"), _constant(value, "value stored into an ndarray")
        target = self.folded()
        _call(tx, "[]=", target.__setitem__, key, item)

    # -- codegen --------------------------------------------------------------------------
    def reconstruct(self, cg) -> None:
        value = self.value
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        if not isinstance(value, np.ndarray):
            cg.load_const(value)  # immutable
            return
        if self.view_of_held:
            raise unsupported("a view of a numpy array escapes the compiled region", self._repr_body(),
                              "The view would be rebuilt as a copy, losing its link to the array.")
        cg.push_null()  # a fresh copy on every call: the caller may mutate it
        cg.load_const(rebuilt_copy)
        cg.load_const(value.copy())
        cg.call(1)


class ExistingNdarrayVariable(NumpyValueVariable):
    """An ``ndarray`` that existed before the call (read through ``source``): the trace
    computes on a read-only snapshot; reading its contents guards them."""

    def __init__(self, tx, value: np.ndarray, **kwargs) -> None:
        super().__init__(value, mutation_type=AttributeMutationExisting(), **kwargs)
        self._tx = tx
        self._snapshot: np.ndarray | None = None

    def _repr_body(self) -> str:
        return f"existing ndarray {self.value.dtype}{list(self.value.shape)}"

    def identity(self) -> Any:
        return self

    def is_python_constant(self) -> bool:
        # folded like any numpy value: where its values cannot be (an argument, too
        # large), ``as_python_constant`` raises the break that says why
        return True

    def folded(self) -> np.ndarray:
        if self._snapshot is None:
            value = self.value
            if isinstance(self.source, LocalSource) and _REBUILT.get(id(value)) is not value:
                raise unsupported("values of a numpy array passed to the compiled code", self._repr_body(),
                                  "An array argument is data: folding its values would guard them "
                                  "and recompile for every new value; the instruction runs in Python.",
                                  ["Pass a tensor (torch.from_numpy(a)) instead."])
            if value.dtype.hasobject or value.nbytes > CONTENTS_LIMIT:
                raise unsupported("contents of a numpy array from outside the compiled function",
                                  f"{self._repr_body()} ({value.nbytes} bytes)",
                                  f"Folding reads the array's values; only arrays of plain values up to "
                                  f"{CONTENTS_LIMIT} bytes are guarded by their contents.")
            self._tx.output.add_guard(NdarrayContents(self.source), GuardKind.CONSTANT_MATCH,
                                      ndarray_contents(value))
            snapshot = value.copy()
            snapshot.flags.writeable = False
            self._snapshot = snapshot
            self._tx.output.side_effects.register_existing(snapshot, self)  # its views are views of it
        return self._snapshot

    def check_mutable(self, what: str) -> None:
        if what in MUTATING_METHODS:
            raise unsupported("mutation of a numpy array from outside the compiled function",
                              f"{self._repr_body()}: {what}",
                              "Changes to arrays that existed before the call are not replayed; "
                              "the instruction runs in Python.")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _METADATA:  # guarded as metadata, not by the contents
            tx.output.add_guard(NdarrayMetadata(self.source), GuardKind.CONSTANT_MATCH,
                                ndarray_metadata(self.value))
            return wrap(tx, getattr(self.value, name))
        return super().var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        cg.extend(self.source.reconstruct())


_METADATA = frozenset({"shape", "ndim", "dtype", "size", "itemsize", "nbytes"})


def ndarray_metadata(value: Any) -> Any:
    """What guards an array's metadata: ``(dtype, shape)``."""
    return (value.dtype.str, value.shape) if type(value) is np.ndarray else type(value)


@dataclasses.dataclass(frozen=True, repr=False)
class NdarrayMetadata(ConvertedSource):
    """``ndarray_metadata(base)``: the dtype and shape of a numpy array, for its guard."""

    convert = staticmethod(ndarray_metadata)


#: arrays graphjit rebuilt from a trace's constants (an array made before a graph break,
#: passed to the resume function): configuration, not data, where a resume function reads them
_REBUILT: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()


def rebuilt_copy(value: np.ndarray) -> np.ndarray:
    """A new copy of a constant array (what generated code passes on), remembered as such."""
    out = value.copy()
    _REBUILT[id(out)] = out
    return out


def ndarray_contents(value: Any) -> Any:
    """What guards an array's contents: ``(type, dtype, shape, bytes)``."""
    if type(value) is not np.ndarray:
        return type(value)
    return (value.dtype.str, value.shape, value.tobytes())


@dataclasses.dataclass(frozen=True, repr=False)
class NdarrayContents(ConvertedSource):
    """``ndarray_contents(base)``: the contents of a numpy array, for its guard."""

    convert = staticmethod(ndarray_contents)


# -- callables --------------------------------------------------------------------------

class NumpyFunctionVariable(ValueCallableVariable):
    """A numpy function, ufunc or class: folded on constant arguments (see the module
    docstring)."""

    def __init__(self, value: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return _qualname(self.value)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        name = self._repr_body()
        if numpy_ufuncs.handles(self.value, args, kwargs):  # ``np.sin(tensor)``: eager's protocol
            return numpy_ufuncs.call_ufunc(tx, self.value, args, kwargs)
        path = function_path(self.value) if involves_arrays(args, kwargs) else None
        if path is not None:  # numpy on tensors: torch._numpy's version in the graph
            return call_numpy(tx, path, args, kwargs)
        if any(_has_tensor(a) for a in [*args, *kwargs.values()]):
            raise unsupported("numpy function on a tensor", f"{name}(...)", _WHY_TENSOR,
                              ["Use the torch operation instead, or move the numpy code out of the "
                               "compiled function."])
        cargs, ckwargs = constant_args(name, args, kwargs)
        return wrap(tx, _call(tx, name, self.value, *cargs, **ckwargs), [*args, *kwargs.values()])

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return VariableTracker.build(tx, _call(tx, "getattr", getattr, self.value, name))

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.value, name)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
        else:
            cg.load_const(self.value)


def _is_impure(value: Any) -> bool:
    module = getattr(value, "__module__", None) or ""
    owner = getattr(value, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        module = type(owner).__module__
    return module.startswith(_IMPURE_MODULES) or getattr(value, "__name__", None) in IMPURE


@register_builder_predicate(_is_numpy_callable)
def _build_numpy_callable(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    if _is_impure(value):
        return OpaqueCallableVariable(value, "numpy function with effects outside its result", source=source)
    return NumpyFunctionVariable(value, source=source)


@register_builder(*_VALUE_TYPES)
def _build_numpy_value(tx, value, source):
    if source is None:
        return wrap(tx, value)
    if type(value) is np.ndarray:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, np.ndarray)
        return ExistingNdarrayVariable(tx, value, source=source)
    if isinstance(value, np.ndarray):
        raise unsupported("ndarray subclass", type(value).__qualname__)
    tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, value)
    return NumpyValueVariable(value, source=source)


def constant_tensor(tx, var: VariableTracker, fn: Any) -> VariableTracker | None:
    """``torch.tensor(a)`` of a numpy value made in the trace (and ``torch.as_tensor`` of a
    numpy scalar): a constant of the graph, copied when the graph runs (so an in-place op
    on the result changes nothing the next call sees); ``None`` when this does not apply.
    ``torch.from_numpy``/``torch.as_tensor`` of such an array share its memory: a break."""
    if not isinstance(var, NumpyValueVariable) or var.source is not None:
        return None
    value = var.folded()
    if not isinstance(value, (np.ndarray, np.generic)) or value.dtype.hasobject or \
            (fn is torch.from_numpy and not isinstance(value, np.ndarray)):
        return None
    if isinstance(value, np.ndarray) and fn is not torch.tensor:
        raise unsupported("tensor sharing memory with a numpy array made in the compiled region",
                          f"{_qualname(fn)}({var._repr_body()})",
                          "The tensor and the array would share memory, which a graph constant cannot "
                          "do; the call runs in Python (the array is passed to it).",
                          ["torch.tensor(a) copies the array: it is folded into the graph."])
    try:
        tensor = torch.from_numpy(np.array(value, copy=True))
    except TypeError:  # a dtype torch has no tensor of: eager raises it at the call
        return None
    const = tx.output.get_attr_tensor(tensor, "np_constant", None)
    return tx.output.call(tx, "call_method", "clone", [const], {})


# -- helpers ----------------------------------------------------------------------------

def wrap(tx, value: Any, inputs: list | None = None) -> VariableTracker:
    """The tracker of a value numpy returned at trace time.  An input returned as it is
    (``np.asarray(a)``, ``a += 1``) is that input's tracker."""
    for var in inputs or ():
        if isinstance(var, NumpyValueVariable) and var.mutation_type is not None and \
                (value is var.value or value is getattr(var, "_snapshot", None)):
            return var
    if isinstance(value, np.ndarray):
        if type(value) is not np.ndarray:
            raise unsupported("ndarray subclass", type(value).__qualname__)
        known = tx.output.side_effects.known_tracker(value)
        if known is not None:
            return known
        var = NumpyValueVariable(value, view_of_held=_is_view_of_held(tx, value),
                                 mutation_type=ValueMutationNew())
        tx.output.side_effects.register_existing(value, var)  # one tracker per object
        return var
    if isinstance(value, _VALUE_TYPES):
        return NumpyValueVariable(value)
    if isinstance(value, tuple) and type(value) is tuple:
        return TupleVariable([wrap(tx, v) for v in value])
    if isinstance(value, list) and type(value) is list:
        return ListVariable([wrap(tx, v) for v in value])
    if is_constant_value(value):
        return ConstantVariable(value)
    if isinstance(value, type) or _is_numpy_callable(value):
        return VariableTracker.build(tx, value)
    raise unsupported("numpy result graphjit does not model", f"{type(value).__qualname__}")


def _is_view_of_held(tx, value: np.ndarray) -> bool:
    base = value.base
    while isinstance(base, np.ndarray):
        if tx.output.side_effects.known_tracker(base) is not None:
            return True
        base = base.base
    return False


def _has_tensor(var: VariableTracker) -> bool:
    if var.is_tensor():
        return True
    if isinstance(var, (TupleVariable, ListVariable)):
        return any(_has_tensor(v) for v in var.items)
    return False


_FOLDABLE = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), slice, range, *_VALUE_TYPES)


def _foldable(value: Any, depth: int = 0) -> bool:
    """Only values numpy cannot call back into Python from (no user ``__array__``,
    ``__len__``, ``__index__``)."""
    if isinstance(value, (tuple, list)) and depth < 8:
        return all(_foldable(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 8:
        return all(_foldable(v, depth + 1) for v in value.values())
    if isinstance(value, slice):
        return all(_foldable(v, depth + 1) for v in (value.start, value.stop, value.step))
    if isinstance(value, type):
        return value.__module__ in ("builtins", "numpy") or issubclass(value, np.generic)
    return isinstance(value, _FOLDABLE) or _is_numpy_callable(value)


def _describe(var: VariableTracker) -> str:
    """What a value is, for a message (not the tracker's repr)."""
    try:
        return f"a {var.python_type().__qualname__}"
    except Exception:
        return "a value known only when the code runs"


def _constant(var: VariableTracker, what: str) -> Any:
    try:
        value = var.as_python_constant()
    except ObservedException:
        raise
    except Exception:
        raise unsupported(f"non-constant {what}", _describe(var),
                          "numpy is folded at trace time: its inputs must be constants or sizes.") from None
    if not _foldable(value):
        raise unsupported(f"{what} graphjit does not fold numpy on", type(value).__qualname__)
    return value


def constant_args(what: str, args: list, kwargs: dict) -> tuple[list, dict]:
    """The trace-time values of a numpy call's arguments (sizes specialized), or a break."""
    return ([_constant(a, f"argument of {what}") for a in args],
            {k: _constant(v, f"argument of {what}") for k, v in kwargs.items()})


def _call(tx, what: str, fn, *args, **kwargs) -> Any:
    """Run numpy at trace time.  A write to a read-only snapshot (an array from outside the
    call) is a break; any other error is the program's."""
    try:
        return fn(*args, **kwargs)
    except ValueError as e:
        if "read-only" in str(e):
            raise unsupported("mutation of a numpy array from outside the compiled function", what,
                              "Changes to arrays that existed before the call are not replayed; the "
                              "instruction runs in Python.") from None
        raise ObservedException(e.with_traceback(None)) from None
    except Exception as e:
        raise ObservedException(e.with_traceback(None)) from None


__all__ = ["NumpyValueVariable", "constant_tensor", "ExistingNdarrayVariable", "NumpyFunctionVariable", "graph_constant",
           "is_numpy_value", "NdarrayContents", "NdarrayMetadata", "ndarray_contents", "ndarray_metadata"]

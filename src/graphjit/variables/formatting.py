"""``str()``, ``repr()`` and f-strings of values that are not trace-time constants.

CPython's algorithm, on trackers: ``str(x)`` is ``type(x).__str__(x)`` (``object.__str__``
is ``repr``), ``repr(x)`` is ``type(x).__repr__(x)``, and ``f"{x:spec}"`` is
``type(x).__format__(x, spec)`` (``object.__format__`` with an empty spec is ``str(x)``, a
non-empty one eager's ``TypeError``).  A method the class writes in Python is traced and
must give a string; a built-in container subclass without such a method is formatted by
its base type on the real items (``CustomSet({'a'})``), which
:meth:`python_repr` of its tracker provides.  Anything else (``object.__repr__``, which
prints an address known only when the code runs) is a graph break.
"""

from __future__ import annotations

import types

from ..exc import observed, unsupported
from . import object_protocol as proto
from .base import VariableTracker, call_python
from .builtins import register
from .constant import ConstantVariable
from .dicts import MISSING
from ..diagnostics.describe import describe


def _string(result: VariableTracker, what: str) -> str:
    if not (result.is_python_constant() and isinstance(result.as_python_constant(), str)):
        raise observed(TypeError, f"{what} returned non-string (type {result.python_type().__name__})")
    return result.as_python_constant()


def python_str(tx, value: VariableTracker, kind: str = "str") -> str:
    """``str(value)`` or ``repr(value)`` (``kind``) as eager computes it."""
    if value.is_python_constant():
        return call_python(kind, str if kind == "str" else repr, value.as_python_constant())
    try:
        cls = value.python_type()
    except Exception:
        cls = None
    name = "__str__" if kind == "str" else "__repr__"
    raw = proto.type_attr_raw(cls, name) if isinstance(cls, type) else MISSING
    if isinstance(raw, types.FunctionType):
        return _string(value.var_getattr(tx, name).call_function(tx, [], {}), name)
    if kind == "str" and raw is object.__str__:
        return python_str(tx, value, "repr")
    own = getattr(value, "python_repr", None)
    if own is not None:
        return own(tx)
    raise unsupported(f"{kind}() of a value computed only when the code runs", describe(value),
                      "Its text is not known while tracing; the instruction runs in Python.")


def python_format(tx, value: VariableTracker, spec: str) -> str:
    """``format(value, spec)``."""
    if value.is_python_constant():
        return call_python("format", format, value.as_python_constant(), spec)
    cls = value.python_type()
    raw = proto.type_attr_raw(cls, "__format__")
    if isinstance(raw, types.FunctionType):
        return _string(value.var_getattr(tx, "__format__").call_function(tx, [ConstantVariable(spec)], {}),
                       "__format__")
    if raw is object.__format__:
        if spec:
            raise observed(TypeError, f"unsupported format string passed to {cls.__name__}.__format__")
        return python_str(tx, value)
    raise unsupported("format() of a value computed only when the code runs", describe(value))


def _one_value(args, kwargs) -> bool:
    return len(args) == 1 and not kwargs and not args[0].is_python_constant() and not args[0].is_tensor()


@register(str)
def _str(tx, args, kwargs):
    """``str(x)`` of a non-constant value (constants are folded)."""
    return ConstantVariable(python_str(tx, args[0], "str")) if _one_value(args, kwargs) else None


@register(repr)
def _repr(tx, args, kwargs):
    return ConstantVariable(python_str(tx, args[0], "repr")) if _one_value(args, kwargs) else None


def format_value(tx, value: VariableTracker, conversion: int, spec: str) -> str:
    """``FORMAT_VALUE``: the ``!s``/``!r`` conversion, then ``format`` with ``spec``."""
    if conversion == 1:
        return call_python("format", format, python_str(tx, value, "str"), spec)
    if conversion == 2:
        return call_python("format", format, python_str(tx, value, "repr"), spec)
    if conversion == 3:
        return call_python("format", format, ascii(python_str(tx, value, "repr"))[1:-1], spec)
    return python_format(tx, value, spec)

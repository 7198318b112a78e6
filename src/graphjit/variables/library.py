"""Standard-library callables whose results are immutable values, computed at trace time:
``inspect.signature`` of a traced function (what transformers' ``apply_chunking_to_forward``
asks of every layer's forward).

A signature depends on the function's code, defaults, keyword defaults, annotations and on
``__wrapped__``/``__signature__`` (which ``inspect.signature`` follows): the function is
already guarded by its code object; the rest is guarded here.  The result, its
``Parameter`` objects and its ``parameters`` mapping are immutable, so they are constants
(:class:`InspectValueVariable`): attribute reads and pure method calls are folded, and
what they return is wrapped again, or refused if it is not immutable.
"""

from __future__ import annotations

import collections
import enum
import inspect
import types
from typing import Any

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource
from .base import MethodVariable, VariableTracker, call_python, check_constant_args, register_builder, \
    register_builder_by_id
from .builtins import build_builtin, register
from .constant import ConstantVariable, is_constant_value
from .functions import NestedUserFunctionVariable, UserFunctionVariable, UserMethodVariable
from .sequences import ListVariable, TupleVariable

_ODICT_VIEWS = tuple({type(v) for d in ({}, collections.OrderedDict())
                      for v in (d.keys(), d.values(), d.items())})
_IMMUTABLE = (inspect.Signature, inspect.Parameter, types.MappingProxyType, *_ODICT_VIEWS)


class InspectValueVariable(ConstantVariable):
    """A ``Signature``, a ``Parameter`` or a signature's ``parameters`` mapping (or a view
    of it): immutable values, read at trace time."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        attr = call_python("getattr", getattr, self.value, name)
        if callable(attr) and not isinstance(attr, type):
            return MethodVariable(self, name)
        return wrap_inspect_value(tx, attr)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        cargs, ckwargs = check_constant_args(f"{type(self.value).__name__}.{name}", args, kwargs)
        fn = call_python("getattr", getattr, self.value, name)
        return wrap_inspect_value(tx, call_python(name, fn, *cargs, **ckwargs))

    def unpack(self, tx) -> list[VariableTracker]:
        return [wrap_inspect_value(tx, v) for v in call_python("iter", list, self.value)]


def wrap_inspect_value(tx, value: Any) -> VariableTracker:
    """A tracker for a value read from a signature (sourceless: it is immutable)."""
    if isinstance(value, enum.Enum) or is_constant_value(value) or isinstance(value, type):
        return VariableTracker.build(tx, value)
    if isinstance(value, _IMMUTABLE):
        return InspectValueVariable(value)
    if type(value) in (tuple, list):
        items = [wrap_inspect_value(tx, v) for v in value]
        return TupleVariable(items) if type(value) is tuple else ListVariable(items)
    raise unsupported("inspect value", f"{type(value).__qualname__} read from a signature",
                      "Only immutable parts of a signature are read at trace time.")


@register_builder(inspect.Signature, inspect.Parameter)
def _build_inspect_value(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return InspectValueVariable(value, source=source)


def _guard_signature_inputs(tx, fn: types.FunctionType, source) -> None:
    """What ``inspect.signature(fn)`` reads besides the code: defaults and keyword defaults
    (compared by value, against copies), and the absence of ``__wrapped__``/
    ``__signature__``, and the annotations (compared by value, against a copy)."""
    annotations = fn.__annotations__
    if annotations:
        try:
            hash(tuple(annotations.values()))
        except TypeError:
            raise unsupported("signature of a function with unhashable annotations", fn.__qualname__,
                              "Such annotations cannot be guarded; the call runs in Python.") from None
        tx.output.add_guard(AttrSource(source, "__annotations__"), GuardKind.CONSTANT_MATCH, dict(annotations))
    for name in ("__defaults__", "__kwdefaults__"):
        value = getattr(fn, name)
        if isinstance(value, dict):
            value = dict(value)  # a copy: the guard must not compare the live dict to itself
        items = tuple(value.values()) if isinstance(value, dict) else value
        if items is not None and not is_constant_value(items):
            raise unsupported("signature of a function with non-constant defaults", fn.__qualname__)
        tx.output.add_guard(AttrSource(source, name), GuardKind.CONSTANT_MATCH, value)
    for name in ("__wrapped__", "__signature__"):
        tx.output.add_guard(source, GuardKind.HASATTR, (name, False))


@register(inspect.signature, pure=False)
def _signature(tx, args, kwargs):
    """``inspect.signature(f)`` of a traced function or bound method."""
    if len(args) != 1 or kwargs:
        return None
    target = args[0]
    bound = isinstance(target, UserMethodVariable)  # (isinstance realizes a lazy tracker)
    fn_var = target.fn_var if bound else target
    if not isinstance(fn_var, UserFunctionVariable) or isinstance(fn_var, NestedUserFunctionVariable) \
            or fn_var.source is None or fn_var.trusted:
        return None
    fn = fn_var.fn
    if hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        return None
    _guard_signature_inputs(tx, fn, fn_var.source)
    sig = call_python("inspect.signature", inspect.signature, fn)
    if bound:  # a bound method's signature drops the first parameter
        params = list(sig.parameters.values())
        if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                inspect.Parameter.POSITIONAL_OR_KEYWORD):
            return None
        sig = sig.replace(parameters=params[1:])
    return InspectValueVariable(sig)


@register_builder_by_id(inspect.signature)
def _build_signature_function(tx, value, source):
    return build_builtin(tx, value, source)

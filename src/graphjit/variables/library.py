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
from .constant import TYPING_VALUES, ConstantVariable, is_constant_value
from .functions import NestedUserFunctionVariable, UserFunctionVariable, UserMethodVariable
from .dicts import MISSING, DictVariable
from .sequences import ListVariable, TupleVariable
from ..diagnostics.describe import describe

_ODICT_VIEWS = tuple({type(v) for d in ({}, collections.OrderedDict())
                      for v in (d.keys(), d.values(), d.items())})
_IMMUTABLE = (inspect.Signature, inspect.Parameter, types.MappingProxyType, *_ODICT_VIEWS)


class InspectValueVariable(ConstantVariable):
    """A ``Signature``, a ``Parameter`` or a signature's ``parameters`` mapping (or a view
    of it): immutable values, read at trace time.  ``sig.bind(...)``/``bind_partial`` with
    arguments that are not constants (tensors) binds stand-ins for them on the real
    signature (its errors are eager's) and gives a :class:`BoundArgumentsVariable`."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        attr = call_python("getattr", getattr, self.value, name)
        if callable(attr) and not isinstance(attr, type):
            return MethodVariable(self, name)
        return wrap_inspect_value(tx, attr)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if isinstance(self.value, inspect.Signature) and name in ("bind", "bind_partial") and \
                not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            return BoundArgumentsVariable.bind(tx, self, name, args, kwargs)
        cargs, ckwargs = check_constant_args(f"{type(self.value).__name__}.{name}", args, kwargs)
        fn = call_python("getattr", getattr, self.value, name)
        return wrap_inspect_value(tx, call_python(name, fn, *cargs, **ckwargs))

    def unpack(self, tx) -> list[VariableTracker]:
        return [wrap_inspect_value(tx, v) for v in call_python("iter", list, self.value)]


class _StandIn:
    """Takes an argument's place in a real ``bind`` call (compared by identity only)."""

    __slots__ = ("var",)

    def __init__(self, var: VariableTracker) -> None:
        self.var = var


class BoundArgumentsVariable(VariableTracker):
    """``sig.bind(...)``'s result when arguments are trackers: a real ``BoundArguments``
    whose values are :class:`_StandIn` objects for them.  ``arguments`` is a dict tracker
    (writes to it are seen by ``args``/``kwargs``, which are computed by the real
    properties), ``apply_defaults()`` runs on the real object."""

    def __init__(self, sig_var: VariableTracker, real: inspect.BoundArguments, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sig_var, self.real = sig_var, real
        self.arguments_var: DictVariable | None = None

    @staticmethod
    def bind(tx, sig_var, name: str, args: list, kwargs: dict) -> "BoundArgumentsVariable":
        real_args = [_to_real(a) for a in args]
        real_kwargs = {k: _to_real(v) for k, v in kwargs.items()}
        real = call_python(f"Signature.{name}", getattr(sig_var.value, name), *real_args, **real_kwargs)
        return BoundArgumentsVariable(sig_var, real)

    def _repr_body(self) -> str:
        return f"{list(self.real.arguments)}"

    def python_type(self) -> type:
        return inspect.BoundArguments

    def children(self) -> list[VariableTracker]:
        return [self.sig_var, *_stand_in_vars(self.real.arguments)] + (
            [self.arguments_var] if self.arguments_var is not None else [])

    def _sync(self, tx) -> None:
        """The real object's arguments from the dict tracker (the program may have written it)."""
        if self.arguments_var is not None:
            self.real.arguments = {k: _to_real(v) for k, v in self.arguments_var.realize_items(tx).items()}

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "arguments":
            if self.arguments_var is None:
                self.arguments_var = DictVariable({k: _to_var(tx, v) for k, v in self.real.arguments.items()})
            return self.arguments_var
        if name == "signature":
            return self.sig_var
        if name in ("args", "kwargs"):
            self._sync(tx)
            return _to_var(tx, getattr(self.real, name))
        if name == "apply_defaults":
            return MethodVariable(self, name)
        raise unsupported("BoundArguments attribute", f"BoundArguments.{name}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "apply_defaults" and not args and not kwargs:
            self._sync(tx)
            self.real.apply_defaults()  # the defaults are the signature's constants
            if self.arguments_var is not None:
                self.arguments_var = None  # made again from the real arguments when read
            return ConstantVariable(None)
        raise unsupported("BoundArguments method", f"BoundArguments.{name}")

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(inspect.BoundArguments)
        cg.reconstruct(self.sig_var)
        cg.reconstruct(self.var_getattr(None, "arguments") if self.arguments_var is None else self.arguments_var)
        cg.call(2)


def _to_real(var: VariableTracker):
    return var.as_python_constant() if var.is_python_constant() else _StandIn(var)


def _to_var(tx, value: Any) -> VariableTracker:
    if isinstance(value, _StandIn):
        return value.var
    if type(value) is tuple:
        return TupleVariable([_to_var(tx, v) for v in value])
    if type(value) is dict:
        return DictVariable({k: _to_var(tx, v) for k, v in value.items()})
    if tx is None:  # (rebuilding where the object escapes: the defaults are constants)
        if not is_constant_value(value):
            raise unsupported("BoundArguments escapes with a non-constant default", describe(value))
        return ConstantVariable(value)
    return VariableTracker.build(tx, value)


def _stand_in_vars(value: Any) -> list:
    if isinstance(value, _StandIn):
        return [value.var]
    if isinstance(value, (tuple, list)):
        return [v for item in value for v in _stand_in_vars(item)]
    if isinstance(value, dict):
        return [v for item in value.values() for v in _stand_in_vars(item)]
    return []


def wrap_inspect_value(tx, value: Any) -> VariableTracker:
    """A tracker for a value read from a signature (sourceless: it is immutable)."""
    if isinstance(value, enum.Enum) or is_constant_value(value) or isinstance(value, type) or \
            isinstance(value, TYPING_VALUES):  # an annotation `X | Y`, `Optional[X]`, `list[int]`
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
    if isinstance(fn_var, NestedUserFunctionVariable):
        sig = _nested_signature(tx, fn_var)
        if sig is None:
            return None
        return InspectValueVariable(_drop_first(sig) if bound else sig)
    if not isinstance(fn_var, UserFunctionVariable) or fn_var.source is None or fn_var.trusted:
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


def _drop_first(sig: inspect.Signature) -> inspect.Signature:
    params = list(sig.parameters.values())
    return sig.replace(parameters=params[1:])


def _nested_signature(tx, fn_var: NestedUserFunctionVariable) -> inspect.Signature | None:
    """The signature of a function made in the trace: its code, with its defaults,
    keyword defaults and annotations, which must be constants (``__wrapped__`` is
    followed, as ``inspect.signature`` does); ``None`` when it cannot be computed."""
    wrapped = fn_var.dict_var.lookup(tx, "__wrapped__")
    if wrapped is not MISSING:
        result = _signature(tx, [wrapped], {})
        return result.value if isinstance(result, InspectValueVariable) else None
    if fn_var.dict_var.lookup(tx, "__signature__") is not MISSING:
        return None
    parts = [*fn_var.defaults, *fn_var.kwdefaults.values()]
    annotations = fn_var.attrs.get("__annotations__")
    ann_items = annotations.realize_items(tx) if isinstance(annotations, DictVariable) else {}
    if not all(p.is_python_constant() for p in [*parts, *ann_items.values()]):
        return None
    code = fn_var.code
    fake = types.FunctionType(code, fn_var.f_globals, fn_var.name,
                              tuple(d.as_python_constant() for d in fn_var.defaults),
                              tuple(types.CellType() for _ in code.co_freevars))
    fake.__kwdefaults__ = {k: v.as_python_constant() for k, v in fn_var.kwdefaults.items()} or None
    fake.__annotations__ = {k: v.as_python_constant() for k, v in ann_items.items()}
    return call_python("inspect.signature", inspect.signature, fake)


@register_builder_by_id(inspect.signature)
def _build_signature_function(tx, value, source):
    return build_builtin(tx, value, source)

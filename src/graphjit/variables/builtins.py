"""Python builtins (functions and classes), the ``operator`` module and ``math``.

Handlers are registered next to their definition (``@register(len)``); a handler returns
a tracker, or ``None`` to fall back.  A builtin with only constant arguments and no
handler is folded when it is pure (``PURE_BUILTINS``); an ``operator`` function with a
tensor argument is recorded in the graph, as TorchDynamo does.  Attribute builtins
(``getattr``, ``hasattr``, ``setattr``, ``delattr``, ``vars``, ``super``, ``type``,
``object.__setattr__``...) go through the object protocol.
"""

from __future__ import annotations

import builtins
import collections
import functools
import itertools
import operator
import sys
import types

import torch
from typing import Any, Callable

from ..exc import ObservedException, Unsupported, observed, unsupported
from ..guards.guard import GuardKind
from ..polyfills import builtins as poly
from ..polyfills import functools as poly_functools
from . import object_protocol as proto
from .arg_binding import check_call
from .base import VariableTracker, call_python, check_constant_args, is_new
from .constant import ConstantVariable
from .dicts import DictVariable, DictViewVariable, items_of
from .exceptions import ExceptionVariable
from .functions import PartialVariable, UserFunctionVariable, UserMethodVariable
from .iterators import (
    ExistingIteratorVariable,
    is_self_iterator_class,
    ChainVariable,
    EnumerateVariable,
    FilterVariable,
    GeneratorVariable,
    IteratorVariable,
    ListIteratorVariable,
    MapVariable,
    ZipVariable,
    make_iterator,
    stop_iteration,
)
from .builtin_subclasses import MappingProxyVariable
from .dict_objects import DictObjectVariable
from .instance_attrs import InstanceAttrsMixin
from .object_ids import object_id
from .objects import ClassVariable, SuperVariable, UserObjectVariable, new_object
from .operators import binary_op, contains, tensor_operator, unary_op
from .random_values import PrologueValueVariable, derived_value
from .sequences import BaseSequenceVariable, DequeVariable, ListVariable, SliceVariable, TupleVariable
from .sets import SetVariable, other_operand
from .sym_node import SymNodeVariable, specialized, sym_builtin
from ..diagnostics.describe import describe

_HANDLERS: dict[Any, Callable] = {}
#: the in-place operator functions (``operator.iadd``...): a mutation of a list or set
_INPLACE_OPERATORS = (operator.iadd, operator.isub, operator.imul, operator.itruediv,
                      operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul,
                      operator.iand, operator.ior, operator.ixor, operator.ilshift,
                      operator.irshift, operator.iconcat)

PURE_BUILTINS = {
    abs, all, any, bool, chr, divmod, float, hash, hex, int, len, max, min, oct, ord, pow,
    repr, round, sorted, str, sum, tuple, list, isinstance, issubclass, callable, complex,
    range, slice, bin, format, reversed, enumerate, zip, frozenset, bytes, ascii,
    sys.intern,  # (a str's canonical copy: equal to it; namedtuple() interns field names)
}
PURE_MODULES = ("_operator", "operator", "math")


def register(*fns, pure: bool = True):
    """Register a handler ``handler(tx, args, kwargs) -> VariableTracker | None`` for ``fns``.
    When the handler returns ``None``, a ``pure`` function with constant arguments is
    folded (called at trace time); any other is a graph break."""

    def deco(handler):
        for fn in fns:
            assert fn not in _HANDLERS, f"double registration of {fn}"
            _HANDLERS[fn] = handler
            if not pure:
                _NOT_FOLDED.add(fn)
        return handler

    return deco


#: functions with a handler that must not be called at trace time when it declines (their
#: result depends on more than the arguments' values, or creates an object with state)
_NOT_FOLDED: set = set()


class BuiltinVariable(VariableTracker):
    """A builtin function or class (``len``, ``list``, ``operator.add``, ``math.sqrt``,
    ``ValueError``, ``object.__setattr__``)."""

    def __init__(self, fn: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        return getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", repr(self.fn))

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def identity(self):
        return self.fn

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return call_builtin(tx, self.fn, list(args), dict(kwargs))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        value = call_python("getattr", getattr, self.fn, name)
        return VariableTracker.build(tx, value)

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.fn, name)


#: immutable builtin types: their methods (``str.isalnum``, ``int.bit_length``) called
#: through the type are pure functions of their arguments
_IMMUTABLE_TYPES = (str, bytes, int, float, complex, bool, tuple, frozenset)
#: builtin types whose methods called through the type (``set.union(a, b)``) are the
#: receiver's own method when the receiver is exactly of that type
_METHOD_OWNERS = (*_IMMUTABLE_TYPES, list, dict, set)


def _is_immutable_type_method(fn: Any) -> bool:
    return isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        getattr(fn, "__objclass__", None) in _IMMUTABLE_TYPES


def _type_method_owner(fn: Any) -> type | None:
    """``set`` for ``set.union``: the builtin type a method descriptor belongs to."""
    if isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        owner = getattr(fn, "__objclass__", None)
        return owner if owner in _METHOD_OWNERS else None
    return None


def is_pure_builtin(fn: Any) -> bool:
    if fn in _NOT_FOLDED:
        return False
    if fn in _HANDLERS or fn in PURE_BUILTINS or _is_immutable_type_method(fn):
        return True
    return getattr(fn, "__module__", None) in PURE_MODULES


#: builtins applied to values drawn from random at run time as prologue steps
_ON_DRAWN_VALUES = {int, float, bool, abs, round, min, max, divmod, pow, str}


def call_builtin(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """Call builtin ``fn``: its handler, or constant folding, or a graph break.  The
    arguments are bound to ``fn``'s real signature first (``arg_binding``)."""
    check_builtin_args(fn, args, kwargs)
    if fn in (range, operator.index) and not kwargs:  # ``__index__`` objects as ints
        args = [tx.as_index(a) for a in args]
    if (fn in _ON_DRAWN_VALUES or getattr(fn, "__module__", None) == "math") and not kwargs and \
            any(isinstance(a, PrologueValueVariable) for a in args):
        return derived_value(tx, fn, args)
    if not kwargs and any(isinstance(a, SymNodeVariable) for a in args):
        result = sym_builtin(tx, fn, args)
        if result is not None:
            return result
        args = specialized(args)  # what a builtin not modelled on symbols needs: the value
    handler = _HANDLERS.get(fn)
    if handler is not None:
        result = handler(tx, args, kwargs)
        if result is not None:
            return result
    owner = _type_method_owner(fn)
    if owner is not None and args and not args[0].is_tensor() and args[0].python_type() is owner \
            and not (owner in _IMMUTABLE_TYPES and all(a.is_python_constant() for a in [*args, *kwargs.values()])):
        return args[0].call_method(tx, fn.__name__, list(args[1:]), kwargs)  # ``set.union(a, b)``
    if isinstance(fn, type) and issubclass(fn, BaseException):
        cargs, ckwargs = check_constant_args(fn.__name__, args, kwargs)
        return ExceptionVariable(call_python(fn.__name__, fn, *cargs, **ckwargs))
    if fn in (float, int) and len(args) == 1 and not kwargs and args[0].is_tensor() and \
            tx.output.capture_scalar_outputs:  # ``t.__float__()``: its one value, an unbacked symbol
        return call_builtin(tx, fn, [args[0].call_method(tx, "item", [], {})], {})
    if any(a.is_tensor() for a in [*args, *kwargs.values()]):
        if getattr(fn, "__module__", None) in ("_operator", "operator"):
            return tensor_operator(tx, fn, args) if not kwargs else tx.output.call(tx, "call_function", fn, args, kwargs)
        raise unsupported("builtin on a tensor", f"{_name(fn)}() with a tensor argument",
                          "This builtin needs the tensor's values in Python.")
    if is_pure_builtin(fn) and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        value = call_python(_name(fn), fn, *[a.as_python_constant() for a in args],
                            **{k: v.as_python_constant() for k, v in kwargs.items()})
        return VariableTracker.build(tx, value)
    raise unsupported("unsupported builtin call", f"{_name(fn)}({', '.join(map(describe, args))})",
                      f"graphjit does not trace {_name(fn)} with these arguments.")


def check_builtin_args(fn, args: list, kwargs: dict) -> None:
    """Bind the user's arguments to builtin ``fn``'s real signature before a handler runs
    (``arg_binding``: eager's TypeError, observed, when they do not bind)."""
    check_call(fn, args, kwargs, _receiver_type(fn, args))


def _receiver_type(fn, args: list) -> type | None:
    """The type of ``args[0]`` where ``fn`` is an unbound C method (``list.append(p, x)``)."""
    if not args or not isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) \
            or args[0].is_tensor():
        return None
    return _python_type(args[0])


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))


def _const(var: VariableTracker, what: str) -> Any:
    try:
        return var.as_python_constant()
    except Exception:
        raise unsupported(f"non-constant {what}", describe(var)) from None


# -- attributes ----------------------------------------------------------------------------

def _attr_name(var: VariableTracker) -> str:
    """The name argument of ``getattr``/``setattr``/``hasattr``/``delattr``: a constant
    ``str`` (eager's TypeError for anything else)."""
    name = _const(var, "attribute name")
    if not isinstance(name, str):
        raise observed(TypeError, f"attribute name must be string, not '{type(name).__name__}'")
    return name


@register(getattr)
def _getattr(tx, args, kwargs):
    obj, name = args[0], _attr_name(args[1])
    if len(args) == 3:
        try:
            return obj.var_getattr(tx, name)
        except ObservedException as e:
            if e.is_attribute_error():
                return args[2]
            raise
    return obj.var_getattr(tx, name)


@register(hasattr)
def _hasattr(tx, args, kwargs):
    return ConstantVariable(args[0].has_attr(tx, _attr_name(args[1])))


@register(setattr)
def _setattr(tx, args, kwargs):
    obj, name, value = args
    obj.store_attr(tx, _attr_name(name), value)
    return ConstantVariable(None)


@register(delattr)
def _delattr(tx, args, kwargs):
    obj, name = args
    obj.del_attr(tx, _attr_name(name))
    return ConstantVariable(None)


@register(sys.exc_info, pure=False)
def _exc_info(tx, args, kwargs):
    """``sys.exc_info()``: the exception handled by the innermost frame handling one
    (callers included, as CPython's thread state), ``(None, None, None)`` when none is.
    A handled exception's traceback is not modelled (:class:`TracebackVariable`)."""
    if args or kwargs:
        return None
    frame = tx
    while frame is not None:
        info = getattr(frame, "exc_info", None)
        if isinstance(info, ExceptionVariable):
            return TupleVariable([VariableTracker.build(tx, type(info.exc)), info, TracebackVariable()])
        if info is not None and not (info.is_python_constant() and info.as_python_constant() is None):
            raise unsupported("sys.exc_info() while an exception is handled", describe(info))
        frame = frame.parent
    return ConstantVariable((None, None, None))


class TracebackVariable(VariableTracker):
    """The traceback ``sys.exc_info()`` returns for a traced exception: it is not
    modelled, so any use of it (attributes, passing it on, returning it) is a graph break;
    ``tb is None`` is ``False`` as in eager."""

    def python_type(self) -> type:
        return types.TracebackType


@register(id, pure=False)
def _id(tx, args, kwargs):
    """``id(obj)``: an identity compared without guards (``object_ids``); its number, where
    read, is a pre-existing object's id with the object's identity guarded."""
    if len(args) != 1 or kwargs:
        return None
    return object_id(tx, args[0])


@register(globals, pure=False)
def _globals(tx, args, kwargs):
    """``globals()``: the calling frame's module globals, the tracker ``LOAD_GLOBAL`` and
    ``STORE_GLOBAL`` use (writes through it are the same pending writes)."""
    if args or kwargs:
        return None
    return tx.output.globals_tracker(tx, tx.f_globals)


@register(vars, pure=False)
def _vars(tx, args, kwargs):
    if len(args) == 1 and isinstance(args[0], InstanceAttrsMixin):
        return args[0].var_getattr(tx, "__dict__")
    return None


@register(object.__setattr__)
def _object_setattr(tx, args, kwargs):
    obj, name, value = args
    proto.generic_setattr(tx, _as_object(obj), _const(name, "attribute name"), value)
    return ConstantVariable(None)


@register(object.__delattr__)
def _object_delattr(tx, args, kwargs):
    obj, name = args
    proto.generic_delattr(tx, _as_object(obj), _const(name, "attribute name"))
    return ConstantVariable(None)


@register(object.__getattribute__)
def _object_getattribute(tx, args, kwargs):
    obj, name = args
    return proto.generic_getattr(tx, _as_object(obj), _const(name, "attribute name"))


@register(object.__new__)
def _object_new(tx, args, kwargs):
    cls = _const(args[0], "class")
    if not isinstance(cls, type):  # eager's TypeError ("X is not a type object")
        call_python("object.__new__", object.__new__, cls)
    return new_object(tx, cls)


@register(object.__init__)
def _object_init(tx, args, kwargs):
    return ConstantVariable(None)


def _as_object(var):
    if not isinstance(var, InstanceAttrsMixin):
        raise unsupported("object.__setattr__/__getattribute__ on a non-object", describe(var))
    return var


@register(types.MethodType)
def _method_type(tx, args, kwargs):
    fn, obj = args
    return UserMethodVariable(fn, obj)


@register(super, pure=False)
def _super(tx, args, kwargs):
    if not args:
        typ, obj = tx.zero_arg_super()
        return SuperVariable(typ, obj)
    first = _const(args[0], "super() type")
    if not isinstance(first, type):  # eager's TypeError ("argument 1 must be a type")
        call_python("super", super, first)
    if len(args) == 2:
        return SuperVariable(first, args[1])
    return None


@register(type)
def _type(tx, args, kwargs):
    if len(args) != 1:
        return None
    return VariableTracker.build(tx, args[0].python_type())


@register(isinstance)
def _isinstance(tx, args, kwargs):
    obj, cls = args
    classes = _const(cls, "isinstance class")
    try:
        return ConstantVariable(call_python("isinstance", issubclass, obj.python_type(), classes))
    except ObservedException as e:
        if type(e.exc) is not TypeError:
            raise
        error = e  # issubclass's words; eager's, for a second argument that is no class:
    try:
        isinstance(None, classes)
    except TypeError as e:
        raise ObservedException(e.with_traceback(None)) from None
    raise error


@register(issubclass)
def _issubclass(tx, args, kwargs):
    return ConstantVariable(call_python("issubclass", issubclass, _const(args[0], "class"),
                                        _const(args[1], "class")))


@register(callable)
def _callable(tx, args, kwargs):
    (obj,) = args
    if obj.is_tensor():
        return ConstantVariable(False)
    if isinstance(obj, (UserFunctionVariable, UserMethodVariable, ClassVariable, BuiltinVariable)):
        return ConstantVariable(True)
    return ConstantVariable(proto.type_attr_raw(obj.python_type(), "__call__") is not proto.MISSING)


# -- containers -------------------------------------------------------------------------

@register(hash)
def _hash(tx, args, kwargs):
    """``hash(obj)`` of a user object whose class defines ``__hash__`` in Python (a
    dataclass's generated one): that method traced; ``__hash__ = None`` is eager's
    TypeError."""
    if len(args) != 1 or kwargs or not isinstance(args[0], UserObjectVariable):
        return None
    obj = args[0]
    for klass in obj.python_type().__mro__:
        if "__hash__" in klass.__dict__:
            fn = klass.__dict__["__hash__"]
            if fn is None:
                raise observed(TypeError, f"unhashable type: '{obj.python_type().__name__}'")
            if not isinstance(fn, types.FunctionType):
                return None
            result = obj.call_method(tx, "__hash__", [], {})
            if not (result.is_python_constant() and isinstance(result.as_python_constant(), int)):
                return None
            return ConstantVariable(hash(result.as_python_constant()))  # as CPython truncates
    return None


@register(len)
def _len(tx, args, kwargs):
    (obj,) = args
    if obj.is_tensor():
        if obj.example_value.dim() == 0:
            raise observed(TypeError, "len() of a 0-d tensor")
        return obj.call_method(tx, "__len__", [], {})  # symbolic where the size is
    if isinstance(obj, (BaseSequenceVariable, DictVariable, SetVariable, DictViewVariable,
                        MappingProxyVariable)) or isinstance(obj, UserObjectVariable):
        return obj.call_method(tx, "__len__", [], {})
    return None


@register(tuple)
def _tuple(tx, args, kwargs):
    return TupleVariable(args[0].unpack(tx) if args else [])


@register(list)
def _list(tx, args, kwargs):
    return ListVariable(args[0].unpack(tx) if args else [])


@register(dict)
def _dict(tx, args, kwargs, user_cls=dict):
    # an OrderedDict has an instance __dict__ (``state_dict()`` sets ``_metadata`` on it)
    out = DictObjectVariable({}, user_cls=user_cls) if user_cls.__dictoffset__ else \
        DictVariable({}, user_cls=user_cls)
    for other in args:
        for key, value in items_of(tx, other):
            out._items[key] = value
    out._items.update(kwargs)
    return out


register(collections.OrderedDict)(lambda tx, args, kwargs: _dict(tx, args, kwargs, collections.OrderedDict))


@register(set, frozenset)
def _set(tx, args, kwargs):
    return None if kwargs or len(args) > 1 else _make_set(tx, args, frozen=False)


def _make_set(tx, args, frozen: bool):
    """``set(it)``/``frozenset(it)`` made as eager makes it, so that its order is eager's
    even when hashes collide: a set argument is copied (its table as it is), any other
    iterable's keys are added in order, duplicates included."""
    if not args:
        return SetVariable((), frozen=frozen)
    if isinstance(args[0], SetVariable):
        return args[0].apply(tx, "copy", [], frozen=frozen)
    return SetVariable(other_operand(tx, args[0]), frozen=frozen)


_HANDLERS[frozenset] = lambda tx, args, kwargs: None if kwargs or len(args) > 1 else _make_set(tx, args, True)


@register(enumerate)
def _enumerate(tx, args, kwargs):
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    return EnumerateVariable(make_iterator(tx, args[0]), start.as_python_constant())


@register(zip)
def _zip(tx, args, kwargs):
    strict = kwargs.pop("strict", ConstantVariable(False)).as_python_constant()
    if kwargs:
        return None
    return ZipVariable([make_iterator(tx, a) for a in args], bool(strict))


@register(collections.deque, pure=False)
def _deque(tx, args, kwargs):
    """``collections.deque(iterable=(), maxlen=None)``: a new deque (``maxlen`` keeps the
    last items, as CPython's)."""
    params = dict(zip(("iterable", "maxlen"), args), **kwargs)
    if len(args) > 2 or set(params) - {"iterable", "maxlen"}:
        return None
    maxlen = params.get("maxlen", ConstantVariable(None))
    if not maxlen.is_python_constant():
        return None
    n = maxlen.as_python_constant()
    if n is not None and (type(n) is not int or n < 0):
        raise observed(ValueError if type(n) is int else TypeError,
                       "maxlen must be non-negative" if type(n) is int else "an integer is required")
    items = params["iterable"].unpack(tx) if "iterable" in params else []
    if n is not None:
        items = items[len(items) - n:] if n else []
    return DequeVariable(items, n)


@register(map, pure=False)
def _map(tx, args, kwargs):
    if len(args) < 2 or kwargs:
        return None
    return MapVariable(args[0], [make_iterator(tx, a) for a in args[1:]])


@register(filter, pure=False)
def _filter(tx, args, kwargs):
    if len(args) != 2 or kwargs:
        return None
    return FilterVariable(args[0], make_iterator(tx, args[1]))


@register(itertools.chain, pure=False)
def _chain(tx, args, kwargs):
    if kwargs:
        return None
    return ChainVariable(list(args))


@register(reversed)
def _reversed(tx, args, kwargs):
    if isinstance(args[0], IteratorVariable):
        raise observed(TypeError, f"'{args[0].python_type().__name__}' object is not reversible")
    if args[0].is_python_constant():  # eager's TypeError for what is not a sequence
        call_python("reversed", reversed, args[0].as_python_constant())
    return ListIteratorVariable(list(reversed(args[0].unpack(tx))), origin=args[0], reverse=True)


@register(iter, pure=False)
def _iter(tx, args, kwargs):
    if len(args) == 1:
        return make_iterator(tx, args[0])
    if len(args) == 2 and not kwargs:  # iter(callable, sentinel): a callable_iterator
        it = tx.inline_polyfill(poly.iter_sentinel, list(args))
        it.escapes_as = _CALLABLE_ITERATOR
        return it
    return None


_CALLABLE_ITERATOR = type(iter(int, 1))


def _next_of_generator(tx, gen, default: list):
    """``next(gen[, default])``; an exception leaving it is marked as the generator's."""
    try:
        item = gen.next_item(tx)
        if item is None:
            if default:
                return default[0]
            raise stop_iteration(gen.return_value)
        return item
    except ObservedException as e:
        e.from_generator = True
        raise


@register(next, pure=False)
def _next(tx, args, kwargs):
    it = args[0]
    if isinstance(it, UserObjectVariable) and not it.is_new and is_self_iterator_class(it.cls):
        it = ExistingIteratorVariable(it)  # (taking its item is the break, with its reason)
    if isinstance(it, GeneratorVariable):
        return _next_of_generator(tx, it, args[1:])
    if isinstance(it, IteratorVariable):
        item = it.next_item(tx)
        if item is None:
            if len(args) > 1:
                return args[1]
            raise observed(StopIteration)
        return item
    cls = _python_type(it)
    if cls is not None and not hasattr(cls, "__next__"):
        raise observed(TypeError, f"'{cls.__name__}' object is not an iterator")
    return None


def _python_type(var: VariableTracker) -> type | None:
    """``var``'s Python type, or ``None`` where the tracker does not know it."""
    try:
        return var.python_type()
    except Unsupported:
        return None


@register(sorted)
def _sorted(tx, args, kwargs):
    """``sorted(items, key=..., reverse=...)`` over items (or keys, computed by tracing the
    key function on each item in order, as CPython calls it) known at trace time; stable."""
    if len(args) != 1 or set(kwargs) - {"reverse", "key"}:
        return None
    items = args[0].unpack(tx)
    key = kwargs.get("key")
    if key is not None and not (key.is_python_constant() and key.as_python_constant() is None):
        keys = [key.call_function(tx, [i], {}) for i in items]
    else:
        keys = items
    reverse = kwargs["reverse"].as_python_constant() if "reverse" in kwargs else False
    if not all(k.is_python_constant() for k in keys):
        if any(k.is_tensor() for k in keys):
            return None
        return tx.inline_polyfill(poly.sorted_by_lt, [ListVariable(items), ListVariable(keys),
                                                      ConstantVariable(bool(reverse))])
    keyed = [(k.as_python_constant(), n) for n, k in enumerate(keys)]
    order = call_python("sorted", sorted, keyed, key=lambda p: p[0], reverse=reverse)
    return ListVariable([items[n] for _, n in order])


@register(functools.partial, pure=False)
def _partial(tx, args, kwargs):
    """``functools.partial(func, *args, **keywords)``: a nested partial is flattened, as
    CPython's constructor does."""
    if not args:
        raise observed(TypeError, "type 'partial' takes at least one argument")
    func, rest = args[0], list(args[1:])
    if func.is_python_constant() and not callable(func.as_python_constant()):
        raise observed(TypeError, "the first argument must be callable")
    if isinstance(func, PartialVariable) and func.source is None:
        return PartialVariable(func.func, [*func.args, *rest], {**func.keywords, **kwargs})
    return PartialVariable(func, rest, dict(kwargs))


@register(functools.reduce, pure=False)
def _reduce(tx, args, kwargs):
    return tx.inline_polyfill(poly_functools.reduce, list(args), kwargs)


@register(tuple.__new__)
def _tuple_new(tx, args, kwargs):
    """``tuple.__new__(cls, iterable)``: what a namedtuple's generated ``__new__`` calls."""
    if len(args) not in (1, 2) or kwargs or not args[0].is_python_constant():
        return None
    cls = args[0].as_python_constant()
    if not (isinstance(cls, type) and issubclass(cls, tuple)) or \
            proto.type_attr_raw(cls, "__init__") is not object.__init__:
        return None
    if cls is not tuple and not hasattr(cls, "_fields"):
        return None  # another tuple subclass: its own attributes are not modelled
    items = args[1].unpack(tx) if len(args) == 2 else []
    class_var = args[0] if is_new(args[0]) else None  # (a class made in the trace)
    return TupleVariable(items, namedtuple_cls=None if cls is tuple else cls, class_var=class_var)


@register(slice)
def _slice(tx, args, kwargs):
    parts = list(args) + [ConstantVariable(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [ConstantVariable(None), args[0], ConstantVariable(None)]
    return SliceVariable(*parts)


def _short_circuit(polyfill):
    """``any``/``all``: their polyfill, which stops where CPython's stops (a generator
    argument runs no further than eagerly); all-constant arguments are folded."""
    def handler(tx, args, kwargs):
        if len(args) != 1 or kwargs or args[0].is_python_constant():
            return None
        return tx.inline_polyfill(polyfill, list(args))
    return handler


register(any)(_short_circuit(poly.builtin_any))
register(all)(_short_circuit(poly.builtin_all))


@register(sum)
def _sum(tx, args, kwargs):
    if len(args) + len(kwargs) > 2 or set(kwargs) - {"start"}:
        return None
    return tx.inline_polyfill(poly.builtin_sum, list(args), kwargs)


def _minmax(fn):
    def handler(tx, args, kwargs):
        if len(args) == 1 and args[0].is_tensor():
            ev = args[0].example_value  # ``max(t)`` of a 1-d tensor: over its elements
            if not kwargs and ev.dim() == 1 and isinstance(ev.shape[0], int) and ev.shape[0] > 0:
                return tensor_minmax(tx, fn is max, args[0].unpack(tx))
            return None
        if len(args) == 1 and not kwargs and args[0].is_python_constant():
            return VariableTracker.build(tx, call_python(fn.__name__, fn, args[0].as_python_constant()))
        values = list(args) if len(args) > 1 else None
        if len(args) == 1 and isinstance(args[0], BaseSequenceVariable) and args[0].items and \
                all(v.is_tensor() for v in args[0].items):
            values = list(args[0].items)
        if values is not None and not kwargs and single_element_tensors(values):
            return tensor_minmax(tx, fn is max, values)
        if values is not None and any(v.is_tensor() for v in values):
            raise unsupported("max/min of tensors", f"builtin {fn.__name__}() compares tensor values",
                              hints=["Use torch.maximum / torch.minimum or torch.max(t)."])
        if values is not None and not kwargs and all(v.is_python_constant() for v in values):
            return VariableTracker.build(tx, call_python(fn.__name__, fn, *(v.as_python_constant() for v in values)))
        # keys, defaults, items that are not constants: CPython's loop, traced
        return tx.inline_polyfill(poly.builtin_max if fn is max else poly.builtin_min, list(args), kwargs)

    register(fn, pure=False)(handler)


_minmax(max)
_minmax(min)


def single_element_tensors(values: list) -> bool:
    """Tensors of one element each, all of one static shape, dtype and device: what the
    builtin ``max``/``min`` can compare (bigger tensors are eager's RuntimeError)."""
    if not values or not all(v.is_tensor() for v in values):
        return False
    evs = [v.example_value for v in values]
    first = evs[0]
    return all(isinstance(e.numel(), int) and e.numel() == 1 and e.shape == first.shape and
               e.dtype == first.dtype and e.device == first.device for e in evs)


def tensor_minmax(tx, is_max: bool, values: list) -> VariableTracker:
    """``max(a, b, ...)`` of single-element tensors as CPython's loop decides it (``item >
    best`` replaces ``best``: the first of equal items wins, a NaN first stays), with the
    choice made in the graph: ``best = where(item > best, item, best)``."""
    best = values[0]
    for item in values[1:]:
        better = binary_op(tx, operator.gt if is_max else operator.lt, item, best)
        best = tx.output.call(tx, "call_function", torch.where, [better, item, best], {})
    return best


@register(abs)
def _abs(tx, args, kwargs):
    if args[0].is_tensor():
        return tensor_operator(tx, operator.abs, list(args))
    return None


@register(bool)
def _bool(tx, args, kwargs):
    if len(args) == 1:
        return ConstantVariable(args[0].truthiness(tx))
    return None


@register(print)
def _print(tx, args, kwargs):
    raise unsupported("print", "print() writes to stdout",
                      "Output cannot be part of a graph; print runs in Python between graphs.",
                      ["Remove the print from the compiled function, or accept the graph break."])


@register(operator.contains)
def _contains(tx, args, kwargs):
    return contains(tx, args[0], args[1])


def _binary(op):
    register(op)(lambda tx, args, kwargs: binary_op(tx, op, *args) if len(args) == 2 and not kwargs else None)


for _op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
            operator.mod, operator.pow, operator.matmul, operator.eq, operator.ne, operator.lt,
            operator.le, operator.gt, operator.ge, operator.and_, operator.or_, operator.xor,
            operator.is_, operator.is_not, operator.lshift, operator.rshift, operator.concat,
            *_INPLACE_OPERATORS):
    _binary(_op)


def _unary(op, as_op=None):
    register(op)(lambda tx, args, kwargs: unary_op(tx, as_op or op, args[0]) if len(args) == 1 and not kwargs
                 else None)


for _op in (operator.neg, operator.pos, operator.invert, operator.not_):
    _unary(_op)
_unary(operator.inv, operator.invert)


@register(operator.truth)
def _truth(tx, args, kwargs):
    return call_builtin(tx, bool, list(args), dict(kwargs))


@register(operator.setitem, pure=False)
def _setitem(tx, args, kwargs):
    """``operator.setitem(obj, key, value)``: a store into the traced object (never a
    call at trace time on a copy)."""
    if len(args) != 3 or kwargs:
        return None
    tx.store_subscript(args[0], args[1], args[2])
    return ConstantVariable(None)


@register(operator.delitem, pure=False)
def _delitem(tx, args, kwargs):
    if len(args) != 2 or kwargs:
        return None
    tx.delete_subscript(args[0], args[1])
    return ConstantVariable(None)


@register(operator.getitem)
def _getitem(tx, args, kwargs):
    return tx.subscript(args[0], args[1])


# -- builders -----------------------------------------------------------------------------

def is_builtin_callable(value: Any) -> bool:
    if isinstance(value, type):
        return value in _HANDLERS or (value.__module__ == "builtins"
                                      and getattr(builtins, value.__name__, None) is value)
    if not isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType,
                              types.WrapperDescriptorType, types.MethodDescriptorType)):
        return False
    try:
        return value in _HANDLERS or value in PURE_BUILTINS \
            or getattr(builtins, getattr(value, "__name__", ""), None) is value \
            or getattr(value, "__module__", None) in PURE_MODULES or _type_method_owner(value) is not None
    except TypeError:
        return False


def build_builtin(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return BuiltinVariable(value, source=source)


__all__ = ["BuiltinVariable", "call_builtin", "register", "is_pure_builtin", "is_builtin_callable",
           "build_builtin"]

"""Python objects: instances of user classes, classes, ``super()``, Python modules.

One tracker family.  :class:`UserObjectVariable` is any instance; pre-existing vs created
in the trace is its ``mutation_type`` (``AttributeMutationExisting``: ``value`` is the real
object, it has a source and a TYPE_MATCH guard; ``AttributeMutationNew``: ``value`` is
``None`` until it is materialized after the graph).  Attribute reads and writes go through
:mod:`.object_protocol`; the instance ``__dict__`` is an :class:`InstanceDictVariable`
(a lazily-read dict whose writes are logged), values written through slots and other C
data descriptors are kept in ``slot_values``.  ``nn.Module`` builds on this class
(``nn_module``).

A new object escapes as ``object.__new__(cls)`` plus its ``__dict__`` and slot values,
set after every new object exists (so cycles work): see ``PyCodegen`` in ``graph/codegen.py``.
"""

from __future__ import annotations

import abc
import collections
import enum
import sys
import types
from typing import Any

import torch

from ..exc import Unsupported, observed, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, ConstSource
from . import object_protocol as proto
from .arg_binding import check_bound_call
from .base import (
    AttributeMutationExisting,
    AttributeMutationNew,
    MethodVariable,
    VariableTracker,
    call_python,
    check_constant_args,
    register_builder,
    register_builder_predicate,
)
from .constant import FOLDED_CLASSES, ConstantVariable, is_constant_value
from .dict_objects import DictObjectVariable
from .dicts import DELETED, MISSING, DictVariable
from .exceptions import ExceptionVariable
from .functions import UserMethodVariable
from .partial_subclasses import is_modelled_subclass, make_instance as make_partial_instance
from .instance_attrs import InstanceAttrsMixin, InstanceDictVariable
from ..diagnostics.describe import describe
from .builtin_subclasses import (
    SetObjectVariable,
    TupleObjectVariable,
    builtin_base,
    instantiate_builtin_subclass,
    make_mapping_proxy,
    new_builtin_instance,
    set_init,
)
from .iterators import (
    ExistingIteratorVariable,
    IteratorVariable,
    ObjectIteratorVariable,
    is_self_iterator_class,
    make_iterator,
)


class UserObjectVariable(InstanceAttrsMixin, VariableTracker):
    """An instance of a user class; see the module docstring."""

    def __init__(self, value: Any, *, cls: type | None = None, **kwargs) -> None:
        if "mutation_type" not in kwargs:
            kwargs["mutation_type"] = AttributeMutationNew() if value is None else AttributeMutationExisting()
        super().__init__(**kwargs)
        self.value = value
        self.cls = cls if cls is not None else type(value)
        self._dict: DictVariable | None = None
        self.slot_values: dict[str, Any] = {}  # name -> tracker or DELETED (C data descriptors)

    def _repr_body(self) -> str:
        state = "new" if self.is_new else "existing"
        return f"{self.cls.__qualname__}, {state}"

    @property
    def is_new(self) -> bool:
        return isinstance(self.mutation_type, AttributeMutationNew)

    def python_type(self) -> type:
        return self.cls

    def identity(self) -> Any:
        return self if self.value is None else self.value

    def children(self) -> list[VariableTracker]:
        out = [v for v in self.slot_values.values() if v is not DELETED]
        if self._dict is not None:
            out.append(self._dict)
        return out

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        builtin = _OBJECT_METHODS.get(name)
        if builtin is not None and proto.type_attr_raw(self.cls, name) is getattr(object, name):
            return builtin(tx, self, *args, **kwargs)
        method = self.var_getattr(tx, name)
        if isinstance(method, MethodVariable) and method.obj is self and method.name == name:
            # a C method this tracker does not model (it would ask itself again)
            raise unsupported("C-level method", f"{self.cls.__qualname__}.{name}",
                              "The object's type is implemented in C; the call runs in Python.")
        return method.call_function(tx, args, kwargs)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        call = proto.type_attr_raw(self.cls, "__call__")
        if call is MISSING:
            raise observed(TypeError, f"'{self.cls.__name__}' object is not callable")
        return self.var_getattr(tx, "__call__").call_function(tx, args, kwargs)

    def truthiness(self, tx) -> bool:
        for dunder in ("__bool__", "__len__"):
            if proto.type_attr_raw(self.cls, dunder) is not MISSING:
                result = self.var_getattr(tx, dunder).call_function(tx, [], {})
                return bool(result.as_python_constant()) if dunder == "__len__" else result.truthiness(tx)
        return True

    def get_iterator(self, tx) -> VariableTracker:
        """``iter(obj)`` as CPython's ``PyObject_GetIter``: the class's ``__iter__`` (its
        result must have ``__next__``), else the sequence protocol (``__getitem__``)."""
        raw = proto.type_attr_raw(self.cls, "__iter__")
        if not self.is_new and is_self_iterator_class(self.cls):
            return ExistingIteratorVariable(self)
        if raw is MISSING or raw is None:
            if raw is MISSING and proto.type_attr_raw(self.cls, "__getitem__") is not MISSING:
                return ObjectIteratorVariable(self, by_index=True)
            raise observed(TypeError, f"'{self.cls.__name__}' object is not iterable")
        it = self.var_getattr(tx, "__iter__").call_function(tx, [], {})
        if isinstance(it, IteratorVariable):
            return it
        if isinstance(it, UserObjectVariable) and proto.type_attr_raw(it.cls, "__next__") is not MISSING:
            return ObjectIteratorVariable(it)
        if isinstance(it, UserObjectVariable) or it.is_python_constant():
            raise observed(TypeError, f"iter() returned non-iterator of type '{it.python_type().__name__}'")
        return make_iterator(tx, it)

    def unpack(self, tx) -> list[VariableTracker]:
        return self.get_iterator(tx).unpack(tx)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        raise unsupported("cannot reconstruct", f"new {self.cls.__qualname__} outside materialization")


def _object_init(tx, obj, *args, **kwargs):
    """``object.__init__`` with arguments: CPython's ``object_init`` refuses them when the
    class overrides ``__init__`` (a ``super().__init__(x)`` reaching ``object``), or when it
    keeps both ``object.__init__`` and ``object.__new__``."""
    if args or kwargs:
        if proto.type_attr_raw(obj.cls, "__init__") is not object.__init__:
            raise observed(TypeError, "object.__init__() takes exactly one argument (the instance to initialize)")
        if proto.type_attr_raw(obj.cls, "__new__") is object.__new__:
            raise observed(TypeError, f"{obj.cls.__name__}.__init__() takes exactly one argument "
                                      f"(the instance to initialize)")
    return ConstantVariable(None)


def _object_eq(tx, obj, other):
    """``object.__eq__``: ``True`` for the object itself, else ``NotImplemented``."""
    return ConstantVariable(True if obj.identity() is other.identity() else NotImplemented)


def _object_ne(tx, obj, other):
    """``object.__ne__`` (CPython's ``object_richcompare``): the type's ``__eq__``, its
    result inverted unless it is ``NotImplemented`` (a ``super().__ne__(other)`` reaching
    ``object``)."""
    result = obj.call_method(tx, "__eq__", [other], {})
    if result.is_python_constant() and result.as_python_constant() is NotImplemented:
        return result
    return ConstantVariable(not result.truthiness(tx))


_OBJECT_METHODS = {
    "__init__": _object_init,
    "__eq__": _object_eq,
    "__ne__": _object_ne,
    "__setattr__": lambda tx, obj, name, value: (proto.generic_setattr(
        tx, obj, name.as_python_constant(), value), ConstantVariable(None))[1],
    "__delattr__": lambda tx, obj, name: (proto.generic_delattr(
        tx, obj, name.as_python_constant()), ConstantVariable(None))[1],
    "__getattribute__": lambda tx, obj, name: proto.generic_getattr(tx, obj, name.as_python_constant()),
}


def register_object_method(name: str):
    """Register ``handler(tx, obj, *args, **kwargs)`` as ``object``'s C method ``name`` on
    instances of Python classes (used where the class does not override it)."""

    def deco(handler):
        assert name not in _OBJECT_METHODS, f"double registration of object.{name}"
        _OBJECT_METHODS[name] = handler
        return handler

    return deco


def new_object(tx, cls: type) -> UserObjectVariable:
    """``object.__new__(cls)`` while tracing."""
    if not can_make(cls):
        raise unsupported("instance of this class created in the compiled region",
                          f"{cls.__qualname__}()",
                          "Only plain Python classes (object as the only built-in base) are "
                          "created while tracing.")
    return UserObjectVariable(None, cls=cls)


def can_make(cls: type) -> bool:
    """Is ``cls`` a class whose instances ``object.__new__`` makes (no built-in base with
    its own layout, no metaclass but ``type``/``ABCMeta``)?"""
    base_ok = all(k.__module__ != "builtins" or k is object for k in cls.__mro__)
    return base_ok and type(cls) in (type, abc.ABCMeta) and not _is_torch_internal(cls)


def _is_torch_internal(cls: type) -> bool:
    """Classes whose instances are not made while tracing (tensors, Functions, C classes).
    ``nn.Module`` subclasses are made like any class: ``Module.__init__``,
    ``__setattr__`` and ``__call__`` are Python and are traced."""
    return issubclass(cls, (torch.Tensor, torch.autograd.Function)) or \
        (cls.__module__ or "").startswith("torch._C")


class ClassVariable(VariableTracker):
    """A class object (a user class, or a non-builtin library class).  Attribute writes
    (``C.x = v``) are pending writes that lookups through instances see too."""

    def __init__(self, cls: type, **kwargs) -> None:
        super().__init__(mutation_type=AttributeMutationExisting(), **kwargs)
        self.cls = cls
        if self.source is None:
            self.source = ConstSource(cls, cls.__qualname__)

    def _repr_body(self) -> str:
        return self.cls.__qualname__

    def python_type(self) -> type:
        return type(self.cls)

    def as_python_constant(self):
        return self.cls

    def identity(self):
        return self.cls

    def unpack(self, tx) -> list[VariableTracker]:
        """Iteration over an ``Enum`` class: its members, in definition order."""
        if isinstance(self.cls, enum.EnumMeta):
            return [VariableTracker.build(tx, member) for member in self.cls]
        return super().unpack(tx)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return class_getattr(tx, self, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if proto.type_attr_raw(type(self.cls), name) is not MISSING:
            raise unsupported("write to a metaclass attribute", f"{self.cls.__qualname__}.{name} = ...")
        tx.output.side_effects.class_attr_store(self, name, value)

    def del_attr(self, tx, name: str) -> None:
        if proto.lookup_type(tx, self.cls, name) is None or name not in self._own(tx):
            raise observed(AttributeError, f"type object '{self.cls.__name__}' has no attribute '{name}'")
        tx.output.side_effects.class_attr_store(self, name, DELETED)

    def _own(self, tx) -> set:
        pending = tx.output.side_effects.pending_class_attrs.get(self.cls, {})
        own = set(self.cls.__dict__)
        for k, v in pending.items():
            (own.discard if v is DELETED else own.add)(k)
        return own

    def replay_through_object_setattr(self) -> bool:
        return False  # ``C.x = v`` replays through type.__setattr__ (it clears method caches)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return instantiate(tx, self, args, kwargs)


def class_getattr(tx, cls_var: ClassVariable, name: str) -> VariableTracker:
    """``type.__getattribute__(cls, name)``: the metaclass's data descriptors, the class's
    MRO (descriptors bound with ``__get__(None, cls)``), the metaclass's other attributes."""
    cls = cls_var.cls
    meta_attr = proto.type_attr_raw(type(cls), name)
    src = AttrSource(cls_var.source, name)
    if meta_attr is not MISSING and hasattr(type(meta_attr), "__set__"):
        return VariableTracker.build(tx, getattr(cls, name), src)  # __name__, __mro__, __doc__...
    found = proto.lookup_type(tx, cls, name)
    if found is not None:
        if found.var is not None:
            return found.var
        raw = found.raw
        if isinstance(raw, classmethod):
            return UserMethodVariable(VariableTracker.build(tx, raw.__func__, AttrSource(src, "__func__")),
                                      cls_var)
        if isinstance(raw, staticmethod):
            return VariableTracker.build(tx, raw.__func__, src)
        get = getattr(type(raw), "__get__", None)
        if get is not None and isinstance(get, types.FunctionType) and not isinstance(raw, type):
            desc = VariableTracker.build(tx, raw, proto.owner_dict_source(tx, found, name), realize=True)
            return proto.call_descriptor_method(
                tx, get, ConstSource(get, f"{type(raw).__qualname__}.__get__"),
                [desc, ConstantVariable(None), cls_var])
        return VariableTracker.build(tx, getattr(cls, name), src)
    if meta_attr is not MISSING:
        return VariableTracker.build(tx, getattr(cls, name), src)
    proto.guard_absent_from_classes(tx, cls, name)
    raise observed(AttributeError, f"type object '{cls.__name__}' has no attribute '{name}'")


def instantiate(tx, cls_var: ClassVariable, args: list, kwargs: dict) -> VariableTracker:
    """``cls(*args, **kwargs)`` as ``type.__call__`` does it: ``__new__`` then, if the
    result is an instance of ``cls``, ``__init__``."""
    cls = cls_var.cls
    if isinstance(cls, enum.EnumMeta) and len(args) == 1 and not kwargs and args[0].is_python_constant():
        # ``Color(2)``: a lookup of an existing member (CPython's ValueError if none)
        return EnumMemberVariable(call_python(f"{cls.__qualname__}()", cls, args[0].as_python_constant()))
    if type(type(cls)).__call__ is not type.__call__ and proto.type_attr_raw(type(cls), "__call__") \
            is not type.__call__:
        raise unsupported("metaclass __call__", f"{cls.__qualname__}(...)")
    if issubclass(cls, BaseException):
        return _make_exception(tx, cls_var, args, kwargs)
    if issubclass(cls, dict) and cls.__new__ is dict.__new__:
        return _make_dict(tx, cls, args, kwargs)
    if cls is types.MappingProxyType:
        return make_mapping_proxy(tx, args, kwargs)
    base = builtin_base(cls)
    if base is not None and cls.__new__ is base.__new__:
        return instantiate_builtin_subclass(tx, cls, cls_var, args, kwargs)
    if cls in FOLDED_CLASSES and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        cargs, ckwargs = check_constant_args(cls.__qualname__, args, kwargs)
        return VariableTracker.build(tx, call_python(f"{cls.__qualname__}()", cls, *cargs, **ckwargs))
    if issubclass(cls, types.SimpleNamespace) and cls.__new__ is types.SimpleNamespace.__new__:
        return _make_namespace(tx, cls_var, args, kwargs)
    if is_modelled_subclass(cls):  # a Python subclass of functools.partial
        return make_partial_instance(tx, cls, args, kwargs)
    new = proto.type_attr_raw(cls, "__new__")
    if new is object.__new__:
        obj = new_object(tx, cls)
    elif isinstance(new, staticmethod) and isinstance(new.__func__, types.FunctionType):
        fn = VariableTracker.build(tx, new.__func__, AttrSource(cls_var.source, "__new__"), realize=True)
        obj = fn.call_function(tx, [cls_var, *args], kwargs)
    else:
        raise unsupported("class with a C-level __new__", f"{cls.__qualname__}(...)",
                          "Instances of classes with built-in bases are not created while tracing.")
    if isinstance(obj, (TupleObjectVariable, SetObjectVariable)) and issubclass(obj.cls, cls):
        # a Python __new__ made it through super().__new__: then __init__, as type.__call__
        init = proto.type_attr_raw(obj.cls, "__init__")
        if isinstance(init, types.FunctionType):
            obj.var_getattr(tx, "__init__").call_function(tx, args, kwargs)
        elif obj.base is set:
            set_init(tx, obj, args)
        return obj
    if isinstance(obj, UserObjectVariable) and issubclass(obj.cls, cls):
        init = proto.type_attr_raw(obj.cls, "__init__")
        if init is not object.__init__:
            obj.var_getattr(tx, "__init__").call_function(tx, args, kwargs)
        elif new is object.__new__:  # object() takes no arguments
            _object_init(tx, obj, *args, **kwargs)
    return obj


def allocator(cls: type):
    """What makes an empty instance of ``cls`` where a new object escapes (filled after):
    ``object.__new__``, or ``SimpleNamespace.__new__`` for a namespace (whose C ``__new__``
    refuses ``object.__new__``)."""
    return types.SimpleNamespace.__new__ if issubclass(cls, types.SimpleNamespace) else object.__new__


def _make_namespace(tx, cls_var: ClassVariable, args: list, kwargs: dict) -> VariableTracker:
    """``types.SimpleNamespace(**kw)`` (or a Python subclass): a new object whose
    ``__dict__`` holds the keywords; ``SimpleNamespace.__init__`` refuses positional
    arguments (3.11), a Python ``__init__`` is traced."""
    cls = cls_var.cls
    if any(k.__module__ == "builtins" and k not in (object, types.SimpleNamespace) for k in cls.__mro__) \
            or type(cls) not in (type, abc.ABCMeta):
        raise unsupported("class with a C-level __new__", f"{cls.__qualname__}(...)",
                          "A namespace class with another built-in base is not created while tracing.")
    obj = UserObjectVariable(None, cls=cls)
    init = proto.type_attr_raw(cls, "__init__")
    if isinstance(init, types.FunctionType):
        obj.var_getattr(tx, "__init__").call_function(tx, args, kwargs)
        return obj
    if args:
        raise observed(TypeError, "no positional arguments expected")
    for name, value in kwargs.items():
        proto.generic_setattr(tx, obj, name, value)
    return obj


def _make_dict(tx, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """An instance of a dict subclass (``defaultdict``, ``Counter``, a user's): a new dict
    tracker of that class, then its ``__init__`` (a Python one is traced)."""
    factory = None
    if issubclass(cls, collections.defaultdict):
        if args:
            factory, args = args[0], list(args[1:])
            if not (factory.is_python_constant() and factory.as_python_constant() is None) and \
                    not _is_callable(factory):
                raise observed(TypeError, "first argument must be callable or None")
    if cls.__dictoffset__:
        obj = DictObjectVariable({}, user_cls=cls, default_factory=factory)
    else:
        obj = DictVariable({}, user_cls=cls, default_factory=factory)
    init = proto.type_attr_raw(cls, "__init__")
    if isinstance(init, types.FunctionType):
        VariableTracker.build(tx, init, AttrSource(ConstSource(cls, cls.__qualname__), "__init__")) \
            .call_function(tx, [obj, *args], kwargs)
    else:
        obj.call_method(tx, "update", list(args), kwargs)
    return obj


def _is_callable(var: VariableTracker) -> bool:
    """Is the value callable (its type has ``__call__``)?  Unknown types count as callable."""
    try:
        return hasattr(var.python_type(), "__call__")
    except Unsupported:
        return True


def _make_exception(tx, cls_var: "ClassVariable", args: list, kwargs: dict) -> VariableTracker:
    """An exception object.  ``BaseException.__new__`` (C, runs no user code) makes it at
    trace time from constant arguments; a Python ``__init__`` is then traced on it (its
    ``super().__init__(...)`` sets ``args``, its attribute writes must be constants)."""
    cls = cls_var.cls
    if isinstance(proto.type_attr_raw(cls, "__new__"), (types.FunctionType, staticmethod)):
        raise unsupported("exception class with its own __new__", f"{cls.__qualname__}(...)")
    init = proto.type_attr_raw(cls, "__init__")
    if not isinstance(init, types.FunctionType):
        cargs, ckwargs = check_constant_args(cls.__qualname__, args, kwargs)
        return ExceptionVariable(call_python(cls.__qualname__, cls, *cargs, **ckwargs))
    cargs, _ = check_constant_args(cls.__qualname__, args, {})
    exc = ExceptionVariable(call_python(f"{cls.__qualname__}.__new__", cls.__new__, cls, *cargs))
    fn = VariableTracker.build(tx, init, AttrSource(cls_var.source, "__init__") if cls_var.source else None)
    fn.call_function(tx, [exc, *args], kwargs)
    return exc


class SuperVariable(VariableTracker):
    """``super(typ, obj)``: attribute lookup along ``obj``'s MRO after ``typ``."""

    def __init__(self, typ: type, obj: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.typ, self.obj = typ, obj

    def _repr_body(self) -> str:
        return f"{self.typ.__qualname__}, {self.obj!r}"

    def python_type(self) -> type:
        return super

    def _start_type(self) -> type:
        obj = self.obj
        if isinstance(obj, ClassVariable):
            return obj.cls
        return obj.python_type()

    def var_getattr(self, tx, name: str) -> VariableTracker:
        start = self._start_type()
        found = proto.lookup_type(tx, start, name, start_after=self.typ)
        if found is None:
            raise observed(AttributeError, f"'super' object has no attribute '{name}'")
        if found.var is not None:
            return found.var
        raw = found.raw
        src = proto.owner_dict_source(tx, found, name)
        is_class = isinstance(self.obj, ClassVariable)
        if isinstance(raw, types.FunctionType):
            fn = VariableTracker.build(tx, raw, src)
            return fn if is_class else UserMethodVariable(fn, self.obj)
        if isinstance(raw, staticmethod):
            return VariableTracker.build(tx, raw.__func__, AttrSource(src, "__func__"))
        if isinstance(raw, classmethod):
            owner = self.obj if is_class else VariableTracker.build(tx, start)
            return UserMethodVariable(VariableTracker.build(tx, raw.__func__, AttrSource(src, "__func__")), owner)
        if isinstance(raw, types.ClassMethodDescriptorType):  # a C class method (``Function.apply``)
            owner = self.obj if is_class else VariableTracker.build(tx, start)
            return UserMethodVariable(VariableTracker.build(tx, raw, src), owner)
        if isinstance(raw, property):
            return proto.call_descriptor_method(tx, raw.fget, AttrSource(src, "fget"), [self.obj])
        if isinstance(raw, proto._BUILTIN_DESCRIPTORS):
            return SuperBuiltinMethodVariable(raw, name, self.obj)
        return VariableTracker.build(tx, raw, src)


#: built-in exception classes whose ``__init__`` only sets ``args``
_ARGS_ONLY_EXCEPTIONS = frozenset({
    BaseException, Exception, ValueError, TypeError, RuntimeError, KeyError, IndexError,
    LookupError, ArithmeticError, ZeroDivisionError, OverflowError, NotImplementedError,
    AssertionError, UserWarning, Warning, DeprecationWarning, FutureWarning, RecursionError,
})


def _const_class(var: VariableTracker) -> type:
    try:
        cls = var.as_python_constant()
    except Exception:
        cls = None
    if not isinstance(cls, type):
        raise unsupported("__new__ of a non-constant class", describe(var))
    return cls


class SuperBuiltinMethodVariable(VariableTracker):
    """A C-level method found through ``super()`` (``object.__init__``,
    ``object.__setattr__``, ``object.__new__``...): calls the object's generic version."""

    def __init__(self, raw: Any, name: str, obj: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.raw, self.name, self.obj = raw, name, obj

    def _repr_body(self) -> str:
        return f"{self.name} of {self.obj!r}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if self.name != "__new__":  # (a static method: ``object.__new__`` binds its own)
            check_bound_call(self.raw, self.obj.python_type(), args, kwargs)
        owner = getattr(self.raw, "__objclass__", None) or getattr(self.raw, "__self__", None)
        if self.name == "__new__" and owner in (tuple, set, frozenset) and args and not kwargs:
            cls = _const_class(args[0])
            if builtin_base(cls) is not owner:
                raise unsupported("super().__new__ of another base", f"{owner.__name__}.__new__({cls!r})")
            return new_builtin_instance(tx, cls, list(args[1:]))
        if self.name == "__new__":
            return tx.call_python_builtin(object.__new__, args, kwargs)
        if isinstance(self.obj, (TupleObjectVariable, SetObjectVariable)) and owner is self.obj.base:
            # ``super().__init__(items)``/``super().add(k)``... of a tuple or set subclass
            if self.name == "__init__" and owner is set:
                return set_init(tx, self.obj, list(args))
            if self.name == "__init__":
                return ConstantVariable(None)
            return self.obj.container_method(tx, self.name, list(args), dict(kwargs))
        owner = getattr(self.raw, "__objclass__", None)
        if isinstance(self.obj, ExceptionVariable) and owner in _ARGS_ONLY_EXCEPTIONS and \
                self.name == "__init__" and not kwargs:
            cargs, _ = check_constant_args(f"{type(self.obj.exc).__qualname__}.__init__", list(args), {})
            self.obj.exc.args = tuple(cargs)  # BaseException.__init__: only sets args
            return ConstantVariable(None)
        if isinstance(self.obj, DictVariable) and owner in (dict, collections.OrderedDict, collections.defaultdict):
            # ``super().__init__(...)``/``super().update(...)`` of a dict subclass
            return self.obj.call_dict_method(tx, "update" if self.name == "__init__" else self.name,
                                             list(args), dict(kwargs))
        method = _OBJECT_METHODS.get(self.name)
        if method is None or getattr(object, self.name, None) is not self.raw:
            raise unsupported("super() call to a C-level method", f"super().{self.name}")
        return method(tx, self.obj, *args, **kwargs)

    def reconstruct(self, cg) -> None:
        """``raw.__get__(obj)``: the C method bound to the object (what ``super().name``
        evaluates to), for code after a graph break."""
        cg.push_null()
        cg.load_const(self.raw.__get__)
        cg.reconstruct(self.obj)
        cg.call(1)


class PythonModuleVariable(VariableTracker):
    """A Python module (``torch``, ``math``, a user module)."""

    def __init__(self, module: types.ModuleType, **kwargs) -> None:
        super().__init__(**kwargs)
        self.module = module

    def _repr_body(self) -> str:
        return self.module.__name__

    def python_type(self) -> type:
        return types.ModuleType

    def as_python_constant(self):
        return self.module

    def identity(self):
        return self.module

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            value = getattr(self.module, name)
        except AttributeError:
            raise observed(AttributeError, f"module '{self.module.__name__}' has no attribute '{name}'") from None
        stable = _is_stable_module(self.module) and _is_stable_value(value)
        source = None if stable or self.source is None else AttrSource(self.source, name)
        return VariableTracker.build(tx, value, source)

    def has_attr(self, tx, name: str) -> bool:
        result = hasattr(self.module, name)
        if self.source is not None and not _is_stable_module(self.module):
            tx.output.add_guard(self.source, GuardKind.HASATTR, (name, result))
        return result


def _is_stable_module(module: types.ModuleType) -> bool:
    """Attributes of torch and the standard library are assumed not to be reassigned, so
    only the module itself is guarded (as TorchDynamo does)."""
    name = module.__name__.split(".")[0]
    return name == "torch" or name in sys.stdlib_module_names


def _is_stable_value(value) -> bool:
    """Functions, classes, submodules and constants of a stable module are assumed fixed;
    other objects there are state a program may swap (``sys.stdout`` under
    ``contextlib.redirect_stdout``) and are read through their attribute, and guarded."""
    return callable(value) or isinstance(value, (types.ModuleType, type, int, float, str, bytes,
                                                 type(None), torch.dtype, torch.device))


@register_builder(object)
def _build_object(tx, value, source):
    """Any other object: a user object, guarded by its exact type (reached without a path,
    it is referred to as a constant: its attributes are still guarded through it)."""
    if source is None:
        source = ConstSource(value, f"<{type(value).__qualname__} object>")
    else:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
    return UserObjectVariable(value, source=source)


@register_builder(type)
def _build_class(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return ClassVariable(value, source=source)


@register_builder(types.ModuleType)
def _build_module(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return PythonModuleVariable(value, source=source)


class EnumMemberVariable(ConstantVariable):
    """A member of an ``Enum``: a singleton, so a trace-time constant (guarded by identity
    when it has a source).  ``name``/``value`` are read from it; methods of the enum class
    are traced (a user method may have effects), other attributes must be constants."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        cls = type(self.value)
        raw = proto.type_attr_raw(cls, name)
        if isinstance(raw, types.FunctionType):
            fn = VariableTracker.build(tx, raw, AttrSource(proto.class_source(tx, cls), name))
            return UserMethodVariable(fn, self)
        attr = call_python("getattr", getattr, self.value, name)
        if isinstance(attr, enum.Enum) or is_constant_value(attr):
            return VariableTracker.build(tx, attr)
        if callable(attr) and not isinstance(attr, type):
            return MethodVariable(self, name)  # a C method of the value's base (int, str)
        if self.source is not None:
            return VariableTracker.build(tx, attr, AttrSource(self.source, name))
        raise unsupported("enum member attribute", f"{cls.__qualname__}.{name} ({type(attr).__name__})")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if isinstance(proto.type_attr_raw(type(self.value), name), types.FunctionType):
            return self.var_getattr(tx, name).call_function(tx, args, kwargs)
        return super().call_method(tx, name, args, kwargs)  # pure C methods, folded


@register_builder(enum.Enum)
def _build_enum_member(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return EnumMemberVariable(value, source=source)


def is_pybind11_enum_member(value: Any) -> bool:
    """A member of an enum a C++ extension defines with pybind11 (``torch.nn.attention.
    SDPBackend``, ``torch.DispatchKey``): like an ``Enum`` member, hashed and compared by
    its value, with a ``name`` among its type's ``__members__`` (TorchDynamo's
    ``is_pybind11_enum_member``).  pybind11 gives its classes a metaclass of that name."""
    cls = type(value)
    if type(cls).__name__ != "pybind11_type" or "__members__" not in cls.__dict__:
        return False
    name = getattr(value, "name", None)
    return isinstance(name, str) and name in cls.__members__


@register_builder_predicate(is_pybind11_enum_member)
def _build_pybind11_enum_member(tx, value, source):
    """As an ``Enum`` member (a constant of the trace, guarded by identity: the members
    are the class's attributes; a C++ function may return another wrapper of the same
    member, which then recompiles, as torch.compile's ``ID_MATCH``)."""
    return _build_enum_member(tx, value, source)


def enter_context(tx, ctx: VariableTracker) -> tuple[VariableTracker, VariableTracker]:
    """``BEFORE_WITH`` on an instance of a Python class: ``(bound __exit__, __enter__())``,
    both found on the type as CPython's special-method lookup does (an instance attribute
    named ``__enter__`` does not count), with CPython's errors when one is missing.
    ``with torch.device(d):`` enters a ``DeviceContext`` mode (what ``torch.device``'s C
    ``__enter__`` does)."""
    if isinstance(ctx, ConstantVariable) and type(ctx.value) is torch.device:
        ctx = VariableTracker.build(tx, torch.utils._device.DeviceContext).call_function(tx, [ctx], {})
    if not isinstance(ctx, UserObjectVariable):
        raise unsupported("unsupported context manager", f"with {describe(ctx)}",
                          "Context managers of Python classes and torch's grad modes are traced.")
    cls = ctx.python_type()
    found_enter = proto.lookup_type(tx, cls, "__enter__")
    if found_enter is None:
        raise observed(TypeError, f"'{cls.__qualname__}' object does not support the context "
                                  f"manager protocol")
    found_exit = proto.lookup_type(tx, cls, "__exit__")
    if found_exit is None:
        raise observed(TypeError, f"'{cls.__qualname__}' object does not support the context "
                                  f"manager protocol (missed __exit__ method)")
    for name, found in (("__enter__", found_enter), ("__exit__", found_exit)):
        if found.var is None and not isinstance(found.raw, types.FunctionType):
            raise unsupported("context manager with a C-level method",
                              f"{cls.__qualname__}.{name} ({type(found.raw).__name__})")
    exit_fn = proto.class_attr_get(tx, ctx, "__exit__", found_exit)
    enter_fn = proto.class_attr_get(tx, ctx, "__enter__", found_enter)
    return exit_fn, enter_fn.call_function(tx, [], {})


__all__ = ["UserObjectVariable", "InstanceDictVariable", "ClassVariable", "SuperVariable",
           "PythonModuleVariable", "MethodVariable", "new_object", "instantiate", "enter_context",
           "register_object_method"]

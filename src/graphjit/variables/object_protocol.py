"""CPython's attribute protocol (``PyObject_GenericGetAttr`` and friends) on trackers.

Every tracker of a Python object (user objects, classes, modules, ``nn.Module``) reads and
writes attributes through this module, so there is one lookup order:

getattr (``object.__getattribute__``)::

    data descriptor on the type (property, slot, ``__dict__``)   -> its __get__ (traced)
    instance __dict__, *including writes pending in this trace*  -> the value
    non-data descriptor or plain class attribute                 -> bound method / value
    __getattr__ on the type                                      -> traced
    AttributeError                                               -> observed exception

setattr (``object.__setattr__``): a data descriptor's ``__set__`` (a property's ``fset``
is traced; slots and other C descriptors are logged as ``GENERIC`` writes, replayed with
``STORE_ATTR``), else the instance dict (logged as an instance-dict write, replayed with
``obj.__dict__[name] = value``, which bypasses descriptors: seed 000).  delattr likewise.
A class's own ``__getattribute__``/``__setattr__``/``__delattr__`` written in Python is
inlined as user code (transformers' ``PretrainedConfig`` has one).

Guards: a value found through the protocol is sourced so that its guard *re-runs* the
protocol (``L['o'].scale``; a method as ``L['o'].m.__func__``): a class attribute that is
later changed, or shadowed by an instance attribute, fails the guard.  A failed lookup
guards the absence of the name in the instance dict and in each user class of the MRO.
Types are guarded (TYPE_MATCH) by the object trackers themselves.
"""

from __future__ import annotations

import builtins
import dataclasses
import operator
import types
import weakref
from typing import Any

from ..exc import ObservedException, observed, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, ConstSource, GetItemSource, Source
from .base import LazyVariableTracker, MethodVariable, VariableTracker, is_new
from .constant import ConstantVariable

#: in-place operator -> its plain operator (``a += b`` falls back to ``a + b``)
INPLACE_TO_PLAIN = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
    operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
    operator.ilshift: operator.lshift, operator.irshift: operator.rshift,
}
#: binary operator -> (method, reflected method) as ``BINARY_OP``/``COMPARE_OP`` call them
BINARY_DUNDERS = {
    operator.add: ("__add__", "__radd__"), operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"), operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__"), operator.mod: ("__mod__", "__rmod__"),
    operator.pow: ("__pow__", "__rpow__"), operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.and_: ("__and__", "__rand__"), operator.or_: ("__or__", "__ror__"),
    operator.xor: ("__xor__", "__rxor__"), operator.lshift: ("__lshift__", "__rlshift__"),
    operator.rshift: ("__rshift__", "__rrshift__"),
    operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"),
    operator.lt: ("__lt__", "__gt__"), operator.gt: ("__gt__", "__lt__"),
    operator.le: ("__le__", "__ge__"), operator.ge: ("__ge__", "__le__"),
}
from .dicts import DELETED, MISSING
from .functions import UserMethodVariable
from ..diagnostics.describe import describe

_BUILTIN_DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType,
                        types.BuiltinFunctionType, types.ClassMethodDescriptorType,
                        types.MethodWrapperType)


@dataclasses.dataclass
class TypeAttr:
    """What a lookup along a type's MRO found: the class that has it (``owner``) and
    either the raw class-dict value or, for a write pending in this trace, its tracker."""

    owner: type
    raw: Any = None
    var: VariableTracker | None = None

    def is_data_descriptor(self) -> bool:
        if self.var is not None:
            return False
        t = type(self.raw)
        return hasattr(t, "__get__") and (hasattr(t, "__set__") or hasattr(t, "__delete__"))


def lookup_type(tx, cls: type, name: str, start_after: type | None = None) -> TypeAttr | None:
    """``_PyType_Lookup``: ``name`` along ``cls.__mro__`` (after ``start_after``: super()),
    seeing class-attribute writes pending in this trace."""
    mro = cls.__mro__
    if start_after is not None:
        mro = mro[mro.index(start_after) + 1:]
    pending_classes = tx.output.side_effects.pending_class_attrs
    for klass in mro:
        pending = pending_classes.get(klass)
        if pending is not None and name in pending:
            value = pending[name]
            if value is DELETED:
                continue
            return TypeAttr(klass, var=value)
        if name in klass.__dict__:
            return TypeAttr(klass, raw=klass.__dict__[name])
    return None


def type_attr_raw(cls: type, name: str) -> Any:
    """The raw class-dict value of ``name`` along the MRO (no pending writes), or MISSING."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


def class_source(tx, cls: type) -> Source:
    """A source for a class: its tracker's, or the class itself as a constant."""
    var = tx.output.side_effects.known_tracker(cls)
    if var is not None and var.source is not None:
        return var.source
    return ConstSource(cls, cls.__qualname__)


def owner_dict_source(tx, found: TypeAttr, name: str) -> Source:
    """``Owner.__dict__[name]``: exactly the raw descriptor found."""
    return GetItemSource(AttrSource(class_source(tx, found.owner), "__dict__"), name)


def is_stable_class(cls: type) -> bool:
    """Classes whose attributes are assumed not to be reassigned, so reads of them are not
    guarded (as for torch's and the standard library's module attributes): builtins (they
    cannot be changed) and torch's own classes."""
    module = cls.__module__ or ""
    return module == "builtins" or module == "torch" or module.startswith("torch.")


_CLASS_DICTS: "weakref.WeakKeyDictionary[type, Any]" = weakref.WeakKeyDictionary()


def class_dict_source(klass: type) -> Source:
    """``klass.__dict__`` as a constant: one ``mappingproxy`` kept per class (a live view of
    its dict, so a check reads it without an attribute lookup)."""
    proxy = _CLASS_DICTS.get(klass)
    if proxy is None:
        proxy = _CLASS_DICTS[klass] = klass.__dict__
    return ConstSource(proxy, f"{klass.__qualname__}.__dict__")


def guard_absent_from_classes(tx, cls: type, name: str) -> None:
    """A failed lookup depends on ``name`` staying absent from every user class of the MRO."""
    for klass in cls.__mro__:
        if not is_stable_class(klass):
            tx.output.add_guard(class_dict_source(klass), GuardKind.DICT_CONTAINS, (name, False))


def call_descriptor_method(tx, fn_raw, fn_source: Source | None, args: list) -> VariableTracker:
    """Call a Python-level descriptor method (``__get__``/``__set__``/``__delete__``,
    a property's ``fget``...) by inlining it."""
    fn = VariableTracker.build(tx, fn_raw, fn_source, realize=True)
    return fn.call_function(tx, args, {})


# -- getattr -----------------------------------------------------------------------------

#: ``__getattribute__`` of builtin bases whose C slot is CPython's generic lookup (a user
#: subclass of ``dict`` or ``Exception`` reads attributes like any object)
_GENERIC_GETATTRO = frozenset(t.__dict__["__getattribute__"] for t in (
    dict, list, tuple, set, frozenset, int, float, str, bytes, BaseException, types.SimpleNamespace))
#: ``__setattr__``/``__delattr__`` of builtin bases that are CPython's generic ones
#: ``SimpleNamespace.__dict__``: a read-only member holding the instance dict
_NAMESPACE_DICT = types.SimpleNamespace.__dict__["__dict__"]
_GENERIC_HOOKS = {"__setattr__": frozenset({types.SimpleNamespace.__setattr__}),
                  "__delattr__": frozenset({types.SimpleNamespace.__delattr__})}


def get_attr(tx, obj, name: str) -> VariableTracker:
    """``getattr(obj, name)`` for an object tracker (``obj`` provides ``python_type``,
    ``attr_source``, ``instance_dict``, ``getattr_fallback``)."""
    cls = obj.python_type()
    getattribute = type_attr_raw(cls, "__getattribute__")
    try:
        if getattribute is object.__getattribute__ or getattribute in _GENERIC_GETATTRO:
            return generic_getattr(tx, obj, name)
        if isinstance(getattribute, types.FunctionType):
            return _python_getattribute(tx, obj, cls, getattribute, name)
        raise unsupported("C-level __getattribute__", f"{cls.__qualname__}.{name}")
    except ObservedException as e:
        if not e.is_attribute_error():
            raise
        getattr_fn = type_attr_raw(cls, "__getattr__")
        if getattr_fn is MISSING:
            raise
        return obj.getattr_fallback(tx, name, getattr_fn)


def _python_getattribute(tx, obj, cls: type, getattribute, name: str) -> VariableTracker:
    """A class's own ``__getattribute__`` written in Python (transformers' configs: two of
    them, one calling the other), inlined.  On an object that existed before the call, an
    attribute read again while nothing was mutated since (the side-effect log's mark, the
    grad and inference modes are the same) gives what the first read gave, without tracing
    the function again: the same object when it existed before the call, the same
    constant, the same ``AttributeError``; whatever the first trace read is guarded.  A
    result made in the trace (a new object each call) is never reused."""
    out = tx.output
    memo = out.getattribute_memo
    key = (id(obj), name)
    stamp = _stamp(out)
    known = memo.get(key) if obj.source is not None and obj._watch is None else None
    if known is not None and known[0] is obj and known[1] is getattribute and known[2] == stamp:
        if isinstance(known[3], BaseException):
            raise ObservedException(type(known[3])(*known[3].args))
        return known[3]
    fn = VariableTracker.build(tx, getattribute, AttrSource(class_source(tx, cls), "__getattribute__"),
                               realize=True)
    try:
        result = fn.call_function(tx, [obj, VariableTracker.build(tx, name)], {})
    except ObservedException as e:
        if obj.source is not None and not obj.is_new and e.is_attribute_error() and _stamp(out) == stamp:
            memo[key] = (obj, getattribute, stamp, e.exc)
        raise
    if obj.source is not None and not obj.is_new and _stamp(out) == stamp and _stable(result):
        memo[key] = (obj, getattribute, stamp, result)
    return result


def _stamp(out) -> tuple:
    return (out.side_effects.mark(), out.grad_enabled, out.inference_mode, len(out.prologue.steps))


def _stable(var: VariableTracker) -> bool:
    """A result that is the same value whenever read again: a constant, or an object
    that existed before the call (its tracker stands for that very object)."""
    if type(var) is ConstantVariable or type(var) is LazyVariableTracker:
        return True  # (a lazy one: a value that existed before the call, read through a source)
    return var.source is not None and var.mutation_type is not None and not is_new(var)


def generic_getattr(tx, obj, name: str) -> VariableTracker:
    """``object.__getattribute__(obj, name)``; see the module docstring for the order."""
    cls = obj.python_type()
    found = lookup_type(tx, cls, name)
    if found is not None and found.is_data_descriptor():
        return _data_descriptor_get(tx, obj, name, found)
    if obj.has_instance_dict():
        value = obj.instance_dict(tx).lookup(tx, name, guard_absent=found is None)
        if value is not MISSING:
            return value
    if found is not None:
        return class_attr_get(tx, obj, name, found)
    guard_absent_from_classes(tx, cls, name)
    raise observed(AttributeError, f"'{cls.__name__}' object has no attribute '{name}'")


def _data_descriptor_get(tx, obj, name: str, found: TypeAttr) -> VariableTracker:
    raw, cls = found.raw, obj.python_type()
    if isinstance(raw, property):
        if raw.fget is None:
            raise observed(AttributeError, f"property '{name}' of '{cls.__name__}' object has no getter")
        return call_descriptor_method(tx, raw.fget, AttrSource(owner_dict_source(tx, found, name), "fget"), [obj])
    if name == "__dict__" and (isinstance(raw, types.GetSetDescriptorType) or raw is _NAMESPACE_DICT):
        return obj.instance_dict(tx)
    if name == "__class__":
        return VariableTracker.build(tx, cls)
    if isinstance(raw, (types.MemberDescriptorType, types.GetSetDescriptorType)):
        return obj.slot_get(tx, name)
    get = getattr(type(raw), "__get__")
    if isinstance(get, types.FunctionType):
        desc = VariableTracker.build(tx, raw, owner_dict_source(tx, found, name), realize=True)
        return call_descriptor_method(tx, get, descriptor_method_source(raw, "__get__"),
                                      [desc, obj, VariableTracker.build(tx, cls)])
    raise unsupported("C-level data descriptor", f"{cls.__qualname__}.{name} ({type(raw).__name__})")


def descriptor_method_source(raw: Any, name: str) -> Source:
    """``type(descriptor).<name>``: the Python-level ``__get__``/``__set__``/``__delete__``
    of a descriptor object."""
    return AttrSource(ConstSource(type(raw), type(raw).__qualname__), name)


def class_attr_get(tx, obj, name: str, found: TypeAttr) -> VariableTracker:
    """A non-data descriptor or plain class attribute, read through an instance."""
    if found.var is not None:  # written to the class in this trace
        var = found.var
        if var.python_type() is types.FunctionType:
            return UserMethodVariable(var, obj)
        return var
    raw, cls = found.raw, obj.python_type()
    attr_src = obj.attr_source(name) if not getattr(obj, "class_changed", False) else None
    if attr_src is not None and obj.has_instance_dict() and name in obj.instance_dict(tx).written:
        # the instance's own value was deleted in this trace: ``obj.name`` re-read now
        # would still find it, so the class attribute is read through the class
        attr_src = None
    if isinstance(raw, types.FunctionType):
        if is_stable_class(found.owner):  # torch's own method: only its shadowing is guarded
            if obj.has_instance_dict() and attr_src is not None:
                obj.instance_dict(tx).guard_contains(tx, name, False)
            return UserMethodVariable(VariableTracker.build(tx, raw), obj)
        if obj.has_instance_dict() and attr_src is not None:
            # ``obj.name.__func__`` alone would pass for another object's bound method
            # stored on the instance (``m.forward = other.forward``): its absence is guarded
            obj.instance_dict(tx).guard_contains(tx, name, False)
        src = AttrSource(attr_src, "__func__") if attr_src is not None else \
            AttrSource(class_source(tx, cls), name)
        return UserMethodVariable(VariableTracker.build(tx, raw, src), obj)
    if isinstance(raw, staticmethod):
        return VariableTracker.build(tx, raw.__func__, AttrSource(class_source(tx, cls), name))
    if isinstance(raw, classmethod):
        fn_src = AttrSource(AttrSource(class_source(tx, cls), name), "__func__")
        return UserMethodVariable(VariableTracker.build(tx, raw.__func__, fn_src),
                                  VariableTracker.build(tx, cls))
    get = getattr(type(raw), "__get__", None)
    if get is not None:
        if isinstance(get, types.FunctionType):
            desc = VariableTracker.build(tx, raw, owner_dict_source(tx, found, name), realize=True)
            return call_descriptor_method(tx, get, descriptor_method_source(raw, "__get__"),
                                          [desc, obj, VariableTracker.build(tx, cls)])
        if isinstance(raw, _BUILTIN_DESCRIPTORS):
            return MethodVariable(obj, name)  # obj.call_method(name) models these
        if isinstance(raw, (types.BuiltinMethodType, type)):
            return VariableTracker.build(tx, raw, AttrSource(class_source(tx, cls), name))
        raise unsupported("C-level descriptor", f"{cls.__qualname__}.{name} ({type(raw).__name__})")
    src = attr_src if attr_src is not None else AttrSource(class_source(tx, cls), name)
    return VariableTracker.build(tx, raw, src)


# -- setattr / delattr -------------------------------------------------------------------

def _type_hook(tx, obj, slot: str, default: Any, args: list) -> bool:
    """Run the type's own ``__setattr__``/``__delattr__`` (inlined when written in Python);
    False when it is ``object``'s, so the generic algorithm applies."""
    cls = obj.python_type()
    fn = type_attr_raw(cls, slot)
    if fn is default or fn in _GENERIC_HOOKS[slot]:
        return False
    if not isinstance(fn, types.FunctionType):
        raise unsupported(f"C-level {slot}", f"{cls.__qualname__}.{_attr_name(args[0])}")
    hook = VariableTracker.build(tx, fn, AttrSource(class_source(tx, cls), slot), realize=True)
    hook.call_function(tx, [obj, *(VariableTracker.build(tx, a) if isinstance(a, str) else a for a in args)], {})
    return True


def set_attr(tx, obj, name: str, value: VariableTracker) -> None:
    """``setattr(obj, name, value)``: the type's ``__setattr__`` (inlined if written in
    Python), else :func:`generic_setattr`."""
    if not _type_hook(tx, obj, "__setattr__", object.__setattr__, [name, value]):
        generic_setattr(tx, obj, name, value)


def _data_descriptor_write(tx, obj, name: str, found: TypeAttr, value: VariableTracker | None) -> None:
    """A data descriptor's ``__set__`` (``value`` given) or ``__delete__`` (``None``): a
    property's ``fset``/``fdel`` is traced, slots and other C descriptors are logged,
    a Python-level ``__set__``/``__delete__`` is inlined."""
    raw, cls, setting = found.raw, obj.python_type(), value is not None
    if isinstance(raw, property):
        fn = raw.fset if setting else raw.fdel
        if fn is None:
            raise observed(AttributeError, f"property '{name}' of '{cls.__name__}' object has no "
                                           f"{'setter' if setting else 'deleter'}")
        args = [obj, value] if setting else [obj]
        call_descriptor_method(tx, fn, AttrSource(owner_dict_source(tx, found, name),
                                                  "fset" if setting else "fdel"), args)
        return
    if setting and name == "__dict__" and isinstance(raw, types.GetSetDescriptorType):
        obj.replace_instance_dict(tx, value)
        return
    if name == "__class__" and raw is object.__dict__["__class__"] and hasattr(obj, "set_class"):
        if not setting:
            raise observed(TypeError, "can't delete __class__ attribute")
        obj.set_class(tx, value)
        return
    if isinstance(raw, (types.MemberDescriptorType, types.GetSetDescriptorType)):
        if setting:
            obj.slot_set(tx, name, value)
        else:
            obj.slot_delete(tx, name)
        return
    slot = "__set__" if setting else "__delete__"
    hook = getattr(type(raw), slot, None)
    if isinstance(hook, types.FunctionType):
        desc = VariableTracker.build(tx, raw, owner_dict_source(tx, found, name), realize=True)
        call_descriptor_method(tx, hook, descriptor_method_source(raw, slot),
                               [desc, obj, value] if setting else [desc, obj])
        return
    raise unsupported(f"C-level data descriptor {'write' if setting else 'delete'}", f"{cls.__qualname__}.{name}")


def generic_setattr(tx, obj, name: str, value: VariableTracker) -> None:
    """``object.__setattr__(obj, name, value)``."""
    cls = obj.python_type()
    found = lookup_type(tx, cls, name)
    if found is not None and found.is_data_descriptor():
        _data_descriptor_write(tx, obj, name, found, value)
        return
    if not obj.has_instance_dict():
        raise observed(AttributeError, f"'{cls.__name__}' object has no attribute '{name}'")
    obj.instance_dict(tx).setitem_key(tx, name, value)


def del_attr(tx, obj, name: str) -> None:
    """``delattr(obj, name)``: the type's ``__delattr__``, else :func:`generic_delattr`."""
    if not _type_hook(tx, obj, "__delattr__", object.__delattr__, [name]):
        generic_delattr(tx, obj, name)


def generic_delattr(tx, obj, name: str) -> None:
    """``object.__delattr__(obj, name)``."""
    cls = obj.python_type()
    found = lookup_type(tx, cls, name)
    if found is not None and found.is_data_descriptor():
        _data_descriptor_write(tx, obj, name, found, None)
        return
    if not obj.has_instance_dict():
        raise observed(AttributeError, f"'{cls.__name__}' object has no attribute '{name}'")
    d = obj.instance_dict(tx)
    if d.lookup(tx, name, guard_absent=True) is MISSING:
        raise observed(AttributeError, f"'{cls.__name__}' object has no attribute '{name}'")
    d.delitem_key(tx, name)


def has_attr(tx, obj, name: str) -> bool:
    """``hasattr(obj, name)`` with a guard on the answer when it came from real state."""
    pending = obj.is_pending_attr(tx, name)
    try:
        get_attr(tx, obj, name)
    except ObservedException as e:
        if e.is_attribute_error():
            return False
        raise
    if not pending and obj.source is not None:
        tx.output.add_guard(obj.source, GuardKind.HASATTR, (name, True))
    return True


def is_builtin_class(cls: type) -> bool:
    return getattr(builtins, cls.__name__, None) is cls


def _attr_name(var) -> str:
    """The attribute name an object protocol call was given (a constant string), for a
    reason."""
    value = getattr(var, "value", None)
    return value if isinstance(value, str) else describe(var)

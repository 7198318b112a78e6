"""Which checks of a guard are implied by a handful of machine words staying unchanged.

A check such as ``L['m']._modules['fc'] is c`` reads a chain of values; when the root is
checked by identity (a specialized module, a global, a class) every step is a fixed
object's field or a fixed dict's item, and the answer can only change if one of those
fields or dicts changes.  A *generic* module argument (checked by type: one entry for
every instance) is a root too, for one instance at a time: the snapshot holds the object
it was taken on (a *root pin*), and the shortcut applies only while the call passes that
very object (``obj is <root pin>``, a residual check); another instance takes the full
check and a new snapshot.  The words then are: its dict's version tag (``guards/memory.py``), an object's type
or ``__dict__`` pointer, a function's ``__code__``/``__defaults__``/``__kwdefaults__``/
``__closure__``, a cell's contents, a class's MRO or its ``__dict__``'s tag.

Contract: :func:`analyze` evaluates each guard's source on the frame's own values,
following CPython's attribute lookup (data descriptors on the type, the instance
``__dict__``, class attributes, ``nn.Module.__getattr__``'s registries) step by step, and
returns a :class:`Footprint`: the checks it *covers* (their truth is a function of the
words), the objects to *pin* (with the guard expression that reaches each) and the words
to read from each.  Anything it does not model exactly (a property, ``__slots__``, a
list, a custom ``__getattr__``/``__getattribute__``, a tensor's metadata, global torch
state, a value compared by ``==`` that is mutable) is not covered and stays a check on
every call.  The runtime (``guards/codegen.py``) runs the covered checks only when a word
changed; a change to a type or class dict turns the shortcut off for that guard, since it
may change how a lookup resolves.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import gc
import types
from typing import Any, Callable

import torch

from ..sources import (AttrSource, ConstSource, GenericAttrSource, GetItemSource, GlobalSource, LocalSource,
                       ObjectKey, Source, TypeSource)
from . import memory
from .guard import Guard, GuardKind, holds_numbers, typed_value

_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), torch.dtype, torch.Size, torch.device,
              torch.memory_format, torch.layout, enum.Enum, type(Ellipsis), types.CodeType)
_FUNCTION_FIELDS = {"__code__": "code", "__defaults__": "defaults", "__kwdefaults__": "kwdefaults",
                    "__closure__": "closure"}
#: word kinds that describe how lookups resolve (a change turns the shortcut off)
STRUCTURAL = frozenset({"type", "mro", "classtag"})


class _Fail(Exception):
    """A value the words do not determine."""


@dataclasses.dataclass(frozen=True)
class _Bound:
    """A bound method (a new object on every access): only its parts are values."""

    func: Any
    self: Any


@dataclasses.dataclass(frozen=True)
class _Proxy:
    """``C.__dict__`` (a new mappingproxy on every access) of class ``cls``, read at
    ``cls_source``."""

    cls: type
    cls_source: Any


@dataclasses.dataclass
class Footprint:
    covered: set[int]                     # indices into the guard list
    pins: list[Source | str]              # how the guard reaches each pinned object
    words: list[tuple[int, str]]          # (pin index, kind)
    #: (pin index, local) of each generic root: the call must pass that very object
    roots: list[tuple[int, LocalSource]] = dataclasses.field(default_factory=list)
    #: guard index -> pin index of a tensor the words identify (a module's parameter):
    #: its metadata check reads the held tensor instead of walking the chain to it
    tensors: dict[int, int] = dataclasses.field(default_factory=dict)


def _immutable(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(v) for v in value)
    return isinstance(value, _IMMUTABLE)


class _Analysis:
    def __init__(self, frame: dict[str, Any], f_globals: dict, identity_locals: set[Source],
                 generic_roots: set[Source] = frozenset()) -> None:
        self.frame, self.f_globals, self.identity_locals = frame, f_globals, identity_locals
        self.generic_roots = generic_roots
        self.roots: dict[Source, int] = {}
        self.pins: list[Source | str] = []
        self.pin_ids: dict[int, int] = {}
        self.held: list[Any] = []
        self.words: dict[tuple[int, str], None] = {}
        self.memo: dict[Source, Any] = {}
        #: ``(id(type), name)`` -> what the lookup of ``name`` on the type's MRO found
        self.looked_up: dict[tuple[int, str], tuple[Any, bool]] = {}

    # -- pins ---------------------------------------------------------------------------
    def pin(self, obj: Any, how: Source | str, kind: str) -> None:
        index = self.pin_ids.get(id(obj))
        if index is None:
            index = self.pin_ids[id(obj)] = len(self.pins)
            self.pins.append(how)
            self.held.append(obj)
        self.words.setdefault((index, kind))

    def pin_class(self, cls: type, how: Source | str) -> None:
        if memory.mutable_type(cls):  # (a builtin type's dict cannot change)
            self.pin(cls, how, "classtag")

    def pin_type(self, obj: Any, how: Source | str) -> None:
        if memory.type_can_change(obj):
            self.pin(obj, how, "type")

    def pin_mro(self, cls: type, how: Source | str) -> list[tuple[type, Source]]:
        """The classes of ``cls``'s MRO with a source for each; its MRO word."""
        if memory.mutable_type(cls):
            self.pin(cls, how, "mro")
        out = []
        for i, k in enumerate(cls.__mro__):
            src = how if i == 0 else GetItemSource(AttrSource(how, "__mro__") if isinstance(how, Source)
                                                   else _ExprSource(f"{how}.__mro__"), i)
            out.append((k, src))
        return out

    # -- values -------------------------------------------------------------------------
    def value(self, source: Source) -> Any:
        known = self.memo.get(source, _Fail)
        if known is _Fail:
            try:
                known = self._value(source)
            except _Fail:
                known = _Fail
            except Exception:  # the lookup raised: the check fails, nothing to cover
                known = _Fail
            self.memo[source] = known
        if known is _Fail:
            raise _Fail(source)
        return known

    def _value(self, source: Source) -> Any:  # noqa: C901  (one case per kind of source)
        if isinstance(source, LocalSource):
            if source.local_name not in self.frame:
                raise _Fail(source)
            if source in self.generic_roots:  # (held by the snapshot, checked by identity)
                value = self.frame[source.local_name]
                if source not in self.roots:
                    self.roots[source] = len(self.pins)
                    self.pin_ids.setdefault(id(value), len(self.pins))
                    self.pins.append(source)
                    self.held.append(value)
                return value
            if source not in self.identity_locals:
                raise _Fail(source)
            return self.frame[source.local_name]
        if isinstance(source, ConstSource):
            return source.value
        if isinstance(source, GlobalSource):
            g = self.f_globals
            self.pin(g, "___G", "tag")
            if source.global_name in g:
                return g[source.global_name]
            b = g.get("__builtins__")
            b = vars(b) if isinstance(b, types.ModuleType) else b
            if type(b) is not dict or source.global_name not in b:
                raise _Fail(source)
            self.pin(b, "___builtins_dict(___G)", "tag")
            return b[source.global_name]
        if isinstance(source, TypeSource):
            v = self.value(source.base)
            if isinstance(v, (_Bound, _Proxy)):
                raise _Fail(source)
            self.pin_type(v, source.base)
            return type(v)
        if isinstance(source, GetItemSource):
            return self._item(source)
        if isinstance(source, (AttrSource, GenericAttrSource)):
            return self._attr(source, generic=isinstance(source, GenericAttrSource))
        raise _Fail(source)

    def _item(self, source: GetItemSource) -> Any:
        v = self.value(source.base)
        key = source.index.obj if isinstance(source.index, ObjectKey) else source.index
        if isinstance(v, _Proxy):
            d = memory.class_dict(v.cls)
            self.pin_class(v.cls, v.cls_source)
        elif isinstance(v, types.MappingProxyType):  # (a class's __dict__ held as a constant)
            d = gc.get_referents(v)[0]
            self.pin(v, source.base, "tag")
        elif type(v) in _TAGGED_DICTS:
            d = v
            self.pin(v, source.base, "tag")
        elif type(v) is tuple:
            return v[key]
        else:
            raise _Fail(source)
        if key not in d:
            raise _Fail(source)
        return d[key]

    def _attr(self, source, generic: bool) -> Any:
        base, name = source.base, source.attr
        o = self.value(base)
        if isinstance(o, _Bound):
            if name == "__func__":
                return o.func
            if name == "__self__":
                return o.self
            raise _Fail(source)
        if isinstance(o, _Proxy):
            raise _Fail(source)
        if isinstance(o, type):
            return self._class_attr(o, base, name)
        t = type(o)
        if not generic and not _generic_getattr(t):
            raise _Fail(source)
        self.pin_type(o, base)
        looked = self.looked_up.get((id(t), name))
        if looked is None:  # (the class words it reads are pinned the first time: the same for any instance)
            raw, found = _MISSING, False
            for k, k_src in self.pin_mro(t, TypeSource(base)):
                self.pin_class(k, k_src)
                if name in k.__dict__:
                    raw, found = k.__dict__[name], True
                    break
            looked = self.looked_up[(id(t), name)] = (raw, found)
        raw, found = looked
        if found and _is_data_descriptor(raw):
            return self._data_descriptor(o, base, name, raw, source)
        d = memory.instance_dict(o)
        if d is not None:
            self.pin(o, base, "dict")
            self.pin(d, AttrSource(base, "__dict__"), "tag")
            if name in d:
                return d[name]
        elif not found:
            raise _Fail(source)
        if found:
            return _non_data(raw, o, t, source)
        getattr_ = getattr(t, "__getattr__", None)
        if not generic and getattr_ is torch.nn.Module.__getattr__ and d is not None:
            for registry in ("_parameters", "_buffers", "_modules"):
                r = d.get(registry)
                if type(r) is dict:
                    self.pin(r, GetItemSource(AttrSource(base, "__dict__"), registry), "tag")
                    if name in r:
                        return r[name]
        raise _Fail(source)

    def _data_descriptor(self, o, base, name: str, raw, source) -> Any:
        if isinstance(o, types.FunctionType) and name in _FUNCTION_FIELDS:
            self.pin(o, base, _FUNCTION_FIELDS[name])
            return getattr(o, name)
        if isinstance(o, types.CellType) and name == "cell_contents":
            self.pin(o, base, "cell")
            return o.cell_contents
        offset = memory.slot_offset(raw)
        if offset is not None and isinstance(o, raw.__objclass__):
            self.pin(o, base, f"slot{offset}")
            return getattr(o, name)
        if isinstance(o, property) and name in ("fget", "fset", "fdel"):
            return getattr(o, name)  # (read-only members)
        if name == "__dict__" and memory.instance_dict(o) is not None:
            self.pin(o, base, "dict")
            return memory.instance_dict(o)
        raise _Fail(source)

    def _class_attr(self, cls: type, base, name: str) -> Any:
        meta = type(cls)
        if name == "__dict__":
            return _Proxy(cls, base)
        if name == "__mro__":
            self.pin(cls, base, "mro")
            return cls.__mro__
        if meta is not type:
            for k, k_src in self.pin_mro(meta, TypeSource(base)):
                self.pin_class(k, k_src)
                if name in k.__dict__ and _is_data_descriptor(k.__dict__[name]):
                    raise _Fail(name)
        elif name in type.__dict__ and _is_data_descriptor(type.__dict__[name]):
            raise _Fail(name)  # (type's own data descriptors: __name__, __doc__...)
        for k, k_src in self.pin_mro(cls, base):
            self.pin_class(k, k_src)
            if name in k.__dict__:
                raw = k.__dict__[name]
                if isinstance(raw, staticmethod):
                    return raw.__func__
                if isinstance(raw, classmethod):
                    return _Bound(raw.__func__, cls)
                if isinstance(raw, (types.FunctionType, property)) or not hasattr(type(raw), "__get__"):
                    return raw
                if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType,
                                    types.ClassMethodDescriptorType, types.BuiltinFunctionType)):
                    return getattr(cls, name)
                raise _Fail(name)
        raise _Fail(name)

    # -- checks -------------------------------------------------------------------------
    def covers(self, g: Guard) -> bool:  # noqa: C901  (one case per kind)
        k = g.kind
        try:
            if k is GuardKind.ID_MATCH:
                if isinstance(g.source, LocalSource):
                    return False  # the residual check that makes the local a fixed object
                return self.value(g.source) is g.value
            if k is GuardKind.TYPE_MATCH:
                if g.source in self.generic_roots:
                    return False  # (the residual check on the argument itself)
                v = self.value(g.source)
                if isinstance(v, (_Bound, _Proxy)):
                    return False
                self.pin_type(v, g.source)
                return type(v) is g.value
            if k is GuardKind.CONSTANT_MATCH:
                v = self.value(g.source)
                return _immutable(v) and type(v) is type(g.value) and (v == g.value or v != v) and \
                    (not holds_numbers(g.value) or typed_value(v) == typed_value(g.value))
            if k is GuardKind.LENGTH_CHECK:
                v = self.value(g.source)
                return type(v) is tuple
            if k in (GuardKind.DICT_KEYS, GuardKind.DICT_CONTAINS, GuardKind.EMPTY):
                v = self.value(g.source)
                if k is GuardKind.DICT_KEYS and type(v) is not dict:
                    return False
                return self._dict_watched(v, g.source)
            if k is GuardKind.MODULE_HOOKS:
                return all(self._dict_watched(self.value(AttrSource(g.source, n)), AttrSource(g.source, n))
                           for n in _HOOKS)
            if k is GuardKind.OBJECT_ALIASING:
                return self.value(g.source) is self.value(g.other)
            if k is GuardKind.NO_ALIASING:
                values = [self.value(s) for s in g.value]
                return len({id(v) for v in values}) == len(values)
            if k is GuardKind.WRITTEN_APART:
                written = {id(self.value(s)) for s in g.value[0]}
                read = {id(self.value(s)) for s in g.value[1]}
                return len(written) == len(g.value[0]) and written.isdisjoint(read)
        except _Fail:
            return False
        return False

    def _dict_watched(self, v, source) -> bool:
        if isinstance(v, _Proxy):
            self.pin_class(v.cls, v.cls_source)
            return True
        if isinstance(v, types.MappingProxyType):
            self.pin(v, source, "tag")
            return True
        if type(v) in _TAGGED_DICTS:
            self.pin(v, source, "tag")
            return True
        return False


#: dict types whose every change reaches the version tag (C methods only)
_TAGGED_DICTS = (dict, collections.OrderedDict, collections.defaultdict)
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_MISSING = object()


#: C types whose attribute lookup is CPython's generic one (each has its own slot wrapper
#: for ``__getattribute__``, so they cannot be told apart by it); a module adds only a
#: PEP 562 ``__getattr__`` (not modelled: a name it would answer is not in its dict)
_GENERIC_C_TYPES = frozenset({types.CellType, property, types.FunctionType, types.MethodType, types.CodeType,
                              types.ModuleType, staticmethod, classmethod, object})


def _generic_getattr(t: type) -> bool:
    return all(k in _GENERIC_C_TYPES or "__getattribute__" not in k.__dict__ for k in t.__mro__)


def _is_data_descriptor(raw) -> bool:
    t = type(raw)
    return hasattr(t, "__set__") or hasattr(t, "__delete__")


def _non_data(raw, o, t, source) -> Any:
    if isinstance(raw, types.FunctionType):
        return _Bound(raw, o)
    if isinstance(raw, staticmethod):
        return raw.__func__
    if isinstance(raw, classmethod):
        return _Bound(raw.__func__, t)
    if not hasattr(type(raw), "__get__"):
        return raw
    raise _Fail(source)


class _ExprSource(Source):
    """A guard expression written as text (the pins' ``__mro__`` steps, a held tensor)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other) -> bool:
        return isinstance(other, _ExprSource) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def display(self) -> str:
        return self.text

    def render(self, scope) -> str:
        return self.text

    def reconstruct(self):
        raise NotImplementedError


def analyze(guards: list[Guard], frame: dict[str, Any], f_globals: dict) -> Footprint | None:
    """The footprint of ``guards`` on this frame (see the module docstring), or ``None``
    when the words cannot be read here or cover nothing."""
    if not memory.AVAILABLE:
        return None
    identity_locals = {g.source for g in guards if g.kind is GuardKind.ID_MATCH and isinstance(g.source, LocalSource)}
    generic_roots = {g.source for g in guards if g.kind is GuardKind.TYPE_MATCH and isinstance(g.source, LocalSource)
                     and isinstance(frame.get(g.source.local_name), torch.nn.Module)}
    a = _Analysis(frame, f_globals, identity_locals, generic_roots)
    covered = {i for i, g in enumerate(guards) if g.kind not in _NEVER and a.covers(g)}
    if not covered:
        return None
    tensors = {}
    for i, g in enumerate(guards):  # (a tensor reached from a root through watched dicts)
        if g.kind is GuardKind.TENSOR_MATCH and not isinstance(g.source, LocalSource):
            try:
                v = a.value(g.source)
            except _Fail:
                continue
            if v is g.value:
                tensors[i] = len(a.pins)
                a.pins.append(g.source)
                a.held.append(v)
    return Footprint(covered, a.pins, list(a.words), sorted((i, s) for s, i in a.roots.items()), tensors)


_NEVER = frozenset({GuardKind.GLOBAL_STATE, GuardKind.TENSOR_MATCH, GuardKind.HASATTR, GuardKind.DICT_LACKS})


def held_source(pin: int) -> Source:
    """The snapshot's pinned object ``pin`` (``___h``: the objects the shortcut's snapshot
    holds, bound once the words compared equal)."""
    return _ExprSource(f"___h[{pin}]")


def builtins_dict(g: dict) -> dict:
    """The builtins a function with globals ``g`` sees."""
    b = g.get("__builtins__")
    return vars(b) if isinstance(b, types.ModuleType) else b


def word_addresses(pins: tuple, words: list[tuple[int, str]]) -> list[int]:
    """The address of each word, its object found among ``pins``."""
    out = []
    for index, kind in words:
        obj = pins[index]
        if kind == "classtag":
            out.append(id(memory.class_dict(obj)) + memory.OFFSETS["tag"])
        elif kind == "tag" and isinstance(obj, types.MappingProxyType):
            out.append(id(gc.get_referents(obj)[0]) + memory.OFFSETS["tag"])
        else:
            if kind == "tag" and type(obj) not in _TAGGED_DICTS:
                raise TypeError(f"a {type(obj).__name__} has no version tag")
            out.append(memory.word_address(kind, obj))
    return out


__all__ = ["Footprint", "analyze", "word_addresses", "builtins_dict", "STRUCTURAL"]
del Callable

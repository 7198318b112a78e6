"""Dicts and their views.

One tracker serves three uses: dicts created while tracing (``ValueMutationNew``: all items
known), dicts that existed before (``ValueMutationExisting``: read lazily), and, through
subclasses in ``objects``, an object's instance ``__dict__`` and a module's globals.

A pre-existing dict is *lazy*: ``d[k]`` reads one key (guarded by ``k in d`` or
``k not in d``; the value is built through ``item_source(k)`` and guarded only when
used).  Consuming the whole dict (``len``, iteration, views, ``==``) *realizes* it: its
keys, in order, are guarded (DICT_KEYS) and its pending writes applied in program order.
Writes to a pre-existing dict are logged (``SideEffects.dict_store``/``dict_delete``) and
replayed after the graph in program order, so the final key order is eager's.

Keys are hashable trace-time constants (strings, numbers, classes, functions).  Views
(``keys()``, ``values()``, ``items()``) are live: they read the dict when consumed.
"""

from __future__ import annotations

import collections
import sys
import dataclasses
import types
from typing import Any

import torch

from ..exc import ObservedException, observed, unsupported
from ..guards.guard import GuardKind
from ..polyfills import builtins as poly
from ..sources import AttrSource, ConstSource, GetItemSource, GlobalSource, ObjectKey, Source
from .base import (
    check_mutable,
    MethodVariable,
    ValueMutationExisting,
    ValueMutationNew,
    VariableTracker,
    call_python,
    is_new,
    register_builder,
)
from .constant import ConstantVariable, is_constant_value
from .object_ids import IdentityKey, ObjectIdVariable
from .sequences import ListVariable, TupleVariable
from .set_keys import FrozensetSubclassKey, frozenset_subclass_key
from ..diagnostics.describe import describe

#: keys a source writes as a literal (others, a tensor's, are referred to by identity)
_SIMPLE_KEYS = (int, str, bool, float, type(None), bytes)

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<missing>"})()
DELETED: Any = type("Deleted", (), {"__repr__": lambda self: "<deleted>"})()


class FrozenDataclassKey:
    """The key of a frozen dataclass instance made in the trace: hashed and compared as
    its generated ``__hash__``/``__eq__`` do (the class, then the tuple of its hashed or
    compared fields, all constants; frozen, so they cannot change later)."""

    __slots__ = ("cls", "hashed", "compared")

    def __init__(self, cls: type, hashed: tuple, compared: tuple) -> None:
        self.cls, self.hashed, self.compared = cls, hashed, compared

    def __hash__(self) -> int:
        return hash(self.hashed)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenDataclassKey) and other.cls is self.cls and other.compared == self.compared

    def __repr__(self) -> str:
        return f"<{self.cls.__qualname__}{self.compared}>"


def _frozen_dataclass_key(var: VariableTracker, tx) -> FrozenDataclassKey | None:
    cls = var.python_type()
    params = getattr(cls, "__dataclass_params__", None)
    if tx is None or params is None or not (params.frozen and params.eq):
        return None
    for name in ("__hash__", "__eq__"):  # the generated ones, not the user's
        fn = cls.__dict__.get(name)
        if getattr(getattr(fn, "__code__", None), "co_filename", None) != "<string>":
            return None
    fields = dataclasses.fields(cls)
    try:
        values = {f.name: var.var_getattr(tx, f.name).as_python_constant() for f in fields}
    except Exception:
        return None
    hashed = tuple(values[f.name] for f in fields if (f.compare if f.hash is None else f.hash))
    compared = tuple(values[f.name] for f in fields if f.compare)
    try:
        hash(hashed)
    except TypeError:
        return None
    return FrozenDataclassKey(cls, hashed, compared)


class GraphTensorKey:
    """The key of a tensor the graph computes (it has no object at trace time): hashed by
    identity like the tensor, one per graph node; never a key of a dict that existed
    before the call; rebuilt as the graph's output where a container escapes."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<tensor {self.name}>"


class NewObjectKey(GraphTensorKey):
    """The key of an object made in the trace and hashed by identity (``object.__hash__``:
    a plain instance, a ``functools.partial``): one per tracker, rebuilt as that object
    where a container escapes; never in a dict that existed before the call."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<new {self.name}>"


def _new_object_key(var: VariableTracker, tx) -> Any:
    """The :class:`NewObjectKey` of a new object hashed by identity, or ``None``."""
    if tx is None or not is_new(var) or var.python_type().__hash__ is not object.__hash__:
        return None
    key = tx.output.node_keys.get(("new object", id(var)))
    if key is None:
        key = tx.output.node_keys[("new object", id(var))] = NewObjectKey(var.python_type().__qualname__)
        tx.output.key_trackers[id(key)] = var
    return key


def guard_key(tx, key: Any) -> None:
    """A tensor key of a pre-existing dict: the real key must be this very tensor."""
    if isinstance(key, IdentityKey):
        raise unsupported("id() as a key of a dict or set that existed before the call", "d[id(obj)]",
                          "The trace compares ids by identity; the real container holds numbers.")
    if isinstance(key, torch.Tensor):
        var = tx.output.key_trackers[id(key)]
        tx.output.add_guard(var.source, GuardKind.ID_MATCH, key)


def key_var(tx, key: Any) -> VariableTracker:
    """The tracker of a key: a tensor key is the tracker it was read as (so that ``is``
    holds), anything else a constant."""
    if isinstance(key, (torch.Tensor, GraphTensorKey, FrozenDataclassKey, IdentityKey, FrozensetSubclassKey)) or \
            ((type(key).__hash__ is object.__hash__ or isinstance(key, tuple)) and id(key) in tx.output.key_trackers):
        known = tx.output.key_trackers.get(id(key))
        if known is None:
            raise unsupported("tensor key of a pre-existing dict", f"<{type(key).__name__}>",
                              "A tensor key that the trace did not read cannot be used as a value.")
        return known
    return VariableTracker.build(tx, key)


def key_of(var: VariableTracker, tx=None) -> Any:
    """The Python key a tracker stands for, as a dict would hash it.  A tensor hashes by
    identity: one read from outside the graph is its real tensor (with ``tx``); its
    identity is guarded only where it meets a dict that existed before the call (an
    optimizer's ``state``: :func:`guard_key`), so a set or dict the trace makes of the
    call's tensors serves every call (identities among them are the inputs' aliasing,
    itself guarded).  An ``id()`` is an :class:`~.object_ids.IdentityKey`."""
    if isinstance(var, ObjectIdVariable):
        return var.dict_key()
    ptype = var.python_type() if not var.is_tensor() else None
    if ptype in (list, dict, set) or isinstance(var, (ListVariable, DictVariable)) or \
            (ptype is not None and issubclass(ptype, (list, dict, set)) and ptype.__hash__ is None):
        name = ptype.__name__ if ptype else type(var).__name__
        raise observed(TypeError, f"unhashable type: '{name}'")
    if var.is_tensor():
        if tx is None:
            raise unsupported("tensor as a dict key", describe(var))
        real = tx.output.real_tensor(var.node) if var.source is not None else None
        if real is None:  # made by the graph: it stands for itself (one key per node)
            real = tx.output.node_keys.get(var.node)
            if real is None:
                real = tx.output.node_keys[var.node] = GraphTensorKey(var.node.name)
        tx.output.key_trackers[id(real)] = var
        return real
    try:
        key = var.as_python_constant()
    except Exception:
        key = _existing_object_key(var, tx) or _new_object_key(var, tx) or _tuple_key(var, tx)
        if key is None:
            key = frozenset_subclass_key(var, tx)
        if key is not None:
            return key
        key = _frozen_dataclass_key(var, tx)
        if key is None:
            raise unsupported("dict key that is not a constant", describe(var)) from None
        tx.output.key_trackers[id(key)] = var
        return key
    try:
        hash(key)
    except TypeError as e:
        raise ObservedException(e) from None
    return key


#: keys a tuple key may hold besides constants: objects hashed by identity (new or
#: guarded to be the very object), frozen dataclasses of constants, tuples of these
_TUPLE_ITEM_KEYS = (NewObjectKey, FrozenDataclassKey)


def _tuple_key(var: VariableTracker, tx) -> Any:
    """A tuple or namedtuple whose items are not all constants, as a key: the same tuple
    type of its items' keys (``Container(partial(gn, x=1), 4)``: hashed and compared item
    by item, as ``tuple.__hash__``/``__eq__`` do, so an equal tuple made again finds it),
    rebuilt as the tuple's tracker where it escapes.  ``None`` where an item is none of the
    keys that allows (a tensor: the tuple stays a break), or the class hashes otherwise."""
    if tx is None or not isinstance(var, TupleVariable):
        return None
    cls = var.python_type()
    if cls.__hash__ is not tuple.__hash__ or cls.__eq__ is not tuple.__eq__ or \
            not (cls is tuple or hasattr(cls, "_fields") and hasattr(cls, "_make")):  # (namedtuples)
        return None
    cached = tx.output.node_keys.get(("tuple key", id(var)))
    if cached is not None:
        return cached
    items = []
    for item in var.items:
        try:
            k = key_of(item, tx)
        except Exception:  # (an unhashable or unsupported item: the tuple as a whole)
            return None
        if not (is_constant_value(k) or isinstance(k, _TUPLE_ITEM_KEYS) or
                (type(k).__hash__ is object.__hash__ and id(k) in tx.output.key_trackers) or
                (isinstance(k, tuple) and id(k) in tx.output.key_trackers)):
            return None
        items.append(k)
    key = tuple.__new__(cls, items)
    # kept alive with the trace (its id names its tracker: ``key_var``, ``emit_key``)
    tx.output.node_keys[("tuple key", id(var))] = key
    tx.output.key_trackers[id(key)] = var
    return key


def _existing_object_key(var: VariableTracker, tx) -> Any:
    """An object that existed before the call, hashed by identity (``object.__hash__``: a
    module, a plain instance), as a key: the object itself, guarded to be this very object
    (a tracker that serves other instances, a generic module, would otherwise hash as any
    of them); ``None`` where that does not apply."""
    value = getattr(var, "value", None)
    if tx is None or value is None or var.source is None or type(value).__hash__ is not object.__hash__ \
            or isinstance(value, (type, types.FunctionType, types.ModuleType)):
        return None
    tx.output.add_guard(var.source, GuardKind.ID_MATCH, value)
    tx.output.key_trackers[id(value)] = var
    return value


class DictVariable(VariableTracker):
    """A dict; see the module docstring.  ``backing`` is the real dict of a pre-existing one."""

    def __init__(self, items: dict | None = None, *, backing: dict | None = None,
                 mutation_type=None, user_cls: type = dict,
                 default_factory: VariableTracker | None = None, **kwargs) -> None:
        existing = backing is not None
        super().__init__(mutation_type=mutation_type or (
            ValueMutationExisting() if existing else ValueMutationNew()), **kwargs)
        self.backing = backing
        self.user_cls = user_cls
        self._items: dict | None = None if existing else dict(items or {})
        self._overlay: dict[Any, Any] = {}   # pending writes of a lazy dict: key -> var/DELETED
        self._ops: list[tuple[Any, Any]] = []  # the same, in program order (for realizing)
        self._known: dict[Any, VariableTracker] = {}  # values read from ``backing``
        self.written: set = set()  # keys written or deleted in this trace (pre-existing dicts)
        #: a defaultdict's factory (``None`` for other dicts)
        self.default_factory = default_factory

    def _repr_body(self) -> str:
        if self._items is None:
            return f"lazy, {len(self._overlay)} pending"
        return ", ".join(f"{k!r}: {v!r}" for k, v in self._items.items())

    def python_type(self) -> type:
        return self.user_cls

    @property
    def is_existing(self) -> bool:
        return self.backing is not None

    # -- reading ------------------------------------------------------------------------
    def item_source(self, key: Any) -> Source | None:
        """Where the value of ``key`` in the real dict is read from."""
        if self.source is None:
            return None
        return GetItemSource(self.source, key if type(key) in _SIMPLE_KEYS else ObjectKey(key))

    def guard_contains(self, tx, key: Any, present: bool) -> None:
        """Guard that ``key in dict`` stays ``present`` (lookups of a lazy dict)."""
        if self.source is not None:
            tx.output.add_guard(self.source, GuardKind.DICT_CONTAINS, (key, present))

    def _read_backing(self, tx, key: Any) -> VariableTracker:
        var = self._known.get(key)
        if var is None:
            var = self._known[key] = VariableTracker.build(tx, self.backing[key], self.item_source(key))
        return var

    def lookup(self, tx, key: Any, guard_absent: bool = True, ref: Any = MISSING) -> Any:
        """The value of ``key`` (a tracker) or MISSING; guards what the answer depends on
        (``guard_absent=False``: the caller guards a missing key some other way).  ``ref``:
        how a repeated block's recorder names the key (see :meth:`key_and_ref`)."""
        if self._watch is not None:  # (a repeated block's body reads one item)
            return self._watch.dict_lookup(tx, self, key, guard_absent, key if ref is MISSING else ref)
        return self.raw_lookup(tx, key, guard_absent)

    def raw_lookup(self, tx, key: Any, guard_absent: bool = True) -> Any:
        """:meth:`lookup` without telling a repeated block's recorder."""
        if self.is_existing:
            guard_key(tx, key)
        if self._items is not None:
            return self._items.get(key, MISSING)
        pending = self._overlay.get(key, MISSING)
        if pending is not MISSING:
            return MISSING if pending is DELETED else pending
        if key in self.backing:
            self.guard_contains(tx, key, True)
            return self._read_backing(tx, key)
        if guard_absent:
            self.guard_contains(tx, key, False)
        return MISSING

    def realize_items(self, tx) -> dict:
        """All items, in order (a pre-existing dict's keys are guarded from now on)."""
        items = self.raw_items(tx)
        if self._watch is not None:  # (a repeated block's body reads all of it)
            self._watch.dict_full_read(tx, self)
        return items

    def raw_items(self, tx) -> dict:
        """:meth:`realize_items` without telling a repeated block's recorder."""
        if self._items is None:
            if self.source is not None:
                tx.output.add_guard(self.source, GuardKind.DICT_KEYS, self.backing)
            items = {k: self._read_backing(tx, k) for k in self.backing}
            for key, value in self._ops:
                if value is DELETED:
                    items.pop(key, None)
                else:
                    items[key] = value
            self._items = items
        return self._items

    def children(self) -> list[VariableTracker]:
        if self._items is not None:
            return list(self._items.values())
        return [v for v in self._overlay.values() if v is not DELETED]

    def as_python_constant(self):
        if self.is_existing:
            raise unsupported("not a constant", "a dict that existed before the call")
        if self._watch is not None:
            self._watch.dict_full_read(None, self)
        items = {k: v.as_python_constant() for k, v in self._items.items()}
        if self.user_cls in (dict, collections.OrderedDict):
            return self.user_cls(items)
        factory = self.default_factory.as_python_constant() if self.default_factory is not None else None
        return rebuild_dict(self.user_cls, items, factory)

    def unpack(self, tx) -> list[VariableTracker]:
        return [key_var(tx, k) for k in self.realize_items(tx)]

    def truthiness(self, tx) -> bool:
        return bool(self.realize_items(tx))

    # -- writing ------------------------------------------------------------------------
    def store_by_name(self) -> bool:
        """Is a store replayed by name (``STORE_GLOBAL``) rather than through the dict?"""
        return False

    def _check_writable(self, tx) -> None:
        if self.is_existing and self.source is None:
            raise unsupported("mutation of a dict without a source", describe(self),
                              "This dict existed before the call but cannot be reloaded to replay it.")

    def setitem_key(self, tx, key: Any, value: VariableTracker, ref: Any = MISSING) -> None:
        self._check_writable(tx)
        check_mutable(self, "dict store")
        watch = tx.output.block_watch
        if watch is not None:  # (a repeated block's body: replayed on each block's dict)
            watch.dict_write(tx, self, "set", key if ref is MISSING else ref, value)
        if self.is_existing:
            guard_key(tx, key)
            self.written.add(key)
            tx.output.side_effects.dict_store(self, key, value)
            if self._items is None:
                self._overlay[key] = value
                self._ops.append((key, value))
        if self._items is not None:
            self._items[key] = value

    def delitem_key(self, tx, key: Any, ref: Any = MISSING) -> None:
        if self.lookup(tx, key, ref=ref) is MISSING:
            raise observed(KeyError, key)
        if self.is_existing and key not in self._overlay and self._items is None:
            # the key's presence decides that the delete succeeds, even when its value is
            # never read (an object's attribute: otherwise covered by the value's guard)
            DictVariable.guard_contains(self, tx, key, True)
        self._check_writable(tx)
        check_mutable(self, "dict delete")
        watch = tx.output.block_watch
        if watch is not None:
            watch.dict_write(tx, self, "del", key if ref is MISSING else ref, None)
        if self.is_existing:
            guard_key(tx, key)
            self.written.add(key)
            tx.output.side_effects.dict_delete(self, key)
            if self._items is None:
                self._overlay[key] = DELETED
                self._ops.append((key, DELETED))
        if self._items is not None:
            del self._items[key]

    # -- protocol -----------------------------------------------------------------------
    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "default_factory" and issubclass(self.user_cls, collections.defaultdict):
            return self.default_factory or ConstantVariable(None)
        if callable(getattr(self.user_cls, name, None)):
            return MethodVariable(self, name)
        raise observed(AttributeError, f"'{self.user_cls.__name__}' object has no attribute '{name}'")

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.user_cls, name)

    def key_and_ref(self, tx, index: VariableTracker) -> tuple[Any, Any]:
        """The key ``index`` stands for, and how a repeated block's recorder names it (the
        key itself, or the block's own index such as ``self.layer_idx``)."""
        if self._watch is not None:
            return self._watch.dict_key(tx, self, index)
        key = key_of(index, tx)
        return key, key

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key, ref = self.key_and_ref(tx, index)
        value = self.lookup(tx, key, ref=ref)
        if value is MISSING:
            return self._missing(tx, index, key)
        return value

    def _missing(self, tx, index: VariableTracker, key: Any) -> VariableTracker:
        """``d[key]`` for a missing key: a defaultdict's factory (the new value is stored),
        a Python ``__missing__`` (``Counter``'s), or ``KeyError``."""
        if issubclass(self.user_cls, collections.defaultdict) and \
                self.user_cls.__missing__ is collections.defaultdict.__missing__:
            factory = self.default_factory
            if factory is None or (factory.is_python_constant() and factory.as_python_constant() is None):
                raise observed(KeyError, key)
            value = factory.call_function(tx, [], {})
            self.setitem_key(tx, key, value)
            return value
        missing = self.python_method(tx, "__missing__")
        if missing is not None:
            return missing.call_function(tx, [self, index], {})
        raise observed(KeyError, key)

    def python_method(self, tx, name: str) -> VariableTracker | None:
        """The function ``name`` of a dict subclass written in Python (``Counter.update``),
        to be inlined with this dict as ``self``; ``None`` for dict's own methods."""
        if self.user_cls in (dict, collections.OrderedDict):
            return None
        for klass in self.user_cls.__mro__:
            raw = klass.__dict__.get(name, MISSING)
            if raw is MISSING:
                continue
            if klass in (dict, collections.OrderedDict, collections.defaultdict, object):
                return None
            if isinstance(raw, classmethod):
                raise unsupported("class method of a dict subclass", f"{self.user_cls.__qualname__}.{name}")
            if isinstance(raw, types.FunctionType):
                return VariableTracker.build(tx, raw, AttrSource(ConstSource(klass, klass.__qualname__), name))
            return None
        return None

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        key, ref = self.key_and_ref(tx, index)
        self.setitem_key(tx, key, value, ref)

    def delitem(self, tx, index: VariableTracker) -> None:
        key, ref = self.key_and_ref(tx, index)
        self.delitem_key(tx, key, ref)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        override = self.python_method(tx, name)
        if override is not None:
            return override.call_function(tx, [self, *args], kwargs)
        return self.call_dict_method(tx, name, args, kwargs)

    def call_dict_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        """``dict``'s own method ``name`` (not a subclass's override: ``super().update``)."""
        method = _DICT_METHODS.get(name)
        if method is None:
            raise unsupported("unsupported dict method", f"{self.user_cls.__qualname__}.{name}")
        return method(self, tx, *args, **kwargs)

    def _get(self, tx, key, default=None):
        k, ref = self.key_and_ref(tx, key)
        value = self.lookup(tx, k, ref=ref)
        if value is MISSING:
            return default if default is not None else ConstantVariable(None)
        return value

    def _contains(self, tx, key):
        k, ref = self.key_and_ref(tx, key)
        return ConstantVariable(self.lookup(tx, k, ref=ref) is not MISSING)

    def _len(self, tx):
        return ConstantVariable(len(self.realize_items(tx)))

    # dict's own item methods: never a subclass's override (``super().__setitem__``)
    def _setitem(self, tx, key, value):
        DictVariable.setitem(self, tx, key, value)
        return ConstantVariable(None)

    def _delitem(self, tx, key):
        DictVariable.delitem(self, tx, key)
        return ConstantVariable(None)

    def _pop(self, tx, key, *default):
        k = key_of(key, tx)
        value = self.lookup(tx, k)
        if value is MISSING:
            if default:
                return default[0]
            raise observed(KeyError, k)
        self.delitem_key(tx, k)
        return value

    def _popitem(self, tx, last=None):
        items = self.realize_items(tx)
        if last is not None:
            self._ordered("popitem")
        if not items:
            raise observed(KeyError, "popitem(): dictionary is empty" if last is None else "dictionary is empty")
        from_end = True if last is None else bool(last.as_python_constant())
        key, value = next(reversed(items.items())) if from_end else next(iter(items.items()))
        self.delitem_key(tx, key)
        return TupleVariable([key_var(tx, key), value])

    def _setdefault(self, tx, key, default=None):
        k = key_of(key, tx)
        value = self.lookup(tx, k)
        if value is MISSING:
            value = default if default is not None else ConstantVariable(None)
            self.setitem_key(tx, k, value)
        return value

    def _update(self, tx, *others, **kwargs):
        pairs: list[tuple[Any, VariableTracker]] = []
        for other in others:
            pairs += items_of(tx, other, odict=issubclass(self.user_cls, collections.OrderedDict))
        pairs += list(kwargs.items())
        for key, value in pairs:
            self.setitem_key(tx, key, value)
        return ConstantVariable(None)

    def _clear(self, tx):
        for key in list(self.realize_items(tx)):
            self.delitem_key(tx, key)
        return ConstantVariable(None)

    def _copy(self, tx):
        return DictVariable(dict(self.realize_items(tx)), user_cls=self.user_cls,
                            default_factory=self.default_factory)

    def _view(kind: str):
        def method(self, tx):
            return DictViewVariable(self, kind)

        return method

    def _iter(self, tx):
        return tx.make_iterator(self)

    def _eq(self, tx, other):
        if not isinstance(other, DictVariable):
            return ConstantVariable(False)
        ordered = issubclass(self.user_cls, collections.OrderedDict) and issubclass(
            other.user_cls, collections.OrderedDict)
        return tx.inline_polyfill(poly.ordered_dict_eq if ordered else poly.dict_eq, [self, other])

    def _ne(self, tx, other):
        if not isinstance(other, DictVariable):
            return ConstantVariable(NotImplemented)
        same = self._eq(tx, other)
        if not same.is_python_constant():
            raise unsupported("dict comparison that is not a constant", f"{describe(self)} != {describe(other)}")
        return ConstantVariable(not same.as_python_constant())

    def _merged_type(self) -> tuple[type, Any]:
        """The class (and default factory) of ``self | other``: ``OrderedDict`` and
        ``defaultdict`` make their own type (``odict_or``, ``defdict_or``), ``dict``'s
        ``__or__`` a plain dict (``PyDict_Copy``)."""
        if issubclass(self.user_cls, (collections.OrderedDict, collections.defaultdict)):
            return self.user_cls, self.default_factory
        return dict, None

    def _or(self, tx, other):
        """``dict.__or__``: a new dict, ``self`` updated with ``other`` (NotImplemented for
        anything but a dict)."""
        return self._merged(tx, self, other)

    def _ror(self, tx, other):
        return self._merged(tx, other, self)

    def _merged(self, tx, first, second):
        """``first | second`` made by ``self``'s type (see :meth:`_merged_type`)."""
        if not isinstance(first, DictVariable) or not isinstance(second, DictVariable):
            return ConstantVariable(NotImplemented)
        cls, factory = self._merged_type()
        merged = DictVariable(dict(first.realize_items(tx)), user_cls=cls, default_factory=factory)
        merged._update(tx, second)
        return merged

    def _ior(self, tx, other):
        """``dict.__ior__``: ``self.update(other)`` (any mapping or iterable of pairs), self."""
        self._update(tx, other)
        return self

    def _ordered(self, name: str) -> None:
        if not issubclass(self.user_cls, collections.OrderedDict):
            raise observed(AttributeError, f"'dict' object has no attribute '{name}'")

    def _move_to_end(self, tx, key, last=None):
        """``OrderedDict.move_to_end``: logged as deletes and stores that leave the keys in
        their new order (to the end: the key again; to the front: every key)."""
        self._ordered("move_to_end")
        k = key_of(key, tx)
        items = self.realize_items(tx)
        if k not in items:
            raise observed(KeyError, k)
        to_end = True if last is None else bool(last.as_python_constant())
        value = items[k]
        if to_end:
            self.delitem_key(tx, k)
            self.setitem_key(tx, k, value)
            return ConstantVariable(None)
        order = [(k, value)] + [(key2, v) for key2, v in items.items() if key2 != k]
        for key2 in list(items):
            self.delitem_key(tx, key2)
        for key2, v in order:
            self.setitem_key(tx, key2, v)
        return ConstantVariable(None)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        if self.user_cls not in (dict, collections.OrderedDict):
            # a subclass: made without running its __init__, then filled (rebuild_dict)
            self.emit_rebuild(cg, {})
            return
        if self.user_cls is not dict:
            cg.push_null()
            cg.load_const(self.user_cls)
        for k, v in self._items.items():
            cg.emit_key(k)
            cg.reconstruct(v)
        cg.build(dict, len(self._items))
        if self.user_cls is not dict:
            cg.call(1)

    def emit_rebuild(self, cg, attrs: dict) -> None:
        """``rebuild_dict(cls, items, factory, attrs)`` for a new instance of a subclass."""
        cg.push_null()
        cg.load_const(rebuild_dict)
        cg.load_const(self.user_cls)
        for part in (self._items, None, attrs):
            if part is None:
                if self.default_factory is not None:
                    cg.reconstruct(self.default_factory)
                else:
                    cg.load_const(None)
                continue
            for k, v in part.items():
                cg.emit_key(k)
                cg.reconstruct(v)
            cg.build(dict, len(part))
        cg.call(4)


_DICT_METHODS = {
    "__getitem__": lambda self, tx, key: DictVariable.getitem(self, tx, key),
    "get": DictVariable._get, "__contains__": DictVariable._contains, "__len__": DictVariable._len,
    "__setitem__": DictVariable._setitem, "__delitem__": DictVariable._delitem,
    "pop": DictVariable._pop, "popitem": DictVariable._popitem, "setdefault": DictVariable._setdefault,
    "update": DictVariable._update, "clear": DictVariable._clear, "copy": DictVariable._copy,
    "keys": DictVariable._view("keys"), "values": DictVariable._view("values"),
    "items": DictVariable._view("items"), "__iter__": DictVariable._iter, "__eq__": DictVariable._eq,
    "move_to_end": DictVariable._move_to_end, "__ne__": DictVariable._ne, "__or__": DictVariable._or,
    "__ror__": DictVariable._ror, "__ior__": DictVariable._ior,
}


def register_dict_method(name: str):
    """Register ``method(dict_var, tx, *args, **kwargs)`` as dict's own method ``name``."""

    def deco(method):
        assert name not in _DICT_METHODS, f"double registration of dict.{name}"
        _DICT_METHODS[name] = method
        return method

    return deco


def items_of(tx, other: VariableTracker, mapping_only: bool = False,
             odict: bool = False) -> list[tuple[Any, VariableTracker]]:
    """``(key, value)`` pairs of a mapping or an iterable of pairs (``dict.update``): as
    ``PyDict_Merge``, any object with a ``keys`` method is a mapping (``keys()`` then
    ``obj[key]``: a ``collections.abc.Mapping`` written in Python is traced).  With
    ``mapping_only`` (``f(**m)``) anything else is eager's TypeError; with ``odict``, a
    pair of another length is ``OrderedDict.update``'s ValueError (``mutablemapping_update``)."""
    if isinstance(other, DictVariable):
        return list(other.realize_items(tx).items())
    if isinstance(other, DictViewVariable) and other.kind == "items" and not mapping_only:
        return list(other.dict_var.realize_items(tx).items())
    if not other.is_tensor() and hasattr(other.python_type(), "keys") and other.has_attr(tx, "keys"):
        keys = tx.make_iterator(other.var_getattr(tx, "keys").call_function(tx, [], {})).unpack(tx)
        return [(key_of(k, tx), tx.subscript(other, k)) for k in keys]
    if mapping_only:
        raise observed(TypeError, f"argument after ** must be a mapping, not {other.python_type().__name__}")
    pairs = []
    for i, item in enumerate(tx.make_iterator(other).unpack(tx)):
        kv = item.unpack(tx)
        if len(kv) != 2 and odict:
            raise observed(ValueError, "too many values to unpack (expected 2)" if len(kv) > 2 else
                           f"need more than {len(kv)} value{'s' if len(kv) != 1 else ''} to unpack")
        if len(kv) != 2:
            raise observed(ValueError, f"dictionary update sequence element #{i} has length {len(kv)}; 2 is required")
        pairs.append((key_of(kv[0], tx), kv[1]))
    return pairs


def rebuild_dict(cls: type, items: dict, default_factory=None, attrs: dict | None = None) -> dict:
    """A new ``cls`` (a dict subclass) holding ``items`` (and the instance attributes
    ``attrs``), made as the trace made it: its ``__init__`` already ran in the trace, so it
    is not run again."""
    d = cls.__new__(cls)
    if issubclass(cls, collections.OrderedDict):  # its own order list: its own methods
        collections.OrderedDict.__init__(d)
        for k, v in items.items():
            collections.OrderedDict.__setitem__(d, k, v)
    else:
        dict.update(d, items)
    if default_factory is not None:
        d.default_factory = default_factory
    if attrs:
        object.__getattribute__(d, "__dict__").update(attrs)
    return d


rebuild_dict.__module__ = "graphjit_runtime"


_VIEW_SET_METHODS = frozenset({"isdisjoint"})


class DictViewVariable(VariableTracker):
    """``d.keys()``, ``d.values()`` or ``d.items()``: a live view of ``dict_var``."""

    _TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}
    _ODICT_TYPES = {kind: type(getattr(collections.OrderedDict(), kind)()) for kind in _TYPES}

    def __init__(self, dict_var: DictVariable, kind: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dict_var, self.kind = dict_var, kind

    def _repr_body(self) -> str:
        return f"{self.kind} of {self.dict_var!r}"

    def python_type(self) -> type:
        if issubclass(getattr(self.dict_var, "user_cls", dict), collections.OrderedDict):
            return self._ODICT_TYPES[self.kind]  # ``odict_keys``
        return self._TYPES[self.kind]

    def children(self) -> list[VariableTracker]:
        return [self.dict_var]

    def unpack(self, tx) -> list[VariableTracker]:
        items = self.dict_var.realize_items(tx)
        if self.kind == "keys":
            return [key_var(tx, k) for k in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVariable([key_var(tx, k), v]) for k, v in items.items()]

    def truthiness(self, tx) -> bool:
        return bool(self.dict_var.realize_items(tx))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.python_type(), name, None)):
            return MethodVariable(self, name)
        raise observed(AttributeError, f"'{self.python_type().__name__}' object has no attribute '{name}'")

    def key_set(self, tx) -> set:
        """The keys as a Python set (keys views behave like sets)."""
        return set(self.dict_var.realize_items(tx))

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__len__":
            return ConstantVariable(len(self.dict_var.realize_items(tx)))
        if name == "__contains__" and self.kind == "keys":
            return self.dict_var.call_method(tx, "__contains__", args, {})
        if name == "__contains__" and self.kind == "values":
            return tx.inline_polyfill(poly.sequence_contains, [TupleVariable(self.unpack(tx)), args[0]])
        if name == "__contains__" and self.kind == "items":
            pair = args[0].unpack(tx) if args[0].python_type() is tuple else None
            if pair is None or len(pair) != 2:
                return ConstantVariable(False)
            found = self.dict_var.lookup(tx, key_of(pair[0], tx))
            if found is MISSING:
                return ConstantVariable(False)
            return tx.inline_polyfill(poly.sequence_contains, [TupleVariable([found]), pair[1]])
        if name in _VIEW_SET_METHODS and self.kind in ("keys", "items") and not kwargs:
            mine = self.key_set(tx) if self.kind == "keys" else {
                (k, v.as_python_constant()) for k, v in self.dict_var.realize_items(tx).items()}
            others = [set(key_of(i, tx) if self.kind == "keys" else i.as_python_constant()
                          for i in tx.make_iterator(a).unpack(tx)) for a in args]
            return VariableTracker.build(tx, call_python(f"dict_{self.kind}.{name}", getattr(mine, name), *others))
        if name == "__iter__":
            return tx.make_iterator(self)
        raise unsupported("unsupported dict view method", f"dict_{self.kind}.{name}")

    def reconstruct(self, cg) -> None:
        cg.reconstruct(self.dict_var)
        cg.append_method_call(self.kind, 0)


@register_builder(dict, collections.OrderedDict, collections.defaultdict, collections.Counter, exact=True)
def _build_dict(tx, value: dict, source):
    if type(value) is dict and _is_module_globals(value):
        # a module's globals reached as a value (``g = globals()`` kept across a break):
        # the tracker LOAD_GLOBAL/STORE_GLOBAL use, so their pending writes are one
        return tx.output.globals_tracker(tx, value)
    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
    factory = None
    if isinstance(value, collections.defaultdict):
        factory = VariableTracker.build(tx, value.default_factory,
                                        AttrSource(source, "default_factory") if source is not None else None)
    return DictVariable(backing=value, source=source, user_cls=type(value), default_factory=factory)


def _is_module_globals(value: dict) -> bool:
    name = value.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, "__dict__", None) is value


class GlobalsDictVariable(DictVariable):
    """A module's globals dict, read by ``LOAD_GLOBAL`` and written by ``STORE_GLOBAL``.

    The compiled function's own globals (``own``) are read through ``GlobalSource`` (the
    guard evaluates the name in the function's globals, builtins included, as
    ``LOAD_GLOBAL`` does) and written back with ``STORE_GLOBAL``; another module's globals
    are read through ``ConstSource(that_dict)[name]``."""

    def __init__(self, backing: dict, *, own: bool, **kwargs) -> None:
        super().__init__(backing=backing, **kwargs)
        self.own = own

    def item_source(self, key: Any) -> Source | None:
        if self.own:
            return GlobalSource(key)
        return super().item_source(key)

    def guard_contains(self, tx, key: Any, present: bool) -> None:
        if not self.own:  # the own globals' GlobalSource guards re-run the lookup
            super().guard_contains(tx, key, present)

    def store_by_name(self) -> bool:
        return self.own

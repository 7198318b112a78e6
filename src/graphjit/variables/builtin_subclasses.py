"""Instances of Python subclasses of ``tuple``, ``set`` and ``frozenset``, and
``types.MappingProxyType``: containers and objects at once, as
:class:`~.dict_objects.DictObjectVariable` is for ``dict`` subclasses.

* :class:`TupleObjectVariable` keeps its items as a :class:`~.sequences.TupleVariable`
  does; :class:`SetObjectVariable` keeps its keys (and its recipe) as a
  :class:`~.sets.SetVariable` does.  Their attributes go through the object protocol
  (:class:`~.instance_attrs.InstanceAttrsMixin`), and a method the class writes in Python
  (``__getitem__``, ``__contains__``, ``__len__``, ``__iter__``, an ``add`` override...) is
  traced with the instance as ``self``; the base type's own methods act on the items.
  Results of the base type's operations have the base type, as in CPython
  (``MySet(...) | s`` is a ``set``, ``MyTuple(...)[1:]`` a ``tuple``).
* Made in the trace: ``cls(...)`` runs the base type's C ``__new__`` on the trace's
  values (``tuple(iterable)``, ``frozenset(iterable)``, an empty ``set``), then the class's
  ``__init__`` (a Python one is traced; ``set.__init__`` fills the set).  A Python
  ``__new__`` calling ``super().__new__(cls, ...)`` reaches the same C ``__new__``
  (:func:`new_builtin_instance`).  If the object escapes it is rebuilt by
  :func:`rebuild_builtin_object`: the base type's ``__new__`` on the items, then its
  instance ``__dict__`` (no Python ``__new__``/``__init__`` runs again).
* Existing instances read through a source are guarded by type and by their contents (a
  tuple's length, a set's keys: a tuple subclass with a Python ``__getitem__``/``__len__``
  through ``tuple.__getitem__``/``tuple.__len__``, :class:`~graphjit.sources.TupleItemSource`);
  a set subclass that overrides a mutating method in Python, or a tuple subclass with a
  Python ``__iter__``, stays a generic object (a mutation could not be replayed with the
  base type's method; iteration would not read the stored items).
* ``types.MappingProxyType(d)`` (:class:`MappingProxyVariable`) is a read-only view of a
  dict tracker: reads go to the dict, writes are eager's ``TypeError``.
"""

from __future__ import annotations

import types
from typing import Any

from ..exc import observed, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, ConstSource, GetItemSource, TupleItemSource
from . import object_protocol as proto
from .base import (
    AttributeMutationExisting,
    MethodVariable,
    ValueMutationExisting,
    ValueMutationNew,
    VariableTracker,
    call_python,
    register_builder,
    register_builder_predicate,
)
from .constant import ConstantVariable, is_constant_value
from .dicts import DELETED, MISSING, DictVariable, key_of
from .instance_attrs import InstanceAttrsMixin
from .sequences import TupleVariable
from .sets import SetVariable
from ..diagnostics.describe import describe

_BASES = (tuple, set, frozenset)
#: set methods that mutate (an existing instance's override could not be replayed)
_SET_MUTATORS = ("add", "discard", "remove", "clear", "pop", "update", "intersection_update",
                 "difference_update", "symmetric_difference_update", "__ior__", "__iand__",
                 "__isub__", "__ixor__")


def builtin_base(cls: type) -> type | None:
    """The built-in container base (tuple, set or frozenset) of a Python subclass whose
    ``__new__`` is that base's, or ``None``."""
    if not isinstance(cls, type) or cls in _BASES or cls.__dictoffset__ == 0:
        return None
    if hasattr(cls, "_fields") or hasattr(cls, "n_fields"):  # named tuples, structseqs
        return None
    for base in _BASES:
        if issubclass(cls, base):
            return base
    return None


def python_override(tx, cls: type, base: type, name: str) -> VariableTracker | None:
    """``cls``'s method ``name`` when a class before ``base`` in its MRO defines it in
    Python (to be traced with the instance as ``self``), else ``None``."""
    for klass in cls.__mro__:
        raw = klass.__dict__.get(name, MISSING)
        if raw is MISSING:
            continue
        if klass is base or klass is object:
            return None
        if isinstance(raw, types.FunctionType):
            return VariableTracker.build(tx, raw, AttrSource(ConstSource(klass, klass.__qualname__), name))
        raise unsupported("method of a built-in subclass", f"{cls.__qualname__}.{name} ({type(raw).__name__})")
    return None


class _ObjectPart(InstanceAttrsMixin):
    """What the container trackers share: the object protocol, overrides first."""

    def init_object(self, cls: type, value: Any) -> None:
        self.cls, self.value = cls, value
        self._dict = None
        self.slot_values: dict[str, Any] = {}

    @property
    def is_new(self) -> bool:
        return self.value is None

    def identity(self) -> Any:
        return self if self.value is None else self.value

    def python_type(self) -> type:
        return self.cls

    def object_children(self) -> list[VariableTracker]:
        out = [v for v in self.slot_values.values() if v is not DELETED]
        return out + ([self._dict] if self._dict is not None else [])

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return proto.get_attr(tx, self, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        override = python_override(tx, self.cls, self.base, name)
        if override is not None:
            return override.call_function(tx, [self, *args], kwargs)
        if name == "__setattr__" and len(args) == 2 and not kwargs:
            proto.generic_setattr(tx, self, args[0].as_python_constant(), args[1])
            return ConstantVariable(None)
        if name == "__getattribute__" and len(args) == 1 and not kwargs:
            return proto.generic_getattr(tx, self, args[0].as_python_constant())
        return self.container_method(tx, name, args, kwargs)

    def get_iterator(self, tx) -> VariableTracker:
        override = python_override(tx, self.cls, self.base, "__iter__")
        if override is not None:
            return tx.make_iterator(override.call_function(tx, [self], {}))
        return self.container_iterator(tx)

    def unpack(self, tx) -> list[VariableTracker]:
        return self.get_iterator(tx).unpack(tx)

    def as_python_constant(self):
        raise unsupported("not a constant", f"a {self.cls.__qualname__} instance")

    def python_repr(self, tx) -> str:
        """The base type's ``repr`` of the instance (its class writes none in Python)."""
        items = self.repr_items(tx)
        return call_python("repr", repr, rebuild_builtin_object(self.cls, items, {}))

    def attrs_for_rebuild(self) -> dict:
        if self.slot_values:
            raise unsupported("built-in subclass with slots", f"new {self.cls.__qualname__} with slot values")
        return self._dict.realize_items(None) if self._dict is not None else {}

    def emit_rebuild(self, cg, emit_items) -> None:
        attrs = self.attrs_for_rebuild()
        cg.push_null()
        cg.load_const(rebuild_builtin_object)
        cg.load_const(self.cls)
        emit_items()
        for k, v in attrs.items():
            cg.emit_key(k)
            cg.reconstruct(v)
        cg.build(dict, len(attrs))
        cg.call(3)


class TupleObjectVariable(_ObjectPart, TupleVariable):
    """An instance of a Python subclass of ``tuple``; see the module docstring."""

    base = tuple

    def __init__(self, items, cls: type, value: Any = None, **kwargs) -> None:
        TupleVariable.__init__(self, items, **kwargs)
        self.init_object(cls, value)

    def _repr_body(self) -> str:
        return f"{self.cls.__qualname__}: {TupleVariable._repr_body(self)}"

    def children(self) -> list[VariableTracker]:
        return [*self.items, *self.object_children()]

    def container_method(self, tx, name, args, kwargs):
        # tuple's own methods on the stored items (``super().__getitem__(i)`` inside the
        # class's Python ``__getitem__`` must not reach that override again)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return TupleVariable.getitem(self, tx, args[0])
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.items))
        return TupleVariable.call_method(self, tx, name, args, kwargs)

    def repr_items(self, tx) -> tuple:
        if not all(i.is_python_constant() for i in self.items):
            raise unsupported("repr of a tuple subclass holding non-constants", describe(self))
        return tuple(i.as_python_constant() for i in self.items)

    def container_iterator(self, tx):
        return tx.make_iterator(TupleVariable(list(self.items)))

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        override = python_override(tx, self.cls, tuple, "__getitem__")
        if override is not None:
            return override.call_function(tx, [self, index], {})
        return TupleVariable.getitem(self, tx, index)

    def new_like(self, items):
        return TupleVariable(items)  # slices and concatenations are plain tuples

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return

        def items():
            for item in self.items:
                cg.reconstruct(item)
            cg.build(tuple, len(self.items))

        self.emit_rebuild(cg, items)


class SetObjectVariable(_ObjectPart, SetVariable):
    """An instance of a Python subclass of ``set`` or ``frozenset``; see the module
    docstring."""

    def __init__(self, keys, cls: type, value: Any = None, **kwargs) -> None:
        frozen = issubclass(cls, frozenset)
        if value is not None:
            kwargs.setdefault("recipe", [("new", tuple(value), frozen)])
        SetVariable.__init__(self, keys, frozen=frozen, existing=value if not frozen else None, **kwargs)
        if frozen:  # a frozenset subclass instance has attributes: it is an object
            self.mutation_type = ValueMutationNew() if value is None else AttributeMutationExisting()
        self.base = frozenset if frozen else set
        self.init_object(cls, value)

    def _repr_body(self) -> str:
        return f"{self.cls.__qualname__}: {SetVariable._repr_body(self)}"

    def children(self) -> list[VariableTracker]:
        return self.object_children()

    def container_method(self, tx, name, args, kwargs):
        return SetVariable.call_method(self, tx, name, args, kwargs)

    def repr_items(self, tx):
        self._iteration_order()  # (refuses keys ordered by address)
        return self.keys  # copied table by table: the same iteration order

    def container_iterator(self, tx):
        return tx.make_iterator(SetVariable(set(self.keys), recipe=list(self.recipe)))

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        plain = SetVariable(self.keys, frozen=self.frozen, recipe=list(self.recipe))
        self.emit_rebuild(cg, lambda: cg.reconstruct(plain))


def rebuild_builtin_object(cls: type, items, attrs: dict):
    """A tuple/set/frozenset subclass instance made in compiled code, where it escapes:
    the base type's ``__new__`` on the items (a set's ``update``), then its attributes;
    its Python ``__new__``/``__init__`` ran in the trace, not again."""
    if issubclass(cls, (tuple, frozenset)):
        base = tuple if issubclass(cls, tuple) else frozenset
        obj = base.__new__(cls, items)
    else:
        obj = set.__new__(cls)
        set.update(obj, items)
    obj.__dict__.update(attrs)
    return obj


rebuild_builtin_object.__module__ = "graphjit_runtime"


def new_builtin_instance(tx, cls: type, args: list) -> VariableTracker:
    """``base.__new__(cls, *args)`` for a tuple/set/frozenset subclass ``cls``: a new
    instance holding the items of the optional iterable (an empty one for ``set``, whose
    ``__init__`` fills it)."""
    base = builtin_base(cls)
    if len(args) > 1:
        raise observed(TypeError, f"{base.__name__} expected at most 1 argument, got {len(args)}")
    items = tx.make_iterator(args[0]).unpack(tx) if args else []
    if base is tuple:
        return TupleObjectVariable(items, cls, mutation_type=ValueMutationNew())
    keys = [key_of(i, tx) for i in items] if base is frozenset else []
    return SetObjectVariable(keys, cls)


def instantiate_builtin_subclass(tx, cls: type, cls_var: VariableTracker, args: list,
                                 kwargs: dict) -> VariableTracker:
    """``cls(*args, **kwargs)`` for a subclass whose ``__new__`` is the base type's: the
    C ``__new__``, then ``__init__`` (traced if written in Python; ``set.__init__`` fills
    the set from its argument)."""
    base = builtin_base(cls)
    if kwargs and proto.type_attr_raw(cls, "__init__") is getattr(base, "__init__"):
        raise observed(TypeError, f"{cls.__name__}() takes no keyword arguments")
    obj = new_builtin_instance(tx, cls, list(args) if base is not set else [])
    init = proto.type_attr_raw(cls, "__init__")
    if isinstance(init, types.FunctionType):
        VariableTracker.build(tx, init, AttrSource(ConstSource(cls, cls.__qualname__), "__init__")) \
            .call_function(tx, [obj, *args], kwargs)
    elif base is set:
        set_init(tx, obj, args)
    return obj


def set_init(tx, obj: VariableTracker, args: list) -> VariableTracker:
    """``set.__init__(obj, iterable=())``: cleared, then filled."""
    if len(args) > 1:
        raise observed(TypeError, f"set expected at most 1 argument, got {len(args)}")
    SetVariable.call_method(obj, tx, "clear", [], {})
    if args:
        SetVariable.call_method(obj, tx, "update", [args[0]], {})
    return ConstantVariable(None)


# -- existing instances -------------------------------------------------------------------

def _modelled_subclass_instance(value: Any) -> bool:
    cls = type(value)
    base = builtin_base(cls)
    if base is None or cls.__new__ is not base.__new__ and not isinstance(
            cls.__dict__.get("__new__"), staticmethod):
        return False
    overridden = {n for k in cls.__mro__[:cls.__mro__.index(base)] for n in k.__dict__}
    if base is tuple:
        return not overridden & {"__iter__", "__eq__", "__hash__"}
    return not overridden & {*_SET_MUTATORS, "__eq__", "__iter__", "__len__", "__hash__"} and \
        all(is_constant_value(k) or isinstance(k, type) for k in value)


@register_builder_predicate(_modelled_subclass_instance)
def _build_builtin_subclass(tx, value: Any, source):
    cls = type(value)
    if builtin_base(cls) is tuple:
        # a class with a Python __getitem__/__len__ (e3nn's Irreps) is read by the guards
        # through tuple's own methods: the stored items, no user code
        raw = any(n in k.__dict__ for k in cls.__mro__[:cls.__mro__.index(tuple)] for n in ("__getitem__", "__len__"))
        item_source = TupleItemSource if raw else GetItemSource
        if source is not None and raw:
            tx.output.add_guard(source, GuardKind.TYPE_MATCH, cls)
            tx.output.add_guard(TupleItemSource(source), GuardKind.CONSTANT_MATCH, tuple.__len__(value))
        elif source is not None:
            tx.output.add_guard(source, GuardKind.LENGTH_CHECK, value)
        items = [VariableTracker.build(tx, v, None if source is None else item_source(source, i))
                 for i, v in enumerate(tuple.__iter__(value))]
        return TupleObjectVariable(items, cls, value=value, source=source,
                                   mutation_type=AttributeMutationExisting())
    if source is not None:
        # compared with a copy of the same type (the guard must not see later mutations)
        tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, rebuild_builtin_object(cls, tuple(value), {}))
    return SetObjectVariable(set(value), cls, value=value, source=source)


# -- types.MappingProxyType -----------------------------------------------------------------

class MappingProxyVariable(VariableTracker):
    """``types.MappingProxyType(d)``: a read-only view of the dict tracker ``mapping``."""

    _READS = ("__getitem__", "get", "__contains__", "__len__", "keys", "values", "items", "__iter__",
              "copy", "__eq__", "__or__", "__reversed__")

    def __init__(self, mapping: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.mapping = mapping

    def _repr_body(self) -> str:
        return repr(self.mapping)

    def python_type(self) -> type:
        return types.MappingProxyType

    def children(self) -> list[VariableTracker]:
        return [self.mapping]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self._READS:
            return MethodVariable(self, name)
        raise observed(AttributeError, f"'mappingproxy' object has no attribute '{name}'")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in ("__setitem__", "__delitem__"):
            raise observed(TypeError, f"'mappingproxy' object does not support item "
                                      f"{'assignment' if name == '__setitem__' else 'deletion'}")
        if name in self._READS:
            return self.mapping.call_method(tx, name, args, kwargs)
        raise observed(AttributeError, f"'mappingproxy' object has no attribute '{name}'")

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        return self.mapping.call_method(tx, "__getitem__", [index], {})

    def setitem(self, tx, index, value) -> None:
        raise observed(TypeError, "'mappingproxy' object does not support item assignment")

    def delitem(self, tx, index) -> None:
        raise observed(TypeError, "'mappingproxy' object does not support item deletion")

    def unpack(self, tx) -> list[VariableTracker]:
        return self.mapping.unpack(tx)

    def get_iterator(self, tx) -> VariableTracker:
        return tx.make_iterator(self.mapping)

    def truthiness(self, tx) -> bool:
        return self.mapping.truthiness(tx)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        cg.push_null()
        cg.load_const(types.MappingProxyType)
        cg.reconstruct(self.mapping)
        cg.call(1)


def make_mapping_proxy(tx, args: list, kwargs: dict) -> VariableTracker:
    """``types.MappingProxyType(mapping)`` of a dict tracker."""
    if len(args) != 1 or kwargs:
        raise observed(TypeError, "mappingproxy() takes exactly one argument")
    mapping = args[0]
    if not isinstance(mapping, (DictVariable, MappingProxyVariable)):
        raise unsupported("mappingproxy of a non-dict", describe(mapping))
    return MappingProxyVariable(mapping)


@register_builder(types.MappingProxyType, exact=True)
def _build_mapping_proxy(tx, value: types.MappingProxyType, source):
    """An existing proxy: its items read through it, as a lazy dict's (``k in m`` and
    ``m[k]`` guards work on the proxy itself)."""
    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, types.MappingProxyType)
    inner = DictVariable(backing=value, source=source, mutation_type=ValueMutationExisting())
    return MappingProxyVariable(inner, source=source)

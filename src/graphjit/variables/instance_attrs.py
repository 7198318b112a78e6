"""The attribute half of a Python object: its instance ``__dict__`` and slot values.

:class:`InstanceAttrsMixin` is shared by every tracker that stands for an instance of a
Python class (:class:`~.objects.UserObjectVariable`, ``nn.Module``s, and instances of
``dict`` subclasses, :class:`~.dict_objects.DictObjectVariable`), so attribute reads and
writes go through one protocol (:mod:`.object_protocol`) whatever the object's base.

Contract for a class using the mixin: it sets ``value`` (the real object, or ``None`` for
an object made in this trace), ``cls`` (its type), ``_dict`` (``None``: read lazily) and
``slot_values`` (``{}``), and provides ``is_new`` and ``source``.
"""

from __future__ import annotations

import types
from typing import Any

from ..exc import ObservedException, observed, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, GenericAttrSource, Source
from . import object_protocol as proto
from .base import TrackerMeta, ValueMutationNew, VariableTracker, check_mutable
from .constant import ConstantVariable
from .dicts import DELETED, MISSING, DictVariable


class InstanceDictVariable(DictVariable):
    """An object's ``__dict__``.  Values read from it are sourced as attributes of the
    object (``L['o'].a``): their guard re-runs the attribute protocol."""

    def __init__(self, obj: "InstanceAttrsMixin", **kwargs) -> None:
        super().__init__(**kwargs)
        self.obj = obj

    def item_source(self, key: Any) -> Source | None:
        return self.obj.attr_source(key) if isinstance(key, str) else super().item_source(key)

    def guard_contains(self, tx, key: Any, present: bool) -> None:
        if not present:  # a present key is covered by the value's own (attribute) guard
            super().guard_contains(tx, key, present)


class InstanceAttrsMixin(metaclass=TrackerMeta):
    """Instance ``__dict__``, slots and the attribute protocol; see the module docstring.
    (``isinstance(lazy, InstanceAttrsMixin)`` realizes a lazy tracker, as for trackers.)"""

    # -- the object's parts ---------------------------------------------------------------
    def custom_getattribute(self) -> bool:
        return proto.type_attr_raw(self.cls, "__getattribute__") is not object.__getattribute__

    def attr_source(self, name: str) -> Source | None:
        """Where ``obj.name`` is re-read by guards: the normal attribute access, or
        ``object.__getattribute__`` when the class overrides ``__getattribute__``."""
        if self.source is None:
            return None
        if self.custom_getattribute():
            return GenericAttrSource(self.source, name)
        return AttrSource(self.source, name)

    def has_instance_dict(self) -> bool:
        return self.cls.__dictoffset__ != 0

    def instance_dict(self, tx) -> DictVariable:
        if self._dict is None:
            if self.is_new:  # (belongs to the object's body scope, not the reader's)
                self._dict = DictVariable({}, mutation_type=ValueMutationNew(self.mutation_type.scope))
            else:  # (read without running a class's own __getattribute__)
                real = object.__getattribute__(self.value, "__dict__")
                self._dict = InstanceDictVariable(self, backing=real, source=self.attr_source("__dict__"))
                tx.output.side_effects.register_existing(real, self._dict)
        if self._watch is not None:  # (a repeated block's body reads the object's attributes)
            self._watch.object_dict(tx, self)
        return self._dict

    def replace_instance_dict(self, tx, value: VariableTracker) -> None:
        """``obj.__dict__ = d`` (the ``__dict__`` descriptor of the type)."""
        if not isinstance(value, DictVariable):
            raise observed(TypeError, f"__dict__ must be set to a dictionary, not a "
                                      f"'{value.python_type().__name__}'")
        check_mutable(self, "__dict__ assignment")
        if tx.output.block_watch is not None:
            tx.output.block_watch.refuse("__dict__ assignment", self)
        if not self.is_new:
            tx.output.side_effects.attr_store(self, "__dict__", value)
        self._dict = value

    def is_pending_attr(self, tx, name: str) -> bool:
        """Was ``name`` written or deleted in this trace (so its presence is not a fact of
        the real object that a guard could check)?"""
        if self.is_new or name in self.slot_values:
            return True
        d = self._dict
        return d is not None and (not isinstance(d, InstanceDictVariable) or name in d.written)

    def replay_through_object_setattr(self) -> bool:
        """Replay a logged attribute write with ``object.__setattr__`` (the class has its
        own ``__setattr__``, which the trace already ran) rather than ``STORE_ATTR``."""
        return proto.type_attr_raw(self.cls, "__setattr__") is not object.__setattr__

    def set_class(self, tx, value: VariableTracker) -> None:
        """``obj.__class__ = cls`` (``object_set_class``): ``cls`` must be a class whose
        instance layout matches (checked as CPython does, on a bare instance of the current
        class); from then on the object is an instance of ``cls`` in the trace, and for an
        existing object the write is replayed."""
        try:
            new_cls = value.as_python_constant()
        except Exception:
            new_cls = None
        if not isinstance(new_cls, type):
            raise observed(TypeError, f"__class__ must be set to a class, not "
                                      f"'{value.python_type().__name__}' object")
        if self.cls.__new__ is not object.__new__ or getattr(self, "slot_values", None):
            raise unsupported("__class__ assignment", f"{self.cls.__qualname__} -> {new_cls.__qualname__}",
                              "Only instances of plain Python classes change class while tracing.")
        probe = object.__new__(self.cls)
        try:
            probe.__class__ = new_cls  # eager's TypeError for an incompatible layout
        except TypeError as e:
            raise ObservedException(e.with_traceback(None)) from None
        check_mutable(self, "__class__ assignment")
        if tx.output.block_watch is not None:
            tx.output.block_watch.refuse("__class__ assignment", self)
        if not self.is_new:
            tx.output.side_effects.attr_store(self, "__class__", value)
        self.cls = new_cls
        self.class_changed = True  # its class attributes are no longer guarded through it

    # slots and other C-level data descriptors
    def slot_get(self, tx, name: str) -> VariableTracker:
        if self._watch is not None:  # (a repeated block's body reads one slot)
            return self._watch.slot_read(tx, self, name)
        return self.raw_slot_get(tx, name)

    def raw_slot_get(self, tx, name: str) -> VariableTracker:
        """:meth:`slot_get` without telling a repeated block's recorder."""
        value = self.slot_values.get(name, MISSING)
        if value is DELETED or (value is MISSING and self.is_new):
            raise observed(AttributeError, f"'{self.cls.__name__}' object has no attribute '{name}'")
        if value is not MISSING:
            return value
        try:  # the type's data descriptor, without a class's own __getattribute__
            real = object.__getattribute__(self.value, name)
        except AttributeError as e:
            if self.source is not None:
                tx.output.add_guard(self.source, GuardKind.HASATTR, (name, False))
            raise ObservedException(e) from None
        return VariableTracker.build(tx, real, self.attr_source(name))

    def slot_set(self, tx, name: str, value: VariableTracker) -> None:
        check_mutable(self, f"attribute store .{name}")
        if tx.output.block_watch is not None:
            tx.output.block_watch.slot_write(tx, self, name, value)
        if not self.is_new:
            tx.output.side_effects.attr_store(self, name, value)
        self.slot_values[name] = value

    def slot_delete(self, tx, name: str) -> None:
        self.slot_get(tx, name)  # AttributeError if it has no value
        check_mutable(self, f"attribute delete .{name}")
        if tx.output.block_watch is not None:
            tx.output.block_watch.slot_write(tx, self, name, DELETED)
        if not self.is_new:
            tx.output.side_effects.attr_store(self, name, DELETED)
        self.slot_values[name] = DELETED

    # -- protocol -------------------------------------------------------------------------
    def var_getattr(self, tx, name: str) -> VariableTracker:
        return proto.get_attr(tx, self, name)

    def has_attr(self, tx, name: str) -> bool:
        return proto.has_attr(tx, self, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        proto.set_attr(tx, self, name, value)

    def del_attr(self, tx, name: str) -> None:
        proto.del_attr(tx, self, name)

    def getattr_fallback(self, tx, name: str, getattr_fn: Any) -> VariableTracker:
        """``type(obj).__getattr__(obj, name)`` after the normal lookup failed."""
        if not isinstance(getattr_fn, types.FunctionType):
            raise unsupported("C-level __getattr__", f"{self.cls.__qualname__}.{name}")
        if self.has_instance_dict() and not self.is_new:
            self.instance_dict(tx).lookup(tx, name)  # guards the name's absence
        proto.guard_absent_from_classes(tx, self.cls, name)
        fn = VariableTracker.build(tx, getattr_fn, AttrSource(proto.class_source(tx, self.cls), "__getattr__"),
                                   realize=True)
        return fn.call_function(tx, [self, ConstantVariable(name)], {})


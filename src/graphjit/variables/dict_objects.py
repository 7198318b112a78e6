"""Instances of Python subclasses of ``dict`` (``Counter``, transformers' ``ModelOutput``,
a user's ``class Config(dict)``): a dict and an object at once.

:class:`DictObjectVariable` keeps the items as a :class:`~.dicts.DictVariable` does and
the attributes as every Python object does (:class:`~.instance_attrs.InstanceAttrsMixin`:
the instance ``__dict__`` and the attribute protocol, with a class's own ``__setattr__``
or ``__getattribute__`` traced).  ``d[k]``, ``d[k] = v`` and ``del d[k]`` run a Python
``__getitem__``/``__setitem__``/``__delitem__`` of the class (``ModelOutput``'s keep items
and attributes in step); dict's own methods act on the items.

A new one escapes as ``rebuild_dict(cls, items, factory, attrs)``: made without running
its ``__init__`` again (the trace ran it), with its items and its instance ``__dict__``.
Writes to a pre-existing one are replayed with the base class's C ``__setitem__``, never
the Python override the trace already ran.
"""

from __future__ import annotations

import collections
from typing import Any

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource
from . import object_protocol as proto
from .base import VariableTracker, register_builder_predicate
from .dicts import DELETED, DictVariable
from .instance_attrs import InstanceAttrsMixin

#: dict types modelled by ``DictVariable`` itself (their instances have no ``__dict__``)
_PLAIN = (dict, collections.OrderedDict, collections.defaultdict)


class DictObjectVariable(InstanceAttrsMixin, DictVariable):
    """An instance of a Python ``dict`` subclass; see the module docstring."""

    def __init__(self, items: dict | None = None, *, backing: dict | None = None,
                 user_cls: type, **kwargs) -> None:
        super().__init__(items, backing=backing, user_cls=user_cls, **kwargs)
        self.value = backing
        self.cls = user_cls
        self._dict = None
        self.slot_values: dict[str, Any] = {}

    def _repr_body(self) -> str:
        return f"{self.cls.__qualname__}: {super()._repr_body()}"

    @property
    def is_new(self) -> bool:
        return not self.is_existing

    def identity(self) -> Any:
        return self if self.value is None else self.value

    def children(self) -> list[VariableTracker]:
        out = super().children()
        out += [v for v in self.slot_values.values() if v is not DELETED]
        if self._dict is not None:
            out.append(self._dict)
        return out

    def as_python_constant(self):
        if self._dict is not None and (self._dict.is_existing or self._dict.realize_items(None)):
            raise unsupported("not a constant", f"a {self.cls.__qualname__} with attributes")
        return super().as_python_constant()

    # -- attributes: the object protocol ------------------------------------------------
    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "default_factory" and issubclass(self.cls, collections.defaultdict):
            return DictVariable.var_getattr(self, tx, name)
        return proto.get_attr(tx, self, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        override = self.python_method(tx, name)
        if override is not None:
            return override.call_function(tx, [self, *args], kwargs)
        if name == "__setattr__" and len(args) == 2 and not kwargs:
            proto.generic_setattr(tx, self, args[0].as_python_constant(), args[1])
            return VariableTracker.build(tx, None)
        if name == "__getattribute__" and len(args) == 1 and not kwargs:
            return proto.generic_getattr(tx, self, args[0].as_python_constant())
        return self.call_dict_method(tx, name, args, kwargs)

    # -- items: a Python __getitem__/__setitem__/__delitem__ of the class is traced -----
    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        override = self.python_method(tx, "__getitem__")
        if override is not None:
            return override.call_function(tx, [self, index], {})
        return super().getitem(tx, index)

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        override = self.python_method(tx, "__setitem__")
        if override is not None:
            override.call_function(tx, [self, index, value], {})
            return
        super().setitem(tx, index, value)

    def delitem(self, tx, index: VariableTracker) -> None:
        override = self.python_method(tx, "__delitem__")
        if override is not None:
            override.call_function(tx, [self, index], {})
            return
        super().delitem(tx, index)

    def replay_item_function(self, deleting: bool) -> Any:
        """The C ``__setitem__``/``__delitem__`` that replays a logged item write when the
        class overrides it in Python (``None``: plain ``STORE_SUBSCR`` does)."""
        name = "__delitem__" if deleting else "__setitem__"
        for klass in self.cls.__mro__:
            if name in klass.__dict__:
                if klass in _PLAIN:
                    return None  # not overridden: STORE_SUBSCR runs dict's own
                break
        for klass in self.cls.__mro__:
            if klass in _PLAIN:
                return klass.__dict__[name]
        return dict.__dict__[name]

    # -- escaping -------------------------------------------------------------------------
    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        if self.slot_values:
            raise unsupported("dict subclass with slots", f"new {self.cls.__qualname__} with slot values")
        self.emit_rebuild(cg, self._dict.realize_items(None) if self._dict is not None else {})


def _is_dict_object(value: Any) -> bool:
    cls = type(value)
    return isinstance(value, dict) and cls not in _PLAIN and cls.__dictoffset__ != 0 and \
        cls.__new__ is dict.__new__


@register_builder_predicate(_is_dict_object)
def _build_dict_object(tx, value: dict, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
    factory = None
    if isinstance(value, collections.defaultdict):
        factory = VariableTracker.build(tx, value.default_factory, AttrSource(source, "default_factory")
                                        if source is not None else None)
    return DictObjectVariable(backing=value, source=source, user_cls=type(value), default_factory=factory)

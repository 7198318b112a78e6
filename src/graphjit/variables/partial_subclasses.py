"""Instances of Python subclasses of ``functools.partial`` (pyro's ``_bound_partial``, a
partial that binds itself as a method through ``__get__``).

``partial``'s ``__new__`` is C code: an instance of a subclass is a partial with another
class.  Contract:

* A subclass is *modelled* when its metaclass is ``type`` and it defines none of
  ``__new__``, ``__init__``, ``__getattribute__``, ``__getattr__``, ``__setattr__``,
  ``__delattr__`` (what ``partial``'s own C code would not run as written).  Others stay
  what they were: a graph break naming the C-level ``__new__``.
* ``Sub(func, *args, **kw)`` in traced code is a :class:`PartialSubclassVariable`: the
  stored parts as ``functools.partial(...)``'s (a nested partial is flattened only when it
  is exactly a ``partial``, as CPython's ``partial_new``); an existing instance is read as
  an existing partial is (``.func``, ``.args``, ``.keywords``, ``__dict__``), guarded on
  its exact type.
* Attributes: the instance ``__dict__``, then the subclass's own class attributes
  (functions bound to the instance, properties called, other values as they are), then
  ``partial``'s.  A call runs the subclass's Python ``__call__`` if it has one, else
  ``func``.  A descriptor read (``obj.attr`` where the class attribute is such an
  instance) runs its Python ``__get__`` through the object protocol.
* One that escapes is rebuilt as ``Sub(func, *args, **keywords)`` with its ``__dict__``.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from ..exc import unsupported
from .base import VariableTracker, register_builder_predicate
from .dicts import MISSING
from .functions import PartialVariable, UserFunctionVariable, UserMethodVariable, partial_parts

#: hooks whose presence in a subclass means partial's C code is not what runs
_UNMODELLED = ("__new__", "__init__", "__getattribute__", "__getattr__", "__setattr__", "__delattr__")


def is_modelled_subclass(cls: Any) -> bool:
    """Is ``cls`` a Python subclass of ``functools.partial`` modelled here?"""
    if not (isinstance(cls, type) and issubclass(cls, functools.partial)) or cls is functools.partial \
            or type(cls) is not type:
        return False
    own = cls.__mro__[:cls.__mro__.index(functools.partial)]
    return not any(name in k.__dict__ for k in own for name in _UNMODELLED)


def _own_attr(cls: type, name: str) -> Any:
    """``name`` from the subclass's part of the MRO (before ``partial``), or MISSING."""
    for klass in cls.__mro__:
        if klass is functools.partial:
            return MISSING
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


class PartialSubclassVariable(PartialVariable):
    """An instance of a modelled subclass of ``functools.partial`` (see the module
    docstring)."""

    def __init__(self, func, args, keywords, keywords_var=None, dict_var=None, *, cls: type, **kwargs) -> None:
        super().__init__(func, args, keywords, keywords_var, dict_var, **kwargs)
        self.cls = cls

    def _repr_body(self) -> str:
        return f"{self.cls.__qualname__}: {super()._repr_body()}"

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("func", "args", "keywords", "__dict__"):
            return super().var_getattr(tx, name)
        if name == "__class__":
            return VariableTracker.build(tx, self.cls)
        found = self._instance_dict(tx).lookup(tx, name)
        if found is not MISSING:
            return found
        raw = _own_attr(self.cls, name)
        if isinstance(raw, types.FunctionType):
            return UserMethodVariable(raw, self)
        if isinstance(raw, property) and isinstance(raw.fget, types.FunctionType):
            return UserFunctionVariable(raw.fget).call_function(tx, [self], {})
        if isinstance(raw, (staticmethod, classmethod)):
            return VariableTracker.build(tx, getattr(self.cls, name))
        if raw is not MISSING:
            if callable(raw) or hasattr(type(raw), "__get__"):
                raise unsupported("attribute of a partial subclass", f"{self.cls.__qualname__}.{name}")
            return VariableTracker.build(tx, raw)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        call = _own_attr(self.cls, "__call__")
        if isinstance(call, types.FunctionType):
            return UserFunctionVariable(call).call_function(tx, [self, *args], kwargs)
        if call is not MISSING:
            raise unsupported("partial subclass __call__", f"{self.cls.__qualname__}.__call__")
        return super().call_function(tx, args, kwargs)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__call__":
            return self.call_function(tx, args, kwargs)
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)


def make_instance(tx, cls: type, args: list, kwargs: dict) -> PartialSubclassVariable:
    """``cls(func, *args, **keywords)`` for a modelled subclass ``cls``."""
    base = VariableTracker.build(tx, functools.partial).call_function(tx, args, kwargs)
    return PartialSubclassVariable(base.func, base.args, base.keywords, cls=cls)


def _is_existing_instance(value: Any) -> bool:
    return isinstance(value, functools.partial) and is_modelled_subclass(type(value))


@register_builder_predicate(_is_existing_instance)
def _build_instance(tx, value: functools.partial, source):
    func, args, keywords_var, dict_var = partial_parts(tx, value, source,
                                                       "a partial subclass instance without a source")
    return PartialSubclassVariable(func, args, {}, keywords_var, dict_var, cls=type(value), source=source)


__all__ = ["PartialSubclassVariable", "is_modelled_subclass", "make_instance"]

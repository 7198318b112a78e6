"""Instances of user classes created while tracing (``Output(logits=x)``, dataclasses).

``Cls(*args)`` is traced as CPython runs it for a plain class: ``object.__new__(Cls)``
then the inlined ``Cls.__init__``.  Attribute writes go to the tracker's own instance
dict; reads follow CPython's order (data descriptor on the type, instance dict, class
attribute or method).  If the object is still needed after the graph it is rebuilt
*with* its attributes: ``object.__new__(Cls)`` plus one ``obj.__dict__[name] = value``
per attribute (TorchDynamo rebuilds such objects without them).
"""

from __future__ import annotations

import types

from ..bytecode.instruction import create_instruction
from ..exc import unsupported
from .base import AttributeMutationNew, VariableTracker


def can_instantiate(cls: type) -> bool:
    """A plain Python class: default ``__new__``/``__setattr__``, no metaclass magic."""
    return (type(cls) is type and cls.__new__ is object.__new__
            and cls.__setattr__ is object.__setattr__
            and not (cls.__module__ or "").startswith(("torch", "builtins"))
            and "__slots__" not in cls.__dict__
            and (cls.__init__ is object.__init__ or isinstance(cls.__init__, types.FunctionType)))


def _class_attr(cls: type, name: str):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


_MISSING = object()


class NewObjectVariable(VariableTracker):
    """An instance of ``cls`` created during tracing; ``attrs`` is its instance dict."""

    def __init__(self, cls: type, **kwargs) -> None:
        super().__init__(mutation_type=AttributeMutationNew(), **kwargs)
        self.cls = cls
        self.attrs: dict[str, VariableTracker] = {}

    def _repr_body(self) -> str:
        return f"{self.cls.__qualname__}({', '.join(self.attrs)})"

    def python_type(self) -> type:
        return self.cls

    def children(self) -> list[VariableTracker]:
        return list(self.attrs.values())

    @staticmethod
    def create(tx, cls: type, args: list, kwargs: dict) -> "NewObjectVariable":
        obj = NewObjectVariable(cls)
        init = cls.__init__
        if init is object.__init__:
            if args or kwargs:
                raise unsupported("object() takes no arguments", cls.__qualname__,
                                  "Running eagerly so Python raises the TypeError.")
        else:
            VariableTracker.build(tx, init).call_function(tx, [obj, *args], kwargs)
        return obj

    def var_getattr(self, tx, name: str) -> VariableTracker:
        attr = _class_attr(self.cls, name)
        if isinstance(attr, property):
            return VariableTracker.build(tx, attr.fget).call_function(tx, [self], {})
        if attr is not _MISSING and hasattr(type(attr), "__set__"):
            raise unsupported("data descriptor read", f"{self.cls.__qualname__}.{name}")
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return VariableTracker.build(tx, self.cls)
        if isinstance(attr, types.FunctionType):
            from .misc import BoundUserMethodVariable

            return BoundUserMethodVariable(VariableTracker.build(tx, attr), self)
        if isinstance(attr, staticmethod):
            return VariableTracker.build(tx, attr.__func__)
        if attr is not _MISSING and not hasattr(type(attr), "__get__"):
            return VariableTracker.build(tx, attr)
        raise unsupported("attribute error on a new object", f"{self.cls.__qualname__}.{name}",
                          "Running eagerly so Python raises the AttributeError.")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        attr = _class_attr(self.cls, name)
        if attr is not _MISSING and hasattr(type(attr), "__set__"):
            raise unsupported("attribute write through a descriptor", f"{self.cls.__qualname__}.{name}")
        self.attrs[name] = value

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const_object(object.__new__)
        cg.load_const_object(self.cls)
        cg.call(1)
        for name, value in self.attrs.items():
            cg.reconstruct(value)
            cg.append(create_instruction("COPY", arg=2))
            cg.append(create_instruction("LOAD_ATTR", argval="__dict__"))
            cg.load_const(name)
            cg.append(create_instruction("STORE_SUBSCR"))

"""Named tuple classes made inside traced code: ``collections.namedtuple("P", "x y")``.

Contract:

* ``collections.namedtuple(...)`` with constant arguments (strings, sequences of strings,
  ``rename``, ``defaults`` of constants, ``module``) makes the class while tracing, as
  TorchDynamo's ``CollectionsNamedTupleFunction`` does; ``module`` not given is the
  ``__name__`` of the calling frame's globals (what ``namedtuple`` reads with
  ``sys._getframe`` in eager).  Its errors (a bad field name) are the program's, raised
  as eager raises them.  Other arguments are a graph break naming the call.
* The class is a :class:`NewNamedTupleClassVariable`: a new object (``is_new``), so its
  attributes, calls and instances are traced as for a class that existed before
  (the generated ``__new__`` is inlined; instances are ``TupleVariable``\\ s with the
  class), and where it or one of its instances leaves the trace the generated code makes
  the class again, once per run, by calling ``collections.namedtuple`` with the same
  arguments: every call of the compiled function gives a new class, as every eager call
  does (torch.compile returns the class its trace made, the same object on every call).
* The class read back in the trace (``self._make`` inside ``_replace``, ``type(p)``) is
  this tracker (the identity map), so instances made by its class methods are rebuilt
  from the same per-run class.  An instance is rebuilt as ``cls._make(items)``.
"""

from __future__ import annotations

import collections
from typing import Any

from ..exc import ObservedException, unsupported
from ..guards.guard import GuardKind
from .base import AttributeMutationNew, register_builder_by_id
from .functions import ValueCallableVariable
from .objects import ClassVariable

_PARAMS = ("typename", "field_names", "rename", "defaults", "module")


class NamedTupleFactoryVariable(ValueCallableVariable):
    """``collections.namedtuple`` itself."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = collections.namedtuple

    def _repr_body(self) -> str:
        return "collections.namedtuple"

    def call_function(self, tx, args, kwargs):
        if len(args) > 2 or set(kwargs) - set(_PARAMS) or \
                not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            raise unsupported("collections.namedtuple with arguments that are not constants",
                              "collections.namedtuple(...)",
                              "Make the class outside the compiled function.")
        bound = dict(zip(_PARAMS, (a.as_python_constant() for a in args)))
        bound.update({k: v.as_python_constant() for k, v in kwargs.items()})
        if bound.get("module") is None:
            bound["module"] = tx.f_globals.get("__name__")
        bound = {k: tuple(v) if isinstance(v, list) else v for k, v in bound.items()}
        try:
            cls = collections.namedtuple(**bound)
        except (TypeError, ValueError) as e:
            raise ObservedException(type(e)(*e.args)) from None
        var = NewNamedTupleClassVariable(cls, bound)
        tx.output.side_effects.register_existing(cls, var)  # (the class read back: this tracker)
        return var


class NewNamedTupleClassVariable(ClassVariable):
    """A named tuple class made in the trace by ``collections.namedtuple(**arguments)``."""

    def __init__(self, cls: type, arguments: dict[str, Any]) -> None:
        super().__init__(cls)  # (its source, the class as a constant, serves attribute reads)
        self.mutation_type = AttributeMutationNew()
        self.arguments = arguments

    def _repr_body(self) -> str:
        return f"new named tuple class {self.cls.__qualname__}{self.cls._fields}"

    def reconstruct(self, cg) -> None:
        names = tuple(self.arguments)
        cg.push_null()
        cg.load_const(collections.namedtuple)
        for name in names:
            cg.load_const(self.arguments[name])
        cg.call(len(names), names)


@register_builder_by_id(collections.namedtuple)
def _build_namedtuple(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return NamedTupleFactoryVariable(source=source)


__all__ = ["NamedTupleFactoryVariable", "NewNamedTupleClassVariable"]

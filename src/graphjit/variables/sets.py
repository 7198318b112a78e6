"""Sets and frozensets of hashable trace-time constants.

The tracker holds a real Python ``set`` of the keys, so iteration order is CPython's.  A
set created while tracing mutates freely; a pre-existing set is guarded by equality of its
contents when consumed, and its mutations (``add``, ``discard``, ``clear``) are logged and
replayed after the graph in program order."""

from __future__ import annotations

from typing import Any

from ..exc import observed, unsupported
from ..guards.guard import GuardKind
from .base import MethodVariable, ValueMutationExisting, ValueMutationNew, VariableTracker, register_builder
from .constant import ConstantVariable, is_constant_value
from .dicts import DictViewVariable, key_of


class SetVariable(VariableTracker):
    """A set (or frozenset) of constant keys."""

    def __init__(self, keys: set, *, frozen: bool = False, existing: Any = None, **kwargs) -> None:
        mt = None if frozen else (ValueMutationExisting() if existing is not None else ValueMutationNew())
        super().__init__(mutation_type=mt, **kwargs)
        self.keys = set(keys)
        self.frozen = frozen
        self.existing = existing  # the real set of a pre-existing one

    def _repr_body(self) -> str:
        return repr(self.keys)

    def python_type(self) -> type:
        return frozenset if self.frozen else set

    def as_python_constant(self):
        return frozenset(self.keys) if self.frozen else set(self.keys)

    def unpack(self, tx) -> list[VariableTracker]:
        return [VariableTracker.build(tx, k) for k in self.keys]

    def truthiness(self, tx) -> bool:
        return bool(self.keys)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.python_type(), name, None)):
            return MethodVariable(self, name)
        raise observed(AttributeError, f"'{self.python_type().__name__}' object has no attribute '{name}'")

    def _mutate(self, tx, op: str, key: Any = None) -> None:
        if self.frozen:
            raise observed(AttributeError, f"'frozenset' object has no attribute '{op}'")
        if self.existing is not None:
            if self.source is None:
                raise unsupported("mutation of a set without a source", repr(self))
            tx.output.side_effects.set_mutation(self, op, key)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if kwargs:
            raise unsupported("set method with keyword arguments", f"set.{name}")
        if name in ("add", "discard", "remove") and len(args) == 1:
            key = key_of(args[0])
            if name == "remove" and key not in self.keys:
                raise observed(KeyError, key)
            self._mutate(tx, "add" if name == "add" else "discard", key)
            (self.keys.add if name == "add" else self.keys.discard)(key)
            return ConstantVariable(None)
        if name == "clear" and not args:
            self._mutate(tx, "clear")
            self.keys.clear()
            return ConstantVariable(None)
        if name == "update":
            for other in args:
                for key in other_keys(tx, other):
                    self.call_method(tx, "add", [ConstantVariable(key)], {})
            return ConstantVariable(None)
        if name == "pop" and not args:
            if not self.keys:
                raise observed(KeyError, "pop from an empty set")
            key = next(iter(self.keys))
            self.call_method(tx, "discard", [ConstantVariable(key)], {})
            return VariableTracker.build(tx, key)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(key_of(args[0]) in self.keys)
        if name == "__len__":
            return ConstantVariable(len(self.keys))
        if name == "copy":
            return SetVariable(self.keys, frozen=self.frozen)
        if name == "__iter__":
            return tx.make_iterator(self)
        if name in _SET_OPS and len(args) >= 1:
            others = [other_keys(tx, a) for a in args]
            result = getattr(self.as_python_constant(), name)(*others)
            if isinstance(result, (set, frozenset)):
                return SetVariable(result, frozen=self.frozen)
            return ConstantVariable(result)
        raise unsupported("unsupported set method", f"set.{name}")

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        if self.frozen:
            cg.push_null()
            cg.load_const(frozenset)
        for k in self.keys:
            cg.load_const(k)
        cg.build(set, len(self.keys))
        if self.frozen:
            cg.call(1)


_SET_OPS = frozenset({"union", "intersection", "difference", "symmetric_difference", "issubset",
                      "issuperset", "isdisjoint", "__or__", "__and__", "__sub__", "__xor__",
                      "__eq__", "__ne__", "__le__", "__lt__", "__ge__", "__gt__"})


def other_keys(tx, var: VariableTracker) -> set:
    """The keys of a set-like tracker (sets, keys views, or any iterable of constants)."""
    if isinstance(var, SetVariable):
        return set(var.keys)
    if isinstance(var, DictViewVariable) and var.kind == "keys":
        return var.key_set(tx)
    return {key_of(item) for item in var.unpack(tx)}


@register_builder(set, frozenset, exact=True)
def _build_set(tx, value, source):
    frozen = type(value) is frozenset
    if not all(is_constant_value(k) or isinstance(k, type) for k in value):
        raise unsupported("set of non-constants", f"{type(value).__name__} with {len(value)} items")
    if frozen and is_constant_value(value):
        if source is not None:
            tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, value)
        return ConstantVariable(value, source=source)
    if source is not None:  # compared with a copy: the guard must not see later mutations
        tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, type(value)(value))
    return SetVariable(value, frozen=frozen, existing=None if frozen else value, source=source)

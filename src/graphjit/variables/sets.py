"""Sets and frozensets of hashable trace-time constants.

The tracker holds a real Python ``set`` of the keys, so iteration order is CPython's.  A
set created while tracing mutates freely; a pre-existing set is guarded by equality of its
contents when consumed, and its mutations (``add``, ``discard``, ``clear``) are logged and
replayed after the graph in program order."""

from __future__ import annotations

import operator
import types
from typing import Any

import torch

from ..exc import observed, unsupported
from ..guards.guard import GuardKind
from ..polyfills import copy as poly_copy
from .base import (
    check_mutable,
    MethodVariable,
    ValueMutationExisting,
    ValueMutationNew,
    VariableTracker,
    call_python,
    register_builder,
)
from .constant import ConstantVariable, is_constant_value
from .dicts import DictViewVariable, FrozenDataclassKey, GraphTensorKey, key_of, key_var
from .set_keys import FrozensetSubclassKey, set_lookup_key
from .object_ids import IdentityKey
from ..diagnostics.describe import describe


class SetVariable(VariableTracker):
    """A set (or frozenset) of constant keys.

    ``keys`` is a real set made by the very operations eager would make (adds in order, the
    same set algebra), so its iteration order is CPython's, deletions included.  A set
    made in the trace keeps its ``recipe``: how to make it again by those operations (a
    plain copy of the keys could iterate in another order), which is how it is rebuilt if
    it escapes."""

    def __init__(self, keys, *, frozen: bool = False, existing: Any = None,
                 recipe: list | None = None, **kwargs) -> None:
        mt = None if frozen else (ValueMutationExisting() if existing is not None else ValueMutationNew())
        super().__init__(mutation_type=mt, **kwargs)
        if recipe is None:  # made by adding ``keys`` in order
            items = tuple(keys)
            recipe = [("new", items, frozen)]
            keys = (frozenset if frozen else set)(items)
        self.keys = keys
        self.frozen = frozen
        self.existing = existing  # the real set of a pre-existing one
        self.recipe = recipe

    def _repr_body(self) -> str:
        return repr(self.keys)

    def python_type(self) -> type:
        return frozenset if self.frozen else set

    def as_python_constant(self):
        return frozenset(self.keys) if self.frozen else set(self.keys)

    def snapshot(self) -> tuple:
        """The recipe of this set as it is now (later mutations not included)."""
        return ("recipe", tuple(self.recipe))

    def unpack(self, tx) -> list[VariableTracker]:
        return [key_var(tx, k) for k in self._iteration_order()]

    def _iteration_order(self):
        """The keys in iteration order: CPython's, unless ids are among them (their order
        is the objects' addresses, known only when the code runs)."""
        if any(isinstance(k, IdentityKey) for k in self.keys):
            raise unsupported("iteration over a set of id()s", "for ... in <a set holding ids>",
                              "A set of ids iterates in the order of the objects' addresses, "
                              "known only when the code runs.")
        return self.keys

    def truthiness(self, tx) -> bool:
        return bool(self.keys)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.python_type(), name, None)):
            return MethodVariable(self, name)
        raise observed(AttributeError, f"'{self.python_type().__name__}' object has no attribute '{name}'")

    def _mutate(self, tx, op: str, arg: Any = None, in_recipe: Any = None) -> None:
        """Apply ``op`` (a set method) to the keys, log it for a pre-existing set, and
        add it to the recipe."""
        if self.frozen:
            raise observed(AttributeError, f"'frozenset' object has no attribute '{op}'")
        check_mutable(self, f"set.{op}")
        if self.existing is not None:
            if self.source is None:
                raise unsupported("mutation of a set without a source", describe(self))
            tx.output.side_effects.set_mutation(self, op, arg)
        if op == "clear":
            self.keys.clear()
        else:
            getattr(self.keys, op)(arg)
        self.recipe.append((op, ("const", arg) if in_recipe is None else in_recipe))

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if kwargs:
            raise unsupported("set method with keyword arguments", f"set.{name}")
        if name in ("add", "discard", "remove") and len(args) == 1:
            coerced = set_lookup_key(args[0]) if name != "add" else None
            key = key_of(args[0], tx) if coerced is None else coerced
            if name == "remove" and key not in self.keys:
                if coerced is not None and (args[0].python_type() is not set or
                                            not all(is_constant_value(k) for k in coerced)):
                    raise unsupported("KeyError of a set subclass instance", f"set.remove({describe(args[0])})")
                raise observed(KeyError, args[0].as_python_constant() if coerced is not None else key)
            self._mutate(tx, "add" if name == "add" else "discard", key)
            return ConstantVariable(None)
        if name == "clear" and not args:
            self._mutate(tx, "clear")
            return ConstantVariable(None)
        if name in _INPLACE_METHODS:
            for other in args:  # each argument in turn, as CPython's loop
                self._mutate(tx, name, other_operand(tx, other), recipe_arg(tx, other))
            return ConstantVariable(None)
        if name == "pop" and not args:
            if not self.keys:
                raise observed(KeyError, "pop from an empty set")
            key = next(iter(self._iteration_order()))
            var = key_var(tx, key)
            self.call_method(tx, "discard", [var], {})
            return var
        if name == "__contains__" and len(args) == 1:
            coerced = set_lookup_key(args[0])
            return ConstantVariable((key_of(args[0], tx) if coerced is None else coerced) in self.keys)
        if name == "__len__":
            return ConstantVariable(len(self.keys))
        if name == "copy":
            return self.apply(tx, "copy", [])
        if name == "__iter__":
            return tx.make_iterator(self)
        if name in ("isdisjoint", "issuperset") and len(args) == 1 and \
                not isinstance(args[0], SetVariable) and not args[0].is_python_constant():
            # CPython iterates a non-set argument only up to the first answer-deciding
            # item (a generator is left there)
            it = tx.make_iterator(args[0])
            while (item := it.next_item(tx)) is not None:
                if (key_of(item, tx) in self.keys) == (name == "isdisjoint"):
                    return ConstantVariable(False)
            return ConstantVariable(True)
        if name in _SET_OPS:  # (``s.union()`` with no argument: a copy)
            return self.apply(tx, name, args)
        if name == "__reduce_ex__" and len(args) == 1:  # (copy.deepcopy of a set)
            return tx.inline_polyfill(poly_copy.object_reduce_ex, [self, args[0]])
        if name == "__reduce__" and not args:
            return tx.inline_polyfill(poly_copy.set_reduce, [self])
        if all(a.is_python_constant() for a in args) and callable(getattr(self.keys, name, None)):
            # arguments the method rejects (a missing one, an int for an iterable):
            # the method itself on a copy raises eager's TypeError
            call_python(f"{self.python_type().__name__}.{name}", getattr(type(self.keys)(self.keys), name),
                        *[a.as_python_constant() for a in args])
        raise unsupported("unsupported set method", f"set.{name}")

    def apply(self, tx, name: str, args: list, frozen: bool | None = None) -> VariableTracker:
        """A set method that returns a new value (``union``, ``__or__``, ``copy``...), run
        on the keys as eager runs it.  ``frozen`` with ``copy``: ``set(s)`` or
        ``frozenset(s)`` (the table copied as it is, like ``s.copy()``)."""
        operands = [other_operand(tx, a) for a in args]
        if frozen is not None:
            name = "__frozen_copy__" if frozen else "__set_copy__"
            result = _COPIES[name](self.keys)
        else:
            result = call_python(f"set.{name}", getattr(self.keys, name), *operands)
        if isinstance(result, (set, frozenset)):
            base = self.snapshot() if self.source is None else ("const", type(self.keys)(self.keys))
            recipe = [("call", name, base, tuple(recipe_arg(tx, a) for a in args))]
            return SetVariable(result, frozen=type(result) is frozenset, recipe=recipe)
        return VariableTracker.build(tx, result)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        slots: list = []  # tensor keys (real tensors, or keys of the graph's tensors)
        recipe = _with_slots(self.snapshot(), slots)
        cg.push_null()
        cg.load_const(replay_set)
        cg.load_const(recipe)
        for tensor in slots:  # tensor keys: the call's tensors, not the trace's
            cg.emit_key(tensor)
        cg.build(tuple, len(slots))
        cg.call(2)


def recipe_arg(tx, var: VariableTracker) -> tuple:
    """An operand as a recipe holds it: a new set by its own recipe, anything else as the
    constant eager would pass."""
    if isinstance(var, SetVariable) and var.source is None:
        return var.snapshot()
    return ("const", other_operand(tx, var))


def other_operand(tx, var: VariableTracker):
    """An argument of a set operation as eager passes it: a set as a set (with the same
    order), a keys view as its keys, anything else as a tuple of its keys in order."""
    if isinstance(var, SetVariable):
        return var.keys if var.source is None else type(var.keys)(var.keys)
    if var.is_python_constant() and isinstance(var.as_python_constant(), (set, frozenset)):
        return var.as_python_constant()
    return tuple(key_of(item, tx) for item in var.unpack(tx))


class _Slot:
    """Stands in a recipe for the tensor ``replay_set`` gets as ``slots[index]``."""

    __slots__ = ("index",)
    __graphjit_portable__ = True  # (a marker: the persistent cache writes it by content)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<slot {self.index}>"


def _with_slots(obj, slots: list):
    """``obj`` (a recipe) with each tensor replaced by a :class:`_Slot` (appended to
    ``slots``)."""
    if isinstance(obj, (torch.Tensor, GraphTensorKey, FrozenDataclassKey, IdentityKey, FrozensetSubclassKey)):
        for i, t in enumerate(slots):
            if t is obj:
                return _Slot(i)
        slots.append(obj)
        return _Slot(len(slots) - 1)
    if type(obj) in (tuple, list, set, frozenset):
        return type(obj)(_with_slots(o, slots) for o in obj)
    return obj


def _fill(obj, slots: tuple):
    if isinstance(obj, _Slot):
        return slots[obj.index]
    if type(obj) in (tuple, list, set, frozenset):
        return type(obj)(_fill(o, slots) for o in obj)
    return obj


def replay_set(recipe, slots: tuple = ()):
    """Make a set again from a :class:`SetVariable` recipe (the operations that made it);
    ``("const", value)`` stands for a value itself, a ``_Slot`` for ``slots[i]``."""
    if slots:
        recipe = _fill(recipe, slots)
    if recipe[0] == "const":
        return recipe[1]
    steps = recipe[1]
    if steps[0][0] == "new":
        _, items, frozen = steps[0]
        s = (frozenset if frozen else set)(items)
    elif steps[0][0] == "binop":  # an operator on dict views (view_sets)
        _, name, left, right = steps[0]
        s = getattr(operator, name)(replay_set(left), replay_set(right))
    else:
        _, name, base, args = steps[0]
        base = replay_set(base)
        s = _COPIES[name](base) if name in _COPIES else getattr(base, name)(*(replay_set(a) for a in args))
    for op, arg in steps[1:]:
        if op == "clear":
            s.clear()
        else:
            getattr(s, op)(replay_set(arg))
    return s


replay_set.__module__ = "graphjit_runtime"

#: ``set(s)`` and ``frozenset(s)`` of a set, as recipe steps
_COPIES = {"__set_copy__": set, "__frozen_copy__": frozenset}

_INPLACE_METHODS = frozenset({"update", "intersection_update", "difference_update",
                              "symmetric_difference_update"})


_SET_OPS = frozenset({"union", "intersection", "difference", "symmetric_difference", "issubset",
                      "issuperset", "isdisjoint", "__or__", "__and__", "__sub__", "__xor__",
                      "__eq__", "__ne__", "__le__", "__lt__", "__ge__", "__gt__"})


def other_keys(tx, var: VariableTracker) -> set:
    """The keys of a set-like tracker (sets, keys views, or any iterable of constants)."""
    if isinstance(var, SetVariable):
        return set(var.keys)
    if isinstance(var, DictViewVariable) and var.kind == "keys":
        return var.key_set(tx)
    return {key_of(item, tx) for item in var.unpack(tx)}


#: callables hashed by identity: members of a set guarded by equality (``fn in s``)
_IDENTITY_HASHED = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                    types.WrapperDescriptorType)


def is_set_key(k) -> bool:
    """A member a set tracker can hold: a constant, a class, or a function."""
    return is_constant_value(k) or isinstance(k, (type, *_IDENTITY_HASHED))


@register_builder(set, frozenset, exact=True)
def _build_set(tx, value, source):
    frozen = type(value) is frozenset
    if not all(is_set_key(k) for k in value):
        raise unsupported("set of non-constants", f"{type(value).__name__} with {len(value)} items")
    if frozen and is_constant_value(value):
        if source is not None:
            tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, value)
        return ConstantVariable(value, source=source)
    if source is not None:  # compared with a copy: the guard must not see later mutations
        tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, type(value)(value))
    return SetVariable(type(value)(value), frozen=frozen, existing=None if frozen else value, source=source,
                       recipe=[("new", tuple(value), frozen)])

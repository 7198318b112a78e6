"""Pytrees of trackers: the nested tuples, lists, dicts and named tuples that
higher-order operators take and return, flattened to their leaves and rebuilt, with the
same rules as ``torch.utils._pytree`` (``None`` is a node without leaves; a dict's items in
insertion order).

:func:`tree_flatten` gives the leaf trackers and a :class:`Spec`; :func:`tree_unflatten`
rebuilds trackers from a spec and leaves; :func:`python_template` rebuilds a Python value
(for a graph target that calls the transform at run time with the user's structure)."""

from __future__ import annotations

import collections
from typing import Any, Callable

import torch.utils._pytree as torch_pytree

from ...exc import unsupported
from ..base import VariableTracker
from ..constant import ConstantVariable
from ..dicts import DictVariable
from ..sequences import ListVariable, TupleVariable


class Spec:
    """The structure of a pytree of trackers: ``kind`` is ``"leaf"``, ``"none"``,
    ``"tuple"`` (``cls`` a named tuple's class or ``tuple``), ``"list"`` or ``"dict"``
    (``keys`` its keys, ``cls`` its class)."""

    __slots__ = ("kind", "cls", "keys", "children")

    def __init__(self, kind: str, cls: type | None = None, keys: tuple = (), children: tuple = ()) -> None:
        self.kind, self.cls, self.keys, self.children = kind, cls, keys, children

    def __repr__(self) -> str:
        if self.kind in ("leaf", "none"):
            return "*" if self.kind == "leaf" else "None"
        inner = ", ".join(map(repr, self.children))
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children, strict=True))
            return "{" + inner + "}"
        return f"[{inner}]" if self.kind == "list" else f"({inner})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Spec) and (self.kind, self.cls, self.keys, self.children) == \
            (other.kind, other.cls, other.keys, other.children)

    def __hash__(self) -> int:
        return hash((self.kind, self.keys, self.children))

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)


LEAF = Spec("leaf")


def _is_none(var: VariableTracker) -> bool:
    return isinstance(var, ConstantVariable) and var.value is None


def tree_flatten(tx, var: VariableTracker) -> tuple[list[VariableTracker], Spec]:
    """The leaves of ``var`` (left to right) and its structure."""
    leaves: list[VariableTracker] = []

    def visit(v: VariableTracker) -> Spec:
        v = v.realize()
        if _is_none(v):
            return Spec("none")
        if isinstance(v, TupleVariable):
            return Spec("tuple", v.python_type(), (), tuple(visit(i) for i in v.items))
        if isinstance(v, ListVariable) and v.python_type() is list:
            return Spec("list", list, (), tuple(visit(i) for i in v.unpack(tx)))
        if isinstance(v, DictVariable) and v.python_type() in (dict, collections.OrderedDict):
            items = v.realize_items(tx)
            for key in items:
                if not isinstance(key, (str, int, float, bool, type(None))):
                    raise unsupported("pytree with a non-constant dict key", type(key).__name__)
            return Spec("dict", v.python_type(), tuple(items), tuple(visit(i) for i in items.values()))
        leaves.append(v)
        return LEAF

    spec = visit(var)
    return leaves, spec


def tree_unflatten(spec: Spec, leaves: list[VariableTracker]) -> VariableTracker:
    """Trackers in the structure ``spec`` with ``leaves`` (as many as it has)."""
    it = iter(leaves)

    def build(s: Spec) -> VariableTracker:
        if s.kind == "leaf":
            return next(it)
        if s.kind == "none":
            return ConstantVariable(None)
        children = [build(c) for c in s.children]
        if s.kind == "tuple":
            return TupleVariable(children, namedtuple_cls=None if s.cls is tuple else s.cls)
        if s.kind == "list":
            return ListVariable(children)
        return DictVariable(dict(zip(s.keys, children, strict=True)), user_cls=s.cls)

    out = build(spec)
    assert next(it, None) is None, "more leaves than the spec has"
    return out


def python_template(spec: Spec, leaves: list[Any]) -> Any:
    """A Python value in the structure ``spec`` with ``leaves``."""
    it = iter(leaves)

    def build(s: Spec) -> Any:
        if s.kind == "leaf":
            return next(it)
        if s.kind == "none":
            return None
        children = [build(c) for c in s.children]
        if s.kind == "tuple":
            return tuple(children) if s.cls is tuple else s.cls(*children)
        if s.kind == "list":
            return children
        return s.cls(zip(s.keys, children, strict=True))

    return build(spec)


def torch_spec(spec: Spec) -> torch_pytree.TreeSpec:
    """``torch.utils._pytree``'s spec of the same structure."""
    return torch_pytree.tree_flatten(python_template(spec, [0] * spec.num_leaves))[1]


def from_torch_spec(spec: torch_pytree.TreeSpec) -> Spec:
    """The :class:`Spec` of a ``torch.utils._pytree`` spec (of tuples, lists, dicts,
    named tuples and ``None``)."""
    if spec.is_leaf():
        return LEAF
    children = tuple(from_torch_spec(c) for c in spec.children())
    t = spec.type
    if t is type(None):
        return Spec("none")
    if t is tuple:
        return Spec("tuple", tuple, (), children)
    if t is list:
        return Spec("list", list, (), children)
    if t in (dict, collections.OrderedDict):
        return Spec("dict", t, tuple(spec.context), children)
    if t is torch_pytree.namedtuple or isinstance(t, type) and issubclass(t, tuple):
        cls = spec.context if t is torch_pytree.namedtuple else t
        return Spec("tuple", cls, (), children)
    raise unsupported("result of a kind graphjit cannot rebuild", getattr(t, "__name__", repr(t)))


def map_leaves(fn: Callable[[VariableTracker], VariableTracker], tx, var: VariableTracker) -> VariableTracker:
    leaves, spec = tree_flatten(tx, var)
    return tree_unflatten(spec, [fn(leaf) for leaf in leaves])

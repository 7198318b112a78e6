"""Sets as keys: a frozenset subclass instance as a dict or set key, and CPython's
coercion of a ``set`` key to a ``frozenset`` in ``set.__contains__``/``discard``/``remove``.

Contract:

* :func:`frozenset_subclass_key` is the key of an instance of a Python subclass of
  ``frozenset`` that keeps frozenset's own ``__hash__`` and ``__eq__``: a
  :class:`FrozensetSubclassKey`, itself a frozenset of the instance's keys, so it hashes
  and compares as the instance does (equal to a plain frozenset of the same items, as in
  eager). The tracker is kept in ``tx.output.key_trackers`` under the key's id, so a
  container that escapes holds the instance itself (its class, its attributes), never a
  plain frozenset. A class with its own ``__hash__``/``__eq__`` gets no key here (the
  caller's graph break stands).
* :func:`set_lookup_key` is ``set_contains``/``set_discard``/``set_remove``'s fallback: an
  unhashable argument that is a set (``PySet_Check``: ``set`` or a subclass) is looked up
  as ``frozenset(arg)``.  ``None`` for anything else (the caller hashes it as usual).
"""

from __future__ import annotations

from typing import Any

from .base import VariableTracker


class FrozensetSubclassKey(frozenset):
    """The key of a frozenset subclass instance seen in the trace (see the module
    docstring): equal and hashed as ``frozenset(items)``; stands for its tracker."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<frozenset subclass {set(self)!r}>"


def _keys(var: VariableTracker):
    keys = getattr(var, "keys", None)
    return keys if isinstance(keys, (set, frozenset)) else None


def frozenset_subclass_key(var: VariableTracker, tx) -> Any:
    """The :class:`FrozensetSubclassKey` of ``var``, or ``None`` where that does not apply."""
    cls = var.python_type()
    keys = _keys(var)
    if tx is None or keys is None or cls is frozenset or not issubclass(cls, frozenset) \
            or cls.__hash__ is not frozenset.__hash__ or cls.__eq__ is not frozenset.__eq__:
        return None
    key = FrozensetSubclassKey(keys)
    tx.output.key_trackers[id(key)] = var
    return key


def set_lookup_key(var: VariableTracker) -> frozenset | None:
    """``frozenset(var)`` where ``var`` is a set or a set subclass instance (unhashable,
    coerced by set lookups), else ``None``."""
    cls = var.python_type() if not var.is_tensor() else None
    keys = _keys(var)
    if cls is None or keys is None or not issubclass(cls, set) or cls.__hash__ is not None:
        return None
    return frozenset(keys)

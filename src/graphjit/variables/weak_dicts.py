"""Weak dicts that existed before the call (``weakref.WeakKeyDictionary``,
``weakref.WeakValueDictionary``), read in traced code.

Their methods are Python (``weakref.py``) over a dict of weak references; tracing them
would mean modelling ``weakref.ref`` objects as keys.  Instead a weak dict reached through
a source is read as a mapping, the answers taken from the real object at trace time:

Contract:

* ``k in d``, ``d[k]`` and ``d.get(k[, default])`` with a key that is a constant (a
  string, a number, ``None``...) or an object hashed by identity that the trace holds
  through a source (a module, a plain instance: guarded to be that very object) are
  answered by the real weak dict.  Each answer is guarded as a fresh trace would find
  it: ``k in d`` (``DICT_CONTAINS``, present or absent) and the value read through
  ``d[k]`` (a ``GetItemSource``, guarded as any value read there).  A missing key raises
  the program's ``KeyError`` (guarded absent).
* Anything else is a graph break with its reason, or the stdlib method run in Python
  (``len``, iteration, ``keys()``...: the contents change when the garbage collector runs,
  outside any trace's view; writes and ``pop``/``setdefault``: the real object is changed
  in Python); a key of another kind (a tensor, an object made in the trace) is a break.
* A weak dict made in the trace (``WeakKeyDictionary()``) is not modelled (its
  ``__init__`` runs in Python: a break).

The guards refer to an identity-hashed key object itself (as every identity guard does):
while the entry lives, such a key is not collected, so its weak entry stays.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..exc import observed, unsupported
from ..guards.guard import GuardKind
from ..sources import ConstSource, GetItemSource, ObjectKey
from ..diagnostics.describe import describe
from .base import MethodVariable, VariableTracker, register_builder
from .constant import ConstantVariable
from .dicts import key_of
from .objects import UserObjectVariable

#: key types written into a source as a literal
_LITERAL_KEYS = (int, str, bool, float, bytes, type(None))
#: the methods answered from the real object
_READS = frozenset({"__contains__", "__getitem__", "get"})


class WeakDictVariable(UserObjectVariable):
    """A ``WeakKeyDictionary`` or ``WeakValueDictionary`` that existed before the call,
    with its source; see the module docstring.  Other attributes and methods are the
    object's (the stdlib code, which is not traced: it runs in Python)."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _READS:
            return MethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name not in _READS:
            return super().call_method(tx, name, args, kwargs)
        what = f"{self.cls.__name__}.{name}"
        if kwargs or not args or len(args) > (2 if name == "get" else 1):
            raise unsupported("weak dict method with other arguments", what)
        key = self._key(tx, args[0], what)
        present = key in self.value
        tx.output.add_guard(self.source, GuardKind.DICT_CONTAINS, (key, present))
        if name == "__contains__":
            return ConstantVariable(present)
        if not present:
            if name == "get":
                return args[1] if len(args) > 1 else ConstantVariable(None)
            raise observed(KeyError, key)
        index = key if type(key) in _LITERAL_KEYS else ObjectKey(key)
        return VariableTracker.build(tx, self.value[key], GetItemSource(self.source, index))

    def _key(self, tx, var: VariableTracker, what: str) -> Any:
        """The real key ``var`` stands for: a literal constant, or an object hashed by
        identity held through a source (guarded to be that object by ``key_of``)."""
        if var.is_python_constant() and type(var.as_python_constant()) in _LITERAL_KEYS:
            return var.as_python_constant()
        value = getattr(var, "value", None)
        if value is not None and var.source is not None and not var.is_tensor() and \
                type(value).__hash__ is object.__hash__:
            key = key_of(var, tx)  # (guards the object's identity)
            if key is value:
                return key
        raise unsupported("weak dict key", f"{what}({describe(var)})",
                          "Weak dicts are read with constant keys or objects the call holds "
                          "through its arguments or globals.")


@register_builder(weakref.WeakKeyDictionary, weakref.WeakValueDictionary, exact=True)
def _build_weak_dict(tx, value, source):
    """(Exactly these classes: a subclass may override the methods read here.)"""
    if source is None:  # reached without a path: the object itself (as ``_build_object``)
        source = ConstSource(value, f"<{type(value).__qualname__} object>")
    else:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
    return WeakDictVariable(value, source=source)

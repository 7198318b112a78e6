"""``id(obj)`` while tracing: an identity that needs no guard to be compared.

Contract:

* ``id(x)`` is an :class:`ObjectIdVariable` standing for the identity of ``x`` (whatever
  tracker reached it).  Used as a dict or set key (what ``copy.deepcopy``'s memo and
  ``seen`` sets do) it is an :class:`IdentityKey`: two ids are the same key exactly when
  they are ids of the same object, decided by the trace's identity map, with no guard on
  either object.  So a memo keyed by ``id()`` works for objects made in the trace, and
  ``copy.deepcopy(arg)`` does not specialize the entry on the argument's identity.
* Where its *number* is needed (arithmetic, formatting, a branch) the id of an object that
  existed before the call is that object's id, with its identity guarded (``ID_MATCH``,
  as before and as torch.compile does); the id of an object made in the trace is known
  only when the code runs: a graph break there.
* If it escapes (returned, stored, a key of an escaping dict) it is rebuilt as
  ``id(<the object>)`` after the graph, so it is the run's own id, exactly.

The identity of a tracker (:func:`identity_token`): the real object behind a value read
from outside the trace (a lazy tracker's value, or the object the identity map holds for
a pre-existing tracker), else what ``is`` compares (``VariableTracker.identity``): the
tracker itself for an object made in the trace.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..exc import unsupported
from ..guards.guard import GuardKind
from .base import LazyVariableTracker, VariableTracker, probing
from .constant import is_constant_value

#: objects whose identity lasts the process: their id is a constant of the trace
_SINGLETONS = (None, True, False, Ellipsis, NotImplemented)


def identity_token(tx, var: VariableTracker) -> Any:
    """What ``var is other`` compares, with the real object wherever the trace knows it
    (two trackers reaching one pre-existing object give the same token)."""
    if type(var) is LazyVariableTracker:  # (not isinstance: that would realize it)
        return var.peek_value()
    real = tx.output.side_effects.existing_value(var)
    if real is not None:
        return real[0]
    if var.is_tensor():  # a graph input or attribute is its real tensor
        tensor = tx.output.real_tensor(var.node)
        if tensor is not None:
            return tensor
    return var.identity()


def _is_real_object(token: Any) -> bool:
    return not isinstance(token, VariableTracker)


class IdentityKey:
    """The dict or set key of an ``id()``: hashed and compared by the identity token."""

    __slots__ = ("token",)

    def __init__(self, token: Any) -> None:
        self.token = token

    def __hash__(self) -> int:
        return id(self.token)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdentityKey) and other.token is self.token

    def __repr__(self) -> str:
        return f"<id of {type(self.token).__name__} {id(self.token):#x}>"


#: output graph -> {id(token): (token, its key)}: one key per identified object and trace
_KEYS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


class ObjectIdVariable(VariableTracker):
    """``id(target)``; see the module docstring.  ``output`` is the trace's output graph
    (where the identity guard goes when the number is read)."""

    def __init__(self, target: VariableTracker, token: Any, output, **kwargs) -> None:
        super().__init__(**kwargs)
        self.target, self.token, self._output = target, token, output

    def _repr_body(self) -> str:
        return f"id of {self.target!r}"

    def python_type(self) -> type:
        return int

    def children(self) -> list[VariableTracker]:
        return [self.target]

    def as_python_constant(self) -> int:
        token = self.token
        if any(token is s for s in _SINGLETONS):
            return id(token)
        if _is_real_object(token) and self.target.source is not None:
            if not probing():  # the number depends on this very object
                self._output.add_guard(self.target.source, GuardKind.ID_MATCH, token)
            return id(token)
        raise unsupported("id() of an object made in the compiled region",
                          f"id() of a new {type(token).__name__}" if _is_real_object(token)
                          else f"id() of a new {_python_type_name(self.target)}",
                          "The object does not exist until the compiled code runs, so its id is "
                          "not known while tracing; ids compare and key dicts and sets in the "
                          "graph, but their value is read only in Python.",
                          ["Use the object itself (or `is`) instead of its id's value."])

    def identity(self) -> IdentityKey:
        """One object per identified object: ``id(a) == id(b)`` of objects made in the
        trace compares these (``a is b``)."""
        return self.dict_key()

    def dict_key(self) -> IdentityKey:
        """The key this id is in a dict or set made in the trace (one per object and
        trace, registered with the tracker it stands for)."""
        markers = _KEYS.setdefault(self._output, {})
        entry = markers.get(id(self.token))
        if entry is None:
            entry = markers[id(self.token)] = (self.token, IdentityKey(self.token))
            self._output.key_trackers[id(entry[1])] = self
        return entry[1]

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(id)
        cg.reconstruct(self.target)
        cg.call(1)


def _python_type_name(var: VariableTracker) -> str:
    try:
        return var.python_type().__name__
    except Exception:  # noqa: BLE001 (only for a message)
        return "object"


def add_identity_guards(output) -> None:
    """The identities the trace compared through ids it used as keys stay as they were:
    the sources that reached one object still reach one object (``OBJECT_ALIASING``), and
    distinct objects stay distinct (one ``NO_ALIASING`` check).  Values compared by value
    (numbers, strings, tuples of them) are left out: a memo never holds them and the
    guards on their values cover them."""
    groups: dict[int, tuple[Any, list]] = {}
    for var in output.key_trackers.values():
        if not isinstance(var, ObjectIdVariable):
            continue
        token, source = var.token, var.target.source
        if source is None or not _is_real_object(token) or is_constant_value(token):
            continue
        sources = groups.setdefault(id(token), (token, []))[1]
        if source not in sources:
            sources.append(source)
    for _, sources in groups.values():
        for other in sources[1:]:
            output.add_guard(other, GuardKind.OBJECT_ALIASING, other=sources[0])
    if len(groups) >= 2:
        output.add_guard(None, GuardKind.NO_ALIASING, tuple(sources[0] for _, sources in groups.values()))


def object_id(tx, var: VariableTracker) -> ObjectIdVariable:
    """``id(var)``."""
    return ObjectIdVariable(var, identity_token(tx, var), tx.output)


__all__ = ["ObjectIdVariable", "IdentityKey", "identity_token", "object_id", "add_identity_guards"]

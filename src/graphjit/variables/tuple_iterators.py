"""A tuple iterator that existed before the compiled frame, stepped in the trace.

A frame that breaks while iterating over a tuple (``it = iter(tuple(...))``, ``next(it)``
before and after the break) hands the resume function the iterator itself: a CPython
``tuple_iterator``, whose items are its tuple's and whose step runs no Python.  Its tuple
and position are read without consuming it (``__reduce__`` gives ``(iter, (tuple,),
index)``, or ``(iter, ((),))`` once exhausted), so the trace can take its items, as
TorchDynamo's ``tuple_iterator_getitem`` does.

Contract:

* :func:`next_item` takes the next item of such an iterator (its tracker has a source):
  the items it has not given yet are read once per trace through
  :class:`TupleIteratorRest` (``remaining_items(it)``, a new tuple) and built as a tuple
  tracker, so the guards check their number and each item the trace uses, never the
  iterator's position itself (a later position with the same items left takes the same
  entry).  Each step logs the advance on the iterator (``SideEffects.iterator_advance``).
* The replay after the graph (or before a graph break's instruction) advances the *same
  object* by the number of items the trace took (:func:`advance`), and exhausts it where
  the trace saw its end, as the steps would have in Python; nothing is rebuilt, so every
  other reference to the iterator sees the same position as in eager.
* Other iterators made before the frame (a list iterator, whose list may change between
  the guard and the step; generators; ``map``/``zip``...) keep the graph break of
  ``iterators.ExistingIteratorVariable``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..sources import ConvertedSource
from .base import VariableTracker

TUPLE_ITERATOR = type(iter(()))


def remaining_items(it: Any) -> Any:
    """The items a ``tuple_iterator`` has not given yet, as a new tuple (read without
    consuming it); the type of anything else (a guard on it then fails)."""
    if type(it) is not TUPLE_ITERATOR:
        return type(it)
    state = it.__reduce__()
    if len(state) < 3:  # exhausted
        return ()
    return state[1][0][state[2]:]


@dataclasses.dataclass(frozen=True, repr=False)
class TupleIteratorRest(ConvertedSource):
    """``remaining_items(base)``: what a tuple iterator will still give."""

    convert = staticmethod(remaining_items)


def advance(it: Any, n: int, exhausted: bool) -> None:
    """Take ``n`` items from ``it`` (and, with ``exhausted``, its end), as the traced
    steps did: the replay of a trace that stepped an existing tuple iterator."""
    for _ in range(n):
        next(it)
    if exhausted:
        next(it, None)


advance.__module__ = "graphjit_runtime"


def steppable(obj: VariableTracker) -> bool:
    """Whether the trace can take ``obj``'s items itself: a tuple iterator that existed
    before the frame and that it can read again through a source."""
    return obj.python_type() is TUPLE_ITERATOR and obj.source is not None and \
        getattr(obj, "value", None) is not None


def next_item(tx, obj: VariableTracker) -> VariableTracker | None:
    """The next item of the existing tuple iterator ``obj``, or ``None`` at its end (see
    the module docstring)."""
    effects = tx.output.side_effects
    value = obj.value
    first, rest, taken, _ = effects.iterator_state(obj, value)
    if rest is None:
        rest = VariableTracker.build(tx, remaining_items(value), TupleIteratorRest(obj.source), realize=True)
    items = rest.unpack(tx)
    if taken >= len(items):
        effects.iterator_advance(first, value, rest, taken, exhausted=True)
        return None
    effects.iterator_advance(first, value, rest, taken + 1, exhausted=False)
    return items[taken]

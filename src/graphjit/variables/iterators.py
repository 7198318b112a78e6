"""Iterators over traced values, for ``GET_ITER``/``FOR_ITER`` and ``iter``/``next``.

An iterator over a list reads the list as it goes (a loop that appends to the list it
iterates sees the new items, as in CPython); over anything else it walks a snapshot of
the items taken when the iterator was made."""

from __future__ import annotations

from .base import VariableTracker
from .sequences import ListVariable, TupleVariable


class ListIteratorVariable(VariableTracker):
    """An iterator over known items (tuples, lists, ranges, dict keys)."""

    def __init__(self, items: list[VariableTracker] | None = None, *, live: ListVariable | None = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.live = live
        self.items = list(items) if items is not None else None
        self.index = 0

    def _seq(self) -> list[VariableTracker]:
        return self.live.items if self.live is not None else self.items

    def _repr_body(self) -> str:
        return f"{self.index}/{len(self._seq())}"

    def python_type(self) -> type:
        return type(iter([])) if self.live is not None else type(iter(()))

    def children(self) -> list[VariableTracker]:
        return self._seq()[self.index:] if self.live is None else [self.live]

    def reconstruct(self, cg) -> None:
        """A fresh iterator over the items not consumed yet (the same values in order)."""
        rest = self._seq()[self.index:]
        cg.reconstruct(TupleVariable(rest))
        cg.get_iter()

    def next_item(self) -> VariableTracker | None:
        seq = self._seq()
        if self.index >= len(seq):
            return None
        self.index += 1
        return seq[self.index - 1]

    def unpack(self, tx) -> list[VariableTracker]:
        rest = self._seq()[self.index:]
        self.index = len(self._seq())
        return list(rest)


def make_iterator(tx, value: VariableTracker) -> ListIteratorVariable:
    """``iter(value)``."""
    if isinstance(value, ListIteratorVariable):
        return value
    if isinstance(value, ListVariable):
        value.items  # the list is consumed: realize (and guard) it
        return ListIteratorVariable(live=value)
    return ListIteratorVariable(value.unpack(tx))

"""Iterators over traced values, for ``GET_ITER``/``FOR_ITER`` and ``iter``/``next``.

An iterator over a list reads the list as it goes (a loop that appends to the list it
iterates sees the new items, as in CPython); over anything else it walks a snapshot of
the items taken when the iterator was made."""

from __future__ import annotations

import types

from ..exc import unsupported
from .base import ValueMutationNew, VariableTracker
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

    def next_item(self, tx=None) -> VariableTracker | None:
        seq = self._seq()
        if self.index >= len(seq):
            return None
        self.index += 1
        return seq[self.index - 1]

    def unpack(self, tx) -> list[VariableTracker]:
        rest = self._seq()[self.index:]
        self.index = len(self._seq())
        return list(rest)


class GeneratorVariable(VariableTracker):
    """A generator made while tracing (a generator function called, a generator
    expression): ``frame`` is its suspended frame, run up to its next ``yield`` each time
    an item is taken, so its side effects interleave with the consumer's as in CPython."""

    def __init__(self, frame, name: str, **kwargs) -> None:
        super().__init__(mutation_type=ValueMutationNew(), **kwargs)
        self.frame, self.name = frame, name

    def _repr_body(self) -> str:
        return self.name

    def python_type(self) -> type:
        return types.GeneratorType

    def next_item(self, tx) -> VariableTracker | None:
        return self.frame.next_value(tx)

    def unpack(self, tx) -> list[VariableTracker]:
        items = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
        return items

    def truthiness(self, tx) -> bool:
        return True

    def reconstruct(self, cg) -> None:
        raise unsupported("generator escapes the graph", f"generator {self.name} is returned, "
                          "stored or live across a graph break", "Generators are traced only "
                          "while they are consumed inside the compiled region.")


def make_iterator(tx, value: VariableTracker) -> VariableTracker:
    """``iter(value)``."""
    if isinstance(value, (ListIteratorVariable, GeneratorVariable)):
        return value
    if isinstance(value, ListVariable):
        value.items  # the list is consumed: realize (and guard) it
        return ListIteratorVariable(live=value)
    return ListIteratorVariable(value.unpack(tx))

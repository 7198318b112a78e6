"""Iterators over traced values, for ``GET_ITER``/``FOR_ITER`` and ``iter``/``next``.

Every iterator tracker is an :class:`IteratorVariable`: ``next_item(tx)`` gives the next
item (or ``None`` when exhausted), one at a time, so work a lazy iterator does (a
generator's body) interleaves with the consumer's as in CPython; ``zip`` and ``enumerate``
are lazy over lazy iterators.  An iterator over a list reads the list as it goes (a loop
that appends to the list it iterates sees the new items); over anything else it walks a
snapshot of the items taken when the iterator was made."""

from __future__ import annotations

import itertools

import types

from ..exc import observed, unsupported
from .base import ValueMutationNew, VariableTracker
from .constant import ConstantVariable
from .sequences import ListVariable, TupleVariable


class IteratorVariable(VariableTracker):
    """Base of the iterator trackers."""

    def next_item(self, tx) -> VariableTracker | None:
        """The next item, or ``None`` when exhausted (each iterator kind defines it)."""
        raise unsupported("iterator without next()", repr(self))

    def unpack(self, tx) -> list[VariableTracker]:
        items = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
        return items

    def truthiness(self, tx) -> bool:
        return True


class ListIteratorVariable(IteratorVariable):
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


class GeneratorVariable(IteratorVariable):
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

    def reconstruct(self, cg) -> None:
        raise unsupported("generator escapes the graph", f"generator {self.name} is returned, "
                          "stored or live across a graph break", "Generators are traced only "
                          "while they are consumed inside the compiled region.")


class ZipVariable(IteratorVariable):
    """``zip(*iterators)``: one item from each per step (``strict``: all end together)."""

    def __init__(self, iterators: list[IteratorVariable], strict: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.iterators, self.strict = iterators, strict

    def _repr_body(self) -> str:
        return ", ".join(map(repr, self.iterators))

    def python_type(self) -> type:
        return zip

    def children(self) -> list[VariableTracker]:
        return list(self.iterators)

    def next_item(self, tx) -> VariableTracker | None:
        items = []
        for i, it in enumerate(self.iterators):
            item = it.next_item(tx)
            if item is None:
                if self.strict:
                    self._check_lengths(tx, i)
                return None
            items.append(item)
        return TupleVariable(items)

    def _check_lengths(self, tx, i: int) -> None:
        """zip(strict=True): iterator ``i`` ended; CPython's message if the others differ."""
        def args(n: int) -> str:
            return "argument 1" if n == 1 else f"arguments 1-{n}"

        if i:
            raise observed(ValueError, f"zip() argument {i + 1} is shorter than {args(i)}")
        for j, other in enumerate(self.iterators[1:], 1):
            if other.next_item(tx) is not None:
                raise observed(ValueError, f"zip() argument {j + 1} is longer than {args(j)}")

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(zip)
        for it in self.iterators:
            cg.reconstruct(it)
        cg.call(len(self.iterators))


class EnumerateVariable(IteratorVariable):
    """``enumerate(iterator, start)``."""

    def __init__(self, iterator: IteratorVariable, start: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.iterator, self.count = iterator, start

    def _repr_body(self) -> str:
        return f"{self.iterator!r} from {self.count}"

    def python_type(self) -> type:
        return enumerate

    def children(self) -> list[VariableTracker]:
        return [self.iterator]

    def next_item(self, tx) -> VariableTracker | None:
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        self.count += 1
        return TupleVariable([ConstantVariable(self.count - 1), item])

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(enumerate)
        cg.reconstruct(self.iterator)
        cg.load_const(self.count)
        cg.call(2)


class MapVariable(IteratorVariable):
    """``map(fn, *iterators)``: lazy, one call of ``fn`` per step, in CPython's order."""

    def __init__(self, fn: VariableTracker, iterators: list[IteratorVariable], **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn, self.iterators = fn, iterators

    def _repr_body(self) -> str:
        return f"{self.fn!r} over {len(self.iterators)}"

    def python_type(self) -> type:
        return map

    def children(self) -> list[VariableTracker]:
        return [self.fn, *self.iterators]

    def next_item(self, tx) -> VariableTracker | None:
        items = []
        for it in self.iterators:
            item = it.next_item(tx)
            if item is None:
                return None
            items.append(item)
        return self.fn.call_function(tx, items, {})

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(map)
        cg.reconstruct(self.fn)
        for it in self.iterators:
            cg.reconstruct(it)
        cg.call(1 + len(self.iterators))


class FilterVariable(IteratorVariable):
    """``filter(fn, iterator)`` (``fn`` None: the items' own truth); lazy."""

    def __init__(self, fn: VariableTracker, iterator: IteratorVariable, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn, self.iterator = fn, iterator

    def _repr_body(self) -> str:
        return f"{self.fn!r} over {self.iterator!r}"

    def python_type(self) -> type:
        return filter

    def children(self) -> list[VariableTracker]:
        return [self.fn, self.iterator]

    def next_item(self, tx) -> VariableTracker | None:
        keep_all = self.fn.is_python_constant() and self.fn.as_python_constant() is None
        while True:
            item = self.iterator.next_item(tx)
            if item is None:
                return None
            test = item if keep_all else self.fn.call_function(tx, [item], {})
            if test.truthiness(tx):
                return item

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(filter)
        cg.reconstruct(self.fn)
        cg.reconstruct(self.iterator)
        cg.call(2)


class ChainVariable(IteratorVariable):
    """``itertools.chain(*iterables)``: each iterable made an iterator when reached."""

    def __init__(self, pending: list[VariableTracker], **kwargs) -> None:
        super().__init__(**kwargs)
        self.pending, self.current = list(pending), None

    def _repr_body(self) -> str:
        return f"{len(self.pending)} pending"

    def python_type(self) -> type:
        return itertools.chain

    def children(self) -> list[VariableTracker]:
        return [*([self.current] if self.current is not None else []), *self.pending]

    def next_item(self, tx) -> VariableTracker | None:
        while True:
            if self.current is None:
                if not self.pending:
                    return None
                self.current = make_iterator(tx, self.pending.pop(0))
            item = self.current.next_item(tx)
            if item is not None:
                return item
            self.current = None

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(itertools.chain)
        parts = self.children()
        for part in parts:
            cg.reconstruct(part)
        cg.call(len(parts))


def make_iterator(tx, value: VariableTracker) -> VariableTracker:
    """``iter(value)``."""
    if isinstance(value, IteratorVariable):
        return value
    if isinstance(value, ListVariable):
        value.items  # the list is consumed: realize (and guard) it
        return ListIteratorVariable(live=value)
    return ListIteratorVariable(value.unpack(tx))

"""Iterators over traced values, for ``GET_ITER``/``FOR_ITER`` and ``iter``/``next``.

Every iterator tracker is an :class:`IteratorVariable`: ``next_item(tx)`` gives the next
item (or ``None`` when exhausted), one at a time, so work a lazy iterator does (a
generator's body) interleaves with the consumer's as in CPython; ``zip`` and ``enumerate``
are lazy over lazy iterators.  An iterator over a list reads the list as it goes (a loop
that appends to the list it iterates sees the new items); over anything else it walks a
snapshot of the items taken when the iterator was made."""

from __future__ import annotations

import collections
import itertools

import types

from ..exc import ObservedException, observed, unsupported
from .base import MethodVariable, ValueMutationNew, VariableTracker, check_mutable
from . import tuple_iterators
from .constant import ConstantVariable
from .dicts import DictVariable, DictViewVariable
from .sequences import ListVariable, TupleVariable
from .sets import SetVariable
from .stop_values import stop_iteration_with
from ..diagnostics.describe import describe


class IteratorVariable(VariableTracker):
    """Base of the iterator trackers."""

    def next_item(self, tx) -> VariableTracker | None:
        """The next item, or ``None`` when exhausted (each iterator kind defines it)."""
        raise unsupported("iterator without next()", describe(self))

    def unpack(self, tx) -> list[VariableTracker]:
        items = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
        return items

    def truthiness(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("__next__", "__iter__"):
            return MethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        """``it.__next__()`` and ``it.__iter__()`` of any iterator."""
        if name == "__iter__" and not args and not kwargs:
            return self
        if name == "__next__" and not args and not kwargs:
            item = self.next_item(tx)
            if item is None:
                raise observed(StopIteration)
            return item
        return super().call_method(tx, name, args, kwargs)


class ListIteratorVariable(IteratorVariable):
    """An iterator over known items (tuples, lists, ranges, dict keys)."""

    def __init__(self, items: list[VariableTracker] | None = None, *, live: ListVariable | None = None,
                 origin: VariableTracker | None = None, reverse: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.live = live
        self.items = list(items) if items is not None else None
        self.index = 0
        # what ``iter()`` (``reversed()`` with ``reverse``) was called on: an escaping
        # iterator is rebuilt from it, so it has eager's type
        self.origin, self.reverse = (live if live is not None else origin), reverse
        self.kind = _iterator_type(self.origin, reverse)

    def _seq(self) -> list[VariableTracker]:
        return self.live.items if self.live is not None else self.items

    def _repr_body(self) -> str:
        return f"{self.index}/{len(self._seq())}"

    def python_type(self) -> type:
        return self.kind

    def children(self) -> list[VariableTracker]:
        if self.live is not None:
            return [self.live]
        return [*self._seq()[self.index:], *([self.origin] if self.origin is not None else [])]

    def reconstruct(self, cg) -> None:
        """The iterator of eager's type over the items not consumed yet: ``iter(origin)``
        (or ``reversed``) advanced past the consumed ones; without an origin, a tuple
        iterator over the remaining items."""
        if self.origin is None or self.kind is type(iter(())) and self.live is None:
            cg.reconstruct(TupleVariable(self._seq()[self.index:]))
            cg.get_iter()
            return
        cg.push_null()
        cg.load_const(_advanced)
        cg.push_null()
        cg.load_const(reversed if self.reverse else iter)
        cg.reconstruct(self.origin)
        cg.call(1)
        cg.load_const(self.index)
        cg.call(2)

    def next_item(self, tx=None) -> VariableTracker | None:
        seq = self._seq()
        if self.index >= len(seq):
            return None
        check_mutable(self, "next() of an iterator")
        self.index += 1
        return seq[self.index - 1]

    def unpack(self, tx) -> list[VariableTracker]:
        rest = self._seq()[self.index:]
        if rest:
            check_mutable(self, "iterating an iterator")
        self.index = len(self._seq())
        return list(rest)


class GeneratorVariable(IteratorVariable):
    """A generator made while tracing (a generator function called, a generator
    expression): ``frame`` is its suspended frame, run up to its next ``yield`` each time
    an item is taken, so its side effects interleave with the consumer's as in CPython."""

    def __init__(self, frame, name: str, *, fn_var: VariableTracker | None = None, args: list | None = None,
                 kwargs: dict | None = None, **kw) -> None:
        super().__init__(mutation_type=ValueMutationNew(), **kw)
        self.frame, self.name = frame, name
        self.fn_var, self.args, self.kwargs = fn_var, list(args or ()), dict(kwargs or {})
        #: set to the original callable when a polyfill made this generator (it stands
        #: for that callable's iterator, e.g. ``itertools.product``'s): not rebuilt
        self.escapes_as = None
        #: how the trace advanced it (``None``: ``next``; else the constant sent), while
        #: replaying that on a fresh generator rebuilds its state; ``None`` once not
        self.advances: list | None = []
        #: the original call's arguments, for a polyfill's generator (``escapes_as``)
        self.origin: tuple[list, dict] | None = None

    def _repr_body(self) -> str:
        state = "exhausted" if self.frame.exhausted else "started" if self.frame.started else "not started"
        return f"{self.name}, {state}"

    def python_type(self) -> type:
        if isinstance(self.escapes_as, type):
            return self.escapes_as
        return types.GeneratorType

    def children(self) -> list[VariableTracker]:
        if self.origin is not None:  # rebuilt from the original call's arguments
            return [*self.origin[0], *self.origin[1].values()] if self.advances is not None else []
        replayable = not self.frame.started or self.advances is not None  # rebuilt from its arguments
        return [*self.args, *self.kwargs.values()] if replayable else []

    def next_item(self, tx) -> VariableTracker | None:
        return self._advance(tx, None)

    def _advance(self, tx, sent: VariableTracker | None) -> VariableTracker | None:
        """Run the frame to its next ``yield`` (``sent``: the value ``send`` delivers),
        noting whether that step could be replayed on a fresh generator: only if it
        changed nothing outside the generator (no side effect, no draw, no in-place or
        random op) and what was sent is a constant."""
        check_mutable(self, "advancing a generator")
        out = tx.output
        mark, steps, nodes = out.side_effects.mark(), len(out.prologue.steps), len(out.graph.nodes)
        value = None if sent is None else sent
        if self.advances is not None and sent is not None and not sent.is_python_constant():
            self.advances = None
        try:
            item = self.frame.next_value(tx, value)
        except BaseException:
            self.advances = None
            raise
        if self.advances is not None:
            new_nodes = list(out.graph.nodes)[nodes:] if len(out.graph.nodes) > nodes else []
            if out.side_effects.mark() != mark or len(out.prologue.steps) != steps or \
                    any(not _replayable_node(n) for n in new_nodes):
                self.advances = None
            else:
                self.advances.append(None if sent is None else sent.as_python_constant())
        return item

    @property
    def return_value(self) -> VariableTracker:
        """What the generator returned (valid once exhausted): ``StopIteration.value``."""
        return self.frame.return_value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("send", "__next__", "__iter__", "throw", "close"):
            return MethodVariable(self, name)
        raise unsupported("generator attribute", f"generator.{name}",
                          "Only iteration, send(), throw() and close() of generators are traced.")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        try:
            return self._call_method(tx, name, args, kwargs)
        except ObservedException as e:
            if name in ("send", "__next__", "throw", "close"):
                e.from_generator = True
            raise

    def _call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__iter__" and not args:
            return self
        if name in ("send", "__next__") and not kwargs and len(args) == (name == "send"):
            item = self._advance(tx, args[0] if args else None)
            if item is None:
                raise stop_iteration(self.return_value)
            return item
        if name == "close" and not args and not kwargs:
            self.advances = None
            return self._close(tx)
        if name == "throw" and not kwargs and 1 <= len(args) <= 3:
            self.advances = None
            item = self.frame.throw_value(tx, _thrown(tx, args))
            if item is None:
                raise stop_iteration(self.return_value)
            return item
        return super().call_method(tx, name, args, kwargs)

    def _close(self, tx) -> VariableTracker:
        """``generator.close()``: ``GeneratorExit`` raised at the paused ``yield`` (its
        ``finally`` blocks run); the generator yielding again is eager's ``RuntimeError``."""
        if not self.frame.started or self.frame.exhausted:
            self.frame.exhausted = True
            return ConstantVariable(None)
        try:
            item = self.frame.throw_value(tx, GeneratorExit())
        except ObservedException as e:
            if isinstance(e.exc, (GeneratorExit, StopIteration)):
                return ConstantVariable(None)
            raise
        if item is not None:
            raise observed(RuntimeError, "generator ignored GeneratorExit")
        return ConstantVariable(None)

    def reconstruct(self, cg) -> None:
        """A generator not started yet is made again by calling its function with the same
        arguments (it has done nothing yet); a started one cannot be rebuilt."""
        if self.escapes_as is not None:
            self._reconstruct_original(cg)
            return
        if self.frame.exhausted and self.fn_var is not None and self._args_replayable():
            # finished or closed: a fresh one, closed before it ran (nothing runs)
            cg.push_null()
            cg.load_const(closed_generator)
            cg.reconstruct(self.fn_var)
            for a in self.args:
                cg.reconstruct(a)
            cg.build(tuple, len(self.args))
            for k, v in self.kwargs.items():
                cg.load_const(k)
                cg.reconstruct(v)
            cg.build(dict, len(self.kwargs))
            cg.call(3)
            return
        replay = self.frame.started
        if self.fn_var is None or (replay and (self.advances is None or not self._args_replayable())):
            raise unsupported("generator escapes the graph", f"generator {self.name} is returned, "
                              "stored or live across a graph break after it started",
                              "A started generator is rebuilt by advancing a fresh one as the "
                              "trace did, which needs steps that changed nothing outside it "
                              "and arguments that are constants or tensors nothing mutated.")
        cg.push_null()
        if replay:
            cg.load_const(replay_generator)
        cg.reconstruct(self.fn_var)
        for a in self.args:
            cg.reconstruct(a)
        for v in self.kwargs.values():
            cg.reconstruct(v)
        if not replay:
            cg.call(len(self.args) + len(self.kwargs), tuple(self.kwargs))
            return
        cg.build(tuple, len(self.args))
        for k, v in self.kwargs.items():
            cg.load_const(k)
            cg.reconstruct(v)
        cg.build(dict, len(self.kwargs))
        cg.load_const(tuple(self.advances))
        cg.call(4)

    def _reconstruct_original(self, cg) -> None:
        """The iterator of a polyfilled callable (``itertools.product``...): the real one,
        made by calling the original with the call's arguments and advancing it as the trace
        did (its type is the original's, not a generator's)."""
        args, kwargs = self.origin if self.origin is not None else (None, None)
        if args is None or self.advances is None or not _replayable_args([*args, *kwargs.values()]):
            raise unsupported("iterator of a polyfilled callable escapes the graph",
                              f"{getattr(self.escapes_as, '__qualname__', self.escapes_as)} iterator is "
                              "returned, stored or live across a graph break",
                              "It is rebuilt by calling the original and advancing it as the trace "
                              "did, which needs steps that changed nothing outside it and arguments "
                              "that are constants, tensors nothing mutated, or tuples of those.")
        cg.push_null()
        cg.load_const(replay_generator)
        cg.load_const(self.escapes_as)
        for a in args:
            cg.reconstruct(a)
        cg.build(tuple, len(args))
        for k, v in kwargs.items():
            cg.load_const(k)
            cg.reconstruct(v)
        cg.build(dict, len(kwargs))
        cg.load_const(tuple(self.advances))
        cg.call(4)

    def _args_replayable(self) -> bool:
        """The generator's arguments are read again when it is rebuilt, after the trace:
        constants, or tensors that no op of the graph changed in place."""
        return _replayable_args([*self.args, *self.kwargs.values()])


def _replayable_args(values: list) -> bool:
    """Arguments that read the same when a generator is made again after the trace:
    constants, tensors no op changed in place, and tuples of those."""
    for a in values:
        if a.is_tensor():
            if any(_mutates(n) and n.args and n.args[0] is a.node for n in a.node.users):
                return False
        elif isinstance(a, TupleVariable):
            if not _replayable_args(a.items):
                return False
        elif not a.is_python_constant():
            return False
    return True


def replay_generator(fn, args: tuple, kwargs: dict, advances: tuple):
    """A generator started in compiled code, rebuilt where it escapes: a fresh one
    advanced as the trace advanced it (``None``: ``next``; else the value sent)."""
    gen = fn(*args, **kwargs)
    for sent in advances:
        try:
            next(gen) if sent is None else gen.send(sent)
        except StopIteration:
            break
    return gen


replay_generator.__module__ = "graphjit_runtime"


def closed_generator(fn, args: tuple, kwargs: dict):
    """A generator that finished or was closed in compiled code, where it escapes: a fresh
    one closed before it started (its body does not run; ``next`` raises StopIteration)."""
    gen = fn(*args, **kwargs)
    gen.close()
    return gen


closed_generator.__module__ = "graphjit_runtime"

_RANDOM_WORDS = ("rand", "dropout", "bernoulli", "normal", "multinomial", "uniform", "exponential",
                 "poisson", "geometric", "cauchy", "log_normal")


def _mutates(node) -> bool:
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return (name.endswith("_") and not name.endswith("__")) or "out" in node.kwargs


def _replayable_node(node) -> bool:
    """Running this op again changes nothing and gives the same value: not in place, not
    random, not a module call."""
    if node.op == "call_module" or _mutates(node):
        return False
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return not any(w in name for w in _RANDOM_WORDS)


def _thrown(tx, args: list) -> BaseException:
    """The exception ``throw(value)`` / ``throw(type, value, tb)`` raises."""
    value = args[1] if len(args) > 1 and not (args[1].is_python_constant() and
                                             args[1].as_python_constant() is None) else args[0]
    exc = value.as_python_constant() if value.is_python_constant() else None
    if isinstance(exc, type) and issubclass(exc, BaseException):
        exc = value.call_function(tx, [], {}).as_python_constant()
    if not isinstance(exc, BaseException):
        raise unsupported("generator.throw of a non-exception", describe(value))
    return exc


def stop_iteration(value: VariableTracker):
    """The ``StopIteration`` an exhausted generator raises (its ``value``: the return value)."""
    if value.is_python_constant():
        v = value.as_python_constant()
        return observed(StopIteration) if v is None else observed(StopIteration, v)
    return ObservedException(stop_iteration_with(value))  # (stop_values.py)


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
        if self.strict:
            cg.load_const(True)
            cg.call(len(self.iterators) + 1, ("strict",))
        else:
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


class ObjectIteratorVariable(IteratorVariable):
    """An iterator that is a Python object: its class's ``__next__`` is traced at each step
    and ``StopIteration`` ends it (``by_index``: the old sequence protocol, ``__getitem__``
    with 0, 1, 2... until ``IndexError``).  The iterator is the object itself, so it is
    what escapes."""

    def __init__(self, obj: VariableTracker, by_index: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.obj, self.by_index, self.index = obj, by_index, 0

    def _repr_body(self) -> str:
        return repr(self.obj)

    def python_type(self) -> type:
        return type(iter("")) if self.by_index else self.obj.python_type()

    def children(self) -> list[VariableTracker]:
        return [self.obj]

    def next_item(self, tx) -> VariableTracker | None:
        if self.index is None:
            return None
        try:
            if self.by_index:
                item = self.obj.call_method(tx, "__getitem__", [ConstantVariable(self.index)], {})
                self.index += 1
                return item
            return self.obj.call_method(tx, "__next__", [], {})
        except ObservedException as e:
            if isinstance(e.exc, IndexError if self.by_index else StopIteration):
                if self.by_index:
                    self.index = None  # an exhausted sequence iterator stays exhausted
                return None
            raise

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if self.by_index or (name in ("__iter__", "__next__") and not args and not kwargs):
            return super().call_method(tx, name, args, kwargs)
        return self.obj.call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if self.by_index:
            return super().var_getattr(tx, name)
        return self.obj.var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        if self.by_index:
            raise unsupported("sequence iterator escapes the graph", describe(self.obj))
        cg.reconstruct(self.obj)


class ExistingIteratorVariable(IteratorVariable):
    """An iterator of a C type (a generator, ``enumerate``, ``zip``, ``map``, a list
    iterator...) that existed before the compiled frame: ``iter()`` of it is the object
    itself (CPython's ``PyObject_SelfIter``), so ``enumerate(it)``, ``zip(it, ...)`` and a
    ``for`` loop over it are made in the trace without reading it.  Its items exist only
    when the code runs: taking one is a graph break (inside a loop the rest of the frame
    runs in Python, its calls compiled), except for a tuple iterator, whose items the trace
    reads (``tuple_iterators.py``).  Nothing is consumed while tracing; what escapes
    is the object itself."""

    def __init__(self, obj: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.obj = obj

    def _repr_body(self) -> str:
        return repr(self.obj)

    def python_type(self) -> type:
        return self.obj.python_type()

    def children(self) -> list[VariableTracker]:
        return [self.obj]

    def next_item(self, tx) -> VariableTracker | None:
        if tuple_iterators.steppable(self.obj):  # its items are its tuple's: taken in the trace
            return tuple_iterators.next_item(tx, self.obj)
        name = self.python_type().__name__
        raise unsupported("next() of an iterator made before the compiled frame",
                          f"{name} object",
                          f"The {name}'s items are produced only when the code runs (taking "
                          "one runs the Python that makes it); the step runs in Python.")

    def reconstruct(self, cg) -> None:
        cg.reconstruct(self.obj)


def is_self_iterator_class(cls: type) -> bool:
    """True for a class whose ``__iter__`` and ``__next__`` are C slots: CPython's iterator
    types, whose ``__iter__`` returns the object itself."""
    it, nxt = getattr(cls, "__iter__", None), getattr(cls, "__next__", None)
    c_slot = (types.WrapperDescriptorType, types.MethodDescriptorType)
    return isinstance(it, c_slot) and isinstance(nxt, c_slot)


def make_iterator(tx, value: VariableTracker) -> VariableTracker:
    """``iter(value)``."""
    if isinstance(value, IteratorVariable):
        return value
    own = getattr(value, "get_iterator", None)  # objects with a Python iteration protocol
    if own is not None:
        return own(tx)
    if isinstance(value, ListVariable):
        value.items  # the list is consumed: realize (and guard) it
        return ListIteratorVariable(live=value)
    if isinstance(value, (DictVariable, DictViewVariable, SetVariable)):
        return SizeCheckedIteratorVariable(value.unpack(tx), origin=value)
    return ListIteratorVariable(value.unpack(tx), origin=value)


class SizeCheckedIteratorVariable(ListIteratorVariable):
    """An iterator over a dict, a dict view or a set: as CPython's, a change of the
    container's size while iterating is a ``RuntimeError`` at the next step."""

    def __init__(self, items, *, origin: VariableTracker, **kwargs) -> None:
        super().__init__(items, origin=origin, **kwargs)
        self.size = self._size()

    def _size(self) -> int | None:
        """The container's size now (its items were realized when iteration began)."""
        origin = self.origin
        if isinstance(origin, DictViewVariable):
            origin = origin.dict_var
        if isinstance(origin, SetVariable):
            return len(origin.keys)
        return len(origin._items) if origin._items is not None else None

    def next_item(self, tx=None) -> VariableTracker | None:
        if self.size is not None and self._size() != self.size:
            self.size = None  # CPython's iterator is finished after the error
            self.index = len(self._seq())
            origin = self.origin.dict_var if isinstance(self.origin, DictViewVariable) else self.origin
            if isinstance(origin, DictVariable) and issubclass(origin.user_cls, collections.OrderedDict):
                raise observed(RuntimeError, "OrderedDict mutated during iteration")
            what = "Set" if isinstance(self.origin, SetVariable) else "dictionary"
            raise observed(RuntimeError, f"{what} changed size during iteration")
        return super().next_item(tx)


def _advanced(iterator, n: int):
    """``iterator`` after ``n`` items were taken (rebuilding a partly consumed one)."""
    for _ in range(n):
        next(iterator)
    return iterator


_advanced.__module__ = "graphjit_runtime"

#: an empty instance of each built-in iterable, to learn its iterator types from
_EMPTY = {tuple: (), list: [], dict: {}, set: set(), frozenset: frozenset(), str: "", bytes: b"",
          range: range(0), type({}.keys()): {}.keys(), type({}.values()): {}.values(),
          type({}.items()): {}.items(),
          **{type(view): view for view in (collections.OrderedDict().keys(), collections.OrderedDict().values(),
                                           collections.OrderedDict().items())}}


def _iterator_type(origin: VariableTracker | None, reverse: bool) -> type:
    """The type of ``iter(origin)`` (``reversed(origin)``), tuple_iterator if unknown."""
    fallback = type(iter(()))
    if origin is None:
        return fallback
    try:
        if origin.is_python_constant():
            value = origin.as_python_constant()
        else:
            value = _EMPTY.get(origin.python_type())
        if value is None:
            return fallback
        return type(reversed(value) if reverse else iter(value))
    except Exception:
        return fallback

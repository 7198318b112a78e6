"""Tuples, lists and slices whose items are trackers.

A list created while tracing (``ValueMutationNew``) is mutated freely and rebuilt only if
it escapes.  A list that existed before (``ValueMutationExisting``) has its mutations
recorded in the side-effect log and replayed after the graph: ``append``/``clear`` as
direct calls, anything else as ``lst[:] = [...]`` (seed 002).  A pre-existing list is lazy:
its items, and the guard on its length, materialize only when the list is consumed, so
a list that is only appended to is guarded by type alone.

Comparisons of items (``in``, ``index``, ``count``, ``remove``, ``==``) run the
``polyfills.builtins`` versions through the tracer, so an item that is a tensor compares
as CPython compares it (``3 in [tensor([3.])]`` is a data-dependent branch, not False).
"""

from __future__ import annotations

import collections
import operator
import types
from typing import Any

from ..exc import ObservedException, observed, unsupported
from ..guards.guard import GuardKind
from ..polyfills import builtins as poly
from ..sources import AttrSource, ConstSource, GetItemSource
from .base import (
    check_mutable,
    MethodVariable,
    ValueMutationExisting,
    ValueMutationNew,
    VariableTracker,
    call_python,
    register_builder,
    register_builder_predicate,
)
from .constant import ConstantVariable, is_constant_value
from ..diagnostics.describe import describe


class BaseSequenceVariable(VariableTracker):
    """Shared behaviour of tuples and lists: items, indexing, iteration, concatenation."""

    seq_type: type = tuple

    def __init__(self, items: list[VariableTracker], **kwargs) -> None:
        super().__init__(**kwargs)
        self._items = list(items)

    @property
    def items(self) -> list[VariableTracker]:
        if self._watch is not None:  # (a repeated block's body reads all of it)
            self._watch.seq_full_read(self)
        return self._items

    @items.setter
    def items(self, value: list[VariableTracker]) -> None:
        self._items = value

    def raw_items(self) -> list[VariableTracker]:
        """The items, as :attr:`items` gives them, without telling a repeated block's
        recorder (``hops/block_effects.py``) that they were read."""
        return self._items

    def _repr_body(self) -> str:
        return ", ".join(map(repr, self.raw_items()))

    def python_type(self) -> type:
        return self.seq_type

    def children(self) -> list[VariableTracker]:
        return list(self.raw_items())

    def as_python_constant(self):
        return self.seq_type(v.as_python_constant() for v in self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def truthiness(self, tx) -> bool:
        return bool(self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.seq_type, name, None)):
            return MethodVariable(self, name)
        raise observed(AttributeError, f"'{self.seq_type.__name__}' object has no attribute '{name}'")

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.python_type(), name)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        if self._watch is not None:  # (a repeated block's body reads one item)
            return self._watch.seq_getitem(tx, self, index)
        return self.item_at(index.as_python_constant())

    def item_at(self, idx: Any) -> VariableTracker:
        """``seq[idx]`` for a Python index or slice (eager's errors as observed ones)."""
        if isinstance(idx, slice):
            return self.new_like(self.items[idx])
        try:
            return self.raw_items()[operator.index(idx)]
        except IndexError:
            raise observed(IndexError, f"{self.seq_type.__name__} index out of range") from None
        except TypeError:
            raise observed(TypeError, f"{self.seq_type.__name__} indices must be integers or "
                                      f"slices, not {type(idx).__name__}") from None

    def new_like(self, items: list[VariableTracker]) -> "BaseSequenceVariable":
        """A new sequence of this kind holding ``items``."""
        return type(self)(items)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__len__" and not args:
            if self._watch is not None:
                return ConstantVariable(self._watch.seq_len(tx, self))
            return ConstantVariable(len(self.items))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__contains__" and len(args) == 1:
            return tx.inline_polyfill(poly.sequence_contains, [self, args[0]])
        if name == "index" and args and not kwargs:
            return tx.inline_polyfill(poly.sequence_index, [self, *args])
        if name == "count" and len(args) == 1:
            return tx.inline_polyfill(poly.sequence_count, [self, args[0]])
        if name == "__iter__" and not args:
            return tx.make_iterator(self)
        raise unsupported("unsupported sequence method", f"{self.seq_type.__name__}.{name}")

    def reconstruct(self, cg) -> None:
        if self.source is not None:  # it existed before: the same object, reloaded
            cg.extend(self.source.reconstruct())
            return
        for item in self.items:
            cg.reconstruct(item)
        cg.build(self.seq_type, len(self.items))


class TupleVariable(BaseSequenceVariable):
    """A tuple; immutable (``mutation_type`` is ``None``).  ``namedtuple_cls`` is set for
    named tuples and structseqs (``torch.return_types.max``), whose fields are attributes."""

    seq_type = tuple

    def __init__(self, items, namedtuple_cls: type | None = None, class_var=None, **kwargs) -> None:
        super().__init__(items, **kwargs)
        self.namedtuple_cls = namedtuple_cls
        #: the tracker of ``namedtuple_cls`` where the trace made the class (rebuilt from it)
        self.class_var = class_var

    def python_type(self) -> type:
        return self.namedtuple_cls or tuple

    def var_getattr(self, tx, name: str) -> VariableTracker:
        cls = self.namedtuple_cls
        fields = list(getattr(cls, "_fields", None) or getattr(cls, "__match_args__", ()))
        if name in fields:
            return self.items[fields.index(name)]
        if cls is not None:
            written = _pending_class_attr(tx, cls, name)
            if written is not None:
                return written
            owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
            if owner is not None and owner not in (tuple, object):
                raw = owner.__dict__[name]
                if isinstance(raw, classmethod) or not callable(raw):  # ``_make``, ``_fields``
                    return VariableTracker.build(tx, getattr(cls, name), _class_attr_source(cls, name))
                if isinstance(raw, types.FunctionType):  # ``_replace``, ``_asdict``, a user method
                    return MethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        cls = self.namedtuple_cls
        raw = _named_tuple_method(cls, name)
        if raw is not None:  # a Python method of the named tuple class: traced
            fn = VariableTracker.build(tx, raw, _class_attr_source(cls, name))
            return fn.call_function(tx, [self, *args], kwargs)
        return super().call_method(tx, name, args, kwargs)

    def as_python_constant(self):
        value = tuple(v.as_python_constant() for v in self.items)
        return self._rebuild(value)

    def _rebuild(self, value: tuple):
        cls = self.namedtuple_cls
        if cls is None:
            return value
        return cls._make(value) if hasattr(cls, "_make") else cls(value)

    def reconstruct(self, cg) -> None:
        cls = self.namedtuple_cls
        if cls is None or self.source is not None:
            return super().reconstruct(cg)
        cg.push_null()
        if self.class_var is not None:  # a class made in the trace: made again, once
            cg.reconstruct(self.class_var)
            cg.load_attr("_make")
        else:
            cg.load_const(cls._make if hasattr(cls, "_make") else cls)
        super().reconstruct(cg)
        cg.call(1)


def _class_attr_source(cls: type, name: str) -> AttrSource:
    """``cls.name`` read through the named tuple class (a constant of the trace)."""
    return AttrSource(ConstSource(cls, cls.__qualname__), name)


def _named_tuple_method(cls: type | None, name: str) -> types.FunctionType | None:
    """A Python function defined by a named tuple class (not by ``tuple``), or ``None``."""
    if cls is None:
        return None
    owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
    if owner is None or owner in (tuple, object):
        return None
    raw = owner.__dict__[name]
    return raw if isinstance(raw, types.FunctionType) else None


def _pending_class_attr(tx, cls: type, name: str) -> VariableTracker | None:
    """A class attribute of a named tuple class written in this trace (``P.scale = 3``):
    the value, where it is a plain constant; a deleted or callable one is a break (the
    protocol that binds it lives in ``object_protocol``)."""
    for klass in cls.__mro__:
        pending = tx.output.side_effects.pending_class_attrs.get(klass)
        if pending is not None and name in pending:
            value = pending[name]
            if isinstance(value, VariableTracker) and value.is_python_constant() and \
                    not callable(value.as_python_constant()):
                return value
            raise unsupported("named tuple class attribute written in this trace",
                              f"{cls.__qualname__}.{name}")
    return None


class ListVariable(BaseSequenceVariable):
    """A list; see the module docstring for new vs pre-existing lists and laziness."""

    seq_type = list

    def __init__(self, items, mutation_type=None, lazy=None, **kwargs) -> None:
        super().__init__(items if lazy is None else [],
                         mutation_type=mutation_type or ValueMutationNew(), **kwargs)
        self._lazy = lazy  # (realize: () -> list of trackers) until consumed
        self._appended: list[VariableTracker] = []
        self._cleared = False

    @property
    def items(self) -> list[VariableTracker]:
        items = self.raw_items()
        if self._watch is not None:  # (a repeated block's body reads all of it)
            self._watch.seq_full_read(self)
        return items

    @items.setter
    def items(self, value: list[VariableTracker]) -> None:
        self._items = value

    def raw_items(self) -> list[VariableTracker]:
        if self._lazy is not None:
            realize, self._lazy = self._lazy, None
            self._items = ([] if self._cleared else realize()) + self._appended
        return self._items

    def _repr_body(self) -> str:
        if self._lazy is not None:
            return f"lazy, {len(self._appended)} appended"
        return super()._repr_body()

    def children(self) -> list[VariableTracker]:
        return list(self._appended) if self._lazy is not None else list(self._items)

    def new_like(self, items):
        return ListVariable(items)

    def _mutate(self, tx, op: str, item: Any = None, index: Any = None) -> None:
        """New lists mutate freely; a pre-existing list's mutation is logged for replay.
        (``item``: what ``append`` adds, ``extend``'s items, what ``__setitem__`` stores at
        ``index``: what a repeated block's recorder replays on each block's list.)"""
        if isinstance(self.mutation_type, ValueMutationNew):
            check_mutable(self, f"list.{op}")
        elif self.source is None:
            raise unsupported("mutation of a list without a source", f"list.{op} on {describe(self)}",
                              "This list existed before the call but cannot be reloaded to replay it.")
        watch = tx.output.block_watch
        if watch is not None:
            watch.list_write(tx, self, op, item, index)
        if not isinstance(self.mutation_type, ValueMutationNew):
            tx.output.side_effects.list_mutation(self, op, item if op == "append" else None)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        handler = _LIST_METHODS.get(name)
        if handler is not None and not kwargs:
            result = handler(self, tx, *args)
            return ConstantVariable(None) if result is None else result
        if name == "sort":
            return self._sort(tx, args, kwargs)
        return super().call_method(tx, name, args, kwargs)

    # -- methods (CPython's list methods, on trackers) -------------------------------------
    def _append(self, tx, item):
        self._mutate(tx, "append", item)
        (self._appended if self._lazy is not None else self.raw_items()).append(item)

    def _clear(self, tx):
        self._mutate(tx, "clear")
        if self._lazy is not None:
            self._cleared, self._appended = True, []
        else:
            self.raw_items().clear()

    def _extend(self, tx, other):
        if not isinstance(other, BaseSequenceVariable) or isinstance(other, DequeVariable):
            # CPython's list_extend takes lists and tuples whole; any other iterable is
            # appended item by item, so a generator reading the list sees its new items
            it = tx.make_iterator(other)
            while (item := it.next_item(tx)) is not None:
                self._append(tx, item)
            return
        new = other.unpack(tx)
        self._mutate(tx, "extend", list(new))
        self.raw_items().extend(new)

    def _insert(self, tx, index, item):
        idx = _index_value(tx, index)
        self._mutate(tx, "insert")
        self.items.insert(idx, item)

    def _pop(self, tx, index=None):
        idx = -1 if index is None else _index_value(tx, index)
        if not self.items:
            raise observed(IndexError, "pop from empty list")
        if not -len(self.items) <= idx < len(self.items):
            raise observed(IndexError, "pop index out of range")
        self._mutate(tx, "pop")
        return self.items.pop(idx)

    def _remove(self, tx, item):
        try:
            index = tx.inline_polyfill(poly.sequence_index, [self, item]).as_python_constant()
        except ObservedException as e:
            if type(e.exc) is ValueError:
                raise observed(ValueError, "list.remove(x): x not in list") from None
            raise
        self._mutate(tx, "remove")
        del self.items[index]

    def _reverse(self, tx):
        self._mutate(tx, "reverse")
        self.items.reverse()

    def _copy(self, tx):
        return ListVariable(list(self.items))

    def _iadd(self, tx, other):
        self._extend(tx, other)
        return self

    def _sort(self, tx, args, kwargs) -> VariableTracker:
        """``list.sort(key=..., reverse=...)``: ``sorted``'s order (stable, keys computed in
        order), then the list's items replaced in place."""
        if args or set(kwargs) - {"reverse", "key"}:
            raise observed(TypeError, "sort() takes no positional arguments") if args else \
                unsupported("list.sort with unknown keywords", ", ".join(sorted(kwargs)))
        ordered = tx.call_python_builtin(sorted, [ListVariable(list(self.items))], dict(kwargs))
        self._mutate(tx, "sort")
        self.items[:] = ordered.unpack(tx)
        return ConstantVariable(None)

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        if self._watch is not None:  # (the index may be each repeated block's own)
            idx, ref = self._watch.seq_index(tx, self, index)
        else:
            idx = ref = index.as_python_constant()
        if isinstance(idx, slice):
            new = value.unpack(tx)
            trial = list(range(len(self.items)))
            call_python("list.__setitem__", trial.__setitem__, idx, new)  # eager's error, if any
            self._mutate(tx, "__setitem__")
            self.items[idx] = new
            return
        items = self.raw_items()
        if self._watch is not None:
            self._watch.seq_len(tx, self)  # (whether the store succeeds depends on the length)
        if not -len(items) <= idx < len(items):
            raise observed(IndexError, "list assignment index out of range")
        self._mutate(tx, "__setitem__", value, ref)
        items[idx] = value

    def delitem(self, tx, index: VariableTracker) -> None:
        idx = index.as_python_constant()
        if not isinstance(idx, slice) and not -len(self.items) <= idx < len(self.items):
            raise observed(IndexError, "list assignment index out of range")
        self._mutate(tx, "__delitem__")
        del self.items[idx]


_LIST_METHODS = {
    "append": ListVariable._append, "clear": ListVariable._clear, "extend": ListVariable._extend,
    "insert": ListVariable._insert, "pop": ListVariable._pop, "remove": ListVariable._remove,
    "reverse": ListVariable._reverse, "copy": ListVariable._copy, "__iadd__": ListVariable._iadd,
    "__setitem__": ListVariable.setitem, "__delitem__": ListVariable.delitem,
}


class DequeVariable(BaseSequenceVariable):
    """A ``collections.deque``.  A pre-existing one is realized (length and items guarded)
    when read, and any mutation replays as ``d.clear(); d.extend([...])``."""

    seq_type = collections.deque

    def __init__(self, items, maxlen: int | None = None, mutation_type=None, **kwargs) -> None:
        super().__init__(items, mutation_type=mutation_type or ValueMutationNew(), **kwargs)
        self.maxlen = maxlen

    def new_like(self, items):
        return DequeVariable(items, self.maxlen)

    def as_python_constant(self):
        raise unsupported("not a constant", "a deque")

    def _mutate(self, tx) -> None:
        if isinstance(self.mutation_type, ValueMutationNew):
            check_mutable(self, "deque mutation")
            return
        if self.source is None:
            raise unsupported("mutation of a deque without a source", describe(self))
        tx.output.side_effects.list_mutation(self, "rebuild")

    def _trim(self, left: bool) -> None:
        if self.maxlen is not None:
            while len(self.items) > self.maxlen:
                self.items.pop(0 if left else -1)

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        idx = index.as_python_constant()
        if type(idx) is not int:
            raise observed(TypeError, f"sequence index must be integer, not '{type(idx).__name__}'")
        if not -len(self.items) <= idx < len(self.items):
            raise observed(IndexError, "deque index out of range")
        self._mutate(tx)
        self.items[idx] = value

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if kwargs:
            raise unsupported("deque method with keyword arguments", f"deque.{name}")
        if name == "__setitem__" and len(args) == 2:
            self.setitem(tx, args[0], args[1])
            return ConstantVariable(None)
        items = self.items
        if name in ("pop", "popleft") and not args:
            if not items:
                raise observed(IndexError, "pop from an empty deque")
            self._mutate(tx)
            return items.pop() if name == "pop" else items.pop(0)
        if name in ("extend", "extendleft") and len(args) == 1 and args[0] is not self:
            # deque_extend: one item at a time (a generator reading the deque sees each)
            it = tx.make_iterator(args[0])
            while (item := it.next_item(tx)) is not None:
                self.call_method(tx, "append" if name == "extend" else "appendleft", [item], {})
            return ConstantVariable(None)
        if name in ("append", "appendleft", "extend", "extendleft", "clear", "rotate"):
            new = args[0].unpack(tx) if name in ("extend", "extendleft") else None
            self._mutate(tx)
            if name == "append":
                items.append(args[0])
                self._trim(left=True)
            elif name == "appendleft":
                items.insert(0, args[0])
                self._trim(left=False)
            elif name == "extend":
                items.extend(new)
                self._trim(left=True)
            elif name == "extendleft":
                items[:0] = list(reversed(new))
                self._trim(left=False)
            elif name == "clear":
                items.clear()
            else:
                n = _index_value(tx, args[0]) if args else 1
                if items:
                    n %= len(items)
                    items[:] = items[-n:] + items[:-n] if n else items
            return ConstantVariable(None)
        if name == "insert" and len(args) == 2:  # deque_insert: list.insert's clamping
            idx = _index_value(tx, args[0])
            if self.maxlen is not None and len(items) >= self.maxlen:
                raise observed(IndexError, "deque already at its maximum size")
            self._mutate(tx)
            items.insert(idx, args[1])
            return ConstantVariable(None)
        if name == "copy":
            return DequeVariable(list(items), self.maxlen)
        if name == "reverse":
            self._mutate(tx)
            items.reverse()
            return ConstantVariable(None)
        if name == "remove" and len(args) == 1:  # the first equal item (polyfill's ``==``)
            index = tx.inline_polyfill(poly.sequence_index, [self, args[0]]).as_python_constant()
            self._mutate(tx)
            del items[index]
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        cg.push_null()
        cg.load_const(collections.deque)
        for item in self.items:
            cg.reconstruct(item)
        cg.build(list, len(self.items))
        cg.load_const(self.maxlen)
        cg.call(2)


class SliceVariable(VariableTracker):
    """``slice(start, stop, step)`` whose parts may be trackers (tensors in an index)."""

    def __init__(self, start, stop, step, **kwargs) -> None:
        super().__init__(**kwargs)
        self.parts = (start, stop, step)

    def _repr_body(self) -> str:
        return ", ".join(map(repr, self.parts))

    def python_type(self) -> type:
        return slice

    def children(self) -> list[VariableTracker]:
        return list(self.parts)

    def as_python_constant(self):
        return slice(*(p.as_python_constant() for p in self.parts))

    def reconstruct(self, cg) -> None:
        for p in self.parts:
            cg.reconstruct(p)
        cg.build(slice, 3)


def _index_value(tx, index: VariableTracker) -> int:
    """An index argument as CPython's ``list.insert``/``list.pop`` take it
    (``PyNumber_Index``: ``__index__`` objects, eager's TypeError for anything else)."""
    return call_python("index", operator.index, tx.as_index(index).as_python_constant())


def _item_sources(source, n: int) -> list:
    return [GetItemSource(source, i) if source is not None else None for i in range(n)]


def _is_named_tuple(value: Any) -> bool:
    cls = type(value)
    return cls is not tuple and isinstance(value, tuple) and (
        hasattr(cls, "_fields") or hasattr(cls, "n_fields"))


@register_builder_predicate(_is_named_tuple)
def _build_named_tuple(tx, value: Any, source):
    return _build_tuple(tx, value, source)


@register_builder(tuple, exact=True)
def _build_tuple(tx, value: Any, source):
    cls = type(value)
    named = cls if cls is not tuple else None
    if is_constant_value(value) and named is None and (source is None or not tx.output.numbers_vary(value, source)):
        return ConstantVariable(value, source=source) if source is None else \
            _constant_guarded(tx, value, source)
    # (a tuple whose numbers the shape policy makes symbolic is built item by item)
    if source is not None:
        tx.output.add_guard(source, GuardKind.LENGTH_CHECK if named is None else GuardKind.TYPE_MATCH,
                            value if named is None else cls)
    items = [VariableTracker.build(tx, v, s) for v, s in zip(value, _item_sources(source, len(value)))]
    return TupleVariable(items, namedtuple_cls=named, source=source)


def _constant_guarded(tx, value, source):
    tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, value)
    return ConstantVariable(value, source=source)


@register_builder(list, exact=True)
def _build_list(tx, value: list, source):
    def realize():
        if source is not None:
            tx.output.add_guard(source, GuardKind.LENGTH_CHECK, value)
        return [VariableTracker.build(tx, v, s) for v, s in zip(value, _item_sources(source, len(value)))]

    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, list)
    # it existed before the call: never "new", even without a source (then its mutation
    # cannot be replayed and is a graph break).  Lazy: see ListVariable.
    return ListVariable(None, mutation_type=ValueMutationExisting(), source=source, lazy=realize)


@register_builder(collections.deque, exact=True)
def _build_deque(tx, value: collections.deque, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.LENGTH_CHECK, value)
        tx.output.add_guard(AttrSource(source, "maxlen"), GuardKind.CONSTANT_MATCH, value.maxlen)
    items = [VariableTracker.build(tx, v, s) for v, s in zip(value, _item_sources(source, len(value)))]
    return DequeVariable(items, value.maxlen, mutation_type=ValueMutationExisting(), source=source)

"""SideEffects: one tracker per Python object, and an ordered log of the mutations a
trace made to objects that existed before it; replayed after the graph.

Identity map: ``register_existing(value, var)`` records the tracker of a pre-existing
mutable object (containers, user objects, classes, modules, cells, instance dicts);
``OutputGraph.build_value`` returns it for every later path to the same object (with an
aliasing guard), so every read sees the pending writes.

The log, in program order (seeds 000-003):

======================  ==================================  ==============================
entry                    made by                              replayed as
======================  ==================================  ==============================
``DictStore/Delete``     ``d[k] = v``, ``o.attr = v`` (the    ``d[k] = v`` / ``del d[k]``;
                         instance dict), ``global x``         ``STORE_GLOBAL`` for globals;
                                                              ``o.__dict__[k] = v`` bypasses
                                                              descriptors (seed 000)
``AttrStore``            a slot / C data descriptor,          ``STORE_ATTR`` (or
                         ``o.__dict__ = d``, ``C.x = v``,     ``object.__setattr__`` when the
                         ``t.grad = g`` (a tensor from        class overrides __setattr__)
                         outside the graph)
``CellStore``            ``nonlocal x; x = v``                ``STORE_DEREF`` / ``cell.cell_contents = v``
``ListOps``              list methods                         ``append``/``clear`` calls
                                                              (seed 002), else ``l[:] = [...]``
``SetOps``               ``add``/``discard``/``clear``        the same calls
``IterAdvance``          ``next()`` of a tuple iterator       ``advance(it, n, exhausted)``
                         made before the frame                (``variables/tuple_iterators.py``)
======================  ==================================  ==============================

Replay (:meth:`SideEffects.codegen`) first reads every target and value into temporaries
(so no store can change what another reads), then fills the objects made while tracing
(``PyCodegen.populate_pending``), then stores in program order.  Runs of stores to one
key collapse into the first store's position with the last value, which keeps dict order
(a delete in between keeps both).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from ..bytecode.instruction import create_instruction
from ..exc import unsupported
from ..variables.base import VariableTracker, in_body, outer_write_allowed
from ..variables.cells import EMPTY
from ..variables.dicts import DELETED
from ..variables.tuple_iterators import advance

_NONE = object()


@dataclasses.dataclass(eq=False)
class Entry:
    """One logged mutation: ``kind`` of ``target`` at ``key`` with ``value``."""

    kind: str  # "dict", "attr", "cell", "list", "set"
    target: VariableTracker
    key: Any = None
    value: Any = None  # a tracker, DELETED (dict/attr) or EMPTY (cell)

    def __repr__(self) -> str:
        return f"Entry({self.kind} {self.target!r}[{self.key!r}] = {self.value!r})"


class SideEffects:
    """The identity map and the mutation log of one trace."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, VariableTracker]] = {}
        self._by_var: dict[int, Any] = {}  # id(tracker) -> its object (the map reversed)
        self.log: list[Entry] = []
        self._lists: dict[int, Entry] = {}  # one entry per list: its ops, or a rebuild
        #: id(tuple iterator) -> (its tracker, its remaining items' tracker, items taken,
        #: exhausted): what the trace took from an iterator made before it
        self._iterators: dict[int, tuple] = {}
        self.pending_class_attrs: dict[type, dict[str, Any]] = {}
        #: id(tensor) -> (tensor, tracker): ``.grad`` written by the trace (read back)
        self.pending_tensor_grads: dict[int, tuple[Any, VariableTracker]] = {}

    def __repr__(self) -> str:
        return f"SideEffects({len(self._by_id)} objects, {len(self.log)} mutations)"

    def __bool__(self) -> bool:
        return bool(self.log)

    # -- identity map ---------------------------------------------------------------------
    def register_existing(self, value: Any, var: VariableTracker) -> None:
        self._by_id[id(value)] = (value, var)
        self._by_var[id(var)] = value

    def existing_value(self, var: VariableTracker) -> tuple | None:
        """``(object,)`` for the tracker of a pre-existing object, else ``None``."""
        value = self._by_var.get(id(var), _NONE)
        if value is _NONE or self.known_tracker(value) is not var:
            return None
        return (value,)

    def known_tracker(self, value: Any) -> VariableTracker | None:
        entry = self._by_id.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else None

    def mutated_targets(self) -> list[VariableTracker]:
        """Pre-existing trackers this trace mutates (for non-aliasing guards)."""
        seen: dict[int, VariableTracker] = {}
        for e in self.log:
            target = getattr(e.target, "obj", None) if e.kind == "dict" else None
            seen.setdefault(id(e.target), target or e.target)
        return list(seen.values())

    def mark(self) -> tuple:
        """A summary that changes whenever a mutation is recorded (compare two marks to
        see whether code traced in between changed pre-existing state)."""
        list_ops = sum(len(e.value) for e in self._lists.values())
        return len(self.log), list_ops, sum(len(v) for v in self.pending_class_attrs.values())

    # -- recording ------------------------------------------------------------------------
    def dict_store(self, d: VariableTracker, key: Any, value: VariableTracker) -> None:
        _refuse_in_body("dict store", d)
        self.log.append(Entry("dict", d, key, value))

    def dict_delete(self, d: VariableTracker, key: Any) -> None:
        _refuse_in_body("dict delete", d)
        self.log.append(Entry("dict", d, key, DELETED))

    def attr_store(self, obj: VariableTracker, name: str, value: Any) -> None:
        """A write (or, with DELETED, a delete) through a data descriptor or ``__dict__``."""
        _refuse_in_body(f"attribute store .{name}", obj)
        self.log.append(Entry("attr", obj, name, value))

    def class_attr_store(self, cls_var, name: str, value: Any) -> None:
        _refuse_in_body("class attribute store", cls_var)
        self.pending_class_attrs.setdefault(cls_var.cls, {})[name] = value
        self.log.append(Entry("attr", cls_var, name, value))

    def cell_store(self, cell: VariableTracker, value: Any) -> None:
        _refuse_in_body("store to a free variable", cell)
        self.log.append(Entry("cell", cell, None, value))

    def list_mutation(self, lst: VariableTracker, op: str, item: VariableTracker | None = None) -> None:
        """``append``/``clear`` replay as calls; any other op rebuilds the list at replay."""
        _refuse_in_body(f"list.{op}", lst)
        entry = self._lists.get(id(lst))
        if entry is None:
            entry = self._lists[id(lst)] = Entry("list", lst, None, [])
            self.log.append(entry)
        ops = entry.value
        if op in ("append", "clear") and (not ops or ops[-1][0] != "rebuild"):
            ops.append((op, item))
        else:
            ops[:] = [("rebuild", None)]

    def iterator_state(self, it: VariableTracker, value: Any) -> tuple:
        """``(tracker, remaining items' tracker, items taken, exhausted)`` of the existing
        tuple iterator ``value`` this trace stepped (``(it, None, 0, False)`` before its
        first step; keyed by the object: every tracker of it shares the state)."""
        return self._iterators.get(id(value), (it, None, 0, False))

    def iterator_advance(self, it: VariableTracker, value: Any, rest: VariableTracker, taken: int,
                         exhausted: bool) -> None:
        """The trace took ``taken`` items of the existing iterator ``value`` (tracked by
        ``it``) in all, and its end with ``exhausted``: replayed as one ``advance`` call
        (the last one logged)."""
        _refuse_in_body("next() of an iterator", it)
        self._iterators[id(value)] = (it, rest, taken, exhausted)
        self.log.append(Entry("iter", it, None, (taken, exhausted)))

    def set_mutation(self, s: VariableTracker, op: str, key: Any = None) -> None:
        _refuse_in_body("set mutation", s)
        self.log.append(Entry("set", s, op, key))

    # -- what the code after the graph needs ------------------------------------------------
    def compacted(self) -> list[Entry]:
        """The log with runs of stores to one key collapsed (first position, last value)."""
        out: list[Entry] = []
        open_runs: dict[tuple, Entry] = {}
        for e in self.log:
            if e.kind not in ("dict", "attr", "cell", "iter"):
                out.append(e)
                continue
            k = (id(e.target), e.kind, e.key)
            run = open_runs.get(k)
            deleting = e.value is DELETED or e.value is EMPTY
            if run is not None and not deleting and run.value is not DELETED and run.value is not EMPTY:
                run.value = e.value
                continue
            entry = Entry(e.kind, e.target, e.key, e.value)
            out.append(entry)
            open_runs[k] = entry
        return out

    def values(self) -> list[VariableTracker]:
        """Trackers the replay reads (graph outputs are collected through them)."""
        out = []
        for e in self.log:
            out.append(e.target)
            if e.kind == "list":
                ops = e.value
                out.extend(e.target.items if ops and ops[0][0] == "rebuild" else
                           [item for _, item in ops if item is not None])
            elif isinstance(e.value, VariableTracker):
                out.append(e.value)
        return out

    def codegen(self, cg) -> None:
        """Emit the replay (net stack effect zero); see the module docstring."""
        entries = self.compacted()
        plan = []
        for e in entries:  # phase 1: every read, into temporaries
            target = cg.to_temp(e.target) if _needs_target(e) else None
            if e.kind == "list":
                ops = e.value
                if ops and ops[0][0] == "rebuild":
                    items = [cg.to_temp(item) for item in e.target.items]
                    plan.append((e, target, ("rebuild", items)))
                else:
                    plan.append((e, target, ("ops", [(op, None if item is None else cg.to_temp(item))
                                                      for op, item in ops])))
            elif isinstance(e.value, VariableTracker):
                plan.append((e, target, cg.to_temp(e.value)))
            else:
                plan.append((e, target, e.value))
        cg.populate_pending()
        for e, target, value in plan:  # phase 2: the stores, in program order
            _STORES[e.kind](cg, e, target, value)


def _refuse_in_body(what: str, target: VariableTracker | None = None) -> None:
    """A mutation of an object that existed before the call, inside the body of a
    higher-order operator: refused unless every open body allows side effects (see
    ``variables.base.check_mutable``)."""
    if in_body() and not outer_write_allowed(target):
        raise unsupported(
            "side effect in a higher-order operator's body", f"{what} on an object that existed before the call",
            "The body of torch.cond, while_loop, map, scan or a torch.func transform must not change "
            "Python state: it is traced once but runs any number of times when the graph runs.",
            ["Return the new values from the function instead of storing them in outer objects."])


def _needs_target(e: Entry) -> bool:
    return not (e.kind == "cell" and e.target.local_name is not None) and \
        not (e.kind == "dict" and e.target.store_by_name())


def _store_dict(cg, e: Entry, target, value) -> None:
    if e.target.store_by_name():  # the compiled function's own globals
        if value is DELETED:
            cg.append(create_instruction("DELETE_GLOBAL", argval=e.key))
        else:
            cg.load_fast(value)
            cg.append(create_instruction("STORE_GLOBAL", argval=e.key))
        return
    replay = getattr(e.target, "replay_item_function", None)
    base_fn = replay(value is DELETED) if replay is not None else None
    if base_fn is not None:  # the class's Python __setitem__ already ran in the trace
        _call_store(cg, base_fn, target, e.key, value)
        return
    if value is DELETED:
        cg.load_fast(target)
        cg.emit_key(e.key)
        cg.append(create_instruction("DELETE_SUBSCR"))
        return
    cg.load_fast(value)
    cg.load_fast(target)
    cg.emit_key(e.key)
    cg.append(create_instruction("STORE_SUBSCR"))


def _call_store(cg, fn, target, key, value) -> None:
    """``fn(target, key)`` for a delete (``value`` is DELETED), else ``fn(target, key, value)``."""
    cg.push_null()
    cg.load_const(fn)
    cg.load_fast(target)
    cg.emit_key(key)
    if value is not DELETED:
        cg.load_fast(value)
    cg.call(2 if value is DELETED else 3)
    cg.append_pop_top()


def _store_attr(cg, e: Entry, target, value) -> None:
    if e.target.replay_through_object_setattr():
        _call_store(cg, object.__delattr__ if value is DELETED else object.__setattr__, target, e.key, value)
        return
    if value is DELETED:
        cg.load_fast(target)
        cg.append(create_instruction("DELETE_ATTR", argval=e.key))
        return
    cg.load_fast(value)
    cg.load_fast(target)
    cg.append(create_instruction("STORE_ATTR", argval=e.key))


def _store_cell(cg, e: Entry, target, value) -> None:
    cell = e.target
    if cell.local_name is not None:
        if value is EMPTY:
            cg.append(create_instruction("DELETE_DEREF", argval=cell.local_name))
        else:
            cg.load_fast(value)
            cg.append(create_instruction("STORE_DEREF", argval=cell.local_name))
        return
    if value is EMPTY:
        cg.load_fast(target)
        cg.append(create_instruction("DELETE_ATTR", argval="cell_contents"))
        return
    cg.load_fast(value)
    cg.load_fast(target)
    cg.append(create_instruction("STORE_ATTR", argval="cell_contents"))


def _store_list(cg, e: Entry, target, value) -> None:
    kind, payload = value
    if kind == "rebuild" and e.target.python_type() is collections.deque:
        cg.load_fast(target)
        cg.append_method_call("clear", 0)
        cg.append_pop_top()
        cg.load_fast(target)
        cg.append(create_instruction("LOAD_METHOD", argval="extend"))
        for item in payload:
            cg.load_fast(item)
        cg.build(list, len(payload))
        cg.call(1)
        cg.append_pop_top()
        return
    if kind == "rebuild":
        for item in payload:
            cg.load_fast(item)
        cg.build(list, len(payload))
        cg.load_fast(target)
        cg.load_const(None)
        cg.load_const(None)
        cg.build(slice, 2)
        cg.append(create_instruction("STORE_SUBSCR"))
        return
    for op, item in payload:  # pure append / clear: direct calls, no rebuild (seed 002)
        cg.load_fast(target)
        if item is None:
            cg.append_method_call(op, 0)
        else:
            cg.append(create_instruction("LOAD_METHOD", argval=op))
            cg.load_fast(item)
            cg.call(1)
        cg.append_pop_top()


def _store_set(cg, e: Entry, target, value) -> None:
    cg.load_fast(target)
    if e.key == "clear":
        cg.append_method_call("clear", 0)
    else:
        cg.append(create_instruction("LOAD_METHOD", argval=e.key))
        cg.load_const(value)
        cg.call(1)
    cg.append_pop_top()


def _advance_iterator(cg, e: Entry, target, value) -> None:
    taken, exhausted = value
    cg.push_null()
    cg.load_const(advance)
    cg.load_fast(target)
    cg.load_const(taken)
    cg.load_const(exhausted)
    cg.call(3)
    cg.append_pop_top()


_STORES = {"dict": _store_dict, "attr": _store_attr, "cell": _store_cell, "list": _store_list,
           "set": _store_set, "iter": _advance_iterator}

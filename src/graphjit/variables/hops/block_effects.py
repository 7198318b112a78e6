"""The Python side effects of a repeated block: recorded while its first body is traced,
replayed on every block that reuses the body (``hops/repeated_blocks.py``).

A transformer block with a KV cache writes its own layer of the cache
(``past_key_values.update(k, v, self.layer_idx)``: ``cache.layers[self.layer_idx].keys =
torch.cat(...)``).  The body traced for the first block computes the new tensors; what it
*does* with them is Python: which object it reads and writes depends on the block
(``self.layer_idx``) and on the state of the objects it was given.  This module makes that
Python part a function of the block, so the body is traced once.

Design decisions:

* **Roots.** The objects a block call is given (a ``DynamicCache``, a list, a dict: the
  leaves of its arguments that are not tensors, numbers or constants) are passed to the
  body as they are.  Everything the body reaches from them is *watched*: every read of a
  watched object's state is recorded, in order, as a step from an earlier value (``.__dict__``,
  a key, an item, the length, all items, a slot) and the *summary* of what it gave (a
  constant's value, a tensor's metadata, an object's kind, type and alias number: the
  first-seen order of the objects reached, so that two paths to one object are seen as
  such).  The reads are recorded at the few places where trackers give out their state
  (``DictVariable.lookup``/``realize_items``, a sequence's ``items``/``getitem``/``len``,
  ``slot_get``, ``instance_dict``): a use of the state anywhere else goes through one of them.
* **Parameters.** An int the body reads from its own module (``self.layer_idx``) and uses
  *only* to choose an item of a watched container (``layers[layer_idx]``,
  ``is_updated.get(layer_idx)``) or to compare with a constant (``layer_idx >=
  len(self.layers)``) is a parameter: the step names it (:class:`Param`), not its value,
  and each block uses its own; a comparison's outcome is recorded and must be the same for
  the later block's value.  The value stays unread by the trace (a lazy tracker that
  nothing realized); it is guarded for each block by its own value.  Any other use
  (arithmetic, formatting) reads it as every value is read: its guard then needs the same
  value on every block, so a block with another value is traced on its own.
* **Writes.** Every mutation of an object made outside the body is reported before it
  happens (``base.enter_scope(on_write=...)``): the object must be watched, or an object
  under the block's own module (``self.count = ...``), else the body is refused (the block
  is traced inline).  Writes are recorded as operations (a dict store or delete, a list
  ``append``/``extend``/``clear``/store at an index, a slot store) on a target (an alias
  number, or a path from the block's module) with a value named by what it is for every
  block: a tensor the body computes (made an extra output of the body), an explicit input,
  a value read from a root, a constant, an outer value the same for every block.
* **Replay.** When the body is traced, its writes are undone (the trackers' states and the
  side-effect log put back as they were), and the effects of every block, the first
  included, are the recorded operations applied through the trackers' own methods to that
  block's objects, after the graph node calling the body: so they are logged and replayed
  after the graph, or change objects made in the trace, as the inline trace would have.
* **A later block.** Its roots are walked by the recorded steps (with its own parameter
  values), and every summary must be the same: then the trace of its ``forward`` would
  read the same values and take the same decisions, and the body and the recorded
  operations are its own.  Walking realizes what the trace would have realized (guards of
  objects that existed before the call are added as they would be); guards the first body
  put on those objects by other uses are rebased onto the later block's objects
  (``repeated_blocks.py``).
"""

from __future__ import annotations

import collections
from typing import Any

import torch

from ...exc import ObservedException, unsupported
from ...guards.guard import Guard, GuardKind
from ...diagnostics.describe import describe
from ..base import LazyVariableTracker, VariableTracker, is_new
from ..constant import ConstantVariable
from ..dicts import DELETED, MISSING, DictVariable, key_of
from ..instance_attrs import InstanceDictVariable
from ..nn_module import NNModuleVariable
from ..objects import UserObjectVariable
from ..sequences import ListVariable, TupleVariable
from ..sym_node import SymNodeVariable
from ..tensor import TensorVariable
from .compile_region import _leaf_key
from .paths import path_to, rebase, walk

#: tracker kinds whose state the recorder follows (exact types)
_CONTAINERS = (DictVariable, InstanceDictVariable, ListVariable, TupleVariable)
_SIMPLE_KEYS = (int, str, bool, type(None), float)
_MISSING_READ = ("missing",)
_OWN = ("own",)


class Param:
    """A key or index that is each block's own value (``self.layer_idx``): the ``index``-th
    parameter of the record."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"Param({self.index})"

    def __eq__(self, other) -> bool:
        return type(other) is Param and other.index == self.index

    def __hash__(self) -> int:
        return hash(("Param", self.index))


class _Aliases:
    """Objects reached, numbered in first-seen order."""

    def __init__(self) -> None:
        self.by_id: dict[int, int] = {}
        self.objs: list[VariableTracker] = []

    def __repr__(self) -> str:
        return f"_Aliases({len(self.objs)} objects)"

    def number(self, var: VariableTracker) -> tuple[int, bool]:
        """``(alias number, first time seen)``."""
        n = self.by_id.get(id(var))
        if n is not None:
            return n, False
        n = self.by_id[id(var)] = len(self.objs)
        self.objs.append(var)
        return n, True


class _NotFollowed(Exception):
    """A value the recorder cannot summarize (the body is then not reused)."""


def _followed(var: VariableTracker) -> bool:
    kind = type(var)
    if kind in _CONTAINERS:
        return kind is not DictVariable or var.user_cls in (dict, collections.OrderedDict)
    return kind is UserObjectVariable


def summary_of(var: VariableTracker, aliases: _Aliases, scope_id: int | None, frame_graph) -> tuple[tuple, bool]:
    """What a read gave, as the recorder compares it: ``(summary, first time seen)``.
    ``scope_id``: the first body's scope while it is traced (values it made are its own),
    ``None`` when a later block is walked."""
    if type(var) is LazyVariableTracker:
        var = var.realize()
    if _followed(var):
        if scope_id is not None and is_new(var) and var.mutation_type.scope >= scope_id:
            return _OWN, False
        n, first = aliases.number(var)
        return ("obj", type(var), var.python_type(), n, is_new(var)), first
    if isinstance(var, TensorVariable):
        if var.node.graph is not frame_graph:
            return _OWN, False
        return ("tensor", _leaf_key(var)), False
    if isinstance(var, SymNodeVariable):
        if var.node.graph is not frame_graph:
            return _OWN, False
        return ("sym", str(var.sym)), False
    if type(var) is DictVariable:  # (a defaultdict, a Counter: not followed)
        raise _NotFollowed(describe(var))
    if var.is_python_constant():
        value = var.as_python_constant()
        return ("const", type(value), value), False
    if var.source is not None and var.mutation_type is not None and not is_new(var):
        return ("ext", var.identity()), False
    raise _NotFollowed(describe(var))


def same_summary(a, b) -> bool:
    """Whether two summaries say the same (constants by ``==`` of one type, outer
    objects by identity)."""
    if a is b:
        return True
    if type(a) is not tuple or type(b) is not tuple or len(a) != len(b) or a[0] != b[0]:
        return False
    tag = a[0]
    if tag == "const":
        if a[1] is not b[1]:
            return False
        try:
            return a[2] is b[2] or bool(a[2] == b[2])
        except Exception:  # noqa: BLE001  (a value that does not compare: not the same)
            return False
    if tag == "ext":
        return a[1] is b[1]
    if tag == "items":
        return len(a[1]) == len(b[1]) and all(map(same_summary, a[1], b[1]))
    if tag == "keys":
        return len(a[1]) == len(b[1]) and all(
            ka == kb and type(ka) is type(kb) and same_summary(va, vb) for (ka, va), (kb, vb) in zip(a[1], b[1]))
    if tag == "own":
        return False
    return a == b


# -- the recorder ---------------------------------------------------------------------------

class BlockEffects:
    """Records what the first block's body reads from and writes to the objects outside
    it (see the module docstring); installed as ``OutputGraph.block_watch`` while the body
    is traced."""

    def __init__(self, tx, module_var, roots: list[VariableTracker]) -> None:
        self.tx, self.out = tx, tx.output
        self.root, self.module = module_var.source, module_var.value
        self.aliases = _Aliases()
        self.vals: list[VariableTracker] = []
        self.reads: list[tuple] = []
        self.writes: list[tuple] = []     # (op, target tracker, key ref, value tracker)
        self.params: list[tuple] = []     # (lazy tracker, path from the block, value)
        self.predicates: list[tuple] = []  # (param, comparison, other value, param on the left, outcome)
        self._param_of: dict[int, Param] = {}
        self.param_guards: set[int] = set()
        self.own: set = set()             # (alias number, key ref) the body wrote
        self._dicts_read: set[int] = set()
        self.snapshots: dict[int, tuple] = {}
        self.scope = None
        self._quiet = 0
        self._outer_watch = None
        self._saved_log = _save_log(self.out.side_effects)
        self.root_numbers = []
        for root in roots:
            self.root_numbers.append(self._summary(root)[3])
        self.ops: list[tuple] = []       # the writes, compacted, with their values named
        self.extra: list = []            # body nodes made extra outputs

    def __repr__(self) -> str:
        return f"BlockEffects({len(self.aliases.objs)} objects, {len(self.reads)} reads, {len(self.writes)} writes)"

    # -- lifetime --------------------------------------------------------------------------
    def start(self, scope) -> None:
        self.scope = scope
        self._outer_watch, self.out.block_watch = self.out.block_watch, self

    def stop(self) -> None:
        self.out.block_watch = self._outer_watch
        for var in self.aliases.objs:
            var._watch = None

    def rollback(self) -> None:
        """Undo the body's writes (its effects are replayed per block instead)."""
        for var, state in reversed(list(self.snapshots.values())):
            _restore(var, state)
        _restore_log(self.out.side_effects, self._saved_log)

    # -- values ----------------------------------------------------------------------------
    def _summary(self, var: VariableTracker) -> tuple:
        self._quiet += 1
        try:
            summary, first = summary_of(var, self.aliases, self.scope.scope_id if self.scope else None,
                                        self.out.frame_graph)
        except _NotFollowed as e:
            raise unsupported("repeated block reading a value graphjit cannot follow", str(e),
                              "The block is traced on its own.") from None
        finally:
            self._quiet -= 1
        real = var.realize() if type(var) is LazyVariableTracker else var
        if first:
            real._watch = self
        self.vals.append(real)
        return summary

    def _number(self, var: VariableTracker) -> int:
        n = self.aliases.by_id.get(id(var))
        if n is None:
            raise unsupported("repeated block reading a value graphjit cannot follow", describe(var))
        return n

    def _read(self, var, step: tuple, summary: tuple) -> None:
        self.reads.append((self._number(var), step, summary))

    def _key_ref(self, tx, container, index: VariableTracker, kinds: tuple) -> tuple[Any, Any]:
        """``(key, how the recorder names it)``: a parameter for an int the body read from
        its module and did not use otherwise."""
        path = self._param_candidate(index, kinds)
        if path is not None:
            return index.peek_value(), self._param(index, path)
        key = key_of(index, tx) if isinstance(container, DictVariable) else index.as_python_constant()
        return key, key

    def _param(self, lazy: LazyVariableTracker, path: list) -> Param:
        p = self._param_of.get(id(lazy))
        if p is None:
            p = self._param_of[id(lazy)] = Param(len(self.params))
            value = lazy.peek_value()
            self.params.append((lazy, path, value))
            guard = Guard(lazy.source, GuardKind.CONSTANT_MATCH, value)
            self.param_guards.add(id(guard))
            self.out.add_guards([guard])
        return p

    def _param_candidate(self, var: VariableTracker, kinds: tuple) -> list | None:
        """The path from the block of an int the body read from its module and did not
        use yet (``None``: not one)."""
        if type(var) is LazyVariableTracker and not var.is_realized() and var.source is not None \
                and type(var.peek_value()) in kinds:
            return path_to(var.source, self.root)
        return None

    def param_compare(self, tx, op, left: VariableTracker, right: VariableTracker) -> bool | None:
        """``op(left, right)`` where one side is a parameter and the other a constant: the
        outcome, recorded (``None``: not such a comparison)."""
        for var, other, on_left in ((left, right, True), (right, left, False)):
            path = self._param_candidate(var, (int,))
            if path is None:
                continue
            if type(other) is LazyVariableTracker and self._param_candidate(other, (int,)) is not None:
                return None  # (two of the block's own values: compared as any values)
            if not other.is_python_constant() or type(other.as_python_constant()) not in _SIMPLE_KEYS:
                return None
            value, o = var.peek_value(), other.as_python_constant()
            try:
                outcome = bool(op(value, o) if on_left else op(o, value))
            except Exception:  # noqa: BLE001  (eager's error: raised where any comparison raises it)
                return None
            self.predicates.append((self._param(var, path), op, o, on_left, outcome))
            return outcome
        return None

    # -- reads (called by the trackers) --------------------------------------------------
    def seq_index(self, tx, seq, index: VariableTracker) -> tuple[Any, Any]:
        return self._key_ref(tx, seq, index, (int,))

    def seq_getitem(self, tx, seq, index: VariableTracker) -> VariableTracker:
        idx, ref = self.seq_index(tx, seq, index)
        if isinstance(idx, slice) or self._quiet:
            return seq.item_at(idx)
        try:
            item = seq.item_at(idx)
        except ObservedException:
            self._read(seq, ("item", ref), _MISSING_READ)
            raise
        self._read(seq, ("item", ref), self._summary(item))
        return item

    def seq_len(self, tx, seq) -> int:
        n = len(seq.raw_items())
        if not self._quiet:
            self._read(seq, ("len",), ("const", int, n))
        return n

    def seq_full_read(self, seq) -> None:
        if self._quiet:
            return
        n = self._number(seq)
        self.reads.append((n, ("items",), ("items", tuple(self._summary(item) for item in seq.raw_items()))))

    def dict_key(self, tx, d, index: VariableTracker) -> tuple[Any, Any]:
        return self._key_ref(tx, d, index, (int, str))

    def dict_lookup(self, tx, d, key: Any, guard_absent: bool, ref: Any) -> Any:
        value = d.raw_lookup(tx, key, guard_absent)
        if self._quiet:
            return value
        n = self._number(d)
        if type(ref) is not Param and type(ref) not in _SIMPLE_KEYS:
            raise unsupported("repeated block reading a key graphjit cannot follow", f"key {type(key).__name__}")
        if (n, ref) in self.own:
            return value  # (what the body wrote: its own value)
        self.reads.append((n, ("key", ref, guard_absent), _MISSING_READ if value is MISSING else self._summary(value)))
        return value

    def dict_full_read(self, tx, d) -> None:
        if self._quiet:
            return
        n = self._number(d)
        items = d._items
        if any(type(k) not in _SIMPLE_KEYS for k in items):
            raise unsupported("repeated block reading a key graphjit cannot follow", "a dict's keys")
        self.reads.append((n, ("keys",), ("keys", tuple((k, self._summary(v)) for k, v in items.items()))))

    def object_dict(self, tx, obj) -> None:
        if self._quiet:
            return
        n = self._number(obj)
        if n not in self._dicts_read:
            self._dicts_read.add(n)
            self.reads.append((n, ("dict",), self._summary(obj._dict)))

    def slot_read(self, tx, obj, name: str) -> VariableTracker:
        if self._quiet:
            return obj.raw_slot_get(tx, name)
        n = self._number(obj)
        try:
            value = obj.raw_slot_get(tx, name)
        except ObservedException:
            self.reads.append((n, ("slot", name), _MISSING_READ))
            raise
        if (n, ("slot", name)) not in self.own:
            self.reads.append((n, ("slot", name), self._summary(value)))
        return value

    # -- writes ----------------------------------------------------------------------------
    def _body_local(self, var: VariableTracker) -> bool:
        return is_new(var) and var.mutation_type.scope >= self.scope.scope_id

    def _rooted(self, var: VariableTracker) -> tuple | None:
        """``(path, part)`` of an object under the block's own module that ``var`` is (a
        list or dict: ``"self"``) or the instance ``__dict__`` of (``"dict"``)."""
        if isinstance(var, InstanceDictVariable):
            obj = var.obj
            if type(obj) in (UserObjectVariable, NNModuleVariable) and obj.source is not None:
                path = path_to(obj.source, self.root)
                return None if path is None else (tuple(path), "dict")
            return None
        if type(var) in (ListVariable, DictVariable, UserObjectVariable, NNModuleVariable) and \
                var.source is not None and not is_new(var):
            path = path_to(var.source, self.root)
            return None if path is None else (tuple(path), "self")
        return None

    def check_write(self, var: VariableTracker | None) -> None:
        """The body is about to mutate ``var``, made outside it (``base.enter_scope``)."""
        if var is None:
            self.refuse("a write to an object", None)
        if id(var) in self.snapshots:
            return
        writable = type(var) in (DictVariable, InstanceDictVariable, ListVariable, UserObjectVariable,
                                 NNModuleVariable) and (id(var) in self.aliases.by_id or self._rooted(var) is not None)
        if not writable:
            self.refuse("a write to an object the block was not given", var)
        self.snapshots[id(var)] = (var, _snapshot(var))

    def refuse(self, what: str, var: VariableTracker | None) -> None:
        raise unsupported("repeated block side effect graphjit cannot replay per block",
                          what if var is None else f"{what}: {describe(var)}",
                          "A block's body may change the objects it is given and its own module; "
                          "this block is traced on its own.")

    def _target(self, var: VariableTracker) -> tuple | None:
        if self._body_local(var):
            return None
        n = self.aliases.by_id.get(id(var))
        if n is not None:
            return ("obj", n)
        rooted = self._rooted(var)
        if rooted is None:
            self.refuse("a write to an object the block was not given", var)
        return ("src", *rooted)

    def dict_write(self, tx, d, op: str, ref: Any, value: VariableTracker | None) -> None:
        target = self._target(d)
        if target is None:
            return
        if type(ref) is not Param and type(ref) not in _SIMPLE_KEYS:
            self.refuse("a store under a key graphjit cannot follow", d)
        self.writes.append(("dset" if op == "set" else "ddel", target, ref, value))
        if target[0] == "obj":
            self.own.add((target[1], ref))

    def list_write(self, tx, lst, op: str, item: Any, index: Any) -> None:
        target = self._target(lst)
        if target is None:
            return
        if op == "append":
            self.writes.append(("append", target, None, item))
        elif op == "extend":
            self.writes.append(("extend", target, None, list(item)))
        elif op == "clear":
            self.writes.append(("clear", target, None, None))
        elif op == "__setitem__" and (type(index) is int or type(index) is Param):
            self.writes.append(("lset", target, index, item))
        else:
            self.refuse(f"list.{op}", lst)

    def slot_write(self, tx, obj, name: str, value: Any) -> None:
        target = self._target(obj)
        if target is None:
            return
        self.writes.append(("sdel" if value is DELETED else "sset", target, name, value))
        if target[0] == "obj":
            self.own.add((target[1], ("slot", name)))

    # -- the end of the body -----------------------------------------------------------
    def finish(self, scope, outputs: tuple, explicit_leaves: list[int]) -> list:
        """Name the recorded writes' values for every block; the body nodes they need
        as extra outputs (``outputs``: the body's own, nodes or constants)."""
        if any(path_to(var.source, self.root) is not None for var in self.aliases.objs if var.source is not None):
            self.refuse("an object reached both from the block's arguments and from its module", None)
        self._scope_inputs = {node: explicit_leaves[i] for i, node in enumerate(scope.inputs)}
        self._lifted = {ph: outer for outer, ph in scope.lifted.items()}
        self._outputs = {node: j for j, node in reversed(list(enumerate(outputs))) if isinstance(node, torch.fx.Node)}
        self._n_outputs = len(outputs)
        self._val_index = {}
        for i, v in enumerate(self.vals):
            self._val_index.setdefault(id(v), i)
            if isinstance(v, (TensorVariable, SymNodeVariable)):
                self._val_index.setdefault(("node", v.node), i)
        for op, target, key, value in _compacted(self.writes):
            if op in ("ddel", "sdel", "clear"):
                ref = None
            elif op == "extend":
                ref = [self._value_ref(v) for v in value]
            else:
                ref = self._value_ref(value)
            self.ops.append((op, target, key, ref))
        return self.extra

    def _value_ref(self, var: VariableTracker) -> tuple:
        """How a written value is found for every block."""
        if type(var) is LazyVariableTracker and not var.is_realized():
            path = path_to(var.source, self.root)
            return ("same", var) if path is None else ("src", path)
        var = var.realize()
        if isinstance(var, (TensorVariable, SymNodeVariable)):
            node = var.node
            if node.graph is self.scope.graph:
                if node in self._scope_inputs:
                    return ("input", self._scope_inputs[node])
                if node in self._lifted:
                    node = self._lifted[node]
                else:
                    j = self._outputs.get(node)
                    if j is None:
                        j = self._outputs[node] = self._n_outputs + len(self.extra)
                        self.extra.append(node)
                    return ("out", j)
            i = self._val_index.get(("node", node))
            if i is not None:
                return ("val", i)
            if var.source is not None:
                path = path_to(var.source, self.root)
                return ("same", var) if path is None else ("src", path)
            self.refuse("a store of a value computed before the block", var)
        i = self._val_index.get(id(var))
        if i is not None and _followed(var):
            return ("val", i)
        if type(var) is TupleVariable:
            return ("tuple", [self._value_ref(v) for v in var.raw_items()], var.namedtuple_cls)
        if type(var) is ListVariable and self._body_local(var):
            return ("list", [self._value_ref(v) for v in var.raw_items()])
        if _followed(var) or type(var) in (ListVariable, DictVariable) or isinstance(var, UserObjectVariable):
            if var.source is not None and not is_new(var) and not _followed(var):
                path = path_to(var.source, self.root)
                return ("same", var) if path is None else ("src", path)
            self.refuse("a store of an object made in the block", var)
        if var.is_python_constant():
            return ("const", var)
        if var.source is not None:
            path = path_to(var.source, self.root)
            return ("same", var) if path is None else ("src", path)
        self.refuse("a store of a value graphjit cannot follow", var)
        return None  # (unreachable)

    def record(self) -> "EffectsRecord":
        """What a later block is checked against and replays."""
        watched, first_real = {}, {}
        for n, var in enumerate(self.aliases.objs):
            real = self.out.side_effects.existing_value(var) if var.source is not None else None
            if real is not None:
                watched.setdefault(var.source, n)
                first_real[n] = real[0]
        read_nodes: dict = {}
        for i, v in enumerate(self.vals):
            if isinstance(v, TensorVariable):
                read_nodes.setdefault(v.node, i)
        return EffectsRecord(self.root_numbers, self.reads, self.ops, [(path, value) for _, path, value in self.params],
                             read_nodes, watched, first_real, self.predicates)

    def first_view(self) -> "BlockView":
        """The first block's own objects, values and parameters."""
        return BlockView(list(self.aliases.objs), list(self.vals), [value for _, _, value in self.params])


def _compacted(writes: list[tuple]) -> list[tuple]:
    """Runs of stores to one key of one target collapse into the first store's position
    with the last value (a delete in between keeps both), as the side-effect log does."""
    out: list[list] = []
    open_runs: dict[tuple, list] = {}
    for op, target, key, value in writes:
        if op in ("dset", "sset"):
            k = (target, op, key)
            run = open_runs.get(k)
            if run is not None:
                run[3] = value
                continue
            entry = [op, target, key, value]
            out.append(entry)
            open_runs[k] = entry
            continue
        if op in ("ddel", "sdel"):
            open_runs.pop((target, "dset" if op == "ddel" else "sset", key), None)
        elif op in ("clear", "lset", "append", "extend"):
            pass
        out.append([op, target, key, value])
    return [tuple(e) for e in out]


# -- what a later block is checked against -------------------------------------------------

class BlockView:
    """One block's objects (by alias number), the values its walk reached and its
    parameters' values."""

    def __init__(self, objs: list, vals: list, params: list) -> None:
        self.objs, self.vals, self.params = objs, vals, params

    def __repr__(self) -> str:
        return f"BlockView({len(self.objs)} objects, {len(self.vals)} values, params {self.params})"

    def key(self, ref: Any) -> Any:
        return self.params[ref.index] if type(ref) is Param else ref


class EffectsRecord:
    """What the first block's body read (``reads``), wrote (``ops``), its parameters
    (paths from the block and the first block's values), the outer tensors it read
    (fx node -> index of the value), and the sources of the watched objects that existed
    before the call (source -> alias number, and their real objects by alias number)."""

    def __init__(self, root_numbers: list, reads: list, ops: list, params: list, read_nodes: dict,
                 watched: dict, first_real: dict, predicates: list) -> None:
        #: (parameter, comparison, other value, parameter on the left, outcome)
        self.predicates = predicates
        self.root_numbers, self.reads, self.ops, self.params = root_numbers, reads, ops, params
        #: the first block's real objects (existing ones) by alias number
        self.read_nodes, self.watched, self.first_real = read_nodes, watched, first_real

    def __repr__(self) -> str:
        return f"EffectsRecord({len(self.reads)} reads, {len(self.ops)} writes, {len(self.params)} params)"

    def verify(self, tx, module, roots: list[VariableTracker]) -> BlockView | None:
        """Walk a later block's roots as the first body read its own: its view, or
        ``None`` if some read gives something else (the block is traced on its own)."""
        aliases, vals = _Aliases(), []
        frame_graph = tx.output.frame_graph
        try:
            for root, expected in zip(roots, self.root_numbers, strict=True):
                summary, _ = summary_of(root, aliases, None, frame_graph)
                if summary[0] != "obj" or summary[3] != expected:
                    return None
                vals.append(root.realize())
            params = []
            for path, first in self.params:
                value = walk(path, module)
                if type(value) is not type(first):
                    return None
                params.append(value)
            for param, op, other, on_left, outcome in self.predicates:
                value = params[param.index]
                if bool(op(value, other) if on_left else op(other, value)) != outcome:
                    return None
            view = BlockView(aliases.objs, vals, params)
            for n, step, expected in self.reads:
                if not same_summary(_perform(tx, aliases.objs[n], step, view, aliases, vals, frame_graph), expected):
                    return None
        except (_NotFollowed, ObservedException):
            return None
        return view


def _perform(tx, var, step: tuple, view: BlockView, aliases: _Aliases, vals: list, frame_graph) -> tuple:
    """One recorded read, on a later block's object: its summary."""

    def summary(value):
        s, _ = summary_of(value, aliases, None, frame_graph)
        vals.append(value.realize() if type(value) is LazyVariableTracker else value)
        return s

    kind = step[0]
    if kind == "dict":
        if not isinstance(var, UserObjectVariable) or not var.has_instance_dict():
            return _MISSING_READ
        return summary(var.instance_dict(tx))
    if kind == "key":
        if not isinstance(var, DictVariable):
            return _MISSING_READ
        value = var.lookup(tx, view.key(step[1]), step[2])
        return _MISSING_READ if value is MISSING else summary(value)
    if kind == "keys":
        return ("keys", tuple((k, summary(v)) for k, v in var.realize_items(tx).items()))
    if kind == "item":
        try:
            item = var.item_at(view.key(step[1]))
        except ObservedException:
            return _MISSING_READ
        return summary(item)
    if kind == "len":
        return ("const", int, len(var.raw_items()))
    if kind == "items":
        return ("items", tuple(summary(item) for item in var.raw_items()))
    if kind == "slot":
        try:
            value = var.raw_slot_get(tx, step[1])
        except ObservedException:
            return _MISSING_READ
        return summary(value)
    raise AssertionError(step)


# -- replay ----------------------------------------------------------------------------------

def replay(tx, record: EffectsRecord, view: BlockView, module_var, outputs: list, leaves: list) -> list:
    """Apply the recorded writes to one block's objects (after the node calling the
    body, whose outputs are ``outputs``; ``leaves``: the block call's flat arguments);
    the sources of the objects that existed before the call it wrote to."""
    written = []
    for op, target, key, ref in record.ops:
        obj = _target_of(tx, target, view, module_var)
        k = view.key(key) if key is not None else None
        if op == "dset":
            obj.setitem_key(tx, k, _value_of(tx, ref, view, module_var, outputs, leaves))
        elif op == "ddel":
            obj.delitem_key(tx, k)
        elif op == "append":
            obj.call_method(tx, "append", [_value_of(tx, ref, view, module_var, outputs, leaves)], {})
        elif op == "extend":
            items = [_value_of(tx, r, view, module_var, outputs, leaves) for r in ref]
            obj.call_method(tx, "extend", [ListVariable(items)], {})
        elif op == "clear":
            obj.call_method(tx, "clear", [], {})
        elif op == "lset":
            obj.setitem(tx, ConstantVariable(k), _value_of(tx, ref, view, module_var, outputs, leaves))
        elif op == "sset":
            obj.slot_set(tx, k, _value_of(tx, ref, view, module_var, outputs, leaves))
        elif op == "sdel":
            obj.slot_delete(tx, k)
        else:
            raise AssertionError(op)
        written.append(obj)
    return written


def _target_of(tx, target: tuple, view: BlockView, module_var) -> VariableTracker:
    if target[0] == "obj":
        return view.objs[target[1]]
    _, path, part = target
    var = VariableTracker.build(tx, walk(path, module_var.value), rebase(path, module_var.source), realize=True)
    return var.instance_dict(tx) if part == "dict" else var


def _value_of(tx, ref: tuple, view: BlockView, module_var, outputs: list, leaves: list) -> VariableTracker:
    kind = ref[0]
    if kind == "out":
        return outputs[ref[1]]
    if kind == "input":
        return leaves[ref[1]]
    if kind == "val":
        return view.vals[ref[1]]
    if kind in ("const", "same"):
        return ref[1]
    if kind == "src":
        return VariableTracker.build(tx, walk(ref[1], module_var.value), rebase(ref[1], module_var.source))
    if kind == "tuple":
        return TupleVariable([_value_of(tx, r, view, module_var, outputs, leaves) for r in ref[1]],
                             namedtuple_cls=ref[2])
    if kind == "list":
        return ListVariable([_value_of(tx, r, view, module_var, outputs, leaves) for r in ref[1]])
    raise AssertionError(ref)


# -- undoing the first body's writes -------------------------------------------------------

def _snapshot(var) -> tuple:
    if isinstance(var, DictVariable):
        return ("dict", None if var._items is None else dict(var._items), dict(var._overlay), list(var._ops),
                set(var.written))
    if isinstance(var, ListVariable):
        return ("list", list(var._items), var._lazy, list(var._appended), var._cleared)
    return ("obj", dict(var.slot_values), var._dict, var.cls)


def _restore(var, state: tuple) -> None:
    kind = state[0]
    if kind == "dict":
        _, var._items, var._overlay, var._ops, var.written = state
    elif kind == "list":
        _, var._items, var._lazy, var._appended, var._cleared = state
    else:
        _, var.slot_values, var._dict, var.cls = state


def _save_log(side_effects) -> tuple:
    return (len(side_effects.log), dict(side_effects._lists),
            {id(e): (e, list(e.value)) for e in side_effects._lists.values()},
            {cls: dict(d) for cls, d in side_effects.pending_class_attrs.items()},
            dict(side_effects.pending_tensor_grads), dict(side_effects._iterators))


def _restore_log(side_effects, saved: tuple) -> None:
    n, lists, ops, classes, grads, iterators = saved
    del side_effects.log[n:]
    side_effects._lists.clear()
    side_effects._lists.update(lists)
    for entry, values in ops.values():
        entry.value[:] = values
    side_effects.pending_class_attrs.clear()
    side_effects.pending_class_attrs.update(classes)
    side_effects.pending_tensor_grads.clear()
    side_effects.pending_tensor_grads.update(grads)
    side_effects._iterators.clear()
    side_effects._iterators.update(iterators)


__all__ = ["BlockEffects", "BlockView", "EffectsRecord", "Param", "replay", "same_summary", "summary_of"]

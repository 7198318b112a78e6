"""Repeated blocks traced once (``config.reuse_repeated_blocks``): the blocks of a
``ModuleList``/``Sequential`` (a module read as a container element) are traced once into
a subgraph, and every later block of the same kind calls that subgraph through
``invoke_subgraph`` (``compile_region.invoke_region``) instead of being traced again.

Contract:

* The first block called traces its ``forward`` into a body (``body.trace_body``) while
  the trace records every guard requested and every source read (``OutputGraph.
  recording_reads``): what the trace of that block depended on.  A block that cannot be a
  body (a break, outputs that are not tensors and constants, a Python side effect that
  cannot be replayed per block) is inlined as before, and so are later blocks of its kind.
* Objects the block is given (a KV cache, a list, a dict: the arguments that are not
  tensors or constants) are passed to the body as they are; what the body reads from them
  and writes to them, and to its own module, is recorded and replayed on every block's own
  objects (``hops/block_effects.py``): a block that writes its layer of a cache
  (``self.layer_idx``) reuses the first block's body.
* A later block reuses the body only if the trace would be the same for it: every guard
  on a value reached from the first block (its source rooted at that block's source) is
  re-evaluated on the later block's real objects with the source rebased, and must give
  the same answer: the same constants, types, dict keys, hooks, functions; submodules and
  tensors of the same type (tensors of the same metadata: the body was traced on the
  first block's).  The rebased guards join the entry's guards (with the later block's
  objects where they are identities), so a change to any block between calls fails the
  guard and retraces, exactly as if every block had been traced.
* The outer values the body lifted are mapped to the later block's: a parameter or
  buffer (or any tensor) read from the first block is the same attribute of the later
  one; a value not reached from the block (a global, a frame value) is the same value.
* Reuse needs the real objects to be the traced ones: no mutation of an object reached
  from the block may be pending in the trace, and nothing may have been mutated since the
  first block was traced but by the replayed effects of repeated blocks, which never
  write an object the first body read through another path (otherwise the block is
  traced).
* A block that differs (a hook, another config attribute, a patched ``forward``, other
  argument constants or metadata) is traced on its own (inlined), and so is a block inside
  an activation-checkpointed call or one that checkpoints itself (its ops must carry the
  checkpoint's tags in the calling graph).
* A block whose container holds no other module of its class is traced inline: no body
  is made that nothing could reuse (each body is a partition of its own for AOTAutograd).
"""

from __future__ import annotations

import collections
import dataclasses
import re

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from ... import config
from ...exc import ObservedException, Unsupported
from ...guards.guard import Guard, GuardKind
from ...sources import AttrSource, ChainedSource, GetItemSource, Source
from ..base import VariableTracker, in_body, is_new
from ..constant import ConstantVariable
from ..dicts import DictVariable
from ..nn_module import FORWARD_CALL_HOOKS, has_hooks
from ..objects import UserObjectVariable
from ..sequences import ListVariable, TupleVariable
from ..sym_node import SymNodeVariable
from ..tensor import TensorVariable
from .block_effects import BlockEffects, EffectsRecord, replay
from .body import capture_failed, input_for, trace_body
from .compile_region import _leaf_key, _sizes, invoke_region, run_region_body
from .paths import MISSING as _MISSING, path_to as _path, rebase as _rebase, walk as _walk
from .pytree import LEAF, Spec, tree_unflatten

_FAILED = object()

#: how the ``invoke_region`` identifier of a repeated block's body starts (a
#: ``nested_compile_region``'s is ``subgraph_N``): see :func:`is_block_call`
BLOCK_ID_PREFIX = "block_"


def is_block_call(node: torch.fx.Node) -> bool:
    """A graph node that calls a repeated block's body (a call torch.compile, which traces
    every block inline, would not have: the DDP split inlines it again)."""
    return node.op == "call_function" and node.target is invoke_region and len(node.args) > 1 \
        and isinstance(node.args[1], str) and node.args[1].startswith(BLOCK_ID_PREFIX)


def is_compiled_block_call(node: torch.fx.Node) -> bool:
    """A node of an AOTAutograd forward or backward graph that calls the forward or
    backward of a repeated block's body: ``invoke_subgraph`` with an identifier derived
    from the block's (``fw_block_N``, ``bw_block_N_K``; ``partitioned_`` before them once
    the partitioner has split the body)."""
    if node.op != "call_function" or node.target is not torch.ops.higher_order.invoke_subgraph \
            or len(node.args) < 2 or not isinstance(node.args[1], str):
        return False
    return _COMPILED_BLOCK_ID.fullmatch(node.args[1]) is not None


_COMPILED_BLOCK_ID = re.compile(rf"(partitioned_)?[fb]w_{BLOCK_ID_PREFIX}\d+(_\d+)*")


@dataclasses.dataclass
class BlockRecord:
    """The first block of a kind: its body and what its trace depended on."""

    module: torch.nn.Module
    root: Source
    body: object  # TracedBody
    attr: torch.fx.Node
    identifier: str
    guards: list      # (guard, path of its source, path of its other source)
    lifted: list      # (outer node, path | None, how it was read: "get_attr" / "input" / "val" / None)
    effects: EffectsRecord  # what it read from and wrote to the objects it was given
    #: guards on objects it was given that existed before the call: (guard, alias number
    #: of the object under whose source it is, path from there, the same for ``other``)
    arg_guards: list
    #: ``OutputGraph.block_epoch`` when it was traced (a later mutation but the replayed
    #: effects of blocks bumps it: the objects may differ from what the first body read)
    epoch: int
    #: every prefix of the sources its guards read outside the block and its arguments
    #: (a replayed write to one of them makes the record stale)
    prefixes: frozenset = frozenset()
    stale: bool = False
    #: the body's outputs' metadata by its operands' (a later block on operands like an
    #: earlier one's computes outputs like them: no fake run of the body again)
    outputs: dict = dataclasses.field(default_factory=dict)
    #: the first block's values at its guards' paths (see :func:`_walk`; nothing it
    #: reaches changes while later blocks reuse the body)
    first_values: dict = dataclasses.field(default_factory=dict)


def _is_block(source: Source) -> bool:
    """A module read as an element of a container (``blocks[3]``: its key a digit)."""
    return isinstance(source, GetItemSource) and isinstance(source.index, str) and source.index.isdigit() \
        and isinstance(source.base, AttrSource) and source.base.attr == "_modules"


def _has_sibling(out, source: Source, module) -> bool:
    """Whether the container of the block at ``source`` holds another module of its class
    (a body is only worth tracing when something may reuse it; ``True`` when the container
    is not known)."""
    parent = out.source_cache.get(source.base.base)
    container = getattr(parent, "value", None)
    children = getattr(container, "_modules", None)
    if not isinstance(children, dict):
        return True
    return any(child is not module and type(child) is type(module) for child in children.values())


def _same_tensor_kind(a, b) -> bool:
    return type(a) is type(b) and a.dtype == b.dtype and a.device == b.device and a.shape == b.shape \
        and a.stride() == b.stride() and a.requires_grad == b.requires_grad


def _identity_like(value) -> bool:
    """Values a guard pins by identity that another block has its own of."""
    return isinstance(value, (torch.nn.Module, torch.Tensor))


def _rebased_guard(guard: Guard, path, other_path, first, first_values: dict, obj, values: dict,
                   root: Source, memo: dict, tag: tuple | None) -> Guard | None:
    """``guard`` (its source at ``path`` from ``first``, the first block or one of its
    objects) for the later block's ``obj`` at ``root`` (``None``: it would not hold the same
    way); ``values``: the later block's values walked so far (see :func:`_walk`); ``tag``:
    the rebased guard's ``block``."""
    if path is None:
        return guard
    v0, vi = _walk(path, first, first_values), _walk(path, obj, values)
    if v0 is _MISSING or vi is _MISSING:
        return None
    source = _rebase(path, root, memo)
    other = guard.other
    kind, value = guard.kind, guard.value
    if kind is GuardKind.ID_MATCH:
        if vi is v0:
            return Guard(source, kind, value, None, tag)
        if not _identity_like(v0):
            return None
        if isinstance(v0, torch.Tensor) and not _same_tensor_kind(v0, vi) or type(vi) is not type(v0):
            return None
        return Guard(source, kind, vi, None, tag)
    if kind is GuardKind.TENSOR_MATCH:
        return Guard(source, kind, vi, None, tag) if isinstance(vi, torch.Tensor) and _same_tensor_kind(v0, vi) else None
    if kind is GuardKind.TYPE_MATCH:
        return Guard(source, kind, value, None, tag) if type(vi) is value else None
    if kind is GuardKind.CONSTANT_MATCH:
        return Guard(source, kind, value, None, tag) if type(vi) is type(v0) and vi == v0 else None
    if kind is GuardKind.LENGTH_CHECK:
        return Guard(source, kind, value, None, tag) if type(vi) is type(v0) and len(vi) == len(v0) else None
    if kind is GuardKind.DICT_KEYS:
        return Guard(source, kind, vi, None, tag) if type(vi) is type(v0) and list(vi) == list(v0) else None
    if kind is GuardKind.DICT_CONTAINS:
        key, present = value
        return Guard(source, kind, value, None, tag) if (key in vi) == present else None
    if kind is GuardKind.HASATTR:
        name, present = value
        return Guard(source, kind, value, None, tag) if hasattr(vi, name) == present else None
    if kind is GuardKind.EMPTY:
        return Guard(source, kind, value, None, tag) if not vi and not v0 else None
    if kind is GuardKind.MODULE_HOOKS:
        return Guard(source, kind, value, None, tag) if isinstance(vi, torch.nn.Module) and not has_hooks(vi) else None
    if kind is GuardKind.OBJECT_ALIASING:
        if other_path is not None:
            oi = _walk(other_path, obj, values)
            return Guard(source, kind, value, _rebase(other_path, root, memo), tag) \
                if oi is not _MISSING and oi is vi else None
        return Guard(source, kind, value, other) if vi is v0 else None  # the same outer object
    return None


def _pending_under(out, root: Source) -> bool:
    """Is a mutation of an object reached from ``root`` pending in the trace (its real
    objects then differ from what a trace of it would read)?"""
    for entry in out.side_effects.log:
        target = getattr(entry.target, "obj", None) or entry.target
        for tracker in (entry.target, target):
            if tracker.source is not None and _path(tracker.source, root) is not None:
                return True
    return False


def _is_root(leaf: VariableTracker) -> bool:
    """An argument passed to the body as it is (its effects recorded): a plain object, a
    list or a dict."""
    kind = type(leaf)
    return kind is UserObjectVariable or kind is ListVariable or \
        (kind is DictVariable and leaf.python_type() in (dict, collections.OrderedDict))


def _flatten(tx, args: list, kwargs: dict) -> tuple[list[VariableTracker], Spec]:
    """The call's leaves and structure (``(args, kwargs)``): tuples and ``None`` are
    structure; a list or dict is a leaf (the block may mutate it: it is passed as it is)."""
    leaves: list[VariableTracker] = []

    def visit(v: VariableTracker) -> Spec:
        v = v.realize()
        if isinstance(v, ConstantVariable) and v.value is None:
            return Spec("none")
        if type(v) is TupleVariable:
            return Spec("tuple", v.python_type(), (), tuple(visit(i) for i in v.raw_items()))
        leaves.append(v)
        return LEAF

    pos = Spec("tuple", tuple, (), tuple(visit(a) for a in args))
    kw = Spec("dict", dict, tuple(kwargs), tuple(visit(v) for v in kwargs.values()))
    return leaves, Spec("tuple", tuple, (), (pos, kw))


def _leaf_inputs(tx, leaves):
    return [leaf if _is_root(leaf) else input_for(leaf, tx=tx) for leaf in leaves]


def _key(module_var, forward, spec, leaves, tx):
    keys, roots = [], {}
    for leaf in leaves:
        if _is_root(leaf):
            first = roots.setdefault(id(leaf), len(roots))
            keys.append(("root", type(leaf), leaf.python_type(), is_new(leaf), first))
        else:
            keys.append(_leaf_key(leaf))
    if any(k is None for k in keys):
        return None
    fn = getattr(forward.realize(), "fn_var", None)
    fn_value = fn.as_python_constant() if fn is not None and fn.is_python_constant() else None
    if fn_value is None:
        return None
    return type(module_var.value), fn_value, spec, tuple(keys)


def _note_foreign(out) -> None:
    """Count a mutation logged since the last replayed block effects (``block_epoch``)."""
    mark = out.side_effects.mark()
    if mark != out.block_mark:
        out.block_epoch += 1
        out.block_mark = mark


def call_block(tx, module_var, forward, args: list, kwargs: dict) -> VariableTracker | None:
    """The call of a repeated block's ``forward`` through its traced body, or ``None``
    (trace it as usual).  See the module docstring."""
    out = tx.output
    source = module_var.source
    if not config.reuse_repeated_blocks or in_body() or source is None or not _is_block(source) \
            or out.checkpointing or has_hooks(module_var.value) or _pending_under(out, source):
        return None
    leaves, spec = _flatten(tx, args, kwargs)
    key = _key(module_var, forward, spec, leaves, tx)
    if key is None:
        return None
    _note_foreign(out)
    record = out.block_records.get(key)
    if record is _FAILED:
        return None
    roots = [leaf for leaf in leaves if _is_root(leaf)]
    if record is None:
        if not _has_sibling(out, source, module_var.value):
            return None  # nothing else in its container could reuse a body
        traced = _trace_first(tx, module_var, forward, leaves, spec, key)
        if traced is None:
            return None
        record, view = traced
        lifted = [node for node, _, _ in record.lifted]
    else:
        if record.stale or record.epoch != out.block_epoch:  # something changed since: trace it
            return None
        view = record.effects.verify(tx, module_var.value, roots)
        if view is None:
            return None
        lifted = _map_to(tx, record, module_var, view)
        if lifted is None:
            return None
    explicit = [leaf.node for leaf in leaves if isinstance(leaf, (TensorVariable, SymNodeVariable))]
    node_args = (record.attr, record.identifier, *explicit, *lifted)
    example = _fake_outputs(out, record, node_args)
    result = out.record(tx, invoke_region, node_args, example)
    items = list(result.items) if isinstance(result, (TupleVariable, ListVariable)) else [result]
    if record.effects.ops:
        written = replay(tx, record.effects, view, module_var, items, leaves)
        _note_written(out, written)
    out.block_mark = out.side_effects.mark()
    return tree_unflatten(record.body.out_spec, items[:len(items) - record.body.n_extra])


def _note_written(out, written: list) -> None:
    """Remember the objects that existed before the call a replayed block effect wrote
    (``OutputGraph.block_written``: a later block that reads one of them through its module
    is traced, see :func:`_map_to`); records whose guards read one of them through another
    path are stale (their first body read it as it was)."""
    sources = set()
    for var in written:
        obj = getattr(var, "obj", None)
        for tracker in (var, obj):
            if tracker is None:
                continue
            real = out.side_effects.existing_value(tracker)
            if real is not None:
                out.block_written[id(real[0])] = real[0]
            if tracker.source is not None:
                sources.add(tracker.source)
    if not sources:
        return
    for record in out.block_records.values():
        if isinstance(record, BlockRecord) and not record.stale and not sources.isdisjoint(record.prefixes):
            record.stale = True


def _fake_outputs(out, record: BlockRecord, node_args: tuple) -> tuple:
    """The fake outputs of the body's call on ``node_args``: its fake run, or, when an
    earlier call's operands had the same metadata (dtypes, sizes and strides by their
    expressions, ``requires_grad``) under the same grad and inference mode, fresh fake
    tensors like that call's outputs (the fake run of a body is most of a reused block's
    trace cost).  Not for outputs with unbacked sizes (new symbols on every run) or under
    autocast."""
    key = _operands_key(out, node_args[2:])
    known = record.outputs.get(key) if key is not None else None
    if known is not None:
        with out.fake_mode, torch.set_grad_enabled(out.grad_enabled), out.inference_ctx():
            return tuple(torch.empty_strided(size, stride, dtype=dtype, device=device).requires_grad_(grad)
                         .clone(memory_format=torch.preserve_format) if grad else
                         torch.empty_strided(size, stride, dtype=dtype, device=device)
                         for size, stride, dtype, device, grad in known)
    try:
        example = out.run_fake(run_region_body, node_args)
    except ObservedException as e:
        raise capture_failed("repeated block", e.exc) from None
    if key is not None and all(isinstance(t, torch.Tensor) and type(t) is FakeTensor for t in example) \
            and not free_unbacked_symbols(example):
        record.outputs[key] = [(t.shape, t.stride(), t.dtype, t.device, t.requires_grad) for t in example]
    return example


def _operands_key(out, nodes) -> tuple | None:
    if torch._C._is_any_autocast_enabled():
        return None
    key = [out.grad_enabled, out.inference_mode]
    for node in nodes:
        value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else node
        if isinstance(value, torch.Tensor):
            if type(value) is not FakeTensor:
                return None
            key.append((value.dtype, _sizes(value.shape), _sizes(value.stride()), value.storage_offset(),
                        value.requires_grad, value.device))
        elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            key.append(("sym", str(value)))
        else:
            return None
    return tuple(key)


def _trace_first(tx, module_var, forward, leaves, spec, key) -> tuple[BlockRecord, object] | None:
    out = tx.output
    root = module_var.source
    effects = BlockEffects(tx, module_var, [leaf for leaf in leaves if _is_root(leaf)])
    try:
        with out.recording_reads() as reads:
            body = trace_body(tx, "block", forward, _leaf_inputs(tx, leaves), spec, with_kwargs=True,
                              effects=effects)
    except Unsupported:
        out.block_records[key] = _FAILED
        return None
    finally:
        effects.rollback()  # (its effects are replayed, on every block alike)
    if any(not isinstance(leaf, (TensorVariable, SymNodeVariable)) and not leaf.is_python_constant()
           for leaf in body.out_leaves) or any("ac_graph_id" in n.meta for n in body.gm.graph.nodes):
        # (a block that checkpoints itself: its tagged ops belong in the calling graph)
        out.block_records[key] = _FAILED
        return None
    record = effects.record()
    sources = {r for r in reads if isinstance(r, Source)}
    guards = {id(g): g for g in reads if isinstance(g, Guard) and id(g) not in effects.param_guards}
    for g in out.guards.values():  # guards made before the block on what it read
        if (g.source in sources or g.other in sources) and id(g) not in effects.param_guards:
            guards.setdefault(id(g), g)
    recorded, arg_guards, outside = [], [], set()
    for g in guards.values():
        if g.kind is GuardKind.NO_ALIASING and any(_path(s, root) is not None for s in g.value) or \
                g.kind is GuardKind.WRITTEN_APART and any(_path(s, root) is not None for s in (*g.value[0], *g.value[1])):
            out.block_records[key] = _FAILED  # (distinctness of the block's own tensors: rare)
            return None
        path, other_path = _path(g.source, root), _path(g.other, root)
        if path is None and other_path is None and record.watched:
            under = _under_watched(g.source, record.watched)
            if under is not None:
                other = _under_watched(g.other, record.watched) if g.other is not None else None
                if other is not None and other[0] != under[0]:
                    out.block_records[key] = _FAILED  # (aliasing between two objects it was given: rare)
                    return None
                arg_guards.append((g, under[0], under[1], None if other is None else other[1]))
                continue
        if path is None and other_path is None:
            for s in (g.source, g.other):
                while s is not None:
                    outside.add(s)
                    s = s.base if isinstance(s, ChainedSource) else None
        recorded.append((g, path, other_path))
    lifted = []
    for node in body.lifted:
        read = record.read_nodes.get(node)
        if read is not None:
            lifted.append((node, read, "val"))
            continue
        origin = node.meta.get("origin") if node.op == "get_attr" else node.meta.get("source") \
            if node.op == "placeholder" else None
        path = _path(origin, root) if origin is not None else None
        lifted.append((node, path, node.op if path is not None else None))
    attr = out.install_body(body.gm)
    block = BlockRecord(module_var.value, root, body, attr, f"{BLOCK_ID_PREFIX}{out.next_region_id()}", recorded,
                        lifted, record, arg_guards, out.block_epoch, frozenset(outside))
    out.block_records[key] = block
    return block, effects.first_view()


def _under_watched(source: Source | None, watched: dict) -> tuple[int, list] | None:
    """``(alias number, path)`` of the longest source in ``watched`` that ``source`` is
    under (an object a block was given that existed before the call)."""
    steps = []
    while source is not None:
        n = watched.get(source)
        if n is not None:
            return n, steps[::-1]
        if not isinstance(source, ChainedSource):
            return None
        steps.append(source)
        source = source.base
    return None


def _map_to(tx, record: BlockRecord, module_var, view) -> list | None:
    """The lifted values for a later block, after its guards were re-evaluated (``None``:
    they differ, trace it)."""
    out = tx.output
    module, root = module_var.value, module_var.source
    new_guards, memo, values = [], {}, {}
    for index, (guard, path, other_path) in enumerate(record.guards):
        if path is None and other_path is None:
            continue  # not reached from the block: holds for every block alike
        # (each rebased guard tagged: the first block's guard ``index`` on this block)
        rebased = _rebased_guard(guard, path, other_path, record.module, record.first_values, module, values,
                                 root, memo, (record, index, root))
        if rebased is None:
            return None
        new_guards.append(rebased)
    if out.block_written and (id(module) in out.block_written or any(
            id(v) in out.block_written for v in values.values() if v is not _MISSING)):
        return None  # (it reads an object an earlier block's replayed effects changed: as it is now)
    if record.arg_guards and not _rebase_arg_guards(out, record, view, new_guards):
        return None
    for (path, _), value in zip(record.effects.params, view.params, strict=True):
        new_guards.append(Guard(_rebase(path, root, memo), GuardKind.CONSTANT_MATCH, value))
    lifted = []
    for node, path, how in record.lifted:
        if how == "val":
            lifted.append(view.vals[path].node)
            continue
        if path is None:
            lifted.append(node)
            continue
        value = _walk(path, module, values)
        if not isinstance(value, torch.Tensor):
            return None
        source = _rebase(path, root, memo)
        if how == "get_attr":
            lifted.append(out.get_attr_tensor(value, source.display(), None, origin=source).node)
        else:
            lifted.append(VariableTracker.build(tx, value, source, realize=True).node)
    out.add_guards(new_guards)
    return lifted


def _rebase_arg_guards(out, record: BlockRecord, view, new_guards: list) -> bool:
    """The first body's guards on objects it was given (that existed before the call),
    rebased onto the later block's objects (walked: ``view``)."""
    side_effects = out.side_effects
    firsts, memos = {}, {}
    for guard, n, path, other_path in record.arg_guards:
        obj = view.objs[n]
        real = side_effects.existing_value(obj)
        if obj.source is None or real is None:
            return False
        if n not in firsts:
            firsts[n] = (record.effects.first_real[n], {}, {}, {})
        first, first_values, values, memo = firsts[n]
        rebased = _rebased_guard(guard, path, other_path, first, first_values, real[0], values, obj.source,
                                 memo, None)
        if rebased is None:
            return False
        new_guards.append(rebased)
    return True


FORWARD_CALL_HOOKS.append(call_block)

__all__ = ["BLOCK_ID_PREFIX", "call_block", "is_block_call", "is_compiled_block_call", "BlockRecord"]

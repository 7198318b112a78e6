"""Repeated blocks traced once (``config.reuse_repeated_blocks``): the blocks of a
``ModuleList``/``Sequential`` (a module read as a container element) are traced once into
a subgraph, and every later block of the same kind calls that subgraph through
``invoke_subgraph`` (``compile_region.invoke_region``) instead of being traced again.

Contract:

* The first block called traces its ``forward`` into a body (``body.trace_body``) while
  the trace records every guard requested and every source read (``OutputGraph.
  recording_reads``): what the trace of that block depended on.  A block that cannot be a
  body (Python side effects, a break, outputs that are not tensors and constants) is
  inlined as before, and so are later blocks of its kind.
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
  first block was traced (otherwise the block is traced).
* A block that differs (a hook, another config attribute, a patched ``forward``, other
  argument constants or metadata) is traced on its own (inlined), and so is a block inside
  an activation-checkpointed call or one that checkpoints itself (its ops must carry the
  checkpoint's tags in the calling graph).
* A block whose container holds no other module of its class is traced inline: no body
  is made that nothing could reuse (each body is a partition of its own for AOTAutograd).
"""

from __future__ import annotations

import dataclasses
import re

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from ... import config
from ...exc import ObservedException, Unsupported
from ...guards.guard import Guard, GuardKind
from ...sources import AttrSource, ChainedSource, GenericAttrSource, GetItemSource, ObjectKey, Source, TypeSource
from ..base import VariableTracker, in_body
from ..dicts import DictVariable
from ..nn_module import FORWARD_CALL_HOOKS, has_hooks
from ..sequences import ListVariable, TupleVariable
from ..sym_node import SymNodeVariable
from ..tensor import TensorVariable
from .body import capture_failed, input_for, trace_body
from .compile_region import _leaf_key, _sizes, invoke_region, run_region_body
from .pytree import tree_flatten, tree_unflatten

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
    lifted: list      # (outer node, path | None, how it was read: "get_attr" / "input" / None)
    mark: tuple       # the side-effect log's mark after it was traced
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


def _path(source: Source | None, root: Source):
    """The steps from ``root`` to ``source`` (``None`` if ``source`` is not under it)."""
    steps = []
    while source is not None and source != root:
        if not isinstance(source, ChainedSource):
            return None
        steps.append(source)
        source = source.base
    if source is None:
        return None
    return steps[::-1]


def _rebase(steps: list, root: Source, memo: dict | None = None) -> Source:
    """The source at ``steps`` from ``root`` (``memo``: rebased steps by identity, so the
    chains of many guards share their common prefixes)."""
    start = 0
    for i in range(len(steps) - 1, -1, -1) if memo else ():  # the longest rebased prefix
        known = memo.get(id(steps[i]))
        if known is not None:
            root, start = known, i + 1
            break
    for step in steps[start:]:
        root = step.with_base(root)
        if memo is not None:
            memo[id(step)] = root
    return root


_MISSING = object()


def _walk(steps: list, obj, memo: dict | None = None):
    """The real value at ``steps`` from ``obj`` (``_MISSING`` where a step fails);
    ``memo``: values by the identity of their last step, for walks from the same ``obj``
    (the paths of a block's guards share their prefixes)."""
    for i in range(len(steps) - 1, -1, -1) if memo else ():  # the longest walked prefix
        known = memo.get(id(steps[i]), memo)
        if known is not memo:
            if known is _MISSING:
                return _MISSING
            obj, steps = known, steps[i + 1:]
            break
    for step in steps:
        try:
            if isinstance(step, AttrSource):
                obj = getattr(obj, step.attr)
            elif isinstance(step, GenericAttrSource):
                obj = object.__getattribute__(obj, step.attr)
            elif isinstance(step, GetItemSource):
                obj = obj[step.index.obj if isinstance(step.index, ObjectKey) else step.index]
            elif isinstance(step, TypeSource):
                obj = type(obj)
            else:
                obj = _MISSING
        except Exception:  # noqa: BLE001  (the later block lacks it: not the same trace)
            obj = _MISSING
        if memo is not None:
            memo[id(step)] = obj
        if obj is _MISSING:
            return _MISSING
    return obj


def _same_tensor_kind(a, b) -> bool:
    return type(a) is type(b) and a.dtype == b.dtype and a.device == b.device and a.shape == b.shape \
        and a.stride() == b.stride() and a.requires_grad == b.requires_grad


def _identity_like(value) -> bool:
    """Values a guard pins by identity that another block has its own of."""
    return isinstance(value, (torch.nn.Module, torch.Tensor))


def _rebased_guard(guard: Guard, path, other_path, rec: BlockRecord, module, root: Source,
                   memo: dict, values: dict, tag: tuple) -> Guard | None:
    """``guard`` for the later block (``None``: it would not hold the same way);
    ``values``: the later block's values walked so far (see :func:`_walk`); ``tag``: the
    rebased guard's ``block``."""
    if path is None:
        return guard
    v0, vi = _walk(path, rec.module, rec.first_values), _walk(path, module, values)
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
            oi = _walk(other_path, module, values)
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


def _leaf_inputs(tx, leaves):
    return [input_for(leaf, tx=tx) for leaf in leaves]


def _key(module_var, forward, spec, leaves, tx):
    keys = tuple(_leaf_key(leaf) for leaf in leaves)
    if any(k is None for k in keys):
        return None
    fn = getattr(forward.realize(), "fn_var", None)
    fn_value = fn.as_python_constant() if fn is not None and fn.is_python_constant() else None
    if fn_value is None:
        return None
    return type(module_var.value), fn_value, spec, keys


def call_block(tx, module_var, forward, args: list, kwargs: dict) -> VariableTracker | None:
    """The call of a repeated block's ``forward`` through its traced body, or ``None``
    (trace it as usual).  See the module docstring."""
    out = tx.output
    source = module_var.source
    if not config.reuse_repeated_blocks or in_body() or source is None or not _is_block(source) \
            or out.checkpointing or has_hooks(module_var.value) or _pending_under(out, source):
        return None
    leaves, spec = tree_flatten(tx, TupleVariable([TupleVariable(list(args)), DictVariable(dict(kwargs))]))
    key = _key(module_var, forward, spec, leaves, tx)
    if key is None:
        return None
    record = out.block_records.get(key)
    if record is _FAILED:
        return None
    if record is None:
        if not _has_sibling(out, source, module_var.value):
            return None  # nothing else in its container could reuse a body
        record = _trace_first(tx, module_var, forward, leaves, spec, key)
        if record is None:
            return None
        lifted = [node for node, _, _ in record.lifted]
    else:
        if out.side_effects.mark() != record.mark:  # something changed since: trace it
            return None
        lifted = _map_to(tx, record, module_var)
        if lifted is None:
            return None
    explicit = [leaf.node for leaf in leaves if isinstance(leaf, (TensorVariable, SymNodeVariable))]
    node_args = (record.attr, record.identifier, *explicit, *lifted)
    example = _fake_outputs(out, record, node_args)
    result = out.record(tx, invoke_region, node_args, example)
    items = list(result.items) if isinstance(result, (TupleVariable, ListVariable)) else [result]
    return tree_unflatten(record.body.out_spec, items)


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


def _trace_first(tx, module_var, forward, leaves, spec, key) -> BlockRecord | None:
    out = tx.output
    root = module_var.source
    try:
        with out.recording_reads() as reads:
            body = trace_body(tx, "block", forward, _leaf_inputs(tx, leaves), spec, with_kwargs=True)
    except Unsupported:
        out.block_records[key] = _FAILED
        return None
    if any(not isinstance(leaf, (TensorVariable, SymNodeVariable)) and not leaf.is_python_constant()
           for leaf in body.out_leaves) or any("ac_graph_id" in n.meta for n in body.gm.graph.nodes):
        # (a block that checkpoints itself: its tagged ops belong in the calling graph)
        out.block_records[key] = _FAILED
        return None
    sources = {r for r in reads if isinstance(r, Source)}
    guards = {id(g): g for g in reads if isinstance(g, Guard)}
    for g in out.guards.values():  # guards made before the block on what it read
        if g.source in sources or g.other in sources:
            guards.setdefault(id(g), g)
    recorded = []
    for g in guards.values():
        if g.kind is GuardKind.NO_ALIASING and any(_path(s, root) is not None for s in g.value) or \
                g.kind is GuardKind.WRITTEN_APART and any(_path(s, root) is not None for s in (*g.value[0], *g.value[1])):
            out.block_records[key] = _FAILED  # (distinctness of the block's own tensors: rare)
            return None
        recorded.append((g, _path(g.source, root), _path(g.other, root)))
    lifted = []
    for node in body.lifted:
        origin = node.meta.get("origin") if node.op == "get_attr" else node.meta.get("source") \
            if node.op == "placeholder" else None
        path = _path(origin, root) if origin is not None else None
        lifted.append((node, path, node.op if path is not None else None))
    attr = out.install_body(body.gm)
    record = BlockRecord(module_var.value, root, body, attr, f"{BLOCK_ID_PREFIX}{out.next_region_id()}", recorded, lifted,
                         out.side_effects.mark())
    out.block_records[key] = record
    return record


def _map_to(tx, record: BlockRecord, module_var) -> list | None:
    """The lifted values for a later block, after its guards were re-evaluated (``None``:
    they differ, trace it)."""
    out = tx.output
    module, root = module_var.value, module_var.source
    new_guards, memo, values = [], {}, {}
    for index, (guard, path, other_path) in enumerate(record.guards):
        if path is None and other_path is None:
            continue  # not reached from the block: holds for every block alike
        # (each rebased guard tagged: the first block's guard ``index`` on this block)
        rebased = _rebased_guard(guard, path, other_path, record, module, root, memo, values, (record, index, root))
        if rebased is None:
            return None
        new_guards.append(rebased)
    lifted = []
    for node, path, how in record.lifted:
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


FORWARD_CALL_HOOKS.append(call_block)

__all__ = ["BLOCK_ID_PREFIX", "call_block", "is_block_call", "is_compiled_block_call", "BlockRecord"]

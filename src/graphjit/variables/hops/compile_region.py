"""``torch.compiler.nested_compile_region`` (``mark_compile_region``): a function traced
once into a subgraph and called through ``torch.ops.higher_order.invoke_subgraph``
wherever it is called again on inputs of the same kind.

The decorated function's calls reach ``invoke_subgraph_placeholder(fn, *args,
**kwargs)`` (a plain call in eager).  Traced, the first call traces ``fn`` into a body
(``body.trace_body``) and installs it under an identifier; a later call of the same
function in the same frame and the same body scope, with the same *reuse key* (the
function, each tensor argument's metadata, the constant arguments) calls the same body
again without tracing it: AOTAutograd and Inductor then compile one region for all its
calls (``invoke_subgraph``'s identifier keys their caches).  Reuse is sound only while
what the body read cannot have changed: the function existed before the call (its
closure cells are logged if written), every argument is a tensor, a symbolic number or a
hashable constant (no object whose state a new write could change unlogged), and no
mutation was logged since the body was traced.  Otherwise the call traces its own body.  A body with Python side effects (or that breaks) makes the call a
graph break: it runs in Python, where ``fn`` is compiled as its own frame.
"""

from __future__ import annotations

import torch
from torch._higher_order_ops.invoke_subgraph import invoke_subgraph, invoke_subgraph_placeholder

from ...exc import ObservedException, Unsupported, unsupported
from ...guards.guard import GuardKind
from ..base import VariableTracker, register_builder_by_id
from ..dicts import DictVariable
from ..functions import UserFunctionVariable
from ..sequences import ListVariable, TupleVariable
from ..sym_node import SymNodeVariable
from ..tensor import TensorVariable
from .body import capture_failed, input_for, trace_body
from .pytree import tree_flatten, tree_unflatten


class CompileRegionVariable(VariableTracker):
    """``invoke_subgraph_placeholder`` (what a ``nested_compile_region`` function calls)."""

    def __init__(self, value, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return "nested_compile_region call"

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not args:
            raise unsupported("nested_compile_region call without a function", "")
        fn, rest = args[0], list(args[1:])
        try:
            return _call_region(tx, fn, rest, dict(kwargs))
        except Unsupported as e:
            if e.gb_type.endswith("not captured"):
                raise
            raise capture_failed("nested_compile_region", e) from None


def invoke_region(subgraph, identifier: str, *operands):
    """The graph target: ``invoke_subgraph`` when a tracing backend (AOTAutograd, fake
    tensors) runs the graph, so it sees one region; a plain call of the body when the graph
    runs on real tensors (the ``eager`` backend), as eager calls the function (torch's
    operator has no eager autograd: its backward asks for a fake mode)."""
    if torch._C._len_torch_dispatch_stack() == 0 and all(
            type(o) in _PLAIN for o in operands if isinstance(o, torch.Tensor)):
        return tuple(subgraph.forward(*operands))
    return invoke_subgraph(subgraph, identifier, *operands)


invoke_region.__module__ = "graphjit_runtime"
#: runs its body, a graph attribute compared by structure (``graph/shared_graphs.py``)
invoke_region.__graphjit_pure__ = True
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def run_region_body(subgraph, identifier: str, *operands) -> tuple:
    """The fake run of an :func:`invoke_region` node at trace time: the body itself on the
    fake operands (what the operator computes; its own fake rule traces the body with
    make_fx first, which costs more than the whole body's trace)."""
    return tuple(subgraph.forward(*operands))


def _leaf_key(leaf: VariableTracker):
    """How a leaf argument enters the reuse key (``None``: it prevents reuse)."""
    if isinstance(leaf, TensorVariable):
        ev = leaf.example_value
        return ("tensor", ev.dtype, _sizes(ev.shape), _sizes(ev.stride()), ev.requires_grad, ev.device)
    if isinstance(leaf, SymNodeVariable):
        return ("sym", type(leaf.sym), str(leaf.sym))
    if leaf.is_python_constant():
        value = leaf.as_python_constant()
        try:
            hash(value)
        except TypeError:
            return None
        return ("const", type(value), value)
    return None


def _sizes(values) -> tuple:
    """Sizes or strides as a key: numbers, and symbolic ones by their expression."""
    return tuple(v if type(v) is int else str(v) for v in values)


def _reuse_key(tx, fn: VariableTracker, spec, leaves: list):
    fn = fn.realize()
    if not isinstance(fn, UserFunctionVariable) or type(fn) is not UserFunctionVariable:
        return None
    keys = tuple(_leaf_key(leaf) for leaf in leaves)
    if any(k is None for k in keys):
        return None
    out = tx.output
    return fn.fn, id(out.bodies[-1]) if out.bodies else None, spec, keys


def _call_region(tx, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
    call = TupleVariable([TupleVariable(args), DictVariable(kwargs)])
    leaves, spec = tree_flatten(tx, call)
    out = tx.output
    key = _reuse_key(tx, fn, spec, leaves)
    cache = out.compile_regions
    explicit = [leaf.node for leaf in leaves if isinstance(leaf, (TensorVariable, SymNodeVariable))]
    entry = cache.get(key) if key is not None else None
    if entry is None or entry[3] != out.side_effects.mark():
        body = trace_body(tx, "invoke_subgraph", fn, [input_for(leaf, tx=tx) for leaf in leaves], spec,
                          with_kwargs=True, same_containers=True)
        if any(not isinstance(leaf, (TensorVariable, SymNodeVariable)) for leaf in body.out_leaves):
            raise unsupported("nested_compile_region returning a value that is not a tensor", "")
        entry = (body, out.install_body(body.gm), f"subgraph_{out.next_region_id()}", out.side_effects.mark())
        if key is not None:
            cache[key] = entry
    body, attr, identifier, _ = entry
    node_args = (attr, identifier, *explicit, *body.lifted)
    try:
        example = out.run_fake(run_region_body, node_args)
    except ObservedException as e:
        raise capture_failed("nested_compile_region", e.exc) from None
    result = out.record(tx, invoke_region, node_args, example)
    items = list(result.items) if isinstance(result, (TupleVariable, ListVariable)) else [result]
    return tree_unflatten(body.out_spec, items)


@register_builder_by_id(invoke_subgraph_placeholder)
def _build_region(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return CompileRegionVariable(value, source=source)


__all__ = ["CompileRegionVariable"]

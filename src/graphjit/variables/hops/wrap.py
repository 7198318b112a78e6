"""``torch._higher_order_ops.wrap.wrap(fn, *args, **kwargs)``: the plainest higher-order
operator (it calls ``fn``), used by torch's own code and tests to mark a region.

Traced, ``fn`` becomes a body (``body.trace_body``) and the node calls ``wrap`` on it with
the call's tensors and the values the body lifted, as TorchDynamo's graph does.  The body
may return any nesting of tensors, numbers and constants; Python side effects in it make
the call a graph break (it then runs in Python, as eager's ``wrap`` runs ``fn``).

torch 2.14's ``flex_gemm`` operator (``_compat.FLEX_GEMM_HOP``: ``flex_gemm_hop(gemm_op,
body_fn, args, kwargs, kernel_options)``, what the ``flex_gemm`` front end calls) is the
same kind of region: ``body_fn(*args)`` becomes a body, and the node passes the GEMM op,
the body, the tensors with the lifted values, and the two constant dicts, as TorchDynamo's
graph does.
"""

from __future__ import annotations

from torch._higher_order_ops.wrap import wrap

from ... import _compat
from ...exc import ObservedException, Unsupported, unsupported
from ...guards.guard import GuardKind
from ..base import VariableTracker, register_builder_by_id
from ..dicts import DictVariable
from ..sequences import ListVariable, TupleVariable
from ..sym_node import SymNodeVariable
from ..tensor import TensorVariable
from .body import capture_failed, input_for, trace_body
from .pytree import Spec, tree_flatten, tree_unflatten


class WrapVariable(VariableTracker):
    """The ``wrap`` operator, or ``flex_gemm``'s."""

    def __init__(self, value, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return f"torch.ops.higher_order.{self.value.__name__}"

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        kind = "flex_gemm" if self.value is _compat.FLEX_GEMM_HOP else "wrap"
        try:
            if kind == "flex_gemm":
                return _call_flex_gemm(tx, list(args), dict(kwargs))
            if not args:
                raise unsupported("wrap without a function", "")
            return _call_wrap(tx, args[0], list(args[1:]), dict(kwargs))
        except Unsupported as e:
            if e.gb_type.endswith("not captured"):
                raise
            raise capture_failed(kind, e) from None


def _call_wrap(tx, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
    leaves, spec = tree_flatten(tx, TupleVariable([TupleVariable(args), DictVariable(kwargs)]))
    body = trace_body(tx, "wrap_body", fn, [input_for(leaf, tx=tx) for leaf in leaves], spec, with_kwargs=True)
    out = tx.output
    node_args = (out.install_body(body.gm), *_graph_values(leaves), *body.lifted)
    return _record(tx, wrap, "wrap", node_args, body.out_spec)


def _call_flex_gemm(tx, args: list, kwargs: dict) -> VariableTracker:
    """``flex_gemm_hop(gemm_op, body_fn, args, kwargs, kernel_options)``."""
    if kwargs or len(args) != 5 or not isinstance(args[2], (TupleVariable, ListVariable)):
        raise unsupported("flex_gemm called with other arguments than (gemm_op, body_fn, args, kwargs, "
                          "kernel_options)", f"{len(args)} positional, {sorted(kwargs)} keyword")
    gemm_op, body_fn, gemm_args, gemm_kwargs, options = args
    for what, var in (("GEMM op", gemm_op), ("kwargs", gemm_kwargs), ("kernel_options", options)):
        if not var.is_python_constant():
            raise unsupported(f"flex_gemm with a non-constant {what}", var.python_type().__name__)
    leaves = gemm_args.unpack(tx)
    spec = Spec("tuple", tuple, (), (Spec("leaf"),) * len(leaves))
    body = trace_body(tx, "flex_gemm_body", body_fn, [input_for(leaf, tx=tx) for leaf in leaves], spec)
    out = tx.output
    node_args = (gemm_op.as_python_constant(), out.install_body(body.gm),
                 (*_graph_values(leaves), *body.lifted), gemm_kwargs.as_python_constant(),
                 options.as_python_constant())
    return _record(tx, _compat.FLEX_GEMM_HOP, "flex_gemm", node_args, body.out_spec)


def _graph_values(leaves: list) -> list:
    """The nodes of the leaves that are graph values (the body bakes constants in)."""
    return [leaf.node for leaf in leaves if isinstance(leaf, (TensorVariable, SymNodeVariable))]


def _record(tx, op, kind: str, node_args: tuple, out_spec) -> VariableTracker:
    out = tx.output
    try:
        example = out.run_fake(op, node_args)
    except ObservedException as e:  # the operator's own checks
        raise capture_failed(kind, e.exc) from None
    result = out.record(tx, op, node_args, example)
    items = list(result.items) if isinstance(result, (TupleVariable, ListVariable)) else [result]
    return tree_unflatten(out_spec, items)


@register_builder_by_id(*(op for op in (wrap, _compat.FLEX_GEMM_HOP) if op is not None))
def _build_wrap(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return WrapVariable(value, source=source)


__all__ = ["WrapVariable"]

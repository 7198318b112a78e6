"""``torch._higher_order_ops.wrap.wrap(fn, *args, **kwargs)``: the plainest higher-order
operator (it calls ``fn``), used by torch's own code and tests to mark a region.

Traced, ``fn`` becomes a body (``body.trace_body``) and the node calls ``wrap`` on it with
the call's tensors and the values the body lifted, as TorchDynamo's graph does.  The body
may return any nesting of tensors, numbers and constants; Python side effects in it make
the call a graph break (it then runs in Python, as eager's ``wrap`` runs ``fn``).
"""

from __future__ import annotations

from torch._higher_order_ops.wrap import wrap

from ...exc import ObservedException, Unsupported, unsupported
from ...guards.guard import GuardKind
from ..base import VariableTracker, register_builder_by_id
from ..dicts import DictVariable
from ..sequences import ListVariable, TupleVariable
from ..sym_node import SymNodeVariable
from ..tensor import TensorVariable
from .body import capture_failed, input_for, trace_body
from .pytree import tree_flatten, tree_unflatten


class WrapVariable(VariableTracker):
    """The ``wrap`` operator."""

    def __init__(self, value, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return "torch.ops.higher_order.wrap"

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not args:
            raise unsupported("wrap without a function", "")
        try:
            return _call_wrap(tx, args[0], list(args[1:]), dict(kwargs))
        except Unsupported as e:
            if e.gb_type.endswith("not captured"):
                raise
            raise capture_failed("wrap", e) from None


def _call_wrap(tx, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
    leaves, spec = tree_flatten(tx, TupleVariable([TupleVariable(args), DictVariable(kwargs)]))
    body = trace_body(tx, "wrap_body", fn, [input_for(leaf, tx=tx) for leaf in leaves], spec, with_kwargs=True)
    explicit = [leaf.node for leaf in leaves if isinstance(leaf, (TensorVariable, SymNodeVariable))]
    out = tx.output
    node_args = (out.install_body(body.gm), *explicit, *body.lifted)
    try:
        example = out.run_fake(wrap, node_args)
    except ObservedException as e:
        raise capture_failed("wrap", e.exc) from None
    result = out.record(tx, wrap, node_args, example)
    items = list(result.items) if isinstance(result, (TupleVariable, ListVariable)) else [result]
    return tree_unflatten(body.out_spec, items)


@register_builder_by_id(wrap)
def _build_wrap(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return WrapVariable(value, source=source)


__all__ = ["WrapVariable"]

"""Structured control flow: ``torch.cond``, ``switch`` (torch 2.14), ``while_loop``, ``map``,
``scan`` (``torch._higher_order_ops``) as one graph node each; ``associative_scan``'s generic
mode (a Python algorithm over a ``vmap``'d combine function) is traced as it is written.

Each front end (the function users call) is modelled here, with its own checks and
pytree handling; its bodies are traced into subgraphs (``body.trace_body``) and the node
calls torch's operator (``torch.ops.higher_order.cond``...) on them, so every backend
gets what TorchDynamo gives it (AOTAutograd differentiates ``cond`` and Inductor lowers
it).  Calling the operator objects themselves (``torch.ops.higher_order.cond(pred, t, f,
ops)``) works the same way.

Contract:

* A predicate that is a Python constant picks its branch at trace time, as the front end
  does in eager; a tensor or a symbolic bool is the node's operand.
* Bodies may not change Python state made outside them (a branch runs or not, a loop
  body any number of times); such a body, one that breaks, or operands the front end
  rejects, make the *call* a graph break: it runs in Python, where eager's own front end
  runs or raises (under ``fullgraph=True`` it is an error naming the call).
* The branches of ``cond`` and ``switch`` (a loop's condition and body) take the same
  operands: the union of what they lift, after the explicit ones (``body.set_inputs``).
"""

from __future__ import annotations

import inspect

import torch
from torch._higher_order_ops.associative_scan import associative_scan
from torch._higher_order_ops.cond import cond, cond_op
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.map import map_impl
from torch._higher_order_ops.scan import scan, scan_op
from torch._higher_order_ops.while_loop import while_loop, while_loop_op

from ... import _compat
from ...exc import ObservedException, Unsupported, unsupported
from ...guards.guard import GuardKind
from ..base import VariableTracker, register_builder_by_id
from ..constant import ConstantVariable
from ..functions import UserFunctionVariable
from ..sequences import ListVariable, TupleVariable
from ..sym_node import SymNodeVariable
from ..tensor import TensorVariable
from .body import BodyInput, TracedBody, capture_failed, input_for, set_inputs, trace_body, union_lifted
from .pytree import Spec, tree_flatten, tree_unflatten


def _bind(fn, args: list, kwargs: dict) -> dict:
    try:
        return inspect.signature(fn).bind(*args, **kwargs).arguments
    except TypeError as e:
        raise unsupported(f"{fn.__name__} called with arguments it does not take", str(e)) from None


def _const(var: VariableTracker, what: str):
    if not var.is_python_constant():
        raise unsupported(f"non-constant {what}", repr(var.python_type().__name__))
    return var.as_python_constant()


def _tensor_leaves(tx, var: VariableTracker, what: str) -> tuple[list[TensorVariable], Spec]:
    leaves, spec = tree_flatten(tx, var)
    for leaf in leaves:
        if not isinstance(leaf, TensorVariable):
            raise unsupported(f"{what} with a leaf that is not a tensor", leaf.python_type().__name__,
                              "The front end raises for it in eager; the call runs in Python.")
    return leaves, spec


def _positional(spec: Spec) -> Spec:
    """The spec of a call's positional arguments (a tuple of them)."""
    return spec if spec.kind == "tuple" else Spec("tuple", tuple, (), (spec,))


class ControlFlowVariable(VariableTracker):
    """A control-flow front end (``torch.cond``...) or operator; ``kind`` names it."""

    def __init__(self, value, kind: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value, self.kind = value, kind

    def _repr_body(self) -> str:
        return self.kind

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        try:
            return getattr(self, f"_call_{self.kind}")(tx, list(args), dict(kwargs))
        except Unsupported as e:
            if e.gb_type.endswith("not captured"):
                raise
            raise capture_failed(self.kind, e) from None

    # -- helpers --------------------------------------------------------------------------
    def _emit(self, tx, op, node_args: tuple) -> VariableTracker:
        out = tx.output
        try:
            example = out.run_fake(op, node_args)
        except ObservedException as e:  # the operator's own checks (mismatched branches...)
            raise capture_failed(self.kind, e.exc) from None
        return out.record(tx, op, node_args, example)

    @staticmethod
    def _nodes(leaves: list[VariableTracker]) -> tuple:
        return tuple(leaf.node for leaf in leaves)

    # -- cond -----------------------------------------------------------------------------
    def _call_cond(self, tx, args, kwargs) -> VariableTracker:
        bound = _bind(cond, args, kwargs)
        pred, true_fn, false_fn = bound["pred"], bound["true_fn"], bound["false_fn"]
        operands = _operand_sequence(tx, bound.get("operands", TupleVariable([])), "torch.cond")
        pred = pred.realize()
        if pred.is_python_constant():  # the front end picks the branch (as in eager)
            fn = true_fn if pred.as_python_constant() else false_fn
            return fn.call_function(tx, list(operands.unpack(tx)), {})
        if isinstance(pred, TensorVariable):
            if pred.example_value.numel() != 1:
                raise unsupported("torch.cond predicate with more than one element", "",
                                  "Eager raises for it; the call runs in Python.")
        elif not isinstance(pred, SymNodeVariable):
            raise unsupported("torch.cond predicate", pred.python_type().__name__)
        leaves, spec = _tensor_leaves(tx, operands, "torch.cond operands")
        spec = _positional(Spec("tuple", tuple, (), spec.children))
        bodies = [trace_body(tx, f"cond_{which}", fn, [input_for(leaf, tx=tx) for leaf in leaves], spec,
                             pure=True)
                  for which, fn in (("true", true_fn), ("false", false_fn))]
        true_body, false_body = bodies
        if true_body.out_spec != false_body.out_spec:
            raise unsupported("torch.cond branches returning different structures",
                              f"{true_body.out_spec!r} and {false_body.out_spec!r}",
                              "Both branches must return the same nesting of tensors.")
        _require_tensors(bodies, "torch.cond branch")
        lifted = _merge(bodies, leaves)
        out = tx.output
        node_args = (pred.node, out.install_body(true_body.gm), out.install_body(false_body.gm),
                     self._nodes(leaves) + tuple(lifted))
        result = self._emit(tx, cond_op, node_args)
        return tree_unflatten(true_body.out_spec, _items(result))

    # -- switch ---------------------------------------------------------------------------
    def _call_switch(self, tx, args, kwargs, clamp: bool = True) -> VariableTracker:
        """``switch(index, branches, operands)``: ``branches[index](*operands)``, the index
        clamped into range by the front end (``clamp``; the operator takes it as it is)."""
        bound = _bind(_compat.SWITCH, args, kwargs)
        index, branches = bound["index"].realize(), bound["branches"]
        operands = _operand_sequence(tx, bound.get("operands", TupleVariable([])), "torch.switch")
        if not isinstance(branches, (TupleVariable, ListVariable)) or not branches.unpack(tx):
            raise unsupported("torch.switch branches that are not a non-empty tuple or list",
                              branches.python_type().__name__, "Eager raises for them; the call runs in Python.")
        fns = branches.unpack(tx)
        leaves, spec = _tensor_leaves(tx, operands, "torch.switch operands")
        last = len(fns) - 1
        if index.is_python_constant() and type(index.as_python_constant()) is int:  # picked now, as in eager
            i = index.as_python_constant()
            return fns[max(0, min(i, last)) if clamp else i].call_function(tx, list(operands.unpack(tx)), {})
        if isinstance(index, TensorVariable):
            if index.example_value.numel() != 1:
                raise unsupported("torch.switch index with more than one element", "",
                                  "Eager raises for it; the call runs in Python.")
        elif not isinstance(index, SymNodeVariable):
            raise unsupported("torch.switch index", index.python_type().__name__,
                              "It must be an int, a SymInt or a one-element tensor.")
        if len(fns) == 1:  # the front end calls the only branch
            return fns[0].call_function(tx, list(operands.unpack(tx)), {})
        if clamp:
            lo, hi = ConstantVariable(0), ConstantVariable(last)
            if isinstance(index, TensorVariable):
                index = VariableTracker.build(tx, torch.clamp).call_function(tx, [index, lo, hi], {})
            else:
                index = VariableTracker.build(tx, torch.sym_max).call_function(
                    tx, [lo, VariableTracker.build(tx, torch.sym_min).call_function(tx, [index, hi], {})], {})
        spec = _positional(Spec("tuple", tuple, (), spec.children))
        bodies = [trace_body(tx, f"switch_branch{i}", fn, [input_for(leaf, tx=tx) for leaf in leaves], spec,
                             pure=True)
                  for i, fn in enumerate(fns)]
        for i, body in enumerate(bodies[1:], 1):
            if body.out_spec != bodies[0].out_spec:
                raise unsupported("torch.switch branches returning different structures",
                                  f"branch 0: {bodies[0].out_spec!r}, branch {i}: {body.out_spec!r}",
                                  "Every branch must return the same nesting of tensors.")
        _require_tensors(bodies, "torch.switch branch")
        lifted = _merge(bodies, leaves)
        out = tx.output
        node_args = (index.node, tuple(out.install_body(body.gm) for body in bodies),
                     self._nodes(leaves) + tuple(lifted))
        result = self._emit(tx, _compat.SWITCH_OP, node_args)
        return tree_unflatten(bodies[0].out_spec, _items(result))

    # -- while_loop -----------------------------------------------------------------------
    def _call_while_loop(self, tx, args, kwargs) -> VariableTracker:
        bound = _bind(while_loop, args, kwargs)
        carried = bound["carried_inputs"]
        if not isinstance(carried, (TupleVariable, ListVariable)):
            raise unsupported("while_loop carried_inputs that are not a tuple or list",
                              carried.python_type().__name__)
        leaves, carried_spec = tree_flatten(tx, carried)
        for leaf in leaves:
            if not (isinstance(leaf, (TensorVariable, SymNodeVariable)) or
                    leaf.is_python_constant() and type(leaf.as_python_constant()) is int):
                raise unsupported("while_loop carried_inputs with a leaf that is not a tensor or an int",
                                  leaf.python_type().__name__, "The front end raises for it in eager.")
        spec = Spec("tuple", tuple, (), carried_spec.children)
        cond_body = trace_body(tx, "while_cond", bound["cond_fn"], _carry_inputs(tx, leaves), spec, pure=True,
                               single=True)
        body = trace_body(tx, "while_body", bound["body_fn"], _carry_inputs(tx, leaves), spec, pure=True)
        if cond_body.out_spec.kind != "leaf" or not isinstance(cond_body.out_leaves[0], (TensorVariable,
                                                                                          SymNodeVariable)):
            raise unsupported("while_loop cond_fn that does not return a boolean tensor",
                              repr(cond_body.out_spec), "A Python bool here decides the loop at trace time.")
        body_spec = body.out_spec if body.out_spec.kind != "leaf" else Spec("tuple", tuple, (), (body.out_spec,))
        if body_spec.num_leaves != len(leaves):
            raise unsupported("while_loop body_fn returning another number of values than it takes",
                              f"{body_spec.num_leaves} != {len(leaves)}")
        for leaf in body.out_leaves:
            if not isinstance(leaf, (TensorVariable, SymNodeVariable)):
                raise unsupported("while_loop body_fn returning a value that is not a tensor or an int",
                                  leaf.python_type().__name__)
        graph_leaves = [leaf for leaf in leaves if isinstance(leaf, (TensorVariable, SymNodeVariable))]
        lifted = _merge([cond_body, body], [leaf if isinstance(leaf, (TensorVariable, SymNodeVariable)) else None
                                            for leaf in leaves])
        out = tx.output
        carried_args = tuple(leaf.node if leaf in graph_leaves else leaf.as_python_constant() for leaf in leaves)
        node_args = (out.install_body(cond_body.gm), out.install_body(body.gm), carried_args, tuple(lifted))
        result = self._emit(tx, while_loop_op, node_args)
        return tree_unflatten(carried_spec, _items(result))

    # -- map ------------------------------------------------------------------------------
    def _call_map(self, tx, args, kwargs) -> VariableTracker:
        if not args:
            raise unsupported("map without a function", "")
        fn, xs, rest = args[0], (args[1] if len(args) > 1 else kwargs.get("xs")), args[2:]
        if xs is None or kwargs.keys() - {"xs"}:
            raise unsupported("map called with keyword arguments", ", ".join(kwargs))
        xs_leaves, xs_spec = _tensor_leaves(tx, xs, "map xs")
        rest_leaves, rest_spec = tree_flatten(tx, TupleVariable(list(rest)))
        return self._map(tx, fn, xs_leaves, rest_leaves, Spec("tuple", tuple, (), (xs_spec, *rest_spec.children)))

    def _call_map_impl(self, tx, args, kwargs) -> VariableTracker:
        """``map_impl(f, xs, pos_args)`` called directly: ``f(*xs slices, *pos_args)``."""
        bound = _bind(_map_impl_signature, args, kwargs)
        xs, pos = bound["xs"], bound["pos_args"]
        if not isinstance(xs, (TupleVariable, ListVariable)) or not isinstance(pos, (TupleVariable, ListVariable)):
            raise unsupported("map_impl with xs or pos_args that are not lists", "")
        xs_leaves, pos_leaves = xs.unpack(tx), pos.unpack(tx)
        leaf = Spec("leaf")
        spec = Spec("tuple", tuple, (), (leaf,) * (len(xs_leaves) + len(pos_leaves)))
        result = self._map(tx, bound["f"], xs_leaves, pos_leaves, spec)
        return result

    def _map(self, tx, fn, xs_leaves: list, rest_leaves: list, spec: Spec) -> VariableTracker:
        if not all(isinstance(leaf, TensorVariable) for leaf in xs_leaves):
            raise unsupported("map over xs that are not all tensors", "", "Eager raises for it.")
        sizes = [leaf.example_value.shape[0] if leaf.example_value.ndim else None for leaf in xs_leaves]
        if not xs_leaves or None in sizes or any(size != sizes[0] for size in sizes) or sizes[0] == 0:
            raise unsupported("map over xs without one common, non-zero leading size", repr(sizes),
                              "Eager raises for it; the call runs in Python.")
        inputs = [input_for(leaf, drop_dim=0, tx=tx) for leaf in xs_leaves] + \
                 [input_for(leaf, tx=tx) for leaf in rest_leaves]
        body = trace_body(tx, "map_body", fn, inputs, spec, pure=True)
        _require_tensors([body], "map body")
        pos = [leaf for leaf in rest_leaves if isinstance(leaf, (TensorVariable, SymNodeVariable))]
        lifted = _merge([body], [None] * len(xs_leaves) + pos)
        out = tx.output
        node_args = (out.install_body(body.gm), self._nodes(xs_leaves), self._nodes(pos) + tuple(lifted))
        result = self._emit(tx, map_impl, node_args)
        return tree_unflatten(body.out_spec, _items(result))

    # -- scan -----------------------------------------------------------------------------
    def _call_scan(self, tx, args, kwargs) -> VariableTracker:
        bound = _bind(scan, args, kwargs)
        dim = _const(bound.get("dim", ConstantVariable(0)), "scan dim")
        reverse = _const(bound.get("reverse", ConstantVariable(False)), "scan reverse")
        init_leaves, init_spec = _tensor_leaves(tx, bound["init"], "scan init")
        xs_leaves, xs_spec = _tensor_leaves(tx, bound["xs"], "scan xs")
        if not xs_leaves:
            return TupleVariable([bound["init"], ListVariable([])])
        if not init_leaves or not isinstance(dim, int) or not isinstance(reverse, bool):
            raise unsupported("scan arguments its front end rejects", "", "Eager raises for them.")
        ndim = xs_leaves[0].example_value.ndim
        dim = torch._prims_common.canonicalize_dim(ndim, dim)
        if any(x.example_value.ndim <= dim or x.example_value.shape[dim] == 0 for x in xs_leaves):
            raise unsupported("scan xs without the scanned dimension", "", "Eager raises for it.")
        out = tx.output
        moved = [x if dim == 0 else out.call(tx, "call_function", torch.movedim, [x, ConstantVariable(dim),
                                                                                ConstantVariable(0)], {})
                 for x in xs_leaves]
        if reverse:
            moved = [out.call(tx, "call_function", torch.flip, [x, ConstantVariable([0])], {}) for x in moved]
        inputs = [input_for(leaf, tx=tx) for leaf in init_leaves] + \
                 [input_for(leaf, drop_dim=0, tx=tx) for leaf in moved]
        body = trace_body(tx, "scan_combine", bound["combine_fn"], inputs,
                          Spec("tuple", tuple, (), (init_spec, xs_spec)), pure=True)
        ospec = body.out_spec
        if ospec.kind not in ("tuple", "list") or len(ospec.children) != 2 or ospec.children[0] != init_spec:
            raise unsupported("scan combine_fn not returning (next_carry, y) with the carry's structure",
                              repr(ospec), "Eager raises for it; the call runs in Python.")
        _require_tensors([body], "scan combine_fn")
        lifted = _merge([body], [*init_leaves] + [None] * len(moved))
        node_args = (out.install_body(body.gm), self._nodes(init_leaves), self._nodes(moved), tuple(lifted))
        result = _items(self._emit(tx, scan_op, node_args))
        n_carry = init_spec.num_leaves
        carry = tree_unflatten(init_spec, result[:n_carry])
        ys = result[n_carry:]
        if reverse:
            ys = [out.call(tx, "call_function", torch.flip, [y, ConstantVariable([0])], {}) for y in ys]
        if dim != 0:
            ys = [out.call(tx, "call_function", torch.movedim, [y, ConstantVariable(0), ConstantVariable(dim)], {})
                  if dim < y.example_value.ndim else y for y in ys]
        return TupleVariable([carry, tree_unflatten(ospec.children[1], ys)])

    # -- associative_scan -----------------------------------------------------------------
    def _call_associative_scan(self, tx, args, kwargs) -> VariableTracker:
        bound = _bind(associative_scan, args, kwargs)
        mode = _const(bound.get("combine_mode", ConstantVariable("pointwise")), "combine_mode")
        if mode == "generic":  # a Python algorithm over a vmap'd combine_fn: traced as it is
            return UserFunctionVariable(associative_scan).call_function(tx, args, kwargs)
        xs_leaves, _ = _tensor_leaves(tx, bound["xs"], "associative_scan xs")
        if mode != "pointwise" or not all(x.example_value.device.type in ("cuda", "xpu") for x in xs_leaves):
            raise unsupported("associative_scan", f"combine_mode={mode!r} on "
                              f"{sorted({x.example_value.device.type for x in xs_leaves})}",
                              "The pointwise mode needs CUDA or XPU tensors: eager raises otherwise.")
        raise unsupported("associative_scan", "pointwise mode", "Not captured yet; the call runs in Python.")

    # -- the operators themselves, called directly ----------------------------------------
    def _call_cond_op(self, tx, args, kwargs) -> VariableTracker:
        return self._call_cond(tx, args, kwargs)

    def _call_switch_op(self, tx, args, kwargs) -> VariableTracker:
        return self._call_switch(tx, args, kwargs, clamp=False)


def _operand_sequence(tx, operands: VariableTracker, what: str) -> VariableTracker:
    """The operands of ``cond``/``switch`` as a tuple or list tracker (``()`` may be a constant)."""
    if not isinstance(operands, (TupleVariable, ListVariable)) and operands.is_python_constant() and \
            type(operands.as_python_constant()) in (tuple, list):  # ``()``: a constant
        operands = TupleVariable([VariableTracker.build(tx, v) for v in operands.as_python_constant()])
    if not isinstance(operands, (TupleVariable, ListVariable)):
        raise unsupported(f"{what} operands that are not a tuple or list", operands.python_type().__name__)
    return operands


def _map_impl_signature(f, xs, pos_args):
    """The signature of ``map_impl`` (the operator object takes ``*args``)."""


def _carry_inputs(tx, leaves: list) -> list:
    """The inputs of a loop's condition and body: fresh fakes for tensors, and for ints a
    new *unbacked* symbolic int (the body must not specialize on the first iteration's
    value), as TorchDynamo does."""
    out = []
    for leaf in leaves:
        if isinstance(leaf, TensorVariable):
            out.append(input_for(leaf, tx=tx))
        else:
            shape_env = tx.output.shape_env
            with shape_env.ignore_fresh_unbacked_symbols():
                out.append(BodyInput(shape_env.create_unbacked_symint(), "carry_int"))
    return out


def _items(result: VariableTracker) -> list[VariableTracker]:
    if isinstance(result, (TupleVariable, ListVariable)):
        return list(result.items)
    return [result]


def _require_tensors(bodies: list[TracedBody], what: str) -> None:
    for body in bodies:
        for leaf in body.out_leaves:
            if not isinstance(leaf, TensorVariable):
                raise unsupported(f"{what} returning a value that is not a tensor",
                                  leaf.python_type().__name__, "It must return tensors only.")


def _merge(bodies: list[TracedBody], explicit: list = ()) -> list:
    """One operand list for ``bodies`` (they take the same explicit inputs): the values
    any of them lifted that are not an explicit operand already (``explicit``: the
    trackers passed as the explicit inputs, ``None`` for one passed sliced)."""
    nodes = [None if leaf is None else leaf.node for leaf in explicit]
    lifted = [n for n in union_lifted(*bodies) if n not in nodes]
    for body in bodies:
        set_inputs(body, lifted, nodes)
    return lifted


_FRONT_ENDS = {cond: "cond", cond_op: "cond_op", while_loop: "while_loop", hop_map: "map", map_impl: "map_impl",
               scan: "scan", associative_scan: "associative_scan"}
if _compat.SWITCH is not None:  # torch 2.14
    _FRONT_ENDS.update({_compat.SWITCH: "switch", _compat.SWITCH_OP: "switch_op"})


@register_builder_by_id(*_FRONT_ENDS)
def _build_control_flow(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return ControlFlowVariable(value, _FRONT_ENDS[value], source=source)


__all__ = ["ControlFlowVariable"]

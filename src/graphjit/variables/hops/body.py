"""Tracing one body of a higher-order operator into a subgraph (the shared helper every
operator uses; TorchDynamo's ``speculate_subgraph``).

:func:`trace_body` calls a callable tracker on new inputs inside
``OutputGraph.body(kind)`` (``graph/subgraphs.py``): its ops go into a graph of their own,
outer values it reads are lifted to extra inputs, and Python side effects on objects made
outside the body are refused (``base.check_mutable``).  It returns a :class:`TracedBody`:
the ``GraphModule``, the outer nodes lifted (the operator passes them after its explicit
operands), and the structure and kinds of what the body returned.

The body's explicit inputs are *fresh* fake tensors (:func:`fresh_like`): never the
caller's own fakes, so an in-place op in the body does not change the metadata the rest
of the trace sees.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ...exc import ObservedException, Unsupported, unsupported
from ..base import VariableTracker
from ..constant import ConstantVariable
from ..dicts import DictVariable
from ..sequences import ListVariable, TupleVariable
from ...diagnostics.describe import describe
from ..sym_node import SymNodeVariable, is_symbolic
from ..tensor import TensorVariable
from ..torch_function import BATCHED
from .pytree import Spec, tree_flatten, tree_unflatten


class BodyInput:
    """An explicit input of a body: a placeholder whose example is ``example`` (a fake
    tensor or a symbolic number)."""

    __slots__ = ("example", "name", "batched")

    def __init__(self, example: Any, name: str = "arg") -> None:
        self.example, self.name = example, name
        #: a ``vmap`` body's batched input: what ``is_batchedtensor`` sees in eager
        self.batched = False

    def __repr__(self) -> str:
        return f"BodyInput({self.name})"


class TracedBody:
    """A traced body: ``gm`` takes ``[explicit inputs..., lifted...]`` and returns the
    flat tuple ``outputs`` (nodes or constants) whose structure is ``out_spec``."""

    def __init__(self, gm: torch.fx.GraphModule, lifted: list[torch.fx.Node], out_spec: Spec,
                 out_leaves: list[VariableTracker], n_explicit: int, n_extra: int = 0) -> None:
        self.gm, self.lifted, self.out_spec = gm, lifted, out_spec
        self.out_leaves, self.n_explicit = out_leaves, n_explicit
        #: outputs after those of ``out_spec``: values a repeated block's body stores in
        #: outer objects (``hops/block_effects.py``)
        self.n_extra = n_extra

    def __repr__(self) -> str:
        return f"TracedBody({self.gm.__class__.__name__}, {self.n_explicit} inputs, " \
               f"{len(self.lifted)} lifted, out {self.out_spec!r})"

    def output_examples(self) -> list[Any]:
        """The fake tensors, symbolic numbers or constants the body returned."""
        return [leaf.example_value if isinstance(leaf, (TensorVariable, SymNodeVariable))
                else leaf.as_python_constant() for leaf in self.out_leaves]


def fresh_like(tx, fake: torch.Tensor, drop_dim: int | None = None,
               requires_grad: bool | None = None) -> torch.Tensor:
    """A new fake tensor with ``fake``'s metadata (without dimension ``drop_dim``: one
    slice of a batch), a leaf of autograd."""
    size, stride = list(fake.shape), list(fake.stride())
    if drop_dim is not None:
        del size[drop_dim], stride[drop_dim]
    grad = fake.requires_grad if requires_grad is None else requires_grad
    with tx.output.fake_mode:
        out = torch.empty_strided(size, stride, dtype=fake.dtype, device=fake.device)
    if grad and (out.is_floating_point() or out.is_complex()):
        out.requires_grad_(True)
    return out


def input_for(leaf: VariableTracker, drop_dim: int | None = None, requires_grad: bool | None = None,
              tx=None) -> BodyInput | VariableTracker:
    """The body input standing for ``leaf``: a new placeholder for a tensor or symbolic
    number, the constant itself otherwise (baked into the body)."""
    if isinstance(leaf, TensorVariable):
        return BodyInput(fresh_like(tx, leaf.example_value, drop_dim, requires_grad), leaf.node.name)
    if isinstance(leaf, SymNodeVariable):
        return BodyInput(leaf.sym, leaf.node.name)
    if not leaf.is_python_constant():
        raise unsupported("higher-order operator input that is not a tensor or a constant",
                          leaf.python_type().__name__)
    return leaf


def trace_body(tx, kind: str, fn: VariableTracker, args: list[BodyInput | VariableTracker],
               args_spec: Spec, *, with_kwargs: bool = False,
               pure: bool = False, single: bool = False, side_effects: bool = False,
               effects=None, same_containers: bool = False) -> TracedBody:
    """Trace ``fn(*tree_unflatten(args_spec, args))`` as a body named after ``kind``
    (``args_spec`` is a tuple spec of the positional arguments; ``with_kwargs``: of the
    pair ``(args, kwargs)``).  With ``pure``
    (control flow: torch's operators reject them), a body that mutates an input in place
    or returns an input or one tensor twice is refused.  With ``single``, a body that
    returns one value returns it alone (not in a tuple).  With ``side_effects`` (the body
    runs exactly once per call: torch.func transforms) it may mutate outer objects, as
    long as no value it computes is stored in them.  With ``effects`` (a repeated block's
    recorder, ``hops/block_effects.py``) it may mutate the objects the recorder follows,
    and the values it stores in them become extra outputs.  With ``same_containers`` the
    function would get the caller's own lists and dicts (a plain call, as
    ``nested_compile_region``'s in eager): the body gets rebuilt ones, so one it mutates is
    refused (the call runs in Python, where the caller sees the mutation)."""
    out = tx.output
    steps = len(out.prologue.steps)
    on_write = effects.check_write if effects is not None else None
    with out.body(kind, side_effects or effects is not None, on_write) as scope:
        if effects is not None:
            effects.start(scope)
        try:
            leaves = [_placeholder(scope, a) if isinstance(a, BodyInput) else a for a in args]
            n_explicit = len(scope.inputs)
            call_args = tree_unflatten(args_spec, leaves)
            containers = _containers(call_args, with_kwargs) if same_containers else ()
            if with_kwargs:
                pos, kw = call_args.items
                result = fn.call_function(tx, list(pos.items), dict(kw.realize_items(tx)))
            else:
                result = fn.call_function(tx, list(call_args.items), {})
            for var, before in containers:
                if _contents(var) != before:
                    raise unsupported(f"{kind} mutating a list or dict it was given", describe(var),
                                      "It would change the caller's own object; the call runs in Python.")
            if len(out.prologue.steps) != steps:
                raise unsupported("random draw in a higher-order operator's body", kind,
                                  "Python's random module is drawn from once per call of the frame; "
                                  "the body may run any number of times.")
            out_leaves, out_spec = tree_flatten(tx, result)
            outputs = tuple(_output(leaf, kind) for leaf in out_leaves)
            if pure:
                _check_pure(scope, kind, [out.lift(o) if isinstance(o, torch.fx.Node) else o for o in outputs])
            n_extra = 0
            if effects is not None:
                explicit = [i for i, a in enumerate(args) if isinstance(a, BodyInput)]
                extra = effects.finish(scope, outputs, explicit)
                n_extra = len(extra)
                outputs = outputs + tuple(extra)
            gm = scope.finish(outputs[0] if single and out_spec.kind == "leaf" else outputs)
        finally:
            if effects is not None:
                effects.stop()
    if scope.writes and effects is None:
        _check_no_escape(scope, kind)
    return TracedBody(gm, list(scope.lifted), out_spec, out_leaves, n_explicit, n_extra)


def _containers(call_args: VariableTracker, with_kwargs: bool) -> list:
    """The lists and dicts rebuilt for a body's arguments, with their contents."""
    found: list = []

    def visit(var):
        if isinstance(var, (ListVariable, DictVariable)):
            found.append((var, _contents(var)))
        if isinstance(var, (ListVariable, TupleVariable)):
            children = var.raw_items()
        elif isinstance(var, DictVariable):
            children = list(var._items.values())
        else:
            children = []
        for child in children:
            visit(child)

    pos, kw = call_args.items if with_kwargs else (call_args, None)
    for arg in [*pos.raw_items(), *(kw._items.values() if kw is not None else ())]:
        visit(arg)
    return found


def _contents(var) -> tuple:
    if isinstance(var, ListVariable):
        return tuple(map(id, var.raw_items()))
    return tuple((k, id(v)) for k, v in var._items.items())


def _check_no_escape(scope, kind: str) -> None:
    """No tensor or number the body computed is stored in an outer object it mutated
    (in eager it would be functorch's wrapped tensor escaping the transform)."""
    seen: set[int] = set()
    stack = list(scope.writes)
    while stack:
        var = stack.pop()
        if id(var) in seen:
            continue
        seen.add(id(var))
        if isinstance(var, (TensorVariable, SymNodeVariable)):
            if var.node.graph is scope.graph:
                raise unsupported(f"{kind} storing a value it computes outside it", var.node.name,
                                  "In eager this would be a tensor escaping the transform.",
                                  ["Return the value from the function instead."])
            continue
        stack.extend(var.children())


def _check_pure(scope, kind: str, outputs: list) -> None:
    mutated = scope.mutated_inputs()
    if mutated:
        raise unsupported(f"{kind} mutating its input in place", ", ".join(n.name for n in mutated),
                          "torch's control-flow operators reject in-place changes of their operands.",
                          ["Clone the operand before changing it."])
    aliasing = scope.aliased_outputs(outputs)
    if aliasing is not None:
        raise unsupported(f"{kind} returning an alias", aliasing,
                          "torch's control-flow operators reject outputs that alias an input or each other.",
                          ["Return input.clone() instead of the input itself."])


def _placeholder(scope, arg: BodyInput) -> VariableTracker:
    node = scope.input(arg.name, arg.example)
    if arg.batched:
        node.meta[BATCHED] = True
    if isinstance(arg.example, torch.Tensor):
        return TensorVariable(node, arg.example)
    if is_symbolic(arg.example):
        return SymNodeVariable(node, arg.example)
    raise AssertionError(arg)


def _output(leaf: VariableTracker, kind: str):
    if isinstance(leaf, (TensorVariable, SymNodeVariable)):
        return leaf.node
    if leaf.is_python_constant():
        return leaf.as_python_constant()
    raise unsupported("higher-order operator body returning a Python object", f"{kind} returned "
                      f"a {leaf.python_type().__name__}",
                      "A body may return tensors, numbers and constants (in tuples, lists and dicts).")


def set_inputs(body: TracedBody, lifted: list[torch.fx.Node], explicit: list[torch.fx.Node] = ()) -> None:
    """Make ``body`` take ``lifted`` (a superset of its own lifted values, in this order)
    after its explicit inputs: the branches of ``cond`` (the condition and body of a
    loop) must take the same operands.  ``explicit`` are the outer nodes passed for the
    explicit inputs: a lifted value that is one of them reads that input instead (an
    operator must not be passed one tensor twice)."""
    graph = body.gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    explicit_phs, own = placeholders[:body.n_explicit], placeholders[body.n_explicit:]
    by_outer = dict(zip(body.lifted, own, strict=True))
    for i, outer in enumerate(explicit):
        node = None if outer is None else by_outer.pop(outer, None)
        if node is not None:
            node.replace_all_uses_with(explicit_phs[i])
            graph.erase_node(node)
    anchor = explicit_phs[-1] if explicit_phs else None
    for outer in lifted:
        node = by_outer.get(outer)
        if node is None:
            if anchor is None:
                with graph.inserting_before(next(iter(graph.nodes))):
                    node = graph.placeholder(f"lifted_{outer.name}")
            else:
                with graph.inserting_after(anchor):
                    node = graph.placeholder(f"lifted_{outer.name}")
            node.meta["example_value"] = outer.meta.get("example_value")
        elif anchor is None:
            next(iter(graph.nodes)).prepend(node)
        else:
            anchor.append(node)
        anchor = node
    body.lifted = list(lifted)
    graph.lint()
    body.gm.recompile()


def union_lifted(*bodies: TracedBody) -> list[torch.fx.Node]:
    """The outer values any of ``bodies`` lifted, each once, in first-seen order."""
    seen: dict[torch.fx.Node, None] = {}
    for body in bodies:
        for node in body.lifted:
            seen.setdefault(node, None)
    return list(seen)


def capture_failed(kind: str, error: Exception) -> Unsupported:
    """A graph break at an operator whose bodies could not be captured (or whose own
    checks failed): the call runs in Python, where eager runs it or raises.  The inner
    break's reason, hints and user frames are kept."""
    if isinstance(error, Unsupported):
        new = unsupported(f"{kind} body not captured", error.reason,
                          "The whole call runs in Python. " + (error.explanation or ""), error.hints)
        new.user_stack = list(error.user_stack)
        return new
    return unsupported(f"{kind} not captured", f"{type(error).__name__}: {error}",
                       "Its checks failed on the traced values; the call runs in Python, where eager "
                       "reports it.")


__all__ = ["BodyInput", "TracedBody", "trace_body", "fresh_like", "input_for", "set_inputs",
           "union_lifted", "capture_failed", "ObservedException", "ConstantVariable"]

"""``torch.func`` transforms in traced code: ``vmap``, ``grad``, ``grad_and_value``,
``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, ``linearize`` (and their
``functorch`` and ``torch.vmap`` aliases).

A transform is captured as *a call of the transform on a traced subgraph*: the user's
function is traced into a body on fresh fake tensors shaped as the function sees them
(one slice of each batched input for ``vmap``; the inputs themselves for the derivative
transforms), and one graph node (``transform_calls.TransformCall``) applies the real
``torch.func`` transform to that body when the graph runs.  AOTAutograd runs the
transform while it traces the graph (so the backend sees plain aten ops, as with
TorchDynamo's own inlining), and gradients flow through it.

Contract:

* ``vmap(f, ...)``, ``grad(f, ...)``... made in traced code are trackers
  (:class:`TransformedFunctionVariable`): calling one traces ``f``; a transformed function
  made before the call (a decorated global) is recognized by its code and closure.
* The options (``in_dims``, ``out_dims``, ``randomness``, ``chunk_size``, ``argnums``,
  ``has_aux``...) must be constants; their checks are functorch's own (run on the fake
  inputs at trace time: a call eager would reject is a graph break, so eager raises).
* Nothing of functorch's level stack is touched while tracing: the transform pushes and
  pops its levels itself when the node runs (on fake tensors at trace time, and when the
  graph runs), so a failure anywhere leaves no level behind.
* The function runs exactly once per call in eager (a ``vmap`` with ``chunk_size`` once
  per chunk), so its Python side effects on outer objects are allowed and replayed after
  the graph, once, like the frame's own (``trace_body(side_effects=True)``), unless a
  value the body computes would be stored outside it (a wrapped tensor escaping the
  transform in eager).  A body that draws from ``random``, breaks, or (chunked ``vmap``)
  has side effects makes the call a graph break as a whole.
* ``vjp``/``linearize`` return a function: it lives in the graph as a value
  (:class:`GraphFunctionVariable`) and calling it is another node; it cannot leave the
  graph (a graph break where it would).
"""

from __future__ import annotations

import inspect
import operator
import sys
import types

import torch
import torch._functorch.apis as _apis
import torch._functorch.eager_transforms as _eager
import torch._functorch.vmap as _vmap

from ...exc import ObservedException, Unsupported, unsupported
from ...guards.guard import GuardKind
from ..base import VariableTracker, register_builder_by_id, register_builder_predicate
from ..constant import ConstantVariable, is_constant_value
from ..dicts import DictVariable
from ..sequences import TupleVariable
from ..sym_node import SymNodeVariable
from ..tensor import TensorVariable
from .body import BodyInput, capture_failed, fresh_like, input_for, trace_body
from .pytree import Spec, from_torch_spec, python_template, torch_spec, tree_flatten, tree_unflatten
from .transform_calls import INPUT, FlatGradCall, FlatVmapCall, FunctionCall, TransformCall

#: transform -> (name, how it is called): "wrap" transforms return a function;
#: "call" transforms take the function and its arguments at once
TRANSFORMS = {
    _apis.vmap: ("vmap", "wrap"), _apis.grad: ("grad", "wrap"), _apis.grad_and_value: ("grad_and_value", "wrap"),
    _eager.jacrev: ("jacrev", "wrap"), _eager.jacfwd: ("jacfwd", "wrap"), _eager.hessian: ("hessian", "wrap"),
    _eager.vjp: ("vjp", "call"), _eager.jvp: ("jvp", "call"), _eager.linearize: ("linearize", "call"),
}


def _functorch_aliases() -> dict:
    """The ``functorch`` package's own wrappers of the same transforms."""
    functorch = sys.modules.get("functorch")
    if functorch is None:
        return {}
    out = {}
    for name in ("vmap", "grad", "grad_and_value", "jacrev", "jacfwd", "hessian", "vjp", "jvp", "linearize"):
        alias = getattr(functorch, name, None)
        original = next((t for t, (n, _) in TRANSFORMS.items() if n == name), None)
        if alias is not None and alias is not original and callable(alias):
            out[alias] = original
    return out


try:  # importing functorch is cheap once torch is imported; it may be absent
    import functorch  # noqa: F401
except ImportError:  # pragma: no cover
    pass
ALIASES = _functorch_aliases()


class FuncTransformVariable(VariableTracker):
    """A transform itself (``torch.func.vmap``...)."""

    def __init__(self, transform, **kwargs) -> None:
        super().__init__(**kwargs)
        self.transform = transform
        self.name, self.style = TRANSFORMS[transform]

    def _repr_body(self) -> str:
        return f"torch.func.{self.name}"

    def python_type(self) -> type:
        return type(self.transform)

    def as_python_constant(self):
        return self.transform

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        try:
            bound = inspect.signature(self.transform).bind(*args, **kwargs)
        except TypeError as e:
            raise unsupported(f"torch.func.{self.name} with arguments it does not take", str(e)) from None
        params = dict(bound.arguments)
        fn = params.pop("func")
        if self.style == "wrap":
            options = {k: _constant(v, f"{self.name} {k}") for k, v in params.items()}
            _check_options(self.name, options)
            return TransformedFunctionVariable(self.transform, fn, options)
        if self.name == "linearize":
            raise unsupported("torch.func.linearize", _fn_name(fn),
                              "linearize traces its function with make_fx when it is called, so a "
                              "compiling backend would bake trace-time values into jvp_fn; it runs in Python "
                              "(torch.compile breaks here too).")
        return _apply_call_style(tx, self, fn, params)


class TransformedFunctionVariable(VariableTracker):
    """``transform(fn, **options)``: a function that, called, applies the transform."""

    def __init__(self, transform, fn: VariableTracker, options: dict, **kwargs) -> None:
        super().__init__(**kwargs)
        self.transform, self.fn, self.options = transform, fn, options
        self.name = TRANSFORMS[transform][0]

    def _repr_body(self) -> str:
        return f"{self.name}({self.fn!r}, {self.options})"

    def python_type(self) -> type:
        return types.FunctionType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        try:
            return _apply_wrap_style(tx, self, list(args), dict(kwargs))
        except Unsupported as e:
            if e.gb_type.endswith("not captured"):
                raise
            raise capture_failed(f"torch.func.{self.name}", e) from None

    def reconstruct(self, cg) -> None:
        """``transform(fn, **options)`` again (after a graph break, or where it escapes)."""
        cg.push_null()
        cg.load_const(self.transform)
        cg.reconstruct(self.fn)
        for value in self.options.values():
            cg.load_const(value)
        cg.call(1 + len(self.options), tuple(self.options))


class GraphFunctionVariable(VariableTracker):
    """A function a transform returned inside the graph (``vjp_fn``): ``node`` is it."""

    is_graph_value = True

    def __init__(self, node, example, kind: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.node, self.example, self.kind = node, example, kind

    def _repr_body(self) -> str:
        return f"{self.kind} function {self.node.name}"

    def python_type(self) -> type:
        return types.FunctionType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        leaves, spec = tree_flatten(tx, TupleVariable([TupleVariable(list(args)), DictVariable(dict(kwargs))]))
        call = FunctionCall(python_template(spec, [INPUT if _is_graph_value(v) else v.as_python_constant()
                                                   for v in leaves]))
        node_args = (self.node, *(v.node for v in leaves if _is_graph_value(v)))
        return _emit(tx, call, node_args, f"the {self.kind} function")

    def reconstruct(self, cg) -> None:
        raise unsupported(f"{self.kind} function leaving the graph", self.node.name,
                          "The function torch.func returned lives inside the graph; call it there.",
                          ["Call it in the same compiled function, or compute the transform outside."])


def _is_graph_value(var: VariableTracker) -> bool:
    return isinstance(var, (TensorVariable, SymNodeVariable))


def _constant(var: VariableTracker, what: str):
    """An option's value; a symbolic number in it is specialized (with its guard): the
    options shape the graph."""
    try:
        return var.as_python_constant()
    except Unsupported:
        raise unsupported(f"non-constant {what}", var.python_type().__name__,
                          "graphjit bakes the transform's options into the graph.") from None


def _check_options(name: str, options: dict) -> None:
    """Checks the transform makes when it is created (``vmap(f, randomness='x')`` raises
    there in eager): a graph break, so that eager raises."""
    try:
        if name == "vmap":
            _vmap._check_randomness_arg(options.get("randomness", "error"))
            if options.get("chunk_size") is not None and (not isinstance(options["chunk_size"], int)
                                                          or options["chunk_size"] <= 0):
                raise ValueError("chunk_size should be None or greater than 0.")
    except (ValueError, RuntimeError) as e:
        raise unsupported(f"torch.func.{name} options eager rejects", str(e)) from None


def _fn_name(fn: VariableTracker) -> str:
    value = getattr(fn, "value", None) or getattr(fn, "fn", None)
    name = getattr(value, "__name__", None)
    if name is None and hasattr(fn, "code"):
        name = fn.code.co_name
    return name or "fn"


def _leaf_inputs(tx, leaves: list[VariableTracker], *, drop: list | None = None,
                 grad: list | None = None) -> list:
    """Body inputs for the call's leaves (``drop[i]``: the batch dimension of leaf i)."""
    out = []
    for i, leaf in enumerate(leaves):
        d = drop[i] if drop is not None else None
        g = grad[i] if grad is not None else None
        out.append(input_for(leaf, drop_dim=d, requires_grad=g or None, tx=tx))
    return out


def _arg_leaf_ranges(spec: Spec) -> list[range]:
    """For a ``(args, kwargs)`` spec: the leaf indices of each positional argument."""
    ranges, start = [], 0
    for child in spec.children[0].children:
        ranges.append(range(start, start + child.num_leaves))
        start += child.num_leaves
    return ranges


def _differentiated(spec: Spec, n_leaves: int, argnums) -> list[bool]:
    ranges = _arg_leaf_ranges(spec)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    marked = [False] * n_leaves
    for num in nums:
        if isinstance(num, int) and -len(ranges) <= num < len(ranges):
            for i in ranges[num]:
                marked[i] = True
    return marked


def _fake_template(spec: Spec, leaves: list[VariableTracker]):
    return python_template(spec, [leaf.example_value if _is_graph_value(leaf) else leaf.as_python_constant()
                                  for leaf in leaves])


def _vmap_batch_dims(tx, var: TransformedFunctionVariable, spec: Spec, leaves: list) -> list:
    """The batch dimension of each leaf (``None``: not batched), from functorch's own
    ``_process_batched_inputs`` on the fake inputs (a call it rejects is a break)."""
    n_args = spec.children[0].num_leaves
    args_template = _fake_template(spec.children[0], leaves[:n_args])
    shim = types.SimpleNamespace(__name__=_fn_name(var.fn))
    try:
        with tx.output.fake_mode:
            _, flat_in_dims, _, _ = _vmap._process_batched_inputs(var.options.get("in_dims", 0), args_template, shim)
            _vmap._check_out_dims_is_int_or_int_pytree(var.options.get("out_dims", 0), shim)
    except ValueError as e:
        raise unsupported("torch.func.vmap inputs eager rejects", str(e)) from None
    return list(flat_in_dims) + [None] * (len(leaves) - n_args)


def _flat_vmap_call(var: TransformedFunctionVariable, leaves: list, inputs: list, batch_dims: list,
                    body) -> FlatVmapCall | None:
    """The cheaper graph target for a ``vmap`` whose checks passed at trace time (no
    ``chunk_size``, tensors out, ``out_dims`` fitting the output): ``None`` otherwise."""
    if var.options.get("chunk_size") is not None or not body.out_leaves or \
            not all(isinstance(leaf, TensorVariable) for leaf in body.out_leaves):
        return None
    in_dims = tuple(d for d, i in zip(batch_dims, inputs, strict=True) if isinstance(i, BodyInput))
    if all(d is None for d in in_dims):
        return None
    out_dims = var.options.get("out_dims", 0)
    if body.out_spec.kind == "leaf":  # (functorch's own special case for one tensor)
        flat = [out_dims] if isinstance(out_dims, int) or out_dims is None else \
            list(out_dims) if isinstance(out_dims, tuple) and len(out_dims) == 1 else None
    else:
        flat = torch.utils._pytree._broadcast_to_and_flatten(out_dims, torch_spec(body.out_spec))
    if flat is None or any(d is not None and not isinstance(d, int) for d in flat):
        return None  # (eager's error: the general call raises it)
    return FlatVmapCall(in_dims, tuple(flat), var.options.get("randomness", "error"),
                        torch_spec(body.out_spec), _fn_name(var.fn))


def _flat_grad_call(var: TransformedFunctionVariable, spec: Spec, leaves: list, inputs: list,
                    body) -> FlatGradCall | None:
    """The cheaper graph target for ``grad``/``grad_and_value`` whose checks passed at
    trace time: ``None`` where functorch would raise or the structure is unusual (the
    general call then runs functorch itself)."""
    argnums, has_aux = var.options.get("argnums", 0), var.options.get("has_aux", False)
    if not all(isinstance(i, BodyInput) and isinstance(i.example, torch.Tensor) or
               not isinstance(i, BodyInput) and not _is_graph_value(leaves[k]) for k, i in enumerate(inputs)):
        return None
    template = python_template(spec, [INPUT if isinstance(i, BodyInput) else i.as_python_constant()
                                      for i in inputs])
    try:
        diff_args = _eager._slice_argnums(template[0], argnums, as_tuple=False)
    except Exception:  # noqa: BLE001  (eager's error: the general call raises it)
        return None
    diff_leaves, diff_spec = torch.utils._pytree.tree_flatten(diff_args)
    if not diff_leaves or any(leaf is not INPUT for leaf in diff_leaves):
        return None
    # the differentiated inputs, in flatten order of the arguments they come from
    positions = [k for k, i in enumerate(inputs) if isinstance(i, BodyInput)]
    ranges = _arg_leaf_ranges(spec)
    nums = (argnums,) if isinstance(argnums, int) else argnums
    diff = tuple(positions.index(leaf) for num in nums for leaf in ranges[num % len(ranges)]
                 if leaf in positions)
    out = body.out_spec
    if has_aux:
        if out.kind != "tuple" or out.cls is not tuple or len(out.children) != 2 or out.children[0].kind != "leaf":
            return None
        output, aux_leaves = body.out_leaves[0], body.out_leaves[1:]
        aux_spec = torch_spec(out.children[1])
    else:
        if out.kind != "leaf":
            return None
        output, aux_leaves, aux_spec = body.out_leaves[0], [], None
    if not isinstance(output, TensorVariable) or output.example_value.dim() != 0 or \
            not all(isinstance(a, TensorVariable) for a in aux_leaves):
        return None
    with_value = var.name == "grad_and_value"
    value_spec = torch.utils._pytree.tree_flatten(0)[1]
    if has_aux:
        value_spec = torch.utils._pytree.tree_flatten((0, _unflat_zeros(aux_spec)))[1]
    grads = torch.utils._pytree.tree_unflatten([0] * len(diff_leaves), diff_spec)
    if with_value:
        shape = (grads, torch.utils._pytree.tree_unflatten([0] * value_spec.num_leaves, value_spec))
    else:
        shape = (grads, _unflat_zeros(aux_spec)) if has_aux else grads
    result_spec = torch.utils._pytree.tree_flatten(shape)[1]
    return FlatGradCall(len(positions), diff, has_aux, with_value, result_spec, _fn_name(var.fn))


def _unflat_zeros(spec):
    return torch.utils._pytree.tree_unflatten([0] * spec.num_leaves, spec)


def _apply_wrap_style(tx, var: TransformedFunctionVariable, args: list, kwargs: dict) -> VariableTracker:
    call = TupleVariable([TupleVariable(args), DictVariable(kwargs)])
    leaves, spec = tree_flatten(tx, call)
    batch_dims = None
    if var.name == "vmap":
        batch_dims = _vmap_batch_dims(tx, var, spec, leaves)
        inputs = _leaf_inputs(tx, leaves, drop=batch_dims)
        for d, i in zip(batch_dims, inputs):
            if isinstance(i, BodyInput):
                i.batched = d is not None
    elif var.name in ("grad", "grad_and_value", "jacrev", "jacfwd", "hessian"):
        inputs = _leaf_inputs(tx, leaves, grad=_differentiated(spec, len(leaves), var.options.get("argnums", 0)))
    else:
        inputs = _leaf_inputs(tx, leaves)
    once = var.name != "vmap" or var.options.get("chunk_size") is None  # (chunks: called per chunk)
    body = trace_body(tx, f"{var.name}_body", var.fn, inputs, spec, with_kwargs=True, side_effects=once)
    target = None
    if var.name == "vmap":
        target = _flat_vmap_call(var, leaves, inputs, batch_dims, body)
    elif var.name in ("grad", "grad_and_value"):
        target = _flat_grad_call(var, spec, leaves, inputs, body)
    if target is None:
        template = python_template(spec, [INPUT if isinstance(i, BodyInput) else i.as_python_constant()
                                          for i in inputs])
        target = TransformCall(var.transform, var.options, "wrap", template, template, torch_spec(body.out_spec),
                               _fn_name(var.fn))
    explicit = [leaf.node for leaf, i in zip(leaves, inputs, strict=True) if isinstance(i, BodyInput)]
    out = tx.output
    result = _emit(tx, target, (out.install_body(body.gm), *explicit, *body.lifted), f"torch.func.{var.name}")
    if var.name == "vmap" and not var.options.get("chunk_size"):
        result = _returned_inputs(var, leaves, inputs, batch_dims, body, result)
    return result


def _returned_inputs(var, leaves: list, inputs: list, batch_dims: list, body, result) -> VariableTracker:
    """A vmapped function that returns its batched input (mutated in place: ``vmap(
    Tensor.acos_)(x)``) gives back that very tensor where the output's batch dimension is
    the input's (functorch's ``_remove_batch_dim`` unwraps it): the output is the input's
    tracker, so ``y is x`` holds as in eager."""
    placeholders = list(body.gm.graph.find_nodes(op="placeholder"))[:body.n_explicit]
    explicit = [(leaf, d) for leaf, i, d in zip(leaves, inputs, batch_dims, strict=True) if isinstance(i, BodyInput)]
    out_dims = var.options.get("out_dims", 0)
    flat = list(result.items) if isinstance(result, TupleVariable) else [result]
    if len(flat) != len(body.out_leaves):
        return result
    changed = False
    for k, leaf in enumerate(body.out_leaves):
        node = getattr(leaf, "node", None)
        if node is None or node not in placeholders:
            continue
        outer, in_dim = explicit[placeholders.index(node)]
        out_dim = out_dims[k] if isinstance(out_dims, tuple) and len(out_dims) == len(flat) else out_dims
        if isinstance(outer, TensorVariable) and isinstance(out_dim, int) and in_dim == out_dim:
            flat[k], changed = outer, True
    if not changed:
        return result
    return TupleVariable(flat) if isinstance(result, TupleVariable) else flat[0]


def _apply_call_style(tx, var: FuncTransformVariable, fn: VariableTracker, params: dict) -> VariableTracker:
    """``vjp(fn, *primals, has_aux=...)``, ``jvp(fn, primals, tangents, ...)``,
    ``linearize(fn, *primals)``."""
    name = var.name
    try:
        if name == "jvp":
            primals, tangents = params.pop("primals"), params.pop("tangents")
            options = {k: _constant(v, f"jvp {k}") for k, v in params.items()}
            call = TupleVariable([TupleVariable([primals, tangents]), DictVariable({})])
            leaves, spec = tree_flatten(tx, call)
            n_primals = spec.children[0].children[0].num_leaves
            if spec.children[0].children[0].kind != "tuple":
                raise unsupported("torch.func.jvp primals that are not a tuple", "", "Eager raises for it.")
            fn_spec = Spec("tuple", tuple, (), (spec.children[0].children[0], spec.children[1]))
            body_leaves = leaves[:n_primals]
        else:
            primals = params.pop("primals")
            options = {k: _constant(v, f"{name} {k}") for k, v in params.items()}
            call = TupleVariable([TupleVariable(list(primals)), DictVariable({})])
            leaves, spec = tree_flatten(tx, call)
            fn_spec, body_leaves = spec, leaves
        inputs = _leaf_inputs(tx, body_leaves, grad=[True] * len(body_leaves) if name == "vjp" else None)
        body = trace_body(tx, f"{name}_body", fn, inputs, fn_spec, with_kwargs=True, side_effects=True)
        marks = [INPUT if _is_graph_value(leaf) else leaf.as_python_constant() for leaf in leaves]
        fn_marks = [INPUT if isinstance(i, BodyInput) else i.as_python_constant() for i in inputs]
        target = TransformCall(var.transform, options, "call", python_template(spec, marks),
                               python_template(fn_spec, fn_marks), torch_spec(body.out_spec), _fn_name(fn),
                               returns_function=name in ("vjp", "linearize"))
        explicit = [leaf.node for leaf in leaves if _is_graph_value(leaf)]
        out = tx.output
        return _emit(tx, target, (out.install_body(body.gm), *explicit, *body.lifted), f"torch.func.{name}")
    except Unsupported as e:
        if e.gb_type.endswith("not captured"):
            raise
        raise capture_failed(f"torch.func.{name}", e) from None


def _emit(tx, target, node_args: tuple, what: str) -> VariableTracker:
    """The node calling ``target``, its result rebuilt in the structure the call gave."""
    out = tx.output
    example = out.run_fake(target, node_args)  # an error here is the program's (eager's)
    node = out.record(tx, target, node_args, example, wrap=False)
    returns_function = getattr(target, "returns_function", False)
    values = list(example[:-1]) if returns_function else list(example)
    items = [_item(out, node, i, v, what) for i, v in enumerate(values)]
    result = tree_unflatten(from_torch_spec(target.result_spec), items)
    if not returns_function:
        return result
    fn_node = out.graph.create_node("call_function", operator.getitem, (node, len(values)))
    fn_node.meta["example_value"] = example[-1]
    kind = "vjp" if target.transform is _eager.vjp else "linearize"
    function = GraphFunctionVariable(fn_node, example[-1], kind)
    return TupleVariable([result.items[0], function, *result.items[1:]])


def _item(out, node, i: int, value, what: str) -> VariableTracker:
    if isinstance(value, torch.Tensor):
        item = out.graph.create_node("call_function", operator.getitem, (node, i))
        item.meta["example_value"] = value
        return TensorVariable(item, value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        item = out.graph.create_node("call_function", operator.getitem, (node, i))
        return SymNodeVariable(item, value)
    if is_constant_value(value):
        return ConstantVariable(value)
    raise unsupported(f"{what} returning a {type(value).__name__}", "",
                      "Only tensors, numbers and constants can be results of a transform in the graph.")


def _wrapper_codes() -> dict:
    """The code of the function each "wrap" transform returns -> the transform and the
    closure variables that are its options (a transformed function made before the call:
    ``@torch.func.grad`` on a global)."""
    def probe(x):
        return x

    codes = {}
    for transform in (_apis.vmap, _apis.grad, _apis.grad_and_value, _eager.jacrev, _eager.jacfwd):
        fn = transform(probe)
        options = tuple(n for n in fn.__code__.co_freevars if n not in ("func", "eager_transforms"))
        codes.setdefault(fn.__code__, (transform, options))
    return codes


WRAPPER_CODES = _wrapper_codes()


def _is_transformed_function(value) -> bool:
    return isinstance(value, types.FunctionType) and value.__code__ in WRAPPER_CODES and \
        value.__closure__ is not None


@register_builder_predicate(_is_transformed_function)
def _build_transformed_function(tx, value, source):
    """``vmap(f, ...)`` made before the call: its transform, function and options are read
    from its closure (the function object is guarded by identity)."""
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    transform, names = WRAPPER_CODES[value.__code__]
    cells = dict(zip(value.__code__.co_freevars, (c.cell_contents for c in value.__closure__), strict=True))
    options = {name: cells[name] for name in names}
    fn = VariableTracker.build(tx, cells["func"])
    return TransformedFunctionVariable(transform, fn, options, source=source)


@register_builder_by_id(*TRANSFORMS, *ALIASES)
def _build_transform(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return FuncTransformVariable(ALIASES.get(value, value), source=source)


__all__ = ["FuncTransformVariable", "TransformedFunctionVariable", "GraphFunctionVariable", "ObservedException",
           "fresh_like"]

"""torch.func transforms in compiled code (``variables/hops/transforms.py``): ``vmap``,
``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``,
``linearize`` and ``functional_call`` (``variables/functional_call.py``).

Each program runs eagerly and compiled (return values, mutated inputs, stdout, exceptions,
RNG state and global modes after the call: ``check_same``) with ``eager`` and
``aot_eager``; its graph count is pinned to torch.compile's (measured by
``test_graph_count_equals_torch_compile``), and where that is one graph it must hold
under ``fullgraph=True``.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch.func import (functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize,
                        stack_module_state, vjp, vmap)

import graphjit
from graphjit.runtime.mode_state import capture_modes
from graphjit.testing import CompileCounter, check_same

torch.manual_seed(0)
W = torch.randn(3, 3)
M = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
P = {k: torch.randn_like(v) for k, v in M.named_parameters()}
MODELS = [torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)) for _ in range(3)]
SP, SB = stack_module_state(MODELS)
BASE = MODELS[0]


# -- the programs ---------------------------------------------------------------------------

def vmap_closure(x):
    return vmap(lambda r: torch.sin(r @ W))(x)


def vmap_in_dims(x, y):
    return vmap(lambda a, b: (a * b).sum(0), in_dims=(1, None), out_dims=0)(x, y)


def vmap_out_dims(x):
    return vmap(lambda a: (a.sin(), a.cos()), out_dims=(0, 1))(x)


def vmap_nested(x):
    return vmap(vmap(lambda a: a * 2 + 1))(x)


def vmap_kwargs(x, s):
    return vmap(lambda a, scale=1.0: a * scale)(x, scale=s)


def vmap_torch_alias(x):
    return torch.vmap(torch.outer, in_dims=(0, None))(x, x[0])


def vmap_randomness_different(x):
    return vmap(lambda a: a + torch.rand(()), randomness="different")(x)


def vmap_randomness_same(x):
    return vmap(lambda a: a + torch.rand(()), randomness="same")(x)


def vmap_randomness_error(x):  # eager raises; so must the compiled call
    return vmap(lambda a: a + torch.rand(()))(x)


def vmap_chunk_size(x):
    return vmap(lambda a: a.sum(), chunk_size=2)(x)


def vmap_dict_input(d):
    return vmap(lambda d: d["a"] * d["b"])(d)


def vmap_bad_in_dims(x):  # eager's ValueError
    return vmap(torch.sin, in_dims=(0, 1))(x)


def grad_argnums(x, y):
    return grad(lambda a, b: (a * b).sin().sum(), argnums=(0, 1))(x, y)


def grad_has_aux(x):
    return grad(lambda a: ((a ** 2).sum(), {"mean": a.mean()}), has_aux=True)(x)


def grad_of_grad(x):
    return grad(grad(lambda a: a.sin().sum() if a.dim() == 0 else a.sin()))(x)


def grad_and_value_call(x):
    return grad_and_value(lambda a: a.exp().sum())(x)


def grad_negative_argnums_kwargs(x, y, z):
    return grad(lambda a, b, scale=None: (a * b * scale).sum(), argnums=-1)(x, y, scale=z)


def grad_tuple_args(x, y):
    return grad_and_value(lambda t: (t[0] * t[1]).sum(), has_aux=False)((x, y))


def grad_aux_int(x):  # eager's RuntimeError: aux must hold tensors
    return grad(lambda a: (a.sum(), 3), has_aux=True)(x)


def grad_non_tensor_argnum(x):  # eager's ValueError
    return grad(lambda a, n: (a * n).sum(), argnums=1)(x, 2.0)


def grad_non_scalar(x):  # eager's RuntimeError
    return grad(lambda a: a * 2)(x)


def vjp_call(x):
    out, fn = vjp(torch.sin, x)
    return out, fn(torch.ones_like(out))


def jvp_call(x):
    return jvp(lambda a: a.sin() * 2, (x,), (torch.ones_like(x),))


def jacrev_call(x):
    return jacrev(torch.sin)(x)


def jacfwd_call(x):
    return jacfwd(lambda a: a.sin().sum(0))(x)


def hessian_call(x):
    return hessian(lambda a: a.pow(3).sum())(x)


def linearize_call(x):  # a graph break (as torch.compile): linearize runs make_fx when called
    out, fn = linearize(torch.sin, x)
    return out, fn(torch.ones_like(x))


def functional_call_dict(x):
    return functional_call(M, P, (x,))


def functional_call_two_dicts(x):
    items = list(P.items())
    return functional_call(M, (dict(items[:2]), dict(items[2:])), x)


def functional_call_strict_missing(x):  # eager's RuntimeError
    return functional_call(M, {"0.weight": P["0.weight"]}, (x,), strict=True)


def ensemble(x):
    return vmap(lambda p, b, x: functional_call(BASE, (p, b), (x,)), in_dims=(0, 0, None))(SP, SB, x)


def per_sample_grads(x, y):
    params = {k: v.detach() for k, v in M.named_parameters()}

    def loss(p, xi, yi):
        out = functional_call(M, p, (xi.unsqueeze(0),))
        return torch.nn.functional.mse_loss(out, yi.unsqueeze(0))

    return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)


def body_raises(x):
    def f(a):
        raise ValueError("bad body")
    return vmap(f)(x)


LOG = []


def body_side_effect(x):  # the body runs once per call: its append is replayed once
    def f(a):
        LOG.append("f")
        return a * 2
    return grad(lambda t: vmap(f)(t).sum())(x)


def body_side_effect_chunked(x):  # called once per chunk: the vmap runs in Python
    def f(a):
        LOG.append(1)
        return a * 2
    return vmap(f, chunk_size=2)(x)


def body_stores_its_tensor(x):  # in eager a wrapped tensor escapes: the vmap runs in Python
    def f(a):
        LOG.append(a)
        return a * 2
    return vmap(f)(x)


@grad
def decorated_grad(x):
    return (x.sin() * 2).sum()


VMAPPED = vmap(lambda r: r.cos() + 1, in_dims=1)
HESSIAN = hessian(lambda a: a.pow(3).sum())


def transformed_globals(x):  # transformed functions made before the call
    return decorated_grad(x) + VMAPPED(x.unsqueeze(1)).squeeze(1) + HESSIAN(x).sum(0)


def vmap_batched_predicate(x, y):
    """``torch._C._functorch.is_batchedtensor`` in a vmapped function: true of a batched
    input and of what is computed from it, false of an unbatched one and of a new tensor."""
    def g(a, b):
        flags = [torch._C._functorch.is_batchedtensor(t) for t in (a, b, a * b, torch.ones(2))]
        return (a * 2 if flags[0] else a) + (b if flags[1] else 0), torch.tensor(flags)

    return vmap(g, in_dims=(0, None), out_dims=(0, None))(x, y)


def vmap_returns_mutated_input(x):
    """A vmapped in-place method returns its input: the very tensor (``y is a``), as
    functorch unwraps it where the batch dimensions agree; with another out_dim, a view."""
    a, b = x.clone(), x.clone()
    y = vmap(torch.Tensor.acos_)(a)
    z = vmap(lambda t: t.mul_(2), out_dims=1)(b)
    return y is a, z is b, y, z, a, b


R = torch.randn
#: name -> (program, arguments, torch.compile's graph count with backend "eager")
PROGRAMS = {
    "vmap_closure": (vmap_closure, (R(4, 3),), 1),
    "vmap_in_dims": (vmap_in_dims, (R(3, 5), R(3)), 1),
    "vmap_out_dims": (vmap_out_dims, (R(4, 3),), 1),
    "vmap_nested": (vmap_nested, (R(2, 3, 4),), 1),
    "vmap_kwargs": (vmap_kwargs, (R(4, 3), 3.0), 1),
    "vmap_torch_alias": (vmap_torch_alias, (R(4, 3),), 1),
    "vmap_randomness_different": (vmap_randomness_different, (R(4),), 1),
    "vmap_randomness_same": (vmap_randomness_same, (R(4),), 1),
    "vmap_chunk_size": (vmap_chunk_size, (R(5, 3),), 1),
    "vmap_dict_input": (vmap_dict_input, ({"a": R(4, 2), "b": R(4, 2)},), 1),
    "grad_argnums": (grad_argnums, (R(3), R(3)), 1),
    "grad_has_aux": (grad_has_aux, (R(3),), 1),
    "grad_of_grad": (grad_of_grad, (R(()),), 1),
    "grad_negative_argnums_kwargs": (grad_negative_argnums_kwargs, (R(3), R(3), R(3)), 1),
    "grad_tuple_args": (grad_tuple_args, (R(3), R(3)), 1),
    "grad_and_value": (grad_and_value_call, (R(3),), 1),
    "vjp": (vjp_call, (R(3),), 1),
    "jvp": (jvp_call, (R(3),), 1),
    "jacrev": (jacrev_call, (R(3),), 1),
    "jacfwd": (jacfwd_call, (R(2, 3),), 1),
    "hessian": (hessian_call, (R(3),), 1),
    "linearize": (linearize_call, (R(3),), 2),
    "functional_call_dict": (functional_call_dict, (R(5, 3),), 1),
    "functional_call_two_dicts": (functional_call_two_dicts, (R(5, 3),), 1),
    "ensemble": (ensemble, (R(5, 3),), 1),
    "per_sample_grads": (per_sample_grads, (R(6, 3), R(6, 2)), 1),
    "transformed_globals": (transformed_globals, (R(3),), 1),
    "vmap_batched_predicate": (vmap_batched_predicate, (R(4, 2), R(2)), 1),
    "vmap_returns_mutated_input": (vmap_returns_mutated_input, (R(4, 2).clamp(-0.9, 0.9),), 1),
}

#: programs where eager raises: the compiled call raises the same (no graph is needed)
RAISING = {
    "vmap_randomness_error": (vmap_randomness_error, (R(4),)),
    "vmap_bad_in_dims": (vmap_bad_in_dims, (R(4),)),
    "grad_non_scalar": (grad_non_scalar, (R(3),)),
    "grad_aux_int": (grad_aux_int, (R(3),)),
    "grad_non_tensor_argnum": (grad_non_tensor_argnum, (R(3),)),
    "functional_call_strict_missing": (functional_call_strict_missing, (R(5, 3),)),
    "body_raises": (body_raises, (R(3),)),
}


# -- tests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_as_eager(name, backend):
    fn, args, dynamo_graphs = PROGRAMS[name]
    check_same(fn, *args, backend=backend, fullgraph=dynamo_graphs == 1)
    cnt = check_same(fn, *args)  # two calls
    assert cnt.frame_count == FEWER_GRAPHS.get(name, dynamo_graphs)


#: graphjit's graphs over two calls where they are fewer than torch.compile's over one.
#: linearize: its jvp_fn is a new closure per call, called after the break; torch.compile
#: recompiles the resume frame for each one (2 graphs a call); graphjit dispatches a
#: closure called at a break by its code, so the resume function compiles once.
FEWER_GRAPHS = {"linearize": 1}


@pytest.mark.parametrize("name", list(RAISING))
def test_eager_errors_reach_the_user(name):
    fn, args = RAISING[name]
    before = capture_modes()
    check_same(fn, *args)
    check_same(fn, *args, backend="aot_eager")
    assert capture_modes() == before
    assert torch._C._functorch.get_dynamic_layer_stack_depth() == 0


@pytest.mark.parametrize("name", ["vmap_closure", "vmap_nested", "grad_has_aux", "vjp", "jacrev", "hessian",
                                  "functional_call_dict", "ensemble", "per_sample_grads", "linearize",
                                  "transformed_globals", "vmap_batched_predicate",
                                  "vmap_returns_mutated_input"])
def test_graph_count_equals_torch_compile(name):
    fn, args, pinned = PROGRAMS[name]
    torch._dynamo.reset()
    counter = CompileCounter()
    try:
        torch.compile(fn, backend=counter)(*args)
    finally:
        torch._dynamo.reset()
    assert counter.frame_count == pinned, f"torch.compile now makes {counter.frame_count} graphs"


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_side_effects_in_a_body_run_once_per_call(backend):
    LOG.clear()
    check_same(body_side_effect, R(3), backend=backend, fullgraph=True)
    assert LOG == ["f"] * 4  # two calls, eager and compiled each: once per call
    cnt = check_same(body_side_effect, R(3), fullgraph=True)
    assert cnt.frame_count == 1


def test_side_effects_of_a_body_run_per_chunk_are_a_break():
    LOG.clear()
    cnt = check_same(body_side_effect_chunked, R(5))
    assert LOG == [1] * 12  # 3 chunks, 2 calls, eager and compiled each
    assert cnt.frame_count == 0
    reasons = [r.reason for r in graphjit.stats()["break_reasons"]]
    assert any("side effect in a higher-order operator's body" in r for r in reasons), reasons


def test_a_body_value_stored_outside_is_a_break():
    LOG.clear()
    compiled = graphjit.compile(body_stores_its_tensor, backend="eager")
    x = R(3)
    torch.testing.assert_close(compiled(x), x * 2)
    reasons = [r.reason for r in graphjit.stats()["break_reasons"]]
    assert any("storing a value it computes outside it" in r for r in reasons), reasons
    with pytest.raises(graphjit.Unsupported, match="storing a value it computes"):
        graphjit.reset()
        graphjit.compile(body_stores_its_tensor, backend="eager", fullgraph=True)(R(3))
    LOG.clear()


@pytest.mark.parametrize("name, target", [("vmap_closure", "FlatVmapCall"), ("vmap_chunk_size", "TransformCall"),
                                          ("grad_argnums", "FlatGradCall"), ("grad_and_value", "FlatGradCall"),
                                          ("grad_has_aux", "FlatGradCall"), ("jacrev", "TransformCall")])
def test_flat_targets_where_the_checks_passed(name, target):
    """vmap and grad whose checks passed at trace time call functorch's primitives directly
    (no pytree work per call); the others call the transform itself."""
    fn, args, _ = PROGRAMS[name]
    cnt = check_same(fn, *args, fullgraph=True)
    targets = [type(n.target).__name__ for n in cnt.graphs[0].graph.nodes if n.op == "call_function"]
    assert target in targets, targets


def test_graph_holds_the_transform_node():
    cnt = check_same(vmap_closure, R(4, 3), fullgraph=True)
    code = cnt.graphs[0].code
    assert "vmap_call" in code and "vmap_body_0" in code, code
    body = cnt.graphs[0].vmap_body_0
    assert [n.op for n in body.graph.nodes].count("placeholder") == 2  # the row, and W lifted


# -- gradients through the transforms ---------------------------------------------------------

def _grads(fn, *args):
    params = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    out = fn(*args)
    loss = sum(o.sum() for o in (out if isinstance(out, tuple) else (out,)))
    return out, torch.autograd.grad(loss, params)


def vmap_weight(x, w):
    return vmap(lambda r: torch.tanh(r @ w))(x)


def grad_then_loss(x, w):
    return grad(lambda a: (a * w).sin().sum())(x) * w


GRAD_CASES = {
    "vmap_weight": (vmap_weight, lambda: (R(4, 3), R(3, 3).requires_grad_())),
    "grad_then_loss": (grad_then_loss, lambda: (R(3, 3), R(3, 3).requires_grad_())),
    "jacrev": (jacrev_call, lambda: (R(3).requires_grad_(),)),
    "per_sample_grads": (lambda x, y: per_sample_grads(x, y)["0.weight"] * x.sum(), lambda: (R(6, 3).requires_grad_(),
                                                                                         R(6, 2))),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_gradients_through_transforms(case, backend):
    fn, make = GRAD_CASES[case]
    args = make()
    expected = _grads(fn, *args)
    graphjit.reset()
    actual = _grads(graphjit.compile(fn, backend=backend, fullgraph=True), *args)
    for e, a in zip(expected[1], actual[1], strict=True):
        torch.testing.assert_close(a, e)


# -- the world changes between calls ----------------------------------------------------------

IN_DIMS = (0, None)


def vmap_global_in_dims(x, y):
    return vmap(lambda a, b: a * b, in_dims=IN_DIMS)(x, y)


def test_global_options_and_closure_changes_recompile():
    global IN_DIMS, W
    cnt = CompileCounter()
    compiled = graphjit.compile(vmap_global_in_dims, backend=cnt)
    x, y = R(3, 4), R(4)
    torch.testing.assert_close(compiled(x, y), vmap_global_in_dims(x, y))
    old = IN_DIMS
    try:
        IN_DIMS = (1, None)
        y = R(3)
        torch.testing.assert_close(compiled(x, y), vmap_global_in_dims(x, y))
        assert cnt.frame_count == 2
    finally:
        IN_DIMS = old
    compiled = graphjit.compile(vmap_closure, backend="eager")
    x = R(4, 3)
    compiled(x)
    old_w = W
    try:
        W = R(3, 3)
        torch.testing.assert_close(compiled(x), vmap_closure(x))
    finally:
        W = old_w


def test_options_from_arguments_specialize():
    def fn(x, d):
        return vmap(torch.sin, in_dims=d)(x)

    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt)
    x = R(3, 4)
    for d in (0, 1, 0, 1):  # an int argument (symbolic after the first change) is specialized
        torch.testing.assert_close(compiled(x, d), fn(x, d))
    assert cnt.frame_count == 2


def test_functional_call_params_change_between_calls():
    compiled = graphjit.compile(lambda p, x: functional_call(M, p, (x,)), backend="eager", fullgraph=True)
    x = R(2, 3)
    for _ in range(3):
        params = {k: torch.randn_like(v) for k, v in M.named_parameters()}
        torch.testing.assert_close(compiled(params, x), functional_call(M, params, (x,)))
    partial = {"2.bias": torch.zeros(2)}  # fewer keys: the module's own for the others
    torch.testing.assert_close(compiled(partial, x), functional_call(M, partial, (x,)))
    M[2].bias.data.add_(1)  # the module's own parameter, read where not replaced
    torch.testing.assert_close(compiled(partial, x), functional_call(M, partial, (x,)))
    M[2].bias.data.sub_(1)


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(2, 2, bias=False)
        self.b = torch.nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


TIED = Tied()


@pytest.mark.parametrize("tie", [True, False])
def test_functional_call_tied_weights(tie):
    def fn(w, x):
        return functional_call(TIED, {"a.weight": w}, (x,), tie_weights=tie)

    check_same(fn, R(2, 2), R(3, 2), fullgraph=True)

    def both(w, v, x):  # different values for tied names: eager's ValueError when tying
        return functional_call(TIED, {"a.weight": w, "b.weight": v}, (x,), tie_weights=tie)

    check_same(both, R(2, 2), R(2, 2), R(3, 2))


def test_functional_call_leaves_the_module_as_it_was():
    before = {k: v for k, v in M.named_parameters()}
    check_same(functional_call_dict, R(5, 3), fullgraph=True)
    assert {k: v for k, v in M.named_parameters()} == before
    assert all(M.get_parameter(k) is v for k, v in before.items())


@pytest.mark.slow
def test_inductor_compiles_transforms_and_control_flow():
    def fn(x, y):
        per_row = vmap(lambda r: torch.sin(r @ W))(x)
        g = grad(lambda a: (a * y).cos().sum())(y)
        return torch.cond(per_row.sum() > 0, lambda a: a * 2, lambda a: a - 1, (per_row,)), g

    x, y = R(4, 3), R(3)
    expected = fn(x, y)
    graphjit.reset()
    actual = graphjit.compile(fn, backend="inductor", fullgraph=True)(x, y)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)

"""An optimizer's own ``step`` compiled, and the pieces of traced Python it needs.

* ``Tensor.grad`` of a tensor from outside the graph is read through ``source.grad``: a
  graph input, or ``None``; guarded either way (a gradient that appears, disappears or is
  replaced between calls is followed).
* Tensors key dicts and sets by identity: a lookup of a parameter in a pre-existing dict
  (an optimizer's ``state``) reads the real entry, the key's identity guarded; sets and
  dicts the trace makes of the call's tensors are rebuilt with that call's tensors.
* ``addcdiv_``/``addcmul_`` with a 0-d tensor ``value`` (a compiled optimizer's step size).
* ``graphjit.compile(opt.step)`` for SGD (momentum), Adam and AdamW gives eager's
  parameters and state over several steps in one graph: the first step, which creates the
  state, runs in Python; TorchDynamo's own patch of ``_init_group`` is seen through.
  Changing a hyperparameter between steps recompiles and follows eager.

Every test runs with the ``eager`` backend and ``aot_eager``.  Compiled optimizers compute
their step sizes as float32 tensors (eager: Python floats), so trajectories are compared
with a tolerance of a few ulps.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import graphjit
from _shared import compare_call, counting_backend, seeded_randn

_r = seeded_randn(9700)
BACKENDS = ["eager", "aot_eager"]


# --------------------------------------------------------------------------------------
# Tensor.grad
# --------------------------------------------------------------------------------------

def grad_or_zeros(p, x):
    g = p.grad
    if g is None:
        return x * 0, None
    return x * g, g.shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_read_follows_the_world(backend):
    """``p.grad`` None, then set, then replaced by another tensor, then None again."""
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(grad_or_zeros, backend=be)
    p, x = nn.Parameter(_r(3)), _r(3, seed=1)
    for grad in (None, _r(3, seed=2), _r(3, seed=3), None, _r(3, seed=4)):
        p.grad = grad
        want = grad_or_zeros(p, x)
        got = compiled(p, x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    assert cnt.frame_count == 2  # one entry for "no grad", one for "a grad" (any values)


def grad_of_new_leaf(x):
    t = torch.zeros(3, requires_grad=True)
    return x + 1, t.grad is None


def test_grad_of_a_tensor_made_in_the_graph_is_none():
    graphjit.reset()
    compiled = graphjit.compile(grad_of_new_leaf, backend="eager", fullgraph=True)
    compare_call(grad_of_new_leaf, compiled, (_r(3),))


def detach_if_non_leaf(x):
    if x.grad_fn is None:
        return x * 2, "leaf"
    return x.detach() * 3, "non-leaf"


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_fn_follows_the_world(backend):
    """``x.grad_fn is None`` is guarded: a non-leaf input on a later call takes the other
    branch (and a parameter's, always a leaf's, needs no guard)."""
    graphjit.reset()
    compiled = graphjit.compile(detach_if_non_leaf, backend=backend)
    leaf = _r(3).requires_grad_()
    for x in (leaf, leaf * 1, _r(3), leaf * 2):
        got, want = compiled(x), detach_if_non_leaf(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]


def grad_scaled_update(params, lr):
    for p in params:
        p.data.add_(p.grad, alpha=-lr)
    return [p.grad.norm() for p in params]


@pytest.mark.parametrize("backend", BACKENDS)
def test_grads_of_a_parameter_list(backend):
    graphjit.reset()
    compiled = graphjit.compile(grad_scaled_update, backend=backend)
    ps = [nn.Parameter(_r(4, seed=i)) for i in range(3)]
    for p in ps:
        p.grad = _r(4, seed=10 + p.numel())
    eager_ps = copy.deepcopy(ps)
    for e, p in zip(eager_ps, ps):
        e.grad = p.grad.clone()
    for _ in range(2):
        want = grad_scaled_update(eager_ps, 0.1)
        got = compiled(ps, 0.1)
        torch.testing.assert_close(got, want)
        for e, p in zip(eager_ps, ps):
            torch.testing.assert_close(p.data, e.data)


# --------------------------------------------------------------------------------------
# tensors as dict keys
# --------------------------------------------------------------------------------------

def scaled_by_state(state, p, x):
    entry = state[p]
    entry["n"] += 1
    return x * entry["scale"], p in state, entry["n"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_keyed_state(backend):
    """Lookups by parameter follow which parameter is passed (its identity is guarded)."""
    graphjit.reset()
    compiled = graphjit.compile(scaled_by_state, backend=backend)
    a, b, x = nn.Parameter(_r(2)), nn.Parameter(_r(2, seed=1)), _r(2, seed=2)
    states = [{a: {"n": 0, "scale": 2.0}, b: {"n": 10, "scale": -3.0}} for _ in range(2)]
    for p in (a, b, a, b):
        want = scaled_by_state(states[0], p, x)
        got = compiled(states[1], p, x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
    assert [d["n"] for d in states[0].values()] == [d["n"] for d in states[1].values()] == [2, 12]


def missing_key(state, p, x):
    if p in state:
        return x + 1
    state[p] = x.sum()
    return x - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_key_inserted(backend):
    graphjit.reset()
    compiled = graphjit.compile(missing_key, backend=backend)
    p, x = _r(2), _r(2, seed=1)
    eager_state, state = {}, {}
    for _ in range(3):
        torch.testing.assert_close(compiled(state, p, x), missing_key(eager_state, p, x))
    assert list(state) == [p] and torch.equal(state[p], eager_state[p])


def tensor_keyed_containers_escape(x, y):
    seen = {x, y, x}
    weights = {x: 1.0, y: 2.0}
    weights[x] += 1
    return x + y, seen, weights, frozenset([y]) | seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_keyed_containers_escape(backend):
    """A set and a dict the trace makes with the call's tensors as keys are rebuilt with
    *that call's* tensors (no identity guard: fresh tensors every call, one graph)."""
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(tensor_keyed_containers_escape, backend=be, fullgraph=True)
    for seed in range(3):
        x, y = _r(2, seed=seed), _r(2, seed=10 + seed)
        _, seen, weights, union = compiled(x, y)
        assert len(seen) == 2 and any(t is x for t in seen) and any(t is y for t in seen)
        assert list(weights) == [x, y] and [weights[x], weights[y]] == [2.0, 2.0]
        assert len(union) == 2 and all(any(t is u for u in union) for t in (x, y))
    assert cnt.frame_count == 1


def set_of_two(x, y):
    s = {x, y}
    d = {x: 1}
    d[y] = 2
    return x + 1, len(s), sorted(d.values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_keys_aliased_on_a_later_call(backend):
    """Keys counted as two distinct tensors when traced: the same tensor passed twice on
    a later call is one key in eager, so the entry must not serve that call."""
    graphjit.reset()
    compiled = graphjit.compile(set_of_two, backend=backend)
    a, b = _r(2), _r(2, seed=1)
    for args in ((a, b), (a, a), (b, a), (b, b)):
        got, want = compiled(*args), set_of_two(*args)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]


def key_of_computed_tensor(x):
    y = x * 2
    d = {y: 1}
    s = {y, x + 1}
    return y, d, s, y in s, (x * 2) in d


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_made_in_the_graph_as_a_key(backend):
    """A tensor the graph computes keys a dict or a set by its identity; where they
    escape, the key is the very tensor the call returns."""
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(key_of_computed_tensor, backend=be, fullgraph=True)
    for seed in range(2):
        x = _r(2, seed=seed)
        y, d, s, y_in_s, fresh_in_d = compiled(x)
        torch.testing.assert_close(y, x * 2)
        assert list(d) == [y] and list(d)[0] is y and d[y] == 1
        assert len(s) == 2 and any(t is y for t in s) and y_in_s and not fresh_in_d
    assert cnt.frame_count == 1


# --------------------------------------------------------------------------------------
# addcdiv_ / addcmul_ with a tensor value
# --------------------------------------------------------------------------------------

def addc_with_tensor_value(x, a, b, v):
    y = x.clone().addcdiv_(a, b, value=v)
    return y, torch.addcmul(x, a, b, value=v * 2), x.addcmul(a, b, value=-v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_addc_with_a_0d_tensor_value(backend):
    graphjit.reset()
    compiled = graphjit.compile(addc_with_tensor_value, backend=backend, fullgraph=True)
    b = _r(4, seed=2).abs() + 0.5
    for v in (torch.tensor(0.5), torch.tensor(-1.25), torch.tensor(3, dtype=torch.int64)):
        got = compiled(_r(4), _r(4, seed=1), b, v)
        want = addc_with_tensor_value(_r(4), _r(4, seed=1), b, v)
        torch.testing.assert_close(got, want)


def test_addc_with_a_1d_tensor_value_raises_as_eager():
    graphjit.reset()
    compiled = graphjit.compile(addc_with_tensor_value, backend="eager")
    compare_call(addc_with_tensor_value, compiled, (_r(4), _r(4, seed=1), _r(4, seed=2), _r(2)))


# --------------------------------------------------------------------------------------
# the optimizer's step
# --------------------------------------------------------------------------------------

OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
}
TOL = dict(rtol=1e-5, atol=1e-6)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def _grads(model, i):
    model.zero_grad()
    F.mse_loss(model(_r(6, 4, seed=i)), _r(6, 2, seed=50 + i)).backward()


def _state(opt):
    return [{k: v.clone() for k, v in sorted(opt.state[p].items())}
            for g in opt.param_groups for p in g["params"]]


def _run_steps(name, backend, steps=4, between=None):
    """Eager and compiled optimizers side by side; ``between(i, opt)`` changes the world
    before step ``i``.  Returns the compiled step's graph count."""
    graphjit.reset()
    cnt, be = counting_backend(backend)
    models = [_model(), _model()]
    opts = [OPTIMIZERS[name](m.parameters()) for m in models]
    compiled_step = graphjit.compile(opts[1].step, backend=be)
    for i in range(steps):
        for model, opt, step in zip(models, opts, (opts[0].step, compiled_step)):
            if between is not None:
                between(i, opt)
            _grads(model, i)
            step()
        for pe, pc in zip(models[0].parameters(), models[1].parameters()):
            torch.testing.assert_close(pc, pe, **TOL, msg=lambda m: f"step {i}: {m}")
        torch.testing.assert_close(_state(opts[1]), _state(opts[0]), **TOL)
    return cnt.frame_count


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_step_matches_eager(name, backend):
    assert _run_steps(name, backend) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_lr_changed_between_steps(backend):
    def halve_at_2(i, opt):
        if i == 2:
            for g in opt.param_groups:
                g["lr"] *= 0.5
    assert _run_steps("adam", backend, between=halve_at_2) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_momentum_changed_between_steps(backend):
    def change(i, opt):
        if i == 2:
            opt.param_groups[0]["momentum"] = 0.5
    assert _run_steps("sgd", backend, between=change) == 2


def test_dynamo_patch_of_init_group_is_seen_through():
    """Importing torch._dynamo wraps every optimizer's ``_init_group`` in a disable
    wrapper for TorchDynamo's own use; graphjit traces the original (no break there)."""
    import torch._dynamo.eval_frame as ef

    ef.TorchPatcher.patch()
    assert getattr(torch.optim.Adam._init_group, "_torchdynamo_disable", False)
    assert _run_steps("adam", "eager") == 1
    assert graphjit.stats()["graph_breaks"] == 1  # torch._dynamo.graph_break() in the step wrapper

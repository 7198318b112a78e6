"""Guards and recompilation: what a cache entry specializes on, and the recompile limit.

Each change a guard protects (shape, dtype, requires_grad, a Python constant argument,
a global the function reads, grad mode, ...) must recompile exactly once and give eager's
result; an identical call must hit the cache.  Past ``config.recompile_limit`` entries the
function warns once and runs eagerly.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import graphjit
from _shared import call_or_fail
from graphjit.testing import CompileCounter, assert_equal


def _r(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed + 19 * len(shape) + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype)


class Harness:
    """A compiled ``fn`` with a counting backend; ``check(*args)`` compares with eager."""

    def __init__(self, fn, fullgraph=True, dynamic=None):
        self.fn = fn
        self.cnt = CompileCounter()
        self.compiled = graphjit.compile(fn, backend=self.cnt, fullgraph=fullgraph, dynamic=dynamic)

    def check(self, *args, **kwargs):
        expected = self.fn(*args, **kwargs)
        actual = call_or_fail(self.compiled, *args, **kwargs)
        assert_equal(actual, expected)
        return actual

    @property
    def graphs(self):
        return self.cnt.frame_count

    def counts(self):
        """``(graphs compiled, recompiles)`` so far."""
        return self.graphs, _recompiles()


def _recompiles():
    return graphjit.stats()["recompiles"]


def _mul_add(x, y):
    return x * y + 1


# --------------------------------------------------------------------------------------
# Cache hits
# --------------------------------------------------------------------------------------

def test_same_call_twice_does_not_recompile():
    h = Harness(_mul_add)
    x, y = _r(3), _r(3, seed=1)
    h.check(x, y)
    h.check(x, y)
    assert h.counts() == (1, 0)
    s = graphjit.stats()
    assert s["frames_total"] == 1 and s["frames_ok"] == 1


def test_new_tensors_same_metadata_hit_cache():
    h = Harness(_mul_add)
    for seed in range(4):
        h.check(_r(3, seed=seed), _r(3, seed=seed + 10))
    assert h.counts() == (1, 0)


# --------------------------------------------------------------------------------------
# Each guarded change recompiles once
# --------------------------------------------------------------------------------------

def test_new_shape_recompiles_once():
    h = Harness(_mul_add)
    h.check(_r(3), _r(3, seed=1))
    h.check(_r(5), _r(5, seed=1))
    h.check(_r(5, seed=2), _r(5, seed=3))
    assert h.counts() == (2, 1)
    h.check(_r(3, seed=4), _r(3, seed=5))  # the first entry still serves shape 3
    assert h.counts() == (2, 1)


def test_new_rank_recompiles_once():
    h = Harness(lambda x: x.sum(-1) * x.shape[-1])
    h.check(_r(2, 3))
    h.check(_r(2, 3, 4))
    assert h.counts() == (2, 1)


def test_new_dtype_recompiles_once():
    h = Harness(_mul_add)
    h.check(_r(3), _r(3, seed=1))
    h.check(_r(3, dtype=torch.float64), _r(3, seed=1, dtype=torch.float64))
    h.check(_r(3, dtype=torch.float64), _r(3, seed=1, dtype=torch.float64))
    assert h.counts() == (2, 1)


def test_requires_grad_change_recompiles_once():
    h = Harness(_mul_add)
    x, y = _r(3), _r(3, seed=1)
    h.check(x, y)
    out = h.check(x.clone().requires_grad_(), y)
    assert out.requires_grad
    h.check(x.clone().requires_grad_(), y)
    assert h.counts() == (2, 1)


def test_non_contiguous_input_recompiles():
    def fn(x):
        return x.view(-1) if x.is_contiguous() else x.reshape(-1) * 2

    h = Harness(fn)
    h.check(_r(3, 4))
    h.check(_r(4, 3).t())
    assert h.counts() == (2, 1)


@pytest.mark.parametrize("first,second", [(2, 3), (2.0, 0.5), (True, False), ("add", "mul"),
                                          (None, 1)])
def test_python_constant_arg_change_recompiles_once(first, second):
    def fn(x, c):
        if c is None or c == "add":
            return x + 1
        if c == "mul":
            return x * 2
        return x * c

    h = Harness(fn)
    x = _r(3)
    h.check(x, first)
    h.check(x, first)
    h.check(x, second)
    h.check(x, second)
    assert h.counts() == (2, 1)


def test_int_vs_float_constant_recompiles():
    def fn(x, c):
        return x * c, c

    h = Harness(fn)
    x = _r(3)
    h.check(x, 2)
    h.check(x, 2.0)  # equal but a different type: the returned constant differs
    assert h.counts() == (2, 1)


def test_kwarg_constant_change_recompiles_once():
    def fn(x, *, scale=1.0):
        return x * scale

    h = Harness(fn)
    x = _r(3)
    h.check(x)
    h.check(x, scale=3.0)
    h.check(x, scale=3.0)
    assert h.counts() == (2, 1)


def test_list_length_change_recompiles_once():
    def fn(xs):
        out = xs[0]
        for t in xs[1:]:
            out = out + t
        return out

    h = Harness(fn)
    h.check([_r(3), _r(3, seed=1)])
    h.check([_r(3), _r(3, seed=1), _r(3, seed=2)])
    h.check([_r(3), _r(3, seed=1), _r(3, seed=2)])
    assert h.counts() == (2, 1)


def test_none_vs_tensor_arg_recompiles_once():
    def fn(x, b):
        return x * 2 if b is None else x * 2 + b

    h = Harness(fn)
    h.check(_r(3), None)
    h.check(_r(3), _r(3, seed=1))
    h.check(_r(3), None)
    assert h.counts() == (2, 1)


SCALE = 2.0
ACTIVATION = torch.relu


def _reads_global(x):
    return x * SCALE


def _calls_global_fn(x):
    return ACTIVATION(x)


def _global_change_recompiles_once(monkeypatch, fn, x, name, value):
    """``fn`` reads the global ``name``; set to ``value`` (for this test), it recompiles."""
    h = Harness(fn)
    h.check(x)
    monkeypatch.setitem(globals(), name, value)
    h.check(x)
    h.check(x)
    assert h.counts() == (2, 1)


def test_changed_global_recompiles_once(monkeypatch):
    _global_change_recompiles_once(monkeypatch, _reads_global, _r(3), "SCALE", 5.0)


def test_changed_global_function_recompiles_once(monkeypatch):
    _global_change_recompiles_once(monkeypatch, _calls_global_fn, _r(5), "ACTIVATION", torch.sigmoid)


def test_changed_closure_variable_gives_eager_result():
    factor = 2.0

    def fn(x):
        return x * factor

    h = Harness(fn)
    x = _r(3)
    h.check(x)
    factor = 7.0  # noqa: F841  (read through the closure cell)
    h.check(x)
    assert h.counts() == (2, 1)


def test_global_tensor_mutated_in_place_is_seen():
    h = Harness(_adds_global_tensor)
    x = _r(3)
    h.check(x)
    with torch.no_grad():
        GLOBAL_T.add_(10)
    try:
        h.check(x)
    finally:
        with torch.no_grad():
            GLOBAL_T.sub_(10)
    assert h.counts() == (1, 0)


GLOBAL_T = torch.arange(3.0)


def _adds_global_tensor(x):
    return x + GLOBAL_T


def test_grad_mode_change_recompiles_once():
    def fn(x, w):
        return x * w

    h = Harness(fn)
    x, w = _r(3), _r(3, seed=1).requires_grad_()
    out = h.check(x, w)
    assert out.requires_grad
    with torch.no_grad():
        out = h.check(x, w)
        assert not out.requires_grad
        h.check(x, w)
    assert h.counts() == (2, 1)
    assert h.check(x, w).requires_grad  # back in grad mode: the first entry again
    assert h.graphs == 2


def test_default_dtype_change_recompiles():
    def fn(x):
        return x + torch.ones(3)

    h = Harness(fn)
    h.check(_r(3))
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        h.check(_r(3, dtype=torch.float64))
    finally:
        torch.set_default_dtype(old)
    assert h.counts() == (2, 1)


def test_aliased_inputs_recompile():
    """An entry traced with distinct tensors must not serve a call passing one tensor
    twice: a functionalizing backend (aot_eager) assumes the inputs do not alias."""

    def fn(x, y):
        x.add_(1)
        return y * 2

    compiled = graphjit.compile(fn, backend="aot_eager", fullgraph=True)
    a, b = _r(3), _r(3, seed=1)
    ea, eb = a.clone(), b.clone()
    assert_equal(call_or_fail(compiled, a, b), fn(ea, eb))
    assert_equal(a, ea)
    # the same tensor twice: the write to x must be visible through y
    c = _r(3, seed=2)
    ec = c.clone()
    assert_equal(call_or_fail(compiled, c, c), fn(ec, ec))
    assert_equal(c, ec)
    assert _recompiles() == 1


# --------------------------------------------------------------------------------------
# Recompile limit
# --------------------------------------------------------------------------------------

def _past_a_recompile_limit_of_one(monkeypatch):
    """A harness for ``_mul_add`` with ``config.recompile_limit = 1`` (for this test), called
    with a second shape: that call warns."""
    monkeypatch.setattr(graphjit.config, "recompile_limit", 1)
    h = Harness(_mul_add)
    h.check(_r(2), _r(2, seed=1))
    with pytest.warns(UserWarning, match="recompile limit"):
        h.check(_r(3), _r(3, seed=1))
    return h


def test_recompile_limit_warns_once_and_runs_eagerly(monkeypatch):
    monkeypatch.setattr(graphjit.config, "recompile_limit", 2)
    h = Harness(_mul_add, dynamic=False)  # every new shape is a new entry
    h.check(_r(1), _r(1, seed=1))
    h.check(_r(2), _r(2, seed=1))
    assert h.graphs == 2
    with pytest.warns(UserWarning, match="recompile limit") as record:
        h.check(_r(3), _r(3, seed=1))
    assert len([w for w in record if "recompile limit" in str(w.message)]) == 1
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        h.check(_r(4), _r(4, seed=1))
        h.check(_r(5), _r(5, seed=1))
        h.check(_r(1, seed=3), _r(1, seed=4))  # a cached shape still works
    assert not [w for w in later if "recompile limit" in str(w.message)]
    assert h.counts() == (2, 1)


def test_recompile_limit_one_means_a_single_entry(monkeypatch):
    h = _past_a_recompile_limit_of_one(monkeypatch)
    assert h.counts() == (1, 0)


# --------------------------------------------------------------------------------------
# reset()
# --------------------------------------------------------------------------------------

def test_reset_clears_counters_and_cache():
    h = Harness(_mul_add)
    h.check(_r(2), _r(2, seed=1))
    h.check(_r(3), _r(3, seed=1))
    s = graphjit.stats()
    assert s["frames_total"] == 2 and s["recompiles"] == 1
    graphjit.reset()
    s = graphjit.stats()
    assert s == {"graph_breaks": 0, "break_reasons": [], "frames_total": 0, "frames_ok": 0, "graphs_shared": 0,
                 "recompiles": 0, "skipped_frames": [], "cache_hits": 0, "cache_misses": 0,
                 "cache_writes": 0, "cache_events": []}
    h.check(_r(3), _r(3, seed=1))  # the cache was cleared: compiled again, not a recompile
    assert h.graphs == 3
    assert graphjit.stats()["frames_total"] == 1
    assert graphjit.stats()["recompiles"] == 0


def test_reset_clears_graph_break_stats():
    def fn(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    compiled = graphjit.compile(fn, backend="eager")
    x = _r(3)
    assert_equal(call_or_fail(compiled, x), fn(x))
    assert graphjit.stats()["graph_breaks"] >= 1
    assert graphjit.stats()["break_reasons"]
    graphjit.reset()
    assert graphjit.stats()["graph_breaks"] == 0
    assert graphjit.stats()["break_reasons"] == []


def test_reset_lifts_recompile_limit(monkeypatch):
    h = _past_a_recompile_limit_of_one(monkeypatch)
    graphjit.reset()
    h.check(_r(3), _r(3, seed=1))
    assert h.graphs == 2

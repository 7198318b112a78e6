"""Guards that a trace does not need are left out, and the ones it needs stay.

A ``torch.nn`` leaf called as a graph node has its settings guarded by value (they decide
what the fake run gave and what a compiling backend bakes in), but only the settings its
``forward`` can read (``forward_reads``): ``Linear.in_features`` changes nothing a call
computes, ``LayerNorm.eps`` does.  Each case changes the setting between calls and
compares with eager, with the ``eager`` and ``aot_eager`` backends.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import graphjit
from _shared import counting_backend, graphs_traced, seeded_randn
from graphjit.runtime.dispatch import all_entries
from graphjit.variables.nn_module import forward_reads

_r = seeded_randn(9800)
BACKENDS = ["eager", "aot_eager"]


def _compiled(fn, backend):
    graphjit.reset()
    cnt, counted = counting_backend(backend)
    return graphjit.compile(fn, backend=counted), cnt


def through(mod, x):
    return mod(x) * 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make, name, value, graphs", [
    (lambda: nn.Linear(4, 4), "in_features", 99, 1),          # never read by forward
    (lambda: nn.Embedding(10, 4), "num_embeddings", 3, 1),    # never read by forward
    (lambda: nn.LayerNorm(4), "eps", 0.5, 2),
    (lambda: nn.Embedding(10, 4), "max_norm", 0.1, 2),
    (lambda: nn.LeakyReLU(0.01), "negative_slope", 0.5, 2),
], ids=["linear_in_features", "embedding_num", "layernorm_eps", "embedding_max_norm",
        "leaky_slope"])
def test_leaf_setting_changed_between_calls(make, name, value, graphs, backend):
    torch.manual_seed(0)
    mod = make()
    x = torch.randint(0, 10, (3,)) if isinstance(mod, nn.Embedding) else _r(3, 4)
    compiled, cnt = _compiled(through, backend)
    torch.testing.assert_close(compiled(mod, x), through(mod, x))
    setattr(mod, name, value)
    torch.testing.assert_close(compiled(mod, x), through(mod, x))
    assert cnt.frame_count == graphs


def test_forward_reads():
    assert "in_features" not in forward_reads(nn.Linear)
    assert {"eps", "normalized_shape"} <= forward_reads(nn.LayerNorm)
    # Conv's forward calls _conv_forward, a method: its reads are included
    assert {"stride", "padding", "dilation", "groups", "padding_mode"} <= forward_reads(nn.Conv2d)

    class ByName(nn.Module):
        def forward(self, x):
            return x * getattr(self, "scale")

    assert forward_reads(ByName) is None  # a read by name: every setting is guarded


# --------------------------------------------------------------------------------------
# one call form per module call
# --------------------------------------------------------------------------------------

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x, scale=1.0, shift=None):
        y = self.lin(x) * scale
        return y if shift is None else y + shift


def _forms(x):
    return [((x,), {}), ((), {"x": x}), ((x, 1.0), {}), ((x,), {"scale": 1.0}),
            ((x, 1.0, None), {}), ((), {"shift": None, "x": x})]


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_forms_share_one_entry(backend):
    """``m(x)``, ``m(x=x)``, ``m(x, 1.0)``... are one call of ``forward(self, x, scale=1.0,
    shift=None)``: one graph (torch.compile: one), eager's results."""
    mod, x = Scaled(), _r(2, 4)
    compiled, cnt = _compiled(mod, backend)
    for args, kwargs in _forms(x):
        torch.testing.assert_close(compiled(*args, **kwargs), mod(*args, **kwargs))
    torch.testing.assert_close(compiled(x, 2.0), mod(x, 2.0))
    assert cnt.frame_count == 2  # scale=2.0 is another constant


def test_call_forms_kept_where_they_are_observable():
    """A forward pre-hook sees the call's own ``args`` and ``kwargs``; a bad call raises
    eager's TypeError."""
    mod, x = Scaled(), _r(2, 4)
    seen = []
    handle = mod.register_forward_pre_hook(lambda m, args, kwargs: seen.append((len(args), sorted(kwargs))),
                                           with_kwargs=True)
    compiled, _ = _compiled(mod, "eager")
    for args, kwargs in _forms(x):
        compiled(*args, **kwargs)
    eager_seen = list(seen)
    seen.clear()
    for args, kwargs in _forms(x):
        mod(*args, **kwargs)
    assert seen == eager_seen == [(1, []), (0, ["x"]), (2, []), (1, ["scale"]), (3, []), (0, ["shift", "x"])]
    handle.remove()
    for bad in (((x,), {"x": x}), ((), {}), ((x,), {"nope": 1})):
        with pytest.raises(TypeError) as want:
            mod(*bad[0], **bad[1])
        with pytest.raises(TypeError) as got:
            compiled(*bad[0], **bad[1])
        assert str(got.value) == str(want.value)


# -- absent keys of one mapping: one isdisjoint check on the hot path --------------------

class _Quiet(dict):
    """A dict subclass whose ``in`` says no to one key it holds."""

    def __contains__(self, key):
        return key != "shift" and super().__contains__(key)


def _opts_branch(opts, x):
    if "scale" not in opts and "shift" not in opts and "bias" not in opts:
        return x + 1
    return x - 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_merged_absent_key_checks_follow_every_change(backend):
    """The keys a dict must lack are checked in one call on the hot path; a key added
    later still recompiles, and a dict subclass with its own ``__contains__`` is still
    answered by it (as in eager)."""
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(_opts_branch, backend=be)
    x = torch.ones(2)
    opts = {"other": 1}
    assert torch.equal(compiled(opts, x), _opts_branch(opts, x))
    guard = [e for e in all_entries() if e.fn.__name__ == "_opts_branch"][0].guard
    assert "isdisjoint" in guard.source.split("def ___failures")[0]
    assert torch.equal(compiled({"other": 2}, x), x + 1) and cnt.frame_count == 1
    opts["shift"] = 2  # a key that was absent
    assert torch.equal(compiled(opts, x), _opts_branch(opts, x))
    assert cnt.frame_count == 2
    quiet = _Quiet(shift=1)  # holds "shift" but says it does not
    assert torch.equal(compiled(quiet, x), _opts_branch(quiet, x))
    assert torch.equal(compiled(quiet, x), x + 1)
    assert graphs_traced(cnt) == 3  # one entry for the subclass, whose guard holds again


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_value_only_returned_is_not_guarded(backend):
    """A number passed through (returned, never used by the trace) is reloaded after the
    graph: a new value neither recompiles nor specializes (torch.compile guards nothing
    there either)."""

    def fn(x, r, label):
        return x * 2, r, label

    compiled, cnt = _compiled(fn, backend)
    x = _r(3)
    for r, label in ((0.5, "a"), (0.7, "b"), (3, None)):
        out = compiled(x, r, label)
        assert torch.equal(out[0], x * 2) and out[1:] == (r, label)
    assert graphs_traced(cnt) == 1 and graphjit.stats()["recompiles"] == 0

"""A new entry's readable checks (the labelled one-by-one list that explains a miss, names
the guards in logs and goes into the persistent cache) are rendered when first needed,
not when the guard is built (``guards/codegen.py``: ``GuardRecipe.all_parts``).

These tests run with the debug checks off (they would render the parts at once, to check
the guard accepts the call it was traced from): a miss is explained as before, by the
check that failed, also where the readable check names a constant the fast one does not
(keys a mapping must lack are one merged check in the fast path); a guard keeps none of
the call's tensors alive (nor do the graph's example inputs once the backend has them, nor
a graph break's reason kept in ``graphjit.stats()``: its traceback held the tracer's
frames); the readable list is the fast check's, one by one.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import graphjit
from _shared import seeded_randn
from graphjit import config
from graphjit.runtime.dispatch import all_entries

# writing an entry to the persistent cache renders a guard's parts (the written entry
# explains its misses): these tests check they stay unrendered without it
pytestmark = pytest.mark.uncached("checks that a guard's parts stay unrendered, which writing an entry does")

_r = seeded_randn(33100)
BACKENDS = ["eager", "aot_eager"]


@pytest.fixture(autouse=True)
def _no_debug_checks(monkeypatch):
    monkeypatch.setattr(config, "debug_checks", False)
    monkeypatch.setattr(config, "cache_dir", None)
    graphjit.reset()
    yield
    graphjit.reset()


class Settings:
    scale = 2.0


def reads_absent(x):
    # ``Settings`` lacks these: one merged check in the fast path, one per key readable
    for name in ("alpha", "beta", "gamma"):
        if hasattr(Settings, name):
            x = x + getattr(Settings, name)
    return x * Settings.scale


def _only_entry(name=None):
    entries = [e for e in all_entries() if name is None or e.fn.__qualname__ == name]
    assert len(entries) == 1
    return entries[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_miss_is_explained_by_the_failing_check(backend):
    x = _r(3)
    c = graphjit.compile(reads_absent, backend=backend)
    torch.testing.assert_close(c(x), reads_absent(x))
    guard = _only_entry().guard
    assert guard.recipe._lazy is not None  # not rendered yet: nothing asked
    Settings.beta = 1.0
    try:
        failing = guard.failures(x)
        assert any("beta" in f for f in failing), failing
        assert guard.recipe._lazy is None
        torch.testing.assert_close(c(x), reads_absent(x))  # (and the call retraces)
        assert graphjit.stats()["recompiles"] == 1
    finally:
        del Settings.beta
    torch.testing.assert_close(c(x), reads_absent(x))


def test_readable_checks_pass_where_the_guard_passes():
    x = _r(3)
    c = graphjit.compile(reads_absent, backend="eager")
    c(x)
    guard = _only_entry().guard
    assert guard.failures(x) == []
    labels = guard.labels
    assert labels and all("___" not in label for label in labels), labels
    assert any("Settings" in label for label in labels), labels


def _tensor_arguments(x, pair):
    return x * pair[0] + pair[1]["w"]


def _tensor_arguments_with_a_break(x, pair):
    y = x * pair[0]
    print("a graph break")
    return y + pair[1]["w"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_tensor_arguments, _tensor_arguments_with_a_break])
def test_an_entry_keeps_no_argument_tensor_alive(backend, fn, capsys):
    c = graphjit.compile(fn, backend=backend)
    x, a, w = _r(3), _r(3), _r(3)
    expected = fn(x, (a, {"w": w}))
    torch.testing.assert_close(c(x, (a, {"w": w})), expected)
    assert graphjit.stats()["graph_breaks"] == (fn is _tensor_arguments_with_a_break)
    refs = [weakref.ref(t) for t in (x, a, w)]
    del x, a, w
    gc.collect()
    assert all(ref() is None for ref in refs)
    # the entry still serves, and explains a miss, for new tensors
    y, b, v = _r(3), _r(3), _r(3)
    torch.testing.assert_close(c(y, (b, {"w": v})), fn(y, (b, {"w": v})))
    guard = _only_entry(fn.__qualname__).guard
    assert any("dtype" in f or "shape" in f or "size" in f
               for f in guard.failures(y.double(), (b, {"w": v}))), guard.failures(y.double(), (b, {"w": v}))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


class Deep(torch.nn.Module):
    def __init__(self, n=6):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block() for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_blocks_miss_names_the_block(backend):
    torch.manual_seed(0)
    m = Deep()
    x = _r(2, 4)
    c = graphjit.compile(m, backend=backend)
    torch.testing.assert_close(c(x), m(x))
    guard = _only_entry().guard
    m.layers[4].lin.register_forward_hook(lambda mod, args, out: out * 2)
    failing = guard.failures(m, x)
    assert any("'4'" in f for f in failing), failing
    torch.testing.assert_close(c(x), m(x))

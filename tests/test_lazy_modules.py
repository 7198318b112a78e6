"""Lazy modules called in traced code before their first call (issue 31, item 1):
``variables/lazy_modules.py`` initializes them while tracing, as torch.compile does
(``initialize_lazy_module``), and the call is traced in the same graph.

Each program takes a fresh lazy module as an argument (the harness passes deep copies:
eager's copy and the compiled copy are each initialized by their first call, from the
same RNG state, and compared afterwards, parameters included).  The programs:
``nn.LazyLinear``, ``nn.LazyConv2d``, the ``LazyMLP`` of PyTorch's
``test/dynamo/test_modules.py``, its lazy layers with a list, a named tuple or two inputs
(``LazyLayerWithListInput``...), a lazy module that makes a lazy submodule in its
initialization, one without ``cls_to_become``, and a user ``LazyModuleMixin`` with an
``UninitializedParameter``.  A lazy module first called after a random op of the graph
is a graph break (its initialization would draw out of order).  Graph counts against
torch.compile's.
"""

from __future__ import annotations

import collections

import pytest
import torch
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedParameter

import graphjit
from _breadth import case_tests
from _semantics import Case
from _shared import seeded_randn
from graphjit.testing import CompileCounter, check_same

_r = seeded_randn(31100)
X = _r(2, 4)
IMG = _r(1, 3, 6, 6)


class LazyMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.LazyLinear(10)
        self.relu1 = torch.nn.ReLU()
        self.fc2 = torch.nn.LazyLinear(1)
        self.relu2 = torch.nn.ReLU()

    def forward(self, input):
        return self.relu2(self.fc2(self.relu1(self.fc1(input))))


class LazyListLayer(LazyModuleMixin, torch.nn.Module):
    def initialize_parameters(self, input):
        with torch.no_grad():
            self._param = torch.nn.Parameter(torch.empty(input[0].shape).fill_(0.5))

    def forward(self, input):
        x = 0
        for i in range(len(input)):
            x = x + input[i]
        return x * self._param


class LazyWithListInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = LazyListLayer()

    def forward(self, input):
        return self.layer(input[:-1])


Pair = collections.namedtuple("Pair", "x y")


class LazyNamedTupleLayer(LazyModuleMixin, torch.nn.Module):
    def initialize_parameters(self, pair):
        with torch.no_grad():
            self._param = torch.nn.Parameter(torch.full(pair.x.shape, 0.25))

    def forward(self, pair):
        return pair.x * self._param + pair.y


class LazyTwoInputs(LazyModuleMixin, torch.nn.Module):
    def initialize_parameters(self, x, y):
        with torch.no_grad():
            self._px = torch.nn.Parameter(torch.empty(x[0].shape).fill_(0.5))
            self._py = torch.nn.Parameter(torch.empty(y[0].shape).fill_(1.5))

    def forward(self, x, y):
        return sum(x) * self._px + sum(y) * self._py


class LazyWithLazySubmodule(LazyModuleMixin, torch.nn.Module):
    def initialize_parameters(self, input):
        with torch.no_grad():
            self.layer = LazyListLayer()

    def forward(self, x):
        return self.layer(x)


class LazyParent(LazyModuleMixin, torch.nn.Module):
    def impl(self, x):
        return x.cos() + self._val


class LazyChildNoClsToBecome(LazyParent):
    def forward(self, x):
        return super().impl(x.sin())

    def initialize_parameters(self, input):
        self._val = torch.nn.Parameter(torch.ones(2, 4))


class UserLazyScale(LazyModuleMixin, torch.nn.Module):
    """An ``UninitializedParameter`` materialized from the input's last size."""

    def __init__(self):
        super().__init__()
        self.w = UninitializedParameter()

    def initialize_parameters(self, x):
        if self.has_uninitialized_params():
            with torch.no_grad():
                self.w.materialize((x.shape[-1],))
                self.w.uniform_(-1.0, 1.0)

    def forward(self, x):
        return x * self.w


def lazy_linear(x, mod):
    return mod(x).relu()


def lazy_conv(img, mod):
    return mod(img).sum(dim=1)


def lazy_then_call_again(x, mod):
    return mod(x) + mod(x * 2)


def lazy_list_input(xs, mod):
    return mod(xs)


def lazy_named_tuple(x, mod):
    return mod(Pair(x, x + 1))


def lazy_two_inputs(x, mod):
    return mod([x, x * 2], y=[x + 1])


def _narrow_first(module, args):
    return (args[0][..., :2],)


def prepended_pre_hook(x, mod):
    return mod(x)


def random_before_lazy(x, mod):
    noise = torch.rand(2, 4)
    return mod(x + noise)


#: each call gets a fresh copy of the lazy module (the harness deep-copies the arguments):
#: a new module object, so both systems trace again on the second call (2 graphs)
CASES = [
    Case(lazy_linear, [(X, torch.nn.LazyLinear(3))], graphs=2, name="LazyLinear"),
    Case(lazy_conv, [(IMG, torch.nn.LazyConv2d(2, 3))], graphs=2, name="LazyConv2d"),
    Case(lazy_linear, [(X, LazyMLP())], graphs=2, name="LazyMLP"),
    Case(lazy_then_call_again, [(X, torch.nn.LazyLinear(3))], graphs=2),
    Case(lazy_list_input, [([X, X + 1, X + 2], LazyWithListInput())], graphs=2),
    Case(lazy_named_tuple, [(X, LazyNamedTupleLayer())], graphs=2),
    Case(lazy_two_inputs, [(X, LazyTwoInputs())], graphs=2),
    Case(lazy_linear, [([X, X * 3], LazyWithLazySubmodule())], graphs=2, name="lazy_submodule"),
    Case(lazy_linear, [(X, LazyChildNoClsToBecome())], graphs=2, name="no_cls_to_become"),
    Case(lazy_linear, [(X, UserLazyScale())], graphs=2, name="user_mixin"),
]

#: both systems trace twice; graphjit compiles the second graph once only (the same code
#: and structure: ``graph/shared_graphs.py``), so its backend sees fewer graphs
RELATION = {case.name: "at_most" for case in CASES}

test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile = \
    case_tests(CASES, RELATION)


def test_compiled_lazy_module_called_twice():
    """``graphjit.compile(lazy module)``: the first call initializes it while tracing; the
    second call finds it initialized under the same guards (no recompile)."""
    graphjit.reset()
    torch.manual_seed(0)
    eager = torch.nn.LazyLinear(3)
    torch.manual_seed(0)
    mod = torch.nn.LazyLinear(3)
    cnt = CompileCounter()
    compiled = graphjit.compile(mod, backend=cnt, fullgraph=True)
    torch.manual_seed(1)
    expected = eager(X)
    torch.manual_seed(1)
    assert torch.equal(compiled(X), expected)
    assert type(mod) is torch.nn.Linear and torch.equal(mod.weight, eager.weight)
    assert torch.equal(compiled(X + 1), eager(X + 1)) and cnt.frame_count == 1


def test_compiled_module_with_lazy_children():
    """``graphjit.compile(LazyMLP())``: both lazy layers initialized in the first trace,
    one graph under fullgraph, parameters as eager's from the same RNG state."""
    graphjit.reset()
    torch.manual_seed(3)
    eager = LazyMLP()
    torch.manual_seed(3)
    mod = LazyMLP()
    cnt = CompileCounter()
    compiled = graphjit.compile(mod, backend=cnt, fullgraph=True)
    torch.manual_seed(4)
    expected, rng_eager = eager(X), torch.get_rng_state()
    torch.manual_seed(4)
    assert torch.equal(compiled(X), expected) and torch.equal(torch.get_rng_state(), rng_eager)
    assert [type(m) for m in mod.modules()] == [type(m) for m in eager.modules()]
    for (name, p), (_, q) in zip(mod.named_parameters(), eager.named_parameters(), strict=True):
        assert torch.equal(p, q), name
    assert torch.equal(compiled(X * 2), eager(X * 2)) and cnt.frame_count == 1


def test_random_op_before_first_call_breaks():
    """Eager draws ``torch.rand`` before the initialization draws: traced, the
    initialization would draw first, so the call is a graph break (fullgraph: an error
    naming the user's line)."""
    graphjit.reset()
    check_same(random_before_lazy, X, torch.nn.LazyLinear(3))
    assert graphjit.stats()["graph_breaks"] >= 1
    graphjit.reset()
    with pytest.raises(graphjit.Unsupported) as info:
        graphjit.compile(random_before_lazy, backend="eager", fullgraph=True)(X, torch.nn.LazyLinear(3))
    assert "lazy module" in str(info.value) and "test_lazy_modules.py" in str(info.value)


def test_prepended_pre_hook_breaks():
    """A pre-hook that runs before the initialization (prepended) narrows the input: eager
    initializes for 2 features; the first call is a break, and the result is eager's."""
    def make():
        mod = torch.nn.LazyLinear(3)
        mod.register_forward_pre_hook(_narrow_first, prepend=True)
        return mod

    graphjit.reset()
    torch.manual_seed(5)
    eager_mod = make()
    expected = prepended_pre_hook(X, eager_mod)
    torch.manual_seed(5)
    mod = make()
    got = graphjit.compile(prepended_pre_hook, backend="eager")(X, mod)
    assert torch.equal(got, expected) and mod.weight.shape == (3, 2)
    assert graphjit.stats()["graph_breaks"] >= 1


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

"""Graphs that are one computation compile once (``graph/shared_graphs.py``).

A specialized graph's parameters reach the backend as inputs, after the graph's own; a
graph of the structure of one compiled before in the same session takes its compiled
callable, reordering its inputs where they are numbered differently.  Differential
against eager (values, gradients, parameters and buffers written by the graph), with the
backend's calls counted, and the structure told apart wherever the compiled callable
could not serve the new graph: another dtype, size, constant, op, ``requires_grad``,
inputs sharing a storage, symbolic sizes.
"""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

import graphjit
from _library_zoo import ZOO, available
from _shared import counting_backend, seeded_randn
from graphjit.backends.registry import keeps_attributes
from graphjit.graph.shared_graphs import SharedGraphs, describe
from graphjit.runtime.dispatch import all_entries
from graphjit.testing import assert_equal

BACKENDS = ["eager", "aot_eager"]
_r = seeded_randn(22100)
X = _r(3, 4)


class Net(nn.Module):
    def __init__(self, seed: int = 0, dtype=torch.float32) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(4, 4, dtype=dtype)
        self.register_buffer("steps", torch.zeros((), dtype=dtype))

    def forward(self, x):
        self.steps.add_(1)  # a buffer the graph writes
        return self.lin(x).tanh() * self.steps


def _interleaved(compile_fn, nets, grads=False):
    """Each module compiled and called before the next is wrapped: the first's entry is
    specialized, the others share a generic one."""
    out = []
    for net in nets:
        c = compile_fn(net)
        x = X.to(net.lin.weight.dtype).detach().requires_grad_(grads)
        y = c(x)
        if grads:
            y.sum().backward()
            out += [x.grad, net.lin.weight.grad, net.lin.bias.grad]
        out += [y, net.steps.clone()]
    x = X.to(nets[0].lin.weight.dtype).detach().requires_grad_(grads)
    out.append(compile_fn(nets[0])(x))  # the first again
    return out


def _run(backend, make_nets, grads=False):
    eager = _interleaved(lambda m: m, make_nets(), grads)
    graphjit.reset()
    cnt, be = counting_backend(backend)
    ours = _interleaved(lambda m: graphjit.compile(m, backend=be), make_nets(), grads)
    assert_equal(ours, eager)
    return cnt, graphjit.stats()["graphs_shared"]


@pytest.mark.parametrize("grads", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_instances_share_one_compiled_graph(backend, grads):
    cnt, shared = _run(backend, lambda: [Net(0), Net(1), Net(2)], grads)
    assert (cnt.frame_count, shared) == (1, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_another_dtype_is_another_graph(backend):
    cnt, shared = _run(backend, lambda: [Net(0), Net(1, torch.float64)])
    assert (cnt.frame_count, shared) == (2, 0)


class Tied(nn.Module):
    def __init__(self, tie: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        if tie:
            self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


def test_tied_weights_are_not_the_untied_graph():
    def program(compile_fn):
        out = []
        for tie in (False, True, False):
            m = Tied(tie)
            y = compile_fn(m)(X)
            y.sum().backward()
            out += [y, m.a.weight.grad, m.b.weight.grad]
        return out

    eager = program(lambda m: m)
    graphjit.reset()
    cnt, be = counting_backend("aot_eager")
    assert_equal(program(lambda m: graphjit.compile(m, backend=be)), eager)
    # (untied, then tied: two structures; the third instance fails the tied generic entry's
    # guard, and its untied graph takes the first's compiled callable)
    assert (cnt.frame_count, graphjit.stats()["graphs_shared"]) == (2, 1)


class NoGradWrite(nn.Module):
    """Writes its own parameter in place: the write must land on this instance's."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, x):
        with torch.no_grad():
            self.w.mul_(0.5)
        return x * self.w


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_parameter_written_in_place_is_the_callers(backend):
    def program(compile_fn):
        a, b = NoGradWrite(0), NoGradWrite(1)
        ca = compile_fn(a)
        out = [ca(X)]
        cb = compile_fn(b)
        out += [cb(X), ca(X), cb(X), a.w.clone(), b.w.clone()]
        b.w.data.fill_(3.0)  # the world changes: the next call reads it
        out += [cb(X), ca(X)]
        return out

    eager = program(lambda m: m)
    graphjit.reset()
    cnt, be = counting_backend(backend)
    assert_equal(program(lambda m: graphjit.compile(m, backend=be)), eager)
    assert cnt.frame_count == 1


def test_symbolic_sizes_are_never_shared():
    graphjit.reset()
    cnt, be = counting_backend("eager")
    nets = [Net(0), Net(1)]
    eager = [n(X) for n in [Net(0), Net(1)]]
    ours = [graphjit.compile(n, backend=be, dynamic=True)(X) for n in nets]
    assert_equal(ours, eager)
    assert (cnt.frame_count, graphjit.stats()["graphs_shared"]) == (2, 0)


def test_the_backend_gets_parameters_as_inputs():
    graphjit.reset()
    cnt, be = counting_backend("eager")
    m = nn.Linear(4, 4)
    graphjit.compile(m, backend=be)(X)
    gm = cnt.graphs[0]
    assert not list(gm.parameters())
    assert len(gm.graph.find_nodes(op="placeholder")) == 3  # x, weight, bias


# -- the structure, told apart ---------------------------------------------------------------
def _graph(fn, *inputs) -> torch.fx.GraphModule:
    """A graph calling ``fn`` on placeholders whose fakes are ``inputs``'."""
    mode = FakeTensorMode()
    graph = torch.fx.Graph()
    nodes = []
    for i, t in enumerate(inputs):
        node = graph.placeholder(f"in_{i}")
        node.meta["example_value"] = mode.from_tensor(t)
        nodes.append(node)
    graph.output(fn(graph, *nodes))
    return torch.fx.GraphModule(nn.Module(), graph)


def _mul(c):
    return lambda g, a, b: (g.call_function(torch.mul, (g.call_function(torch.add, (a, b)), c)),)


def _same(g1, g2) -> bool:
    d1, d2 = describe(g1), describe(g2)
    assert d1 is not None and d2 is not None
    return d1[0] == d2[0]


def test_structure_ignores_names_and_tells_constants_apart():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert _same(_graph(_mul(2), a, b), _graph(_mul(2), a.clone(), b.clone()))
    assert not _same(_graph(_mul(2), a, b), _graph(_mul(3), a, b))
    assert not _same(_graph(_mul(2), a, b), _graph(_mul(2.0), a, b))  # int and float
    assert not _same(_graph(_mul(1), a, b), _graph(_mul(True), a, b))
    assert not _same(_graph(_mul(0.0), a, b), _graph(_mul(-0.0), a, b))
    sub = lambda g, x, y: (g.call_function(torch.mul, (g.call_function(torch.sub, (x, y)), 2)),)  # noqa: E731
    assert not _same(_graph(_mul(2), a, b), _graph(sub, a, b))


@pytest.mark.parametrize("other", [
    lambda a: a.double(), lambda a: a.t().contiguous().t(), lambda a: torch.randn(3, 2),
    lambda a: a.clone().requires_grad_(), lambda a: nn.Parameter(a.clone()),
    lambda a: torch.randn(4, 3)[1:3],
], ids=["dtype", "strides", "sizes", "requires_grad", "parameter", "view"])
def test_structure_tells_input_metadata_apart(other):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert not _same(_graph(_mul(2), a, b), _graph(_mul(2), other(a), b))


def test_structure_tells_shared_storages_apart():
    base = torch.randn(4, 3)
    apart = _graph(_mul(2), torch.randn(2, 3), torch.randn(2, 3))
    shared = _graph(_mul(2), base[:2], base[2:])
    alone = _graph(_mul(2), torch.randn(4, 3)[:2], torch.randn(4, 3)[2:])
    assert not _same(shared, alone) and not _same(apart, shared)


def test_inputs_are_numbered_by_first_use():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    g1 = _graph(_mul(2), a, b)
    swapped = lambda g, x, y: (g.call_function(torch.mul, (g.call_function(torch.add, (y, x)), 2)),)  # noqa: E731
    g2 = _graph(swapped, a, b)
    assert _same(g1, g2)
    table = SharedGraphs()
    record = table.add(g1, lambda x, y: (x, y), "scope")
    fn, found = table.find(g2, "scope")
    assert table.find(g2, "another scope") is None
    assert found is record and fn("b", "a") == ("a", "b")  # g2's inputs in g1's order


def test_lifted_attributes_become_placeholders_after_the_graphs_own():
    graphjit.reset()
    captured = []

    def be(gm, example_inputs):
        captured.append((gm, example_inputs))
        return gm.forward

    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    graphjit.compile(m, backend=be)(X)
    gm, inputs = captured[0]
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    assert len(names) == 3 and [type(t) for t in inputs[1:]] == [nn.Parameter] * 2
    assert inputs[1] is m[0].weight and inputs[2] is m[0].bias
    (entry,) = all_entries()
    assert entry.graphs[0].gm is gm and entry.graphs[0].lifted == (m[0].weight, m[0].bias)
    assert not gm.graph.find_nodes(op="get_attr") and not list(gm.parameters())


def test_the_table_forgets_graphs_no_entry_uses():
    table = SharedGraphs()
    g = _graph(_mul(2), torch.randn(2), torch.randn(2))
    record = table.add(g, lambda *a: a, None)
    assert table.find(_graph(_mul(2), torch.randn(2), torch.randn(2)), None) is not None
    del record
    assert table.find(_graph(_mul(2), torch.randn(2), torch.randn(2)), None) is None


def test_a_freezing_backend_keeps_parameters_as_attributes():
    assert not keeps_attributes("eager") and not keeps_attributes("inductor")
    assert keeps_attributes("inductor", {"freezing": True})
    assert not keeps_attributes("inductor", {"freezing": False})
    import torch._inductor.config as inductor_config

    with inductor_config.patch(freezing=True):
        assert keeps_attributes("inductor") and not keeps_attributes("inductor", {"freezing": False})
    # (CUDA graphs copy inputs in on every call, and keep parameters where they are)
    assert keeps_attributes("inductor", mode="reduce-overhead") and keeps_attributes("inductor", mode="max-autotune")
    assert keeps_attributes("inductor", {"triton.cudagraphs": True})
    assert not keeps_attributes("inductor", {"triton.cudagraphs": False}, "reduce-overhead")


@pytest.mark.slow
def test_inductor_freezing_folds_the_parameters():
    graphjit.reset()
    m = nn.Linear(4, 4).eval()
    c = graphjit.compile(m, backend="inductor", options={"freezing": True})
    with torch.no_grad():
        assert_equal(c(X), m(X))
    (entry,) = all_entries()
    assert entry.graphs[0].lifted == () and entry.graphs[0].gm.graph.find_nodes(op="get_attr")


# -- real code: a library's model, one instance after another -------------------------------
#: graphs torch.compile compiles for three instances, each compiled and called before the
#: next is made (measured by test_real_models_counts_of_torch_compile, slow)
REAL = {"monai_unet": 1, "xtransformers_vit": 1}


def _instances(name, compile_fn):
    from _zoo_measure import call

    out = []
    for _ in range(3):
        spec = ZOO[name].build()
        with torch.no_grad():
            out.append(call(spec, compile_fn(spec.model)))
    return out


@pytest.mark.parametrize("name", list(REAL))
def test_real_models_one_instance_after_another(name):
    # (the first instance's entry is specialized, the others share a generic one whose
    # graph takes the first's compiled callable; xtransformers' layers are repeated-block
    # regions, whose bodies are compared by structure)
    if available(name):
        pytest.skip(available(name))
    eager = _instances(name, lambda m: m)
    graphjit.reset()
    cnt, be = counting_backend("eager")
    assert_equal(_instances(name, lambda m: graphjit.compile(m, backend=be)), eager)
    assert (cnt.frame_count, graphjit.stats()["graphs_shared"]) == (REAL[name], 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(REAL))
def test_real_models_counts_of_torch_compile(name):
    if available(name):
        pytest.skip(available(name))
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter as DynamoCounter

    torch._dynamo.reset()
    dcnt = DynamoCounter()
    _instances(name, lambda m: torch.compile(m, backend=dcnt))
    torch._dynamo.reset()
    assert dcnt.frame_count == REAL[name]


def _values_sum(d):
    c = 0
    for v in d.values():
        c += v
    return c


def test_a_users_backend_is_called_for_every_graph_as_torch_compile_calls_it():
    """A backend that is a user's callable (one that counts, records or specializes) is
    given every graph compiled, as torch.compile gives it: a dict whose keys come in
    another order retraces the same structure and calls the backend again (PyTorch's
    test_dicts.py test_dict_order_keys); a named backend shares the callable."""
    a, b = seeded_randn(22101)(10), seeded_randn(22102)(10)
    counts = {}
    for name, wrap in (("graphjit", graphjit.compile), ("torch.compile", torch.compile)):
        calls = []

        def recording(gm, example_inputs):
            calls.append(gm)
            return gm.forward

        graphjit.reset()
        torch._dynamo.reset()
        f = wrap(_values_sum, backend=recording)
        for d in ({"a": a, "b": b}, {"b": b, "a": a}, {"b": b, "a": a}):
            assert_equal(f(d), _values_sum(d))
        counts[name] = len(calls)
    torch._dynamo.reset()
    assert counts == {"graphjit": 2, "torch.compile": 2}
    graphjit.reset()
    f = graphjit.compile(_values_sum, backend="eager")
    for d in ({"a": a, "b": b}, {"b": b, "a": a}):
        assert_equal(f(d), _values_sum(d))
    assert graphjit.stats()["graphs_shared"] == 1

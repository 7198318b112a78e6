"""Generic modules: one cache entry for every instance of a class (issue 9, and the
recompiles of issue 10).

A module's ``forward`` that Python calls for many instances (the layers of a model run
at a graph break, or from a frame graphjit runs in Python) is compiled once: its traces
guard the module by type and by the attributes they read, and every parameter and buffer
is a graph input, so each call computes with the instance it was given.  A function the
user compiles starts specialized (identity guards, parameters as graph attributes: the
cheapest guards) and turns generic when a second instance of a module class reaches the
same argument.

Every test changes the world between calls (weights, submodules, attributes,
``training``, hooks) and compares with eager, with ``eager`` and ``aot_eager``."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest
import torch
from torch import nn

import graphjit
from _shared import counting_backend
from graphjit.runtime.dispatch import all_entries

BACKENDS = ["eager", "aot_eager"]


def quiet(fn, *args, **kwargs):
    with redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


class Block(nn.Module):
    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.scale = scale

    def forward(self, x):
        return self.norm(torch.tanh(self.lin(x)) * self.scale) + x


class Looped(nn.Module):
    """A loop over layers with a break after each: the layers are called from Python."""

    def __init__(self, layers) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            print("layer", i)
        return x


def Stack(n: int = 4) -> Looped:
    return Looped([Block() for _ in range(n)])


def _setup(backend, n=4, make=None):
    """``(net, counter, compiled net)``: ``make()`` (default: a stack of ``n`` blocks)."""
    torch.manual_seed(0)
    net = make() if make is not None else Stack(n)
    cnt, be = counting_backend(backend)
    return net, cnt, graphjit.compile(net, backend=be)


def _check(compiled, net, x):
    with torch.no_grad():
        torch.testing.assert_close(quiet(compiled, x), quiet(net, x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_layers_share_one_entry(backend):
    net, cnt, compiled = _setup(backend, n=6)
    x = torch.randn(2, 4)
    for _ in range(3):
        _check(compiled, net, x)
    # six blocks, one graph of Block.forward (the input does not require grad, as the
    # blocks' outputs do not under no_grad); no recompiles
    assert cnt.frame_count == 1
    assert graphjit.stats()["recompiles"] == 0
    gm = cnt.graphs[0]
    inputs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert any("lin__parameters_weight" in n for n in inputs), inputs  # weights are inputs
    assert not [n for n in gm.graph.nodes if n.op == "get_attr"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_changed_weights_and_replaced_submodules_are_followed(backend):
    net, cnt, compiled = _setup(backend)
    x = torch.randn(2, 4)
    _check(compiled, net, x)
    with torch.no_grad():
        net.layers[1].lin.weight.mul_(-1)           # in place
    net.layers[2].lin.weight = nn.Parameter(torch.randn(4, 4))  # a new parameter
    net.layers[3].lin = nn.Linear(4, 4)             # a new submodule of the same class
    _check(compiled, net, x)
    assert cnt.frame_count == 1  # same types and tensor metadata: the entry still serves
    net.layers[0].norm = nn.Identity()              # another class: a new entry
    _check(compiled, net, x)
    assert cnt.frame_count == 2
    net.layers[1].lin = nn.Linear(4, 4, bias=False)  # bias None: a new entry
    _check(compiled, net, x)
    assert cnt.frame_count == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_of_one_instance(backend):
    net, cnt, compiled = _setup(backend)
    x = torch.randn(2, 4)
    _check(compiled, net, x)
    net.layers[2].scale = 3.0  # read by the trace: guarded, so block 2 gets its own entry
    _check(compiled, net, x)
    net.layers[2].scale = 1.0
    _check(compiled, net, x)
    assert cnt.frame_count == 2


class DropBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(self.lin(x)))


def DropStack() -> Looped:
    return Looped([DropBlock() for _ in range(3)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_flags_and_batchnorm_statistics(backend):
    torch.manual_seed(0)
    net = DropStack()
    ref = DropStack()
    ref.load_state_dict(net.state_dict())
    _, be = counting_backend(backend)
    compiled = graphjit.compile(net, backend=be)
    x = torch.randn(5, 4)
    net.layers[1].drop.p = 0.0
    ref.layers[1].drop.p = 0.0
    for step in range(3):
        if step == 1:  # one block in eval mode: its BatchNorm uses the running statistics
            net.layers[0].eval()
            ref.layers[0].eval()
        if step == 2:
            net.train()
            ref.train()
        torch.manual_seed(step)
        want = quiet(ref, x)
        torch.manual_seed(step)
        got = quiet(compiled, x)
        torch.testing.assert_close(got, want)
        for (name, a), b in zip(net.state_dict().items(), ref.state_dict().values()):
            torch.testing.assert_close(a, b, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_on_one_instance(backend):
    net, cnt, compiled = _setup(backend)
    x = torch.randn(2, 4)
    _check(compiled, net, x)
    handle = net.layers[2].register_forward_hook(lambda m, args, out: out * 2)
    _check(compiled, net, x)
    handle.remove()
    _check(compiled, net, x)
    handle = net.layers[1].lin.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
    _check(compiled, net, x)
    handle.remove()
    _check(compiled, net, x)


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("inner")  # a break inside the inner module
        return y * 2


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()
        self.out = nn.Linear(4, 4)

    def forward(self, x):
        return self.out(self.inner(x + 1))


def Twice() -> Looped:
    return Looped([Outer(), Outer(), Outer()])


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_a_submodule_of_a_shared_entry(backend):
    """The shared entry of ``Outer.forward`` breaks at ``self.inner(...)``: the call must
    go to this instance's ``inner`` (the frame's own), not the one seen when tracing."""
    net, cnt, compiled = _setup(backend, make=Twice)
    x = torch.randn(2, 4)
    _check(compiled, net, x)
    _check(compiled, net, x)
    assert graphjit.stats()["recompiles"] == 0


def step(model, x):
    return model(x).relu().sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_function_of_a_module_is_generic_from_the_first_call(backend):
    # a module passed to a plain function: any instance may come next, so its parameters are
    # graph inputs from the first trace (one entry for every instance, torch.compile's count)
    torch.manual_seed(0)
    models = [Block(scale=1.0) for _ in range(4)]
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(step, backend=be)
    x = torch.randn(2, 4)
    for m in models + models:
        with torch.no_grad():
            torch.testing.assert_close(compiled(m, x), step(m, x))
    assert cnt.frame_count == 1
    assert not [n for n in cnt.graphs[0].graph.nodes if n.op == "get_attr"]
    with torch.no_grad():  # a weight changed in place, a parameter replaced: read each call
        models[1].lin.weight.mul_(2)
        models[2].lin.weight = torch.nn.Parameter(torch.ones(4, 4))
        for m in models:
            torch.testing.assert_close(compiled(m, x), step(m, x))
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_module_turns_generic_on_a_second_instance(backend):
    # a compiled module's own frame stays specialized (identity guards, attributes) until
    # a second instance reaches the same forward
    torch.manual_seed(0)
    models = [Block(scale=1.0) for _ in range(3)]
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(models[0], backend=be)
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), models[0](x))
    # specialized: the parameters are the module's own tensors, passed after the inputs
    assert all_entries()[0].graphs[0].lifted


def test_parameters_stay_static_with_dynamic_true():
    torch.manual_seed(0)
    net = Stack(3)
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(net, backend=be, dynamic=True)
    for batch in (2, 3, 5):
        _check(compiled, net, torch.randn(batch, 4))
    assert cnt.frame_count == 1
    gm = cnt.graphs[0]
    for node in gm.graph.nodes:
        if node.op == "placeholder" and "_parameters_" in node.name:
            shape = node.meta["example_value"].shape
            assert all(isinstance(s, int) for s in shape), (node.name, shape)


class Tied(nn.Module):
    def __init__(self, shared: nn.Linear) -> None:
        super().__init__()
        self.a = shared
        self.b = shared

    def forward(self, x):
        return self.a(x) + self.b(x * 2)


def TiedStack() -> Looped:
    return Looped([Tied(nn.Linear(4, 4)) for _ in range(3)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_tied_submodules(backend):
    net, cnt, compiled = _setup(backend, make=TiedStack)
    x = torch.randn(2, 4)
    _check(compiled, net, x)
    n = cnt.frame_count
    net.layers[1].b = nn.Linear(4, 4)  # no longer tied: the aliasing guard fails
    _check(compiled, net, x)
    assert cnt.frame_count == n + 1


class _Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_generic_inputs_read_each_registry_once(backend):
    """The parameters of a generic module's submodules are graph inputs; the transformed
    code reads each ``_modules``/``_parameters`` dict they share once, and the call still
    follows every change of the tree (a parameter replaced, a block swapped)."""
    from graphjit.runtime.dispatch import all_entries
    torch.manual_seed(0)
    a, b = _Pair(), _Pair()
    graphjit.reset()
    ca = graphjit.compile(a, backend=backend)
    graphjit.compile(b, backend=backend)
    x = torch.randn(2, 4)
    torch.testing.assert_close(ca(x), a(x))
    code = next(e.fn.__code__ for e in all_entries() if e.graphs)
    names = [i.argval for i in __import__("dis").get_instructions(code) if i.opname == "LOAD_ATTR"]
    assert names.count("_modules") == 4, names  # obj, blocks, and each block once (each param: 3)
    assert names.count("_parameters") == 4, names  # (lin and norm of each block)
    a.blocks[1].lin.weight = nn.Parameter(torch.randn(4, 4))
    torch.testing.assert_close(ca(x), a(x))
    a.blocks[0] = b.blocks[1]
    torch.testing.assert_close(ca(x), a(x))

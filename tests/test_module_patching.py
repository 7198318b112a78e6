"""Modules changed by the program (issue 21, seed 001's area and the hidden corpus).

* ``forward`` patched on the instance between calls of the compiled module: a plain
  function, another module's bound ``forward`` (its ``__func__`` is the class's: the guard
  passed and the compiled module ran its own weights, a wrong value), a
  ``functools.partial``, then restored with ``del``;
* ``forward`` patched and restored inside the compiled function;
* ``Module.__setattr__`` in traced code: a submodule reassigned inside ``forward`` (a
  break before), ``None`` for a registered parameter, submodule or buffer, a tensor for a
  buffer, a plain attribute, and eager's ``TypeError`` for a value of the wrong kind;
* ``register_buffer`` inside ``forward`` seen by ``named_buffers()`` later in the same
  frame;
* ``autograd.Function`` whose ``forward`` or ``backward`` has Python side effects: eager's
  effects, once per call, in no more graphs than torch.compile (the call is a graph break
  in both where forward has them).

Graph counts against torch.compile's.  One compiled module's entry is specialized to its
instance (``runtime/module_calls.py``), but a frame that assigns a submodule traces
generic (the next call meets another instance there): one graph, as torch.compile.  A
``forward`` patched on the instance with another module's bound ``forward`` is another
entry of the module's call (the instance's ``forward`` is one more guarded decision;
torch.compile compiles ``forward``'s own frame, whose code is the class's either way), but
its graph is the first one's computation on the other module's parameters and takes the
first graph's compiled callable (``graph/shared_graphs.py``): 3 graphs compiled, as
torch.compile.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as DynamoCounter

import graphjit
from _shared import seeded_randn
from graphjit.testing import CompileCounter, assert_equal

_r = seeded_randn(21500)
X = _r(2, 4)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


def _triple(x):
    return x * 3


def _scale(x, k):
    return x * k


def _patch_sequence(compile_fn):
    """Calls of one compiled module while its ``forward`` is patched and restored."""
    torch.manual_seed(0)
    m, other = Net(), Net()
    c = compile_fn(m)
    out = [c(X)]
    m.forward = _triple
    out.append(c(X))
    m.forward = other.forward
    out.append(c(X))
    m.forward = functools.partial(_scale, k=2.0)
    out.append(c(X))
    del m.forward
    out.append(c(X))
    out.append(c(X))
    return out


def _counts(scenario):
    """``(eager results, graphjit results, graphjit graphs, torch.compile graphs)``."""
    eager = scenario(lambda m: m)
    graphjit.reset()
    cnt = CompileCounter()
    ours = scenario(lambda m: graphjit.compile(m, backend=cnt))
    torch._dynamo.reset()
    dcnt = DynamoCounter()
    scenario(lambda m: torch.compile(m, backend=dcnt))
    torch._dynamo.reset()
    return eager, ours, cnt.frame_count, dcnt.frame_count


def test_forward_patched_on_the_instance():
    eager, ours, graphs, theirs = _counts(_patch_sequence)
    assert_equal(ours, eager)
    # (the other module's bound forward: another entry of the module's call, whose graph
    # takes the first's compiled callable; torch.compile's frame is forward's code, the
    # class's, already compiled)
    assert (graphs, theirs) == (3, 3)
    assert graphjit.stats()["graphs_shared"] == 1


def test_bound_forward_of_another_module_is_not_the_modules_own():
    torch.manual_seed(0)
    m, other = Net(), Net()
    graphjit.reset()
    c = graphjit.compile(m, backend="eager")
    first = c(X)
    m.forward = other.forward
    assert torch.equal(c(X), other(X)) and not torch.equal(c(X), first)
    del m.forward
    assert torch.equal(c(X), first)


def _patch_inside(compile_fn):
    torch.manual_seed(0)
    m = Net()

    def f(mod, x):
        mod.forward = _triple
        y = mod(x)
        del mod.forward
        return y + mod(x)

    c = compile_fn(f)
    return [c(m, X), c(m, X), "forward" in m.__dict__]


def test_forward_patched_inside_the_compiled_function():
    eager = _patch_inside(lambda f: f)
    graphjit.reset()
    cnt = CompileCounter()
    ours = _patch_inside(lambda f: graphjit.compile(f, backend=cnt, fullgraph=True))
    assert_equal(ours, eager)
    assert cnt.frame_count == 1  # (torch.compile raises AttributeError on the del here)


class Swap(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x)
        self.a = self.b
        return y + self.a(x)


def _swap(compile_fn):
    torch.manual_seed(0)
    m = Swap()
    c = compile_fn(m)
    out = [c(X), c(X), m.a is m.b, sorted(m._modules)]
    return out


def test_submodule_reassigned_in_forward():
    eager, ours, graphs, theirs = _counts(_swap)
    assert_equal(ours, eager)
    assert graphjit.stats()["graph_breaks"] == 0
    # a module put into a submodule slot: the trace starts again generic (the next call meets
    # another instance at self.a), and the graph may see a's and b's parameters as one: no
    # recompile, as torch.compile's generic entry
    assert (graphs, theirs) == (1, 1)


def _swap_training(compile_fn, scale_in_place=False):
    """Three training steps of ``Swap``: outputs and every parameter's gradient."""
    torch.manual_seed(0)
    m = SwapScaled() if scale_in_place else Swap()
    c = compile_fn(m)
    out = []
    for _ in range(3):
        m.zero_grad()
        y = c(X)
        y.sum().backward()
        out.append([y.detach(), [(n, p.grad) for n, p in m.named_parameters()]])
    return out


class SwapScaled(Swap):
    """``Swap`` whose graph writes a parameter in place: a's and b's parameters seen as one
    after the swap change what the write means, so that graph is compiled again."""

    def forward(self, x):
        with torch.no_grad():
            self.b.weight.mul_(0.5)
        y = self.a(x)
        self.a = self.b
        return y + self.a(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_submodule_swap_gradients(backend):
    eager = _swap_training(lambda m: m)
    graphjit.reset()
    cnt = CompileCounter()
    assert_equal(_swap_training(lambda m: graphjit.compile(m, backend=cnt if backend == "eager"
                                                           else backend)), eager)
    if backend == "eager":
        assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_submodule_swap_with_a_parameter_written_in_place(backend):
    eager = _swap_training(lambda m: m, scale_in_place=True)
    graphjit.reset()
    cnt = CompileCounter()
    ours = _swap_training(lambda m: graphjit.compile(m, backend=cnt if backend == "eager" else backend),
                          scale_in_place=True)
    assert_equal(ours, eager)
    if backend == "eager":  # (the parameters of the second call alias: a graph of their own)
        assert cnt.frame_count == 2


class Alias(torch.nn.Module):
    """Writes through one name a module attribute it then reads through another: a trace
    made while they are two modules must not run once they are one."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.a.flag = self.b.flag = False

    def forward(self, x):
        self.a.flag = True  # a write to a's dict ...
        return self.a(x) * (2 if self.b.flag else 1)  # ... then b's read


def _alias(compile_fn):
    torch.manual_seed(0)
    m = Alias()
    c = compile_fn(m)
    out = [c(X)]
    m.b = m.a  # one module at both names: the write is seen through b
    for _ in range(2):
        m.a.flag = False  # (b.flag is False before the call, as on the first call)
        out.append(c(X))
    return out


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_written_module_and_a_read_one_made_one_recompile(backend):
    eager = _alias(lambda m: m)
    graphjit.reset()
    assert_equal(_alias(lambda m: graphjit.compile(m, backend=backend)), eager)
    assert graphjit.stats()["recompiles"] == 1


class Registries(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.extra = torch.nn.Linear(4, 4)
        self.register_buffer("buf", torch.ones(4))
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        y = self.lin(x) * self.buf + self.w
        self.buf = torch.full((4,), 2.0)  # a tensor for a registered buffer
        self.w = None                      # None for a registered parameter
        self.extra = None                  # None for a registered submodule
        self.kernel_active_dims = (0, 1)   # a plain attribute
        self.register_buffer("scale", torch.ones(4) * 3)
        names = [n for n, _ in self.named_buffers()]
        params = [n for n, _ in self.named_parameters()]
        return y * self.scale, names, params, self.kernel_active_dims


def test_registry_writes_in_forward():
    for fullgraph in (True, False):
        torch.manual_seed(0)
        ref = Registries()
        torch.manual_seed(0)
        mod = Registries()
        graphjit.reset()
        cnt = CompileCounter()
        out = graphjit.compile(mod, backend=cnt, fullgraph=fullgraph)(X)
        assert_equal(out, ref(X))
        assert mod.w is None and mod.extra is None and torch.equal(mod.buf, ref.buf)
        assert sorted(mod._buffers) == sorted(ref._buffers) and mod.kernel_active_dims == (0, 1)
        assert cnt.frame_count == 1 and graphjit.stats()["graph_breaks"] == 0
    # torch.compile: one graph too (it breaks on named_buffers() after register_buffer, and
    # fullgraph=True fails there)
    torch.manual_seed(0)
    expected = Registries()(X)
    torch._dynamo.reset()
    torch.manual_seed(0)
    dcnt = DynamoCounter()
    assert_equal(torch.compile(Registries(), backend=dcnt)(X), expected)
    torch._dynamo.reset()
    assert dcnt.frame_count == 1


class WrongKind(torch.nn.Module):
    def __init__(self, what):
        super().__init__()
        self.what = what
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("buf", torch.ones(4))

    def forward(self, x):
        y = self.lin(x)
        if self.what == "module":
            self.lin = 3
        elif self.what == "buffer":
            self.buf = "text"
        else:
            self.lin.weight = torch.ones(4, 4)  # a tensor, not a Parameter
        return y


@pytest.mark.parametrize("what", ["module", "buffer", "parameter"])
def test_wrong_kind_for_a_registered_name_is_eagers_type_error(what):
    mod = WrongKind(what)
    with pytest.raises(TypeError) as eager:
        mod(X)
    graphjit.reset()
    with pytest.raises(TypeError) as compiled:
        graphjit.compile(WrongKind(what), backend="eager")(X)
    assert str(compiled.value) == str(eager.value)


LOG: list = []
STATE = {"calls": 0}


class AppendsInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        LOG.append("forward")
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class CountsInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        STATE["calls"] += 1
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class AppendsInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        LOG.append("backward")
        return g * 3


@pytest.mark.parametrize("fn_cls", [AppendsInForward, CountsInForward, AppendsInBackward])
def test_autograd_function_side_effects_once_per_call(fn_cls):
    def fn(x):
        return fn_cls.apply(x.sin()).sum()

    def run(compiled):
        LOG.clear()
        STATE["calls"] = 0
        x = X.clone().requires_grad_(True)
        for _ in range(2):
            compiled(x).backward()
        return list(LOG), STATE["calls"], x.grad

    eager = run(fn)
    graphjit.reset()
    cnt = CompileCounter()
    ours = run(graphjit.compile(fn, backend=cnt))
    torch._dynamo.reset()
    dcnt = DynamoCounter()
    theirs = run(torch.compile(fn, backend=dcnt))
    torch._dynamo.reset()
    assert_equal(ours, eager)
    assert_equal(theirs, eager)
    # (a side effect in backward: torch.compile makes 3 graphs, graphjit 2)
    assert cnt.frame_count <= dcnt.frame_count, (cnt.frame_count, dcnt.frame_count)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

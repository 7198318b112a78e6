"""``torch.autograd.Function`` subclasses called through ``.apply`` inside compiled code
(issue 9, item 2), differential against eager, side by side with ``torch.compile``.

Each :class:`GradCase` is a program (a module-level function) and a factory of fresh
arguments (leaf tensors, some with ``requires_grad``; modules; Python values).  The program
runs eagerly and compiled on identical arguments; then every differentiable output is
back-propagated with a fixed, non-uniform gradient, and the harness compares the outputs
(values, dtype, ``requires_grad``), the arguments afterwards (in-place ``mark_dirty``
updates), the ``.grad`` of every tensor argument and of every parameter of a module
argument, and the graph and break counts (``fullgraph=True`` where no break is expected).
Backends: the counting eager backend and ``aot_eager`` (every case), ``inductor`` (three
cases, marked slow).

Covered: ``ctx.save_for_backward``/``saved_tensors``; ctx attributes and non-tensor
arguments (an int that changes between calls recompiles); ``ctx.needs_input_grad``;
``ctx.mark_dirty`` on an intermediate and on an argument; ``ctx.mark_non_differentiable``
(an argmax output); ``@once_differentiable``; the ``setup_context`` style; a Function that
never uses ``ctx``; several outputs; ``None`` gradients for non-tensor inputs; a
straight-through estimator (autograd through ``forward`` would give zero gradients, so
running the wrong backward shows up) -- every backward here differs from autograd through
its forward for the same reason; the Function called twice in one graph; inside an
``nn.Module``; double backward (``torch.autograd.grad(create_graph=True)`` then a second
grad), outside and inside the compiled function.

``test_side_by_side_with_torch_compile`` runs every case through ``torch.compile`` with
a counting backend and asserts graphjit's target graph count is at most torch.compile's
(and one graph with no break wherever torch.compile gets one); the table is printed with
``pytest -s``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
from typing import Any, Callable

import pytest
import torch
from torch import nn
from torch.autograd.function import once_differentiable

import graphjit
from _shared import call_or_fail, counting_backend, seeded_randn
from graphjit.backends.registry import lookup_backend
from graphjit.testing import CompileCounter, assert_equal

_r = seeded_randn(9200)


def _leaf(*shape, seed=0, grad=True):
    return _r(*shape, seed=seed).requires_grad_(grad)


# --------------------------------------------------------------------------------------
# harness
# --------------------------------------------------------------------------------------

@dataclasses.dataclass
class GradCase:
    """``fn(*make_args(i))`` for ``i`` in ``range(calls)`` gives ``graphs`` graphs and
    ``breaks`` breaks; outputs, arguments and gradients equal eager's."""

    fn: Callable
    make_args: Callable[[int], tuple]
    graphs: int = 1
    breaks: int = 0
    calls: int = 2
    name: str = ""
    #: modules made once per side (eager, compiled) and passed first on every call, their
    #: gradients cleared before each call (with ``None``: no such modules)
    modules: Callable[[], tuple] | None = None

    def __post_init__(self):
        self.name = self.name or self.fn.__name__


def _flat_tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat_tensors(v)]
    return []


def _backprop(out) -> None:
    """Back-propagate every differentiable output with the gradient ``linspace(-1, 2)``
    (non-uniform, so a gradient that is wrong by a permutation or a factor shows up)."""
    outs = [t for t in _flat_tensors(out) if t.requires_grad]
    if outs:
        grads = [torch.linspace(-1.0, 2.0, t.numel()).reshape(t.shape).to(t.dtype) for t in outs]
        torch.autograd.backward(outs, grads)


def _grads(args) -> list:
    """The ``.grad`` of each tensor argument and of each parameter of each module."""
    found = []
    for a in args:
        if isinstance(a, torch.Tensor):
            found.append(a.grad)
        elif isinstance(a, nn.Module):
            found.extend((name, p.grad) for name, p in a.named_parameters())
    return found


def _check_call(case: GradCase, compiled, i: int, who: str, mods=((), ())) -> None:
    for m in (*mods[0], *mods[1]):
        m.zero_grad(set_to_none=True)
    e_args, c_args = (*mods[0], *case.make_args(i)), (*mods[1], *case.make_args(i))
    e_out, c_out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(e_out):
        expected = case.fn(*e_args)
        _backprop(expected)
    with contextlib.redirect_stdout(c_out):
        actual = call_or_fail(compiled, *c_args)
        _backprop(actual)
    assert_equal(actual, expected, f"{who}: call {i}: result")
    assert c_out.getvalue() == e_out.getvalue(), f"{who}: call {i}: stdout differs"
    assert_equal(_grads(c_args), _grads(e_args), f"{who}: call {i}: gradients")
    assert_equal([a for a in c_args if not isinstance(a, nn.Module)],
                 [a for a in e_args if not isinstance(a, nn.Module)], f"{who}: call {i}: args after")


def _modules_of(case: GradCase) -> tuple[tuple, tuple]:
    return ((), ()) if case.modules is None else (case.modules(), case.modules())


def run_grad_case(case: GradCase, backend: str | None = None) -> CompileCounter:
    graphjit.reset()
    cnt = CompileCounter()
    if backend is None:
        be = cnt
    else:
        inner = lookup_backend(backend)

        def be(gm, example_inputs):
            cnt(gm, example_inputs)
            return inner(gm, example_inputs)

        be.graphjit_cache_key = f"counting {backend}"  # (the warm pass loads its entries)
    compiled = graphjit.compile(case.fn, backend=be, fullgraph=case.breaks == 0)
    mods = _modules_of(case)
    for i in range(case.calls):
        _check_call(case, compiled, i, f"graphjit[{backend or 'eager'}]", mods)
    breaks = graphjit.stats()["graph_breaks"]
    assert (cnt.frame_count, breaks) == (case.graphs, case.breaks), (
        f"{case.name}: expected {case.graphs} graph(s) and {case.breaks} break(s), "
        f"got {cnt.frame_count} and {breaks}")
    return cnt


def dynamo_grad_counts(case: GradCase) -> tuple[int, int, bool]:
    """``(graphs, breaks, matches eager)`` of ``torch.compile`` (counting backend) on the
    case's calls, outputs and gradients compared."""
    import torch._dynamo
    import torch._dynamo.utils
    from torch._dynamo.testing import CompileCounter as DynamoCounter

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    cnt = DynamoCounter()
    compiled = torch.compile(case.fn, backend=cnt)
    right = True
    mods = _modules_of(case)
    for i in range(case.calls):
        try:
            _check_call(case, compiled, i, "torch.compile", mods)
        except Exception:  # noqa: BLE001
            right = False
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.reset()
    return cnt.frame_count, breaks, right


# --------------------------------------------------------------------------------------
# Functions (each backward differs from autograd through its forward)
# --------------------------------------------------------------------------------------

class SavedMul(torch.autograd.Function):
    """``x * w``; backward doubles x's gradient and adds ``x`` to w's."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * 2, g * x + x


class PowK(torch.autograd.Function):
    """``x ** k`` with non-tensor arguments kept on ctx; backward scales by ``bias``."""

    @staticmethod
    def forward(ctx, x, k, bias, mode):
        ctx.save_for_backward(x)
        ctx.k, ctx.bias, ctx.mode = k, bias, mode
        return x ** k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        gx = g * ctx.k * x ** (ctx.k - 1) * ctx.bias
        if ctx.mode == "neg":
            gx = -gx
        return gx, None, None, None


class NeedsGrad(torch.autograd.Function):
    """``x * w``; x's gradient depends on whether w needs one (so a wrong
    ``needs_input_grad`` shows up)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * w * (2.0 if ctx.needs_input_grad[1] else 5.0) if ctx.needs_input_grad[0] else None
        gw = g * x if ctx.needs_input_grad[1] else None
        return gx, gw


class DoubleInPlace(torch.autograd.Function):
    """``x.mul_(2)`` in place, marked dirty; backward triples."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 3


class MaxWithIndex(torch.autograd.Function):
    """``(max, argmax)`` along the last dim; the index is non-differentiable; backward
    puts twice the gradient at the maximum."""

    @staticmethod
    def forward(ctx, x):
        idx = x.argmax(-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x, idx)
        return x.amax(-1), idx

    @staticmethod
    def backward(ctx, g, g_idx):
        x, idx = ctx.saved_tensors
        return torch.zeros_like(x).scatter(-1, idx.unsqueeze(-1), 2 * g.unsqueeze(-1))


class OnceExp(torch.autograd.Function):
    """``exp(x)`` with a ``@once_differentiable`` backward that halves the gradient."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * 0.5


class SetupContextScale(torch.autograd.Function):
    """The ``setup_context`` style: ``forward`` takes no ctx."""

    @staticmethod
    def forward(x, w, k):
        return x * w * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, k = inputs
        ctx.save_for_backward(x, w)
        ctx.k = k

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * (ctx.k + 1), g * x * ctx.k, None


class NoCtxClamp(torch.autograd.Function):
    """Never touches ctx: ``clamp(x, -0.5, 0.5)`` with gradient ``0.25 * g`` everywhere."""

    @staticmethod
    def forward(ctx, x):
        return x.clamp(-0.5, 0.5)

    @staticmethod
    def backward(ctx, g):
        return g * 0.25


class SinCos(torch.autograd.Function):
    """Two outputs ``(sin x, x * y)``; backward mixes the two incoming gradients."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x.sin(), x * y

    @staticmethod
    def backward(ctx, g1, g2):
        x, y = ctx.saved_tensors
        return g1 * x.cos() + g2 * y * 3, g2 * x - g1


class ScaleShift(torch.autograd.Function):
    """``x * scale + shift`` with a float, a str, a bool and None among the inputs:
    their gradients are None."""

    @staticmethod
    def forward(ctx, x, scale, name, flip, nothing):
        ctx.scale, ctx.flip = scale, flip
        return x * scale + len(name)

    @staticmethod
    def backward(ctx, g):
        gx = g * ctx.scale * 10
        return (-gx if ctx.flip else gx), None, None, None, None


class RoundSTE(torch.autograd.Function):
    """Straight-through rounding: autograd through ``round`` gives zeros, this gives
    ``g``."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 4) / 4

    @staticmethod
    def backward(ctx, g):
        return g


class Cube(torch.autograd.Function):
    """``x ** 3`` with the differentiable backward ``3 x^2 g`` (double backward works
    eagerly); the backward adds ``x`` so that autograd through forward differs."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 + x


class TensorOnCtx(torch.autograd.Function):
    """A tensor kept as a plain ctx attribute (not through ``save_for_backward``)."""

    @staticmethod
    def forward(ctx, x):
        ctx.mask = x > 0
        return x * ctx.mask

    @staticmethod
    def backward(ctx, g):
        return g * ctx.mask * 5


class ReturnsInput(torch.autograd.Function):
    """``forward`` returns its input unchanged: autograd gives back a view of it."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 4


class NoMaterialize(torch.autograd.Function):
    """``ctx.set_materialize_grads(False)``: the unused second output's gradient is None
    (not zeros), which the backward turns into ``+100``."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        gx = g1 * 1.5
        return gx + 100 if g2 is None else gx + g2


class ListOfTensors(torch.autograd.Function):
    """A list of tensors as one argument (not differentiated by autograd) and a
    non-tensor second output."""

    @staticmethod
    def forward(ctx, x, ws):
        return x * ws[0] + ws[1], len(ws)

    @staticmethod
    def backward(ctx, g, _):
        return g * 9, None


class DataDependent(torch.autograd.Function):
    """A branch on a tensor value and ``.item()`` in ``forward``."""

    @staticmethod
    def forward(ctx, x):
        m = x.abs().max().item()
        ctx.m = m
        return x * 2 / m if x.sum() > 0 else -x / m

    @staticmethod
    def backward(ctx, g):
        return g * 7 / ctx.m


LOG: list = []


class LogsCalls(torch.autograd.Function):
    """``forward`` and ``backward`` with Python side effects (a list and stdout)."""

    @staticmethod
    def forward(ctx, x):
        LOG.append("forward")
        print("forward", tuple(x.shape))
        return x * 2

    @staticmethod
    def backward(ctx, g):
        LOG.append("backward")
        return g * 3


SCALE = [2.0]


class ReadsGlobal(torch.autograd.Function):
    """``forward`` reads a module global that changes between calls."""

    @staticmethod
    def forward(ctx, x):
        ctx.s = SCALE[0]
        return x * SCALE[0]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.s * 2


class QuantLinear(nn.Module):
    """A linear layer whose weight goes through :class:`RoundSTE`, then :class:`SavedMul`
    with a learnt gain."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 3)
        self.gain = nn.Parameter(torch.linspace(0.5, 1.5, 3))

    def forward(self, x):
        w = RoundSTE.apply(self.lin.weight)
        y = torch.nn.functional.linear(x, w, self.lin.bias)
        return SavedMul.apply(y, self.gain).relu()


_MODEL = QuantLinear()


# --------------------------------------------------------------------------------------
# programs
# --------------------------------------------------------------------------------------

def save_for_backward(x, w):
    return SavedMul.apply(x.sin(), w) + 1


def ctx_attributes(x, k):
    return PowK.apply(x * 1.5, k, 0.5, "neg") * 2, k


def needs_input_grad(x, w):
    return NeedsGrad.apply(x + 1, w)


def mark_dirty_intermediate(x):
    y = x * 1.5
    z = DoubleInPlace.apply(y)
    return z + 1, y, z is y


def mark_dirty_argument(x, buf):
    z = DoubleInPlace.apply(buf)
    return x * z, z is buf


def mark_non_differentiable(x):
    v, i = MaxWithIndex.apply(x * 2)
    return v * 3, i, i.requires_grad


def once_differentiable_backward(x):
    return OnceExp.apply(x * 0.5).sum(-1)


def setup_context_style(x, w):
    return SetupContextScale.apply(x.cos(), w, 3) - 1


def never_uses_ctx(x):
    return NoCtxClamp.apply(x * 2) * x


def multiple_outputs(x, y):
    a, b = SinCos.apply(x, y * 2)
    return a + b, b


def none_grads_for_non_tensors(x):
    return ScaleShift.apply(x, 1.5, "abc", True, None) * x


def straight_through(x):
    return RoundSTE.apply(x * 3).tanh()


def called_twice(x, y):
    a = RoundSTE.apply(x)
    b = RoundSTE.apply(y * a)
    return Cube.apply(Cube.apply(a + b) * 0.5)


def inside_module(model, x):
    return model(x).sum(0)


def module_method_in_loop(model, x):
    out = x
    for _ in range(2):
        out = out + model(out[:, :4].contiguous()).sum()
    return out


def tensor_on_ctx(x):
    return TensorOnCtx.apply(x - 0.2)


def returns_input(x):
    y = x * 1
    z = ReturnsInput.apply(y)
    return z + 1, z is y, z._is_view()


def no_materialize_grads(x):
    a, _ = NoMaterialize.apply(x + 0)
    return a


def list_argument(x, w):
    y, n = ListOfTensors.apply(x, [w, w * 2])
    return y * n, n


def under_no_grad(x, w):
    with torch.no_grad():
        a = SavedMul.apply(x, w)
    return a + x * w, a.requires_grad


def no_input_needs_grad(x, w):
    return SavedMul.apply(x.detach(), w.detach() * 2)


def data_dependent_forward(x):
    return DataDependent.apply(x + 0) * 2


def side_effects_in_forward(x):
    LOG.clear()
    y = LogsCalls.apply(x + 1)
    return y * 2, list(LOG)


def _set_scale_and_x(i):
    SCALE[0] = 2.0 if i < 2 else 5.0
    return _x(i)


def reads_changed_global(x):
    return ReadsGlobal.apply(x + 1)


def create_graph_inside(x):
    y = Cube.apply(x.sin())
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    return g * 2


# --------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------

def _xw(i, w_grad=True):
    return _leaf(3, 4, seed=i), _leaf(3, 4, seed=10 + i, grad=w_grad)


def _x(i):
    return (_leaf(3, 4, seed=i),)


CASES = [
    GradCase(save_for_backward, _xw),
    # k changes on the third call: torch.compile and graphjit both specialize it first
    GradCase(ctx_attributes, lambda i: (_leaf(3, 4, seed=i), 3 if i < 2 else 2), calls=3, graphs=2),
    # w needs a gradient on the first two calls, not on the last two (a recompile)
    GradCase(needs_input_grad, lambda i: _xw(i, w_grad=i < 2), calls=4, graphs=2),
    GradCase(mark_dirty_intermediate, _x),
    GradCase(mark_dirty_argument, lambda i: (_leaf(3, 4, seed=i), _r(3, 4, seed=20 + i))),
    GradCase(mark_non_differentiable, _x),
    GradCase(once_differentiable_backward, _x),
    GradCase(setup_context_style, _xw),
    GradCase(never_uses_ctx, _x),
    GradCase(multiple_outputs, _xw),
    GradCase(none_grads_for_non_tensors, _x),
    GradCase(straight_through, _x),
    GradCase(called_twice, _xw),
    GradCase(inside_module, lambda i: (_leaf(5, 4, seed=i),), modules=lambda: (_copy_model(),)),
    GradCase(module_method_in_loop, lambda i: (_leaf(5, 6, seed=i),), modules=lambda: (_copy_model(),)),
    # a fresh copy of the model on every call: torch.compile reuses its graph
    GradCase(inside_module, lambda i: (_copy_model(), _leaf(5, 4, seed=i)), name="fresh_module_each_call"),
    GradCase(create_graph_inside, _x, graphs=2, breaks=1),
    GradCase(tensor_on_ctx, _x),
    GradCase(returns_input, _x),
    GradCase(no_materialize_grads, _x),
    GradCase(list_argument, _xw),
    GradCase(under_no_grad, _xw),
    GradCase(no_input_needs_grad, _xw),
    # the sign of x alternates: torch.compile gives 8 graphs and 2 breaks; graphjit
    # leaves the call to Python (the fake run cannot branch on data): 2 graphs, 1 break
    GradCase(data_dependent_forward,
             lambda i: ((_r(3, 4, seed=i) * (-1) ** i).requires_grad_(),), calls=4, graphs=2, breaks=1),
    # forward prints and appends: speculating it finds the side effects, so the call runs
    # in Python (torch.compile: 3 graphs, 2 breaks)
    GradCase(side_effects_in_forward, _x, graphs=2, breaks=1),
    # SCALE changes before the third call: the read in forward is guarded (a recompile,
    # as torch.compile)
    GradCase(reads_changed_global, _set_scale_and_x, calls=4, graphs=2),
]


def _copy_model():
    return copy.deepcopy(_MODEL)


def _params(cases, marks: dict[str, Any] | None = None):
    marks = marks or {}
    return [pytest.param(c, id=c.name, marks=marks.get(c.name, ())) for c in cases]


def _xfail(reason: str):
    return pytest.mark.xfail(strict=True, reason=f"graphjit: {reason}")


_EAGER_MARKS: dict = {}  # (a fresh copy of the module each call: one graph, as torch.compile)
_AOT_MARKS = {
    **_EAGER_MARKS,
    "create_graph_inside": _xfail(
        "[aot_eager] backward of the gradient: RuntimeError 'torch.compile with aot_autograd "
        "does not currently support double backward' (torch.compile fails it too)"),
}


@pytest.mark.parametrize("case", _params(CASES, _EAGER_MARKS))
def test_eager_backend(case):
    run_grad_case(case)


@pytest.mark.parametrize("case", _params(CASES, _AOT_MARKS))
def test_aot_eager_backend(case):
    run_grad_case(case, "aot_eager")


_INDUCTOR = [c for c in CASES if c.name in ("save_for_backward", "straight_through", "inside_module")]


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(_INDUCTOR))
def test_inductor_backend(case):
    run_grad_case(case, "inductor")


# --------------------------------------------------------------------------------------
# double backward
# --------------------------------------------------------------------------------------

def cube_of_sin(x):
    return Cube.apply(x.sin()) * 2


def _double_backward(fn, x):
    y = fn(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad((g * torch.linspace(-1, 2, g.numel()).reshape(g.shape)).sum(), x)
    return y, g, gg


_DOUBLE_MARKS = {"aot_eager": _xfail(
    "[aot_eager] second grad: RuntimeError 'torch.compile with aot_autograd does not currently "
    "support double backward' (AOTAutograd's compiled backward; torch.compile fails it too)")}


@pytest.mark.parametrize("backend", [pytest.param(b, marks=_DOUBLE_MARKS.get(b, ())) for b in
                                     ("eager", "aot_eager")])
def test_double_backward(backend):
    """``torch.autograd.grad(create_graph=True)`` through a compiled Function call, then a
    second grad of that gradient."""
    graphjit.reset()
    cnt = CompileCounter()
    be = cnt if backend == "eager" else (lambda gm, ex: (cnt(gm, ex), lookup_backend(backend)(gm, ex))[1])
    compiled = graphjit.compile(cube_of_sin, backend=be, fullgraph=True)
    for i in range(2):
        expected = _double_backward(cube_of_sin, _leaf(3, 4, seed=i))
        actual = _double_backward(lambda x: call_or_fail(compiled, x), _leaf(3, 4, seed=i))
        assert_equal(actual, expected, f"{backend}: call {i}")
    assert cnt.frame_count == 1


# --------------------------------------------------------------------------------------
# side by side with torch.compile
# --------------------------------------------------------------------------------------

def test_side_by_side_with_torch_compile(capsys):
    rows, misses = [], []
    for case in CASES:
        theirs, their_breaks, right = dynamo_grad_counts(case)
        rows.append((case.name, case.graphs, case.breaks, theirs, their_breaks, right))
        if case.graphs > theirs or (theirs == 1 and their_breaks == 0 and right and case.breaks):
            misses.append(case.name)
    with capsys.disabled():
        print(f"\n{'case':32} graphjit(graphs, breaks)  torch.compile(graphs, breaks, right)")
        for name, g, b, tg, tb, right in rows:
            print(f"{name:32} {g:3} {b:3}     {tg:3} {tb:3} {right}")
        print(f"total: graphjit {sum(r[1] for r in rows)} graphs, torch.compile {sum(r[3] for r in rows)}")
    assert not misses, f"graphjit's target worse than torch.compile on {misses}"


# --------------------------------------------------------------------------------------
# backward speculation: what backward reads is guarded, its side effects break
# --------------------------------------------------------------------------------------

GRAD_SCALE = 2.0
BACKWARD_LOG: list = []


class ScaledGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * GRAD_SCALE


class LoggingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        BACKWARD_LOG.append(g.shape)
        return g * 3


def _grad_of(fn, compiled_fn, x):
    x = x.detach().requires_grad_()
    compiled_fn(x).backward()
    return x.grad


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backward_global_changed_between_calls(backend):
    """A compiling backend traces backward when it compiles: the global it reads is
    guarded (before, aot_eager kept the first value's gradients)."""
    global GRAD_SCALE
    graphjit.reset()

    def f(x):
        return ScaledGrad.apply(x).sum()

    compiled = graphjit.compile(f, backend=backend)
    x = _r(3)
    try:
        for scale in (2.0, 5.0, 5.0):
            GRAD_SCALE = scale
            assert_equal(_grad_of(f, compiled, x), torch.full((3,), scale))
    finally:
        GRAD_SCALE = 2.0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backward_side_effect_happens_every_backward(backend):
    """A backward with a Python side effect makes the call a graph break: it runs once per
    backward pass, as in eager (a compiling backend would run it once, at compile time)."""
    graphjit.reset()
    BACKWARD_LOG.clear()

    def f(x):
        return (LoggingBackward.apply(x * 2) + 1).sum()

    compiled = graphjit.compile(f, backend=backend)
    for _ in range(3):
        _grad_of(f, compiled, _r(3))
    assert BACKWARD_LOG == [torch.Size([3])] * 3
    assert any("backward with Python side effects" in str(r)
               for r in graphjit.stats()["break_reasons"])


class _Depth:
    def __init__(self):
        self.depth, self.flags = 0, {"inside": False}


DEPTH = _Depth()


class RestoringBackward(torch.autograd.Function):
    """A backward that changes outer state and puts it back (a recursion counter, a flag):
    no side effect is left, so the call stays in the graph (as torch.compile's)."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        DEPTH.depth += 1
        DEPTH.flags["inside"] = True
        out = g * (3 + DEPTH.depth)
        DEPTH.flags["inside"] = False
        DEPTH.depth -= 1
        return out


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backward_side_effects_undone_stay_in_the_graph(backend):
    graphjit.reset()

    def f(x):
        return (RestoringBackward.apply(x * 2) + 1).sum()

    x = _r(3)
    want = _grad_of(f, f, x)
    cnt, be = counting_backend(backend)
    got = _grad_of(f, graphjit.compile(f, backend=be, fullgraph=True), x)
    assert_equal(got, want)
    assert cnt.frame_count == 1 and DEPTH.depth == 0 and DEPTH.flags == {"inside": False}


class Float64Grad(torch.autograd.Function):
    """torch 2.14's ``ctx.set_output_grad_dtype``: backward gets its gradient in float64."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_output_grad_dtype(torch.float64)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (g * 2).to(torch.float32) if g.dtype == torch.float64 else g * 0


@pytest.mark.skipif(not graphjit._compat.HAS_SET_OUTPUT_GRAD_DTYPE,
                    reason="ctx.set_output_grad_dtype is new in torch 2.14")
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_set_output_grad_dtype(backend):
    """The Function stays one node (fullgraph), and its backward sees the declared dtype."""
    graphjit.reset()

    def f(x):
        return Float64Grad.apply(x).sum()

    compiled = graphjit.compile(f, backend=backend, fullgraph=True)
    x = _r(3)
    assert_equal(_grad_of(f, compiled, x), _grad_of(f, f, x))
    assert_equal(_grad_of(f, compiled, x), torch.full((3,), 2.0))

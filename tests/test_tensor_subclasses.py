"""Tensor subclasses in compiled code (``variables/tensor_subclasses.py``,
``variables/torch_modes.py``): ``__torch_function__`` subclasses keep their type through
inputs, intermediates and outputs, their ``__torch_function__`` runs where eager runs it
(traced: its side effects replayed, not run again by the graph), their own members
work; traceable wrapper subclasses (``__tensor_flatten__``, ``TwoTensor``) are graph
inputs guarded by their flatten metadata (issue 19, item 3).

Each program runs eagerly and compiled (twice, backends ``eager`` and ``aot_eager``):
results (types included), what ``__torch_function__`` saw (``LOG``), gradients and graph
counts against ``torch.compile``.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch.testing._internal.two_tensor import TwoTensor

import graphjit
from graphjit.testing import CompileCounter, assert_equal

from _shared import seeded_randn

_r = seeded_randn(7600)
BACKENDS = ["eager", "aot_eager"]
LOG: list = []


class Plain(torch.Tensor):
    """No override: ``Tensor.__torch_function__`` keeps the type."""


class Scaled(torch.Tensor):
    """Logs each op; ``add`` results are multiplied by the class's ``factor``."""

    factor = 3.0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append((cls.__name__, func.__name__))
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        if func in (torch.Tensor.add, torch.add):
            out = out * cls.factor
        return out.as_subclass(cls) if isinstance(out, torch.Tensor) else out

    def doubled(self):
        return self * 2

    @property
    def twice(self):
        return self + self

    @classmethod
    def kind(cls):
        return cls.__name__

    @staticmethod
    def unit():
        return 1.0


class MoreScaled(Scaled):
    factor = 5.0


class UsesSuper(torch.Tensor):
    """Defers to ``Tensor.__torch_function__`` through ``super()``."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append((cls.__name__, func.__name__))
        return super().__torch_function__(func, types, args, kwargs)


def as_(cls, seed=0, *shape):
    return _r(*(shape or (3,)), seed=seed).as_subclass(cls)


def run_both(fn, *args, backend="eager", fullgraph=True, calls=2) -> CompileCounter:
    """Eager and compiled ``fn(*args)`` (``calls`` times): same results (and types), same
    ``LOG``."""
    graphjit.reset()
    counter = CompileCounter()
    inner = graphjit.backends.registry.lookup_backend(backend)

    def counting(gm, example_inputs):
        counter(gm, example_inputs)
        return inner(gm, example_inputs)

    counting.graphjit_cache_key = f"counting {backend}"  # (the warm pass loads its entries)

    compiled = graphjit.compile(fn, backend=counting, fullgraph=fullgraph)
    for _ in range(calls):
        LOG.clear()
        expected = fn(*args)
        expected_log = list(LOG)
        LOG.clear()
        actual = compiled(*args)
        assert LOG == expected_log, f"__torch_function__ saw {LOG}, eager {expected_log}"
        _same(actual, expected)
    assert torch._C._is_torch_function_enabled()
    return counter


def _same(actual, expected):
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same(a, e)
        return
    assert type(actual) is type(expected), f"{type(actual)} != {type(expected)}"
    if isinstance(expected, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            assert_equal(actual.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))
    else:
        assert_equal(actual, expected)


def torch_compile_graphs(fn, *args) -> int:
    torch._dynamo.reset()
    graphs = []
    compiled = torch.compile(fn, backend=lambda gm, ex: graphs.append(gm) or gm.forward)
    for _ in range(2):
        LOG.clear()
        compiled(*args)
    torch._dynamo.reset()
    return len(graphs)


# --------------------------------------------------------------------------------------
# 1. __torch_function__ subclasses keep their type
# --------------------------------------------------------------------------------------

def ops_and_types(x, y):
    z = x * 2 + y
    w = torch.sin(z)
    return z, w, type(z), type(w), isinstance(z, type(x)), z.sum(), x


#: torch.compile on the same program: Plain one graph, UsesSuper two, Scaled fails
#: (RecursionError inside TorchDynamo)
TORCH_COMPILE_GRAPHS = {Plain: 1, UsesSuper: 2, Scaled: None}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [Plain, Scaled, UsesSuper], ids=lambda c: c.__name__)
def test_types_through_inputs_intermediates_outputs(cls, backend):
    cnt = run_both(ops_and_types, as_(cls, 1), _r(3, seed=2), backend=backend)
    assert cnt.frame_count == 1
    if TORCH_COMPILE_GRAPHS[cls] is None:
        with pytest.raises(Exception, match="RecursionError"):
            torch_compile_graphs(ops_and_types, as_(cls, 1), _r(3, seed=2))
    else:
        assert torch_compile_graphs(ops_and_types, as_(cls, 1), _r(3, seed=2)) == TORCH_COMPILE_GRAPHS[cls]


def input_returned(x):
    return x, x.as_subclass(torch.Tensor), x.as_subclass(Plain)


def test_input_returned_is_the_same_object_and_as_subclass_retypes():
    x = as_(Scaled, 3)
    graphjit.reset()
    out = graphjit.compile(input_returned, backend="eager")(x)
    assert out[0] is x
    assert [type(o) for o in out] == [Scaled, torch.Tensor, Plain]
    run_both(input_returned, x)


def members(x):
    return x.doubled(), x.twice, x.factor, x.kind(), x.unit(), type(x).factor


@pytest.mark.parametrize("backend", BACKENDS)
def test_members_a_subclass_defines(backend):
    run_both(members, as_(Scaled, 4), backend=backend)


def test_class_attribute_read_by_the_handler_is_guarded():
    x, y = as_(Scaled, 5), _r(3, seed=6)
    graphjit.reset()
    compiled = graphjit.compile(ops_and_types, backend="eager")
    old = Scaled.factor
    try:
        for factor in (3.0, 3.0, 4.0):
            Scaled.factor = factor
            _same(compiled(x, y), ops_and_types(x, y))
    finally:
        Scaled.factor = old
    assert graphjit.stats()["frames_total"] == 2


def instance_attribute(x):
    return x * x.scale


def test_instance_attribute_of_an_input():
    x = as_(Plain, 7)
    x.scale = 2.0
    graphjit.reset()
    compiled = graphjit.compile(instance_attribute, backend="eager")
    _same(compiled(x), instance_attribute(x))
    x.scale = 3.0
    _same(compiled(x), instance_attribute(x))
    assert graphjit.stats()["recompiles"] == 1


def precedence(a, b):
    return torch.add(a, b), a.mul(b), type(a + b)


@pytest.mark.parametrize("order", ["base first", "subclass first"])
def test_a_subclass_dispatches_before_its_base(order):
    a, b = as_(Scaled, 8), as_(MoreScaled, 9)
    args = (a, b) if order == "base first" else (b, a)
    run_both(precedence, *args)


def disabled_inside(x):
    with torch._C.DisableTorchFunctionSubclass():
        y = x + 1
    return y, type(y), x + 1


def test_disable_torch_function_subclass_inside_compiled_code():
    run_both(disabled_inside, as_(Scaled, 10))


class Declines(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return NotImplemented


def declined(x):
    return torch.sin(x)


def test_all_overrides_decline_raises_eagers_type_error():
    x = as_(Declines, 11)
    with pytest.raises(TypeError) as eager:
        declined(x)
    with pytest.raises(TypeError) as compiled:
        graphjit.compile(declined, backend="eager")(x)
    assert str(compiled.value) == str(eager.value)


class Tagging(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        LOG.append(("mode", func.__name__, tuple(t.__name__ for t in types)))
        return func(*args, **(kwargs or {}))


def subclass_under_mode(x, y):
    with Tagging():
        return torch.add(x, y), x.sin()


@pytest.mark.parametrize("backend", BACKENDS)
def test_mode_dispatches_before_the_subclass(backend):
    """The mode first (with the subclass in ``types``), then what its handler calls
    reaches the subclass."""
    run_both(subclass_under_mode, as_(Scaled, 12), _r(3, seed=13), backend=backend)


def loss(x, w):
    return ((x * w).sin() + 1).sum()


def test_gradients_through_a_subclass_with_aot_eager():
    x = torch.Tensor._make_subclass(Scaled, _r(3, seed=14), True)  # a leaf that requires grad
    w = _r(3, seed=15).requires_grad_()
    LOG.clear()
    eager = loss(x, w)
    eager.backward()
    expected = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    compiled = graphjit.compile(loss, backend="aot_eager")(x, w)
    _same(compiled, eager)
    compiled.backward()
    assert_equal((x.grad.as_subclass(torch.Tensor), w.grad), (expected[0].as_subclass(torch.Tensor), expected[1]))


# --------------------------------------------------------------------------------------
# 2. traceable wrapper subclasses: TwoTensor
# --------------------------------------------------------------------------------------

def two(seed=0, *shape, dtype=torch.float32):
    shape = shape or (3,)
    return TwoTensor(_r(*shape, seed=seed).to(dtype), _r(*shape, seed=seed + 100).to(dtype))


def on_two_tensor(x, y):
    z = x * 2 + y
    return z.sin(), type(z), z.a, z.b.cos()


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_tensor_is_a_graph_input(backend):
    x, y = two(1), _r(3, seed=2)
    graphjit.reset()
    cnt = CompileCounter()
    inner = graphjit.backends.registry.lookup_backend(backend)
    compiled = graphjit.compile(on_two_tensor, backend=lambda gm, ex: cnt(gm, ex) or inner(gm, ex), fullgraph=True)
    for _ in range(2):
        out, expected = compiled(x, y), on_two_tensor(x, y)
        assert type(out[0]) is TwoTensor and out[1] is TwoTensor
        assert_equal((out[0].a, out[0].b, out[2], out[3]), (expected[0].a, expected[0].b, expected[2], expected[3]))
    assert cnt.frame_count == 1 == torch_compile_graphs(on_two_tensor, x, y)
    fake = [n.meta["example_value"] for n in cnt.graphs[0].graph.nodes if n.op == "placeholder"][0]
    assert type(fake) is TwoTensor  # a subclass instance over fake inner tensors


def sin_of_sum(x, y):
    z = (x * 2 + y).sin()
    return z, type(z)


def _parts(t):
    return (t.a, t.b) if type(t) is TwoTensor else t


def test_two_tensor_flatten_metadata_is_guarded():
    graphjit.reset()
    compiled = graphjit.compile(sin_of_sum, backend="aot_eager")
    y = _r(3, seed=2)
    inputs = [two(1), two(3),                                   # same metadata: one entry
              two(4, dtype=torch.float64),                      # the inner dtype
              TwoTensor(_r(3, 2, seed=5)[:, 0], _r(3, 2, seed=6)[:, 0]),  # inner strides
              _r(3, seed=7)]                                    # a plain tensor
    for x in inputs:
        out, expected = compiled(x, y), sin_of_sum(x, y)
        assert out[1] is expected[1] and type(out[0]) is expected[1]
        assert_equal(_parts(out[0]), _parts(expected[0]))
    assert graphjit.stats()["frames_total"] == 4


def two_tensor_loss(x, w):
    return (x * w).sin().sum()


def test_two_tensor_gradients_with_aot_eager():
    x, w = two(8).requires_grad_(), _r(3, seed=9).requires_grad_()
    two_tensor_loss(x, w).backward()
    expected = w.grad.clone()
    w.grad = None
    graphjit.compile(two_tensor_loss, backend="aot_eager")(x, w).backward()
    assert_equal(w.grad, expected)


class Tagged(torch.Tensor):
    """A traceable wrapper subclass whose flatten context is a tag its results keep."""

    @staticmethod
    def __new__(cls, inner, tag):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, strides=inner.stride(), dtype=inner.dtype,
                                                   device=inner.device, requires_grad=inner.requires_grad)

    def __init__(self, inner, tag):
        self.inner, self.tag = inner, tag

    def __repr__(self):  # (torch's debug logging prints inputs: no data read on fakes)
        return f"Tagged({self.tag!r})"

    def __tensor_flatten__(self):
        return ["inner"], self.tag

    @staticmethod
    def __tensor_unflatten__(inner_tensors, tag, outer_size, outer_stride):
        return Tagged(inner_tensors["inner"], tag)

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        tag = next(a.tag for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, Tagged))
        unwrap = lambda t: t.inner  # noqa: E731
        out = func(*torch.utils._pytree.tree_map_only(Tagged, unwrap, args),
                   **torch.utils._pytree.tree_map_only(Tagged, unwrap, kwargs or {}))
        return torch.utils._pytree.tree_map_only(torch.Tensor, lambda o: Tagged(o, tag), out)


def tagged_op(x):
    return (x * 2).sin()


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrapper_subclass_flatten_context_is_guarded(backend):
    """The context (``tag``) is metadata the graph's result carries: another tag fails the
    guard (TorchDynamo's TENSOR_SUBCLASS_METADATA_MATCH) instead of returning the old one."""
    graphjit.reset()
    compiled = graphjit.compile(tagged_op, backend=backend)
    t = _r(3, seed=20)
    for tag in ("a", "a", "b"):
        out, expected = compiled(Tagged(t, tag)), tagged_op(Tagged(t, tag))
        assert type(out) is Tagged and out.tag == expected.tag == tag
        assert_equal(out.inner, expected.inner)
    assert graphjit.stats()["frames_total"] == 2
    assert "tensor_flatten_spec(L['x'])" in compiled.recompile_reason((Tagged(t, "c"),), {})


def test_subclass_dispatch_disabled_at_the_call_is_guarded():
    """A trace that dispatched to a subclass guards the enable flags: called under
    ``DisableTorchFunctionSubclass`` it is traced again (results are plain tensors)."""
    x, y = as_(Scaled, 21), _r(3, seed=22)
    graphjit.reset()
    compiled = graphjit.compile(ops_and_types, backend="eager")
    for disabled in (False, True, False, True):
        with (torch._C.DisableTorchFunctionSubclass() if disabled else torch.enable_grad()):
            LOG.clear()
            expected, expected_log = ops_and_types(x, y), list(LOG)
            LOG.clear()
            actual = compiled(x, y)
            assert LOG == expected_log
            _same(actual, expected)
    assert graphjit.stats()["frames_total"] == 2

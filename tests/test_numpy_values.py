"""numpy on Python values inside compiled code (issue 19, item 6).

numpy called on constants and sizes is folded at trace time (guarded), and its results
(arrays, numpy scalars) are trace-time constants: operators, methods, indexing, ``int()``,
``tolist()``... fold too, so a SwinUNETR-like forward that pads its windows with numpy is
one graph (torch.compile makes two: it traces the numpy as tensors, and the input-size
check's ``.any()`` becomes a data-dependent branch).  numpy ufuncs on tensors and numpy on
``Tensor.numpy()`` are traced through ``torch._numpy``; other numpy functions on tensors and
``numpy.random`` are graph breaks with their reason.  Arrays that existed before the
call: configuration (an attribute, a global) is guarded by its contents, an argument is
data (a break where its values are needed).  Every program is checked against eager.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import graphjit
from graphjit.testing import check_same
import _swin_like
from _shared import counting_backend
from _vs_dynamo import dynamo_counts

BACKENDS = ["eager", "aot_eager"]
X = torch.randn(1, 3, 7, 9, generator=torch.Generator().manual_seed(6))
X2 = torch.randn(3, 4, generator=torch.Generator().manual_seed(7))


def _counts(fn, *args, fullgraph=False, calls=2):
    cnt = check_same(fn, *args, fullgraph=fullgraph, calls=calls)
    return cnt.frame_count, graphjit.stats()["graph_breaks"]


def _reasons():
    return [str(r).splitlines()[0] for r in graphjit.stats()["break_reasons"]]


# --------------------------------------------------------------------------------------
# the expressions, each one graph
# --------------------------------------------------------------------------------------

def window_padding(x):
    window = (4, 4)
    pad = (np.array(window) - np.array(x.shape[2:]) % np.array(window)) % np.array(window)
    return F.pad(x, (0, int(pad[1]), 0, int(pad[0])))


def prod_of_shape(x):
    n = np.prod(x.shape[1:])
    return x.reshape(x.shape[0], int(n)) * float(np.float32(0.5))


def any_remainder(x):
    if (np.array(x.shape[2:]) % 2).any():
        return x + 1
    return x - 1


def ceil_of_size(x):
    h = int(np.ceil(x.shape[2] / 4)) * 4
    return x.new_zeros(h) + x.sum()


def zeros_with_items(x):
    z = np.zeros(3, dtype=int)
    z[1] = x.shape[1]
    z += 1
    dims = tuple(z.tolist())
    return x.sum(dim=int(z[1]) - 3) * dims[0], z.sum() == 6


def iterate_and_compare(x):
    sizes = np.array(x.shape)
    total = 0
    for s in sizes[1:]:
        total += int(s)
    big = (sizes > 5).tolist()
    where = np.where(sizes > 5)[0]
    return x.flatten()[:total], big, tuple(int(i) for i in where), sizes.ndim, sizes.dtype == np.int64


def scalar_operands(x):
    return x * np.float32(2.0) + np.int64(3) - np.float64(0.5) * x.shape[1]


PROGRAMS = [window_padding, prod_of_shape, any_remainder, ceil_of_size, zeros_with_items,
            iterate_and_compare, scalar_operands]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_numpy_on_sizes_is_folded(fn):
    assert _counts(fn, X, fullgraph=True) == (1, 0)


#: torch.compile traces these numpy calls as tensors (``torch._numpy``): a value then read
#: back into Python (``int(pad[1])``, ``.any()``) is a data-dependent break
DYNAMO = {"window_padding": (3, 2), "prod_of_shape": (2, 2), "any_remainder": (2, 0),
          "ceil_of_size": (1, 0), "zeros_with_items": (3, 3), "scalar_operands": (1, 0)}


@pytest.mark.parametrize("name", DYNAMO)
def test_torch_compile_counts(name):
    assert dynamo_counts(globals()[name], X) == DYNAMO[name]


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_has_no_numpy(backend):
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(window_padding, backend=be, fullgraph=True)
    torch.testing.assert_close(compiled(X), window_padding(X))
    assert "np." not in cnt.graphs[0].code and "array" not in cnt.graphs[0].code


def test_new_sizes_recompile():
    graphjit.reset()
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(window_padding, backend=be, dynamic=False)
    for shape in [(1, 3, 7, 9), (1, 3, 8, 8), (1, 3, 7, 9)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), window_padding(x))
    assert cnt.frame_count == 2


def padding_amounts(x):
    window = (4, 4)
    pad = (np.array(window) - np.array(x.shape[2:]) % np.array(window)) % np.array(window)
    return x * 2, tuple(pad.tolist())


def test_symbolic_size_specializes_with_its_guard():
    """With dynamic shapes, a size numpy needs is specialized (guarded): another value of
    it recompiles, the sizes numpy does not read stay symbolic."""
    graphjit.reset()
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(padding_amounts, backend=be, dynamic=True)
    for shape in [(2, 3, 7, 9), (3, 5, 7, 9), (2, 3, 8, 9), (4, 6, 8, 9)]:
        x = torch.randn(shape)
        out, pad = compiled(x)
        want, wpad = padding_amounts(x)
        torch.testing.assert_close(out, want)
        assert pad == wpad
    assert cnt.frame_count == 2


# --------------------------------------------------------------------------------------
# the SwinUNETR-like block
# --------------------------------------------------------------------------------------

def _swin(seed=0):
    torch.manual_seed(seed)
    return _swin_like.SwinLike()


XS = torch.randn(2, 3, 12, 20, generator=torch.Generator().manual_seed(7))


def test_swin_like_is_one_graph():
    assert _counts(_swin(), XS, fullgraph=True) == (1, 0)
    assert dynamo_counts(_swin(), XS) == (2, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_swin_like_gradients(backend):
    model, ref = _swin(), _swin()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(model, backend=be, fullgraph=True)
    for step in range(2):
        x = torch.randn(2, 3, 12, 20, generator=torch.Generator().manual_seed(step))
        for net, run in ((model, compiled), (ref, ref)):
            net.zero_grad()
            run(x).square().mean().backward()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=name)
        with torch.no_grad():
            for net in (model, ref):
                for p in net.parameters():
                    p.sub_(0.05 * p.grad)
    assert cnt.frame_count == 1


def test_swin_like_global_window_changes():
    """The window and shift sizes are globals read by forward: changing them recompiles
    and follows eager."""
    model = _swin()
    graphjit.reset()
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(model, backend=be)
    old = _swin_like.WINDOW, _swin_like.SHIFT
    try:
        for window, shift in [((4, 4), (2, 2)), ((3, 5), (1, 2)), ((4, 4), (2, 2))]:
            _swin_like.WINDOW, _swin_like.SHIFT = window, shift
            torch.testing.assert_close(compiled(XS), model(XS))
    finally:
        _swin_like.WINDOW, _swin_like.SHIFT = old
    assert cnt.frame_count == 2


def test_swin_like_input_size_error_is_eagers():
    """An input the numpy check rejects: the ValueError (its message built with
    ``np.where(...).tolist()``) is eager's."""
    assert _counts(_swin(), torch.randn(2, 3, 13, 20)) == (0, 0)


def _real_swin_unetr():
    nets = pytest.importorskip("monai.networks.nets")  # not a dependency: run where installed
    pytest.importorskip("einops")
    torch.manual_seed(0)
    model = nets.SwinUNETR(in_channels=1, out_channels=2, feature_size=12, spatial_dims=2,
                           depths=(1, 1, 1, 1), num_heads=(1, 1, 1, 1)).eval()
    x = torch.randn(1, 1, 64, 64)
    with torch.no_grad():
        model(x)  # einops fills its backend cache on the first eager call
    return model, x


def test_real_swin_unetr():
    """monai's SwinUNETR: one graph (a 3D one too: measured, see docs/architecture.md)."""
    model, x = _real_swin_unetr()
    with torch.no_grad():
        assert _counts(model, x, fullgraph=True, calls=1) == (1, 0)


@pytest.mark.slow
def test_real_swin_unetr_torch_compile():
    model, x = _real_swin_unetr()
    with torch.no_grad():
        assert dynamo_counts(model, x) == (2, 1)


# --------------------------------------------------------------------------------------
# numpy on tensors (ufuncs traced), numpy.random: breaks with their reason
# --------------------------------------------------------------------------------------

def numpy_on_tensor(x):
    y = x + 1
    return np.sin(y) * 2  # (a ufunc on a tensor returns a tensor: ``* 2`` is a tensor op)


def tensor_numpy(x):
    a = x.relu().numpy()
    return torch.from_numpy(a * 2) + 1


def test_numpy_ufunc_on_a_tensor_is_traced():
    """``np.sin(tensor)``: one graph, as torch.compile's (``numpy_ufuncs``; the dtypes and
    the tensor result are tested in test_numpy_ufuncs_on_tensors.py)."""
    assert _counts(numpy_on_tensor, X, fullgraph=True) == (1, 0)
    assert dynamo_counts(numpy_on_tensor, X) == (1, 0)  # traced through torch._numpy


def test_tensor_numpy_is_traced():
    """``t.numpy()`` and numpy on that array go through torch._numpy (numpy_tensors): one
    graph, as torch.compile's."""
    assert _counts(tensor_numpy, X, fullgraph=True) == (1, 0)
    assert dynamo_counts(tensor_numpy, X) == (1, 0)


def numpy_on_tensor_arrays(x):
    a = (x + 1).numpy()
    m = np.mean(a, 0)
    s = np.sum(a)
    return (a.T, a.shape, a.dtype, a.strides, m, s, type(s), np.asarray(s), a[1:] * 2, -a, a > 0,
            a.reshape([1, a.size]), a.max(axis=0), np.linalg.norm(a), torch.from_numpy(a.copy()) + 1)


def test_numpy_on_arrays_of_tensors_one_graph():
    for backend in ("eager", "aot_eager"):
        check_same(numpy_on_tensor_arrays, X2, backend=backend, fullgraph=True)


def numpy_array_writes_break(x):
    a = (x + 1).numpy()
    a[0] = 5  # (the tensor would change under the graph: runs in Python)
    return torch.from_numpy(a) * 2


def test_writes_into_arrays_of_tensors_break():
    assert _counts(numpy_array_writes_break, X2)[1] >= 1
    assert any("ndarray" in r for r in _reasons())


def draws_numpy_random(x):
    return x + float(np.random.rand()) + np.random.randint(5)


def test_numpy_random_is_a_break_and_draws_as_eager():
    np.random.seed(0)
    expected = draws_numpy_random(X)
    graphjit.reset()
    compiled = graphjit.compile(draws_numpy_random, backend="eager")
    np.random.seed(0)
    torch.testing.assert_close(compiled(X), expected)
    assert _reasons()[0].startswith("numpy function with effects outside its result")
    state = np.random.get_state()[1].copy()
    np.random.seed(0)
    draws_numpy_random(X)
    assert (np.random.get_state()[1] == state).all()


# --------------------------------------------------------------------------------------
# arrays from outside the call
# --------------------------------------------------------------------------------------

class Config:
    window = np.array([4, 4])


CONFIG = Config()


def uses_config_array(x):
    pad = (CONFIG.window - np.array(x.shape[2:]) % CONFIG.window) % CONFIG.window
    return F.pad(x, (0, int(pad[1]), 0, int(pad[0]))), CONFIG.window.shape


def test_config_array_is_guarded_by_its_contents():
    graphjit.reset()
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(uses_config_array, backend=be, fullgraph=True)
    old = CONFIG.window.copy()
    try:
        for change in (None, "in place", None, "new array"):
            if change == "in place":
                CONFIG.window[0] = 3
            elif change == "new array":
                CONFIG.window = np.array([5, 2])
            out, shape = compiled(X)
            expected, eshape = uses_config_array(X)
            torch.testing.assert_close(out, expected)
            assert shape == eshape
    finally:
        CONFIG.window = old
    assert cnt.frame_count == 3


def mutates_config_array(x):
    CONFIG.window[1] += 1
    return x * int(CONFIG.window[1])


def test_mutating_an_outside_array_runs_in_python_once():
    old = CONFIG.window.copy()
    try:
        expected = [mutates_config_array(X), mutates_config_array(X)]
        CONFIG.window = old.copy()
        graphjit.reset()
        compiled = graphjit.compile(mutates_config_array, backend="eager")
        for want in expected:
            torch.testing.assert_close(compiled(X), want)
        assert CONFIG.window.tolist() == [old[0], old[1] + 2]
        assert _reasons()[0].startswith("mutation of a numpy array from outside the compiled function")
    finally:
        CONFIG.window = old


def reads_array_argument(x, a):
    return x[..., : a.shape[0]] * float(a.sum())


def test_array_argument_is_data():
    a = np.arange(3.0)
    assert _counts(reads_array_argument, X, a) == (2, 1)
    assert _reasons()[0].startswith("values of a numpy array passed to the compiled code")


# --------------------------------------------------------------------------------------
# arrays made in the trace that leave it
# --------------------------------------------------------------------------------------

def returns_arrays(x):
    a = np.arange(3) * x.shape[1]
    return x.sum(), a, a, np.float64(x.shape[0]) / 2


def test_returned_arrays_are_fresh_copies_with_their_identity():
    assert _counts(returns_arrays, X, fullgraph=True) == (1, 0)
    graphjit.reset()
    compiled = graphjit.compile(returns_arrays, backend="eager")
    _, a, b, half = compiled(X)
    assert a is b and a.tolist() == [0, 3, 6] and type(half) is np.float64
    a[0] = 100  # the caller's array: the next call's is a new one
    _, c, _, _ = compiled(X)
    assert c.tolist() == [0, 3, 6] and c is not a


def returns_view_of_held(x):
    a = np.arange(6).reshape(2, 3)
    return x + 1, a, a[0]


def test_view_of_a_held_array_does_not_escape_as_a_copy():
    graphjit.reset()
    compiled = graphjit.compile(returns_view_of_held, backend="eager")
    _, a, row = compiled(X)
    row[0] = 42
    assert a[0, 0] == 42  # eager's aliasing
    assert "a view of a numpy array escapes the compiled region" in " ".join(_reasons())


def tensor_from_new_array(x):
    a = np.ones(x.shape[1], dtype=np.float32) * 2
    t = torch.tensor(a)
    t.add_(1)  # a copy: ``a`` is unchanged, and so is the next call's constant
    return x.sum(0).sum(-1).sum(-1) * t + torch.tensor(a) + torch.as_tensor(np.float64(0.5))


def tensor_sharing_new_array(x):
    a = np.ones(x.shape[1], dtype=np.float32) * 2
    t = torch.from_numpy(a)
    t.add_(1)  # changes ``a`` too
    return x.sum(0).sum(-1).sum(-1) * t + torch.tensor(a)


def test_tensor_from_a_new_array_is_a_fresh_constant():
    assert _counts(tensor_from_new_array, X, fullgraph=True, calls=3) == (1, 0)


def test_tensor_sharing_a_new_array_is_a_break():
    # (the numpy before the break makes no graph; the rest is one)
    assert _counts(tensor_sharing_new_array, X, calls=3) == (1, 1)
    assert _reasons()[0].startswith("tensor sharing memory with a numpy array made in the compiled region")


def bool_scalar_operand(x):
    return x * np.bool_(True)


def test_numpy_bool_operand_is_a_break():
    assert _counts(bool_scalar_operand, X) == (0, 1)
    assert _reasons()[0].startswith("numpy bool as an operand of a tensor operation")


# --------------------------------------------------------------------------------------
# builtin types' methods called through the type (einops' pattern parser uses them)
# --------------------------------------------------------------------------------------

def parse_axes(x, pattern):
    left, right = pattern.split("->")
    names = [c for c in left if str.isalnum(c)]
    diff = set.symmetric_difference(set(names), set(c for c in right if str.isalnum(c)))
    return x.permute(*[names.index(c) for c in right.split()]), sorted(diff)


def test_type_methods_fold():
    assert _counts(parse_axes, X, "a b c d -> a c d b", fullgraph=True) == (1, 0)


def array_across_a_break(x):
    pad = np.array(x.shape[2:]) % 4
    print("padding", pad.tolist())  # a break: the array is passed to the resume function
    return x.flatten()[: int(pad.sum())] * 2


def test_array_made_before_a_break_is_folded_after_it():
    """An array the trace made is rebuilt (a copy) for the resume function, which folds its
    values again (it is not data): one graph (the code before the print has no op), no
    recompile on later calls."""
    assert _counts(array_across_a_break, X, calls=3) == (1, 1)
    assert graphjit.stats()["recompiles"] == 0

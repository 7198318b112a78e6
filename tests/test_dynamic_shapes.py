"""Dynamic shapes and unspecialized numbers: ``dynamic=None/True/False``,
``mark_dynamic``/``mark_static``, symbolic sizes in Python control flow (guards), int and
float arguments as graph inputs, and the guard text of a dynamic entry.  Every case is
differential (eager's results) and counts its graphs; eager and aot_eager backends."""

from __future__ import annotations

import math

import pytest
import torch
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

import graphjit
from _shared import capture_graphjit_log, check_golden, counting_backend

BACKENDS = ["eager", "aot_eager"]


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _run(fn, calls, backend="eager", **opts):
    """Compile ``fn``, call it on each argument tuple of ``calls`` and compare with eager;
    ``(graphs, recompiles)``."""
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(fn, backend=be, **opts)
    for args in calls:
        expected = fn(*args)
        actual = compiled(*args)
        torch.testing.assert_close(actual, expected)
    return cnt.frame_count, graphjit.stats()["recompiles"]


def flatten_scale(x, y):
    b = x.shape[0]
    z = x.view(b, -1) + y.reshape(b, -1)
    return z.sum(1) * b


BATCHES = [2, 3, 4, 5, 6, 7, 8, 9, 10]


def _batches(n_cols=4):
    return [(_r(b, n_cols, seed=b), _r(b, 2, 2, seed=b + 50)) for b in BATCHES]


@pytest.mark.parametrize("backend", BACKENDS)
def test_automatic_dynamic_recompiles_once_over_nine_batch_sizes(backend):
    assert _run(flatten_scale, _batches(), backend) == (2, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_true_compiles_once(backend):
    assert _run(flatten_scale, _batches(), backend, dynamic=True) == (1, 0)


def test_dynamic_false_recompiles_per_shape():
    graphs, recompiles = _run(flatten_scale, _batches()[:6], dynamic=False)
    assert (graphs, recompiles) == (6, 5)


def test_sizes_zero_and_one_are_specialized():
    # size 1 is its own entry (broadcasting semantics differ), as torch.compile's
    calls = [(_r(1, 4), _r(1, 2, 2)), (_r(3, 4), _r(3, 2, 2)), (_r(5, 4), _r(5, 2, 2)), (_r(1, 4), _r(1, 2, 2))]
    assert _run(flatten_scale, calls, dynamic=True) == (2, 1)


def branch_on_size(x):
    if x.size(0) > 4:
        return x * 2
    return x - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_branch_on_a_symbolic_size_guards_it(backend):
    calls = [(_r(n, 3),) for n in (2, 3, 4, 5, 6, 3, 8)]
    # one entry for sizes <= 4, one for sizes > 4: the branch is a guard of each
    assert _run(branch_on_size, calls, backend, dynamic=True) == (2, 1)


def size_arithmetic(x):
    n, d = x.shape
    half = n // 2
    return x[:half].sum() + len(x) + x.numel() / d + max(n, 3) + math.floor(n / 3), n * d


def test_size_arithmetic_and_returned_sizes():
    calls = [(_r(n, 3),) for n in (2, 5, 7, 9)]
    assert _run(size_arithmetic, calls, dynamic=True) == (1, 0)


def range_over_size(x):
    out = x
    for i in range(x.size(0)):  # needs the value: specialized, guarded
        out = out + i
    return out


def test_range_over_a_symbolic_size_specializes_it():
    calls = [(_r(n, 2),) for n in (2, 3, 2)]
    assert _run(range_over_size, calls, dynamic=True) == (2, 1)


def add_two(x, y):
    return x + y


def test_equal_sizes_are_guarded_equal():
    calls = [(_r(3, 2), _r(3, 2)), (_r(5, 2), _r(5, 2)), (_r(4, 2), _r(1, 2))]
    # duck sizing: x and y share a symbol while their sizes are equal; broadcasting from
    # a size 1 is a new entry
    assert _run(add_two, calls, dynamic=True) == (2, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mark_dynamic_without_a_recompile(backend):
    calls = []
    for n in (3, 5, 7):
        x, y = _r(n, 4), _r(n, 2, 2)
        graphjit.mark_dynamic(x, 0)
        graphjit.mark_dynamic(y, [0])  # y's batch too: it is added to x's
        calls.append((x, y))
    assert _run(flatten_scale, calls, backend, dynamic=False) == (1, 0)


def test_a_marked_dimension_tied_to_a_static_one_is_an_error():
    """As torch.compile: ``mark_dynamic`` promises the dimension varies; a trace that ties
    it to a constant (y's static batch equals it) raises ConstraintViolationError naming
    the dimension."""
    graphjit.reset()
    x = _r(3, 4)
    graphjit.mark_dynamic(x, 0)
    compiled = graphjit.compile(flatten_scale, backend="eager", dynamic=False)
    with pytest.raises(ConstraintViolationError, match=r"L\['x'\]\.size\(\)\[0\]"):
        compiled(x, _r(3, 2, 2))


def test_maybe_mark_dynamic_specializes_without_an_error():
    calls = []
    for n in (3, 5):
        x = _r(n, 4)
        graphjit.maybe_mark_dynamic(x, 0)  # y's static batch equals it: specialized, guarded
        calls.append((x, _r(n, 2, 2)))
    assert _run(flatten_scale, calls, dynamic=False) == (2, 1)
    calls = []
    for n in (3, 5, 7):  # where nothing ties it, it is symbolic: one graph
        x, y = _r(n, 4), _r(n, 2, 2)
        graphjit.maybe_mark_dynamic(x, 0)
        graphjit.maybe_mark_dynamic(y, 0)
        calls.append((x, y))
    assert _run(flatten_scale, calls, dynamic=False) == (1, 0)


def test_mark_static_keeps_a_dimension_static():
    calls = []
    for n in (3, 5, 7):
        x = _r(n, 4)
        graphjit.mark_static(x, 0)
        calls.append((x, _r(n, 2, 2)))
    assert _run(flatten_scale, calls, dynamic=True) == (3, 2)


def test_mark_dynamic_rejects_a_bad_dimension():
    with pytest.raises(IndexError):
        graphjit.mark_dynamic(_r(2, 2), 2)


def scaled(x, scale):
    return x * scale + scale ** 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_argument_varied_ten_times_gives_at_most_two_graphs(backend):
    x = _r(3, 3)
    graphs, _ = _run(scaled, [(x, 0.5 + i) for i in range(10)], backend)
    assert graphs <= 2


def int_arg(x, n):
    if n > 2:
        return x * n
    return x + n


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_argument_becomes_symbolic(backend):
    x = _r(3)
    assert _run(int_arg, [(x, n) for n in (3, 4, 5, 6, 1, 0)], backend) == (3, 2)


def item_math(x):
    s = x.sum().item()
    k = math.sqrt(abs(s)) + 1
    return x * k


def test_item_feeding_python_math_does_not_recompile_per_value():
    calls = [(_r(4, seed=i),) for i in range(8)]
    graphs, _ = _run(item_math, calls)
    # the graph before .item(), the resume function with the value as a constant, then
    # once more with the value symbolic for all later calls
    assert graphs == 3


def test_guard_text_of_a_dynamic_entry_is_golden():
    graphjit.reset()
    compiled = graphjit.compile(flatten_scale, backend="eager", dynamic=True)
    x, y = _r(3, 4), _r(3, 2, 2)
    compiled(x, y)
    entry = compiled._entries[0]
    check_golden("dynamic_guard_source.txt", entry.guard.source)
    assert entry.guard.check(_r(7, 4), _r(7, 2, 2))
    assert not entry.guard.check(_r(7, 4), _r(6, 2, 2))
    assert "shape" in entry.guard.why(_r(1, 4), _r(1, 2, 2))


def test_recompile_message_names_the_failing_shape_guard():
    graphjit.reset()
    compiled = graphjit.compile(branch_on_size, backend="eager", dynamic=True)
    with capture_graphjit_log("recompiles") as buf:
        compiled(_r(3, 2))
        compiled(_r(6, 2))
    text = buf.getvalue()
    assert "shape 2 <= L['x'].size()[0] and L['x'].size()[0] <= 4" in text, text
    assert "actual (6,)" in text, text


def print_then_view(x):
    print("shape", tuple(x.shape))
    return x.view(x.shape[0], -1).sum(1)


def test_resume_functions_are_dynamic_too(capsys):
    calls = [(_r(n, 2, 2),) for n in (2, 3, 4, 5)]
    graphs, recompiles = _run(print_then_view, calls)
    # the resume function: one static entry, then one symbolic; the frame's entries need
    # no graph (the printed shape is read from x itself, symbolic or not; torch.compile: 3)
    assert (graphs, recompiles) == (2, 2)
    capsys.readouterr()


def test_dynamic_must_be_a_bool_or_none():
    with pytest.raises(TypeError):
        graphjit.compile(add_two, backend="eager", dynamic="yes")


@pytest.mark.slow
def test_inductor_runs_symbolic_sizes_and_float_arguments():
    graphjit.reset()
    cnt, be = counting_backend("inductor")
    compiled = graphjit.compile(flatten_scale, backend=be, dynamic=True)
    for x, y in _batches()[:3]:
        torch.testing.assert_close(compiled(x, y), flatten_scale(x, y))
    assert cnt.frame_count == 1
    # inductor cannot take a SymFloat input: a float argument is passed as a 0-d float64
    # tensor (as TorchDynamo does), so ten values give two graphs
    graphjit.reset()
    cnt, be = counting_backend("inductor")
    compiled = graphjit.compile(scaled, backend=be)
    x = _r(3, 3)
    for i in range(10):
        torch.testing.assert_close(compiled(x, 0.5 + i), scaled(x, 0.5 + i))
    assert cnt.frame_count == 2


def float_out(x, s, t):
    return torch.sin(x) * (s * 2 + 1) / t, s + t


@pytest.mark.slow
def test_inductor_float_result_is_never_stale():
    """A float computed from float arguments and returned to Python: AOTAutograd's
    tensorify pass would bake it in as the value it saw (torch.compile returns 4.5 for
    every later ``s``); graphjit keeps such floats constants (a recompile per value)."""
    graphjit.reset()
    compiled = graphjit.compile(float_out, backend="inductor")
    x = _r(4)
    for s in (0.5, 1.5, 2.5, 3.5):
        torch.testing.assert_close(compiled(x, s, 3.0), float_out(x, s, 3.0))


def test_float_result_from_a_tensor_float_stays_right_with_any_backend():
    """A backend graphjit does not know to take SymFloat inputs (a user's callable) gets
    float arguments as 0-d float64 tensors; a float computed from one and returned to
    Python keeps the argument constant (never a stale value)."""
    graphjit.reset()
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(float_out, backend=be)
    x = _r(4)
    for s in (0.5, 1.5, 2.5, 3.5):
        torch.testing.assert_close(compiled(x, s, 3.0), float_out(x, s, 3.0))
    assert cnt.frame_count == 4  # constants: one graph per value
    graphjit.reset()
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(scaled, backend=be)
    for i in range(10):
        torch.testing.assert_close(compiled(x, 0.5 + i), scaled(x, 0.5 + i))
    assert cnt.frame_count == 2  # used by tensor ops only: a tensor input, then one entry
    gm = cnt.graphs[-1]
    inputs = [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"]
    assert any(t.dim() == 0 and t.dtype == torch.float64 for t in inputs), inputs


def test_backend_failing_on_tensor_floats_makes_them_constants():
    graphjit.reset()
    calls = []

    def picky(gm, example_inputs):
        calls.append(len(example_inputs))
        if any(isinstance(t, torch.Tensor) and t.dim() == 0 and t.dtype == torch.float64
               for t in example_inputs):
            raise RuntimeError("this backend cannot take float tensors")
        return gm.forward

    compiled = graphjit.compile(scaled, backend=picky)
    x = _r(3)
    for i in range(4):
        torch.testing.assert_close(compiled(x, 0.5 + i), scaled(x, 0.5 + i))
    assert len(calls) == 5  # 0.5; 1.5 fails, then constant; 2.5; 3.5

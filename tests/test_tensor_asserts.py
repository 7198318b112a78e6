"""``assert`` on a one-element CPU tensor checked inside the graph (``tracer/assertions.py``).

Differential against eager: the value when the assertion holds, eager's ``AssertionError``
(its class, its message, no context) when it fails, on the same compiled entry (the world
changes between calls), and what eager leaves behind after the failure (inputs written,
Python side effects, grad mode).  Where the check cannot be in the graph (an input
written or a side effect before it, a handler around it, a message computed at run time,
a tensor of several elements) the jump breaks the graph, as before.  Graph and break
counts against torch.compile's, which puts ``torch._assert_async`` in the graph (a
``RuntimeError``).

PYTEST_DONT_REWRITE: the programs' ``assert`` statements are the subject (pytest would
rewrite them into its own code).
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as DynamoCounter

import graphjit
from _shared import counting_backend, seeded_randn
from graphjit.runtime.mode_state import capture_modes
from graphjit.testing import assert_equal
from graphjit.tracer.assertions import PREFIX, assertion_error

BACKENDS = ["eager", "aot_eager"]
_r = seeded_randn(22200)
POS, NEG = _r(4).abs() + 0.1, -_r(4).abs() - 0.1


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except Exception as e:  # noqa: BLE001 - the program's own error is the outcome
        return ("error", type(e), e.args, e.__context__ is None)


def _compare(fn, calls, backend="eager", graphs=None, breaks=None, clone=True):
    """``fn`` on each argument tuple of ``calls``, eagerly and on one compiled function."""
    fresh = (lambda a: tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in a)) if clone else (lambda a: a)
    eager_args = [fresh(a) for a in calls]
    eager = [_outcome(fn, *a) for a in eager_args]
    graphjit.reset()
    cnt, be = counting_backend(backend)
    c = graphjit.compile(fn, backend=be)
    our_args = [fresh(a) for a in calls]
    ours = [_outcome(c, *a) for a in our_args]
    assert_equal(ours, eager)
    assert_equal(our_args, eager_args)  # inputs written as eager wrote them
    if graphs is not None:
        assert (cnt.frame_count, graphjit.stats()["graph_breaks"]) == (graphs, breaks)
    return cnt


def check_positive(x):
    y = x * 2
    assert (y > 0).all()
    return y + 1


def check_with_message(x):
    assert x.sum() > 0, "the sum must be positive"
    return x.cos()


def check_both(x, y):
    assert x.min() > 0 and y.max() < 10, "out of range"
    return x + y


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_assert_is_checked_in_the_graph(backend):
    # passes, fails, passes again: one entry, no recompile
    _compare(check_positive, [(POS,), (NEG,), (POS,)], backend, graphs=1, breaks=0)
    _compare(check_with_message, [(NEG,), (POS,)], backend, graphs=1, breaks=0)
    _compare(check_both, [(POS, POS), (NEG, POS), (POS, POS + 20)], backend, graphs=1, breaks=0)


def test_gradients_through_a_checked_graph():
    def f(x, w):
        assert (w > 0).all(), "weights"
        return (x * w).sum()

    w_e, w_c = POS.clone().requires_grad_(), POS.clone().requires_grad_()
    f(POS, w_e).backward()
    graphjit.reset()
    graphjit.compile(f, backend="aot_eager")(POS, w_c).backward()
    assert_equal(w_c.grad, w_e.grad)


def test_graph_counts_as_torch_compile():
    for fn, args in [(check_positive, (POS,)), (check_with_message, (POS,)), (check_both, (POS, POS))]:
        torch._dynamo.reset()
        dcnt = DynamoCounter()
        torch.compile(fn, backend=dcnt)(*args)
        cnt = _compare(fn, [args])
        # (check_both: torch.compile breaks at the ``and`` of two tensors, 2 graphs)
        assert (cnt.frame_count, dcnt.frame_count) == (1, 2 if fn is check_both else 1)


def _inner(x):
    assert x.mean() > 0, "inner"
    return x.exp()


def test_an_assert_in_an_inlined_function():
    def f(x):
        return _inner(x * 1.5) + 1

    _compare(f, [(POS,), (NEG,)], graphs=1, breaks=0)


def test_an_input_written_after_the_assert_is_not_written_when_it_fails():
    def f(x):
        y = x.sum()
        assert y > 0
        x.add_(1)
        return y

    for backend in BACKENDS:
        _compare(f, [(POS,), (NEG,)], backend, graphs=1, breaks=0)


def test_what_the_graph_cannot_undo_breaks_the_graph():
    def written_before(x):
        x.add_(1)
        assert x.sum() > 0
        return x * 2

    log = []

    def side_effect_before(x):
        log.append(1)
        assert x.sum() > 0
        return x * 2

    def with_handler(x):
        try:
            assert x.sum() > 0, "caught"
        except AssertionError as e:
            return x - 1, str(e)
        return x + 1, ""

    def inside_with(x):
        with torch.no_grad():
            assert x.sum() > 0
            return x * 3

    def several_elements(x):
        assert x > 0  # eager: RuntimeError (ambiguous truth value)
        return x

    def computed_message(x):
        assert x.sum() > 0, f"sum of {x.shape}"
        return x

    for fn in (written_before, side_effect_before, with_handler, inside_with, computed_message):
        graphjit.reset()
        _compare(fn, [(POS,), (NEG,)])
        assert graphjit.stats()["graph_breaks"] >= 1, fn.__name__
    _compare(several_elements, [(POS,)])
    eager_log = list(log)
    log.clear()
    _compare(side_effect_before, [(POS,), (NEG,)])
    assert log == eager_log


def test_grad_mode_set_before_the_assert_breaks():
    def f(x):
        torch.set_grad_enabled(False)
        assert x.sum() > 0
        return x * 2

    def run(fn):
        out = []
        for x in (POS, NEG, POS):
            torch.set_grad_enabled(True)  # each call starts with grad mode on
            out.append((_outcome(fn, x), torch.is_grad_enabled()))
        return out

    try:
        eager = run(f)
        graphjit.reset()
        assert_equal(run(graphjit.compile(f, backend="eager")), eager)
        assert graphjit.stats()["graph_breaks"] >= 1
    finally:
        torch.set_grad_enabled(True)


def test_a_cuda_or_subclass_tensor_is_not_checked_in_the_graph():
    class Sub(torch.Tensor):
        pass

    def f(x):
        assert x.sum() > 0
        return x + 1

    _compare(f, [(POS.as_subclass(Sub),), (NEG.as_subclass(Sub),)])


def test_the_marker_round_trips_any_message():
    for message in ["", "plain", 'quotes " and \\ backslash', "naïve ✓", "a:b:c", "\x00nul"]:
        marker = PREFIX + "1" + message.encode("utf-8", "surrogatepass").hex() + ":"
        error = assertion_error(f"RuntimeError: {marker}\nException raised from ...")
        assert type(error) is AssertionError and error.args == (message,)
    assert assertion_error(PREFIX + "0:").args == ()
    assert assertion_error("some other error") is None
    assert assertion_error(PREFIX + "1zz:") is None


def test_generated_code_passes_other_errors_through():
    def f(x, i):
        assert x.sum() > 0
        return x[i]  # index out of range: eager's IndexError

    _compare(f, [(POS, 0), (POS, 10)])


@pytest.mark.slow
def test_inductor_raises_the_programs_assertion_error(tmp_path):
    def f(x):
        assert x.sum() > 0, 'the "sum" must be positive'
        return x.sin() + 1

    graphjit.reset()
    c = graphjit.compile(f, backend="inductor")
    assert_equal(c(POS), f(POS))
    with pytest.raises(AssertionError) as info:
        c(NEG)
    assert info.value.args == ('the "sum" must be positive',)




class _PassThrough(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _modes_after(x):
    assert x.sum() > 0, "negative"
    with torch.no_grad():  # (the graph switches grad mode and autocast after the check)
        y = x * 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = y @ y
    return z


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_state_after_a_failed_check(backend):
    graphjit.reset()
    c = graphjit.compile(_modes_after, backend=backend)
    before = capture_modes()
    assert_equal(c(POS), _modes_after(POS))
    for mode in (None, _PassThrough()):
        with mode or contextlib.nullcontext():
            depth = torch._C._len_torch_function_stack()
            assert _outcome(c, NEG) == _outcome(_modes_after, NEG)
            assert torch._C._len_torch_function_stack() == depth
        assert capture_modes() == before  # grad mode, autocast, functorch levels, mode stacks
    assert graphjit.stats()["graph_breaks"] == 0

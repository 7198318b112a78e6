"""A tuple iterator made before the compiled frame (an argument, or the iterator a frame
hands its resume function at a graph break) is stepped in the trace
(``variables/tuple_iterators.py``): its items are the tuple's, the guards check the items
it has left, and the same object is advanced after the graph by as many steps as eager's.

Differential: the return values, the iterator's position afterwards (the arguments are
compared after the call, iterators by the items they still give), a second call from
another position or with other items, and graph counts against torch.compile's on
PyTorch's test_subgraphs.py programs."""

from __future__ import annotations

import pytest
import torch

import graphjit
from _shared import check_sequence, compare_call, graphs_traced, seeded_randn
from _vs_dynamo import dynamo_counts
from graphjit.testing import CompileCounter

BACKENDS = ["eager", "aot_eager"]
_r = seeded_randn(23100)
X = _r(4)


def unsupported(a, b):
    """A call graphjit and torch.compile both leave to Python (a graph break)."""
    return a + b


unsupported = graphjit.disable(torch._dynamo.disable(unsupported))


def resume_tuple_iterator(a, b):  # PyTorch's test_subgraphs.py, test_resume_tuple_iterator
    x = a + b
    it = iter(tuple(range(10)))
    x = x + next(it)
    x = x + next(it)
    x = x + next(it)
    x = unsupported(x, x)
    x = x + next(it)
    x = x + next(it)
    x = x + next(it)
    x = x + next(it)
    return x


def tuple_iterator_return(x):  # test_subgraphs.py, test_tuple_iterator_return
    it = iter(tuple(range(10)))
    x = x + next(it)
    x = x + next(it)
    x = unsupported(x, x)
    x = x + next(it)
    x = x + next(it)
    x = unsupported(x, x)
    x = x + next(it)
    x = x + next(it)
    x = unsupported(x, x)
    return x, it


def steps_an_argument(it, x):
    x = x * next(it)
    x = x + next(it, 100)
    return x


def drains_an_argument(it, x):
    for v in it:
        x = x + v
    return x, next(it, "end")


def returns_it_after_a_step(it, x):
    return next(it) * x, it


def _tuple_it(items, skip=0):
    it = iter(tuple(items))
    for _ in range(skip):
        next(it)
    return it


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,inputs", [
    (resume_tuple_iterator, [(X, X * 2), (X * 3, X)]),
    (tuple_iterator_return, [(X,), (X * 2,)]),
    (steps_an_argument, [(_tuple_it((2, 3, 4)), X), (_tuple_it((2, 3, 4), skip=1), X),
                         (_tuple_it((5, 6)), X), (_tuple_it((7,)), X), (_tuple_it((1.5, X)), X)]),
    (drains_an_argument, [(_tuple_it((1, 2, 3)), X), (_tuple_it((1, 2, 3), skip=2), X), (_tuple_it(()), X),
                          (_tuple_it((X, 2 * X)), X)]),
    (returns_it_after_a_step, [(_tuple_it((2, 3)), X), (_tuple_it((4, 5), skip=1), X)]),
])
def test_matches_eager_and_advances_the_same_iterator(fn, inputs, backend):
    graphjit.reset()
    check_sequence(fn, graphjit.compile(fn, backend=backend), inputs)


def test_the_object_itself_is_advanced():
    """Another reference to the iterator sees eager's position: nothing is rebuilt."""
    def f(holder, x):
        it = holder[0]
        return x + next(it) + next(it)

    graphjit.reset()
    compiled = graphjit.compile(f, backend="eager")
    for make in (lambda: _tuple_it((1, 2, 3, 4)), lambda: _tuple_it((1, 2, 3, 4), skip=2)):
        eager_it, comp_it = make(), make()
        e_holder, c_holder = [eager_it], [comp_it]
        torch.testing.assert_close(compiled(c_holder, X), f(e_holder, X))
        assert c_holder[0] is comp_it
        assert list(comp_it) == list(eager_it)


def test_a_changed_item_or_position_traces_again():
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(steps_an_argument, backend=cnt)
    for it in (_tuple_it((2, 3, 4)), _tuple_it((2, 3, 4)), _tuple_it((9, 3, 4)), _tuple_it((0, 2, 3, 4), skip=1)):
        compare_call(steps_an_argument, compiled, (it, X))
    # the first two and the last have the same items left: one entry; (9, 3, 4) another
    assert cnt.frame_count == 2


def test_exhaustion_is_replayed():
    """An iterator the trace ran to its end is exhausted after the call, as in eager."""
    def f(it, x):
        for v in it:
            x = x + v
        return x

    graphjit.reset()
    compiled = graphjit.compile(f, backend="eager")
    eager_it, comp_it = _tuple_it((1, 2)), _tuple_it((1, 2))
    compiled(comp_it, X)
    f(eager_it, X)
    assert comp_it.__reduce__() == eager_it.__reduce__()  # (iter, ((),)): dropped its tuple


def test_a_list_iterator_still_breaks_with_its_reason():
    """A list iterator's list can change between the guard and the step: a break."""
    def f(it, x):
        return x + next(it)

    graphjit.reset()
    explanation = graphjit.explain(f)(iter([1, 2]), X)
    assert explanation.graph_break_count == 1
    assert "list_iterator" in str(explanation.break_reasons[0])


@pytest.mark.parametrize("fn,args", [(resume_tuple_iterator, (X, X * 2)), (tuple_iterator_return, (X,))])
def test_graph_counts_as_torch_compile(fn, args):
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt)
    compiled(*args)
    compiled(*args)
    assert (graphs_traced(cnt), graphjit.stats()["graph_breaks"]) == dynamo_counts(fn, *args, calls=2)

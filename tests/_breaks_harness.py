"""The harness of the graph-break tests (``test_breaks.py``, ``test_breaks_statements.py``):
compile one function with a counting backend, call it (twice per input) comparing with
eager, and pin the graph and break counts (the counting rules are in ``test_breaks.py``'s
docstring)."""

from __future__ import annotations

import graphjit
from _shared import check_sequence, seeded_randn
from graphjit.runtime.dispatch import all_entries
from graphjit.testing import CompileCounter


_r = seeded_randn(1000)

POS = _r(4, seed=1).abs() + 0.1     # sum > 0, every element > 0
NEG = -(_r(4, seed=2).abs() + 0.1)  # sum < 0, every element < 0
X = _r(4, seed=3)
Y = _r(4, seed=4)
M = _r(3, 4, seed=5)


def run(fn, *inputs, calls=2):
    """Compile ``fn`` once; call it ``calls`` times with each input (a tuple of positional
    args, or ``(args, kwargs)`` wrapped in :class:`Kw`), comparing with eager each time
    (:func:`_shared.check_sequence`).  Returns ``(counter, stats)``."""
    assert not fn.__code__.co_freevars, "test programs must not be closures (see test_closure_*)"
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt)
    check_sequence(fn, compiled, inputs, calls)
    cnt.unused_graphs = unused_graphs(cnt)  # while ``compiled`` (and its entries) are alive
    return cnt, graphjit.stats()


def unused_graphs(cnt):
    """Indices of the graphs handed to the backend that no live cache entry uses (compiled
    and then thrown away, e.g. because the code after them could not be generated)."""
    used = {g.name for e in all_entries() for g in e.graphs}
    return [i for i, gm in enumerate(cnt.graphs) if gm.meta["graphjit_name"] not in used]


def expect(fn, inputs, graphs, breaks, calls=2):
    """``graphs``: the graphs traced (a recompile whose graph is one compiled before for the
    same code takes its compiled callable, ``graph/shared_graphs.py``: counted here, as
    torch.compile's backend would be called for it)."""
    cnt, s = run(fn, *inputs, calls=calls)
    traced = cnt.frame_count + s["graphs_shared"]
    assert (traced, s["graph_breaks"]) == (graphs, breaks), (
        f"graphs/breaks: got {traced}/{s['graph_breaks']}, expected {graphs}/{breaks}; "
        f"reasons: {[r.reason for r in s['break_reasons']]}")
    assert not cnt.unused_graphs, (
        f"graphs {cnt.unused_graphs} of {cnt.frame_count} were compiled but no cache entry "
        f"uses them; reasons: {[r.reason for r in s['break_reasons']]}")
    return cnt, s


def placeholders(gm):
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


def branch_returns(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1

"""Shared by ``test_py_leftovers.py`` and ``test_py_leftovers_functional.py``: inputs, the
``case`` constructor (graphjit's target counts and torch.compile's ``tc``), the ``Box``
argument, and the check of the targets against torch.compile's counts."""

from __future__ import annotations

import copy
import os

import pytest

import graphjit
from _semantics import Case, dynamo_counts, run_case
from _shared import seeded_randn
from graphjit.backends.registry import lookup_backend
from graphjit.testing import CompileCounter, assert_equal

_r = seeded_randn(7300)
X, Y = _r(3, 4), _r(3, 4, seed=1)
XY = [(X,), (Y,)]
W = _r(3, 4, seed=2).requires_grad_()

#: torch.compile's ``(graphs, graph breaks, matches eager)`` per case
TC: dict[str, tuple[int, int, bool]] = {}


def case(fn, inputs, graphs=1, breaks=0, *, tc, xfail=None):
    """A :class:`Case` as a ``pytest.param``, with torch.compile's counts ``tc``; with
    ``xfail``, a strict xfail for that reason."""
    c = Case(fn, inputs, graphs, breaks)
    TC[c.name] = tc
    marks = [pytest.mark.xfail(strict=True, reason=f"graphjit: {xfail}")] if xfail else []
    return pytest.param(c, marks=marks, id=c.name)


class Box:
    """An argument the program stores something on (compared by it; iterators by the
    items they still give)."""

    def __init__(self):
        self.item = None

    def __eq__(self, other):
        try:
            assert type(other) is Box
            assert_equal(self.item, other.item)
        except AssertionError:
            return False
        return True

    __hash__ = None



def check_targets(cases, capsys, at_least: int) -> None:
    """Where torch.compile captures a case's calls without a break, the target has no break
    and no more graphs; no target has more graphs than torch.compile, unless it gave up the
    frame (0 graphs) where graphjit compiles around a clean break; over the cases
    torch.compile compiles, the targets total no more graphs.  Prints the totals."""
    rows = [(p.values[0], *TC[p.values[0].name], bool(p.marks)) for p in cases]
    assert len(rows) >= at_least
    no_break = [c for c, g, b, _, _ in rows if b == 0 and g >= 1]
    assert not [c.name for c in no_break if c.graphs > TC[c.name][0] or c.breaks]
    assert not [c.name for c, g, _, _, _ in rows if c.graphs > max(g, 1)]
    compiled = [(c.graphs, g) for c, g, _, _, _ in rows if g >= 1]
    ours, theirs = sum(o for o, _ in compiled), sum(t for _, t in compiled)
    with capsys.disabled():
        print(f"\n{len(rows)} cases: graphjit targets {sum(c.graphs for c, *_ in rows)} graphs, "
              f"{sum(c.breaks for c, *_ in rows)} breaks; torch.compile {sum(r[1] for r in rows)} "
              f"graphs, {sum(r[2] for r in rows)} breaks; on the {len(compiled)} cases it "
              f"compiles {ours} vs {theirs}; it gives up "
              f"{[c.name for c, g, *_ in rows if g == 0]}, "
              f"differs from eager on {[c.name for c, _, _, same, _ in rows if not same]}; "
              f"xfail: {sum(r[4] for r in rows)}")
    assert ours <= theirs


def _powers(x, n):
    t = x
    for _ in range(n):
        yield t
        t = t * 0.5


def case_tests(cases: list, escapes: list, at_least: int) -> dict:
    """The test functions of a file of cases (``globals().update(case_tests(...))``):
    each case with the ``eager`` and ``aot_eager`` backends; values the compiled function
    returns used by eager code afterwards (``escapes``: ``(id, fn, args, use)``); the
    targets against torch.compile's recorded counts; and, with
    ``GRAPHJIT_DYNAMO_RECHECK=1``, those counts measured again."""

    @pytest.mark.parametrize("case", cases)
    def test_eager_backend(case):
        run_case(case)

    @pytest.mark.parametrize("case", cases)
    def test_aot_eager_backend(case):
        run_case(case, lookup_backend("aot_eager"))

    @pytest.mark.parametrize("fn, args, use", [e[1:] for e in escapes], ids=[e[0] for e in escapes])
    def test_escaped_values_used_by_eager_code(fn, args, use):
        graphjit.reset()
        compiled = graphjit.compile(fn, backend=CompileCounter())
        assert_equal(use(compiled(*copy.deepcopy(args))), use(fn(*copy.deepcopy(args))))

    def test_targets_against_torch_compile(capsys):
        check_targets(cases, capsys, at_least=at_least)

    @pytest.mark.skipif(not os.environ.get("GRAPHJIT_DYNAMO_RECHECK"),
                        reason="measures torch.compile again (set GRAPHJIT_DYNAMO_RECHECK=1)")
    @pytest.mark.parametrize("case", [p.values[0] for p in cases], ids=lambda c: c.name)
    def test_recorded_torch_compile_counts(case):
        assert dynamo_counts(case) == TC[case.name]

    return {f.__name__: f for f in (test_eager_backend, test_aot_eager_backend,
                                     test_escaped_values_used_by_eager_code,
                                     test_targets_against_torch_compile,
                                     test_recorded_torch_compile_counts)}

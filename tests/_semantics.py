"""Differential cases for Python semantics in traced code (issue 8), shared by the
``test_py_*.py`` files and by ``test_py_vs_dynamo.py`` (not a test module itself).

A :class:`Case` is one program, the inputs it is called with (each twice) and the graph
count graphjit must give.  ``run_case`` runs it compiled with ``fullgraph=True`` when the
case expects no break, compares everything observable with eager (return value or
exception, arguments afterwards, stdout, ``random``'s and torch's RNG state afterwards;
both sides start from the same RNG state) and asserts the graph and break counts, with the
counting backend and again with ``aot_eager``.  ``dynamo_graph_count`` runs the same
program and inputs through ``torch.compile`` for the side-by-side comparison.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any, Callable

import pytest
import torch

import graphjit
from _shared import Kw, check_sequence, graphs_traced
from graphjit.backends.registry import lookup_backend
from graphjit.testing import CompileCounter, assert_equal


@dataclasses.dataclass
class Case:
    """``fn`` called (twice each) on ``inputs`` (tuples of positional arguments or
    :class:`Kw`) gives ``graphs`` graphs and ``breaks`` graph breaks under graphjit."""

    fn: Callable
    inputs: list
    graphs: int = 1
    breaks: int = 0
    name: str = ""

    def __post_init__(self):
        self.name = self.name or self.fn.__name__

    @property
    def fullgraph(self) -> bool:
        return self.breaks == 0


def case_ids(cases: list) -> list[str]:
    """The cases' names (an entry may be a ``pytest.param`` wrapping a case, an xfail)."""
    return [(c.values[0] if hasattr(c, "values") else c).name for c in cases]


def run_case(case: Case, backend: Any = None) -> CompileCounter:
    """Run ``case`` compiled and eagerly, compare, and check its graph and break counts.
    With ``backend`` (a name such as ``"aot_eager"``) the graphs go through that backend
    behind a counter."""
    graphjit.reset()
    cnt = CompileCounter()
    if backend is None:
        be = cnt
    else:
        inner = lookup_backend(backend) if isinstance(backend, str) else backend

        def be(gm, example_inputs):
            cnt(gm, example_inputs)
            return inner(gm, example_inputs)

        name = backend if isinstance(backend, str) else f"{backend.__module__}.{backend.__qualname__}"
        be.graphjit_cache_key = f"counting {name}"  # (the warm pass loads its entries)
    compiled = graphjit.compile(case.fn, backend=be, fullgraph=case.fullgraph)
    check_sequence(case.fn, compiled, case.inputs, who=f"graphjit[{backend or 'eager'}]")
    breaks = graphjit.stats()["graph_breaks"]
    cnt.traced = graphs_traced(cnt)
    assert (cnt.traced, breaks) == (case.graphs, case.breaks), (
        f"{case.name}: expected {case.graphs} graph(s) and {case.breaks} break(s), "
        f"got {cnt.traced} and {breaks}")
    return cnt


def dynamo_graph_count(case: Case) -> int:
    """:func:`dynamo_counts`' graph count."""
    return dynamo_counts(case)[0]


def dynamo_counts(case: Case) -> tuple[int, int, bool]:
    """``(graphs, graph breaks, matches eager)`` of ``torch.compile`` on ``case``'s
    calls (see :func:`dynamo_graph_count`); "matches eager" compares return values and
    raised exception types with the eager calls on the same copies."""
    import torch._dynamo
    import torch._dynamo.utils
    from torch._dynamo.testing import CompileCounter as DynamoCounter

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    cnt = DynamoCounter()
    compiled = torch.compile(case.fn, backend=cnt)
    same = True
    for inp in case.inputs:
        args, kwargs = (inp.args, inp.kwargs) if isinstance(inp, Kw) else (inp, {})
        for _ in range(2):
            outcomes = []
            for fn in (case.fn, compiled):
                state = random.getstate(), torch.get_rng_state()
                try:
                    outcomes.append(("ok", fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))))
                except Exception as e:  # noqa: BLE001
                    outcomes.append(("raised", type(e)))
                if fn is case.fn:
                    random.setstate(state[0])
                    torch.set_rng_state(state[1])
            try:
                if outcomes[0][0] != outcomes[1][0]:
                    same = False
                elif outcomes[0][0] == "ok":
                    assert_equal(outcomes[1][1], outcomes[0][1])
                elif outcomes[0][1] is not outcomes[1][1]:
                    same = False
            except AssertionError:
                same = False
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.reset()
    return cnt.frame_count, breaks, same


def parametrize_cases(cases: list[Case]):
    """``@parametrize_cases(CASES)`` over a test taking ``case``."""
    return pytest.mark.parametrize("case", cases, ids=case_ids(cases))


def describe_exception(e: BaseException | None, depth: int = 2) -> dict | None:
    """What the user can see of an exception: type, args, str, own attributes and (to
    ``depth``) its cause and context."""
    if e is None:
        return None
    out = {"type": type(e), "args": e.args, "str": str(e), "attrs": dict(vars(e)),
           "suppress_context": e.__suppress_context__}
    if depth:
        out["cause"] = describe_exception(e.__cause__, depth - 1)
        out["context"] = describe_exception(e.__context__, depth - 1)
    return out


def _raised(fn: Callable, args: tuple) -> BaseException:
    try:
        fn(*copy.deepcopy(args))
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError(f"{fn.__name__} did not raise")


def check_escaping(case: Case) -> None:
    """``case``'s program raises out of the compiled function: the exception that reaches
    the caller has eager's type, args, attributes and chaining (each call twice)."""
    graphjit.reset()
    compiled = graphjit.compile(case.fn, backend="eager", fullgraph=case.fullgraph)
    for args in case.inputs:
        expected = describe_exception(_raised(case.fn, args))
        for _ in range(2):
            assert_equal(describe_exception(_raised(compiled, args)), expected, "escaped exception")


def backend_tests(cases: list):
    """``(test_eager_backend, test_aot_eager_backend)`` over ``cases``: each case run
    differential against eager with the counting backend, then with ``aot_eager``; a test
    module binds them to its ``test_*`` names."""

    @parametrize_cases(cases)
    def test_eager_backend(case):
        run_case(case)

    @parametrize_cases(cases)
    def test_aot_eager_backend(case):
        run_case(case, "aot_eager")

    return test_eager_backend, test_aot_eager_backend

"""Issue 8's differential cases compared with TorchDynamo, side by side in one process.

Every case of ``test_py_exceptions``, ``test_py_context_managers``, ``test_py_iterators``,
``test_py_containers``, ``test_py_records``, ``test_py_builtins`` and ``test_py_random`` that graphjit handles (those still marked
``xfail`` are listed, not compared) is run by graphjit (:func:`_semantics.run_case`,
which also checks it against eager) and by ``torch.compile`` with a counting backend
(:func:`_semantics.dynamo_graph_count`, fresh copies of the arguments for every call).

* Where torch.compile captures a program in one graph without a break (and gets eager's
  results), graphjit does, with ``fullgraph=True``.
* Where torch.compile compiles a program (one graph or more) and gets eager's results,
  graphjit compiles no more graphs; over every program torch.compile compiles, graphjit's
  graph count is at most torch.compile's. A frame torch.compile gives up (no graph) runs
  in Python: graphjit's graphs there are not counted against it (torch.compile 2.14
  gives up more frames than 2.13 does, see ``_torch_compile_releases``).

The per-case table (graphjit, torch.compile) is printed (``pytest -s``) for the record.
"""

from __future__ import annotations

import pytest

import test_py_builtins
import test_py_containers
import test_py_context_managers
import test_py_exceptions
import test_py_iterators
import test_py_random
import test_py_records
from _semantics import Case, dynamo_counts, run_case

_MODULES = [test_py_exceptions, test_py_context_managers, test_py_iterators, test_py_containers,
            test_py_records, test_py_builtins, test_py_random]


def _cases() -> tuple[list[Case], list[str]]:
    """The compared cases and the names of the ones still marked xfail."""
    compared, pending = [], []
    for module in _MODULES:
        for entry in module.CASES:
            if isinstance(entry, Case):
                compared.append(entry)
                continue
            case = entry.values[0]
            if any(m.name == "xfail" for m in entry.marks):
                pending.append(f"{module.__name__}:{case.name}")
            else:
                compared.append(case)
    return compared, pending


@pytest.mark.cache_limits("the generated code holds a dict_keys")  # (a dict's view is read live)
def test_graph_counts_side_by_side_with_torch_compile(capsys):
    cases, pending = _cases()
    assert len(cases) >= 250
    rows, single_graph_misses, dynamo_wrong, more_where_right = [], [], [], []
    for case in cases:
        ours = run_case(case).traced
        theirs, their_breaks, their_results_right = dynamo_counts(case)
        if not their_results_right:
            dynamo_wrong.append(case.name)
        rows.append((case.name, ours, theirs))
        if theirs == 1 and their_breaks == 0 and their_results_right and (ours != 1 or not case.fullgraph):
            single_graph_misses.append(case.name)
        if their_results_right and 0 < theirs < ours:
            more_where_right.append((case.name, ours, theirs))
    total_ours = sum(r[1] for r in rows)
    total_theirs = sum(r[2] for r in rows)
    compiled_ours = sum(o for _, o, t in rows if t > 0)
    compiled_theirs = sum(t for _, o, t in rows if t > 0)
    with capsys.disabled():
        fewer = sum(1 for _, o, t in rows if o < t)
        more = [(n, o, t) for n, o, t in rows if o > t]
        print(f"\n{len(rows)} cases: graphjit {total_ours} graphs, torch.compile {total_theirs}; "
              f"where torch.compile compiles: {compiled_ours} and {compiled_theirs}; "
              f"fewer on {fewer}, more on {len(more)} {more}; torch.compile differs from eager on "
              f"{dynamo_wrong}; still xfail: {len(pending)}")
    assert not single_graph_misses, f"torch.compile gives one graph, graphjit does not: {single_graph_misses}"
    assert not more_where_right, f"more graphs than torch.compile where it is right: {more_where_right}"
    assert compiled_ours <= compiled_theirs, f"graphjit {compiled_ours} graphs > torch.compile {compiled_theirs}"


@pytest.mark.parametrize("module", _MODULES, ids=lambda m: m.__name__)
def test_each_case_names_its_graph_count(module):
    """Every case states its graph count (the harness asserts it); none expects 0 graphs
    unless it raises before any tensor work."""
    for entry in module.CASES:
        case = entry if isinstance(entry, Case) else entry.values[0]
        assert isinstance(case.graphs, int) and case.graphs >= 0, case.name

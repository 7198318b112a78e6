"""Shared by the issue-21 test files (the failure classes found in PyTorch's own TorchDynamo
tests and in real libraries); not a test module itself.

:func:`check_against_torch` runs a :class:`~_semantics.Case` through graphjit (compared
with eager, graph and break counts asserted by ``run_case``) and through ``torch.compile``
with a counting backend, and checks graphjit's graph count against torch.compile's:

* ``equal`` (the default): the same number of graphs;
* ``at_most``: no more graphs than torch.compile (graphjit keeps a program in one graph
  where torch.compile breaks);
* ``plus_one``: one more (the program raises: torch.compile gives the frame up, graphjit
  compiles the tensor work before the raise);
* ``torch_none``: torch.compile gives the whole frame up (no graph), graphjit compiles it.

Where torch.compile's result differs from eager (``torch_wrong``) only graphjit's
agreement with eager is asserted, and the case says so.

:func:`case_tests` makes a case list's three tests (``eager``, ``aot_eager``, counts
against torch.compile); a test module binds them to its ``test_*`` names.
"""

from __future__ import annotations

import contextlib

import torch
import torch._dynamo

from _semantics import Case, backend_tests, dynamo_counts, parametrize_cases, run_case


@contextlib.contextmanager
def dynamo_config(**settings):
    """``torch._dynamo.config`` settings for one comparison (restored after)."""
    old = {k: getattr(torch._dynamo.config, k) for k in settings}
    for k, v in settings.items():
        setattr(torch._dynamo.config, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(torch._dynamo.config, k, v)


def check_against_torch(case: Case, relation: str = "equal", torch_wrong: bool = False,
                        **dynamo_settings) -> tuple[int, int]:
    """Run ``case`` through graphjit and torch.compile; returns ``(ours, theirs)``."""
    grad = torch.is_grad_enabled()
    try:
        with dynamo_config(**dynamo_settings):
            theirs, _, same = dynamo_counts(case)
    finally:
        torch.set_grad_enabled(grad)  # (torch.compile can leave it switched)
    ours = run_case(case).frame_count
    if torch_wrong:
        assert not same, f"{case.name}: torch.compile now matches eager; compare the counts"
        return ours, theirs
    assert same, f"{case.name}: torch.compile differs from eager"
    expected = {"equal": ours == theirs, "at_most": ours <= theirs, "plus_one": ours == theirs + 1,
                "torch_none": theirs == 0 and ours >= 1}
    assert expected[relation], f"{case.name}: graphjit {ours} graphs, torch.compile {theirs} ({relation})"
    return ours, theirs


def case_tests(cases: list[Case], relation: dict | None = None, torch_wrong=frozenset(), **dynamo_settings):
    """``(test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile)``
    over ``cases``: each run differential against eager, and the graph count compared with
    torch.compile's by ``relation`` (case name -> relation, ``equal`` otherwise)."""
    relation = relation or {}

    test_eager_backend, test_aot_eager_backend = backend_tests(cases)

    @parametrize_cases(cases)
    def test_graph_count_against_torch_compile(case):
        check_against_torch(case, relation.get(case.name, "equal"), torch_wrong=case.name in torch_wrong,
                            **dynamo_settings)

    return test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile

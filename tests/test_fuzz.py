"""Differential fuzzing: seeded random programs, run eagerly and compiled, must agree.

``_fuzz_programs.generate(seed)`` writes a program ``prog(x, y, obj, lst, d)`` from typed
random building blocks (tensor and Python arithmetic, containers, attributes, helpers,
closures, generators, branches on Python values and on tensors, loops, ``try``/``except``,
``with`` blocks, global writes, prints and ``.item()`` for graph breaks), and
``_fuzz_programs.run_one(seed)`` runs it eagerly and compiled by graphjit (four calls, two
sets of inputs) comparing results, arguments afterwards, globals, stdout, grad mode,
exceptions and object identities; graphjit's own errors count as mismatches.

* ``test_fuzz_default``: seeds 0..499 with the ``eager`` backend (about 40 s);
  ``test_fuzz_many`` (slow): seeds 0..9999; ``test_fuzz_aot_eager`` (slow): seeds 0..499
  with ``aot_eager``.  Every mismatch is reported.  Seeds that mismatch today because of a
  bug already pinned down are listed in :data:`KNOWN` under the regression test for that
  bug: a new mismatch fails the test, and so does a listed seed that now agrees (the bug is
  fixed: drop the seeds and the test's xfail mark).
* one regression test per bug the fuzzer found: the program minimised by hand, checked
  with ``check_same``; the docstring names the fuzz seed it came from.

A mismatch is reproduced with ``python tests/_fuzz_programs.py --start SEED --count 1``;
``--show SEED`` prints the program and ``--minimize SEED`` shrinks it.
"""

from __future__ import annotations

import pytest
import torch

from _fuzz_programs import run_one
from graphjit.testing import check_same

# --------------------------------------------------------------------------------------
# the fuzz runs
# --------------------------------------------------------------------------------------

#: seeds that mismatch today (backend -> regression test -> seeds), each for the bug its
#: regression test shows
KNOWN: dict[str, dict[str, list[int]]] = {
    "eager": {
        "test_dict_deleted_from_while_iterated": [],
        "test_dict_popped_from_while_iterated": [],
        "test_nan_read_from_a_tensor_before_a_break": [],
        "test_nan_local_across_a_print": [],
        "test_list_display_unpacked_before_a_break": [],
        "test_dict_display_unpacked_before_a_break": [],
    },
    "aot_eager": {
        "test_requires_grad_set_in_the_graph_aot_eager": [],
        "test_in_place_on_a_leaf_made_in_the_graph_aot_eager": [],
    },
}


def check_fuzz(seeds: range, backend: str = "eager") -> None:
    """Run the programs of ``seeds``; fail listing every mismatch not in :data:`KNOWN`
    and every known seed that now agrees."""
    known = {seed: test for test, ss in KNOWN[backend].items() for seed in ss if seed in seeds}
    problems = {}
    for seed in seeds:
        problem = run_one(seed, backend)
        if problem is not None:
            problems[seed] = problem
    new = [p for seed, p in problems.items() if seed not in known]
    fixed = [f"seed {seed} ({test})" for seed, test in known.items() if seed not in problems]
    lines = []
    if new:
        lines += [f"{len(new)} of {len(seeds)} fuzz programs ({backend}) mismatch:", *new]
    if fixed:
        lines += ["these known seeds now agree (drop them from KNOWN; the bug may be fixed):", *fixed]
    assert not lines, "\n".join(lines)


def test_fuzz_default():
    check_fuzz(range(500))


@pytest.mark.slow
def test_fuzz_many():
    check_fuzz(range(10_000))


@pytest.mark.slow
def test_fuzz_aot_eager():
    check_fuzz(range(500), "aot_eager")


# --------------------------------------------------------------------------------------
# regression tests: one per bug found, minimised by hand
# --------------------------------------------------------------------------------------

X = torch.tensor([1.0, -2.0, 3.0])
Y = torch.tensor([0.5, 0.25, -1.0])


def dict_deleted_from_while_iterated(x, d):
    log = []
    try:
        for k in d:
            del d[k]
    except RuntimeError as e:
        log.append(str(e))
    return x + len(d), log


@pytest.mark.xfail(strict=True, reason="graphjit: deleting from a dict while iterating over it "
                   "raises no RuntimeError('dictionary changed size during iteration'); the loop "
                   "goes on and deletes every key")
def test_dict_deleted_from_while_iterated():
    """Fuzz seed 53 (and most seeds in KNOWN): eager deletes 'a', then raises."""
    check_same(dict_deleted_from_while_iterated, X, {"a": 1, "b": 2})


def dict_popped_from_while_iterated(x, d):
    for k in d:
        if d[k] > 1:
            d.pop(k)
    return x + len(d)


@pytest.mark.xfail(strict=True, reason="graphjit: d.pop(k) inside `for k in d` raises no "
                   "RuntimeError('dictionary changed size during iteration') out of the frame")
def test_dict_popped_from_while_iterated():
    """Fuzz seed 60: the RuntimeError leaves the program."""
    check_same(dict_popped_from_while_iterated, X, {"a": 1, "b": 2, "c": 0})


def nan_read_from_a_tensor_before_a_break(x):
    if (x / 0.0).sum().item() > 0.5:  # inf - inf: nan, on the stack at the break
        return x + 1
    return x - 1


@pytest.mark.xfail(strict=True, reason="graphjit: InternalError: the resume function's guard "
                   "CONSTANT_MATCH on the nan left on the stack by .item() rejects the call it "
                   "was traced from (nan != nan)")
def test_nan_read_from_a_tensor_before_a_break():
    """Fuzz seed 370 (a helper compared ``(t / -0.0).sum().item()`` with a float)."""
    check_same(nan_read_from_a_tensor_before_a_break, X)


def nan_local_across_a_print(x):
    f = float("nan")
    y = x * 2
    print("break")
    return y + f


@pytest.mark.xfail(strict=True, reason="graphjit: InternalError: the resume function's guard "
                   "CONSTANT_MATCH on the local float nan rejects the call it was traced from "
                   "(nan != nan)")
def test_nan_local_across_a_print():
    """Fuzz seed 2164 (``f0 = float('nan') if ... else ...`` live across a break)."""
    check_same(nan_local_across_a_print, X)


def _print_and_return(n):
    print("p", n)
    return n


def list_display_unpacked_before_a_break(x, lst):
    e = [*lst, _print_and_return(2)]
    return x + e[-1], e


@pytest.mark.xfail(strict=True, reason="graphjit: [*lst, f()] with a graph break in f() loses "
                   "the unpacked items (gives [2] for lst=[5, 7]); [f(), *lst] is right")
def test_list_display_unpacked_before_a_break():
    """Found while minimising fuzz seed 2080 (the fuzzer writes ``[*lst, n]``)."""
    check_same(list_display_unpacked_before_a_break, X, [5, 7])


def dict_display_unpacked_before_a_break(x, d):
    e = {**d, "a": _print_and_return(2)}
    return x + e["a"], e


@pytest.mark.xfail(strict=True, reason="graphjit: {**d, 'a': f()} with a graph break in f(): "
                   "InternalError while compiling the resume function: TypeError: 'NoneType' "
                   "object does not support item assignment")
def test_dict_display_unpacked_before_a_break():
    """Fuzz seed 2080 (``{**d, 'a': sum(gen(n))}``, a generator that prints)."""
    check_same(dict_display_unpacked_before_a_break, X, {"b": 1})


def requires_grad_set_in_the_graph(x, y):
    t = x.detach().requires_grad_()
    return y - t


@pytest.mark.xfail(strict=True, reason="graphjit with aot_eager: a tensor made to require grad "
                   "inside the graph (x.detach().requires_grad_()) gives outputs with "
                   "requires_grad=False")
def test_requires_grad_set_in_the_graph_aot_eager():
    """Fuzz seed 88 with aot_eager (torch.compile's aot_eager keeps requires_grad)."""
    check_same(requires_grad_set_in_the_graph, X, Y, backend="aot_eager")


def test_requires_grad_set_in_the_graph_eager():
    check_same(requires_grad_set_in_the_graph, X, Y)


def in_place_on_a_leaf_made_in_the_graph(x):
    t = (x * 2).detach().requires_grad_()
    t.add_(1)
    return t


@pytest.mark.xfail(strict=True, reason="graphjit with aot_eager: an in-place op on a leaf made "
                   "to require grad inside the graph raises no RuntimeError('a leaf Variable "
                   "that requires grad is being used in an in-place operation.')")
def test_in_place_on_a_leaf_made_in_the_graph_aot_eager():
    """Fuzz seed 272 with aot_eager (a helper did ``t[t < 0] = 0.5``)."""
    check_same(in_place_on_a_leaf_made_in_the_graph, X, backend="aot_eager")


def test_in_place_on_a_leaf_made_in_the_graph_eager():
    check_same(in_place_on_a_leaf_made_in_the_graph, X)

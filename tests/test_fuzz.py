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
  with ``check_same`` (``check_inputs`` where the bug needs two inputs in turn) with the
  counting backend and ``aot_eager``; the docstring names the fuzz seed it came from and
  what graphjit did wrong (most of these bugs are fixed; the rest are ``xfail``).

A mismatch is reproduced with ``python tests/_fuzz_programs.py --start SEED --count 1``;
``--show SEED`` prints the program and ``--minimize SEED`` shrinks it.
"""

from __future__ import annotations

import collections

import pytest
import torch

import graphjit
from _fuzz_programs import run_one
from _shared import check_sequence
from graphjit.testing import CompileCounter, check_same

# --------------------------------------------------------------------------------------
# the fuzz runs
# --------------------------------------------------------------------------------------

#: seeds that mismatch today (backend -> regression test -> seeds), each for the bug its
#: regression test shows
KNOWN: dict[str, dict[str, list[int]]] = {
    "eager": {
        "test_pop_attribute_from_dict": [],
        "test_negative_zero_over_a_dynamic_int": [1162, 7056],
    },
    "aot_eager": {
        "test_in_place_on_an_input_saved_for_backward": [368],
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
# regression tests: one per bug the fuzzer found, minimised by hand, with both backends
# --------------------------------------------------------------------------------------

X = torch.tensor([1.0, -2.0, 3.0])
Y = torch.tensor([0.5, 0.25, -1.0])
backends = pytest.mark.parametrize("backend", [None, "aot_eager"], ids=["eager", "aot_eager"])


def check_inputs(fn, inputs, backend=None):
    """Like ``check_same``, for several inputs in turn through one compiled function."""
    graphjit.reset()
    check_sequence(fn, graphjit.compile(fn, backend=backend or CompileCounter()), inputs)


def dict_deleted_from_while_iterated(x, d):
    log = []
    try:
        for k in d:
            del d[k]
    except RuntimeError as e:
        log.append(str(e))
    return x + len(d), log


@backends
def test_dict_deleted_from_while_iterated(backend):
    """Fuzz seed 53 and 3% of all seeds: eager deletes 'a', then raises (graphjit raised
    nothing and went on deleting every key)."""
    check_same(dict_deleted_from_while_iterated, X, {"a": 1, "b": 2}, backend=backend)


def dict_popped_from_while_iterated(x, d):
    for k in d:
        if d[k] > 1:
            d.pop(k)
    return x + len(d)


@backends
def test_dict_popped_from_while_iterated(backend):
    """Fuzz seed 60: the RuntimeError leaves the program (graphjit returned normally)."""
    check_same(dict_popped_from_while_iterated, X, {"a": 1, "b": 2, "c": 0}, backend=backend)


def ordered_dict_deleted_from_while_iterated(x, d):
    o = collections.OrderedDict(d)
    log = []
    try:
        for k in o:
            del o[k]
    except RuntimeError as e:
        log.append(str(e))
    return x + len(o), log


@backends
def test_ordered_dict_deleted_from_while_iterated(backend):
    """Fuzz seed 8554: the message is 'OrderedDict mutated during iteration' (graphjit gave
    the dict's)."""
    check_same(ordered_dict_deleted_from_while_iterated, X, {"a": 1, "b": 2}, backend=backend)


def nan_read_from_a_tensor_before_a_break(x):
    if (x / 0.0).sum().item() > 0.5:  # inf - inf: nan, on the stack at the break
        return x + 1
    return x - 1


@backends
def test_nan_read_from_a_tensor_before_a_break(backend):
    """Fuzz seed 370, a helper comparing ``(t / -0.0).sum().item()`` with a float
    (graphjit: InternalError, the resume function's CONSTANT_MATCH guard on the nan
    rejected the call it was traced from)."""
    check_same(nan_read_from_a_tensor_before_a_break, X, backend=backend)


def nan_local_across_a_print(x):
    f = float("nan")
    y = x * 2
    print("break")
    return y + f


@backends
def test_nan_local_across_a_print(backend):
    """Fuzz seed 2164: a local nan live across a break (the same InternalError)."""
    check_same(nan_local_across_a_print, X, backend=backend)


def _print_and_return(n):
    print("p", n)
    return n


def list_display_unpacked_before_a_break(x, lst):
    e = [*lst, _print_and_return(2)]
    return x + e[-1], e


@backends
def test_list_display_unpacked_before_a_break(backend):
    """Found minimising fuzz seed 2080; the fuzzer writes ``[*lst, n]`` (graphjit lost the
    unpacked items: [2] for lst=[5, 7])."""
    check_same(list_display_unpacked_before_a_break, X, [5, 7], backend=backend)


def dict_display_unpacked_before_a_break(x, d):
    e = {**d, "a": _print_and_return(2)}
    return x + e["a"], e


@backends
def test_dict_display_unpacked_before_a_break(backend):
    """Fuzz seed 2080, ``{**d, 'a': sum(gen(n))}`` with a generator that prints (graphjit:
    InternalError compiling the resume function, 'NoneType' object does not support item
    assignment)."""
    check_same(dict_display_unpacked_before_a_break, X, {"b": 1}, backend=backend)


class Knob:
    """A class attribute that an instance attribute may shadow."""

    scale = 2

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __eq__(self, other):
        return type(other) is Knob and vars(self) == vars(other)


def del_shadowing_attribute(x, obj):
    del obj.scale
    return x * obj.scale, obj.scale


@backends
def test_del_shadowing_attribute(backend):
    """Fuzz seed 2969: after ``del obj.scale`` the class attribute shows (graphjit read the
    deleted instance value)."""
    check_same(del_shadowing_attribute, X, Knob(scale=7), backend=backend)


def str_of_dict_subclasses(x, d):
    o, dd, c = collections.OrderedDict(d), collections.defaultdict(int, d), collections.Counter(d)
    return x + len(o), str(o), repr(dd), str(c)


@backends
def test_str_of_dict_subclasses(backend):
    """Fuzz seeds 192, 404, 1466, ``log.append(str(d0))`` (graphjit gave the plain dict's
    text for an OrderedDict, a defaultdict, a Counter)."""
    check_same(str_of_dict_subclasses, X, {"a": 1, "b": 2}, backend=backend)


def pop_attribute_from_dict(x, obj):
    obj.__dict__.pop("c", None)
    return x * 2


@backends
def test_pop_attribute_from_dict(backend):
    """Fuzz seed 6354: a helper popping ``c`` from the instance dict, called twice (the
    entry traced with ``c`` there was reused for an object without it: ``KeyError('c')``)."""
    check_inputs(pop_attribute_from_dict, [(X, Knob(c=1)), (X, Knob())], backend)


def requires_grad_set_in_the_graph(x, y):
    t = x.detach().requires_grad_()
    return y - t


@backends
def test_requires_grad_set_in_the_graph(backend):
    """Fuzz seed 88 with aot_eager (graphjit's outputs lost requires_grad)."""
    check_same(requires_grad_set_in_the_graph, X, Y, backend=backend)


def in_place_on_a_leaf_made_in_the_graph(x):
    t = (x * 2).detach().requires_grad_()
    t.add_(1)
    return t


@backends
def test_in_place_on_a_leaf_made_in_the_graph(backend):
    """Fuzz seed 272 with aot_eager, a helper doing ``t[t < 0] = 0.5`` (graphjit raised no
    'a leaf Variable that requires grad is being used in an in-place operation.')."""
    check_same(in_place_on_a_leaf_made_in_the_graph, X, backend=backend)


def in_place_on_an_input_saved_for_backward(x, y):
    t = x.detach().requires_grad_()
    u = t * y  # y is saved for u's backward
    y[1:] = 0.0
    return u


@pytest.mark.parametrize("backend", [None, pytest.param("aot_eager", marks=pytest.mark.xfail(
    strict=True, reason="graphjit with aot_eager: InternalError while compiling: RuntimeError: "
    "one of the variables needed for gradient computation has been modified by an inplace "
    "operation (AOTAutograd traces the backward; torch.compile fails the same way)"))],
    ids=["eager", "aot_eager"])
def test_in_place_on_an_input_saved_for_backward(backend):
    """Fuzz seed 368 with aot_eager (``t2 * y`` with ``t2`` made to require grad, then
    ``y[1:] = ...``); eager runs it (only a backward would complain)."""
    check_same(in_place_on_an_input_saved_for_backward, X, Y, backend=backend)


class Flag(Exception):
    """An exception whose ``__init__`` builds the message from its argument."""

    def __init__(self, code):
        super().__init__("flag " + str(code))
        self.code = code


def raise_exception_with_init(x, d):
    y = x + 1
    if d.get("k", 3) != 2:
        raise Flag(len(d))
    return y


@backends
def test_raise_exception_with_init(backend):
    """Fuzz seeds 204, 287, 381 (``raise Flag(len(log))``), against a working tree of
    graphjit between ad82e3a and bce186d (graphjit raised Flag('flag flag 1'): the rebuilt
    exception went through ``__init__`` with the message as its argument)."""
    check_same(raise_exception_with_init, X, {"a": 1}, backend=backend)


def percent_format_of_a_dynamic_int(x, knob):
    log = []
    try:
        if ("%d-%s" % (knob.a, "k")).startswith("k"):
            return x, log
        log.append(1 // 0)
    except Exception as e:  # noqa: BLE001 (the program's own handler)
        log.append(str(e))
    return x + knob.a, log


@backends
def test_percent_format_of_a_dynamic_int(backend):
    """Fuzz seed 7043: ``'%d-%s' % (knob.a, 'k')`` once ``knob.a`` had become a symbolic int
    (the third call) raised a TypeError eager does not raise, and the program's own handler
    caught it: a wrong answer.  The int is now formatted by its value (guarded)."""
    check_inputs(percent_format_of_a_dynamic_int, [(X, Knob(a=a)) for a in (1, 2, 3, 4)], backend)


def negative_zero_over_a_dynamic_int(x, knob):
    return x + 1, "f={:.3f}".format(-0.0 / (knob.a % 3 + 1))


@pytest.mark.xfail(strict=True, reason="graphjit: -0.0 divided by a symbolic int is computed "
                                       "by sympy, which has no negative zero ('f=0.000')")
@backends
def test_negative_zero_over_a_dynamic_int(backend):
    """Fuzz seeds 1162 and 7056: ``-0.0 / (knob.a % 3 + 1)`` once ``knob.a`` is a symbolic
    int formats as ``f=0.000`` (eager ``f=-0.000``)."""
    check_inputs(negative_zero_over_a_dynamic_int, [(X, Knob(a=a)) for a in (1, 2, 3, 4)], backend)

"""Graph breaks compared with TorchDynamo: for the same program and the same sequence of
inputs, graphjit must not produce more graphs than ``torch.compile`` does, and both must
give eager's results (return value, mutated arguments, stdout, grad mode afterwards).

torch.compile runs with a counting backend (``backend=counter``, which returns
``gm.forward``) after ``torch._dynamo.reset()``; graphjit runs with its CompileCounter after
``graphjit.reset()``.  Each input is passed twice, so the second call must hit the caches.
The programs are module-level functions (no closures); those that tests/test_breaks.py
also runs are shared with it through tests/_shared.py.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

import _shared
from _shared import check_sequence, compile_and_check, ops, seeded_randn

_r = seeded_randn(2000)

POS = _r(4, seed=1).abs() + 0.1
NEG = -(_r(4, seed=2).abs() + 0.1)
X = _r(4, seed=3)
Y = _r(4, seed=4)
XG = _r(4, seed=5).requires_grad_(True)


# --------------------------------------------------------------------------------------
# the programs (those also run by test_breaks.py or test_explain.py are in _shared.py)
# --------------------------------------------------------------------------------------

def helper_keywords(x):
    return _shared._scaled(x.relu(), scale=3) - _shared._scaled(x, 4, shift=1.5)


PROGRAMS = {
    "toy_example": (_shared.toy_example, [(X, POS), (X, NEG)]),
    "print_two": (_shared.print_two, [(X,)]),
    "helper_depth_2": (_shared.helper_depth_2, [(X,)]),
    "helper_depth_3": (_shared.helper_depth_3, [(X,)]),
    "helper_keywords": (helper_keywords, [(X,)]),
    "method_of_user_object": (_shared.method_of_user_object, [(X, _shared.Layer(3.0))]),
    "nested_ifs": (_shared.nested_ifs, [(POS, POS.clone()), (NEG, POS * 4), (NEG, NEG.clone())]),
    "elif_chain": (_shared.elif_chain, [(POS * 10,), (POS * 0.01,), (NEG * 10,)]),
    "item_math": (_shared.item_math, [(X,), (Y,)]),
    "tolist_sum": (_shared.tolist_sum, [(X,)]),
    "no_grad_break": (_shared.no_grad_break, [(XG,)]),
    "no_grad_decorated_helper": (_shared.no_grad_decorated_helper, [(XG,)]),
    "half_built_call": (_shared.half_built_call, [(X, Y)]),
    "attribute_write": (_shared.attribute_write, [(X, _shared.Obj(t=None))]),
    "nonzero_break": (_shared.nonzero_break, [(torch.tensor([0.0, 1.0, 0.0, 2.0]),)]),
    "recompile_new_shapes": (_shared.print_then_ops, [(_r(3),), (_r(5),), (_r(2, 2),)]),
    "while_tensor_condition": (_shared.while_tensor_condition, [(X,)]),
    "raise_in_branch": (_shared.raise_in_branch, [(POS,), (NEG - 2,)]),
}

#: Programs where torch.compile gives up on the whole frame ("Failed to handle graph break
#: gracefully. Skipping the function and falling back to eager": a break inside a loop body
#: or a ``try`` block) and so compiles no graph, while graphjit keeps the graph before the
#: statement that breaks (a step break).  Fewer graphs is not better there, so these are
#: compared on the ops captured instead of the graph count.
DYNAMO_SKIPS_FRAME = {
    "print_in_for_loop": (_shared.print_in_for_loop, [(X,)], 1),
    "break_in_try": (_shared.break_in_try, [(X,)], 1),
}


# --------------------------------------------------------------------------------------
# harness
# --------------------------------------------------------------------------------------

# Each input is called twice (:func:`_shared.check_sequence`); exception messages must
# match exactly (``ignore_addresses=False``).

def graphjit_count(fn, inputs, with_ops=False):
    cnt = compile_and_check(fn, inputs, who="graphjit", ignore_addresses=False)
    return (cnt.frame_count, cnt.op_count) if with_ops else cnt.frame_count


def _op_count(graphs):
    return sum(len(ops(gm)) for gm in graphs)


def dynamo_count(fn, inputs, with_ops=False):
    torch._dynamo.reset()
    graphs = []

    def counter(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    try:
        check_sequence(fn, torch.compile(fn, backend=counter), inputs,
                       who="torch.compile", ignore_addresses=False)
    finally:
        torch._dynamo.reset()
    return (len(graphs), _op_count(graphs)) if with_ops else len(graphs)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_graph_count_not_above_torch_compile(name):
    fn, inputs = PROGRAMS[name]
    ours = graphjit_count(fn, inputs)
    theirs = dynamo_count(fn, inputs)
    assert ours <= theirs, f"{name}: graphjit compiled {ours} graphs, torch.compile {theirs}"


@pytest.mark.parametrize("name", list(DYNAMO_SKIPS_FRAME))
def test_step_break_captures_what_torch_compile_skips(name):
    fn, inputs, expected_graphs = DYNAMO_SKIPS_FRAME[name]
    ours, our_ops = graphjit_count(fn, inputs, with_ops=True)
    theirs, their_ops = dynamo_count(fn, inputs, with_ops=True)
    assert theirs == 0, f"{name}: torch.compile now compiles {theirs} graphs; move it to PROGRAMS"
    assert ours == expected_graphs and our_ops >= their_ops


def test_toy_example_counts_are_equal():
    """The seed example: both systems compile exactly 3 graphs for both signs of b.sum()."""
    fn, inputs = PROGRAMS["toy_example"]
    assert graphjit_count(fn, inputs) == dynamo_count(fn, inputs) == 3

"""Frames whose first graph break comes before anything to compile (issue 32, item 4).

A break inside a loop, a ``try`` block or a ``with`` block of a Python context manager is
a step break; when nothing before it is worth a graph, the frame runs in Python (its calls
compiled) only up to the end of that statement, and a resume function compiles the rest
(``graph/region_resume.py``).  The frame still runs in Python, with its reason in
``stats()["skipped_frames"]``, where no resume is possible: the region runs to the end of
the frame, or nothing after it could be compiled.

Every program is differential (``check_same``: return value, stdout, mutated arguments,
with the ``eager`` and ``aot_eager`` backends, gradients where an input requires grad) and
pins graphjit's graph and break counts.  ``torch.compile`` skips all these frames (``graph
break in loop``, an empty checkpoint): ``test_counts_vs_torch_compile`` measures its counts
on the same programs, and compares what is captured (graphs are not fewer for the better
where torch.compile runs the code after the loop in Python).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest
import torch
import torch._dynamo
from torch import nn
from torch._dynamo.utils import counters

import graphjit
from graphjit.testing import CompileCounter, assert_equal, check_same

from _shared import check_sequence, compile_and_check, counting_backend, ops

X = torch.randn(4, generator=torch.Generator().manual_seed(0))
XS = [X, X * 2, -X]


def quiet(fn, *args, **kwargs):
    with redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


# -- the programs ----------------------------------------------------------------------------

def print_in_loop(x):
    for i in range(3):
        print("step", i)          # a print: the first break, inside the loop
    return torch.relu(x) * 2


def library_call_in_loop(x, names):
    sizes = []
    for name in names:
        sizes.append(len(json.dumps({name: 1})))   # a Python-only library call
    return x * sum(sizes) + x.sin()


def item_check_in_loop(xs):
    positive = 0
    for t in xs:
        if t.sum().item() > 0:    # a data-dependent check on a Python number
            positive += 1
    return torch.stack(xs).mean(0) * positive


def break_in_try(x):
    try:
        print("trying")
    except ValueError:
        pass
    return x.cos() + 1


class Noted:
    """A Python context manager (its ``__exit__`` would be skipped if a break resumed
    inside its block)."""

    def __init__(self) -> None:
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append("exit")
        return False

    def __eq__(self, other) -> bool:
        return type(other) is Noted and other.log == self.log


def in_with_block(x, noted):
    with noted:
        print("inside")           # in the with block of a Python context manager
    return x.tanh() - len(noted.log)


def while_with_break(x, n):
    i = 0
    while True:
        print(i)
        i += 1
        if i >= n:
            break
    return x * i + x.exp()


def bound_on_some_paths(x, n):
    for i in range(n):
        print(i)
        y = x * i                 # bound only if the loop ran
    if n:
        return y * 2              # (no resume while ``y`` may be unbound)
    return x.sin() - 1            # the resume point: every local it reads is bound


def kw_only_and_varargs(x, *rest, scale=2.0, **extra):
    for r in rest:
        print(r)
    return x * scale + sum(extra.values())


def cells_after_the_loop(x):
    k = 3.0
    for i in range(2):
        print(i)

    def times_k(t):
        return t * k              # ``k`` is a cell of the frame, passed to the resume function
    k = k + 1
    return times_k(x).relu()


class Base(nn.Module):
    def forward(self, x):
        return x * 3


class UsesSuper(Base):
    def forward(self, x):
        for _ in range(2):
            print("child")
        return super().forward(x).sigmoid()  # zero-argument super() in the resume function


class Stack(nn.Module):
    """A forward that starts with its layer loop, a Python-only call in every layer."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        for layer in self.layers:
            print(type(layer).__name__)
            x = layer(x)
        return self.head(torch.relu(x)).softmax(-1)


def raises_after_the_loop(x):
    for i in range(2):
        print(i)
    return x @ torch.ones(5)      # the program's error, raised by the resume function


# -- where the frame still runs in Python ----------------------------------------------------

def returns_inside_the_loop(x):
    i = 0
    while True:                   # (no code after the loop)
        print(i)
        i += 1
        if i == 2:
            return x * 2


def nothing_after_the_loop(x, out):
    for t in x.unbind():
        print(t)
        out.append(t * 2)
    return out


# -- tests -----------------------------------------------------------------------------------

#: name -> (function, inputs (each called twice), graphjit's (graphs, breaks), torch.compile's
#: graphs)
PROGRAMS = {
    "print_in_loop": (print_in_loop, [(X,)], (1, 1), 0),
    "library_call_in_loop": (library_call_in_loop, [(X, ["a", "bb"])], (1, 1), 0),
    "item_check_in_loop": (item_check_in_loop, [(XS,)], (1, 1), 0),
    "break_in_try": (break_in_try, [(X,)], (1, 1), 0),
    "in_with_block": (in_with_block, [(X, Noted())], (1, 1), 0),
    "while_with_break": (while_with_break, [(X, 3)], (1, 1), 0),
    # n=2: the loop breaks, ``return y * 2`` runs in Python; n=0: the same entry, resumed
    "bound_on_some_paths": (bound_on_some_paths, [(X, 2), (X, 0)], (1, 1), 0),
    "kw_only_and_varargs": (kw_only_and_varargs, [(X, 1, 2)], (1, 1), 0),
    # torch.compile's graph: ``times_k``, compiled as a frame of its own
    "cells_after_the_loop": (cells_after_the_loop, [(X,)], (1, 1), 1),
}


@pytest.mark.parametrize("backend", ["counter", "aot_eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_code_after_the_region_is_compiled(name, backend):
    fn, inputs, (graphs, breaks), _ = PROGRAMS[name]
    graphjit.reset()
    cnt, counted = counting_backend(backend)
    quiet(check_sequence, fn, graphjit.compile(fn, backend=counted), inputs)
    s = graphjit.stats()
    assert (cnt.frame_count, s["graph_breaks"]) == (graphs, breaks), s["break_reasons"]
    assert not s["skipped_frames"] and s["recompiles"] == 0
    assert "then a resume function" in s["break_reasons"][0].resumed


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_counts_vs_torch_compile(name):
    """torch.compile skips each of these frames (one break each, counted as the zoo counts
    them): no graph, or only a nested function's.  graphjit compiles the code after the
    region, with no more breaks."""
    fn, inputs, (graphs, breaks), tc_graphs = PROGRAMS[name]
    cnt = quiet(compile_and_check, fn, inputs)
    theirs, their_breaks = quiet(dynamo_sequence_counts, fn, inputs)
    assert (theirs, their_breaks) == (tc_graphs, 1), "torch.compile's counts changed"
    assert cnt.frame_count == graphs and graphjit.stats()["graph_breaks"] == breaks <= their_breaks


def dynamo_sequence_counts(fn, inputs) -> tuple[int, int]:
    """torch.compile's (graphs, breaks) over the inputs, each called twice; a frame it
    gives up on counts as a break (as ``_zoo_measure.py`` counts them)."""
    torch._dynamo.reset()
    counters.clear()
    cnt = CompileCounter()
    compiled = torch.compile(fn, backend=cnt)
    try:
        for args in inputs:
            for _ in range(2):
                compiled(*args)
        skipped = counters["frames"]["total"] - counters["frames"]["ok"]
        return cnt.frame_count, sum(counters["graph_break"].values()) + skipped
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("backend", ["counter", "aot_eager"])
def test_module_whose_forward_starts_with_its_layer_loop(backend):
    """The layers are compiled as frames of their own (leaves here: called as they are),
    the head after the loop by the resume function; gradients equal eager's."""
    torch.manual_seed(0)
    eager, compiled_model = Stack(), Stack()
    compiled_model.load_state_dict(eager.state_dict())
    cnt, counted = counting_backend(backend)
    graphjit.reset()
    net = graphjit.compile(compiled_model, backend=counted)
    for step in range(2):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(step))
        out_e, out_c = io.StringIO(), io.StringIO()
        with redirect_stdout(out_e):
            expected = eager(x)
        with redirect_stdout(out_c):
            actual = net(x)
        assert out_c.getvalue() == out_e.getvalue()
        assert_equal(actual, expected)
        expected.pow(2).sum().backward()
        actual.pow(2).sum().backward()
        for (name, pe), pc in zip(eager.named_parameters(), compiled_model.parameters()):
            torch.testing.assert_close(pc.grad, pe.grad, msg=lambda m: f"{name}: {m}")
    s = graphjit.stats()
    assert cnt.frame_count == 1 and s["graph_breaks"] == 1 and not s["skipped_frames"]
    assert ops(cnt.graphs[0]) == [torch.relu, torch.nn.functional.linear, "softmax"]
    # torch.compile: the frame is skipped ("graph break in loop"), no graph
    assert quiet(dynamo_sequence_counts, Stack(), [(x,)])[0] == 0


def test_zero_argument_super_in_the_resume_function():
    cnt = quiet(check_same, UsesSuper(), X)
    assert cnt.frame_count == 1 and graphjit.stats()["graph_breaks"] == 1


def test_error_after_the_loop_is_the_programs():
    compiled = graphjit.compile(raises_after_the_loop, backend="eager")
    with pytest.raises(RuntimeError) as ours:
        quiet(compiled, X)
    with pytest.raises(RuntimeError) as eager:
        quiet(raises_after_the_loop, X)
    assert str(ours.value) == str(eager.value)


def nested_caller(x):
    k = 2.0

    def inner(t):
        for i in range(2):
            print(i)
        return t.cos() * k        # a closure: one dispatcher per code object
    y = x + 1
    print("outer")
    return inner(y) - 1


def test_nested_function_compiled_per_code_object():
    """``inner`` breaks in its loop (the call breaks in the trace of ``nested_caller``) and
    is called through the dispatcher of its code object: its entry takes the closure."""
    cnt = quiet(check_same, nested_caller, X)
    s = graphjit.stats()
    assert not s["skipped_frames"] and s["recompiles"] == 0, s
    assert cnt.frame_count == 3, [ops(g) for g in cnt.graphs]  # x + 1, inner's tail, - 1


@pytest.mark.parametrize("fn, args, why, tc_graphs", [
    # (torch.compile's backedge heuristic stops at the ``return``: it resumes inside the loop)
    (returns_inside_the_loop, (X,), "no point after it to resume at", 1),
    (nothing_after_the_loop, (X, []), "nothing after it to compile", 0),
])
def test_frame_runs_in_python_where_no_resume_is_possible(fn, args, why, tc_graphs):
    cnt = quiet(check_same, fn, *args)
    s = graphjit.stats()
    assert cnt.frame_count == 0 and s["graph_breaks"] == 1
    assert [f.name for f in s["skipped_frames"]] == [fn.__name__]
    assert why in s["skipped_frames"][0].reason and "print" in s["skipped_frames"][0].reason
    assert quiet(dynamo_sequence_counts, fn, [args])[0] == tc_graphs


def test_explain_and_log_say_where_the_frame_resumes(capsys):
    graphjit.set_logs("graph_breaks")
    try:
        quiet(graphjit.compile(print_in_loop, backend="eager"), X)
    finally:
        graphjit.set_logs("")
    err = capsys.readouterr().err
    line = print_in_loop.__code__.co_firstlineno + 3
    assert f"Graph break in print_in_loop at CALL (the frame runs in Python up to line {line} " \
           "(its calls compiled), then a resume function)" in err
    text = str(quiet(graphjit.explain(print_in_loop), X))
    assert "Graph Count: 1" in text and f"runs in Python up to line {line}" in text
    assert "Skipped Frames" not in text


# --------------------------------------------------------------------------------------
# PyG's BasicGNN with jumping knowledge (the case): its forward's first break is
# in the layer loop; the jumping-knowledge aggregation and the last linear layer after it
# are a resume function's graph
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("jk", ["cat", "max"])
def test_pyg_basic_gnn_with_jumping_knowledge_vs_torch_compile(jk):
    pytest.importorskip("torch_geometric", reason="the libs extra (pip install -e '.[libs]')")
    import torch_geometric.nn.models as models
    from _library_zoo import Spec, _graph
    from _zoo_measure import counts, differences, run_graphjit, run_torch_compile
    from torch._dynamo.testing import CompileCounter as DynamoCounter

    torch.manual_seed(0)
    x, edge_index = _graph()
    gnn = models.GCN(8, 16, num_layers=2, out_channels=4, jk=jk).eval()
    spec = Spec(gnn, (x, edge_index))
    gj = run_graphjit(spec, "counter")
    tc = run_torch_compile(spec, DynamoCounter())
    assert gj.error is None and tc.error is None, (gj.error, tc.error)
    for out in gj.outputs:
        assert not differences(out, gj.expected)
    gj_counts, tc_counts = counts(gj), counts(tc)
    assert gj_counts[0] <= tc_counts[0] and gj_counts[1] <= tc_counts[1], (gj_counts, tc_counts)

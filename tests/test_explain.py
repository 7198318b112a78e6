"""Diagnostics of graph breaks: ``graphjit.explain``, the ``graph_breaks`` log artifact and
``fullgraph=True`` errors must say what broke and where (user file, line and source text,
the chain of inlined frames)."""

from __future__ import annotations

import contextlib
import io
import operator
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import graphjit
import _shared
from _shared import capture_graphjit_log, line_of, toy_example
from graphjit.testing import CompileCounter

THIS_FILE = os.path.abspath(__file__)
TOY_FILE = os.path.abspath(_shared.__file__)  # toy_example is shared with other test files


def _r(*shape, seed=0):
    g = torch.Generator().manual_seed(3000 + seed)
    return torch.randn(*shape, generator=g)


A = _r(10, seed=1)
B_POS = _r(10, seed=2).abs() + 0.1
B_NEG = -B_POS


def _line_of(fn, text):
    """Absolute line number of the first line of ``fn`` whose stripped text is ``text``."""
    return line_of(fn, text, whole_line=True)


TOY_IF_LINE = _line_of(toy_example, "if b.sum() < 0:")


def _deep3(x):
    print("deep")
    return x + 1


def _deep2(x):
    return _deep3(x * 2) - 1


def _deep1(x):
    return _deep2(x - 1) * 3


def deep_top(x):
    return _deep1(x.sin()).cos()


DEEP_PRINT_LINE = _line_of(_deep3, 'print("deep")')


def two_breaks(x):
    y = x + 1
    print("first")
    z = y.sum().item()
    return y * z


def no_break(x, y):
    return (x * y).relu() + 1


def _quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


@pytest.fixture
def graphjit_log():
    """Collect what the ``graphjit`` logger emits; the log artifacts the test turns on are
    switched back afterwards."""
    with capture_graphjit_log() as buf:
        yield buf


# --------------------------------------------------------------------------------------
# explain() on the seed toy_example
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("b, second_graph", [(B_NEG, [operator.mul, operator.mul]),
                                             (B_POS, [operator.mul])])
def test_explain_toy_example_counts_and_ops(b, second_graph):
    out = graphjit.explain(toy_example)(A, b)
    assert isinstance(out, graphjit.ExplainOutput)
    assert out.graph_count == 2 == len(out.graphs)
    assert all(isinstance(g, torch.fx.GraphModule) for g in out.graphs)
    assert out.graph_break_count == 1
    assert out.ops_per_graph[0] == [torch.abs, operator.add, operator.truediv, "sum", operator.lt]
    assert out.ops_per_graph[1] == second_graph
    assert out.op_count == 5 + len(second_graph)


def test_explain_toy_example_break_reason_location():
    out = graphjit.explain(toy_example)(A, B_NEG)
    assert len(out.break_reasons) == 1
    reason = out.break_reasons[0]
    assert isinstance(reason, graphjit.Unsupported)
    assert "data-dependent" in reason.reason
    frame = reason.user_stack[-1]
    assert os.path.abspath(frame.filename) == TOY_FILE
    assert frame.lineno == TOY_IF_LINE
    assert frame.name == "toy_example"
    assert frame.line == "if b.sum() < 0:"


def test_explain_toy_example_out_guards():
    out = graphjit.explain(toy_example)(A, B_NEG)
    assert out.out_guards
    text = "\n".join(out.out_guards)
    assert "'a'" in text and "'b'" in text and "TENSOR_MATCH" in text


def test_explain_toy_example_str():
    out = graphjit.explain(toy_example)(A, B_NEG)
    text = str(out)
    assert "Graph Count: 2" in text
    assert "Graph Break Count: 1" in text
    assert "Break Reason" in text
    assert "if b.sum() < 0:" in text
    assert f"line {TOY_IF_LINE}" in text and TOY_FILE in text
    assert "Ops per Graph" in text and "Out Guards" in text


def test_explain_does_not_change_results_and_resets():
    first = graphjit.explain(toy_example)(A, B_NEG)
    second = graphjit.explain(toy_example)(A, B_NEG)  # explain resets graphjit first
    assert (first.graph_count, first.graph_break_count) == (second.graph_count, second.graph_break_count)
    assert len(second.break_reasons) == 1


def test_explain_without_breaks():
    out = graphjit.explain(no_break)(A, B_POS)
    assert (out.graph_count, out.graph_break_count, out.break_reasons) == (1, 0, [])
    assert out.ops_per_graph == [[operator.mul, "relu", operator.add]]
    assert "Graph Break Count: 0" in str(out)


def test_explain_two_breaks_in_order():
    out = _quiet(graphjit.explain(two_breaks), A)
    assert out.graph_count == 3 and out.graph_break_count == 2
    reasons = out.break_reasons
    assert "print" in reasons[0].reason
    assert "item" in reasons[1].reason
    assert [r.user_stack[-1].line for r in reasons] == ['print("first")', "z = y.sum().item()"]


def test_explain_keyword_arguments():
    out = graphjit.explain(toy_example)(a=A, b=B_NEG)
    assert (out.graph_count, out.graph_break_count) == (2, 1)


# --------------------------------------------------------------------------------------
# breaks deep in inlined calls
# --------------------------------------------------------------------------------------

def test_explain_break_three_calls_deep_shows_inlined_frames():
    out = _quiet(graphjit.explain(deep_top), A)
    first = out.break_reasons[0]
    names = [f.name for f in first.user_stack]
    assert len(first.user_stack) >= 3
    assert names == ["deep_top", "_deep1", "_deep2", "_deep3"]
    assert first.user_stack[-1].lineno == DEEP_PRINT_LINE
    assert first.user_stack[-1].line == 'print("deep")'
    assert all(os.path.abspath(f.filename) == THIS_FILE for f in first.user_stack)
    # the call sites in the callers
    assert first.user_stack[0].line == "return _deep1(x.sin()).cos()"
    assert first.user_stack[1].line == "return _deep2(x - 1) * 3"
    assert first.user_stack[2].line == "return _deep3(x * 2) - 1"
    text = str(out)
    for name in ("deep_top", "_deep1", "_deep2", "_deep3"):
        assert f"in {name}" in text


def test_explain_break_three_calls_deep_counts():
    out = _quiet(graphjit.explain(deep_top), A)
    # deep_top [sin] | _deep1 [sub] | _deep2 [mul] | _deep3: print first, resume [add] |
    # _deep2 resume [sub] | _deep1 resume [mul] | deep_top resume [cos]
    assert (out.graph_count, out.graph_break_count) == (7, 4)
    # each wrapped callee reports the break again with its own (shorter) chain
    assert [len(r.user_stack) for r in out.break_reasons] == [4, 3, 2, 1]


# --------------------------------------------------------------------------------------
# GRAPHJIT_LOGS=graph_breaks
# --------------------------------------------------------------------------------------

def test_graph_breaks_log_names_file_and_line(graphjit_log):
    graphjit.set_logs("graph_breaks")
    compiled = graphjit.compile(toy_example, backend=CompileCounter())
    compiled(A, B_NEG)
    compiled(A, B_POS)
    text = graphjit_log.getvalue()
    assert text.count("Graph break") == 1
    assert f'File "{toy_example.__code__.co_filename}", line {TOY_IF_LINE}, in toy_example' in text
    assert "if b.sum() < 0:" in text
    assert "data-dependent" in text


def test_graph_breaks_log_each_break(graphjit_log):
    graphjit.set_logs("graph_breaks")
    compiled = graphjit.compile(two_breaks, backend=CompileCounter())
    _quiet(compiled, A)
    _quiet(compiled, A)  # cached: no new log lines
    text = graphjit_log.getvalue()
    assert text.count("Graph break") == 2
    for stmt in ('print("first")', "z = y.sum().item()"):
        assert f"line {_line_of(two_breaks, stmt)}" in text and stmt in text


def test_graph_breaks_log_deep_chain(graphjit_log):
    graphjit.set_logs("graph_breaks")
    _quiet(graphjit.compile(deep_top, backend=CompileCounter()), A)
    text = graphjit_log.getvalue()
    assert text.count("Graph break") == 4
    assert f"line {DEEP_PRINT_LINE}, in _deep3" in text
    for name in ("deep_top", "_deep1", "_deep2"):
        assert f"in {name}" in text


def test_graph_breaks_log_off_by_default(graphjit_log):
    graphjit.set_logs("")
    graphjit.compile(toy_example, backend=CompileCounter())(A, B_NEG)
    assert graphjit_log.getvalue() == ""


def test_graph_breaks_log_from_environment_variable(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch, graphjit

        def toy_example(a, b):
            x = a / (torch.abs(a) + 1)
            if b.sum() < 0:
                b = b * -1
            return x * b

        graphjit.compile(toy_example, backend="eager")(torch.ones(3), -torch.ones(3))
    """))
    env = dict(os.environ, GRAPHJIT_LOGS="graph_breaks")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Graph break in toy_example" in proc.stderr
    assert f'File "{script}", line 6, in toy_example' in proc.stderr
    assert "if b.sum() < 0:" in proc.stderr


# --------------------------------------------------------------------------------------
# fullgraph=True
# --------------------------------------------------------------------------------------

def test_fullgraph_raises_at_data_dependent_branch():
    cnt = CompileCounter()
    compiled = graphjit.compile(toy_example, backend=cnt, fullgraph=True)
    with pytest.raises(graphjit.Unsupported) as info:
        compiled(A, B_NEG)
    e = info.value
    assert "data-dependent branch" in str(e)
    assert e.user_stack[-1].lineno == TOY_IF_LINE
    assert f"line {TOY_IF_LINE}" in str(e) and "if b.sum() < 0:" in str(e)
    assert cnt.frame_count == 0


def test_fullgraph_raises_at_first_of_two_breaks():
    compiled = graphjit.compile(two_breaks, backend=CompileCounter(), fullgraph=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(graphjit.Unsupported) as info:
        compiled(A)
    assert "print" in info.value.reason
    assert info.value.user_stack[-1].line == 'print("first")'
    assert out.getvalue() == ""  # nothing of the function ran


def test_fullgraph_raises_at_tolist():
    """(``.item()`` is captured under fullgraph, as torch.compile's; ``tolist()`` of a float
    tensor is not, there either.)"""
    def fn(x):
        return x * x.sum().tolist()
    with pytest.raises(graphjit.Unsupported) as info:
        graphjit.compile(fn, backend="eager", fullgraph=True)(A)
    assert "tolist" in str(info.value)
    assert info.value.user_stack[-1].line == "return x * x.sum().tolist()"


def test_fullgraph_raises_with_inlined_chain():
    with pytest.raises(graphjit.Unsupported) as info:
        graphjit.compile(deep_top, backend="eager", fullgraph=True)(A)
    e = info.value
    assert [f.name for f in e.user_stack] == ["deep_top", "_deep1", "_deep2", "_deep3"]
    assert e.user_stack[-1].lineno == DEEP_PRINT_LINE
    text = str(e)
    assert "print" in text and 'print("deep")' in text and f"line {DEEP_PRINT_LINE}" in text


def test_fullgraph_raises_again_on_the_next_call():
    compiled = graphjit.compile(toy_example, backend="eager", fullgraph=True)
    for _ in range(2):
        with pytest.raises(graphjit.Unsupported):
            compiled(A, B_POS)


def test_fullgraph_without_break_compiles_one_graph():
    cnt = CompileCounter()
    compiled = graphjit.compile(no_break, backend=cnt, fullgraph=True)
    torch.testing.assert_close(compiled(A, B_POS), no_break(A, B_POS))
    assert cnt.frame_count == 1 and graphjit.stats()["graph_breaks"] == 0

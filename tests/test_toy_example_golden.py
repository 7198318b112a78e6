"""The seed example (seed 004, "TorchDynamo Deeper Dive"): ``toy_example`` compiled with
graphjit must give Dynamo's structure -- a first graph holding exactly abs, add, truediv,
sum, lt; a conditional jump on the graph's boolean output; two resume functions, one per
branch; 3 graphs in all once both signs of ``b.sum()`` have been seen -- and its
``bytecode`` / ``graph_code`` logs are golden-tested.

The function is compiled from source text under a fixed file name so that its line numbers
never move.  Text that varies between runs is normalised: file paths, memory addresses,
and the process-wide counters in ``__compiled_fn_<n>`` and ``__resume_at_<offset>_<n>``
(renumbered 0, 1, 2... in order of first appearance, so distinct names stay distinct;
the resume offsets are kept).  The log is produced in two fresh processes (with different
hash seeds) which must agree with each other and with the golden file.

``GRAPHJIT_UPDATE_GOLDEN=1`` rewrites ``tests/golden/toy_example_*.txt``.
Run ``python tests/test_toy_example_golden.py bytecode`` to print the normalised log.
"""

from __future__ import annotations

import difflib
import operator
import os
import re
import subprocess
import sys

import pytest
import torch

import graphjit
from _shared import (
    GOLDEN,
    UPDATE_GOLDEN,
    capture_graphjit_log,
    check_golden,
    drop_addresses,
    tidy_lines,
)
from graphjit.testing import CompileCounter, assert_equal

SOURCE = '''\
import torch


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b
'''
FILENAME = "/machine/dependent/path/toy_example.py"


def load_toy_example():
    ns: dict = {"__name__": "toy_example"}
    exec(compile(SOURCE, FILENAME, "exec"), ns)
    return ns["toy_example"]


def inputs():
    g = torch.Generator().manual_seed(4)
    a = torch.randn(10, generator=g)
    b = torch.randn(10, generator=g).abs() + 0.1
    return a, -b, b  # a, b with b.sum() < 0, b with b.sum() > 0


def _renumber(pattern: str, text: str, fmt) -> str:
    seen: dict[str, int] = {}

    def sub(m):
        key = m.group(0)
        if key not in seen:
            seen[key] = len(seen)
        return fmt(m, seen[key])
    return re.sub(pattern, sub, text)


def normalise(text: str) -> str:
    text = text.replace(FILENAME, "<toy_example.py>")
    text = drop_addresses(text)
    text = _renumber(r"__compiled_fn_\d+", text, lambda m, i: f"__compiled_fn_{i}")
    text = _renumber(r"__resume_at_(\d+)_\d+", text, lambda m, i: f"__resume_at_{m.group(1)}_{i}")
    return tidy_lines(text)


def capture(artifacts: str) -> tuple[str, CompileCounter]:
    """Compile toy_example, call it with b.sum() < 0 then b.sum() > 0 (twice each) with the
    log ``artifacts`` on; return the normalised log text and the counter."""
    toy_example = load_toy_example()
    graphjit.reset()
    cnt = CompileCounter()
    with capture_graphjit_log(artifacts) as buf:
        compiled = graphjit.compile(toy_example, backend=cnt)
        a, b_neg, b_pos = inputs()
        for b in (b_neg, b_neg, b_pos, b_pos):
            compiled(a, b)
    return normalise(buf.getvalue()), cnt


def _sections(text: str, title: str) -> list[str]:
    """The listings that follow each line starting with ``title`` in a bytecode log."""
    parts = re.split(r"^(?=ORIGINAL BYTECODE|MODIFIED BYTECODE)", text, flags=re.M)
    return [p for p in parts if p.startswith(title)]


# --------------------------------------------------------------------------------------
# graph structure
# --------------------------------------------------------------------------------------

def test_first_graph_holds_exactly_abs_add_truediv_sum_lt():
    toy_example = load_toy_example()
    a, b_neg, _ = inputs()
    cnt = CompileCounter()
    graphjit.compile(toy_example, backend=cnt)(a, b_neg)
    gm = cnt.graphs[0]
    calls = [(n.op, n.target) for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    assert calls == [("call_function", torch.abs), ("call_function", operator.add),
                     ("call_function", operator.truediv), ("call_method", "sum"),
                     ("call_function", operator.lt)]
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["a", "b"]
    # outputs: the condition and x (the live tensor computed in the graph)
    (out,) = [n for n in gm.graph.nodes if n.op == "output"]
    targets = sorted(str(getattr(o, "target", o)) for o in out.args[0])
    assert targets == sorted([str(operator.lt), str(operator.truediv)])


def test_both_signs_compile_three_graphs():
    toy_example = load_toy_example()
    a, b_neg, b_pos = inputs()
    cnt = CompileCounter()
    compiled = graphjit.compile(toy_example, backend=cnt)
    for b in (b_neg, b_neg, b_pos, b_pos, b_neg, b_pos):
        assert_equal(compiled(a, b), toy_example(a, b))
    s = graphjit.stats()
    assert cnt.frame_count == 3
    assert (s["graph_breaks"], s["frames_total"], s["recompiles"]) == (1, 3, 0)
    ops = [[n.target for n in g.graph.nodes if n.op in ("call_function", "call_method")]
           for g in cnt.graphs]
    assert ops[1:] == [[operator.mul, operator.mul], [operator.mul]]


@pytest.mark.parametrize("order", ["neg_first", "pos_first"])
def test_one_sign_compiles_two_graphs(order):
    toy_example = load_toy_example()
    a, b_neg, b_pos = inputs()
    b = b_neg if order == "neg_first" else b_pos
    cnt = CompileCounter()
    compiled = graphjit.compile(toy_example, backend=cnt)
    for _ in range(3):
        assert_equal(compiled(a, b), toy_example(a, b))
    assert cnt.frame_count == 2


# --------------------------------------------------------------------------------------
# the bytecode log
# --------------------------------------------------------------------------------------

def test_modified_bytecode_shape():
    text, cnt = capture("bytecode")
    assert cnt.frame_count == 3
    modified = _sections(text, "MODIFIED BYTECODE")
    assert len(modified) == 3  # toy_example and its two resume functions
    main = modified[0]
    assert main.count("__compiled_fn_0") == 1
    assert main.count("POP_JUMP_FORWARD_IF_FALSE") == 1
    resumes = re.findall(r"<graphjit compiled (__resume_at_\d+_\d+)>", main)
    assert len(resumes) == 2 and len(set(resumes)) == 2
    # the jump comes after the graph call and before both tail calls
    assert main.index("__compiled_fn_0") < main.index("POP_JUMP_FORWARD_IF_FALSE") < min(
        main.index(r) for r in resumes)
    assert main.count("RETURN_VALUE") == 2
    original = _sections(text, "ORIGINAL BYTECODE")
    assert original[0].startswith("ORIGINAL BYTECODE toy_example <toy_example.py> 4")
    # each resume function's own modified code calls a graph and returns
    for listing in modified[1:]:
        assert "__compiled_fn_" in listing and "RETURN_VALUE" in listing


def test_bytecode_log_golden():
    text, _ = capture("bytecode")
    check_golden("toy_example_bytecode.txt", text)


def test_graph_code_log_golden():
    text, _ = capture("graph_code")
    assert text.count("__compiled_fn_") >= 3
    check_golden("toy_example_graph_code.txt", text)


def test_bytecode_log_is_stable_across_processes():
    """Two fresh interpreters (different hash seeds) print the same normalised log, equal to
    the golden file."""
    outs = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        env.pop("GRAPHJIT_LOGS", None)
        proc = subprocess.run([sys.executable, __file__, "bytecode"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1], "".join(difflib.unified_diff(
        outs[0].splitlines(True), outs[1].splitlines(True), "run 1", "run 2"))
    if not UPDATE_GOLDEN:
        assert outs[0] == (GOLDEN / "toy_example_bytecode.txt").read_text()


if __name__ == "__main__":
    sys.stdout.write(capture(sys.argv[1] if len(sys.argv) > 1 else "bytecode")[0])

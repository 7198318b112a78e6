"""Golden-text tests of graphjit's logs: the graph table and code (``graph_code``), the
ORIGINAL/MODIFIED BYTECODE listings (``bytecode``), the GUARDS list (``guards``), and the
source of the generated guard function.

The example functions are compiled from source text under a fixed file name, so their line
numbers do not move when this file is edited.  Machine- and order-dependent text is
normalised before comparing: file paths become base names, memory addresses are dropped,
and the global counters in generated names (``__compiled_fn_<n>``, ``__resume_at_<k>_<n>``)
become ``<n>``.

Run with ``GRAPHJIT_UPDATE_GOLDEN=1`` to rewrite ``tests/golden/*.txt`` from the current
output (then review the diff).
"""

from __future__ import annotations

import logging
import os
import pathlib
import re

import pytest
import torch

import graphjit
from _shared import capture_graphjit_log, check_golden, drop_addresses, tidy_lines

SOURCE = '''\
import torch


def f(a, b):
    x = a / (torch.abs(a) + 1)
    return x * b.sum()


W = torch.ones(4)


def g(x, n, scale=2.0):
    y = torch.relu(x) * n + W
    return y.sum(0) * scale, n
'''
FILENAME = "/some/machine/dependent/dir/golden_example.py"


def _load():
    ns: dict = {"__name__": "golden_example"}
    exec(compile(SOURCE, FILENAME, "exec"), ns)
    return ns


def normalise(text: str) -> str:
    text = text.replace(FILENAME, os.path.basename(FILENAME))
    text = text.replace(str(pathlib.Path(__file__).parent), "<tests>")
    text = drop_addresses(text)
    text = re.sub(r"__compiled_fn_\d+", "__compiled_fn_<n>", text)
    text = re.sub(r"__resume_at_(\d+)_\d+", r"__resume_at_\1_<n>", text)
    return tidy_lines(text)


def check_normalised_golden(name: str, text: str) -> None:
    check_golden(name, normalise(text))


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def captured_logs():
    """Turn on graph_code, bytecode and guards; collect each emitted message."""
    with capture_graphjit_log("graph_code,bytecode,guards", _Capture()) as handler:
        yield handler.messages


def _split(messages: list[str]) -> dict[str, str]:
    """The messages of one compiled frame by kind."""
    out: dict[str, list[str]] = {"graph_code": [], "bytecode": [], "guards": []}
    for m in messages:
        if m.startswith("GUARDS:"):
            out["guards"].append(m)
        elif m.startswith(("ORIGINAL BYTECODE", "MODIFIED BYTECODE")):
            out["bytecode"].append(m)
        elif m.startswith("__compiled_fn_"):
            out["graph_code"].append(m)
    return {k: "\n".join(v) for k, v in out.items()}


def _args_f():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, generator=g), torch.randn(4, generator=g)


def test_golden_f_logs(captured_logs):
    fn = _load()["f"]
    cf = graphjit.compile(fn, backend="eager")
    a, b = _args_f()
    torch.testing.assert_close(cf(a, b), fn(a, b))
    parts = _split(captured_logs)
    assert parts["graph_code"] and parts["bytecode"] and parts["guards"], captured_logs
    check_normalised_golden("f_graph_code.txt", parts["graph_code"])
    check_normalised_golden("f_bytecode.txt", parts["bytecode"])
    check_normalised_golden("f_guards.txt", parts["guards"])


def test_golden_f_logs_are_emitted_once_per_compile(captured_logs):
    fn = _load()["f"]
    cf = graphjit.compile(fn, backend="eager")
    a, b = _args_f()
    cf(a, b)
    n = len(captured_logs)
    cf(a, b)  # cache hit: nothing logged
    assert len(captured_logs) == n
    cf(a[:2], b)  # new shape: recompiles and logs again
    assert len(captured_logs) == 2 * n


def test_golden_f_guard_source():
    fn = _load()["f"]
    cf = graphjit.compile(fn, backend="eager")
    a, b = _args_f()
    cf(a, b)
    entry = cf._entries[0]
    check_normalised_golden("f_guard_source.txt", entry.guard.source)
    # the guard text and the labels in the GUARDS log agree
    assert entry.guard.check(a, b)
    assert not entry.guard.check(a[:2], b)
    assert "TENSOR_MATCH" in entry.guard.why(a[:2], b)


def test_golden_g_logs_and_guard_source(captured_logs):
    ns = _load()
    fn = ns["g"]
    cf = graphjit.compile(fn, backend="eager")
    x = torch.arange(12.0).reshape(3, 4) - 5
    expected = fn(x, 3)
    actual = cf(x, 3)
    torch.testing.assert_close(actual[0], expected[0])
    assert actual[1] == expected[1]
    parts = _split(captured_logs)
    check_normalised_golden("g_graph_code.txt", parts["graph_code"])
    check_normalised_golden("g_bytecode.txt", parts["bytecode"])
    check_normalised_golden("g_guards.txt", parts["guards"])
    check_normalised_golden("g_guard_source.txt", cf._entries[0].guard.source)


def test_normalise_is_stable():
    text = (f'ORIGINAL BYTECODE f {FILENAME} 4\n  <compiled graph __compiled_fn_17>  \n'
            "<function f at 0x7f00deadbeef>\n__resume_at_12_3")
    assert normalise(text) == (
        "ORIGINAL BYTECODE f golden_example.py 4\n  <compiled graph __compiled_fn_<n>>\n"
        "<function f>\n__resume_at_12_<n>\n")

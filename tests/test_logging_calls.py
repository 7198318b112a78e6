"""``logging`` calls inside traced code (issue 31, item 4), against torch.compile's default.

torch.compile (``torch._dynamo.config.ignore_logging_functions`` and
``reorderable_logging_functions`` empty, their defaults) breaks the graph at a
``logging.Logger`` method ("logging.Logger method not supported for non-export cases") and
at the module-level functions (``logging.warning``: a skipped standard-library function),
so under ``fullgraph=True`` it raises.  graphjit does the same: the call runs in Python
between graphs (the message is emitted once per call, in program order, as in eager), and
under ``fullgraph=True`` the error names the call and the user's line.  With the functions
in ``graphjit.config.ignore_logging_functions`` (torch.compile's
``ignore_logging_functions``) the calls are dropped and both keep one graph.  Graph and break
counts are compared with torch.compile's; each program is compared with eager with the
``eager`` and ``aot_eager`` backends, and the records a handler receives with eager's.
"""

from __future__ import annotations

import logging

import pytest
import torch

import graphjit
from _breadth import case_tests, dynamo_config
from _semantics import Case, dynamo_counts
from _shared import seeded_randn
from graphjit.testing import CompileCounter, assert_equal

_r = seeded_randn(31400)
XS = [(_r(3),), (_r(3, seed=1),)]

log = logging.getLogger("graphjit_tests.logging_calls")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append((record.levelname, record.getMessage()))


def warning_between_ops(x):
    y = x.sin()
    log.warning("scale is %s", 3)
    return y * 3


def info_filtered_out(x):
    y = x + 1
    log.info("not shown at WARNING")
    return y.cos()


def module_level_warning(x):
    y = x * 2
    logging.warning("from the root logger")
    return y - 1


def debug_guarded_by_is_enabled(x):
    if log.isEnabledFor(logging.DEBUG):
        log.debug("value %s", x.sum())
    return x.exp()


CASES = [
    Case(warning_between_ops, XS, graphs=2, breaks=1),
    Case(info_filtered_out, XS, graphs=2, breaks=1),
    Case(module_level_warning, XS, graphs=2, breaks=1),
    Case(debug_guarded_by_is_enabled, XS, graphs=1, breaks=1),
]

test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile = case_tests(CASES)


@pytest.mark.parametrize("fn", [warning_between_ops, info_filtered_out])
def test_fullgraph_error_names_the_call_and_line(fn):
    graphjit.reset()
    with pytest.raises(graphjit.Unsupported) as info:
        graphjit.compile(fn, backend="eager", fullgraph=True)(_r(3))
    text = str(info.value)
    assert "Logger." in text and "test_logging_calls.py" in text, text
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported):  # (torch.compile refuses it too)
        torch.compile(fn, backend="eager", fullgraph=True)(_r(3))
    torch._dynamo.reset()


def test_ignored_logging_functions_keep_one_graph():
    """``graphjit.config.ignore_logging_functions`` (torch.compile's
    ``ignore_logging_functions``): the call is dropped, one graph under fullgraph in both."""
    handler = _Records()
    log.addHandler(handler)
    ignored = {logging.Logger.warning, logging.Logger.info}
    old = set(graphjit.config.ignore_logging_functions)
    graphjit.config.ignore_logging_functions = ignored
    try:
        for fn in (warning_between_ops, info_filtered_out):
            graphjit.reset()
            cnt = CompileCounter()
            x = _r(3)
            expected = fn(x)
            handler.records.clear()
            assert_equal(graphjit.compile(fn, backend=cnt, fullgraph=True)(x), expected)
            assert cnt.frame_count == 1 and handler.records == []  # (dropped)
            with dynamo_config(ignore_logging_functions=ignored):
                assert dynamo_counts(Case(fn, [(x,)])) [:2] == (1, 0)
    finally:
        graphjit.config.ignore_logging_functions = old
        log.removeHandler(handler)


def test_records_as_in_eager():
    handler = _Records()
    log.addHandler(handler)
    try:
        x = _r(3)
        warning_between_ops(x)
        eager = list(handler.records)
        handler.records.clear()
        graphjit.reset()
        compiled = graphjit.compile(warning_between_ops, backend="eager")
        compiled(x)
        compiled(x)
        assert handler.records == eager * 2
    finally:
        log.removeHandler(handler)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

"""Helpers and programs shared by several test files (not a test module itself).

Imported as ``_shared``: pytest puts ``tests/`` on ``sys.path`` (rootdir-relative
"prepend" import mode, no ``__init__.py``), and so does running a test file as a script.
``conftest.py`` registers this module for pytest's assertion rewriting.

* calling and comparing: :func:`call_or_fail`, :func:`one_graph`, :func:`compare_call`,
  :func:`check_sequence`, :func:`compile_and_check`, :class:`Kw`, :func:`ops`,
  :func:`call_in_threads`;
* values: :func:`seeded_randn`, :class:`Obj`, :class:`Layer`;
* logs, reported locations and golden files: :func:`capture_graphjit_log`,
  :func:`line_of`, :func:`drop_addresses`, :func:`tidy_lines`, :func:`check_golden`;
* tests that two files run on different data: :func:`check_is_compiling_only_inside`;
* programs with graph breaks, run by both ``test_breaks.py`` (exact graph and break
  counts) and ``test_breaks_vs_dynamo.py`` (graph counts against ``torch.compile``), and
  the seed ``toy_example`` (also ``test_explain.py``).  They are module-level functions
  (no closures).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import inspect
import io
import logging
import math
import os
import pathlib
import random
import re
import threading

import pytest
import torch

import graphjit
from graphjit.backends.registry import lookup_backend
from graphjit.diagnostics import logs
from graphjit.runtime.mode_state import capture_modes, restore_modes
from graphjit.testing import CompileCounter, _run, assert_equal, check_same, warm_pass

# --------------------------------------------------------------------------------------
# calling and comparing
# --------------------------------------------------------------------------------------

def call_or_fail(fn, *args, **kwargs):
    """Call ``fn``; an exception becomes a plain AssertionError (no compiled frames in the
    traceback, so pytest can always format the failure)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"compiled call raised {type(e).__name__}: {e}") from None


def one_graph(fn, *args, **kwargs):
    """check_same with fullgraph=True and exactly one graph compiled."""
    cnt = check_same(fn, *args, fullgraph=True, **kwargs)
    assert cnt.frame_count == 1, f"expected 1 graph, got {cnt.frame_count}"
    assert graphjit.stats()["graph_breaks"] == 0
    return cnt


def ops(gm):
    """The targets of a graph's call nodes, in order."""
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


class Kw:
    """One input given with keyword arguments: ``Kw(*args, **kwargs)``."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def compare_call(fn, compiled, args, kwargs=None, *, who="", ignore_addresses=True,
                 torch_rng=True):
    """Call ``fn`` and ``compiled`` on deep copies of the arguments and assert the same
    behaviour: global modes (grad, inference, autocast) restored, no graphjit error, the same stdout, the same return value
    or exception (type and message; with ``ignore_addresses`` the `` at 0x...`` parts of
    messages are dropped, as pytest's rewritten asserts print reprs), the same arguments
    afterwards; both calls start from the same ``random`` and torch RNG state and must leave
    the same state (torch's unchecked with ``torch_rng=False``: AOTAutograd's decompositions
    may draw differently, e.g. dropout with p=1 draws nothing).  ``who`` prefixes the failure messages.  Returns the compiled outcome."""
    kwargs = {} if kwargs is None else kwargs
    at = f"{who}: " if who else ""
    e_args, e_kwargs = copy.deepcopy((args, kwargs))
    c_args, c_kwargs = copy.deepcopy((args, kwargs))
    modes_before = capture_modes()
    rng_before = rng_state()
    expected, e_out = _run(fn, e_args, e_kwargs)
    rng_eager = rng_state()
    modes_eager = capture_modes()
    restore_modes(modes_before)
    set_rng_state(rng_before)
    actual, c_out = _run(compiled, c_args, c_kwargs)
    assert capture_modes() == modes_eager, (
        f"{at}global modes (grad, autocast, inference) after the call differ from eager's: "
        f"{capture_modes()} != {modes_eager}")
    if actual[0] == "raised" and isinstance(actual[1], (graphjit.Unsupported, graphjit.InternalError)):
        raise AssertionError(f"{at}graphjit raised {type(actual[1]).__name__}: {actual[1]}") from None
    assert c_out == e_out, f"{at}stdout differs:\ncompiled: {c_out!r}\neager:    {e_out!r}"
    assert actual[0] == expected[0], (
        f"{at}eager {expected[0]} {expected[1]!r}, compiled {actual[0]} {actual[1]!r}")
    if expected[0] == "raised":
        message = (lambda e: drop_addresses(str(e))) if ignore_addresses else str
        assert type(actual[1]) is type(expected[1]) and message(actual[1]) == message(expected[1]), (
            f"{at}exception differs: {actual[1]!r} vs {expected[1]!r}")
    else:
        assert_equal(actual[1], expected[1], f"{at}result")
    assert rng_state()[0] == rng_eager[0], f"{at}random's state differs from eager's after the call"
    if torch_rng:
        assert torch.equal(rng_state()[1], rng_eager[1]), f"{at}torch's RNG state differs from eager's"
    assert_equal(c_args, e_args, f"{at}args after the call")
    assert_equal(c_kwargs, e_kwargs, f"{at}kwargs after the call")
    warm_pass.record(compare_call, fn, compiled, args, kwargs, who=who, ignore_addresses=ignore_addresses,
                     torch_rng=torch_rng)
    return actual


def rng_state():
    """``random``'s state and torch's CPU RNG state."""
    return random.getstate(), torch.get_rng_state()


def set_rng_state(state) -> None:
    random.setstate(state[0])
    torch.set_rng_state(state[1])


def check_sequence(fn, compiled, inputs, calls=2, **compare):
    """:func:`compare_call` ``calls`` times for each input (a tuple of positional arguments
    or a :class:`Kw`), in order."""
    for inp in inputs:
        args, kwargs = (inp.args, inp.kwargs) if isinstance(inp, Kw) else (inp, {})
        for _ in range(calls):
            compare_call(fn, compiled, args, kwargs, **compare)


def compile_and_check(fn, inputs, calls=2, **compare) -> CompileCounter:
    """After ``graphjit.reset()``, compile ``fn`` once with a :class:`CompileCounter` and
    :func:`check_sequence` it; returns the counter."""
    graphjit.reset()
    cnt = CompileCounter()
    check_sequence(fn, graphjit.compile(fn, backend=cnt), inputs, calls, **compare)
    return cnt


def call_in_threads(fn, *args, n: int = 8) -> tuple[list, list]:
    """Call ``fn(*args)`` from ``n`` threads released at once by a barrier; returns
    ``(results, errors)`` (results in thread order)."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def worker(i):
        barrier.wait()
        try:
            results[i] = fn(*args)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


# --------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------

def seeded_randn(base: int):
    """``_r(*shape, seed=0)``: a reproducible ``torch.randn`` tensor, drawn from a stream
    of its own for each ``base`` (so that test files do not share values by accident)."""
    def _r(*shape, seed=0):
        g = torch.Generator().manual_seed(base + seed * 7 + 13 * len(shape) + sum(shape))
        return torch.randn(*shape, generator=g)
    return _r


class Obj:
    """A plain user object compared by its attributes (tensors exactly)."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __eq__(self, other):
        if type(other) is not type(self) or self.__dict__.keys() != other.__dict__.keys():
            return False
        for k, v in self.__dict__.items():
            w = other.__dict__[k]
            if isinstance(v, torch.Tensor):
                if not (isinstance(w, torch.Tensor) and v.shape == w.shape and torch.equal(v, w)):
                    return False
            elif v != w:
                return False
        return True

    __hash__ = None

    def __repr__(self):
        return f"Obj({self.__dict__})"


class Layer:
    """A user object whose method prints between two tensor ops."""

    def __init__(self, w):
        self.w = w

    def forward(self, x):
        y = x * self.w
        print("layer")
        return y + self.w

    def __eq__(self, other):
        return type(other) is Layer and self.w == other.w

    __hash__ = None


# --------------------------------------------------------------------------------------
# logs, reported locations and golden files
# --------------------------------------------------------------------------------------

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE_GOLDEN = os.environ.get("GRAPHJIT_UPDATE_GOLDEN") == "1"


@contextlib.contextmanager
def capture_graphjit_log(artifacts: str | None = None, handler: logging.Handler | None = None):
    """Attach ``handler`` (by default one writing each message to a StringIO) to the
    ``graphjit`` logger at level INFO and, if given, turn on the log ``artifacts``; yield
    the StringIO (or the handler given).  Afterwards the handler is removed and the level
    and the enabled artifacts are restored."""
    buf = None
    if handler is None:
        buf = io.StringIO()
        handler = logging.StreamHandler(buf)
        handler.setFormatter(logging.Formatter("%(message)s"))
    old_artifacts = sorted(logs._enabled)
    logger = logging.getLogger("graphjit")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        if artifacts is not None:
            graphjit.set_logs(artifacts)
        yield handler if buf is None else buf
    finally:
        logger.removeHandler(handler)
        graphjit.set_logs(old_artifacts)
        logger.setLevel(old_level)


def line_of(fn, text: str, *, whole_line: bool = False) -> int:
    """The file line number of the first source line of ``fn`` containing ``text`` (with
    ``whole_line``: whose stripped text is ``text``)."""
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if (line.strip() == text) if whole_line else (text in line):
            return start + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def drop_addresses(text: str) -> str:
    """``text`` without the `` at 0x...`` parts of reprs."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def tidy_lines(text: str) -> str:
    """Trailing white space and leading/trailing blank lines removed; one final newline."""
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n") + "\n"


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/<name>`` (with ``GRAPHJIT_UPDATE_GOLDEN=1``,
    write it there instead)."""
    path = GOLDEN / name
    if UPDATE_GOLDEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"missing golden file {path}; run with GRAPHJIT_UPDATE_GOLDEN=1"
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"golden/{name}", "actual"))
        pytest.fail(f"{name} differs from the golden file (GRAPHJIT_UPDATE_GOLDEN=1 "
                    f"rewrites it):\n{diff}", pytrace=False)


# --------------------------------------------------------------------------------------
# a test that two files run on their own data
# --------------------------------------------------------------------------------------

def _is_compiling_branch(a):
    if torch.compiler.is_compiling():
        return a + 1
    return a - 1


def check_is_compiling_only_inside(a, calls=1):
    """``torch.compiler.is_compiling()`` is False in eager code and True while compiled
    (one graph; ``calls`` compiled calls)."""
    assert not torch.compiler.is_compiling()
    assert_equal(_is_compiling_branch(a), a - 1)
    cnt = CompileCounter()
    compiled = graphjit.compile(_is_compiling_branch, backend=cnt, fullgraph=True)
    for _ in range(calls):
        assert_equal(call_or_fail(compiled, a), a + 1)
    assert cnt.frame_count == 1
    assert not torch.compiler.is_compiling()


# --------------------------------------------------------------------------------------
# programs with graph breaks (test_breaks.py and test_breaks_vs_dynamo.py; toy_example
# also test_explain.py, which pins the lines its breaks are reported at)
# --------------------------------------------------------------------------------------

def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def print_two(x):
    a = x + 1
    print("a")
    b = a * 2
    print("b", 3)
    return b - 1


def _h1(x):
    print("h1")
    return x * 3


def _h2(x):
    return _h1(x + 1) * 2


def _h3(x):
    return _h2(x - 1).cos()


def helper_depth_2(x):
    return _h2(x.sin()) + 1


def helper_depth_3(x):
    return _h3(x.sin()) + 1


def _scaled(x, scale=2, *, shift=0.5):
    y = x * scale
    print("scaled", scale, shift)
    return y + shift


def method_of_user_object(x, layer):
    return layer.forward(x + 1) * 2


def nested_ifs(x, y):
    a = x + y
    if a.sum() > 0:
        if x.mean() > 0:
            r = a * 2
        else:
            r = a * 3
    else:
        r = a - 1
    return r


def elif_chain(x):
    s = x.sum()
    if s > 1:
        return x * 1
    elif s > -1:
        return x * 2
    else:
        return x * 3


def item_math(x):
    s = x.sum().item()
    k = math.sqrt(abs(s)) + 1
    return x * k


def tolist_sum(x):
    y = x * 2
    values = y.tolist()
    return y + sum(values), len(values), values


def no_grad_break(x):
    with torch.no_grad():
        y = x * 2
        print("in no_grad")
        z = y + 1
    w = x * 3
    return z, w, y.requires_grad, z.requires_grad, w.requires_grad


@torch.no_grad()
def _decorated_no_grad(x):
    print("decorated")
    return x * 2


def no_grad_decorated_helper(x):
    return _decorated_no_grad(x) + 1


def _g_break(t):
    print("g")
    return t + 1


def half_built_call(x, y):
    return torch.add(x * 2, _g_break(y), alpha=2)


def attribute_write(x, obj):
    y = x * 2
    obj.t = y
    return y + 1


def nonzero_break(x):
    y = x * 2
    idx = y.nonzero()
    return idx.float().sum() + y.sum()


def print_then_ops(x):
    y = x.cos()
    print("p")
    return y + 1


def while_tensor_condition(x):
    i = 0
    while x.sum() < 10:
        x = x + 1
        i += 1
    return x, i


def print_in_for_loop(x):
    y = x * 2
    for i in range(3):
        y = y + i
        print(i)
    return y


def break_in_try(x):
    y = x + 1
    try:
        print("try")
        z = y * 2
    except ValueError:
        z = y
    return z - 1


def raise_in_branch(x):
    y = x + 1
    if y.sum() > 0:
        raise ValueError("positive sum")
    return y


def graphs_traced(cnt) -> int:
    """Graphs traced since the last ``graphjit.reset()``: those ``cnt`` (the counting
    backend) compiled, and those that took the compiled callable of an earlier graph of
    the same code and structure instead (a recompile whose graph is unchanged,
    ``graph/shared_graphs.py``), which torch.compile's backend would be given again."""
    return cnt.frame_count + graphjit.stats()["graphs_shared"]


def counting_backend(backend: str):
    """``(counter, backend)``: a backend that counts each graph with a
    :class:`CompileCounter`, then compiles it with ``backend`` (``"counter"``: the counter
    itself runs the graph as it is)."""
    cnt = CompileCounter()
    if backend == "counter":
        return cnt, cnt
    inner = lookup_backend(backend)

    def counted(gm, example_inputs):
        cnt(gm, example_inputs)
        return inner(gm, example_inputs)

    counted.graphjit_cache_key = f"counting {backend}"  # (the warm pass loads its entries)
    counted.graphjit_shares_graphs = True  # (stands for ``backend``, which shares graphs)
    return cnt, counted

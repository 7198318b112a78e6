"""The trace rules table (``trace_rules.py``) and the call-interception rewrite
(``bytecode/intercept.py``): decisions per kind of callable, user overrides, and the
emitted bytecode (golden)."""

from __future__ import annotations

import collections
import functools
import posixpath
import types

import pytest
import torch

import graphjit
from _shared import check_golden, drop_addresses, tidy_lines
from graphjit.bytecode import format_code
from graphjit.bytecode.intercept import intercepted_code
from graphjit.testing import CompileCounter
from graphjit.trace_rules import Rule, clear_overrides, frame_rule, is_skipped_file

X = torch.randn(3, 2, generator=torch.Generator().manual_seed(0))


@pytest.fixture(autouse=True)
def _no_overrides_left():
    yield
    clear_overrides()


def user_fn(x):
    return x + 1


def user_gen(x):
    yield x


def test_frame_rules_per_kind_of_function():
    assert frame_rule(user_fn) is Rule.COMPILE
    assert frame_rule(lambda x: x) is Rule.COMPILE
    assert frame_rule(user_gen) is Rule.INTERCEPT                 # generator: its calls compiled
    assert frame_rule(posixpath.join) is Rule.CALL                # frozen standard library
    assert frame_rule(collections.namedtuple) is Rule.CALL        # standard library on disk
    assert frame_rule(torch.nn.functional.relu) is Rule.CALL      # torch internals
    assert frame_rule(graphjit.compile) is Rule.CALL              # graphjit itself
    assert frame_rule(pytest.raises) is Rule.CALL                 # a skipped package
    comp = [c for c in user_with_comprehension.__code__.co_consts if isinstance(c, types.CodeType)][0]
    assert frame_rule(types.FunctionType(comp, {})) is Rule.CALL  # rewritten with its maker
    assert is_skipped_file("<frozen posixpath>") and not is_skipped_file(__file__)


def user_with_comprehension(xs):
    return [user_fn(x) for x in xs]


def test_user_overrides_change_the_frame_rule():
    def helper(x):
        return x * 2

    assert frame_rule(helper) is Rule.COMPILE
    graphjit.skip(helper)
    assert frame_rule(helper) is Rule.INTERCEPT
    graphjit.disable(helper)
    assert frame_rule(helper) is Rule.CALL
    clear_overrides()
    assert frame_rule(helper) is Rule.COMPILE


def test_allow_in_graph_is_one_graph_node():
    def summed(x):
        return x.sum(0) + 1

    graphjit.allow_in_graph(summed)

    def f(x):
        return summed(x * 2) - 1

    cnt = CompileCounter()
    out = graphjit.compile(f, backend=cnt, fullgraph=True)(X)
    torch.testing.assert_close(out, f(X))
    targets = [n.target for n in cnt.graphs[0].graph.nodes if n.op == "call_function"]
    assert summed in targets and len(targets) == 3


def inner_cos(x):
    return torch.cos(x)


def ops_around(marked):
    """Compile ``marked(x * 2) * 3`` where ``marked`` calls ``inner_cos``: the set of
    functions called in each graph (results compared with eager)."""
    def f(x):
        return marked(x * 2) * 3

    cnt = CompileCounter()
    torch.testing.assert_close(graphjit.compile(f, backend=cnt)(X), f(X))
    return [{n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"} for gm in cnt.graphs]


def cos_plus_one(x):
    return inner_cos(x) + 1


def test_disable_recursive_compiles_nothing_below():
    off = graphjit.disable(types.FunctionType(cos_plus_one.__code__, globals(), "off"))
    assert ops_around(off) == [{"mul"}, {"mul"}]  # inner_cos ran as it is
    with pytest.raises(graphjit.Unsupported, match="disabled by graphjit.disable"):
        graphjit.compile(lambda x: off(x), backend="eager", fullgraph=True)(X)


def test_skip_runs_the_frame_in_python_and_compiles_its_callees():
    skipped = graphjit.skip(types.FunctionType(cos_plus_one.__code__, globals(), "skipped"))
    assert ops_around(skipped) == [{"mul"}, {"cos"}, {"mul"}]
    assert [s.name for s in graphjit.stats()["skipped_frames"]] == ["cos_plus_one"]


def test_torch_compiler_disable_is_honoured():
    assert ops_around(torch.compiler.disable(inner_cos)) == [{"mul"}, {"mul"}]


def test_is_compiling_is_folded_in_traced_code():
    def f(x):
        if graphjit.is_compiling() and torch.compiler.is_compiling():
            return x + 1
        return x - 1

    torch.testing.assert_close(graphjit.compile(f, backend="eager", fullgraph=True)(X), X + 1)
    assert not graphjit.is_compiling()


def test_partial_of_a_user_function_called_from_eager_code_is_compiled():
    def scaled(x, k):
        return torch.sin(x) * k

    def f(x):
        for _ in range(1):
            print("eager tail")
        return functools.partial(scaled, k=2.0)(x)

    cnt = CompileCounter()
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):
        torch.testing.assert_close(graphjit.compile(f, backend=cnt)(X), f(X))
    assert any("sin" in gm.code for gm in cnt.graphs)


def resolve_marker(f):
    return f


GOLDEN_SRC = """
def pair(a, b=0):
    return a + b


def golden_source(a, d, items):
    t = d.get("k", 0) + len(items)
    r = pair(a, *items) if t else pair(a=a, **d)
    return [pair(i) for i in items], r
"""
_golden_ns: dict = {}
exec(compile(GOLDEN_SRC, "<golden>", "exec"), _golden_ns)  # line numbers independent of this file
golden_source = _golden_ns["golden_source"]


def test_intercepted_bytecode_golden():
    code = intercepted_code(golden_source.__code__, resolve_marker)
    text = drop_addresses(format_code(code, title="INTERCEPTED golden_source"))
    check_golden("intercepted_bytecode.txt", tidy_lines(text))
    # and it runs
    f = types.FunctionType(code, _golden_ns)
    assert f(1, {"k": 1}, [2]) == golden_source(1, {"k": 1}, [2]) == ([2], 3)
    assert f(1, {}, []) == golden_source(1, {}, []) == ([], 1)


def test_disable_after_first_use_is_followed_by_eager_code():
    def helper(x):
        return torch.sin(x) + 1

    def f(x):
        for _ in range(1):
            print("eager tail")
        return helper(x)

    import contextlib
    import io
    cnt = CompileCounter()
    compiled = graphjit.compile(f, backend=cnt)
    with contextlib.redirect_stdout(io.StringIO()):
        compiled(X)
        assert cnt.frame_count == 1          # helper compiled from the eager tail
        graphjit.disable(helper)             # the world changes: helper must now run as is
        torch.testing.assert_close(compiled(X), f(X))
        assert cnt.frame_count == 1          # ... and it did
        helper.__code__ = (lambda x: torch.cos(x)).__code__  # rules follow code objects:
        torch.testing.assert_close(compiled(X), torch.cos(X))  # new code, compiled again
    assert cnt.frame_count == 2


def test_a_failing_interception_runs_the_function_as_it_is(monkeypatch, caplog):
    import graphjit.runtime.eager_frames as ef

    def broken(code, resolver):
        raise RuntimeError("simulated graphjit bug")

    monkeypatch.setattr(ef, "intercepted_code", broken)

    def f(x):  # (nothing to compile after the loop: the whole frame runs in Python)
        y = None
        for _ in range(1):
            print("eager")
            y = inner_cos(x)
        return y

    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):
        torch.testing.assert_close(graphjit.compile(f, backend="eager")(X), f(X))
    assert "could not intercept the calls of" in caplog.text


def test_a_failing_region_resume_runs_the_frame_in_python(monkeypatch, caplog):
    import graphjit.runtime.convert_frame as cf

    def broken(*args, **kwargs):
        raise RuntimeError("simulated graphjit bug")

    monkeypatch.setattr(cf, "eager_code_with_exit", broken)

    def f(x):
        for _ in range(1):
            print("eager")
        return inner_cos(x) + 1

    import contextlib
    import io
    graphjit.reset()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        torch.testing.assert_close(graphjit.compile(f, backend="eager")(X), f(X))
    assert out.getvalue() == "eager\neager\n"
    assert "could not resume" in caplog.text and "simulated graphjit bug" in caplog.text
    assert [r for r in graphjit.stats()["skipped_frames"] if "could not be made" in str(r)]


def _all_codes(module):
    out, todo = [], [v.__code__ for v in vars(module).values() if isinstance(v, types.FunctionType)]
    for cls in (v for v in vars(module).values() if isinstance(v, type)):
        todo += [f.__code__ for f in vars(cls).values() if isinstance(f, types.FunctionType)]
    while todo:
        code = todo.pop()
        out.append(code)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return out


@pytest.mark.parametrize("modname", ["json.encoder", "textwrap", "collections", "typing",
                                     "torch.nn.modules.module", "torch.nn.functional"])
def test_every_code_object_of_a_module_can_be_intercepted(modname):
    import importlib
    module = importlib.import_module(modname)
    codes = _all_codes(module)
    assert len(codes) > 10
    for code in codes:
        new = intercepted_code(code, resolve_marker)
        assert new.co_stacksize >= code.co_stacksize


def test_intercepted_stdlib_functions_behave_as_eager():
    import json
    import textwrap
    seen = []

    def resolve(f):
        seen.append(f)
        return f

    def copy(fn):
        return types.FunctionType(intercepted_code(fn.__code__, resolve), fn.__globals__,
                                  fn.__name__, fn.__defaults__, fn.__closure__)

    text = "    a\n      b\n    c"
    assert copy(textwrap.dedent)(text) == textwrap.dedent(text)
    enc = json.JSONEncoder(indent=2, sort_keys=True)
    data = {"b": [1, 2.5, None, True], "a": {"x": "y"}}
    assert "".join(copy(json.JSONEncoder.iterencode)(enc, data)) == json.dumps(data, indent=2, sort_keys=True)
    assert seen  # calls went through the resolver


def test_skipped_module_method_called_from_eager_code_compiles_its_callees():
    class M(torch.nn.Module):
        @graphjit.skip
        def helper(self, x):
            return inner_cos(x) * 2

        def forward(self, x):
            for _ in range(1):
                print("eager tail")
            return self.helper(x)

    import contextlib
    import io
    m = M()
    cnt = CompileCounter()
    with contextlib.redirect_stdout(io.StringIO()):
        torch.testing.assert_close(graphjit.compile(m, backend=cnt)(X), m(X))
    assert [{n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"} for gm in cnt.graphs] \
        == [{"cos"}]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_disable_after_a_trace_inlined_the_function_drops_that_trace(backend):
    def helper(x):
        return x + 1, graphjit.is_compiling()   # True when inlined, False when run as is

    def f(x):
        return helper(x * 2)

    compiled = graphjit.compile(f, backend=backend)
    assert compiled(X)[1] is True
    graphjit.disable(helper)                      # the world changes: helper is now opaque
    out, traced = compiled(X)
    torch.testing.assert_close(out, X * 2 + 1)
    assert traced is False

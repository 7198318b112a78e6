"""Code graphjit runs in Python still compiles what it calls (issue 7).

A frame graphjit cannot trace, the rest of a frame after a step break and a
``graphjit.skip``-ped function run a copy of their code whose calls go through graphjit
(a function past the recompile limit runs as it is, its callees too, as torch.compile's): Python functions and modules get compiled cache entries of
their own, everything else is called directly.  Each test compares with eager and counts
the graphs handed to the backend (with ``eager`` and ``aot_eager``)."""

from __future__ import annotations

import functools
import inspect
import io
import sys
import warnings
from contextlib import redirect_stdout

import pytest
import torch
from torch import nn

import graphjit
from graphjit.backends.registry import lookup_backend
from graphjit.graph.output_graph import called_leaf_module
from graphjit.testing import assert_equal, check_same

X = torch.randn(4, generator=torch.Generator().manual_seed(0))


def quiet(fn, *args, **kwargs):
    with redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


# -- three levels below a frame that cannot be traced at all ----------------------------

def level3(x):
    return torch.sin(x) + 1


def level2(x):
    y = level3(x) * 2
    for i in range(2):
        print("level2", i)  # a break inside a loop: the rest of level2 runs in Python
        y = y + level3(y)
    return y


def level1(x):
    y = torch.cos(x)
    try:
        print("level1")  # a break inside try: the rest runs in Python
    finally:
        pass
    return level2(y) - 1


def untraceable_outer(x):
    for i in range(3):
        print("outer", i)  # nothing to compile before this break, and the frame returns
        if i == 2:         # inside the loop (no point after it to resume at): the frame
            return level1(x)  # runs in Python


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_untraceable_outer_frame_still_compiles_three_levels(backend):
    calls, counting = recorder(backend)
    compiled = graphjit.compile(untraceable_outer, backend=counting)
    for _ in range(2):
        assert_equal(quiet(compiled, X), quiet(untraceable_outer, X))
    # level1's cos, level2's prefix (level3 inlined), level3 called from level2's loop
    assert len(calls) == 3
    ops = [sorted({n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"})
           for gm in calls]
    assert ops == [["cos"], ["add", "mul", "sin"], ["add", "sin"]]
    s = graphjit.stats()
    assert [f.name for f in s["skipped_frames"]] == ["untraceable_outer"]
    assert "print" in s["skipped_frames"][0].reason
    assert s["recompiles"] == 0


def _aot(gm, example_inputs):
    return lookup_backend("aot_eager", None, None)(gm, example_inputs)


def recorder(backend: str):
    """A backend that records each graph, then runs it with ``backend``."""
    graphs = []

    def recording(gm, example_inputs):
        graphs.append(gm)
        return _aot(gm, example_inputs) if backend == "aot_eager" else gm.forward
    return graphs, recording


# -- a decorated forward: the decorator reads fn.__code__ and calls fn(self, ...) -------

def inspecting(fn):
    """Like transformers' wrappers: looks at the function and calls it with ``self``."""
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        sig = inspect.signature(fn)          # a standard-library call: a graph break
        bound = sig.bind(self, *args, **kwargs)
        for name in names[1:]:               # a loop over Python values with a break inside
            if name not in bound.arguments:
                print("missing", name)
        return fn(self, *args, **kwargs)
    return wrapper


class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @inspecting
    def forward(self, x, scale=2.0):
        return torch.relu(self.lin(x)) * scale


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_forward_under_an_inspecting_decorator_is_compiled(backend):
    torch.manual_seed(0)
    m = Decorated()
    graphs, recording = recorder(backend)
    compiled = graphjit.compile(m, backend=recording)
    x = torch.randn(3, 4)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), m(x))
    covering = [gm for gm in graphs if any(n.op in ("call_module", "call_function") and
                                           "relu" in str(n.target) for n in gm.graph.nodes)]
    assert len(covering) == 1, [gm.code for gm in graphs]


# -- a break inside a loop over modules ---------------------------------------------------

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.lin(x)) + x


class LoopNet(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(n)])

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = block(x)
            print("block", i, tuple(x.shape))  # a break inside the loop
        return x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_break_inside_a_loop_over_modules_compiles_every_block(backend):
    torch.manual_seed(0)
    net = LoopNet(4)
    graphs, recording = recorder(backend)
    compiled = graphjit.compile(net, backend=recording)
    x = torch.randn(2, 4)
    for _ in range(3):
        torch.testing.assert_close(quiet(compiled, x), quiet(net, x))
    # the blocks are called from Python and share Block.forward's generic entries
    # (weights as inputs, not one entry per instance): the first block gets the input,
    # which does not require grad, the others a tensor that does, so there are two entries
    assert len(graphs) == 2
    assert all(sum(isinstance(called_leaf_module(gm, n), nn.Linear) or "linear" in str(n.target)
                   for n in gm.graph.nodes) == 1 for gm in graphs)
    assert graphjit.stats()["recompiles"] == 1
    # the shared entry reads each block's own weights: a changed one is followed
    with torch.no_grad():
        net.blocks[2].lin.weight.mul_(-1)
        net.blocks[3].lin = nn.Linear(4, 4)
    torch.testing.assert_close(quiet(compiled, x), quiet(net, x))
    assert len(graphs) == 2


def test_loop_over_modules_output_matches_print_order():
    torch.manual_seed(0)
    net = LoopNet(3)
    x = torch.randn(2, 4)
    out_e, out_c = io.StringIO(), io.StringIO()
    with redirect_stdout(out_e):
        expected = net(x)
    with redirect_stdout(out_c):
        actual = graphjit.compile(net, backend="eager")(x)
    assert out_c.getvalue() == out_e.getvalue()
    torch.testing.assert_close(actual, expected)


# -- what interception must not change ----------------------------------------------------

class Base:
    def scale(self, x):
        return x * 2


class Child(Base):
    def scale(self, x):
        for _ in range(1):
            print("child")                     # eager from here: super() must still work
        return super().scale(x) + torch.ones_like(x)


def frame_sensitive(x):
    for _ in range(1):
        print("start")                         # a break in a loop: the loop runs in Python
        here = sys._getframe().f_code.co_name  # the user's frame, not graphjit's
        names = sorted(locals())
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            warnings.warn("careful")
        line_ok = w[0].filename == __file__
    return Child().scale(x), here, names, line_ok  # (a resume function from here)


def test_interception_keeps_frame_semantics():
    cnt = check_same(lambda x: quiet(frame_sensitive, x), X)
    assert cnt.frame_count >= 1
    compiled = graphjit.compile(frame_sensitive, backend="eager")
    _, here, names, line_ok = quiet(compiled, X)
    assert here == "frame_sensitive" and line_ok
    assert names == ["_", "here", "x"]


def kw_star(a, *rest, scale=1.0, **extra):
    return a * scale + sum(rest) + sum(extra.values())


def calls_of_every_shape(x):
    for i in range(2):
        print("eager tail")  # a break in a loop the frame returns from: it runs in Python
        if i == 0:
            continue
        parts = [x, x + 1]
        kwargs = {"bias": torch.ones_like(x)}
        r1 = kw_star(x, scale=3.0)
        r2 = kw_star(*parts, **kwargs)
        r3 = [kw_star(p, scale=2.0) for p in parts]
        r4 = sum(kw_star(p) for p in parts)
        r5 = functools.partial(kw_star, scale=0.5)(x)
        r6 = (lambda t: kw_star(t, t))(x)
        return r1, r2, r3, r4, r5, r6


def test_calls_of_every_shape_from_an_eager_frame():
    cnt = check_same(lambda x: quiet(calls_of_every_shape, x), X)
    # kw_star compiled once per distinct call signature (``scale``, seen with two values,
    # is symbolic from its second entry on)
    assert cnt.frame_count >= 4


class UserError(Exception):
    pass


def raises_deep(x):
    if x.sum() > 1e9:
        return x
    raise UserError("from deep", 7)


def eager_frame_calling_raiser(x):
    for _ in range(1):
        print("tail")
    try:
        raises_deep(x)
    except UserError as e:
        return e.args, torch.cos(x)


def test_user_exceptions_cross_intercepted_calls_unchanged():
    check_same(lambda x: quiet(eager_frame_calling_raiser, x), X)

    def propagate(x):
        for _ in range(1):
            print("tail")
        return raises_deep(x)
    compiled = graphjit.compile(propagate, backend="eager")
    with pytest.raises(UserError) as info:
        quiet(compiled, X)
    assert info.value.args == ("from deep", 7)


def gen_helper(x):
    for i in range(3):
        yield level3(x) * i


def consumes_generator(x):
    total = torch.zeros_like(x)
    for part in gen_helper(x):
        total = total + part
    return total


def test_generator_functions_run_with_their_calls_compiled():
    graphjit.reset()
    graphs = []
    compiled = graphjit.compile(consumes_generator, backend=lambda gm, i: graphs.append(gm) or gm.forward)
    torch.testing.assert_close(compiled(X), consumes_generator(X))
    assert graphs  # the generator was traced or its level3 calls compiled


# -- changing the world between calls ------------------------------------------------------

SCALE = 2.0


def scaled(x):
    return x * SCALE


def eager_caller(x):
    for _ in range(1):
        print("tail")
    return scaled(x) + 1


def test_callee_of_an_eager_frame_follows_global_changes():
    global SCALE
    compiled = graphjit.compile(eager_caller, backend="aot_eager")
    try:
        torch.testing.assert_close(quiet(compiled, X), quiet(eager_caller, X))
        SCALE = 5.0
        torch.testing.assert_close(quiet(compiled, X), quiet(eager_caller, X))
    finally:
        SCALE = 2.0


def test_callee_of_an_eager_frame_follows_defaults_and_rebinding():
    def target(x, k=1.0):
        return x * k

    def caller(x):
        for _ in range(1):
            print("tail")
        return target(x)

    compiled = graphjit.compile(caller, backend="aot_eager")
    torch.testing.assert_close(quiet(compiled, X), X * 1.0)
    target.__defaults__ = (3.0,)
    torch.testing.assert_close(quiet(compiled, X), X * 3.0)
    target.__code__ = (lambda x, k=1.0: x - k).__code__
    torch.testing.assert_close(quiet(compiled, X), X - 3.0)


def test_module_called_from_an_eager_frame_follows_training_and_hooks():
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))

    def caller(x):
        for _ in range(1):
            print("tail")
        return block(x)

    compiled = graphjit.compile(caller, backend="aot_eager")
    x = torch.randn(2, 4)
    block.eval()
    torch.testing.assert_close(quiet(compiled, x), block(x))
    handle = block.register_forward_hook(lambda mod, args, out: out * 10)
    try:
        torch.testing.assert_close(quiet(compiled, x), block(x))
    finally:
        handle.remove()
    torch.testing.assert_close(quiet(compiled, x), block(x))
    block.train()
    torch.manual_seed(1)
    a = quiet(compiled, x)
    torch.manual_seed(1)
    b = block(x)
    torch.testing.assert_close(a, b)


def test_past_the_recompile_limit_callees_are_not_compiled():
    graphjit.config.recompile_limit = 2
    graphs = []

    def inner(x):
        return torch.sin(x) * 2

    def outer(x, n):
        return inner(x) + n   # n is a constant: a new entry per value

    compiled = graphjit.compile(outer, backend=lambda gm, i: graphs.append(gm) or gm.forward,
                                dynamic=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(4):
            torch.testing.assert_close(compiled(X, n), outer(X, n))
    # two entries for outer, then it runs as it is, inner too (TorchDynamo skips such a
    # frame recursively: test_recompiles.py's test_no_recursive_compile_after_cache_limit_hit)
    assert len(graphs) == 2
    assert any(f.name.endswith("outer") and "recompile limit" in f.reason
               for f in graphjit.stats()["skipped_frames"])


# -- diagnostics ---------------------------------------------------------------------------

def test_graph_break_log_names_the_instruction_and_the_skipped_frame(capsys):
    graphjit.set_logs("graph_breaks")
    try:
        quiet(graphjit.compile(untraceable_outer, backend="eager"), X)
    finally:
        graphjit.set_logs("")
    err = capsys.readouterr().err
    assert "Skipping frame untraceable_outer" in err
    assert "Graph break in level2 at CALL (the rest of the frame runs in Python, its calls compiled)" in err
    assert f"{__file__}" in err


def test_explain_lists_skipped_frames():
    out = quiet(graphjit.explain(untraceable_outer), X)
    text = str(out)
    assert "Skipped Frames" in text and "untraceable_outer" in text
    assert out.graph_count == 3
    assert "Broke at: CALL" in text


# -- imports inside traced code (transformers' helpers import torch in their bodies) ------

def imports_inside(x):
    import torch.nn.functional as F
    from torch import nn  # noqa: F401
    from collections import OrderedDict
    return F.relu(x) + len(OrderedDict(a=1))


def test_imports_of_loaded_modules_are_traced():
    cnt = check_same(imports_inside, X, fullgraph=True)
    assert cnt.frame_count == 1


def test_import_follows_a_replaced_sys_modules_entry():
    import types as _types

    fake = _types.ModuleType("gj_fake_mod")
    fake.k = 2.0
    sys.modules["gj_fake_mod"] = fake
    try:
        def f(x):
            import gj_fake_mod
            return x * gj_fake_mod.k

        compiled = graphjit.compile(f, backend="aot_eager")
        torch.testing.assert_close(compiled(X), X * 2.0)
        fake.k = 3.0                                  # an attribute of the module changes
        torch.testing.assert_close(compiled(X), X * 3.0)
        other = _types.ModuleType("gj_fake_mod")
        other.k = 5.0
        sys.modules["gj_fake_mod"] = other            # the module itself is replaced
        torch.testing.assert_close(compiled(X), X * 5.0)
    finally:
        sys.modules.pop("gj_fake_mod", None)


def test_import_of_a_missing_module_is_eagers_error():
    """A module not imported yet is imported at trace time (as torch.compile does); one
    that does not exist is the program's ModuleNotFoundError, raised by the import
    instruction run in Python."""
    def f(x):
        y = x + 1
        import gj_module_that_does_not_exist_yet  # noqa: F401
        return y

    compiled = graphjit.compile(f, backend="eager")
    with pytest.raises(ModuleNotFoundError, match="gj_module_that_does_not_exist_yet"):
        compiled(X)


def test_a_pass_through_frame_is_traced_again_when_another_path_reaches_tensors():
    calls = []

    def maybe(x, use_tensor):
        calls.append(use_tensor)
        if use_tensor:
            return level3(x)
        return None

    graphs, recording = recorder("aot_eager")
    compiled = graphjit.compile(maybe, backend=recording)
    assert compiled(X, False) is None
    assert graphs == []                       # nothing to compile: a pass-through entry
    torch.testing.assert_close(compiled(X, True), level3(X))
    assert len(graphs) == 1                   # the guard failed: traced again, compiled
    assert compiled(X, False) is None and len(graphs) == 1
    assert calls == [False, True, False]

"""Differential tests for object-model features added after the seeds: guard CSE, recompile
reasons, generators, deques and ``OrderedDict``, ``autograd.Function``, module hooks,
threads, the layering of ``graphjit.variables``, tracker reprs and user exceptions.

CPython is the oracle: each program runs eagerly and compiled (on separate copies of its
inputs, through ``_shared.compare_call`` / ``one_graph`` / ``check_same`` or by hand where
the state to compare is not visible to ``assert_equal``: deque ``maxlen``, dict key order,
``.grad``, hook calls) and must give the same results, side effects and exceptions.  Where
a feature is meant to stay in one graph the test uses ``fullgraph=True`` and asserts
exactly one graph and no break.  The numbered groups: (1) guard source CSE, a chain
``o.a.b`` read once through walrus temporaries (golden ``cse_guard_source.txt``) and still
guarded link by link; (2) recompile messages from the entry closest to matching; (3)
generators traced while consumed, side effects in eager order (``any``/``all`` stop at the
same item); (4) ``deque`` (``maxlen`` too) and ``OrderedDict`` arguments, contents and order;
(5) ``torch.autograd.Function``; (6) module hooks; (7) eight threads making the first call
at once compile once; (8) the import layering of ``graphjit.variables`` (static, ``ast``);
(9) seed 003, trackers' reprs say what they hold; (10) never crash: a user exception raised
while graphjit evaluates Python at trace time reaches the user as eager raises it.
"""

from __future__ import annotations

import ast
import collections
import pathlib
import re
import time

import pytest
import torch
from torch import nn

import graphjit
from _shared import (Obj, call_in_threads, call_or_fail, capture_graphjit_log, check_golden, check_sequence,
                     compare_call, drop_addresses, one_graph, seeded_randn, tidy_lines)
from graphjit.backends.registry import aot_eager
from graphjit.testing import CompileCounter, assert_equal, check_same

_r = seeded_randn(8100)
FULLGRAPH = pytest.mark.parametrize("fullgraph", [False, True], ids=["breaks", "fullgraph"])


class AotCounter(CompileCounter):
    """A CompileCounter whose graphs run through ``aot_eager``."""

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return aot_eager(gm, example_inputs)


def _one_graph_counted(cnt):
    assert cnt.frame_count == 1, f"expected 1 graph, got {cnt.frame_count}"
    assert graphjit.stats()["graph_breaks"] == 0, graphjit.stats()["break_reasons"]


# --------------------------------------------------------------------------------------
# 1. guard source common-subexpression elimination
# --------------------------------------------------------------------------------------

class Node(Obj):
    pass


def chain_reads(x, o):
    return x * o.a.b.c + o.a.b.d - o.a.e


def _chain():
    return Node(a=Node(b=Node(c=2, d=3), e=4))


def test_guard_cse_reads_each_chain_once_and_still_guards_every_link():
    cnt = CompileCounter()
    compiled = graphjit.compile(chain_reads, backend=cnt, fullgraph=True)
    x = _r(3)
    compare_call(chain_reads, compiled, (x, _chain()))
    source = compiled._entries[0].guard.source
    assert ":=" in source, source
    assert len(re.findall(r"\bo\.a\b", source)) == 1, source  # o.a read once
    assert len(re.findall(r"\.b\b", source)) == 1, source  # and o.a.b once
    for attr in ("c", "d", "e"):
        assert len(re.findall(rf"\.{attr}\b", source)) == 1, source
    # every link is still checked: a change deep in the chain or of a middle object
    changed_leaf, new_middle = _chain(), _chain()
    changed_leaf.a.b.d = 30
    new_middle.a = Node(b=Node(c=5, d=3), e=4)
    check_sequence(chain_reads, compiled, [(x, _chain()), (x, changed_leaf), (x, new_middle)])
    assert cnt.frame_count == 3 and graphjit.stats()["recompiles"] == 2


def cse_golden(x, o):
    return x * o.a.b + o.a.c


def test_guard_cse_golden_source():
    compiled = graphjit.compile(cse_golden, backend="eager", fullgraph=True)
    compare_call(cse_golden, compiled, (torch.ones(2), Node(a=Node(b=2, c=3))))
    check_golden("cse_guard_source.txt", tidy_lines(drop_addresses(compiled._entries[0].guard.source)))


# --------------------------------------------------------------------------------------
# 2. recompile messages
# --------------------------------------------------------------------------------------

def scaled(x, k):
    return x * k.scale


def two_ints(x, n, m):
    return x + n * 10 + m


def test_recompile_message_names_the_guard_and_both_values():
    class K(Obj):
        scale = 2.0

    compiled = graphjit.compile(scaled, backend="eager", fullgraph=True)
    k = K()
    with capture_graphjit_log("recompiles") as buf:
        compare_call(scaled, compiled, (_r(3), k))
        assert buf.getvalue() == ""
        K.scale = 5.0  # the class attribute, read through the instance
        compare_call(scaled, compiled, (_r(3), k))
    text = buf.getvalue()
    assert "Recompiling function scaled" in text, text
    assert "k.scale == 2.0" in text and "expected 2.0" in text and "actual 5.0" in text, text


def test_recompile_reason_comes_from_the_closest_entry():
    compiled = graphjit.compile(two_ints, backend="eager", fullgraph=True, dynamic=False)
    x = _r(3)
    with capture_graphjit_log("recompiles") as buf:
        check_sequence(two_ints, compiled, [(x, 1, 1), (x, 2, 2)], calls=1)
        mark = len(buf.getvalue())
        # entry (1, 1) fails two checks (n and m), entry (2, 2) only m: m's is reported
        compare_call(two_ints, compiled, (x, 2, 3))
    first, third = buf.getvalue()[:mark], buf.getvalue()[mark:]
    assert "n == 1 (expected 1, actual 2) (and 1 more)" in first, first
    assert "m == 2 (expected 2, actual 3)" in third, third
    assert "n == " not in third and "more)" not in third, third
    assert graphjit.stats()["recompiles"] == 2


# --------------------------------------------------------------------------------------
# 3. generators traced while consumed
# --------------------------------------------------------------------------------------

def items(x, log, n):
    for i in range(n):
        log.append(("item", i))
        yield x * i


def flags(log, n, first_true):
    for i in range(n):
        log.append(i)
        yield i >= first_true


def consumed_by_for(x, log):
    out = x
    for y in items(x, log, 3):
        log.append("body")
        out = out + y
    return out


def consumed_by_list(x, log):
    return list(items(x, log, 3))


def consumed_by_sum(x, log):
    return sum(v * 2 for v in items(x, log, 4))


def any_short_circuits(x, log):
    return any(flags(log, 6, 2)), any(flags(log, 2, 5)), x + 1


def all_short_circuits(x, log):
    return all(not f for f in flags(log, 6, 3)), all(not f for f in flags(log, 2, 5)), x + 1


def next_twice(x, log):
    g = items(x, log, 5)
    a = next(g)
    b = next(g)
    return a + b, next(items(x, log, 0), "empty")


def returns_early(x, log, stop):
    def g():
        log.append("start")
        yield x
        if stop:
            return
        log.append("more")
        yield x * 2
    return [v + 1 for v in g()]


def returns_generator(x, log):
    return items(x, log, 3)


@pytest.mark.parametrize("fn", [consumed_by_for, consumed_by_list, consumed_by_sum, next_twice])
def test_generator_consumed_in_one_graph(fn):
    one_graph(fn, _r(3), [("pre",)])


@pytest.mark.parametrize("fn", [any_short_circuits, all_short_circuits])
@FULLGRAPH
def test_any_all_short_circuit_a_generator_with_side_effects(fn, fullgraph):
    if fullgraph:
        one_graph(fn, _r(3), [])
    else:
        check_same(fn, _r(3), [])


@pytest.mark.parametrize("stop", [True, False])
def test_generator_returning_early(stop):
    one_graph(returns_early, _r(3), [], stop)


def test_generator_returned_from_compiled_function():
    compiled = graphjit.compile(returns_generator, backend="eager")
    x = _r(3)
    e_log, c_log = [], []
    e_gen, c_gen = returns_generator(x, e_log), call_or_fail(compiled, x, c_log)
    assert c_log == e_log == []  # not started by the call
    assert_equal(list(c_gen), list(e_gen))
    assert_equal(c_log, e_log)


# --------------------------------------------------------------------------------------
# 4. collections.deque and OrderedDict arguments
# --------------------------------------------------------------------------------------

OD = collections.OrderedDict


def deque_ops(x, dq):
    dq.append(1)
    dq.appendleft(0)  # a full deque with maxlen drops the right end
    a = dq.pop()
    b = dq.popleft()
    dq.extend([7, 8, 9])  # ... and here the left end
    dq.rotate(2)
    dq.append(x * 2)
    dq.rotate(-1)
    return x + a * 10 + b + len(dq)


def deque_clear(x, dq):
    n = len(dq)
    dq.clear()
    dq.append(x * n)
    dq.appendleft(n)
    return x * n


def od_set_del(x, od):
    od["new"] = x * 2
    od["a"] = 9  # keeps its place
    del od["b"]
    od["b"] = 0  # re-added at the end
    return x + len(od), list(od)


def od_move_to_end(x, od):
    od["new"] = 1
    od.move_to_end("a")
    od.move_to_end("c", last=False)
    k, v = od.popitem(last=False)
    return x + v, k


def od_equality(x, od, other):
    return x + 1, od == other, od != other, od == dict(other)


def _state(value):
    """What ``assert_equal`` does not see: deque ``maxlen`` and dict key order."""
    if isinstance(value, collections.deque):
        return ("deque", list(value), value.maxlen)
    if isinstance(value, dict):
        return (type(value).__name__, list(value.items()))
    return value


def _check_state(fn, make_args, fullgraph):
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt, fullgraph=fullgraph)
    for _ in range(2):
        e_args, c_args = make_args(), make_args()
        expected, actual = fn(*e_args), call_or_fail(compiled, *c_args)
        assert_equal(actual, expected)
        assert_equal([_state(a) for a in c_args], [_state(a) for a in e_args], "args after the call")
    if fullgraph:
        _one_graph_counted(cnt)


@pytest.mark.parametrize("fn", [deque_ops, deque_clear], ids=lambda f: f.__name__)
@pytest.mark.parametrize("maxlen", [None, 3])
def test_deque_argument_mutations(fn, maxlen):
    _check_state(fn, lambda: (_r(3), collections.deque([1, 2, 3], maxlen=maxlen)), True)


def test_ordered_dict_setitem_and_del_keep_order():
    _check_state(od_set_del, lambda: (_r(3), OD(a=1, b=2, c=3)), True)


def test_ordered_dict_move_to_end_and_popitem_first():
    _check_state(od_move_to_end, lambda: (_r(3), OD(a=1, b=2, c=3)), True)


def test_ordered_dict_equality_is_order_sensitive():
    _check_state(od_equality, lambda: (_r(3), OD(a=1, b=2), OD(b=2, a=1)), True)


# --------------------------------------------------------------------------------------
# 5. torch.autograd.Function
# --------------------------------------------------------------------------------------

class RoundScale(torch.autograd.Function):
    """``round(x * k) * w`` with a straight-through gradient for ``x`` (autograd through
    ``forward`` would give zeros): a compiled call must use this ``backward``."""

    @staticmethod
    def forward(ctx, x, w, k):
        ctx.save_for_backward(x, w)
        ctx.k = k
        return torch.round(x * k) * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w * ctx.k, grad * torch.round(x * ctx.k), None


def use_round_scale(x, w):
    return (RoundScale.apply(x.sin(), w, 3.0) + x).sum()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autograd_function_outputs_and_grads(backend):
    cnt = AotCounter() if backend == "aot_eager" else CompileCounter()
    compiled = graphjit.compile(use_round_scale, backend=cnt, fullgraph=True)
    x0, w0 = _r(4), _r(4, seed=1)
    for _ in range(2):
        xe, we = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        xc, wc = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        out_e, out_c = use_round_scale(xe, we), call_or_fail(compiled, xc, wc)
        assert_equal(out_c, out_e)
        out_e.backward()
        out_c.backward()
        assert_equal(xc.grad, xe.grad, "x.grad")
        assert_equal(wc.grad, we.grad, "w.grad")
    # autograd through forward would give x.grad == 1 (round has a zero gradient)
    assert not torch.equal(xe.grad, torch.ones_like(x0))
    _one_graph_counted(cnt)


# --------------------------------------------------------------------------------------
# 6. module hooks
# --------------------------------------------------------------------------------------

HOOK_CALLS: list = []


def pre_hook(module, args):
    HOOK_CALLS.append(("pre", type(module).__name__))
    return (args[0] * 2,)


def forward_hook(module, args, out):
    HOOK_CALLS.append(("post", type(module).__name__))
    return out + 1


def kwargs_pre_hook(module, args, kwargs):
    HOOK_CALLS.append(("pre_kw", sorted(kwargs)))
    return args, {**kwargs, "scale": kwargs["scale"] * 3}


def global_hook(module, args, out):
    HOOK_CALLS.append(("global", type(module).__name__))
    return out * 2


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, scale=1.0):
        return self.lin(x) * scale


def call_scaled(x, m):
    return m(x, scale=2.0) - 1


def _add_hook(m, kind):
    if kind == "pre":
        return m.register_forward_pre_hook(pre_hook)
    if kind == "forward":
        return m.register_forward_hook(forward_hook)
    if kind == "with_kwargs":
        return m.register_forward_pre_hook(kwargs_pre_hook, with_kwargs=True)
    return nn.modules.module.register_module_forward_hook(global_hook)


@pytest.mark.parametrize("compile_module", [False, True], ids=["function", "module"])
@pytest.mark.parametrize("kinds", [["pre"], ["forward"], ["with_kwargs"], ["global"],
                                   ["pre", "with_kwargs", "forward", "global"]], ids="+".join)
def test_module_hooks_traced(kinds, compile_module):
    torch.manual_seed(0)
    m = Scaled()
    handles = [_add_hook(m, k) for k in kinds]
    try:
        cnt = CompileCounter()
        if compile_module:  # graphjit.compile(m)(x, scale=2.0) against m(x, scale=2.0)
            eager, compiled = m, graphjit.compile(m, backend=cnt, fullgraph=True)
            args = lambda x: ((x,), {"scale": 2.0})  # noqa: E731
        else:
            eager, compiled = call_scaled, graphjit.compile(call_scaled, backend=cnt, fullgraph=True)
            args = lambda x: ((x, m), {})  # noqa: E731
        for i in range(2):
            a, kw = args(_r(2, 3, seed=i))
            HOOK_CALLS.clear()
            expected = eager(*a, **kw)
            eager_calls = list(HOOK_CALLS)
            HOOK_CALLS.clear()
            assert_equal(call_or_fail(compiled, *a, **kw), expected)
            assert HOOK_CALLS == eager_calls and eager_calls, (HOOK_CALLS, eager_calls)
        _one_graph_counted(cnt)
    finally:
        for h in handles:
            h.remove()
        HOOK_CALLS.clear()


# --------------------------------------------------------------------------------------
# 7. threads
# --------------------------------------------------------------------------------------

class SlowCounter(CompileCounter):
    def __call__(self, gm, example_inputs):
        time.sleep(0.05)  # widens any race between the threads
        return super().__call__(gm, example_inputs)


def threaded(x):
    return (x.sin() * 2 + x).sum(0)


@pytest.mark.parametrize("what", ["function", "module"])
def test_threads_first_call_compiles_once(what):
    torch.manual_seed(0)
    eager = threaded if what == "function" else nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    cnt, x = SlowCounter(), _r(4, 3)
    compiled = graphjit.compile(eager, backend=cnt)
    results, errors = call_in_threads(compiled, x, n=8)
    assert not errors, errors
    expected = eager(x)
    for out in results:
        assert_equal(out, expected)
    assert len(cnt.graphs) == 1, f"{len(cnt.graphs)} backend compiles"
    assert graphjit.stats()["recompiles"] == 0


# --------------------------------------------------------------------------------------
# 8. the layering of graphjit.variables
# --------------------------------------------------------------------------------------

VARIABLES = pathlib.Path(graphjit.__file__).parent / "variables"
LAYERS = ["arg_binding", "base", "constant", "object_ids", "sym_node", "tensor", "known_tensors", "sequences", "sizes", "set_keys", "dicts", "sets", "view_sets", "tuple_iterators", "stop_values", "iterators", "random_values", "cells",
          "functions", "partial_subclasses", "exceptions", "object_protocol", "instance_attrs",
          "dict_objects", "builtin_subclasses", "objects", "weak_dicts", "lazy_modules", "nn_module", "namedtuple_classes",
          "torchscript", "numpy_tensors", "numpy_ufuncs", "numpy_values", "generators",
          "operators", "grad_mode", "builtins", "library", "immutable_values", "formatting", "interpreter", "torch_function", "checkpoint",
          "copying", "functional_call", "tensor_subclasses", "mode_stack", "dispatch_probe", "torch_modes", "builder"]


def _is_type_checking(node):
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _variables_imports(node, module):
    """The ``graphjit.variables`` modules an import statement in ``module`` names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = ".".join(["graphjit", "variables"][:3 - node.level]) if node.level else ""
        full = ".".join(p for p in (base, node.module) if p)
        names = [f"{full}.{a.name}" for a in node.names] + [full]
    out = set()
    for name in names:
        parts = name.split(".")
        if parts[:2] == ["graphjit", "variables"] and len(parts) > 2 and parts[2] in LAYERS:
            out.add(parts[2])
    return out - {module}


def test_variables_layering():
    files = sorted(VARIABLES.glob("*.py"))
    modules = {p.stem for p in files} - {"__init__"}
    assert modules == set(LAYERS), f"modules not in the layer list: {modules ^ set(LAYERS)}"
    problems = []
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        exempt = {id(n) for top in tree.body if _is_type_checking(top) for n in ast.walk(top)}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in exempt:
                        problems.append(f"{path.name}:{node.lineno}: import inside {fn.name}()")
        if path.stem == "__init__":
            continue
        allowed = set(LAYERS[:LAYERS.index(path.stem)])
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in sorted(_variables_imports(node, path.stem) - allowed):
                    problems.append(f"{path.name}:{node.lineno}: imports {target}, a later layer")
    assert not problems, "\n".join(problems)


def test_layering_check_sees_relative_and_absolute_imports():
    parse = lambda src: ast.parse(src).body[0]  # noqa: E731
    assert _variables_imports(parse("from .objects import X"), "sets") == {"objects"}
    assert _variables_imports(parse("from . import builder as b"), "sets") == {"builder"}
    assert _variables_imports(parse("from ..variables.dicts import D"), "sets") == {"dicts"}
    assert _variables_imports(parse("import graphjit.variables.cells"), "sets") == {"cells"}
    assert _variables_imports(parse("from ..guards.guard import G"), "sets") == set()


# --------------------------------------------------------------------------------------
# 9. seed 003: trackers' reprs say what they hold
# --------------------------------------------------------------------------------------

def _says(text, *parts):
    assert " object at 0x" not in text, text
    for part in parts:
        assert part in text, (part, text)


def test_container_tracker_reprs_show_their_items():
    from graphjit.variables import ConstantVariable as C, DictVariable, ListVariable, SetVariable, TupleVariable

    _says(repr(C(3)), "3")
    _says(repr(C("abc")), "'abc'")
    _says(repr(TupleVariable([C(1), C("a")])), "TupleVariable(", "1", "'a'")
    _says(repr(ListVariable([C(2.5), C(None)])), "ListVariable(", "2.5", "None")
    _says(repr(DictVariable({"k": C(1), 7: C("v")})), "DictVariable(", "'k'", "1", "7", "'v'")
    _says(repr(SetVariable({1, 2})), "SetVariable(", "{1, 2}")


def vars_of_a_temporary(x, o):
    return vars((o, [1, 2.5], {"k": "v"}, {7})), x


def test_break_reason_names_the_value_not_its_tracker():
    # vars() of a fresh tuple is not traced: the reason names the call and the value's
    # type (trackers' reprs are for debuggers, never in a reason: issue 23)
    compiled = graphjit.compile(vars_of_a_temporary, backend="eager", fullgraph=True)
    with pytest.raises(graphjit.Unsupported) as info:
        compiled(_r(2), Node(a=1))
    text = str(info.value)
    _says(text, "unsupported builtin call: vars(a tuple of 4 items)")
    assert "Variable(" not in text and "LazyVariableTracker" not in text, text


# --------------------------------------------------------------------------------------
# 10. never crash: user exceptions raised while graphjit evaluates Python
# --------------------------------------------------------------------------------------

def pop_from_empty(x, o, d, lst):
    o.a = 1
    y = x + 1
    [].pop()
    return y


def missing_key(x, o, d, lst):
    o.b = 2
    lst.append(3)
    return x + d["missing"]


def list_index(x, o, d, lst):
    o.c = x * 2
    return x + lst.index(99)


def str_index(x, o, d, lst):
    lst.append("s")
    y = x * 3
    return y + "ab".index("z")


def int_of_text(x, o, d, lst):
    d["k"] = x + 1
    return x + int("x")


def divide_by_zero(x, o, d, lst):
    o.z = 3
    n = 1
    return x + n / 0


@pytest.mark.parametrize("fn", [pop_from_empty, missing_key, list_index, str_index, int_of_text,
                                divide_by_zero], ids=lambda f: f.__name__)
@FULLGRAPH
def test_user_exception_reaches_the_user(fn, fullgraph):
    compiled = graphjit.compile(fn, backend="eager", fullgraph=fullgraph)
    for _ in range(2):
        # compare_call: same type and message, never Unsupported/InternalError, and the
        # side effects before the raise applied once (the arguments afterwards)
        outcome = compare_call(fn, compiled, (_r(3), Obj(q=0), {"a": 1}, [1, 2]))
        assert outcome[0] == "raised"


def _logged_gen(log, n):
    for i in range(n):
        log.append(("gen", i))
        yield i


def zip_enumerate_interleave(x, log):
    for a, b in zip(_logged_gen(log, 3), [10, 20, 30]):
        log.append(("body", a))
        x = x + b
    for i, _ in enumerate(_logged_gen(log, 2), start=5):
        log.append(("enum", i))
    return x


def test_zip_and_enumerate_over_generators_interleave_like_cpython():
    """zip/enumerate are lazy: each generator step happens right before the loop body that
    uses it (the log's order is eager's), not all up front."""
    one_graph(zip_enumerate_interleave, _r(3), [])

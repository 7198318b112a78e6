"""Resume after any instruction: differential tests of breaks at LOAD_ATTR, LOAD_METHOD,
COMPARE_OP, UNARY_*, GET_ITER, UNPACK_*, FORMAT_VALUE, BUILD_*, BEFORE_WITH, IMPORT_FROM...

Each program does tensor work before and after an instruction graphjit cannot trace (it
acts on an object of a C-implemented class), so both graphs must exist; the tests compare
with eager (:func:`check_same`) and pin the graph count, the break count, the instruction
each break happened at and how execution continued.

IS_OP, BUILD_TUPLE, BUILD_LIST, BUILD_CONST_KEY_MAP, BUILD_SLICE and BUILD_STRING never
fail to trace (their handlers accept any operands), so they are covered as the first
instructions of a resume function, consuming values that were on the stack at a break.
"""

from __future__ import annotations

import array
import datetime
import decimal
import functools
import re
import sys
import threading

import numpy as np
import pytest
import torch

import graphjit
from _shared import Obj
from graphjit.testing import CompileCounter, _run, assert_equal, check_same

RESUME = "the instruction runs in Python, then a resume function"
STEP = "the rest of the frame runs in Python, its calls compiled"

# objects of C-implemented classes graphjit does not model
PAT = re.compile("a+")  # (its attributes are read at trace time, as TorchDynamo does)
TZ = datetime.timezone(datetime.timedelta(hours=1))  # a C-level __eq__, no __format__ spec
TZ2 = datetime.timezone(datetime.timedelta(hours=2))
DEC = decimal.Decimal("1.5")  # a C-level __format__ (a bad spec is its ValueError)
ARR = array.array("i", [1, 2, 3])
TD = datetime.timedelta(days=2)
# numpy arrays are folded when small (tests/test_numpy_values.py); one larger than the
# 4 KB graphjit guards by contents is not
NP = np.arange(1000)
TL = threading.local()
TL.v = 3
LOCK = threading.Lock()
RAISE_LOCK = threading.Lock()  # only for the test that may leave it held


class MyLocal(threading.local):  # a C-level __getattribute__: every attribute read breaks
    def f(self, a, b=1, *rest, **kw):
        return a * 10 + b + len(rest) + 100 * len(kw)
    def scale(self, t, factor=1.0):
        return t * factor


ML = MyLocal()

LOG: list = []  # global side effects
GD: dict = {}


class PyCM:
    """A Python context manager: graphjit only models grad-mode ones, so ``with`` breaks."""
    def __enter__(self):
        LOG.append("enter")
        return self
    def __exit__(self, typ, val, tb):
        LOG.append(("exit", typ))
        return False


CM = PyCM()


class Reporter:
    """Its ``__format__`` runs in Python at a FORMAT_VALUE break and reads pending state
    (it concatenates arrays, which graphjit does not trace, so the call is the break)."""
    def __init__(self, obj, lst):
        self.obj, self.lst = obj, lst
    def __format__(self, spec):
        ARR + ARR
        return f"a={self.obj.a} lst={self.lst} log={LOG} gd={sorted(GD.items())}"


def X(*shape, seed=0):
    return torch.randn(*shape or (4,), generator=torch.Generator().manual_seed(seed))


def expect(fn, *args, graphs, instrs, resumed=None, calls=2, backend=None):
    """check_same, then the exact graph count (not with a named backend), the break
    instructions in order and how each continued (default: all resumed), no recompile."""
    cnt = check_same(fn, *args, calls=calls, backend=backend)
    s = graphjit.stats()
    reasons = s["break_reasons"]
    info = [(r.instruction, r.resumed, r.reason) for r in reasons]
    assert [r.instruction for r in reasons] == instrs, info
    assert s["graph_breaks"] == len(instrs), info
    assert [r.resumed for r in reasons] == (resumed or [RESUME] * len(instrs)), info
    if backend is None:
        assert cnt.frame_count == graphs, (cnt.frame_count, info)
    assert s["recompiles"] == 0, info
    return cnt


@pytest.fixture(autouse=True)
def _clean_globals(monkeypatch):
    # ``from gj_resume_fake_mod import v``: IMPORT_FROM on an object graphjit cannot model
    monkeypatch.setitem(sys.modules, "gj_resume_fake_mod", TL)
    LOG.clear()
    GD.clear()
    for name in ("w", "tmp"):
        TL.__dict__.pop(name, None)
    yield
    LOG.clear()
    GD.clear()


# --------------------------------------------------------------------------------------
# each instruction: graph before, break, graph after
# --------------------------------------------------------------------------------------

# simple programs ``def <name>(x): y = x + 1; <body>``, made at module level: name, body,
# the instructions the breaks happen at (one graph before the first, one after)
_SIMPLE = [
    ("load_attr", "return y * TL.v", ["LOAD_ATTR"]),
    ("load_method_kw", "return y.cos() * ML.f(2, b=5, z=1)", ["LOAD_METHOD"]),
    ("compare_op", "c = TZ == TZ2; return y * c, y - (not c)", ["COMPARE_OP"]),
    ("unary_negative", "n = -NP; return y * 2, n.shape", ["UNARY_NEGATIVE"]),
    ("unary_positive", "p = +TD; return y * 2, p is TD", ["UNARY_POSITIVE"]),  # then IS_OP
    ("unary_not", "return not ARR, y * 3", ["UNARY_NOT"]),
    ("unary_invert", "v = ~NP; return y * 2, v.tolist()", ["UNARY_INVERT", "CALL"]),
    ("unpack_sequence", "a, b, c = ARR; return y * a + b - c", ["UNPACK_SEQUENCE"]),
    ("unpack_ex", "a, *mid, c = ARR; return y * a + c, mid", ["UNPACK_EX"]),
    ("format_value_spec", "s = f'{TZ!r:>30}'; return y * len(s), s", ["FORMAT_VALUE"]),
    # resumes with "<" on the stack, then FORMAT_VALUE and BUILD_STRING
    ("format_value_plain", "s = f'<{TD}|{x.shape[0]}>'; return y * len(s), s", ["FORMAT_VALUE"]),
    # FORMAT_VALUE pops the value and a spec built at run time
    ("format_value_dynamic_spec", "s = f'[{TZ!r:>{x.shape[0] * 5}}]'; return y * len(s), s",
     ["FORMAT_VALUE"]),
    ("build_map_key", "d = {TZ: 1, 2: 3}; return y * len(d), d[2]", ["BUILD_MAP"]),
    # IMPORT_NAME is traced (sys.modules), IMPORT_FROM reads TL.v
    ("import_from", "from gj_resume_fake_mod import v; return y * v", ["IMPORT_FROM"]),
    ("store_attr", "TL.w = 5; return y * TL.__dict__['w']", ["STORE_ATTR", "LOAD_ATTR"]),
    ("binary_op", "return len(ARR + ARR), y * 2", ["BINARY_OP", "CALL"]),
    ("contains_op", "return y * (2 in ARR)", ["CONTAINS_OP"]),
]
for _name, _body, _ in _SIMPLE:
    exec(f"def {_name}(x):\n    y = x + 1\n    {_body}\n", globals())
PROGRAMS = {name: globals()[name] for name, _, _ in _SIMPLE}


def load_method_tensor_kw(x):
    y = x + 1
    z = ML.scale(y, factor=3.0)  # the method is traced in the resume function
    return z.sin()


def load_method_mid_call(x):
    y = x + 1
    return torch.add(y, ML.f(1, b=2), alpha=2)  # torch.add, NULL and y below the break


class Cached:
    @functools.lru_cache  # a C-level descriptor: LOAD_METHOD breaks; the call is traced
    def m(self, a, b=1):
        return a * 2 + b


CACHED = Cached()


def load_method_c_descriptor(x):
    y = x + 1
    return y * CACHED.m(3, b=4)


def load_attr_star_args(x):
    y = x + 1
    args, kw = (1, 2, 3, 4), {"q": 1}
    return y * ML.f(*args, **kw)  # CALL_FUNCTION_EX: the method is loaded with LOAD_ATTR


def compare_op_branch(x):
    y = x + 1
    if TZ == TZ:
        return y * 2
    return y - 1


def get_iter_then_loop(x):
    y = x + 1
    t = 0
    for a in ARR:  # GET_ITER resumes; FOR_ITER (a loop) is a step break
        t += a
    return _after_loop(y, t)  # called from Python: still compiled


def _after_loop(y, t):
    return y * t + 1


def store_subscr(x, arr):
    y = x + 1
    arr[0] = 7
    return y * 2


def delete_subscr(x, arr):
    y = x + 1
    del arr[0]
    return y * 2


CASES = [(PROGRAMS[name], instrs) for name, _, instrs in _SIMPLE] + [
    (load_method_tensor_kw, ["LOAD_METHOD"]),
    (load_method_mid_call, ["LOAD_METHOD"]),
    (load_method_c_descriptor, ["LOAD_METHOD"]),  # the cached function's call passes through
    (load_attr_star_args, ["LOAD_ATTR"]),
    (compare_op_branch, ["COMPARE_OP"]),
]


#: the frames of these cases the persistent cache does not write (tests/conftest.py): a
#: resume function's list the guard holds with no source to find it by
CACHE_LIMITS = {"build_map_key": ("(a list) is compared by identity",)}


@pytest.mark.parametrize("fn,instrs", CASES, ids=[c[0].__name__ for c in CASES])
def test_break_then_resume(fn, instrs):
    expect(fn, X(), graphs=2, instrs=instrs)  # a graph before the break, one after


def test_get_iter_then_step_break_in_loop_still_compiles_callee():
    # the loop is the resume function's first break, before any op: it runs in Python up
    # to the return, then another resume function traces ``_after_loop``
    after = get_iter_then_loop.__code__.co_firstlineno + 5
    expect(get_iter_then_loop, X(), graphs=2, instrs=["GET_ITER", "FOR_ITER"],
           resumed=[RESUME, f"the frame runs in Python up to line {after} (its calls compiled), then a resume function"])


@pytest.mark.parametrize("fn,instr", [(store_subscr, "STORE_SUBSCR"), (delete_subscr, "DELETE_SUBSCR")])
def test_mutating_break_on_argument(fn, instr):
    # the array argument's mutation is compared with eager's by check_same
    expect(fn, X(), array.array("i", [1, 2, 3]), graphs=2, instrs=[instr])


def test_build_instructions_consume_stack_values_after_a_break():
    def build_all(x):
        y = x + 1
        t = (y, ARR[1], PAT, [y * 2, ARR[1]])  # BUILD_LIST, BUILD_TUPLE after the breaks
        d = {"a": y, "b": ARR[0], "c": t[3][0]}  # BUILD_CONST_KEY_MAP
        s = y[ARR[0]:ARR[2]]  # BUILD_SLICE
        return d["a"] * d["b"] + d["c"] + t[1] * t[0], s * 3, ARR[0] is not None, t[2].pattern

    # graphs: y; y * 2 (before the second break); all the rest (before the last break)
    expect(build_all, X(), graphs=3, instrs=["BINARY_SUBSCR"] * 6)


def test_delete_attr_on_unmodelled_object():
    def fn(x):
        y = x + 1
        TL.tmp = 1
        del TL.tmp
        return y * 2 + hasattr(TL, "tmp")

    expect(fn, X(), graphs=3, instrs=["STORE_ATTR", "DELETE_ATTR", "CALL"])  # then hasattr


# --------------------------------------------------------------------------------------
# pending side effects: applied once, in order, before the breaking instruction runs
# --------------------------------------------------------------------------------------

def test_side_effects_before_format_value_break_are_visible_to_it():
    def fn(x, lst, obj):
        LOG.clear()
        lst.append(1)
        obj.a = 10
        GD["k"] = len(lst)
        LOG.append("before")
        y = x + 1
        s = f"{Reporter(obj, lst)}"  # FORMAT_VALUE: __format__ runs in Python, reads all
        lst.append(2)
        obj.a += 1
        LOG.append(s)
        return y * obj.a, s

    expect(fn, X(), [0], Obj(a=0), graphs=2, instrs=["FORMAT_VALUE"])
    assert LOG == ["before", "a=10 lst=[0, 1] log=['before'] gd=[('k', 2)]"] and GD == {"k": 2}


def test_side_effects_before_unpack_break_compared_on_arguments():
    def fn(x, lst, obj, d):
        lst.append(len(lst))
        obj.a = x * 2
        d["k"] = lst
        a, b, c = ARR
        lst.append(a)
        obj.b = obj.a + b
        return obj.b * c

    expect(fn, X(), [7], Obj(a=0), {}, graphs=2, instrs=["UNPACK_SEQUENCE"])


GD_ALIAS: dict = {}


def test_store_global_and_list_before_store_attr_break():
    def fn(x, lst):
        global GD_ALIAS
        GD_ALIAS = {"n": 1}
        lst.append("a")
        y = x * 3
        TL.w = (len(lst), GD_ALIAS["n"])
        lst.append("b")
        GD_ALIAS["n"] += 1
        return y + len(lst)

    expect(fn, X(), ["z"], graphs=2, instrs=["STORE_ATTR"])
    assert GD_ALIAS == {"n": 2} and TL.__dict__["w"] == (2, 1)


def test_python_context_manager_order_with_side_effects():
    def fn(x, lst):
        lst.append("pre")
        LOG.append("pre")
        y = x + 1
        with CM:
            LOG.append("body")
            z = y * 2
        LOG.append("post")
        return z + 1

    # a Python context manager is traced (__enter__/__exit__ inlined): no break, one graph
    expect(fn, X(), [], graphs=1, instrs=[])
    assert LOG == ["pre", "enter", "body", ("exit", None), "post"] * 4  # eager, compiled, x2


# --------------------------------------------------------------------------------------
# the breaking instruction raises
# --------------------------------------------------------------------------------------

RAISING = [("v = ARR[10]", "BINARY_SUBSCR"), ("v = TL.nosuch", "LOAD_ATTR"),
           ("a, b = ARR", "UNPACK_SEQUENCE"), ("a, *b, c, d, e = ARR", "UNPACK_EX"),
           ("v = f'{DEC:z!}'", "FORMAT_VALUE"), ("v = TZ < TZ2", "COMPARE_OP"),
           ("v = -ARR", "UNARY_NEGATIVE"), ("ARR[0] = 'a'", "STORE_SUBSCR"),
           ("v = ARR + [1]", "BINARY_OP"), ("del TL.nosuch", "DELETE_ATTR")]


@pytest.mark.parametrize("in_try", [False, True], ids=["raises", "caught"])
@pytest.mark.parametrize("stmt,instr", RAISING, ids=[r[1] for r in RAISING])
def test_breaking_instruction_raises(stmt, instr, in_try, capsys):
    """Outside a ``try`` the user's exception reaches the caller (after the first graph);
    inside one the break is a step break and the handler runs (check_same compares
    exceptions and stdout)."""
    body = (f"try:\n        {stmt}\n    except Exception as e:\n"
            f"        print(type(e).__name__, e)\n        y = y * 3") if in_try else stmt
    ns = {"ARR": ARR, "DEC": DEC, "TZ": TZ, "TZ2": TZ2, "TL": TL}
    exec(f"def fn(x):\n    y = x + 1\n    {body}\n    return y * 2\n", ns)
    if in_try:
        ns["fn"](X())
        assert capsys.readouterr().out.split()[0].endswith("Error")  # the handler ran
    else:
        with pytest.raises((IndexError, AttributeError, ValueError, TypeError)):
            ns["fn"](X())
    expect(ns["fn"], X(), graphs=1, instrs=[instr], resumed=[STEP if in_try else RESUME])


def test_traced_attribute_error_is_not_a_break():
    # Pattern's attributes are readable; a missing one is the program's own error
    def fn(x):
        y = x + 1
        return y * PAT.nosuchattr

    cnt = check_same(fn, X())
    assert cnt.frame_count == 1 and graphjit.stats()["graph_breaks"] == 0


def test_raise_at_break_inside_no_grad_restores_grad_mode():
    def fn(x):
        y = x * 2
        with torch.no_grad():
            z = y + 1
            v = ARR[10]
        return z * v

    expect(fn, X().requires_grad_(), graphs=1, instrs=["BINARY_SUBSCR"])
    assert torch.is_grad_enabled()


# regression: the instruction run at a break inside a user context manager's block
# skipped its __exit__ when it raised (such blocks now run in Python from the `with`)
def test_raise_at_break_inside_python_cm_calls_exit():
    def fn(x):
        y = x + 1
        with CM:
            v = ARR[10]
        return y * v

    check_same(fn, X(), calls=1)
    assert LOG == ["enter", ("exit", IndexError)] * 2


# regression: an exception at a break inside `with lock:` left the lock held
def test_raise_at_break_inside_with_lock_releases_lock():
    def fn(x):
        y = x + 1
        with RAISE_LOCK:
            v = ARR[10]
        return y * v

    compiled = graphjit.compile(fn, backend=CompileCounter())
    try:
        with pytest.raises(IndexError, match="array index out of range"):
            compiled(X())
        assert not RAISE_LOCK.locked()
    finally:
        if RAISE_LOCK.locked():
            RAISE_LOCK.release()


# --------------------------------------------------------------------------------------
# BEFORE_WITH on a lock
# --------------------------------------------------------------------------------------

def with_lock(x):
    y = x + 1
    with LOCK:
        z = y * 2
    return z + 1


def test_with_lock_first_call():
    expect(with_lock, X(), graphs=3, instrs=["BEFORE_WITH", "CALL"], calls=1)
    assert not LOCK.locked()


# regression: the bound lock.__exit__ on the stack at a break was guarded by identity
# (a new object every call): every call recompiled
def test_with_lock_second_call_hits_cache():
    cnt = check_same(with_lock, X(), calls=3)
    s = graphjit.stats()
    assert (s["recompiles"], cnt.frame_count, s["graph_breaks"]) == (0, 3, 2), s["break_reasons"]


# --------------------------------------------------------------------------------------
# grad mode, live values, caching, other backends
# --------------------------------------------------------------------------------------

def test_break_inside_no_grad():
    def fn(x):
        with torch.no_grad():
            y = x * 2
            n = -TD  # UNARY_NEGATIVE break inside the block
            z = y * n.days
            inside = torch.is_grad_enabled()
        w = x * 3
        return z, w, inside, torch.is_grad_enabled()

    # graphs: y; z and w (after the n.days break)
    expect(fn, X().requires_grad_(), graphs=2, instrs=["UNARY_NEGATIVE", "LOAD_ATTR"])


def test_break_inside_enable_grad_nested_in_no_grad():
    def fn(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
                c = b * ARR[1]
            d = c + a
        return a, b, c, d

    expect(fn, X().requires_grad_(), graphs=2, instrs=["BINARY_SUBSCR"])


def test_values_live_across_break():
    def fn(x, obj):
        t = x * 2
        lst = [x, 1]
        d = {"a": x + 1, "n": 2}
        o = Obj(a=x - 1)
        k = 3

        def clos():
            return k + d["n"]

        a, b, c = ARR
        k = 10 + a  # a cell written in the resume function
        obj.seen = clos()
        lst.append(b)
        return t + lst[0] * c + d["a"] + o.a * clos() + lst[-1], obj, lst

    expect(fn, X(), Obj(), graphs=2, instrs=["UNPACK_SEQUENCE"])


def test_unpack_into_attribute_subscript_and_cell_targets():
    def fn(x, obj, lst):
        y = x + 1
        k = 0

        def get_k():
            return k

        obj.a, lst[0], k = ARR  # the stores run in the resume function
        return y * get_k() + obj.a + lst[0]

    expect(fn, X(), Obj(a=0), [0], graphs=2, instrs=["UNPACK_SEQUENCE"])


def _unpacking_helper(y):
    a, b, c = ARR
    return y * a + b


def test_break_in_inlined_callee():
    def fn(x):
        y = x + 1
        z = _unpacking_helper(y)  # breaks at the call; the callee is compiled on its own
        return z.sin()

    # graphs: y; the callee's y * a + b (after its own break); z.sin()
    expect(fn, X(), graphs=3, instrs=["CALL", "UNPACK_SEQUENCE"])


class PatModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.pat = TZ

    def forward(self, x):
        y = self.lin(x)
        s = f"{self.pat!r}"
        return y * len(s), s


def test_module_forward_format_value_break():
    torch.manual_seed(0)
    expect(PatModule(), X(2, 4), graphs=2, instrs=["FORMAT_VALUE"])


def test_nonlocal_write_after_break():
    def fn(x):
        count = 0

        def bump(n):
            nonlocal count
            count += n

        y = x + 1
        bump(1)
        c = TZ == TZ2
        bump(10 + c)
        return y * count

    expect(fn, X(), graphs=2, instrs=["COMPARE_OP"])


def test_cache_hit_then_new_shape_recompiles():
    cnt = CompileCounter()
    fn = PROGRAMS["unpack_sequence"]
    compiled = graphjit.compile(fn, backend=cnt)
    for x in (X(4), X(4, seed=1)):
        assert_equal(compiled(x), fn(x))
    s = graphjit.stats()
    assert (cnt.frame_count, s["recompiles"], s["graph_breaks"]) == (2, 0, 1)
    x = X(5, 2)
    assert_equal(compiled(x), fn(x))
    s = graphjit.stats()
    # the function and its resume function are both recompiled for the new shape
    assert (cnt.frame_count, s["recompiles"], s["graph_breaks"]) == (4, 2, 2)
    assert_equal(compiled(X(5, 2, seed=3)), fn(X(5, 2, seed=3)))
    assert graphjit.stats()["recompiles"] == 2


# regression: a bound builtin method on the stack at a break (lst.append) was guarded
# by identity: every call recompiled
def test_bound_builtin_method_on_stack_at_break():
    def fn(x, lst):
        lst.append(x.sum().item() > 100)
        return x * 2

    check_same(fn, X(), [], calls=3)
    s = graphjit.stats()
    assert s["break_reasons"][0].instruction == "CALL" and "item" in s["break_reasons"][0].reason
    assert s["recompiles"] == 0, s["break_reasons"]


@pytest.mark.parametrize("fn,instrs", [
    (load_method_tensor_kw, ["LOAD_METHOD"]), (PROGRAMS["unpack_ex"], ["UNPACK_EX"]),
    (PROGRAMS["format_value_dynamic_spec"], ["FORMAT_VALUE"]),
    (compare_op_branch, ["COMPARE_OP"]), (PROGRAMS["import_from"], ["IMPORT_FROM"]),
], ids=lambda v: getattr(v, "__name__", None))
def test_aot_eager(fn, instrs):
    expect(fn, X().requires_grad_(), graphs=None, instrs=instrs, backend="aot_eager")

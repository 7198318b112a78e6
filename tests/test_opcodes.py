"""Opcode coverage of the symbolic interpreter (CPython 3.11).

* Every opcode of ``dis.opmap`` is either handled (a method named after it, hence an entry
  in ``InstructionTranslator.dispatch_table``) or listed in ``UNSUPPORTED_OPCODES``; never
  both, never neither.
* One differential test per handled opcode (``test_opcode[<OPNAME>]``, parametrized over
  :data:`CASES`, opname -> (function, args)): a small tensor function whose bytecode is first
  checked to really contain the opcode (nested code objects included: comprehensions,
  lambdas, closures), then run eagerly and compiled with ``check_same`` while
  ``config.debug_checks`` verifies every handler's stack effect.  The handler must have
  run, and the frame must be captured in exactly one graph (a silent fallback to eager
  would make the comparison meaningless).  Opcodes no traceable source produces are
  skipped with the reason.
* One test per unsupported opcode that source code can produce
  (``test_unsupported_opcode[<OPNAME>]``): ``fullgraph=True`` raises
  :class:`graphjit.Unsupported` naming the construct, and without it the frame runs
  eagerly with the eager result.
* A handler with a wrong stack effect is caught by the debug checks: ``test_debug_checks.py``.
"""

from __future__ import annotations

import dis
import types

import pytest
import torch

import graphjit
from graphjit.testing import assert_equal, check_same
from graphjit.tracer.translator import (
    UNSUPPORTED_OPCODES,
    InliningTranslator,
    InstructionTranslator,
)


def opnames(code: types.CodeType) -> set[str]:
    """Opcode names in ``code`` and in every code object nested in its constants."""
    names = {inst.opname for inst in dis.get_instructions(code)}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= opnames(const)
    return names


def handled_opnames(cls=InstructionTranslator) -> set[str]:
    return {dis.opname[op] for op in cls.dispatch_table}


# ---------------------------------------------------------------------------------------
# coverage of the opcode table
# ---------------------------------------------------------------------------------------

def test_every_opcode_is_handled_or_unsupported():
    missing = set(dis.opmap) - handled_opnames() - set(UNSUPPORTED_OPCODES)
    assert not missing, f"opcodes neither handled nor listed as unsupported: {sorted(missing)}"


def test_handled_and_unsupported_are_disjoint():
    both = handled_opnames() & set(UNSUPPORTED_OPCODES)
    assert not both, f"opcodes both handled and listed as unsupported: {sorted(both)}"


def test_unsupported_names_are_real_opcodes():
    extra = set(UNSUPPORTED_OPCODES) - set(dis.opmap)
    assert not extra, f"UNSUPPORTED_OPCODES names that are not 3.11 opcodes: {sorted(extra)}"


def test_unsupported_opcodes_have_reasons():
    assert all(isinstance(r, str) and r for r in UNSUPPORTED_OPCODES.values())


def test_handled_names_are_real_opcodes_and_tables_agree():
    # dispatch keys are opcodes; each handler is the attribute named after that opcode
    for op, handler in InstructionTranslator.dispatch_table.items():
        assert dis.opname[op] in dis.opmap
        assert getattr(InstructionTranslator, dis.opname[op]) is handler
    # both translators handle the same opcodes (they only differ in RETURN_VALUE)
    assert handled_opnames(InliningTranslator) == handled_opnames(InstructionTranslator)
    assert (InliningTranslator.dispatch_table[dis.opmap["RETURN_VALUE"]]
            is not InstructionTranslator.dispatch_table[dis.opmap["RETURN_VALUE"]])


# ---------------------------------------------------------------------------------------
# one small function per handled opcode
# ---------------------------------------------------------------------------------------

def _t(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


A = _t(3, 4, seed=1)
B = _t(3, 4, seed=2)
V = _t(4, seed=3)


def f_resume(a):
    return a + 1


def f_nop(a, flag):
    if flag:
        pass  # the `pass` line keeps a NOP for its line number
    return a * 2


def f_pop_top(a):
    a.sum()  # expression statement: its value is popped
    return a * 2


def f_push_null(a):
    fn = torch.relu  # calling a local pushes NULL explicitly
    return fn(a)


def f_copy_swap(a, n):
    if 0 < n < 5:  # chained comparison: SWAP + COPY
        return a + n
    return a - n


def f_copy_augassign(a, b):
    lst = [a, b]
    lst[0] += b  # augmented subscript assignment: COPY 2 twice
    return lst


def f_fast(a):
    x = a + 1
    y = x * 2
    return y


def f_delete_fast(a):
    x = a + 1
    y = x * 2
    del x
    return y


def f_closure(a):
    k = a + 1  # k is a cell of f (MAKE_CELL, STORE_DEREF)

    def g(x):  # LOAD_CLOSURE + MAKE_FUNCTION(closure); g starts with COPY_FREE_VARS
        return x * k  # LOAD_DEREF in g

    return g(a) + k  # LOAD_DEREF in f


def _make_closure():
    k = _t(3, 4, seed=9)
    scale = 3

    def inner(a):  # compiled directly: COPY_FREE_VARS runs in the root translator
        return a * scale + k

    return inner


f_root_closure = _make_closure()


def f_load_const(a):
    return a * 2.5 + 7


def f_load_global(a):
    return torch.sin(a) + A


def f_load_attr(a):
    return a.T @ a + a.shape[0]


def f_load_method(a):
    return a.sum(1)


def f_make_function(a):
    def g(x, k=2, *, m=3):  # defaults and keyword defaults
        return x * k + m

    h = lambda x: g(x) - 1  # noqa: E731
    return h(a)


def f_binary_op(a, b):
    x = a + b
    x = x - a * b
    x = x / (b.abs() + 1)
    x = x ** 2
    x = x @ b.T
    x += 1
    return x // 3, x % 2, -x


def f_compare_op(a, n):
    m = a > 0
    if n >= 2:
        return m, a <= 0.5
    return m, a == 0


def f_is_op(a, x):
    y = x is None
    z = x is not None
    return a * 2, y, z


def f_contains_op(a, b, key, n):
    d = {"w": b}
    if key in d and n not in (7, 8):
        return a * d["w"]
    return a - 1


def f_unary_positive(a):
    return +a


def f_unary_negative(a, n):
    return -a, -n


def f_unary_invert(a, n):
    return ~(a > 0), ~n


def f_unary_not(a, flag):
    return a * 2, not flag


def f_binary_subscr(a, lst):
    d = {"k": a.sum(0)}
    return a[0] + lst[1] + d["k"]


def f_store_subscr(a, b):
    c = a.clone()
    c[0] = 1.0
    lst = [a, b]
    lst[1] = c * 2
    d = {}
    d["x"] = c
    return c, lst, d


def f_build_slice(a):
    return a[1:3], a[::2], a[:, 1:-1]


def f_build_tuple(a, b):
    t = (a, b, a + b)
    return t


def f_build_list(a, b):
    return [a, b * 2]


def f_build_map(a, key):
    return {key: a + 1}


def f_build_const_key_map(a, b):
    return {"x": a, "y": b * 2}


def f_build_string(a, n):
    s = f"n={n}!"
    return a * n, s


def f_format_value(a, n):
    return a + n, f"{n}", f"{n!r}", f"{n:>4}", f"{n!s:<3}"


def f_list_append(a, lst):
    return [x * 2 for x in lst]


def f_list_extend(a, lst):
    return [*lst, a + 1], [1, 2, 3]


def f_list_to_tuple(a, lst):
    return (*lst, a + 1)


def f_map_add(a, lst):
    return {i: x * a for i, x in enumerate(lst)}


def f_dict_update(a, b):
    d = {"x": b}
    return {**d, "z": a * 2}


def f_dict_merge(a, b):
    kw = {"other": b, "alpha": 2}
    return torch.add(a, **kw)


def f_unpack_sequence(a, pair):
    x, y = pair
    return x * y + a


def f_unpack_ex(a, lst):
    first, *rest = lst
    *init, last = lst
    return first + a, rest, init, last


def f_for_loop(a, lst):
    total = a
    for x in lst:  # GET_ITER, FOR_ITER, JUMP_BACKWARD
        total = total + x
    return total


def f_jump_forward(a, flag):
    if flag:
        x = a + 1
    else:  # the if-branch jumps forward over the else-branch
        x = a - 1
    return x


def f_pop_jump_forward_if_false(a, flag):
    if flag:
        return a + 1
    return a - 1


def f_pop_jump_forward_if_true(a, flag):
    if not flag:
        return a + 1
    return a - 1


def f_pop_jump_forward_if_none(a, x):
    if x is not None:
        return a + x
    return a * 3


def f_pop_jump_forward_if_not_none(a, x):
    if x is None:
        return a * 2
    return a * x


def f_pop_jump_backward_if_true(a, n):
    i = 0
    while i < n:  # 3.11 repeats the loop condition at the bottom
        a = a + 1
        i += 1
    return a


def f_pop_jump_backward_if_false(a, n):
    done = False
    i = 0
    while not done:
        a = a * 2
        i += 1
        done = i >= n
    return a


def f_pop_jump_backward_if_none(a):
    x = None
    n = 0
    while x is None:
        n += 1
        if n == 3:
            x = a
    return x * 2


def f_pop_jump_backward_if_not_none(a, lst):
    x = lst[0]
    i = 0
    while x is not None:
        a = a + x
        i += 1
        x = lst[i] if i < len(lst) else None
    return a


def f_jump_if_true_or_pop(a, n):
    k = n or 5
    return a * k


def f_jump_if_false_or_pop(a, n):
    k = n and 5
    return a * k


def f_kw_names(a):
    return torch.sum(a, dim=0, keepdim=True)


def f_call(a):
    return torch.abs(a)


def f_call_function_ex(a, args):
    kw = {"alpha": 0.5}
    return torch.add(*args, **kw) + a


def f_before_with(a):
    with torch.no_grad():
        b = a * 2
    return b + 1


def f_store_attr(a, obj):
    obj.value = a + 1  # replayed after the graph as an instance-dict write
    return a * 2


def f_raise(a):
    b = a + 1
    if b.dim() == 2:
        raise ValueError("two dimensions")  # the program raises: run in Python after the graph
    return b


# pytest rewrites `assert` statements in test modules, so this one is compiled from text
_fns: dict = {}
exec(compile("def f_assert(a, n):\n    b = a + 1\n    assert n < 0, 'n must be negative'\n"
             "    return b\n", "<f_assert>", "exec"), _fns)
f_assert = _fns["f_assert"]


def f_try_except(a):
    try:
        raise KeyError("k")  # handled in the frame: PUSH_EXC_INFO, CHECK_EXC_MATCH, POP_EXCEPT
    except KeyError:
        return a + 1


def f_reraise(a):
    try:
        try:
            raise KeyError("k")
        finally:
            b = a + 1  # the finally block's exception path ends in RERAISE
    except KeyError:
        return b * 2


def f_with_exception(a):
    try:
        with torch.no_grad():
            raise RuntimeError("r")  # the with block's cleanup: WITH_EXCEPT_START
    except RuntimeError:
        return a + 1


def f_store_global(a):
    global _G
    _G = 5
    return a + _G


def f_delete_global(a):
    global _G
    _G = 1
    del _G
    return a * 2


def f_delete_attr(a, obj):
    del obj.value
    return a * 2


def f_delete_subscr(a, lst):
    del lst[0]
    return a * 2, lst


def f_delete_deref(a):
    y = a + 1

    def g():
        return y

    r = g()
    del y
    return r


def f_build_set(a, n):
    s = {n, 1}
    return a * len(s)


def f_set_update(a):
    s = {1, 2, 3}  # 3.11: BUILD_SET 0 + LOAD_CONST frozenset + SET_UPDATE
    return a * len(s)


def f_set_add(a, n):
    s = {i % 2 for i in range(n)}
    return a * len(s)


class _Obj:
    def __init__(self):
        self.value = 0

    def __eq__(self, other):  # check_same compares arguments after the call
        if type(other) is not _Obj or hasattr(self, "value") != hasattr(other, "value"):
            return False
        return not hasattr(self, "value") or torch.equal(torch.as_tensor(self.value),
                                                         torch.as_tensor(other.value))


def f_match_sequence(a, pair):
    match pair:
        case [x, y]:
            return a + x * y
    return a


def f_match_mapping(a, key):
    d = {key: a}
    match d:
        case {"k": v}:
            return a + v
    return a


def f_match_class(a, n):
    match n:
        case int():
            return a + n
    return a


LST3 = [_t(3, 4, seed=4), _t(3, 4, seed=5), _t(3, 4, seed=6)]

#: opname -> (function, args); every handled opcode has an entry (checked below).
CASES: dict[str, tuple] = {
    "RESUME": (f_resume, (A,)),
    "NOP": (f_nop, (A, True)),
    "POP_TOP": (f_pop_top, (A,)),
    "PUSH_NULL": (f_push_null, (A,)),
    "COPY": (f_copy_augassign, (A, B)),
    "SWAP": (f_copy_swap, (A, 3)),
    "LOAD_FAST": (f_fast, (A,)),
    "STORE_FAST": (f_fast, (A,)),
    "DELETE_FAST": (f_delete_fast, (A,)),
    "LOAD_DEREF": (f_closure, (A,)),
    "STORE_DEREF": (f_closure, (A,)),
    "LOAD_CLOSURE": (f_closure, (A,)),
    "MAKE_CELL": (f_closure, (A,)),
    "COPY_FREE_VARS": (f_root_closure, (A,)),
    "LOAD_CONST": (f_load_const, (A,)),
    "LOAD_GLOBAL": (f_load_global, (A,)),
    "LOAD_ATTR": (f_load_attr, (A,)),
    "LOAD_METHOD": (f_load_method, (A,)),
    "MAKE_FUNCTION": (f_make_function, (A,)),
    "BINARY_OP": (f_binary_op, (A, B)),
    "COMPARE_OP": (f_compare_op, (A, 3)),
    "IS_OP": (f_is_op, (A, None)),
    "CONTAINS_OP": (f_contains_op, (A, B, "w", 3)),
    "UNARY_POSITIVE": (f_unary_positive, (A,)),
    "UNARY_NEGATIVE": (f_unary_negative, (A, 4)),
    "UNARY_INVERT": (f_unary_invert, (A, 4)),
    "UNARY_NOT": (f_unary_not, (A, False)),
    "BINARY_SUBSCR": (f_binary_subscr, (A, [A, B])),
    "STORE_SUBSCR": (f_store_subscr, (A, B)),
    "BUILD_SLICE": (f_build_slice, (A,)),
    "BUILD_TUPLE": (f_build_tuple, (A, B)),
    "BUILD_LIST": (f_build_list, (A, B)),
    "BUILD_MAP": (f_build_map, (A, "key")),
    "BUILD_CONST_KEY_MAP": (f_build_const_key_map, (A, B)),
    "BUILD_STRING": (f_build_string, (A, 2)),
    "FORMAT_VALUE": (f_format_value, (A, 7)),
    "LIST_APPEND": (f_list_append, (A, LST3)),
    "LIST_EXTEND": (f_list_extend, (A, LST3)),
    "LIST_TO_TUPLE": (f_list_to_tuple, (A, LST3)),
    "MAP_ADD": (f_map_add, (A, LST3)),
    "DICT_UPDATE": (f_dict_update, (A, B)),
    "DICT_MERGE": (f_dict_merge, (A, B)),
    "UNPACK_SEQUENCE": (f_unpack_sequence, (A, (A, B))),
    "UNPACK_EX": (f_unpack_ex, (A, LST3)),
    "GET_ITER": (f_for_loop, (A, LST3)),
    "FOR_ITER": (f_for_loop, (A, LST3)),
    "JUMP_FORWARD": (f_jump_forward, (A, True)),
    "JUMP_BACKWARD": (f_for_loop, (A, LST3)),
    # Only emitted in generators/coroutines (the SEND loop of yield from / await), whose
    # frames graphjit refuses (RETURN_GENERATOR): no traceable 3.11 source produces it.
    "JUMP_BACKWARD_NO_INTERRUPT": None,
    "POP_JUMP_FORWARD_IF_FALSE": (f_pop_jump_forward_if_false, (A, True)),
    "POP_JUMP_FORWARD_IF_TRUE": (f_pop_jump_forward_if_true, (A, True)),
    "POP_JUMP_FORWARD_IF_NONE": (f_pop_jump_forward_if_none, (A, B)),
    "POP_JUMP_FORWARD_IF_NOT_NONE": (f_pop_jump_forward_if_not_none, (A, None)),
    "POP_JUMP_BACKWARD_IF_TRUE": (f_pop_jump_backward_if_true, (A, 3)),
    "POP_JUMP_BACKWARD_IF_FALSE": (f_pop_jump_backward_if_false, (A, 3)),
    "POP_JUMP_BACKWARD_IF_NONE": (f_pop_jump_backward_if_none, (A,)),
    "POP_JUMP_BACKWARD_IF_NOT_NONE": (f_pop_jump_backward_if_not_none, (A, LST3)),
    "JUMP_IF_TRUE_OR_POP": (f_jump_if_true_or_pop, (A, 0)),
    "JUMP_IF_FALSE_OR_POP": (f_jump_if_false_or_pop, (A, 3)),
    "KW_NAMES": (f_kw_names, (A,)),
    "PRECALL": (f_call, (A,)),
    "CALL": (f_call, (A,)),
    "CALL_FUNCTION_EX": (f_call_function_ex, (A, (A, B))),
    "BEFORE_WITH": (f_before_with, (A,)),
    "RETURN_VALUE": (f_resume, (A,)),
    "STORE_ATTR": (f_store_attr, (A, _Obj())),
    "DELETE_ATTR": (f_delete_attr, (A, _Obj())),
    "STORE_GLOBAL": (f_store_global, (A,)),
    "DELETE_GLOBAL": (f_delete_global, (A,)),
    "DELETE_SUBSCR": (f_delete_subscr, (A, [1, 2, 3])),
    "DELETE_DEREF": (f_delete_deref, (A,)),
    "BUILD_SET": (f_build_set, (A, 4)),
    "SET_UPDATE": (f_set_update, (A,)),
    "SET_ADD": (f_set_add, (A, 5)),
    "RAISE_VARARGS": (f_raise, (A,)),
    "LOAD_ASSERTION_ERROR": (f_assert, (A, 3)),
    "PUSH_EXC_INFO": (f_try_except, (A,)),
    "CHECK_EXC_MATCH": (f_try_except, (A,)),
    "MATCH_SEQUENCE": (f_match_sequence, (A, (A, B))),
    "GET_LEN": (f_match_sequence, (A, (A, B))),
    "MATCH_MAPPING": (f_match_mapping, (A, "k")),
    "MATCH_KEYS": (f_match_mapping, (A, "k")),
    "MATCH_CLASS": (f_match_class, (A, 3)),
    "POP_EXCEPT": (f_try_except, (A,)),
    "RERAISE": (f_reraise, (A,)),
    "WITH_EXCEPT_START": (f_with_exception, (A,)),
}


def test_every_handled_opcode_has_a_case():
    assert set(CASES) == handled_opnames()


def _record_handler_calls(monkeypatch, opname: str) -> list:
    """Wrap the opcode's handler in both translators; the list grows on each call."""
    calls: list = []
    op = dis.opmap[opname]
    for cls in (InstructionTranslator, InliningTranslator):
        handler = cls.dispatch_table[op]

        def wrapper(self, inst, _handler=handler):
            calls.append(inst)
            return _handler(self, inst)

        monkeypatch.setitem(cls.dispatch_table, op, wrapper)
    return calls


@pytest.mark.parametrize("opname", sorted(CASES))
def test_opcode(opname, monkeypatch):
    """test_opcode[<OPNAME>]: the opcode occurs in the function, its handler runs, and the
    compiled function behaves as eager with the whole frame in one graph."""
    case = CASES[opname]
    if case is None:
        pytest.skip(f"{opname}: not produced by any 3.11 source that graphjit can trace "
                    "(only generators/coroutines emit it)")
    fn, args = case
    assert opname in opnames(fn.__code__), f"{fn.__name__} does not contain {opname}"
    calls = _record_handler_calls(monkeypatch, opname)
    counter = check_same(fn, *args)
    assert calls, f"the {opname} handler never ran"
    assert graphjit.stats()["graph_breaks"] == 0, graphjit.stats()["break_reasons"]
    assert counter.frame_count == 1, "the frame was not captured in one graph"


def test_STORE_ATTR():
    """A plain attribute write on a pre-existing object is recorded and replayed after the
    graph; a class's own ``__setattr__`` written in Python is traced too (no break)."""
    fn, args = CASES["STORE_ATTR"]
    assert "STORE_ATTR" in opnames(fn.__code__)
    assert check_same(fn, *args, fullgraph=True).frame_count == 1
    assert graphjit.stats()["graph_breaks"] == 0

    class Custom:
        def __init__(self):
            self.value = 0

        def __setattr__(self, name, value):
            object.__setattr__(self, name, value)

        def __eq__(self, other):
            return type(other) is Custom and torch.equal(torch.as_tensor(self.value),
                                                         torch.as_tensor(other.value))

    graphjit.reset()
    assert check_same(fn, A, Custom(), fullgraph=True).frame_count == 1
    assert graphjit.stats()["graph_breaks"] == 0


# -- a few extra variants of the opcodes above ---------------------------------------------

_BINOPS = [(name, sym) for name, sym in dis._nb_ops]
_BITWISE = {"&", "|", "^", "<<", ">>"}


@pytest.mark.parametrize("index", range(len(_BINOPS)), ids=[n for n, _ in _BINOPS])
def test_BINARY_OP_every_oparg(index):
    """Each BINARY_OP argument (in-place forms included) on tensors and on Python ints."""
    name, sym = _BINOPS[index]
    op = sym.removesuffix("=")
    if op in _BITWISE:
        a, b = torch.tensor([5, 6, 7]), torch.tensor([1, 2, 3])
    elif op == "@":
        a, b = _t(3, 3, seed=1), _t(3, 3, seed=2)
    else:
        a, b = _t(3, seed=1).abs() + 1, _t(3, seed=2).abs() + 1
    int_expr = "n" if op == "@" else f"n {op} m"  # ints have no @
    if sym.endswith("="):
        src = (f"def fn(a, b, n, m):\n    x = a * 1\n    x {sym} b\n"
               f"    k = n\n    {'k = k' if op == '@' else f'k {sym} m'}\n    return x, k\n")
    else:
        src = f"def fn(a, b, n, m):\n    return a {op} b, {int_expr}\n"
    ns: dict = {}
    exec(compile(src, f"<binop {name}>", "exec"), ns)
    fn = ns["fn"]
    assert any(i.opname == "BINARY_OP" and i.arg == index
               for i in dis.get_instructions(fn.__code__)), src
    counter = check_same(fn, a, b, 7, 3)
    assert counter.frame_count == 1


@pytest.mark.parametrize("sym", ["<", "<=", "==", "!=", ">", ">="])
def test_COMPARE_OP_every_oparg(sym):
    ns = {}
    exec(f"def fn(a, b, n):\n    return a {sym} b, n {sym} 3\n", ns)
    fn = ns["fn"]
    assert "COMPARE_OP" in opnames(fn.__code__)
    counter = check_same(fn, A, B, 3)
    assert counter.frame_count == 1


def test_SWAP_chained_comparison_false_branch():
    assert {"SWAP", "COPY"} <= opnames(f_copy_swap.__code__)
    assert check_same(f_copy_swap, A, 9).frame_count == 1


def test_JUMP_IF_OR_POP_other_outcomes():
    assert check_same(f_jump_if_true_or_pop, A, 2).frame_count == 1
    assert check_same(f_jump_if_false_or_pop, A, 0).frame_count == 1


def test_pop_jumps_other_outcomes():
    assert check_same(f_pop_jump_forward_if_false, A, False).frame_count == 1
    assert check_same(f_pop_jump_forward_if_true, A, False).frame_count == 1
    assert check_same(f_pop_jump_forward_if_none, A, None).frame_count == 1
    assert check_same(f_pop_jump_forward_if_not_none, A, B).frame_count == 1
    assert check_same(f_jump_forward, A, False).frame_count == 1
    assert check_same(f_pop_jump_backward_if_true, A, 1).frame_count == 1


def test_CONTAINS_OP_not_found():
    assert check_same(f_contains_op, A, B, "v", 3).frame_count == 1
    assert check_same(f_contains_op, A, B, "w", 7).frame_count == 1


def test_dict_argument():
    """Dicts of tensors passed in (BINARY_SUBSCR, CONTAINS_OP, DICT_MERGE on an input)."""

    def fn(a, d):
        if "other" in d:
            return torch.add(a, **d)
        return a * d["x"]

    assert check_same(fn, A, {"other": B, "alpha": 2}).frame_count == 1
    assert check_same(fn, A, {"x": B}).frame_count == 1


def test_MAKE_FUNCTION_closure_of_comprehension_variable():
    def fn(a, lst):
        scale = 3
        return [x * scale + a for x in lst]  # the comprehension closes over `scale`

    assert {"LOAD_CLOSURE", "LOAD_DEREF", "LIST_APPEND", "MAKE_FUNCTION"} <= opnames(fn.__code__)
    assert check_same(fn, A, LST3).frame_count == 1


# ---------------------------------------------------------------------------------------
# unsupported opcodes produced from source
# ---------------------------------------------------------------------------------------



def u_import_name(a):  # a module already imported: traced (read from sys.modules)
    import math

    return a * math.pi


def u_import_from(a):
    from math import pi  # IMPORT_NAME first, then IMPORT_FROM

    return a * pi


CASES["IMPORT_NAME"] = (u_import_name, (A,))
CASES["IMPORT_FROM"] = (u_import_from, (A,))


_G = 0




















def u_class(a):
    class C:
        pass

    return a * 2, C.__name__






def u_generator(a):
    yield a + 1
    yield a * 2


#: opname -> (fn, args, opcode the trace hits (None: the trace stops before it), words the
#: Unsupported message must contain)
UNSUPPORTED_CASES = {
    "LOAD_BUILD_CLASS": (u_class, (A,), "LOAD_BUILD_CLASS", ["class definitions"]),
    "RETURN_GENERATOR": (u_generator, (A,), "RETURN_GENERATOR", ["generators"]),
    "YIELD_VALUE": (u_generator, (A,), "RETURN_GENERATOR", ["generators"]),
}

# Not produced by function source that graphjit could be handed, with the reason:
NOT_PRODUCIBLE = {
    "CACHE": "inline cache slots are skipped by the decoder, never an instruction",
    "EXTENDED_ARG": "folded into the following instruction by the decoder",
    "LOAD_NAME": "module/class-body code only, never a function's frame",
    "STORE_NAME": "module/class-body code only, never a function's frame",
    "DELETE_NAME": "module/class-body code only, never a function's frame",
    "LOAD_CLASSDEREF": "class bodies only (LOAD_BUILD_CLASS breaks first)",
    "SETUP_ANNOTATIONS": "module/class bodies only",
    "IMPORT_STAR": "`from m import *` is a SyntaxError inside a function",
    "PRINT_EXPR": "interactive mode only",
    "SEND": "generators/coroutines (RETURN_GENERATOR breaks first)",
    "GET_YIELD_FROM_ITER": "generators (RETURN_GENERATOR breaks first)",
    "GET_AWAITABLE": "coroutines (RETURN_GENERATOR breaks first)",
    "GET_AITER": "async for (RETURN_GENERATOR breaks first)",
    "GET_ANEXT": "async for (RETURN_GENERATOR breaks first)",
    "END_ASYNC_FOR": "async for (RETURN_GENERATOR breaks first)",
    "BEFORE_ASYNC_WITH": "async with (RETURN_GENERATOR breaks first)",
    "ASYNC_GEN_WRAP": "async generators (RETURN_GENERATOR breaks first)",
    "CHECK_EG_MATCH": "except* handlers run only after a raise (RAISE_VARARGS breaks first)",
    "PREP_RERAISE_STAR": "except* handlers run only after a raise (RAISE_VARARGS breaks first)",
}


def test_unsupported_cases_cover_the_table():
    assert set(UNSUPPORTED_CASES) | set(NOT_PRODUCIBLE) == set(UNSUPPORTED_OPCODES)


def _run_variants(fn, args):
    """(eager result or exception, compiled result or exception) on fresh copies."""
    import copy

    out = []
    for f in (fn, graphjit.compile(fn, backend="eager")):
        a = copy.deepcopy(args)
        try:
            r = f(*a)
            if isinstance(r, types.GeneratorType):
                r = list(r)
            out.append(("ok", r, a))
        except Exception as e:  # noqa: BLE001
            out.append(("raised", e, a))
    return out


@pytest.mark.parametrize("opname", sorted(UNSUPPORTED_CASES))
def test_unsupported_opcode(opname):
    fn, args, hit, words = UNSUPPORTED_CASES[opname]
    assert opname in opnames(fn.__code__), f"{fn.__name__} does not contain {opname}"
    assert hit is None or hit in UNSUPPORTED_OPCODES  # None: the trace stops before it
    graphjit.reset()
    with pytest.raises(graphjit.Unsupported) as info:
        r = graphjit.compile(fn, backend="eager", fullgraph=True)(*args)
        if isinstance(r, types.GeneratorType):
            list(r)
    msg = str(info.value)
    assert hit is None or hit in msg, msg
    for w in words:
        assert w in msg, msg
    # the user location is the function's file
    assert info.value.user_stack
    assert info.value.user_stack[-1].filename == fn.__code__.co_filename
    # without fullgraph: the frame runs eagerly, same behaviour
    graphjit.reset()
    (ek, ev, eargs), (ck, cv, cargs) = _run_variants(fn, args)
    assert ek == ck, (ev, cv)
    if ek == "raised":
        assert type(ev) is type(cv) and str(ev) == str(cv)
    else:
        assert_equal(cv, ev)
    assert_equal(cargs, eargs, "args after the call")
    assert graphjit.stats()["graph_breaks"] >= 1


@pytest.mark.parametrize("opname", sorted(NOT_PRODUCIBLE))
def test_unsupported_opcode_not_producible(opname):
    pytest.skip(f"{opname}: {NOT_PRODUCIBLE[opname]}")

"""Assembler unit tests: generated code that runs, EXTENDED_ARG, jumps, tables, locations."""

from __future__ import annotations

import dis
import sys
import types

import pytest

from graphjit.bytecode import (
    ExceptionTableEntry,
    assemble,
    compute_stacksize,
    create_call,
    create_instruction,
    create_jump,
    create_load_global,
    decode,
    instructions_from_template,
    stack_depths,
    stack_effect,
)

I = create_instruction  # noqa: E741 - short alias keeps hand-written sequences readable


def _template():
    pass


def _function(insts, template=_template, **overrides) -> types.FunctionType:
    """Assemble ``insts`` on ``template``'s code and wrap them in a function."""
    code = assemble(insts, template.__code__, **overrides)
    return types.FunctionType(code, globals())


def _args(*names: str) -> dict:
    return {"co_argcount": len(names), "co_varnames": names}


def _opnames(code: types.CodeType) -> list[str]:
    return [i.opname for i in dis.get_instructions(code)]


def test_create_helpers_build_a_working_function():
    """len(a) + max(a, key=abs), built from create_* helpers."""
    insts = [
        I("RESUME", arg=0),
        create_load_global("len", push_null=True),
        I("LOAD_FAST", argval="a"),
        *create_call(1),
        create_load_global("max", push_null=True),
        I("LOAD_FAST", argval="a"),
        create_load_global("abs", push_null=False),
        *create_call(2, kw_names=("key",)),
        I("BINARY_OP", arg=0),
        I("RETURN_VALUE"),
    ]
    fn = _function(insts, **_args("a"))
    assert fn([3, -7, 2]) == 3 + -7
    assert fn.__code__.co_stacksize == compute_stacksize(insts) == 5
    assert fn.__code__.co_names == ("len", "max", "abs")
    # write-back: offsets and resolved args are on the instructions now
    assert [i.offset for i in insts[:3]] == [0, 2, 14]
    assert insts[1].arg == 1 and insts[7].arg == 4


def test_jump_over_more_than_256_units_needs_extended_arg():
    """if flag: x += 1 (repeated 100 times); return x: the forward jump spans > 255 units."""
    end = I("LOAD_FAST", argval="x")
    body = []
    for _ in range(100):
        body += [I("LOAD_FAST", argval="x"), I("LOAD_CONST", argval=1), I("BINARY_OP", arg=13)]
        body += [I("STORE_FAST", argval="x")]
    insts = [
        I("RESUME", arg=0),
        I("LOAD_CONST", argval=0),
        I("STORE_FAST", argval="x"),
        I("LOAD_FAST", argval="flag"),
        create_jump("POP_JUMP_IF_FALSE", end),
        *body,
        end,
        I("RETURN_VALUE"),
    ]
    fn = _function(insts, **_args("flag"))
    assert fn(True) == 100 and fn(False) == 0
    assert "EXTENDED_ARG" in _opnames(fn.__code__)
    assert insts[4].arg > 255 and insts[4].opname == "POP_JUMP_FORWARD_IF_FALSE"
    again = decode(fn.__code__)
    assert again[4].target is again[-2]  # decode folds the prefix into the jump
    assert assemble(again, fn.__code__) == fn.__code__


def test_backward_jump_with_extended_arg_and_prefixed_target():
    """A loop whose body is long enough that the backward jump needs EXTENDED_ARG."""
    head = I("LOAD_FAST", argval="i")
    exit_ = I("LOAD_FAST", argval="acc")
    body = [I("LOAD_FAST", argval="i"), I("LOAD_CONST", argval=1), I("BINARY_OP", arg=23)]
    body += [I("STORE_FAST", argval="i")]
    padding = [I("NOP") for _ in range(300)]
    insts = [
        I("RESUME", arg=0),
        I("LOAD_CONST", argval=0),
        I("STORE_FAST", argval="acc"),
        head,
        I("LOAD_CONST", argval=0),
        I("COMPARE_OP", arg=4),  # >
        create_jump("POP_JUMP_IF_FALSE", exit_),
        *padding,
        I("LOAD_FAST", argval="acc"),
        I("LOAD_FAST", argval="i"),
        I("BINARY_OP", arg=13),
        I("STORE_FAST", argval="acc"),
        *body,
        create_jump("JUMP", head),
        exit_,
        I("RETURN_VALUE"),
    ]
    fn = _function(insts, **_args("i"))
    assert fn(4) == 4 + 3 + 2 + 1
    assert insts[-3].opname == "JUMP_BACKWARD" and insts[-3].arg > 255


def test_more_than_256_constants():
    values = [f"c{i}" for i in range(300)] + [1, 1.0, True, 0.0, -0.0, (1,), (1.0,), (True,)]
    insts = [I("RESUME", arg=0)]
    insts += [I("LOAD_CONST", argval=v) for v in values]
    insts += [I("BUILD_TUPLE", arg=len(values)), I("RETURN_VALUE")]
    fn = _function(insts)
    result = fn()
    assert result == tuple(values)
    assert [type(v) for v in result] == [type(v) for v in values]
    assert str(result[-4]) == "-0.0" and str(result[-5]) == "0.0"
    assert type(result[-1][0]) is bool and type(result[-2][0]) is float
    assert "EXTENDED_ARG" in _opnames(fn.__code__)
    assert fn.__code__.co_stacksize == len(values)


def test_constants_reuse_template_slots():
    def template():
        a = 1.0
        b = "x"
        return a, b

    insts = [I("RESUME", arg=0), I("LOAD_CONST", argval="x"), I("LOAD_CONST", argval=1.0)]
    insts += [I("LOAD_CONST", argval=1), I("BUILD_TUPLE", arg=3), I("RETURN_VALUE")]
    code = assemble(insts, template.__code__)
    consts = template.__code__.co_consts
    assert 1.0 in consts and "x" in consts
    assert code.co_consts[: len(consts)] == consts
    assert code.co_consts[len(consts):] == (1,)  # only the int was missing
    assert types.FunctionType(code, {})() == ("x", 1.0, 1)


def test_jump_direction_is_flipped_both_ways():
    """Forward spellings pointing back become backward jumps and vice versa."""
    loop = I("LOAD_FAST", argval="i")
    done = I("LOAD_FAST", argval="i")
    insts = [
        I("RESUME", arg=0),
        create_jump("JUMP_BACKWARD", loop),  # named backward, target ahead
        done,
        I("RETURN_VALUE"),
        loop,
        I("LOAD_CONST", argval=1),
        I("BINARY_OP", arg=0),
        I("STORE_FAST", argval="i"),
        I("LOAD_FAST", argval="i"),
        I("LOAD_CONST", argval=10),
        I("COMPARE_OP", arg=0),  # <
        create_jump("POP_JUMP_FORWARD_IF_TRUE", loop),  # named forward, target behind
        create_jump("JUMP_FORWARD", done),  # named forward, target behind
    ]
    fn = _function(insts, **_args("i"))
    assert fn(0) == 10 and fn(20) == 21
    assert insts[1].opname == "JUMP_FORWARD"
    assert insts[-2].opname == "POP_JUMP_BACKWARD_IF_TRUE"
    assert insts[-1].opname == "JUMP_BACKWARD"


def test_forward_only_jump_pointing_back_is_rejected():
    head = I("NOP")
    insts = [I("RESUME", arg=0), head, I("LOAD_CONST", argval=()), I("GET_ITER")]
    insts += [create_jump("FOR_ITER", head), I("RETURN_VALUE")]
    with pytest.raises(ValueError, match="cannot jump backward"):
        assemble(insts, _template.__code__)


def test_computed_fields_cannot_be_overridden():
    with pytest.raises(TypeError, match="co_stacksize"):
        assemble([I("RETURN_VALUE")], _template.__code__, co_stacksize=3)


def test_new_leading_argument_via_overrides():
    """A resume-style function: same body, a new first argument, cells shared with args."""

    def original(x, y):
        def get():
            return x + y

        return get() * 2

    code = original.__code__
    insts = decode(code)
    k = next(i for i, inst in enumerate(insts) if inst.opname == "RESUME") + 1
    # new prologue after RESUME: y = y + extra
    insts[k:k] = [
        I("LOAD_DEREF", argval="y"),
        I("LOAD_FAST", argval="extra"),
        I("BINARY_OP", arg=0),
        I("STORE_DEREF", argval="y"),
    ]
    new = assemble(
        insts,
        code,
        co_argcount=3,
        co_varnames=("extra",) + code.co_varnames,
    )
    assert new.co_varnames[:3] == ("extra", "x", "y") and new.co_nlocals == len(new.co_varnames)
    assert new.co_cellvars == ("x", "y")
    fn = types.FunctionType(new, {})
    assert fn(100, 1, 2) == (1 + 2 + 100) * 2
    # MAKE_CELL now names slots 1 and 2 (the args shifted by one)
    assert [i.arg for i in dis.get_instructions(new) if i.opname == "MAKE_CELL"] == [1, 2]


def _try_except_template(x):
    try:
        y = 10
    except ZeroDivisionError:
        return "caught"
    return y


def test_exception_table_with_inserted_instructions():
    code = _try_except_template.__code__
    insts = decode(code)
    covered = [i for i in insts if i.exn_tab_entry is not None and i.opname == "LOAD_CONST"][0]
    entry = covered.exn_tab_entry
    assert entry.depth == 0 and not entry.lasti
    # insert `1 / x` (result dropped) at the start of the try body, protected by the same entry
    k = insts.index(covered)
    new_insts = [
        I("LOAD_CONST", argval=1),
        I("LOAD_FAST", argval="x"),
        I("BINARY_OP", arg=11),
        I("POP_TOP"),
    ]
    for inst in new_insts:
        inst.exn_tab_entry = entry
    insts[k:k] = new_insts
    # and unprotected padding before the try, to move every offset
    insts[1:1] = [I("NOP") for _ in range(5)]
    fn = types.FunctionType(assemble(insts, code), {})
    assert fn(0) == "caught"
    assert fn(2) == 10
    # one merged entry for the protected run (inserted + original instructions)
    again = decode(fn.__code__)
    protected = [i for i in again if i.exn_tab_entry is not None and i.exn_tab_entry.depth == 0]
    assert [i.opname for i in protected[:4]] == ["LOAD_CONST", "LOAD_FAST", "BINARY_OP", "POP_TOP"]
    assert len({id(i.exn_tab_entry) for i in protected}) == 1


def test_exception_entry_built_by_hand():
    """try: return 1 / x  except: return -1, with a hand-made table entry."""
    handler = I("PUSH_EXC_INFO")
    cleanup = I("COPY", arg=3)
    body = [I("LOAD_CONST", argval=1), I("LOAD_FAST", argval="x"), I("BINARY_OP", arg=11)]
    body.append(I("RETURN_VALUE"))
    handler_body = [handler, I("POP_TOP"), I("POP_EXCEPT"), I("LOAD_CONST", argval=-1)]
    handler_body.append(I("RETURN_VALUE"))
    cleanup_body = [cleanup, I("POP_EXCEPT"), I("RERAISE", arg=1)]
    entry = ExceptionTableEntry(body[0], body[-1], handler, depth=0, lasti=False)
    cleanup_entry = ExceptionTableEntry(handler, handler_body[2], cleanup, depth=1, lasti=True)
    for inst in body:
        inst.exn_tab_entry = entry
    for inst in handler_body[:3]:
        inst.exn_tab_entry = cleanup_entry
    insts = [I("RESUME", arg=0), *body, *handler_body, *cleanup_body]
    fn = _function(insts, **_args("x"))
    assert fn(4) == 0.25 and fn(0) == -1
    depths = stack_depths(insts)
    assert depths[handler] == 1 and depths[cleanup] == 3
    assert fn.__code__.co_stacksize == 4  # COPY 3 in the cleanup block


def test_line_table_of_generated_code():
    def template():
        pass

    first = template.__code__.co_firstlineno
    call = create_load_global("ValueError", push_null=True)
    call.positions = dis.Positions(first + 5, first + 6, 8, 2)
    raise_ = I("RAISE_VARARGS", arg=1)
    raise_.starts_line = first + 7  # no positions: starts_line gives the line
    ret = I("LOAD_CONST", argval=None)
    ret.positions = dis.Positions(first + 3, first + 3, 4, 9)
    insts = [
        I("RESUME", arg=0),
        I("LOAD_FAST", argval="flag"),
        create_jump("POP_JUMP_IF_TRUE", call),
        ret,
        I("RETURN_VALUE"),
        call,
        *create_call(0),
        raise_,
    ]
    code = assemble(insts, template.__code__, co_argcount=1, co_varnames=("flag",))
    positions = {i.offset: i.positions for i in dis.get_instructions(code)}
    assert positions[ret.offset] == ret.positions
    assert positions[call.offset] == call.positions
    assert positions[raise_.offset] == dis.Positions(first + 7, first + 7, None, None)
    assert positions[insts[0].offset] == dis.Positions(None, None, None, None)
    assert positions[insts[-2].offset] == dis.Positions(None, None, None, None)  # CALL
    lines = {start: line for start, _, line in code.co_lines()}
    assert lines[raise_.offset] == first + 7 and lines[0] is None
    fn = types.FunctionType(code, globals())
    assert fn(False) is None
    with pytest.raises(ValueError) as info:
        fn(True)
    assert info.tb.tb_next.tb_lineno == first + 7
    assert decode(code)[-1].starts_line == first + 7


def test_line_table_long_and_negative_deltas():
    """Lines far away, going backwards, huge columns: all forms of the 3.11 table."""
    specs = [(500, 500, 3, 200), (2, 2, 90, 95), (2, 4, None, None), (3, 3, 1, 2), (3, 3, 100, 101)]
    insts = [I("RESUME", arg=0)]
    for line, end_line, col, end_col in specs:
        inst = I("NOP")
        inst.positions = dis.Positions(line, end_line, col, end_col)
        insts.append(inst)
    insts += [I("LOAD_CONST", argval=None), I("RETURN_VALUE")]
    code = assemble(insts, _template.__code__)
    got = [p for p, i in zip(code.co_positions(), dis.get_instructions(code)) if i.opname == "NOP"]
    assert got == [dis.Positions(*s) for s in specs]


def test_stack_depth_of_hand_built_sequence():
    end = I("RETURN_VALUE")
    insts = [
        I("RESUME", arg=0),
        I("PUSH_NULL"),
        create_load_global("divmod", push_null=False),
        I("LOAD_CONST", argval=7),
        I("LOAD_FAST", argval="n"),
        *create_call(2),  # PRECALL 2: -2, CALL 2: -1 -> 4 in, 1 out
        I("UNPACK_SEQUENCE", arg=2),
        I("BINARY_OP", arg=10),  # quotient - remainder
        I("COPY", arg=1),
        create_jump("POP_JUMP_IF_TRUE", end),
        I("LOAD_CONST", argval=-1),
        I("BINARY_OP", arg=0),
        end,
    ]
    depths = stack_depths(insts)
    expected = [0, 0, 1, 2, 3, 4, 2, 1, 2, 1, 2, 1, 2, 1]
    assert [depths[i] for i in insts] == expected
    assert compute_stacksize(insts) == 4
    fn = _function(insts, **_args("n"))
    assert fn(2) == 1 - 3 and fn(6) == (1 - 1) + -1
    assert fn.__code__.co_stacksize == 4
    assert stack_effect(insts[5]) == -2 and stack_effect(insts[6]) == -1  # PRECALL, CALL
    assert stack_effect(insts[2]) == 1 and stack_effect(create_load_global("f", True)) == 2


def test_stack_depths_reject_inconsistent_flow():
    join = I("RETURN_VALUE")
    insts = [
        I("LOAD_CONST", argval=1),
        I("LOAD_CONST", argval=True),
        create_jump("POP_JUMP_IF_TRUE", join),
        I("LOAD_CONST", argval=2),  # falls into join with one more item
        join,
    ]
    with pytest.raises(ValueError, match="inconsistent stack depth"):
        stack_depths(insts)


def test_stack_depths_skip_unreachable_code():
    dead = I("LOAD_CONST", argval=2)
    insts = [I("LOAD_CONST", argval=1), I("RETURN_VALUE"), dead, I("RETURN_VALUE")]
    assert dead not in stack_depths(insts)


def _copy_template(src, dst):
    for k, v in src.items():
        dst[k] = v


def _branchy_template(value, out):
    if value:
        out.append("yes")
    else:
        out.append("no")


def test_instructions_from_template():
    body = instructions_from_template(_copy_template, {"src": "a", "dst": "b"})
    assert body[0].opname != "RESUME" and body[-1].opname == "NOP"  # FOR_ITER exit pad
    assert {i.argval for i in body if i.opname in ("LOAD_FAST", "STORE_FAST")} == {"a", "b", "k", "v"}
    assert all(i.positions is None and i.starts_line is None for i in body)
    branchy = instructions_from_template(_branchy_template, {"value": "a", "out": "log"})
    assert "RETURN_VALUE" not in [i.opname for i in branchy]
    insts = [
        I("RESUME", arg=0),
        I("BUILD_LIST", arg=0),
        I("STORE_FAST", argval="log"),
        I("BUILD_MAP", arg=0),
        I("STORE_FAST", argval="b"),
        *body,
        *branchy,
        I("LOAD_FAST", argval="b"),
        I("LOAD_FAST", argval="log"),
        I("BUILD_TUPLE", arg=2),
        I("RETURN_VALUE"),
    ]
    fn = _function(insts, **_args("a"))
    assert fn({"x": 1}) == ({"x": 1}, ["yes"])
    assert fn({}) == ({}, ["no"])
    assert fn.__code__.co_varnames[:3] == ("a", "log", "b")


def test_python_version():
    assert sys.version_info[:2] == (3, 11)


def test_duplicate_instruction_objects_are_rejected():
    nop = I("NOP")
    with pytest.raises(ValueError, match="twice"):
        assemble([nop, nop, I("LOAD_CONST", argval=None), I("RETURN_VALUE")], _template.__code__)

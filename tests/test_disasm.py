"""Golden tests for :func:`graphjit.bytecode.format_code`."""

from __future__ import annotations

import dis
import re

from graphjit.bytecode import assemble, create_instruction, create_jump, decode, format_code

SOURCE = '''
def sample(items, scale=2):
    total = 0
    for x in items:
        if x is None:
            continue
        total += x * scale
    try:
        result = helper(total, key=lambda v: v)
    except ValueError as e:
        result = None
    return f"{result!r}"
'''

GOLDEN = """\
ORIGINAL BYTECODE sample
  2           0 RESUME                   0

  3           2 LOAD_CONST               1 (0)
              4 STORE_FAST               2 (total)

  4           6 LOAD_FAST                0 (items)
              8 GET_ITER
        >>   10 FOR_ITER                13 (to 38)
             12 STORE_FAST               3 (x)

  5          14 LOAD_FAST                3 (x)
             16 POP_JUMP_FORWARD_IF_NOT_NONE     1 (to 20)

  6          18 JUMP_BACKWARD            5 (to 10)

  7     >>   20 LOAD_FAST                2 (total)
             22 LOAD_FAST                3 (x)
             24 LOAD_FAST                1 (scale)
             26 BINARY_OP                5 (*)
             30 BINARY_OP               13 (+=)
             34 STORE_FAST               2 (total)
             36 JUMP_BACKWARD           14 (to 10)

  8     >>   38 NOP

  9          40 LOAD_GLOBAL              1 (NULL + helper)
             52 LOAD_FAST                2 (total)
             54 LOAD_CONST               2 (<code object <lambda>>)
             56 MAKE_FUNCTION            0
             58 KW_NAMES                 3 (('key',))
             60 PRECALL                  2
             64 CALL                     2
             74 STORE_FAST               4 (result)
             76 JUMP_FORWARD            25 (to 128)
        >>   78 PUSH_EXC_INFO

 10          80 LOAD_GLOBAL              2 (ValueError)
             92 CHECK_EXC_MATCH
             94 POP_JUMP_FORWARD_IF_FALSE    12 (to 120)
             96 STORE_FAST               5 (e)

 11          98 LOAD_CONST               0 (None)
            100 STORE_FAST               4 (result)
            102 POP_EXCEPT
            104 LOAD_CONST               0 (None)
            106 STORE_FAST               5 (e)
            108 DELETE_FAST              5 (e)
            110 JUMP_FORWARD             8 (to 128)
        >>  112 LOAD_CONST               0 (None)
            114 STORE_FAST               5 (e)
            116 DELETE_FAST              5 (e)
            118 RERAISE                  1

 10     >>  120 RERAISE                  0
        >>  122 COPY                     3
            124 POP_EXCEPT
            126 RERAISE                  1

 12     >>  128 LOAD_FAST                4 (result)
            130 FORMAT_VALUE             2 (repr)
            132 RETURN_VALUE
ExceptionTable:
  40 to 74 -> 78 [0]
  78 to 96 -> 122 [1] lasti
  98 to 100 -> 112 [1] lasti
  112 to 120 -> 122 [1] lasti
"""


def _sample():
    namespace: dict = {}
    exec(compile(SOURCE, "<golden>", "exec"), namespace)
    return namespace["sample"]


def test_golden_listing_of_a_small_function():
    assert format_code(_sample().__code__, title="ORIGINAL BYTECODE sample") == GOLDEN


def test_listing_of_decoded_instructions_matches_code():
    code = _sample().__code__
    assert format_code(decode(code)) == format_code(code)


def test_matches_dis_apart_from_deterministic_reprs():
    """Line for line what dis.dis prints (no nested disassembly, no addresses)."""
    import io

    code = _sample().__code__
    out = io.StringIO()
    dis.disassemble(code, file=out)
    ours = format_code(code).splitlines()
    theirs = out.getvalue().splitlines()
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        if "code object" in b or "KW_NAMES" in b:
            assert a.split("(")[0].rstrip() == b.split("(")[0].rstrip()
        else:
            assert a == b


def test_generated_instructions_are_listed_without_addresses():
    class Thing:
        pass

    end = create_instruction("RETURN_VALUE")
    insts = [
        create_instruction("LOAD_CONST", argval=Thing()),
        create_instruction("LOAD_FAST", argval="x"),
        create_jump("POP_JUMP_IF_TRUE", end),
        create_instruction("POP_TOP"),
        create_instruction("LOAD_CONST", argval=None),
        end,
    ]
    text = format_code(insts)
    assert "0x" not in text
    assert text == (
        "          0 LOAD_CONST                 (<test_disasm.test_generated_instructions_are_listed"
        "_without_addresses.<locals>.Thing object>)\n"
        "          2 LOAD_FAST                  (x)\n"
        "          4 POP_JUMP_FORWARD_IF_TRUE     2 (to 10)\n"
        "          6 POP_TOP\n"
        "          8 LOAD_CONST                 (None)\n"
        "    >>   10 RETURN_VALUE\n"
    )
    assert all(i.offset is None for i in insts)  # listing does not modify instructions
    code = assemble(insts, _sample.__code__)
    assert re.search(r"LOAD_CONST +\d+ \(<test_disasm\.", format_code(code))


def test_long_offsets_and_lines_widen_columns():
    insts = [create_instruction("NOP") for _ in range(6000)]
    insts[0].starts_line = 12345
    insts.append(create_instruction("RETURN_VALUE"))
    text = format_code(insts)
    assert text.splitlines()[0] == "12345            0 NOP"
    assert text.splitlines()[-1] == "             12000 RETURN_VALUE"

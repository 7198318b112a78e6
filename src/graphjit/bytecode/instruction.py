"""The symbolic instruction model for CPython 3.11 bytecode.

Design (read before changing):

* An :class:`Instruction` is one logical instruction: no ``CACHE`` entries and no
  ``EXTENDED_ARG`` prefixes; the assembler writes both.
* Jumps point at their target *instruction* (``inst.target``), never at an offset.
  The assembler picks the forward or backward form of a relative jump from the final
  layout, so code generators may create any jump with either spelling.
* ``argval`` is the truth for every instruction that names something: constants
  (``LOAD_CONST``, ``KW_NAMES``), names (``LOAD_GLOBAL``, ``LOAD_ATTR``, ...), fast locals
  and cells/free variables.  The assembler recomputes ``arg`` for these from the tables of
  the code object it builds.  ``LOAD_GLOBAL`` keeps its push-NULL bit in ``arg & 1``.
* Every other opcode (``BINARY_OP``, ``COMPARE_OP``, ``CALL``, ``BUILD_TUPLE``, ...) keeps
  its numeric ``arg``.
* Exception handling is data on the instruction: ``exn_tab_entry`` names the first and
  last covered instruction, the handler instruction, the stack depth and ``lasti``.
* ``positions`` (a :class:`dis.Positions`) is the source location; ``starts_line`` is the
  line this instruction starts, if any (informational, the line table is written from
  ``positions``; only when ``positions`` has no line does a set ``starts_line`` give the
  instruction that whole line, so generated code can take a line without columns).
* ``offset`` is the byte offset of the opcode itself, after any ``EXTENDED_ARG`` prefix (what
  ``dis`` reports).  ``decode`` sets it, ``assemble`` rewrites it (together with the final
  ``arg`` and jump direction) on the instructions it assembles; new instructions have None.
"""

from __future__ import annotations

import dataclasses
import dis
import opcode as _opcode
from typing import Any

__all__ = [
    "Instruction",
    "ExceptionTableEntry",
    "create_instruction",
    "create_jump",
    "create_load_global",
    "create_call",
    "JUMP_OPNAMES",
    "FORWARD_TO_BACKWARD",
    "BACKWARD_TO_FORWARD",
    "NAME_OPNAMES",
    "CONST_OPNAMES",
    "LOCAL_OPNAMES",
    "FREE_OPNAMES",
]


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()

JUMP_OPNAMES = frozenset(_opcode.opname[o] for o in _opcode.hasjrel)
NAME_OPNAMES = frozenset(_opcode.opname[o] for o in _opcode.hasname)
CONST_OPNAMES = frozenset(_opcode.opname[o] for o in _opcode.hasconst)
LOCAL_OPNAMES = frozenset(_opcode.opname[o] for o in _opcode.haslocal)
FREE_OPNAMES = frozenset(_opcode.opname[o] for o in _opcode.hasfree)

FORWARD_TO_BACKWARD = {
    "JUMP_FORWARD": "JUMP_BACKWARD",
    "POP_JUMP_FORWARD_IF_FALSE": "POP_JUMP_BACKWARD_IF_FALSE",
    "POP_JUMP_FORWARD_IF_TRUE": "POP_JUMP_BACKWARD_IF_TRUE",
    "POP_JUMP_FORWARD_IF_NONE": "POP_JUMP_BACKWARD_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE": "POP_JUMP_BACKWARD_IF_NOT_NONE",
}
BACKWARD_TO_FORWARD = {v: k for k, v in FORWARD_TO_BACKWARD.items()}

# Direction-free spellings accepted by create_jump().
_GENERIC_JUMPS = {
    "JUMP": "JUMP_FORWARD",
    "POP_JUMP_IF_FALSE": "POP_JUMP_FORWARD_IF_FALSE",
    "POP_JUMP_IF_TRUE": "POP_JUMP_FORWARD_IF_TRUE",
    "POP_JUMP_IF_NONE": "POP_JUMP_FORWARD_IF_NONE",
    "POP_JUMP_IF_NOT_NONE": "POP_JUMP_FORWARD_IF_NOT_NONE",
}


@dataclasses.dataclass(eq=False)
class ExceptionTableEntry:
    """One handler region: instructions ``start``..``end`` (inclusive) jump to ``target``."""

    start: "Instruction"
    end: "Instruction"
    target: "Instruction"
    depth: int
    lasti: bool

    def __repr__(self) -> str:
        return (
            f"ExceptionTableEntry({self.start.short()} .. {self.end.short()} -> "
            f"{self.target.short()}, depth={self.depth}, lasti={self.lasti})"
        )


@dataclasses.dataclass(eq=False)
class Instruction:
    """A logical 3.11 instruction; see the module docstring for the contract."""

    opcode: int
    opname: str
    arg: int | None = None
    argval: Any = None
    offset: int | None = None
    starts_line: int | None = None
    positions: dis.Positions | None = None
    target: "Instruction | None" = None
    exn_tab_entry: ExceptionTableEntry | None = None

    def short(self) -> str:
        where = f"@{self.offset}" if self.offset is not None else f"#{id(self) & 0xFFFF:x}"
        return f"{self.opname}{where}"

    def __repr__(self) -> str:
        parts = [self.opname]
        if self.target is not None:
            parts.append(f"-> {self.target.short()}")
        elif self.arg is not None or self.argval is not None:
            parts.append(f"{self.arg} ({self.argval!r})")
        if self.offset is not None:
            parts.append(f"@{self.offset}")
        return f"Instruction({' '.join(parts)})"

    def copy(self) -> "Instruction":
        """A shallow copy: same target and exception entry objects."""
        return dataclasses.replace(self)


def create_instruction(
    opname: str,
    *,
    arg: int | None = None,
    argval: Any = UNSET,
    target: Instruction | None = None,
) -> Instruction:
    """Build an instruction.  Give ``argval`` for name/const/local/free opcodes, ``arg``
    for numeric ones, ``target`` for jumps (or use :func:`create_jump`)."""
    if opname in _GENERIC_JUMPS:
        opname = _GENERIC_JUMPS[opname]
    if opname not in _opcode.opmap:
        raise ValueError(f"unknown opcode {opname!r}")
    if opname in JUMP_OPNAMES and target is None:
        raise ValueError(f"{opname} needs a target")
    if argval is UNSET:
        argval = arg
    return Instruction(_opcode.opmap[opname], opname, arg, argval, target=target)


def create_jump(opname: str, target: Instruction) -> Instruction:
    """A relative jump; ``opname`` may be direction-free (``"JUMP"``, ``"POP_JUMP_IF_TRUE"``)."""
    return create_instruction(opname, target=target)


def create_load_global(name: str, push_null: bool) -> Instruction:
    """``LOAD_GLOBAL name``; with ``push_null`` it also pushes the NULL a call needs."""
    return create_instruction("LOAD_GLOBAL", arg=int(push_null), argval=name)


def create_call(nargs: int, kw_names: tuple[str, ...] = ()) -> list[Instruction]:
    """``[KW_NAMES] PRECALL n CALL n``: one logical 3.11 call."""
    out = []
    if kw_names:
        out.append(create_instruction("KW_NAMES", argval=tuple(kw_names)))
    out.append(create_instruction("PRECALL", arg=nargs))
    out.append(create_instruction("CALL", arg=nargs))
    return out

"""Deterministic ``dis``-style listings of code objects and instruction lists.

Design notes
------------
* Columns follow ``dis.Instruction._disassemble`` in 3.11: line number (when a line
  starts), ``>>`` for jump and handler targets, offset, opname, arg, ``(argrepr)``; a blank
  line before each new source line.  No CACHE or EXTENDED_ARG lines (offsets still count
  them).  An ``ExceptionTable:`` section follows when there are handlers, one line per
  entry as ``first to last -> handler [depth] lasti`` using the *displayed* offsets of the
  first and last covered instruction and of the handler (``dis`` prints the last code unit
  instead, which may be a cache word).
* Instruction lists are laid out the way :func:`assemble` would lay them out (jump args and
  EXTENDED_ARG prefixes to a fixed point), so offsets are consistent even for freshly
  generated instructions; name/const args that are not resolved yet show as blank.
* Deterministic text: code objects print as ``<code object NAME>``; every other repr has
  ``" at 0x..."`` removed, so listings can be golden-tested and diffed across runs.
"""

from __future__ import annotations

import opcode as _opcode
import re
from collections.abc import Sequence
from types import CodeType
from typing import Any

from .assemble import Layout, instruction_units, layout
from .decode import decode
from .exception_table import group_handler_runs
from .instruction import Instruction

__all__ = ["format_code", "safe_repr"]

_OPNAME_WIDTH = 20
_OPARG_WIDTH = 5
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_JREL = frozenset(_opcode.hasjrel)
_CONST = frozenset(_opcode.hasconst)
_NAMED = frozenset(_opcode.hasname) | frozenset(_opcode.haslocal) | frozenset(_opcode.hasfree)
_ARGVAL_OPS = _CONST | _NAMED
_FORMAT_CONVERTERS = ("", "str", "repr", "ascii")
_MAKE_FUNCTION_FLAGS = ("defaults", "kwdefaults", "annotations", "closure")


def safe_repr(value: Any) -> str:
    """``repr`` without memory addresses; code objects as ``<code object NAME>``."""
    if isinstance(value, CodeType):
        return f"<code object {value.co_name}>"
    return _ADDRESS.sub("", repr(value))


def _argrepr(inst: Instruction, arg: int | None, target_offset: int | None) -> str:
    """The parenthesised detail ``dis`` prints after the arg."""
    op = inst.opcode
    if op in _JREL:
        return f"to {'?' if target_offset is None else target_offset}"
    if op in _CONST:
        return safe_repr(inst.argval)
    if op in _NAMED:
        if inst.opname == "LOAD_GLOBAL" and arg is not None and arg & 1:
            return f"NULL + {inst.argval}"
        return str(inst.argval)
    if arg is None:
        return ""
    if op in _opcode.hascompare:
        return _opcode.cmp_op[arg]
    if inst.opname == "FORMAT_VALUE":
        text = _FORMAT_CONVERTERS[arg & 3]
        return f"{text}, with format" if arg & 4 and text else "with format" if arg & 4 else text
    if inst.opname == "MAKE_FUNCTION":
        return ", ".join(s for i, s in enumerate(_MAKE_FUNCTION_FLAGS) if arg & (1 << i))
    if inst.opname == "BINARY_OP":
        return _opcode._nb_ops[arg][1]
    return ""


def _provisional_args(insts: Sequence[Instruction]) -> list[int]:
    """Args for laying out an instruction list without resolving tables (unknown -> 0)."""
    args = []
    for inst in insts:
        arg = inst.arg if inst.opcode >= _opcode.HAVE_ARGUMENT and inst.arg is not None else 0
        args.append(0 if inst.opcode in _JREL else arg)
    return args


def _safe_layout(insts: Sequence[Instruction]) -> Layout:
    """:func:`layout`, or (for lists :func:`assemble` would reject, e.g. a jump whose target
    is missing) a layout that keeps every instruction's current opcode and arg."""
    try:
        return layout(insts, _provisional_args(insts))
    except ValueError:
        args = [inst.arg or 0 if inst.opcode >= _opcode.HAVE_ARGUMENT else 0 for inst in insts]
        opcodes = [inst.opcode for inst in insts]
        sizes = [instruction_units(op, a) for op, a in zip(opcodes, args, strict=True)]
        starts = [sum(sizes[:k]) for k in range(len(sizes))]
        return Layout(opcodes, args, starts, sizes)


def _shown_arg(inst: Instruction, laid_out_arg: int) -> int | None:
    """The arg column: the laid-out arg for jumps, ``inst.arg`` otherwise."""
    if inst.opcode < _opcode.HAVE_ARGUMENT:
        return None
    if inst.opcode in _JREL:
        return laid_out_arg
    return inst.arg


def _line(inst, arg, offset, widths, is_target, target_offset) -> str:
    lineno_width, offset_width = widths
    fields = []
    if lineno_width:
        line = inst.starts_line
        fields.append(" " * lineno_width if line is None else str(line).rjust(lineno_width))
    fields.append("   ")
    fields.append(">>" if is_target else "  ")
    fields.append(str(offset).rjust(offset_width))
    fields.append(inst.opname.ljust(_OPNAME_WIDTH))
    argrepr = _argrepr(inst, arg, target_offset)
    if arg is not None or (argrepr and inst.opcode in _ARGVAL_OPS):
        fields.append(("" if arg is None else str(arg)).rjust(_OPARG_WIDTH))
        if argrepr:
            fields.append(f"({argrepr})")
    return " ".join(fields).rstrip()


def _listing(insts: Sequence[Instruction]) -> list[str]:
    """The body lines (instructions, then the exception table)."""
    lay = _safe_layout(insts)
    offset_of = {id(i): off for i, off in zip(insts, lay.offsets, strict=True)}
    targets = {id(i.target) for i in insts if i.target is not None}
    targets |= {id(i.exn_tab_entry.target) for i in insts if i.exn_tab_entry is not None}
    lines = [i.starts_line for i in insts if i.starts_line is not None]
    lineno_width = (len(str(max(lines))) if max(lines) >= 1000 else 3) if lines else 0
    last = lay.starts[-1] + lay.sizes[-1] - 1 if insts else 0
    widths = (lineno_width, len(str(2 * last)) if 2 * last >= 10000 else 4)
    out = []
    for k, inst in enumerate(insts):
        if lineno_width and inst.starts_line is not None and k > 0:
            out.append("")
        target_offset = offset_of.get(id(inst.target)) if inst.target is not None else None
        arg = _shown_arg(inst, lay.args[k])
        out.append(_line(inst, arg, lay.offsets[k], widths, id(inst) in targets, target_offset))
    out.extend(_exception_lines(insts, lay, offset_of))
    return out


def _exception_lines(insts, lay, offset_of) -> list[str]:
    by_start = {s: off for s, off in zip(lay.starts, lay.offsets, strict=True)}
    unit_owner_offset = {}
    for s, n, off in zip(lay.starts, lay.sizes, lay.offsets, strict=True):
        unit_owner_offset[s + n - 1] = off
    target_start = {id(i): s for i, s in zip(insts, lay.starts, strict=True)}
    try:
        entries = group_handler_runs(insts, lay.starts, lay.sizes, target_start)
    except ValueError:
        return ["ExceptionTable: <handler outside the listing>"]
    if not entries:
        return []
    out = ["ExceptionTable:"]
    for e in entries:
        lasti = " lasti" if e.lasti else ""
        first, last, target = by_start[e.start], unit_owner_offset[e.end - 1], by_start[e.target]
        out.append(f"  {first} to {last} -> {target} [{e.depth}]{lasti}")
    return out


def format_code(code_or_insts: CodeType | Sequence[Instruction], *, title: str | None = None) -> str:
    """Disassembly text of a code object or an instruction list (see the module notes).

    With ``title``, the text starts with a line holding it.  Does not modify instructions.
    """
    if isinstance(code_or_insts, CodeType):
        insts: Sequence[Instruction] = decode(code_or_insts)
    else:
        insts = list(code_or_insts)
    body = _listing(insts)
    if title is not None:
        body.insert(0, title)
    return "\n".join(body) + "\n"

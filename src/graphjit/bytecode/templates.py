"""Harvest instruction sequences from template functions written in Python.

Design notes
------------
A code generator writes the code it wants as an ordinary function, e.g.::

    def _copy_items(src, dst):
        for k, v in src.items():
            dst[k] = v

and :func:`instructions_from_template` turns its body into instructions ready to splice
into another code object:

* the prologue (``MAKE_CELL``, ``COPY_FREE_VARS``, ``RESUME``) is dropped;
* the implicit ``LOAD_CONST None; RETURN_VALUE`` at the end is dropped.  3.11 duplicates
  small exit blocks, so a body with branches can contain more such pairs; every one of
  them is replaced by a jump to the end, so control always falls out of the sequence.
  When anything needs to land "at the end", a ``NOP`` is appended as the landing pad;
* ``LOAD_FAST``/``STORE_FAST``/``DELETE_FAST`` names are renamed through ``varname_map``;
* ``positions``, ``starts_line`` and ``offset`` are cleared (template line numbers mean
  nothing in the target code), and the ``arg`` of every instruction whose ``argval`` is
  the truth is cleared (``LOAD_GLOBAL`` keeps its NULL bit), so :func:`assemble` resolves
  them against the target's tables.  Exception table entries are kept.
"""

from __future__ import annotations

import opcode as _opcode
from collections.abc import Callable, Mapping
from typing import Any

from .decode import decode
from .instruction import Instruction, create_instruction

__all__ = ["instructions_from_template"]

_PROLOGUE = frozenset({"MAKE_CELL", "COPY_FREE_VARS", "RESUME"})
_LOCAL = frozenset(_opcode.haslocal)
_ARGVAL_OPS = _LOCAL | frozenset(_opcode.hasfree) | frozenset(_opcode.hasconst) | frozenset(
    _opcode.hasname
)


def _is_return_none(insts: list[Instruction], k: int) -> bool:
    return (
        k + 1 < len(insts)
        and insts[k].opname == "LOAD_CONST"
        and insts[k].argval is None
        and insts[k + 1].opname == "RETURN_VALUE"
    )


def _retarget(insts: list[Instruction], mapping: dict[int, Instruction]) -> None:
    """Point jumps and exception entries at replacement instructions (by ``id`` of the old)."""
    seen = set()
    for inst in insts:
        if inst.target is not None and id(inst.target) in mapping:
            inst.target = mapping[id(inst.target)]
        entry = inst.exn_tab_entry
        if entry is not None and id(entry) not in seen:
            seen.add(id(entry))
            entry.start = mapping.get(id(entry.start), entry.start)
            entry.end = mapping.get(id(entry.end), entry.end)
            entry.target = mapping.get(id(entry.target), entry.target)


def _replace_returns(insts: list[Instruction]) -> list[Instruction]:
    """Drop the trailing ``return None``; turn the others into jumps to the end."""
    end = create_instruction("NOP")
    out: list[Instruction] = []
    mapping: dict[int, Instruction] = {}
    k = 0
    while k < len(insts):
        if not _is_return_none(insts, k):
            out.append(insts[k])
            k += 1
            continue
        load, ret = insts[k], insts[k + 1]
        if k + 2 == len(insts):
            mapping[id(load)] = mapping[id(ret)] = end
        else:
            jump = create_instruction("JUMP_FORWARD", target=end)
            jump.exn_tab_entry = load.exn_tab_entry
            out.append(jump)
            mapping[id(load)] = jump
            mapping[id(ret)] = end
        k += 2
    _retarget(out, mapping)
    if any(inst.target is end for inst in out) or any(
        inst.exn_tab_entry is not None and inst.exn_tab_entry.target is end for inst in out
    ):
        out.append(end)
    return out


def _clean(inst: Instruction, varname_map: Mapping[str, str]) -> None:
    """Clear location and table-dependent fields; rename fast locals."""
    inst.positions = None
    inst.starts_line = None
    inst.offset = None
    if inst.opcode in _LOCAL and inst.argval in varname_map:
        inst.argval = varname_map[inst.argval]
    if inst.opname == "LOAD_GLOBAL":
        inst.arg = inst.arg & 1
    elif inst.opcode in _ARGVAL_OPS:
        inst.arg = None


def instructions_from_template(
    fn: Callable[..., Any], varname_map: Mapping[str, str] | None = None
) -> list[Instruction]:
    """The body of ``fn`` as fresh instructions (see the module notes for what changes)."""
    insts = decode(fn.__code__)
    k = 0
    while k < len(insts) and insts[k].opname in _PROLOGUE:
        k += 1
    insts = insts[k:]
    if any(i.target is not None and i.target.opname in _PROLOGUE for i in insts):
        raise ValueError(f"template {fn.__qualname__} jumps into its prologue")
    insts = _replace_returns(insts)
    for inst in insts:
        _clean(inst, varname_map or {})
    return insts

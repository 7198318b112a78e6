"""Decode a 3.11 code object into :class:`~graphjit.bytecode.instruction.Instruction` objects.

Design notes
------------
* One :class:`Instruction` per logical instruction: ``CACHE`` entries and ``EXTENDED_ARG``
  prefixes are dropped, the prefix's bits are folded into ``arg``.
* ``offset`` is the byte offset of the opcode *itself*, after any EXTENDED_ARG prefix: the
  same offset ``dis`` reports for the instruction.  Jump targets and exception handler
  targets are stored by identity (``target`` / ``exn_tab_entry.target``); a jump or
  handler that lands on an EXTENDED_ARG prefix targets the instruction it prefixes.
* ``argval`` follows ``dis`` (names, constants, local/cell names, ``cmp_op`` strings,
  ``FORMAT_VALUE`` tuples) with two deliberate differences: ``KW_NAMES`` gets its tuple of
  names (dis leaves it unknown) and jumps get the target's ``offset`` in the sense above.
  ``LOAD_GLOBAL`` keeps the full ``arg`` so ``arg & 1`` is the push-NULL bit.
* ``positions`` is the location of the opcode's own code unit (the compiler gives prefix and
  caches the same one); ``starts_line`` is set when a line starts at the instruction or at
  its prefix (``dis.findlinestarts``).
* Exception table entries become shared :class:`ExceptionTableEntry` objects, one per raw
  table entry, set on every covered instruction; ``start``/``end``/``target`` are the first
  covered, last covered and handler instructions.
"""

from __future__ import annotations

import dis
import opcode as _opcode
from types import CodeType

from .exception_table import parse_exception_table
from .instruction import ExceptionTableEntry, Instruction

__all__ = ["decode"]

_EXTENDED_ARG = _opcode.EXTENDED_ARG
_HAVE_ARGUMENT = _opcode.HAVE_ARGUMENT
_CACHES = _opcode._inline_cache_entries
_JREL = frozenset(_opcode.hasjrel)
_CONST = frozenset(_opcode.hasconst)
_NAME = frozenset(_opcode.hasname)
_LOCALISH = frozenset(_opcode.haslocal) | frozenset(_opcode.hasfree)
_COMPARE = frozenset(_opcode.hascompare)
_LOAD_GLOBAL = _opcode.opmap["LOAD_GLOBAL"]
_FORMAT_VALUE = _opcode.opmap["FORMAT_VALUE"]
_FORMAT_CONVERTERS = (None, "str", "repr", "ascii")


def _argval(code: CodeType, op: int, arg: int | None) -> object:
    """The resolved argument of a non-jump instruction, as ``dis`` gives it."""
    if arg is None:
        return None
    if op in _CONST:
        return code.co_consts[arg]
    if op in _NAME:
        return code.co_names[arg >> 1 if op == _LOAD_GLOBAL else arg]
    if op in _LOCALISH:
        return code._varname_from_oparg(arg)
    if op in _COMPARE:
        return _opcode.cmp_op[arg]
    if op == _FORMAT_VALUE:
        return (_FORMAT_CONVERTERS[arg & 3], bool(arg & 4))
    return arg


def _scan(code: CodeType) -> tuple[list[Instruction], list[int], list[int]]:
    """Split ``co_code`` into instructions.

    Returns the instructions, the unit index where each starts (prefix included), and
    ``owner``: for every code unit, the index of the instruction it belongs to.
    """
    raw = code.co_code
    positions = list(code.co_positions())
    insts: list[Instruction] = []
    starts: list[int] = []
    owner: list[int] = []
    ext = 0
    prefix_start = None
    n_units = len(raw) // 2
    u = 0
    while u < n_units:
        op = raw[2 * u]
        if op == _EXTENDED_ARG:
            if prefix_start is None:
                prefix_start = u
            ext = (ext | raw[2 * u + 1]) << 8
            u += 1
            continue
        start = u if prefix_start is None else prefix_start
        arg = (ext | raw[2 * u + 1]) if op >= _HAVE_ARGUMENT else None
        end = u + 1 + _CACHES[op]
        owner.extend([len(insts)] * (end - start))
        inst = Instruction(op, _opcode.opname[op], arg, None, offset=2 * u)
        inst.positions = dis.Positions(*positions[u])
        insts.append(inst)
        starts.append(start)
        ext = 0
        prefix_start = None
        u = end
    return insts, starts, owner


def decode(code: CodeType) -> list[Instruction]:
    """Every logical instruction of ``code`` in order; see the module notes for the fields."""
    insts, starts, owner = _scan(code)
    by_start = {s: inst for s, inst in zip(starts, insts, strict=True)}
    linestarts = dict(dis.findlinestarts(code))
    for inst, start in zip(insts, starts, strict=True):
        line = linestarts.get(2 * start)
        inst.starts_line = line if line is not None else linestarts.get(inst.offset)
        if inst.opcode in _JREL:
            base = inst.offset // 2 + 1
            delta = -inst.arg if "BACKWARD" in inst.opname else inst.arg
            inst.target = by_start[base + delta]
            inst.argval = inst.target.offset
        else:
            inst.argval = _argval(code, inst.opcode, inst.arg)
    for raw in parse_exception_table(code):
        first, last = owner[raw.start], owner[raw.end - 1]
        entry = ExceptionTableEntry(
            insts[first], insts[last], by_start[raw.target], raw.depth, raw.lasti
        )
        for k in range(first, last + 1):
            insts[k].exn_tab_entry = entry
    return insts

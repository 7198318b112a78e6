"""The 3.11 exception table (``co_exceptiontable``): parse, encode, and derive from instructions.

Design notes
------------
* Format (CPython ``Objects/exception_handling_notes.txt``): a sequence of entries, each four
  varints ``start, length, target, depth_lasti``.  ``start``, ``length`` and ``target`` count
  *code units* (2 bytes); ``depth_lasti = depth << 1 | lasti``.  A varint is big-endian in
  6-bit chunks, bit 6 (``0x40``) means "more chunks follow", and bit 7 (``0x80``) marks the
  first byte of an entry.  (The line table's varints are little-endian; do not mix them up.)
* Entries never overlap in 3.11: the compiler flattens nesting, so every instruction has at
  most one (innermost) handler.  That is why the instruction model stores one
  ``exn_tab_entry`` per instruction.
* :func:`group_handler_runs` mirrors ``assemble_exception_table`` in ``Python/compile.c``:
  walking the instructions in layout order, a new entry starts whenever the handler
  changes; contiguous instructions with the same handler share one entry.  CPython keys on
  the handler *block*; here the key is ``(target instruction, depth, lasti)``, which is the
  same thing because depth and lasti are properties of the handler block.
* Offsets here are *unit* offsets of the start of an instruction, EXTENDED_ARG prefix
  included, because that is what CPython stores (a handler region starts at the prefix).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from types import CodeType

from .instruction import Instruction

__all__ = [
    "RawExceptionEntry",
    "parse_exception_table",
    "encode_exception_table",
    "group_handler_runs",
]


@dataclasses.dataclass(frozen=True)
class RawExceptionEntry:
    """One table entry in code units: covers units ``start <= u < end``, handler at ``target``."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Read one big-endian 6-bit-chunk varint at ``pos``; return ``(value, new_pos)``."""
    b = data[pos]
    pos += 1
    value = b & 63
    while b & 64:
        b = data[pos]
        pos += 1
        value = (value << 6) | (b & 63)
    return value, pos


def parse_exception_table(table: bytes | CodeType) -> list[RawExceptionEntry]:
    """Parse ``co_exceptiontable`` (bytes or a code object) into unit-based entries."""
    data = table.co_exceptiontable if isinstance(table, CodeType) else table
    entries = []
    pos = 0
    while pos < len(data):
        start, pos = _read_varint(data, pos)
        length, pos = _read_varint(data, pos)
        target, pos = _read_varint(data, pos)
        depth_lasti, pos = _read_varint(data, pos)
        entries.append(
            RawExceptionEntry(start, start + length, target, depth_lasti >> 1, bool(depth_lasti & 1))
        )
    return entries


def _write_varint(out: bytearray, value: int, first: bool) -> None:
    """Append ``value`` as a big-endian 6-bit-chunk varint (``first`` sets the 0x80 marker)."""
    if not 0 <= value < 1 << 30:
        raise ValueError(f"exception table value out of range: {value}")
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63)
        value >>= 6
    chunks.reverse()
    marker = 128 if first else 0
    for i, chunk in enumerate(chunks):
        more = 64 if i + 1 < len(chunks) else 0
        out.append(chunk | more | marker)
        marker = 0


def encode_exception_table(entries: Iterable[RawExceptionEntry]) -> bytes:
    """Encode unit-based entries into the 3.11 ``co_exceptiontable`` format."""
    out = bytearray()
    for e in entries:
        if e.end <= e.start:
            raise ValueError(f"empty exception table entry {e}")
        _write_varint(out, e.start, True)
        _write_varint(out, e.end - e.start, False)
        _write_varint(out, e.target, False)
        _write_varint(out, (e.depth << 1) | int(e.lasti), False)
    return bytes(out)


def group_handler_runs(
    insts: Sequence[Instruction],
    starts: Sequence[int],
    sizes: Sequence[int],
    target_start: dict[int, int],
) -> list[RawExceptionEntry]:
    """Derive table entries from per-instruction ``exn_tab_entry`` like CPython's assembler.

    ``starts[k]``/``sizes[k]`` are the unit offset (prefix included) and unit size of
    ``insts[k]``; ``target_start`` maps ``id(handler instruction)`` to its start unit.  Only
    ``entry.target``, ``entry.depth`` and ``entry.lasti`` are read; ``entry.start``/``end``
    are informational.
    """
    entries: list[RawExceptionEntry] = []
    key = None
    run_start = 0
    for inst, start, size in zip(insts, starts, sizes, strict=True):
        e = inst.exn_tab_entry
        new_key = None if e is None else (id(e.target), e.depth, bool(e.lasti))
        if new_key != key:
            if key is not None:
                entries.append(_make_entry(run_start, start, key, target_start))
            key, run_start = new_key, start
    if key is not None:
        end = starts[-1] + sizes[-1]
        entries.append(_make_entry(run_start, end, key, target_start))
    return entries


def _make_entry(start: int, end: int, key: tuple, target_start: dict[int, int]) -> RawExceptionEntry:
    target_id, depth, lasti = key
    try:
        target = target_start[target_id]
    except KeyError:
        raise ValueError("exception handler target is not in the instruction list") from None
    return RawExceptionEntry(start, end, target, depth, lasti)

"""The 3.11 location table (``co_linetable``) writer.

Design notes
------------
* Format (CPython ``Objects/locations.md``): a sequence of entries, each covering 1..8 code
  units.  First byte ``0x80 | code << 3 | (units - 1)``; ``code`` selects the form:

  ====== ================================================================================
  0-9    short form: same line as before; one byte ``(col & 7) << 4 | (end_col - col)``,
         column group ``code`` = ``col >> 3`` (so ``col < 80``, width < 16)
  10-12  one-line form: line delta ``code - 10`` (0..2); bytes ``col``, ``end_col`` (< 128)
  13     no column: signed varint line delta
  14     long form: signed varint line delta, varints ``end_line - line``, ``col + 1``,
         ``end_col + 1`` (0 means "no column")
  15     no location
  ====== ================================================================================

  Varints here are *little-endian* 6-bit chunks with bit 6 as "more follows"; a signed
  varint stores ``(-v) << 1 | 1`` for negatives and ``v << 1`` otherwise.
* :func:`encode_linetable` mirrors ``write_location_info_entry`` of 3.11's ``compile.c``
  choice for choice, so a decode/assemble round trip reproduces ``co_linetable`` byte for
  byte (verified over the stdlib and torch; see ``tests/test_bytecode_roundtrip.py``).  One
  entry is written per instruction, split into chunks of at most 8 units; EXTENDED_ARG
  prefixes and inline caches share their instruction's location.  The running line starts
  at ``co_firstlineno`` and only entries that carry a line update it.
* Generated code: :func:`effective_positions` gives an instruction with ``positions=None``
  (or all-None positions) but ``starts_line`` set a whole-line location, so generated code
  can take a line without inventing columns.
"""

from __future__ import annotations

import dis
from collections.abc import Iterable

from .instruction import Instruction

__all__ = ["effective_positions", "encode_linetable"]

_NO_POSITIONS = dis.Positions(None, None, None, None)


def effective_positions(inst: Instruction) -> dis.Positions:
    """The location the line table records for ``inst``.

    ``inst.positions`` when it names a line; otherwise ``starts_line`` as a whole-line
    location (no columns) when set; otherwise "no location".
    """
    pos = inst.positions
    if pos is not None and pos.lineno is not None:
        return pos
    if inst.starts_line is not None:
        return dis.Positions(inst.starts_line, inst.starts_line, None, None)
    return _NO_POSITIONS


def _varint(out: bytearray, value: int) -> None:
    """Little-endian 6-bit-chunk unsigned varint."""
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)


def _svarint(out: bytearray, value: int) -> None:
    """Signed varint: sign in the low bit."""
    _varint(out, ((-value) << 1) | 1 if value < 0 else value << 1)


class _Writer:
    """Stateful writer: tracks the previous line like ``struct assembler.a_lineno``."""

    def __init__(self, firstlineno: int) -> None:
        self.out = bytearray()
        self.lineno = firstlineno

    def write(self, pos: dis.Positions, units: int) -> None:
        """Write the location of one instruction of ``units`` code units."""
        while units > 8:
            self._entry(pos, 8)
            units -= 8
        self._entry(pos, units)

    def _first(self, code: int, units: int) -> None:
        self.out.append(0x80 | (code << 3) | (units - 1))

    def _entry(self, pos: dis.Positions, units: int) -> None:
        """One entry of 1..8 units; the form choice follows CPython 3.11 exactly."""
        line = -1 if pos.lineno is None else pos.lineno
        if line < 0:
            self._first(15, units)
            return
        end_line = -1 if pos.end_lineno is None else pos.end_lineno
        col = -1 if pos.col_offset is None else pos.col_offset
        end_col = -1 if pos.end_col_offset is None else pos.end_col_offset
        line_delta = line - self.lineno
        if col < 0 or end_col < 0:
            if end_line == line or end_line == -1:
                self._first(13, units)
                _svarint(self.out, line_delta)
                self.lineno = line
                return
        elif end_line == line:
            if line_delta == 0 and col < 80 and 0 <= end_col - col < 16:
                self._first(col >> 3, units)
                self.out.append(((col & 7) << 4) | (end_col - col))
                return
            if 0 <= line_delta < 3 and col < 128 and end_col < 128:
                self._first(10 + line_delta, units)
                self.out.append(col)
                self.out.append(end_col)
                self.lineno = line
                return
        self._first(14, units)
        _svarint(self.out, line_delta)
        _varint(self.out, max(end_line, line) - line)
        _varint(self.out, col + 1)
        _varint(self.out, end_col + 1)
        self.lineno = line


def encode_linetable(items: Iterable[tuple[dis.Positions, int]], firstlineno: int) -> bytes:
    """Encode ``(positions, units)`` per instruction, in layout order, as ``co_linetable``."""
    writer = _Writer(firstlineno)
    for pos, units in items:
        writer.write(pos, units)
    return bytes(writer.out)

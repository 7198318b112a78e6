"""Stack effects and stack-depth flow analysis for 3.11 instruction lists.

Design notes
------------
* :func:`stack_effect` is ``dis.stack_effect`` with the argument it needs: ``None`` for
  opcodes below ``HAVE_ARGUMENT``, the numeric ``arg`` otherwise (``0`` when not yet
  resolved; only ``LOAD_GLOBAL``'s NULL bit and numeric opcodes change the effect, and those
  keep ``arg`` current).  ``PRECALL n`` is ``-n`` and ``CALL n`` is ``-1``, as 3.11 defines
  them, so a ``PRECALL``/``CALL`` pair together pops ``n + 2`` and pushes 1.
* :func:`stack_depths` mirrors ``stackdepth()`` in 3.11's ``Python/compile.c``: a worklist
  over reachable code, following fallthrough, jump targets (with the jump-taken effect) and
  exception handlers.  The compiler pushes a handler from its ``SETUP_*`` pseudo-instruction
  with depth ``d + 1`` (``+ 1`` more with ``lasti``) where ``d`` is the depth recorded in
  the table, so a handler starts at ``entry.depth + lasti + 1``.  Unconditional jumps,
  ``RETURN_VALUE``, ``RAISE_VARARGS`` and ``RERAISE`` end a flow.
* ``RETURN_GENERATOR``: ``dis.stack_effect`` says 0, but when the generator resumes, the
  sent value is on the stack (the following ``POP_TOP`` removes it).  CPython models this by
  starting generator code at depth 1; the analysis here counts ``RETURN_GENERATOR`` as +1
  instead, which gives the same maximum and correct per-instruction depths without needing
  ``co_flags``.
* :func:`compute_stacksize` is the maximum of every depth reached (after each instruction,
  at each jump target and at each handler entry), exactly the quantity CPython stores in
  ``co_stacksize``.  To match CPython it also walks *dead* exception handlers (see
  :meth:`_Analysis.run_dead_handlers`); :func:`stack_depths` reports reachable code only.
"""

from __future__ import annotations

import dis
import opcode as _opcode
from collections.abc import Sequence

from .instruction import Instruction

__all__ = ["stack_effect", "stack_depths", "compute_stacksize", "TERMINATOR_OPNAMES"]

TERMINATOR_OPNAMES = frozenset(
    {
        "JUMP_FORWARD",
        "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT",
        "RETURN_VALUE",
        "RAISE_VARARGS",
        "RERAISE",
    }
)
_TERMINATORS = frozenset(_opcode.opmap[n] for n in TERMINATOR_OPNAMES)
_JUMPS = frozenset(_opcode.hasjrel)
_RETURN_GENERATOR = _opcode.opmap["RETURN_GENERATOR"]


def stack_effect(inst: Instruction, jump: bool | None = None) -> int:
    """``dis.stack_effect`` of ``inst``; ``jump`` as there (None: the maximum of both)."""
    if inst.opcode < _opcode.HAVE_ARGUMENT:
        return dis.stack_effect(inst.opcode, None, jump=jump)
    arg = inst.arg if inst.arg is not None else 0
    return dis.stack_effect(inst.opcode, arg, jump=jump)


def _flow_effect(inst: Instruction) -> int:
    """Fallthrough effect used by the flow analysis (RETURN_GENERATOR counts the sent value)."""
    if inst.opcode == _RETURN_GENERATOR:
        return 1
    return stack_effect(inst, jump=False)


class _Analysis:
    """One run of the worklist algorithm; see the module notes."""

    def __init__(self, insts: Sequence[Instruction], lenient: bool = False) -> None:
        self.insts = insts
        self.lenient = lenient
        self.index = {id(inst): k for k, inst in enumerate(insts)}
        self.depths: list[int | None] = [None] * len(insts)
        self.max_depth = 0
        self.work: list[int] = []

    def _index_of(self, inst: Instruction, what: str) -> int:
        try:
            return self.index[id(inst)]
        except KeyError:
            raise ValueError(f"{what} {inst!r} is not in the instruction list") from None

    def _reach(self, k: int, depth: int, source: Instruction) -> None:
        """Record that instruction ``k`` is entered with ``depth``."""
        if depth < 0:
            if self.lenient:
                return
            raise ValueError(f"negative stack depth {depth} entering {self.insts[k]!r} from {source!r}")
        self.max_depth = max(self.max_depth, depth)
        old = self.depths[k]
        if old is None:
            self.depths[k] = depth
            self.work.append(k)
        elif old != depth and not self.lenient:
            raise ValueError(
                f"inconsistent stack depth at {self.insts[k]!r}: {old} vs {depth} (from {source!r})"
            )

    def run(self) -> None:
        if self.insts:
            self._reach(0, 0, self.insts[0])
        while self.work:
            self._run_block(self.work.pop())

    def run_dead_handlers(self) -> None:
        """Also walk dead code the way CPython's ``stackdepth()`` saw it when it was live.

        CPython computes ``co_stacksize`` while ``SETUP_*`` pseudo-instructions still exist,
        so it also visits handlers whose protected region was optimised away later (``try:
        pass``, ``try: continue``, ``except* E as e: pass``).  Such handlers stay in
        ``co_code`` as dead code and count towards ``co_stacksize``.  Their entry depth is
        recovered, per unvisited region, by (1) walking it with relative depths until it
        joins code of known depth (exact), else (2) taking the depth of the exception entry
        covering its first instruction: every handler opens with ``SETUP_CLEANUP;
        PUSH_EXC_INFO``, so that entry's depth is the handler's entry depth.  Lenient:
        conflicts and underflow in dead code only stop the walk.
        """
        self.lenient = True
        for k, inst in enumerate(self.insts):
            if self.depths[k] is not None:
                continue
            depth = self._join_depth(k)
            if depth is None and inst.exn_tab_entry is not None:
                depth = inst.exn_tab_entry.depth
            if depth is not None:
                self._reach(k, depth, inst)
                while self.work:
                    self._run_block(self.work.pop())

    def _join_depth(self, start: int) -> int | None:
        """Entry depth of unvisited ``start`` implied by the first join with visited code."""
        insts, n = self.insts, len(self.insts)
        rel = {start: 0}
        todo = [start]
        while todo:
            k = todo.pop()
            inst = insts[k]
            succ = []
            if inst.opcode in _JUMPS and id(inst.target) in self.index:
                succ.append((self.index[id(inst.target)], stack_effect(inst, jump=True)))
            if inst.opcode not in _TERMINATORS and k + 1 < n:
                succ.append((k + 1, _flow_effect(inst)))
            for j, effect in succ:
                if self.depths[j] is not None:
                    return self.depths[j] - rel[k] - effect
                if j not in rel:
                    rel[j] = rel[k] + effect
                    todo.append(j)
        return None

    def _run_block(self, k: int) -> None:
        """Follow straight-line flow from ``k`` until a terminator or known instruction."""
        insts = self.insts
        depth = self.depths[k]
        while True:
            inst = insts[k]
            entry = inst.exn_tab_entry
            if entry is not None:
                handler = self._index_of(entry.target, "exception handler")
                self._reach(handler, entry.depth + int(bool(entry.lasti)) + 1, inst)
            new_depth = depth + _flow_effect(inst)
            if new_depth < 0:
                if self.lenient:
                    return
                raise ValueError(f"stack underflow at {inst!r} (depth {depth})")
            self.max_depth = max(self.max_depth, new_depth)
            if inst.opcode in _JUMPS:
                if inst.target is None:
                    raise ValueError(f"jump {inst!r} has no target")
                target = self._index_of(inst.target, "jump target")
                self._reach(target, depth + stack_effect(inst, jump=True), inst)
            if inst.opcode in _TERMINATORS:
                return
            k += 1
            if k == len(insts):
                return
            depth = new_depth
            if self.depths[k] is not None:
                self._reach(k, depth, inst)
                return
            self.depths[k] = depth


def stack_depths(insts: Sequence[Instruction]) -> dict[Instruction, int]:
    """Stack depth before each reachable instruction (keys are the instruction objects).

    Raises ``ValueError`` on underflow, on a block reached with two different depths, or
    on a jump/handler target outside ``insts``.
    """
    analysis = _Analysis(insts)
    analysis.run()
    return {inst: d for inst, d in zip(insts, analysis.depths, strict=True) if d is not None}


def compute_stacksize(insts: Sequence[Instruction]) -> int:
    """The ``co_stacksize`` CPython would compute for ``insts``."""
    analysis = _Analysis(insts)
    analysis.run()
    analysis.run_dead_handlers()
    return analysis.max_depth

"""Call interception: rewrite 3.11 bytecode so that every call's callable first passes
through a *resolver* (a plain Python function ``resolve(f) -> callable``).

graphjit has no frame hook.  Code it runs eagerly on the user's behalf (a frame it cannot
trace, the eager tail after a break) runs a copy made here, so the functions and modules
that code calls can still be compiled: the resolver returns a compiled stand-in for them
and the callable itself for anything else (C functions, builtins, torch ops).  The
callable is replaced *before* the call, so the call itself still happens in the user's
frame: ``super()``, ``locals()``, ``sys._getframe()`` and ``warnings.warn`` see the frame
they would see eagerly.

The rewrite, per call site (``[NULL, f, a1..an]`` on the stack before the call)::

    SWAP n+1                      # f on top (n > 0)
    PUSH_NULL; SWAP 2             # [.., NULL, f]
    LOAD_CONST resolve; SWAP 2    # [.., NULL, resolve, f]
    PRECALL 1; CALL 1             # [.., resolve(f)]
    SWAP n+1                      # back under its arguments
    [KW_NAMES k] PRECALL n; CALL n

``CALL_FUNCTION_EX`` is handled the same way (``f`` is 2 or 3 deep).  ``LOAD_METHOD m``
(which may leave an unbound function *below* ``self``) becomes ``LOAD_ATTR m; PUSH_NULL;
SWAP 2`` so that every call has a NULL below its callable.  The inserted code goes before
``KW_NAMES`` (a call in between would consume the pending keyword names).  The first
inserted instruction *is* the original ``KW_NAMES``/``PRECALL`` object, mutated, so jumps
and exception-table entries that point at it still land at the start of the sequence.

Code constants of comprehensions and generator expressions (called directly, with an
iterator) are rewritten recursively; other nested functions are not: calling them goes
through the resolver, which compiles them.
"""

from __future__ import annotations

import types
from typing import Callable

from .assemble import assemble
from .decode import decode
from .instruction import Instruction, create_instruction

__all__ = ["intercept_instructions", "intercepted_code", "INLINE_CODE_NAMES"]

#: Code objects called directly by the code that makes them: rewritten recursively.
INLINE_CODE_NAMES = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})

_cache: dict[tuple[types.CodeType, Callable], types.CodeType] = {}


def _copy_meta(new: Instruction, like: Instruction) -> Instruction:
    new.positions, new.starts_line, new.exn_tab_entry = like.positions, None, like.exn_tab_entry
    return new


def _morph(inst: Instruction, new: Instruction) -> None:
    """Turn ``inst`` into ``new`` in place (keeps its identity, position and handler)."""
    inst.opcode, inst.opname, inst.arg, inst.argval, inst.target = (
        new.opcode, new.opname, new.arg, new.argval, new.target)


def _resolve_sequence(resolver: Callable, depth: int) -> list[Instruction]:
    """Replace the callable ``depth`` slots below the top (0: the top) by ``resolver(f)``."""
    swap = [create_instruction("SWAP", arg=depth + 1)] if depth else []
    return [*swap,
            create_instruction("PUSH_NULL"), create_instruction("SWAP", arg=2),
            create_instruction("LOAD_CONST", argval=resolver), create_instruction("SWAP", arg=2),
            create_instruction("PRECALL", arg=1), create_instruction("CALL", arg=1),
            *[create_instruction("SWAP", arg=depth + 1) for _ in swap]]


def _insert_before(out: list[Instruction], head: Instruction, seq: list[Instruction]) -> None:
    """Append ``seq`` then a copy of ``head`` to ``out``; ``head`` itself becomes ``seq[0]``
    (so what pointed at ``head`` now points at the start of ``seq``)."""
    tail = _copy_meta(head.copy(), head)
    tail.starts_line = None
    for new in seq:
        _copy_meta(new, head)
    _morph(head, seq[0])
    entry = head.exn_tab_entry
    if entry is not None and entry.end is head:
        entry.end = tail
    out.append(head)
    out.extend(seq[1:])
    out.append(tail)


def intercept_instructions(insts: list[Instruction], resolver: Callable) -> list[Instruction]:
    """The rewritten instruction list (``insts``' objects are reused and mutated)."""
    out: list[Instruction] = []
    names = [inst.opname for inst in insts]  # before any is mutated
    n = len(insts)
    for i, inst in enumerate(insts):
        op = names[i]
        if op == "LOAD_METHOD":
            push, swap = create_instruction("PUSH_NULL"), create_instruction("SWAP", arg=2)
            _morph(inst, create_instruction("LOAD_ATTR", argval=inst.argval))
            _copy_meta(push, inst)
            _copy_meta(swap, inst)
            entry = inst.exn_tab_entry
            if entry is not None and entry.end is inst:
                entry.end = swap
            out.extend((inst, push, swap))
        elif op == "KW_NAMES" and i + 1 < n and names[i + 1] == "PRECALL":
            _insert_before(out, inst, _resolve_sequence(resolver, insts[i + 1].arg))
        elif op == "PRECALL" and not (i and names[i - 1] in ("KW_NAMES", "GET_ITER")):
            # (after GET_ITER: a comprehension called with its iterator, no NULL below)
            _insert_before(out, inst, _resolve_sequence(resolver, inst.arg))
        elif op == "CALL_FUNCTION_EX":
            _insert_before(out, inst, _resolve_sequence(resolver, 1 + (inst.arg & 1)))
        elif op == "LOAD_CONST" and isinstance(inst.argval, types.CodeType) \
                and inst.argval.co_name in INLINE_CODE_NAMES:
            inst.argval = intercepted_code(inst.argval, resolver)
            out.append(inst)
        else:
            out.append(inst)
    return out


def intercepted_code(code: types.CodeType, resolver: Callable) -> types.CodeType:
    """``code`` with its calls intercepted (cached per code object and resolver)."""
    key = (code, resolver)
    cached = _cache.get(key)
    if cached is None:
        insts = intercept_instructions(decode(code), resolver)
        cached = _cache[key] = assemble(insts, code)
    return cached

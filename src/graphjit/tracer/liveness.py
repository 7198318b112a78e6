"""Live-variable analysis of fast locals, for choosing what a resume function receives.

``live_locals(instructions, index)`` is the set of fast locals that may be read, before
being written, on some path starting at ``instructions[index]`` (successors: the next
instruction, jump targets, exception handlers).  Computed once per instruction list.
"""

from __future__ import annotations

_TERMINATORS = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD",
                          "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"})
_cache: dict[int, tuple[object, list[frozenset[str]]]] = {}


def successors(insts, i: int, index_of: dict[int, int]) -> list[int]:
    """The indices control may reach from ``insts[i]`` (fall through, jump, handler)."""
    inst = insts[i]
    out = []
    if inst.opname not in _TERMINATORS and i + 1 < len(insts):
        out.append(i + 1)
    if inst.target is not None:
        out.append(index_of[id(inst.target)])
    if inst.exn_tab_entry is not None:
        out.append(index_of[id(inst.exn_tab_entry.target)])
    return out


def live_in_sets(insts) -> list[frozenset[str]]:
    """``live[i]``: locals live on entry to instruction ``i`` (fixed point, backwards)."""
    cached = _cache.get(id(insts))
    if cached is not None and cached[0] is insts:
        return cached[1]
    index_of = {id(inst): i for i, inst in enumerate(insts)}
    succs = [successors(insts, i, index_of) for i in range(len(insts))]
    live: list[set[str]] = [set() for _ in insts]
    changed = True
    while changed:
        changed = False
        for i in range(len(insts) - 1, -1, -1):
            inst = insts[i]
            out: set[str] = set()
            for s in succs[i]:
                out |= live[s]
            if inst.opname == "STORE_FAST":
                out.discard(inst.argval)
            elif inst.opname in ("LOAD_FAST", "DELETE_FAST"):  # deleting reads whether it is bound
                out.add(inst.argval)
            if out != live[i]:
                live[i] = out
                changed = True
    result = [frozenset(s) for s in live]
    _cache[id(insts)] = (insts, result)
    return result


def live_locals(insts, index: int) -> frozenset[str]:
    return live_in_sets(insts)[index]


def bound_in_sets(insts, initial: frozenset[str]) -> list[frozenset[str] | None]:
    """``bound[i]``: fast locals bound on *every* path from the first instruction to
    ``insts[i]`` (``initial``: the arguments), ``None`` where ``i`` is unreachable.  A
    handler is reached from the middle of an instruction: its store may not have run."""
    index_of = {id(inst): i for i, inst in enumerate(insts)}
    bound: list[frozenset[str] | None] = [None] * len(insts)
    if not insts:
        return bound
    bound[0] = initial
    work = [0]
    while work:
        i = work.pop()
        inst, before = insts[i], bound[i]
        after = before
        if inst.opname == "STORE_FAST":
            after = before | {inst.argval}
        elif inst.opname == "DELETE_FAST":
            after = before - {inst.argval}
        flows = [(s, after) for s in successors(insts, i, index_of)]
        if inst.exn_tab_entry is not None:  # (its handler is the last successor)
            flows[-1] = (flows[-1][0], before & after)
        for s, state in flows:
            new = state if bound[s] is None else bound[s] & state
            if new != bound[s]:
                bound[s] = new
                work.append(s)
    return bound

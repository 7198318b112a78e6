"""A frame whose first graph break comes before anything to compile: Python up to the end
of the region that broke, then a resume function.

A break that cannot resume right after its instruction (inside a loop, a ``try`` block, a
``with`` block of a context manager other than grad mode, an instruction no resume
function can follow) is a *step* break: the graph ends at the last empty-stack point
before it and the rest of the frame runs in Python, its calls intercepted
(``graph/breaks.py``).  When that graph would be empty, nothing before the break is worth a
graph, so the frame is not traced up to the break at all: it runs in Python from its
start, its calls intercepted, but only up to the *exit* of the region that broke, where
the copy tail-calls a resume function (``graph/resume.py``) with the live locals::

    <the frame's instructions, calls intercepted>   # the loop runs here, in Python
    exit:  PUSH_NULL; LOAD_CONST __resume_at_<offset>_<n>
           LOAD_FAST <live locals>; LOAD_CLOSURE <cells>
           PRECALL k; CALL k; RETURN_VALUE          # (jumps to ``exit`` land here too)

The exit is the first instruction after the one that broke with an empty stack, outside
every loop and every exception-table entry (past the loop, the ``try`` or ``with``
statement), where every local that may be read later is bound on every path.  The
resume function is traced like any other, so what follows the region is compiled: a
``forward`` whose layer loop breaks at once still gets a graph for what comes after it.
The code depends on nothing the trace saw, so its entry has no guards.

TorchDynamo skips such a frame (``graph break in loop``, ``empty checkpoint``; its frame
hook then compiles the callees, which graphjit's call interception does).  The frame runs
in Python, as there, where there is no exit (the region runs to the end of the frame) or
nothing after the exit could be compiled (no call or operator is reachable from it).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Callable

from ..bytecode import assemble
from ..bytecode.instruction import Instruction, create_call, create_instruction
from ..bytecode.intercept import intercept_instructions
from ..bytecode.stack import stack_depths
from ..tracer.liveness import bound_in_sets, live_locals, successors
from .resume import cell_names, copy_instructions, resume_code, super_first_arg

#: instructions that may put something in a graph; an exit none of them follows is not taken
_OPS = frozenset({"CALL", "CALL_FUNCTION_EX", "BINARY_OP", "BINARY_SUBSCR", "STORE_SUBSCR",
                  "COMPARE_OP", "UNARY_NEGATIVE", "UNARY_INVERT", "UNARY_POSITIVE"})


@dataclasses.dataclass(frozen=True)
class RegionExit:
    """Where the Python run of a frame hands over to a resume function: the instruction's
    index and the resume function's parameters (the live locals; for code using
    zero-argument ``super()``, its first argument first)."""

    index: int
    params: tuple[str, ...]
    lineno: int | None


def _arguments(code: types.CodeType) -> frozenset[str]:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return frozenset(code.co_varnames[:n])


def _reaches_an_op(insts: list[Instruction], start: int, index_of: dict[int, int]) -> bool:
    seen, work = set(), [start]
    while work:
        i = work.pop()
        if i in seen or i >= len(insts):
            continue
        seen.add(i)
        if insts[i].opname in _OPS:
            return True
        work += successors(insts, i, index_of)
    return False


#: a frame that can suspend (a generator, a coroutine): it cannot tail-call a resume function
_SUSPENDS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def region_exit(code: types.CodeType, insts: list[Instruction], failed_index: int,
                loops: frozenset[int]) -> RegionExit | str:
    """The exit after the region around ``insts[failed_index]`` (``loops``: the indices
    inside a loop), or why there is none."""
    if code.co_flags & _SUSPENDS:  # (a resume function would be another generator: its yields lost)
        return "a generator's or coroutine's frame does not hand over to a resume function"
    try:
        depths = stack_depths(insts)
    except ValueError:
        return "its stack depths are not known"
    bound = bound_in_sets(insts, _arguments(code))
    first = super_first_arg(code)
    for j in range(failed_index + 1, len(insts)):
        inst = insts[j]
        if depths.get(inst) != 0 or j in loops or inst.exn_tab_entry is not None or bound[j] is None:
            continue
        live = live_locals(insts, j)
        if not live <= bound[j] or (first is not None and first not in bound[j]):
            continue
        index_of = {id(x): i for i, x in enumerate(insts)}
        if not _reaches_an_op(insts, j, index_of):
            return "nothing after it to compile"
        names = tuple(n for n in code.co_varnames if n in live and n != first)
        lineno = inst.positions.lineno if inst.positions is not None else None
        return RegionExit(j, ((first,) if first is not None else ()) + names, lineno)
    return "no point after it to resume at (the region runs to the end of the frame)"


def eager_code_with_exit(code: types.CodeType, insts: list[Instruction], exit: RegionExit,
                         resolve: Callable, make_resume: Callable[[types.CodeType], Callable]) -> types.CodeType:
    """``code`` with its calls intercepted by ``resolve`` and a tail call of the resume
    function ``make_resume`` gives for the code after ``exit`` in place of that instruction."""
    body = copy_instructions(insts)
    head = body[exit.index]
    body = intercept_instructions(body, resolve)  # (the tail call below is not intercepted)
    resume = make_resume(resume_code(code, insts, exit.index, 0, (), exit.params))
    cells = cell_names(code)
    tail = [create_instruction("LOAD_CONST", argval=resume),
            *[create_instruction("LOAD_FAST", argval=name) for name in exit.params],
            *[create_instruction("LOAD_CLOSURE", argval=name) for name in cells],
            *create_call(len(exit.params) + len(cells)), create_instruction("RETURN_VALUE")]
    for inst in tail:
        inst.positions = head.positions
    # ``head`` becomes the PUSH_NULL that starts the tail: what jumped to it lands there
    push = create_instruction("PUSH_NULL")
    head.opcode, head.opname, head.arg, head.argval, head.target = push.opcode, push.opname, None, push.argval, None
    at = next(i for i, inst in enumerate(body) if inst is head)
    body[at + 1:at + 1] = tail
    return assemble(body, code)

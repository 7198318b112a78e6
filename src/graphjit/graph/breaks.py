"""Code generation at a graph break.

After the graph call, the generated code rebuilds what the original frame had at the
breaking instruction, runs that one instruction in plain Python, and tail-calls a resume
function with the stack and the live locals:

* call-like and generic instructions (``CALL``, ``STORE_ATTR``, ...)::

      PUSH_NULL; LOAD_CONST __resume_at_<off>_<n>     # the tail call's callable
      <passthrough stack, NULLs left out>             # stack below the instruction's inputs
      <live locals at the resume offset>
      <the instruction's inputs>; <the instruction>   # e.g. [KW_NAMES] PRECALL n; CALL n
      PRECALL k; CALL k; RETURN_VALUE                 # its outputs are the last arguments

* conditional jumps: the condition, the original jump, then one tail per branch, each
  calling its own resume function with the passthrough stack and that branch's locals.

* a *step* break (inside a loop or ``try``, or where no resume is possible): the live
  locals are stored back and execution jumps into a copy of the original instructions at
  the last empty-stack point, so the rest of the frame runs eagerly; the copy's calls are
  intercepted (``bytecode/intercept.py``), so what it calls is still compiled.
"""

from __future__ import annotations

import dis
import types
from typing import Callable

import torch

from ..bytecode.intercept import intercept_instructions
from ..bytecode.instruction import (
    ExceptionTableEntry,
    Instruction,
    create_call,
    create_instruction,
    create_jump,
)
from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import LocalSource
from ..tracer.liveness import live_locals
from ..tracer.translator import CONDITIONAL_JUMPS, GENERIC_BREAKS, VALUE_KEEPING_JUMPS, BreakPoint
from ..variables import (
    LazyVariableTracker,
    NestedUserFunctionVariable,
    NNModuleVariable,
    NullVariable,
    OpaqueCallableVariable,
    UserFunctionVariable,
    UserMethodVariable,
    WithExitVariable,
    is_new,
)
from ..variables.nn_module import is_leaf_module
from ..variables.mode_stack import pop_function_modes
from ..variables.torch_modes import resumable_exit
from .codegen import PyCodegen
from .resume import cell_names, copy_instructions, resume_code, stack_name, super_first_arg
from ..diagnostics.describe import describe

_NOP_OPS = ("RESUME", "MAKE_CELL", "COPY_FREE_VARS")
_NOP = dis.opmap["NOP"]


def defined_locals(tx, names) -> list[str]:
    """``names`` that have a value at this point, in ``co_varnames`` order."""
    have = (set(tx.symbolic_locals) | set(getattr(tx, "lazy_locals", {}))) - (
        tx.deleted_locals - set(tx.symbolic_locals))
    return [n for n in tx.code.co_varnames if n in names and n in have]


def reconstruct_local(tx, cg: PyCodegen, name: str) -> None:
    var = tx.symbolic_locals.get(name)
    if var is None:  # never touched by the trace: still the frame's own value
        cg.load_fast(name)
    else:
        cg.reconstruct(var)


def break_values(tx, bp: BreakPoint) -> list:
    """The trackers the code after the graph needs (graph outputs are taken from these)."""
    names: set[str] = set()
    for index in resume_targets(tx, bp):
        names |= live_locals(tx.instructions, index)
    return list(bp.stack) + [tx.symbolic_locals[n] for n in names if n in tx.symbolic_locals]


def resume_targets(tx, bp: BreakPoint) -> list[int]:
    if bp.kind == "step":
        return [bp.index]
    if bp.inst.opname in CONDITIONAL_JUMPS:
        return [bp.index + 1, tx.indexof[id(bp.inst.target)]]
    if bp.inst.opname == "RAISE_VARARGS":
        return []
    return [bp.index + 1]


def _pops_pushes(inst: Instruction) -> tuple[int, int]:
    if inst.opname == "CALL":
        return inst.arg + 2, 1
    if inst.opname == "CALL_FUNCTION_EX":
        return 3 + (inst.arg & 1), 1
    return tuple(inst.arg if n is None else n(inst.arg) if callable(n) else n
                 for n in GENERIC_BREAKS[inst.opname])


def _emit_instruction(cg: PyCodegen, inst: Instruction, kw_names) -> None:
    if inst.opname == "CALL":
        cg.extend(create_call(inst.arg, tuple(kw_names or ())))
    elif inst.opname == "LOAD_METHOD":  # the bound method, with a NULL below it
        cg.append(create_instruction("LOAD_ATTR", argval=inst.argval))
    else:
        cg.append(create_instruction(inst.opname, arg=inst.arg, argval=inst.argval))
    cg.instructions[-1].positions = inst.positions


class BreakCodegen:
    """Emits the code after the graph call for one break point."""

    def __init__(self, tx, cg: PyCodegen, make_resume: Callable, wrap_callable: Callable,
                 side_effects, resolve: Callable | None = None) -> None:
        self.tx, self.cg = tx, cg
        self.make_resume, self.wrap_callable = make_resume, wrap_callable
        self.resolve = resolve  # eager code's call interception (the step tail)
        self.side_effects = side_effects
        self.handlers: list[Instruction] = []  # exception handlers, emitted after the tail

    def __repr__(self) -> str:
        return f"BreakCodegen({self.tx.code.co_name})"

    def emit(self, bp: BreakPoint) -> None:
        self.cg.positions = bp.inst.positions  # tracebacks point at the breaking line
        if bp.kind == "step":
            self.emit_step(bp)
        elif bp.inst.opname in CONDITIONAL_JUMPS:
            self.emit_jump(bp)
        else:
            self.emit_instruction_break(bp)

    # -- pieces ---------------------------------------------------------------------------
    def _load_resume(self, marker: int, target_index: int, nstack: int,
                     null_idxes: tuple[int, ...], params: tuple[str, ...]) -> None:
        """Insert, at ``marker``, the code that pushes the resume function: a constant, or
        for frames with cells a factory called with this frame's cells as the closure."""
        code = resume_code(self.tx.code, self.tx.instructions, target_index, nstack, null_idxes, params)
        inst = create_instruction("LOAD_CONST", argval=self.make_resume(code))
        inst.positions = self.cg.positions
        self.cg.instructions.insert(marker, inst)

    def _push_cells(self) -> int:
        """The frame's cells, as the resume function's trailing arguments."""
        names = cell_names(self.tx.code)
        for name in names:
            self.cg.append(create_instruction("LOAD_CLOSURE", argval=name))
        return len(names)

    def _push_passthrough(self, items) -> tuple[list[str], tuple[int, ...]]:
        names, nulls = [], []
        for i, var in enumerate(items):
            if isinstance(var, NullVariable):
                nulls.append(i)
            else:
                self.cg.reconstruct(var)
                names.append(stack_name(i))
        return names, tuple(nulls)

    def _push_consumed(self, items, inst: Instruction) -> None:
        callable_pos = None
        if inst.opname == "CALL":
            callable_pos = 1 if isinstance(items[0], NullVariable) else 0
        elif inst.opname == "CALL_FUNCTION_EX":
            callable_pos = 1
        for i, var in enumerate(items):
            if i == callable_pos and self._push_wrapped_callable(var):
                continue
            self.cg.reconstruct(var)

    def _bake(self, var) -> None:
        """The generated code calls the wrapper of this very object: guard its identity."""
        if var.source is not None:
            self.tx.output.add_guard(var.source, GuardKind.ID_MATCH, var.as_python_constant())

    def _push_wrapped_callable(self, var) -> bool:
        """Call user functions through their own compiled wrapper (no frame hook in pure
        Python), so the callee's prefix before its own break is captured too."""
        if isinstance(var, LazyVariableTracker):
            var = var.realize()
        if isinstance(var, UserFunctionVariable) and not isinstance(var, NestedUserFunctionVariable) \
                and not var.trusted:
            if var.fn.__closure__ is not None and var.source is not None:
                # a closure a factory made (one per call of it: torchdiffeq's grid
                # constructor per solver) is guarded by its code, not its identity:
                # dispatched per code object like the frame's own nested functions
                self.cg.push_null()
                self.cg.load_const(self.wrap_callable(var.fn.__code__))
                self.cg.reconstruct(var)
                self.cg.call(1)
                return True
            self._bake(var)
            self.cg.load_const(self.wrap_callable(var.fn))
            return True
        if isinstance(var, NestedUserFunctionVariable) and not var.code.co_name.startswith("<"):
            # (comprehensions, which take an iterator, run as they are)
            # made by this frame: dispatched per code object, with its closure as argument
            self.cg.push_null()
            self.cg.load_const(self.wrap_callable(var.code))
            self.cg.reconstruct(var)
            self.cg.call(1)
            return True
        if isinstance(var, UserMethodVariable):
            fn_var = var.fn_var.realize()
            if type(fn_var) is UserFunctionVariable and not fn_var.trusted:
                self._bake(fn_var)
                var.reconstruct(self.cg, fn_override=self.wrap_callable(fn_var.fn))
                return True
            if isinstance(fn_var, OpaqueCallableVariable) and self.resolve is not None and \
                    isinstance(fn_var.value, types.FunctionType):
                # a method graphjit does not trace (``graphjit.skip``-ped): bound to the
                # function the resolver gives at run time (it runs with its calls compiled)
                self.cg.push_null()
                self.cg.load_const(types.MethodType)
                self.cg.push_null()
                self.cg.load_const(self.resolve)
                self.cg.reconstruct(fn_var)
                self.cg.call(1)
                self.cg.reconstruct(var.self_var)
                self.cg.call(2)
                return True
        if isinstance(var, OpaqueCallableVariable) and self.resolve is not None and \
                isinstance(var.value, (types.FunctionType, types.MethodType)):
            # a function graphjit does not trace (skipped, a library's): the resolver
            # decides at run time (a ``graphjit.skip``-ped one runs with its calls compiled)
            self.cg.push_null()
            self.cg.load_const(self.resolve)
            self.cg.reconstruct(var)
            self.cg.call(1)
            return True
        if isinstance(var, NNModuleVariable) and var.source is not None and not is_leaf_module(var.value):
            if var.specialized:  # the module object is guarded by identity: call it through graphjit
                self.cg.load_const(self.wrap_callable(var.value))
                return True
            # a generic module: the entry serves other instances, so the wrapper of the
            # one the frame holds is looked up when the code runs
            self.cg.push_null()
            self.cg.load_const(self.resolve if self.resolve is not None else self.wrap_callable)
            self.cg.reconstruct(var)
            self.cg.call(1)
            return True
        return False

    def _begin_resume_call(self, passthrough, target: int):
        """``PUSH_NULL``, a slot for the resume function (``marker``), the passthrough
        stack and the locals live at ``target``: the arguments the tail call starts with
        (for code using zero-argument ``super()``, its first argument comes first)."""
        self.cg.push_null()
        marker = len(self.cg.instructions)
        first = super_first_arg(self.tx.code)
        if first is not None:
            reconstruct_local(self.tx, self.cg, first)
        names, nulls = self._push_passthrough(passthrough)
        live = [n for n in defined_locals(self.tx, live_locals(self.tx.instructions, target)) if n != first]
        for name in live:
            reconstruct_local(self.tx, self.cg, name)
        if first is not None:
            names = [first, *names]
        return marker, names, nulls, live

    # -- kinds ----------------------------------------------------------------------------
    def emit_instruction_break(self, bp: BreakPoint) -> None:
        cg, inst = self.cg, bp.inst
        pops, pushes = _pops_pushes(inst)
        passthrough, consumed = bp.stack[:len(bp.stack) - pops], bp.stack[len(bp.stack) - pops:]
        if inst.opname == "RAISE_VARARGS":  # it raises: no resume function
            self._push_consumed(consumed, inst)
            self.side_effects.codegen(cg)
            _emit_instruction(cg, inst, None)
            return
        target = bp.index + 1
        marker, names, nulls, live = self._begin_resume_call(passthrough, target)
        self._push_consumed(consumed, inst)
        self.side_effects.codegen(cg)  # pending writes land before the instruction runs
        first = len(cg.instructions)
        _emit_instruction(cg, inst, getattr(bp, "kw_names", None))
        self._restore_grad_mode_on_error(passthrough, first, depth=2 + len(names) + len(live))
        pushed = [stack_name(len(passthrough) + j) for j in range(pushes)]
        if inst.opname == "LOAD_METHOD":  # [NULL, bound method]: the NULL is made by the resume
            nulls = (*nulls, len(passthrough))
            pushed = pushed[1:]
        params = tuple(names) + tuple(live) + tuple(pushed)
        self._load_resume(marker, target, len(passthrough) + pushes, nulls, params)
        cg.call(len(params) + self._push_cells())
        cg.return_value()
        for inst in self.handlers:
            cg.append(inst)

    def _restore_grad_mode_on_error(self, passthrough, first: int, depth: int) -> None:
        """The instruction run at a break inside ``with torch.no_grad()`` (or
        ``enable_grad()``, or ``with Mode():`` of a torch-function mode) is outside the
        block's own cleanup: if it raises, the handler emitted here puts back the grad
        mode the outermost such block was entered with and pops the modes the blocks
        pushed, as their ``__exit__`` would, and re-raises."""
        exits = [v for v in passthrough if isinstance(v, WithExitVariable)]
        modes = sum(1 for v in passthrough if resumable_exit(v))  # ``with Mode():`` blocks: pop
        if not exits and not modes:
            return
        cg = self.cg
        handler = []
        if modes:
            handler += [create_instruction("PUSH_NULL"), create_instruction("LOAD_CONST", argval=pop_function_modes),
                        create_instruction("LOAD_CONST", argval=modes), *create_call(1),
                        create_instruction("POP_TOP")]
        if exits:
            handler += [create_instruction("PUSH_NULL"),
                        create_instruction("LOAD_CONST", argval=torch._C._set_grad_enabled),
                        create_instruction("LOAD_CONST", argval=exits[0].ctx.previous),
                        *create_call(1), create_instruction("POP_TOP")]
        handler.append(create_instruction("RERAISE", arg=0))
        covered = cg.instructions[first:]
        entry = ExceptionTableEntry(covered[0], covered[-1], handler[0], depth, False)
        for inst in covered:
            inst.exn_tab_entry = entry
        self.handlers.extend(handler)

    def emit_jump(self, bp: BreakPoint) -> None:
        tx, cg, inst = self.tx, self.cg, bp.inst
        passthrough, cond = bp.stack[:-1], bp.stack[-1]
        keeps = inst.opname in VALUE_KEEPING_JUMPS  # the taken tail gets the value too
        if keeps:
            cg.load_fast(cg.to_temp(cond))
        else:
            cg.reconstruct(cond)
        fall, taken = bp.index + 1, tx.indexof[id(inst.target)]
        # both tails see the same objects, as they were before the replayed stores: build
        # new objects, and read what a store could change, before the jump
        for var in passthrough:
            if not isinstance(var, NullVariable) and self._needs_temp(var):
                cg.to_temp(var)
        for target in (fall, taken):
            for name in defined_locals(tx, live_locals(tx.instructions, target)):
                var = tx.symbolic_locals.get(name)
                if var is not None and self._needs_temp(var):
                    cg.to_temp(var)
        self.side_effects.codegen(cg)
        jump = create_instruction(VALUE_KEEPING_JUMPS.get(inst.opname, inst.opname), target=inst)  # (fixed below)
        cg.append(jump)
        saved = cg.save_temps()
        tails = ((fall, passthrough), (taken, [*passthrough, cond] if keeps else passthrough))
        for i, (target, stack) in enumerate(tails):
            cg.restore_temps(saved)  # each tail runs alone: only temps made before the jump
            first = len(cg.instructions)
            marker, names, nulls, live = self._begin_resume_call(stack, target)
            params = tuple(names) + tuple(live)
            self._load_resume(marker, target, len(stack), nulls, params)
            cg.call(len(params) + self._push_cells())
            cg.return_value()
            if i == 1:
                jump.target = cg.instructions[first]

    def _needs_temp(self, var) -> bool:
        """Must this value be read (or built) before the jump?  New objects: yes (both
        tails share them); the frame's own locals: no; anything else when stores are
        replayed before the jump (a value read through an attribute, an item, a cell...)."""
        if isinstance(var.source, LocalSource) and var.source.kind == "fast":
            return False
        if not isinstance(var, LazyVariableTracker) or var.is_realized():
            if is_new(var.realize()):
                return True
        return bool(self.side_effects)

    def emit_step(self, bp: BreakPoint) -> None:
        tx, cg = self.tx, self.cg
        if bp.stack:
            raise unsupported("step break with a non-empty stack", f"{len(bp.stack)} values on the stack at {bp.inst.opname}")
        live = defined_locals(tx, live_locals(tx.instructions, bp.index))
        changed = [n for n in live if n in tx.symbolic_locals]
        for name in changed:
            reconstruct_local(tx, cg, name)
        self.side_effects.codegen(cg)
        for name in reversed(changed):
            cg.store_fast(name)
        for name in sorted(tx.deleted_locals - set(tx.symbolic_locals)):
            if name in getattr(tx, "lazy_locals", {}):  # bound when the frame started
                cg.append(create_instruction("DELETE_FAST", argval=name))
        body = copy_instructions(tx.instructions)
        for inst in body:
            if inst.opname in _NOP_OPS:
                inst.opcode, inst.opname, inst.arg, inst.argval = _NOP, "NOP", None, None
        target = body[bp.index]
        if self.resolve is not None:  # the rest of the frame still compiles what it calls
            body = intercept_instructions(body, self.resolve)
        cg.append(create_jump("JUMP", target))
        cg.extend(body)

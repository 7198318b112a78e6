"""The symbolic interpreter of CPython 3.11 bytecode.

Design:

* One method per opcode, named after it (handlers live in the ``handlers_*`` mixins by
  family).  The dispatch table is built once per class from those names; an opcode with
  no handler must be listed in :data:`UNSUPPORTED_OPCODES` and raises a structured graph
  break.  A test checks that the two sets cover all of 3.11 and are disjoint.
* Handlers take ``(self, inst)`` and act on ``self.stack`` / ``self.symbolic_locals``;
  per-frame state lives on the translator, session state on ``self.output``.
* With ``config.debug_checks`` on (always in tests) the stack change of each handler is
  checked against ``dis.stack_effect`` (PRECALL+CALL as one logical call).
* :class:`InstructionTranslator` traces the frame being compiled; user functions called
  from it are traced by an :class:`InliningTranslator` that writes into the same graph.
* An :class:`~graphjit.exc.ObservedException` (the program raised) is data: a frame whose
  exception table covers the raising instruction continues in its handler
  (:meth:`TranslatorBase.enter_handler`; ``except``, ``finally`` and ``with`` cleanups are
  traced); otherwise it unwinds to the caller.  If it leaves the root frame, the raising
  instruction becomes a break that runs it in Python, so the user gets eager's exception.
"""

from __future__ import annotations

import dataclasses
import dis
import inspect
import os
import types
from typing import Any

from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from .. import config
from ..bytecode import decode, stack_effect
from ..bytecode.instruction import Instruction
from ..exc import InternalError, ObservedException, RestartAnalysis, Unsupported, UserFrame, observed, unsupported
from ..sources import LocalSource
from ..variables import (
    CellVariable,
    ConstantVariable,
    DictVariable,
    ExceptionVariable,
    GeneratorVariable,
    TupleVariable,
    UserFunctionVariable,
    VariableTracker,
    WithExitVariable,
)
from ..variables.arg_binding import python_call_error
from ..variables.builtins import call_builtin
from ..variables.cells import EMPTY
from ..variables.iterators import ObjectIteratorVariable
from .generator_finalization import close_abandoned_generators, register_generator
from .raise_at_end import ends_frame_raising
from ..variables.torch_modes import resumable_exit
from .handlers_control import ControlHandlers
from .handlers_load_store import LoadStoreHandlers
from .handlers_match import MatchHandlers
from .handlers_ops import OpHandlers
from .handlers_stack import StackHandlers
from ..diagnostics.describe import describe

#: Opcodes the translator refuses (graph break), each with the reason.
UNSUPPORTED_OPCODES: dict[str, str] = {
    "CACHE": "inline cache entry (never decoded)",
    "EXTENDED_ARG": "folded into the next instruction by the decoder",
    "YIELD_VALUE": "generators", "RETURN_GENERATOR": "generators", "SEND": "generators",
    "GET_YIELD_FROM_ITER": "generators", "GET_AWAITABLE": "coroutines",
    "GET_AITER": "async iteration", "GET_ANEXT": "async iteration",
    "END_ASYNC_FOR": "async iteration", "BEFORE_ASYNC_WITH": "async with",
    "ASYNC_GEN_WRAP": "async generators", "IMPORT_STAR": "import *",
    "SETUP_ANNOTATIONS": "annotations at module scope", "LOAD_BUILD_CLASS": "class definitions",
    "PRINT_EXPR": "interactive mode", "LOAD_NAME": "module/class scope",
    "STORE_NAME": "module/class scope", "DELETE_NAME": "module/class scope",
    "CHECK_EG_MATCH": "exception groups", "PREP_RERAISE_STAR": "exception groups",
    "LOAD_CLASSDEREF": "class bodies",
}

MAX_STEPS = 200_000
MAX_INLINE_DEPTH = 32

_DECODED: dict[types.CodeType, list[Instruction]] = {}


def decode_cached(code: types.CodeType) -> list[Instruction]:
    """Decoded instructions of ``code`` (shared: translators never mutate them)."""
    insts = _DECODED.get(code)
    if insts is None:
        insts = _DECODED[code] = decode(code)
    return insts


class TranslatorBase(StackHandlers, LoadStoreHandlers, OpHandlers, ControlHandlers, MatchHandlers):
    """State and main loop shared by the root and inlining translators."""

    dispatch_table: dict[int, Any] = {}

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.dispatch_table = {}
        for name, op in dis.opmap.items():
            handler = getattr(cls, name, None)
            if handler is not None:
                cls.dispatch_table[op] = handler

    def __init__(self, code: types.CodeType, f_globals: dict, output, parent=None,
                 trusted: bool = False) -> None:
        self.code = code
        self.trusted = trusted  # graphjit's own polyfills: globals read without guards
        self.deleted_locals: set[str] = set()
        self.exc_info: VariableTracker | None = None  # the exception being handled
        self.instructions = decode_cached(code)
        self.indexof = {id(inst): i for i, inst in enumerate(self.instructions)}
        self.f_globals = f_globals
        self.f_builtins = f_globals.get("__builtins__", __builtins__)
        if isinstance(self.f_builtins, types.ModuleType):
            self.f_builtins = self.f_builtins.__dict__
        self.output = output
        self.parent = parent
        self.stack: list[VariableTracker] = []
        self.symbolic_locals: dict[str, VariableTracker] = {}
        self.cells: dict[str, CellVariable] = {}
        self.ip = 0
        self.current_inst: Instruction | None = None
        self.lineno = code.co_firstlineno
        self.kw_names: tuple[str, ...] | None = None
        self.return_value: VariableTracker | None = None
        self.done = False
        self.steps = 0
        self._pending_precall = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.co_name} @ line {self.lineno}, ip={self.ip})"

    # -- stack helpers ------------------------------------------------------------------
    def push(self, value: VariableTracker) -> None:
        assert isinstance(value, VariableTracker), value
        self.stack.append(value)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump_to(self, target: Instruction) -> None:
        self.ip = self.indexof[id(target)]

    # -- main loop ------------------------------------------------------------------------
    def run(self) -> None:
        while not self.done:
            self.step()

    def step(self) -> None:
        inst = self.instructions[self.ip]
        self.current_inst = inst
        self.ip += 1
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise unsupported("trace too long", f"more than {MAX_STEPS} instructions traced",
                              "A loop ran too long to unroll at trace time.")
        if inst.positions is not None and inst.positions.lineno is not None:
            self.lineno = inst.positions.lineno
        handler = self.dispatch_table.get(inst.opcode)
        try:
            try:
                if handler is None:
                    raise unsupported(f"unsupported bytecode {inst.opname}",
                                      UNSUPPORTED_OPCODES.get(inst.opname, inst.opname))
                if config.debug_checks:
                    self._checked_step(handler, inst)
                else:
                    handler(self, inst)
            except ObservedException as e:
                self.chain_context(e)
                if inst.exn_tab_entry is None:
                    raise
                self.enter_handler(e, inst)  # the frame's own handler: traced on
            except GuardOnDataDependentSymNode as e:  # (a tracker needed an unbacked value)
                raise unsupported(
                    "data-dependent value", f"{inst.opname} needs a value known only when the "
                    f"graph runs: {str(e).splitlines()[0]}",
                    "A size from nonzero/masking or a value from Tensor.item() is used where "
                    "Python needs it (a loop over its length, an index, a branch).",
                    ["Keep the computation in tensor code, use torch._check() to state what "
                     "holds, or accept the graph break."]) from None
        except Unsupported as e:
            seen = e.__dict__.setdefault("_translators", set())
            if id(self) not in seen and not self.is_graphjit_code():  # each user frame adds
                seen.add(id(self))  # itself once (graphjit's own polyfills are not the user's)
                e.add_frame(self.user_frame())
            raise

    def chain_context(self, e: ObservedException) -> None:
        """Implicit chaining, as ``_PyErr_SetObject``: an exception raised while another is
        handled (in this frame or a caller's) gets it as ``__context__`` (once, where it
        is raised; a re-raise keeps its own; a cycle through the chain is cut)."""
        if getattr(e, "_context_done", False):
            return
        e._context_done = True
        tx, handled = self, None
        while tx is not None and handled is None:
            info = getattr(tx, "exc_info", None)
            if isinstance(info, ExceptionVariable):
                handled = info.exc
            tx = tx.parent
        if handled is None or handled is e.exc:
            return
        o = slow = handled
        toggle = False
        while o.__context__ is not None:  # CPython: avoid a cycle exc -> ... -> exc
            if o.__context__ is e.exc:
                o.__context__ = None
                break
            o = o.__context__
            if o is slow:  # a cycle already in the chain (Floyd's check, as CPython's)
                break
            if toggle:
                slow = slow.__context__
            toggle = not toggle
        e.exc.__context__ = handled

    def enter_handler(self, e: ObservedException, inst: Instruction) -> None:
        """Unwind to ``inst``'s exception handler as CPython does (3.11 exception table):
        the stack is cut to the entry's depth, ``lasti`` (if the entry keeps it) and the
        exception are pushed, and execution continues at the handler."""
        entry = inst.exn_tab_entry
        del self.stack[entry.depth:]
        if entry.lasti:
            self.push(ConstantVariable(inst.offset))
        self.push(ExceptionVariable(e.exc))
        self.kw_names = None
        self.jump_to(entry.target)

    def _checked_step(self, handler, inst: Instruction) -> None:
        before = len(self.stack)
        ip_before = self.ip
        handler(self, inst)
        if self.done:
            return
        jumped = self.ip != ip_before
        expected = stack_effect(inst, jump=jumped if inst.target is not None else None)
        if inst.opname == "PRECALL":
            self._pending_precall = expected
            expected = 0
        elif inst.opname == "CALL":
            expected += self._pending_precall
            self._pending_precall = 0
        actual = len(self.stack) - before
        if actual != expected:
            raise InternalError(f"stack effect of {inst.opname} at line {self.lineno} in "
                                f"{self.code.co_name}: expected {expected}, got {actual}")

    def is_graphjit_code(self) -> bool:
        """Is this frame one of graphjit's own polyfills (not a frame of the user's)?"""
        return self.trusted or self.code.co_filename.startswith(_GRAPHJIT_DIR)

    def user_frame(self) -> UserFrame:
        return UserFrame(self.code.co_filename, self.lineno, self.code.co_name)

    def user_stack(self) -> list[UserFrame]:
        frames = []
        tx = self
        while tx is not None:
            frames.insert(0, tx.user_frame())
            tx = tx.parent
        return frames

    def user_stack_summary(self) -> str:
        return " <- ".join(f"{f.name}:{f.lineno}" for f in reversed(self.user_stack()))

    # -- calls ----------------------------------------------------------------------------
    def call_function(self, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
        return fn.call_function(self, args, kwargs)

    def inline_polyfill(self, fn, args: list, kwargs: dict | None = None) -> VariableTracker:
        """Trace one of graphjit's polyfills (plain Python with CPython's semantics)."""
        return self.inline_user_function(UserFunctionVariable(fn, trusted=True), args, kwargs or {})

    def call_python_builtin(self, fn, args: list, kwargs: dict) -> VariableTracker:
        return call_builtin(self, fn, args, kwargs)

    def zero_arg_super(self) -> tuple[type, VariableTracker]:
        """``super()`` with no arguments: ``__class__`` and the frame's first argument."""
        code = self.code
        if code.co_argcount == 0 and not code.co_flags & inspect.CO_VARARGS:
            raise observed(RuntimeError, "super(): no arguments")
        cell = self.cells.get("__class__")
        if cell is None:
            raise observed(RuntimeError, "super(): __class__ cell not found")
        cls = cell.load(self).as_python_constant()
        first = self.first_argument_name()
        obj = self.cells[first].load(self) if first in code.co_cellvars else self.local(first)
        if obj is None:
            raise observed(RuntimeError, "super(): arg[0] deleted")
        return cls, obj

    def first_argument_name(self) -> str:
        return self.code.co_varnames[0]

    def inline_user_function(self, fn_var, args: list, kwargs: dict) -> VariableTracker:
        """Trace a Python function's body into this graph; return its result tracker."""
        code = fn_var.get_code()
        if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
            raise unsupported("coroutine function", f"call to {code.co_name}",
                              "Coroutines and async generators are not traced.")
        depth, tx = 0, self
        while tx is not None:
            depth, tx = depth + 1, tx.parent
        if depth > MAX_INLINE_DEPTH:
            raise unsupported("inlining too deep", f"{code.co_name}: depth {depth}",
                              "Recursion is not traced.")
        bound = bind_arguments(self, fn_var, code, args, kwargs)
        if code.co_flags & inspect.CO_GENERATOR:
            frame = GeneratorFrame(code, fn_var.get_globals(), self.output, self, bound,
                                   fn_var.get_closure_cells(self), trusted=fn_var.trusted)
            gen = GeneratorVariable(frame, fn_var.get_name(), fn_var=fn_var, args=args, kwargs=kwargs)
            register_generator(self, gen)
            return gen
        child = InliningTranslator(code, fn_var.get_globals(), self.output, self, bound,
                                   fn_var.get_closure_cells(self), trusted=fn_var.trusted)
        child.run()
        return child.return_value


def bind_arguments(tx, fn_var, code: types.CodeType, args: list, kwargs: dict) -> dict:
    """Bind trackers to ``code``'s parameters as CPython does (defaults included).

    Written out rather than through ``inspect`` so that implicit parameters such as a
    comprehension's ``.0`` keep their names."""
    defaults, kwdefaults = fn_var.get_defaults(tx)
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    posonly = code.co_posonlyargcount
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)

    def fail(msg: str):
        """The program's TypeError: CPython's own words (``arg_binding``), these where the
        parameters cannot be written as Python."""
        exact = python_call_error(code, fn_var.get_name(), len(defaults), tuple(kwdefaults),
                                  len(args), tuple(kwargs))
        return ObservedException(exact) if exact is not None else \
            observed(TypeError, f"{code.co_name}() {msg}")

    bound: dict = {}
    for name, value in zip(names[:npos], args):
        bound[name] = value
    extra = list(args[npos:])
    if extra and not has_varargs:
        raise fail(f"takes {npos} positional arguments but {len(args)} were given")
    varkw: dict = {}
    kwonly = names[npos:npos + nkw]
    for key, value in kwargs.items():
        if (key in names[posonly:npos] or key in kwonly) and key not in bound:
            bound[key] = value
        elif key in bound and key in names[posonly:npos]:
            raise fail(f"got multiple values for argument {key!r}")
        elif has_varkw:
            varkw[key] = value
        else:
            raise fail(f"got an unexpected keyword argument {key!r}")
    first_default = npos - len(defaults)
    for i, name in enumerate(names[:npos]):
        if name not in bound:
            if i < first_default:
                raise fail(f"missing required argument {name!r}")
            bound[name] = defaults[i - first_default]
    for name in kwonly:
        if name not in bound:
            if name not in kwdefaults:
                raise fail(f"missing required keyword-only argument {name!r}")
            bound[name] = kwdefaults[name]
    i = npos + nkw
    if has_varargs:
        bound[names[i]] = TupleVariable(extra)
        i += 1
    if has_varkw:
        bound[names[i]] = DictVariable(varkw)
    return bound


class InliningTranslator(TranslatorBase):
    """Traces a called user function into the caller's graph."""

    def __init__(self, code, f_globals, output, parent, bound: dict, closure_cells: list,
                 trusted: bool = False) -> None:
        super().__init__(code, f_globals, output, parent, trusted)
        for name in code.co_cellvars:
            self.cells[name] = CellVariable(name, contents=bound.pop(name, EMPTY), pre_existing=False)
        for name, cell in zip(code.co_freevars, closure_cells, strict=True):
            self.cells[name] = cell
        self.symbolic_locals.update(bound)

    def RETURN_VALUE(self, inst: Instruction) -> None:
        self.return_value = self.pop()
        self.done = True


class GeneratorFrame(InliningTranslator):
    """The frame of a generator made while tracing, run one item at a time: each
    :meth:`next_value` continues from the last ``yield`` (the frame keeps its stack and
    locals in between) to the next one, or to its ``return``.  3.11 generator code starts
    ``RETURN_GENERATOR; POP_TOP`` (making the generator): the frame starts after them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ip = next(i for i, inst in enumerate(self.instructions) if inst.opname == "RESUME")
        self.yielded: VariableTracker | None = None
        self.exhausted = False
        self.started = False
        self.return_value = ConstantVariable(None)

    def YIELD_VALUE(self, inst: Instruction) -> None:
        self.yielded = self.pop()
        self.push(ConstantVariable(None))  # replaced by what ``send`` delivers
        self.done = True

    def RETURN_VALUE(self, inst: Instruction) -> None:
        self.return_value = self.pop()
        self.exhausted = self.done = True

    def GET_YIELD_FROM_ITER(self, inst: Instruction) -> None:
        """``yield from x``: ``iter(x)``, a generator as it is."""
        self.push(self.make_iterator(self.pop()))

    def SEND(self, inst: Instruction) -> None:
        """``yield from``'s step: send TOS into the iterator below it; its next item is
        yielded, or at its end its return value is the expression's value."""
        value, it = self.pop(), self.stack[-1]
        if isinstance(it, GeneratorVariable):
            item = it.frame.next_value(self, value)
        elif value.is_python_constant() and value.as_python_constant() is None:
            item = it.next_item(self)
        else:
            raise unsupported("send() into an iterator that is not a generator", describe(it))
        if item is None:
            self.pop()
            self.push(it.frame.return_value if isinstance(it, GeneratorVariable) else ConstantVariable(None))
            self.jump_to(inst.target)
        else:
            self.push(item)

    def throw_value(self, consumer, exc: BaseException) -> VariableTracker | None:
        """``generator.throw(exc)`` (``_gen_throw``): inside ``yield from`` the exception
        goes to the subiterator first (``GeneratorExit`` closes it); otherwise, or if the
        subiterator raises, ``exc`` is raised at the paused ``yield`` (its frame's handlers
        see it).  The next yielded tracker, ``None`` at the end, or the exception (the same
        one or another) propagates to the consumer."""
        if not self.started or self.exhausted:
            self.exhausted = True
            raise ObservedException(exc)
        self.parent, self.done, self.yielded = consumer, False, None
        sub = self._delegate()
        if sub is not None:
            exc, result = self._throw_into(sub, exc)
            if exc is None:
                if result is not None:  # the subiterator yielded: still paused in yield from
                    self.yielded = result[0]
                    return result[0]
                return self._resume_after_yield_from(result)
        return self._throw_here(exc)

    def _delegate(self) -> VariableTracker | None:
        """The subiterator a paused ``yield from`` delegates to (``_PyGen_yf``: the next
        instruction is ``RESUME`` with an argument of 2 or more), else ``None``."""
        nxt = self.instructions[self.ip] if self.ip < len(self.instructions) else None
        if nxt is None or nxt.opname != "RESUME" or not nxt.arg or nxt.arg < 2:
            return None
        return self.stack[-2]  # below the placeholder for the value ``send`` delivers

    def _throw_into(self, sub: VariableTracker, exc: BaseException):
        """``exc`` thrown into the subiterator: ``(None, (item,))`` if it yielded,
        ``(None, value)`` (a tracker) if it finished with ``value``, or ``(exception, None)``
        to raise in this frame."""
        if isinstance(exc, GeneratorExit):  # close the subiterator, then raise it here
            try:
                if isinstance(sub, GeneratorVariable):
                    sub._close(self)
                elif isinstance(sub, ObjectIteratorVariable) and sub.obj.has_attr(self, "close"):
                    sub.obj.call_method(self, "close", [], {})
            except ObservedException as e:
                return e.exc, None
            return exc, None
        try:
            if isinstance(sub, GeneratorVariable):
                sub.advances = None
                item = sub.frame.throw_value(self, exc)
                return (None, (item,)) if item is not None else (None, sub.frame.return_value)
            if isinstance(sub, ObjectIteratorVariable) and sub.obj.has_attr(self, "throw"):
                return None, (sub.obj.call_method(self, "throw", [ExceptionVariable(exc)], {}),)
        except ObservedException as e:
            if isinstance(e.exc, StopIteration) and not isinstance(sub, GeneratorVariable):
                return None, VariableTracker.build(self, e.exc.value)
            return e.exc, None
        return exc, None  # no ``throw``: raised at the ``yield from`` itself

    def _resume_after_yield_from(self, value: VariableTracker) -> VariableTracker | None:
        """The subiterator finished: ``yield from`` evaluates to ``value`` and the frame
        continues after it (``SEND``'s target)."""
        self.pop()  # the placeholder
        self.pop()  # the subiterator
        self.push(value)
        send = self.instructions[self.ip - 2]
        assert send.opname == "SEND", send
        self.jump_to(send.target)
        self._run_body()
        return None if self.exhausted else self.yielded

    def _throw_here(self, exc: BaseException) -> VariableTracker | None:
        error = ObservedException(exc)
        yield_inst = self.instructions[self.ip - 1]
        self.pop()  # the value ``send`` would have delivered
        self.chain_context(error)
        if yield_inst.exn_tab_entry is None:
            self.exhausted = True
            raise _pep479(error)
        self.enter_handler(error, yield_inst)
        self._run_body()
        return None if self.exhausted else self.yielded

    def _run_body(self) -> None:
        """Run to the next ``yield`` or the end.  An exception leaving the body finishes
        the generator; a ``StopIteration`` leaving it is a ``RuntimeError`` (PEP 479,
        ``gen_send_ex``), with the ``StopIteration`` as its cause."""
        self.running = True
        try:
            self.run()
        except ObservedException as e:
            self.exhausted = True
            raise _pep479(e) from None
        finally:
            self.running = False

    def next_value(self, consumer, sent: VariableTracker | None = None) -> VariableTracker | None:
        """The next yielded tracker, or ``None`` when the generator is exhausted (its
        return value is then :attr:`return_value`).  ``sent`` is what the paused
        ``yield`` evaluates to (``send``); ``None`` for ``next``."""
        if getattr(self, "running", False):  # its own body asks for its next value
            raise observed(ValueError, "generator already executing")
        if self.exhausted:
            return None
        depth, tx = 0, consumer
        while tx is not None:
            depth, tx = depth + 1, tx.parent
        if depth > MAX_INLINE_DEPTH:
            raise unsupported("inlining too deep", f"generator {self.code.co_name}: depth {depth}")
        if sent is not None:
            if not self.started and not (sent.is_python_constant() and sent.as_python_constant() is None):
                raise observed(TypeError, "can't send non-None value to a just-started generator")
            if self.started:
                self.stack[-1] = sent
        self.started = True
        self.parent, self.done, self.yielded = consumer, False, None
        self._run_body()
        return None if self.exhausted else self.yielded


_GRAPHJIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _pep479(e: ObservedException) -> ObservedException:
    """A ``StopIteration`` leaving a generator's frame becomes ``RuntimeError`` (PEP 479)."""
    if not isinstance(e.exc, StopIteration):
        return e
    error = RuntimeError("generator raised StopIteration")
    error.__cause__ = error.__context__ = e.exc
    return ObservedException(error)


@dataclasses.dataclass
class Speculation:
    """A decision recorded for the restart: at root step ``k``, break (``kind`` is
    ``"resume"``: resume after this instruction; ``"step"``: run the rest eagerly)."""

    kind: str
    reason: Unsupported
    failed_index: int | None = None  # (a step break: the instruction that could not be traced)


@dataclasses.dataclass
class BreakPoint:
    """Where the root frame stopped: the instruction, its index, the symbolic stack."""

    kind: str
    inst: Instruction
    index: int
    step: int
    stack: list
    reason: Unsupported
    kw_names: tuple | None = None
    #: a step break: the index of the instruction that could not be traced (``index`` is
    #: the empty-stack point before it where the graph ends)
    failed_index: int | None = None

    def __repr__(self) -> str:
        return f"BreakPoint({self.kind} at {self.inst.opname}@{self.inst.offset}: {self.reason.reason})"


#: Instructions after which a resume function can continue: ``(pops, pushes)``, each an
#: int, ``None`` (the instruction's ``arg``) or a function of ``arg``.  Calls and
#: conditional jumps are handled by name.  Left out: instructions that reach below their
#: own inputs (``LIST_APPEND``, ``SWAP``, ``COPY``...: the tail call's arguments sit
#: between) and those that push a NULL the tail call cannot pass (``LOAD_GLOBAL``).
GENERIC_BREAKS = {
    "STORE_ATTR": (2, 0), "STORE_SUBSCR": (3, 0), "STORE_GLOBAL": (1, 0), "DELETE_ATTR": (1, 0),
    "DELETE_SUBSCR": (2, 0), "IMPORT_NAME": (2, 1), "IMPORT_FROM": (1, 2), "BUILD_SET": (None, 1),
    "RAISE_VARARGS": (None, 0), "DELETE_GLOBAL": (0, 0), "DELETE_DEREF": (0, 0),
    "STORE_DEREF": (1, 0), "CONTAINS_OP": (2, 1), "BINARY_SUBSCR": (2, 1), "BINARY_OP": (2, 1),
    "LOAD_ATTR": (1, 1), "LOAD_METHOD": (1, 2), "COMPARE_OP": (2, 1), "IS_OP": (2, 1),
    "UNARY_POSITIVE": (1, 1), "UNARY_NEGATIVE": (1, 1), "UNARY_NOT": (1, 1), "UNARY_INVERT": (1, 1),
    "GET_ITER": (1, 1), "UNPACK_SEQUENCE": (1, None),
    "UNPACK_EX": (1, lambda arg: (arg & 0xFF) + (arg >> 8) + 1),
    "FORMAT_VALUE": (lambda arg: 2 if arg & 0x04 else 1, 1), "BUILD_STRING": (None, 1),
    "BUILD_TUPLE": (None, 1), "BUILD_LIST": (None, 1), "BUILD_MAP": (lambda arg: 2 * arg, 1),
    "BUILD_CONST_KEY_MAP": (lambda arg: arg + 1, 1), "BUILD_SLICE": (None, 1),
    "BEFORE_WITH": (1, 2),
}
#: ``a and b``/``a or b``: the tested value stays on the stack where the jump is taken
#: (the break tests it with the popping jump named here, and passes it on to that tail)
VALUE_KEEPING_JUMPS = {"JUMP_IF_FALSE_OR_POP": "POP_JUMP_FORWARD_IF_FALSE",
                       "JUMP_IF_TRUE_OR_POP": "POP_JUMP_FORWARD_IF_TRUE"}
CONDITIONAL_JUMPS = frozenset({
    "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", *VALUE_KEEPING_JUMPS,
})
RESUMABLE = frozenset({"CALL", "CALL_FUNCTION_EX", *CONDITIONAL_JUMPS, *GENERIC_BREAKS})


def _loop_indices(insts) -> frozenset[int]:
    """Indices of instructions inside a loop body (between a backward jump and its target)."""
    index_of = {id(inst): i for i, inst in enumerate(insts)}
    inside: set[int] = set()
    for i, inst in enumerate(insts):
        if inst.target is not None and index_of[id(inst.target)] <= i:
            inside.update(range(index_of[id(inst.target)], i + 1))
    return frozenset(inside)


def with_exit_positions(insts, inst, index_of) -> list[int] | None:
    """The stack positions of the ``__exit__`` of every ``with`` block around ``inst``
    (innermost first), or ``None`` when a ``try`` handler covers it.  Each block's table
    entry has the depth below its exit; the ``BEFORE_WITH`` that opened it is covered by
    the enclosing block's entry, and so on outwards."""
    positions: list[int] = []
    while True:
        entry = inst.exn_tab_entry
        if entry is None:
            return positions
        h = index_of[id(entry.target)]
        if not (insts[h].opname == "PUSH_EXC_INFO" and h + 1 < len(insts)
                and insts[h + 1].opname == "WITH_EXCEPT_START"):
            return None
        positions.append(entry.depth - 1)
        k = index_of[id(entry.start)] - 1
        while k >= 0 and insts[k].opname != "BEFORE_WITH":
            k -= 1
        if k < 0:
            return None
        inst = insts[k]


class InstructionTranslator(TranslatorBase):
    """Traces the frame being compiled.  Arguments and closure contents are wrapped
    lazily, on first use, so unused inputs get no guards.

    Graph breaks use restarts (as TorchDynamo's SpeculationLog): when an instruction
    fails, the decision is recorded in ``speculation`` under the root step count and
    tracing starts again; on the replay the translator stops *before* that step and
    leaves a :class:`BreakPoint` for the code generator."""

    def __init__(self, code, f_globals, output, f_locals: dict, closure: tuple | None,
                 speculation: dict[int, Speculation] | None = None, fullgraph: bool = False) -> None:
        super().__init__(code, f_globals, output, None)
        self.speculation = speculation if speculation is not None else {}
        self.fullgraph = fullgraph
        self.checkpoints: list[tuple[int, int]] = []
        self.break_point: BreakPoint | None = None
        self.raises = False  # the trace ends raising ``return_value`` (raise_at_end.py)
        #: exceptions out of a generator this frame's handlers caught (raise_at_end.py)
        self.generator_exceptions: list[BaseException] = []
        self.lazy_locals = dict(f_locals)
        self.local_generators: list = []  # generators made in this trace (generator_finalization)
        # the frame's own cells: its cellvars (MAKE_CELL, holding a captured argument) and
        # its freevars (the closure); writes to them are replayed with STORE_DEREF
        for name in code.co_cellvars:
            if name in self.lazy_locals:
                self.cells[name] = CellVariable(name, local_name=name, pre_existing=True,
                                                initial=self.lazy_locals.pop(name),
                                                contents_source=LocalSource(name, "cell"))
            else:
                self.cells[name] = CellVariable(name, local_name=name, pre_existing=True)
        for name, real in zip(code.co_freevars, closure or (), strict=True):
            try:
                real.cell_contents
            except ValueError:
                self.cells[name] = CellVariable(name, real=real, local_name=name, pre_existing=True)
            else:
                self.cells[name] = CellVariable(name, real=real, local_name=name, pre_existing=True,
                                                contents_source=LocalSource(name, "free"))
            # the same cell reached through another function's closure is this tracker
            output.side_effects.register_existing(real, self.cells[name])

    def local(self, name: str) -> VariableTracker | None:
        var = self.symbolic_locals.get(name)
        if var is None and name in self.lazy_locals and name not in self.deleted_locals:
            var = VariableTracker.build(self, self.lazy_locals[name], LocalSource(name))
            self.symbolic_locals[name] = var
        return var

    def enter_handler(self, e: ObservedException, inst: Instruction) -> None:
        if e.from_generator:  # re-raised by the handler, it is still the generator's
            self.generator_exceptions.append(e.exc)
        super().enter_handler(e, inst)

    def RETURN_VALUE(self, inst: Instruction) -> None:
        close_abandoned_generators(self, self.stack[-1])
        self.return_value = self.pop()
        self.done = True

    # -- graph breaks ---------------------------------------------------------------------
    def step(self) -> None:
        k = self.steps + 1
        spec = self.speculation.get(k)
        if spec is not None:
            inst = self.instructions[self.ip]
            self.break_point = BreakPoint(spec.kind, inst, self.ip, k, list(self.stack),
                                          spec.reason, self.kw_names, spec.failed_index)
            self.done = True
            return
        if not self.stack and self.kw_names is None:
            self.checkpoints.append((k, self.ip))
        try:
            super().step()
        except ObservedException as e:
            if ends_frame_raising(self, e):  # the graph ends raising it (raise_at_end.py)
                self.return_value, self.raises, self.done = ExceptionVariable(e.exc), True, True
                return
            # the program raises here: run this instruction in Python after the graph
            index = self.indexof[id(self.current_inst)]
            reason = unsupported("user exception", f"{type(e.exc).__name__}: {e.exc}",
                                 "The traced program raises here; the instruction runs in Python.")
            reason.user_error = True
            reason.add_frame(self.user_frame())
            if self.can_resume_at(index):
                self.speculation[k] = Speculation("resume", reason)
            else:  # (also under fullgraph: the user's exception is not a graph break)
                self.record_step_break(k, reason, index)
            raise RestartAnalysis() from None
        except Unsupported as e:
            if self.fullgraph:
                raise
            if e.instruction is None:  # the root frame's instruction that could not be traced
                e.instruction = self.current_inst.opname
            index = self.indexof[id(self.current_inst)]
            if self.can_resume_at(index):
                self.speculation[k] = Speculation("resume", e)
            else:
                self.record_step_break(k, e, index)
            raise RestartAnalysis() from None

    def record_step_break(self, k: int, reason: Unsupported, failed_index: int | None = None) -> None:
        """Break at the last empty-stack point before step ``k`` (the instruction at
        ``failed_index``); the rest runs eagerly."""
        earlier = [c for c, _ in self.checkpoints if c <= k]
        self.speculation[earlier[-1] if earlier else 1] = Speculation("step", reason, failed_index)

    def can_resume_at(self, index: int) -> bool:
        inst = self.instructions[index]
        if inst.opname not in RESUMABLE:
            return False
        if index in self.loop_indices():
            return False
        # inside ``with`` blocks only if they are grad-mode blocks or torch-function mode
        # blocks: the instruction runs outside the block's cleanup, and only their effect
        # (the grad mode, the mode stack) is restored if it raises; another context
        # manager's ``__exit__`` would be skipped
        exits = with_exit_positions(self.instructions, inst, self.indexof)
        return exits is not None and all(
            0 <= p < len(self.stack) and (isinstance(self.stack[p], WithExitVariable)
                                          or resumable_exit(self.stack[p])) for p in exits)

    def loop_indices(self) -> frozenset[int]:
        """Indices of the instructions inside a loop body (cached per instruction list)."""
        loops = _LOOPS.get(id(self.instructions))
        if loops is None or loops[0] is not self.instructions:
            loops = _LOOPS[id(self.instructions)] = (self.instructions, _loop_indices(self.instructions))
        return loops[1]


_LOOPS: dict[int, tuple] = {}

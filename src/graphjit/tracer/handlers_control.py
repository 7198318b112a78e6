"""Handlers: jumps, loops, calls and ``with`` blocks."""

from __future__ import annotations

from ..exc import ObservedException, observed, unsupported
from ..variables import (
    VariableTracker,
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    ExceptionVariable,
    GradModeVariable,
    InferenceModeExitVariable,
    InferenceModeVariable,
    IteratorVariable,
    NullVariable,
    TensorVariable,
    WithExitVariable,
)
from .assertions import assertion_jump
from ..variables.dicts import items_of
from ..variables.objects import enter_context
from ..diagnostics.describe import describe


class ControlHandlers:
    # -- jumps ----------------------------------------------------------------------------
    def JUMP_FORWARD(self, inst) -> None:
        self.jump_to(inst.target)

    JUMP_BACKWARD = JUMP_FORWARD
    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def _pop_jump_if(self, inst, when: bool) -> None:
        value = self.pop()
        if isinstance(value, TensorVariable):  # an ``assert`` checked in the graph?
            passing = assertion_jump(self, inst, value, when)
            if passing is not None:
                self.jump_to(passing)
                return
        if value.truthiness(self) is when:
            self.jump_to(inst.target)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst) -> None:
        self._pop_jump_if(inst, True)

    def POP_JUMP_FORWARD_IF_FALSE(self, inst) -> None:
        self._pop_jump_if(inst, False)

    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE
    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE

    def _pop_jump_if_none(self, inst, when: bool) -> None:
        value = self.pop()
        is_none = isinstance(value, ConstantVariable) and value.value is None
        if is_none is when:
            self.jump_to(inst.target)

    def POP_JUMP_FORWARD_IF_NONE(self, inst) -> None:
        self._pop_jump_if_none(inst, True)

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst) -> None:
        self._pop_jump_if_none(inst, False)

    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def _jump_or_pop(self, inst, when: bool) -> None:
        if self.stack[-1].truthiness(self) is when:
            self.jump_to(inst.target)
        else:
            self.pop()

    def JUMP_IF_TRUE_OR_POP(self, inst) -> None:
        self._jump_or_pop(inst, True)

    def JUMP_IF_FALSE_OR_POP(self, inst) -> None:
        self._jump_or_pop(inst, False)

    def FOR_ITER(self, inst) -> None:
        it = self.stack[-1]
        if not isinstance(it, IteratorVariable):
            raise unsupported("unsupported iterator", f"a for loop over a {_type_name(it)} object")
        item = it.next_item(self)
        if item is None:
            self.pop()
            self.jump_to(inst.target)
        else:
            self.push(item)

    # -- calls ----------------------------------------------------------------------------
    def KW_NAMES(self, inst) -> None:
        self.kw_names = inst.argval

    def PRECALL(self, inst) -> None:
        pass

    def CALL(self, inst) -> None:
        args = self.popn(inst.arg)
        second, first = self.pop(), self.pop()
        if isinstance(first, NullVariable):
            fn = second
        else:
            fn, args = first, [second, *args]
        kwargs = {}
        if self.kw_names:
            names = self.kw_names
            kwargs = dict(zip(names, args[len(args) - len(names):], strict=True))
            args = args[:len(args) - len(names)]
            self.kw_names = None
        self.push(self.call_function(fn, args, kwargs))

    def CALL_FUNCTION_EX(self, inst) -> None:
        kwargs = self.pop() if inst.arg & 1 else DictVariable({})
        args = self.pop()
        fn = self.pop()
        null = self.pop()
        if not isinstance(null, NullVariable):
            raise unsupported("CALL_FUNCTION_EX without NULL", describe(null))
        if not isinstance(kwargs, DictVariable):
            raise unsupported("**kwargs of a non-dict", describe(kwargs))
        self.push(self.call_function(fn, args.unpack(self), dict(items_of(self, kwargs))))

    # -- exceptions (the program's own, as data: see TranslatorBase.enter_handler) ------------
    def _exception(self, var) -> BaseException:
        """The exception object a ``raise`` operand stands for (a class is instantiated)."""
        if not isinstance(var, ExceptionVariable):
            value = var.as_python_constant() if var.is_python_constant() else None
            if isinstance(value, type) and issubclass(value, BaseException):
                var = var.call_function(self, [], {})
        if not isinstance(var, ExceptionVariable):
            raise unsupported("raise of a non-exception value", describe(var))
        return var.exc

    def RAISE_VARARGS(self, inst) -> None:
        """``raise`` (re-raise), ``raise exc``, ``raise exc from cause``."""
        if inst.arg == 0:
            tx = self  # the exception handled by this frame or, as the thread state, a caller
            while tx is not None and getattr(tx, "exc_info", None) is None:
                tx = tx.parent
            if tx is None:  # (an outer caller's is seen when the instruction runs in Python)
                raise observed(RuntimeError, "No active exception to reraise")
            if not isinstance(tx.exc_info, ExceptionVariable):
                raise unsupported("bare raise outside an except block", "RAISE_VARARGS 0")
            raise _reraised(tx.exc_info.exc)
        cause = self.pop() if inst.arg == 2 else None
        exc = self._exception(self.pop())
        if cause is not None:
            exc.__cause__ = None if cause.is_python_constant() and cause.as_python_constant() is None \
                else self._exception(cause)
        raise ObservedException(exc)

    def PUSH_EXC_INFO(self, inst) -> None:
        exc = self.pop()
        self.push(self.exc_info if self.exc_info is not None else ConstantVariable(None))
        self.push(exc)
        self.exc_info = exc

    def POP_EXCEPT(self, inst) -> None:
        previous = self.pop()
        self.exc_info = None if previous.is_python_constant() and previous.as_python_constant() is None \
            else previous

    def CHECK_EXC_MATCH(self, inst) -> None:
        types_ = self.pop().as_python_constant()
        exc = self.stack[-1]
        self.push(ConstantVariable(isinstance(exc.as_python_constant(), types_)))

    def RERAISE(self, inst) -> None:
        exc = self.pop()
        if inst.arg:
            self.pop()  # lasti
        raise _reraised(exc.as_python_constant())

    def WITH_EXCEPT_START(self, inst) -> None:
        """``__exit__(type, value, traceback)`` of the ``with`` block being unwound."""
        exc = self.stack[-1].as_python_constant()
        exit_fn = self.stack[-4]
        self.push(exit_fn.call_function(
            self, [BuiltinVariable(type(exc)) if type(exc).__module__ == "builtins" else
                   VariableTracker.build(self, type(exc)), self.stack[-1], ConstantVariable(None)], {}))

    def LOAD_ASSERTION_ERROR(self, inst) -> None:
        self.push(BuiltinVariable(AssertionError))

    # -- with blocks ----------------------------------------------------------------------
    def BEFORE_WITH(self, inst) -> None:
        ctx = self.pop()
        if isinstance(ctx, InferenceModeVariable):
            self.push(InferenceModeExitVariable(ctx))
            self.push(ctx.enter(self))
            return
        if not isinstance(ctx, GradModeVariable):
            exit_fn, result = enter_context(self, ctx)
            self.push(exit_fn)
            self.push(result)
            return
        self.push(WithExitVariable(ctx))
        self.push(ctx.enter(self))


def _reraised(exc: BaseException) -> ObservedException:
    """A re-raise (``raise``, ``RERAISE``): the exception keeps its ``__context__``."""
    e = ObservedException(exc)
    e._context_done = True
    return e


def _type_name(var) -> str:
    """The Python type a tracker stands for, for a message (never the tracker's repr)."""
    try:
        return var.python_type().__name__
    except Exception:
        return "value computed when the code runs"

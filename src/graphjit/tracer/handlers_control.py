"""Handlers: jumps, loops, calls and ``with`` blocks."""

from __future__ import annotations

from ..exc import ObservedException, unsupported
from ..variables import (
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    ExceptionVariable,
    GeneratorVariable,
    GradModeVariable,
    ListIteratorVariable,
    NullVariable,
    WithExitVariable,
)
from ..variables.dicts import items_of


class ControlHandlers:
    # -- jumps ----------------------------------------------------------------------------
    def JUMP_FORWARD(self, inst) -> None:
        self.jump_to(inst.target)

    JUMP_BACKWARD = JUMP_FORWARD
    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def _pop_jump_if(self, inst, when: bool) -> None:
        value = self.pop()
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
        if not isinstance(it, (ListIteratorVariable, GeneratorVariable)):
            raise unsupported("unsupported iterator", repr(it))
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
            raise unsupported("CALL_FUNCTION_EX without NULL", repr(null))
        if not isinstance(kwargs, DictVariable):
            raise unsupported("**kwargs of a non-dict", repr(kwargs))
        self.push(self.call_function(fn, args.unpack(self), dict(items_of(self, kwargs))))

    # -- exceptions -----------------------------------------------------------------------
    def RAISE_VARARGS(self, inst) -> None:
        """``raise exc``: the program raises; see ``ObservedException``."""
        if inst.arg != 1:
            raise unsupported("raise with a cause or a bare re-raise", f"RAISE_VARARGS {inst.arg}")
        exc = self.pop()
        if isinstance(exc, BuiltinVariable) and isinstance(exc.fn, type) and issubclass(exc.fn, BaseException):
            exc = exc.call_function(self, [], {})
        if not isinstance(exc, ExceptionVariable):
            raise unsupported("raise of a non-exception value", repr(exc))
        raise ObservedException(exc.exc)

    def LOAD_ASSERTION_ERROR(self, inst) -> None:
        self.push(BuiltinVariable(AssertionError))

    # -- with blocks ----------------------------------------------------------------------
    def BEFORE_WITH(self, inst) -> None:
        ctx = self.pop()
        if not isinstance(ctx, GradModeVariable):
            raise unsupported("unsupported context manager", f"with {ctx!r}",
                              "Only torch.no_grad() and torch.enable_grad() are traced so far.")
        self.push(WithExitVariable(ctx))
        self.push(ctx.enter(self))


"""Exception objects made while tracing (``raise ValueError("...")``, ``assert``).

An exception is data: the tracker holds the real exception object built at trace time
(its class is a builtin or its constructor is ``BaseException``'s, so building it runs no
user code).  ``RAISE_VARARGS`` turns it into an :class:`~graphjit.exc.ObservedException`:
the instruction then runs in Python after the graph, so the user gets this exception."""

from __future__ import annotations

import copy
import types

from ..exc import unsupported
from .base import (AttributeMutationNew, MethodVariable, VariableTracker, builder_for, call_python,
                   check_constant_args, register_builder)
from ..diagnostics.describe import describe
from .sequences import TupleVariable
from .stop_values import chain_has_pending, pending_value


class ExceptionVariable(VariableTracker):
    """An exception instance created while tracing.  ``exc`` is the real object, made at
    trace time; attribute writes on it (``e.extra = 5``, ``__cause__``, ``__traceback__``)
    must be constants and are made on it.  If it escapes (returned, stored, live across a
    break) the generated code makes a fresh copy of it once (:func:`fresh_exception`), so
    every call gets its own object with eager's args, attributes and chaining."""

    def __init__(self, exc: BaseException, **kwargs) -> None:
        kwargs.setdefault("mutation_type", AttributeMutationNew())
        super().__init__(**kwargs)
        self.exc = exc
        #: the tracker of a ``StopIteration``'s value that is not a constant (stop_values.py)
        self.pending = pending_value(exc)

    def _repr_body(self) -> str:
        return repr(self.exc)

    def python_type(self) -> type:
        return type(self.exc)

    def as_python_constant(self):
        """The real object: the handlers match, re-raise and chain it by identity."""
        return self.exc

    def is_python_constant(self) -> bool:
        # not a constant to generic code (``str(e)``, ``e == x``...) when its chain holds
        # a value that is not one: the placeholder must not be read (stop_values.py)
        return not chain_has_pending(self.exc)

    def children(self) -> list[VariableTracker]:
        return [self.pending] if self.pending is not None else []

    def _pending_break(self, what: str):
        return unsupported("StopIteration value that is not a constant", f"the exception {what}",
                           "Only e.value and e.args of such a StopIteration are traced.")

    def identity(self):
        return self.exc

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if self.pending is not None:
            if name == "value":
                return self.pending
            if name == "args":
                return TupleVariable([self.pending])
            if name not in ("__cause__", "__context__", "__suppress_context__", "__class__"):
                raise self._pending_break(f"attribute {name}")
        attr = call_python("getattr", getattr, self.exc, name)
        if isinstance(attr, types.BuiltinMethodType) and attr.__self__ is self.exc:
            return MethodVariable(self, name)  # ``e.with_traceback``, ``e.add_note``
        return VariableTracker.build(tx, attr)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        """BaseException's methods: ``with_traceback(None)`` (as ``unittest`` stores a caught
        exception) and the others with constant arguments, on the trace-time object."""
        if self.pending is not None and name != "with_traceback":
            raise self._pending_break(f"method {name}")
        if name == "with_traceback" and len(args) == 1 and not kwargs:
            if not (args[0].is_python_constant() and args[0].as_python_constant() is None):
                raise unsupported("exception traceback", f"{describe(self)}.with_traceback(<traceback>)",
                                  "Tracebacks of exceptions raised in compiled code are not modelled.")
            self.exc.__traceback__ = None
            return self
        cargs, ckwargs = check_constant_args(f"{type(self.exc).__name__}.{name}", args, kwargs)
        result = call_python(name, getattr(self.exc, name), *cargs, **ckwargs)
        return self if result is self.exc else VariableTracker.build(tx, result)

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.exc, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if isinstance(value, ExceptionVariable):
            v = value.exc
        elif value.is_python_constant() and not isinstance(value.as_python_constant(), (list, dict, set)):
            v = value.as_python_constant()
        else:
            raise unsupported("attribute write on an exception", f"{describe(self)}.{name} = {describe(value)}",
                              "Exceptions made in compiled code hold constants only.")
        call_python("setattr", setattr, self.exc, name, v)

    def reconstruct(self, cg) -> None:
        if self.pending is not None and self.exc.__cause__ is None and self.exc.__context__ is None \
                and not self.exc.__suppress_context__ and not vars(self.exc):
            cg.push_null()
            cg.load_const(StopIteration)
            cg.reconstruct(self.pending)
            cg.call(1)
            return
        if chain_has_pending(self.exc):
            raise self._pending_break("escapes with a cause, context or attributes")
        cg.push_null()
        cg.load_const(fresh_exception)
        cg.load_const(self.exc)
        cg.call(1)


def fresh_exception(template: BaseException, _memo=None) -> BaseException:
    """A new exception like ``template``: same class and args, instance attributes, and
    fresh copies of the exceptions it chains to."""
    memo = {} if _memo is None else _memo
    if id(template) in memo:
        return memo[id(template)]
    cls = type(template)
    if any(isinstance(k.__dict__.get("__init__"), types.FunctionType) for k in cls.__mro__):
        exc = BaseException.__new__(cls)  # its Python __init__ ran in the trace: not again
        exc.args = template.args
        exc.__dict__.update(template.__dict__)
    else:
        exc = copy.copy(template)  # class, args, __dict__, C-level fields (__reduce__)
    memo[id(template)] = exc
    for name in ("__cause__", "__context__"):
        linked = getattr(template, name)
        setattr(exc, name, None if linked is None else fresh_exception(linked, memo))
    exc.__suppress_context__ = template.__suppress_context__
    return exc


fresh_exception.__module__ = "graphjit_runtime"


@register_builder(BaseException)
def _build_exception(tx, value: BaseException, source):
    """An exception object reached while tracing (``e.__cause__``): data.  One that existed
    before the call and is reached through a source is an ordinary (guarded) object."""
    if source is not None:
        return builder_for(object())(tx, value, source)
    return ExceptionVariable(value)

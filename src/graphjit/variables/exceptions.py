"""Exception objects made while tracing (``raise ValueError("...")``, ``assert``).

An exception is data: the tracker holds the real exception object built at trace time
(its class is a builtin or its constructor is ``BaseException``'s, so building it runs no
user code).  ``RAISE_VARARGS`` turns it into an :class:`~graphjit.exc.ObservedException`:
the instruction then runs in Python after the graph, so the user gets this exception."""

from __future__ import annotations

from .base import VariableTracker, builder_for, call_python, register_builder


class ExceptionVariable(VariableTracker):
    """An exception instance created while tracing."""

    def __init__(self, exc: BaseException, **kwargs) -> None:
        super().__init__(**kwargs)
        self.exc = exc

    def _repr_body(self) -> str:
        return repr(self.exc)

    def python_type(self) -> type:
        return type(self.exc)

    def as_python_constant(self):
        return self.exc

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return VariableTracker.build(tx, call_python("getattr", getattr, self.exc, name))

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(type(self.exc))
        for arg in self.exc.args:
            cg.load_const(arg)
        cg.call(len(self.exc.args))


@register_builder(BaseException)
def _build_exception(tx, value: BaseException, source):
    """An exception object reached while tracing (``e.__cause__``): data.  One that existed
    before the call and is reached through a source is an ordinary (guarded) object."""
    if source is not None:
        return builder_for(object())(tx, value, source)
    return ExceptionVariable(value)

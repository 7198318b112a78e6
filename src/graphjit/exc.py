"""The three kinds of error graphjit knows, never mixed (STYLE.md habit 8).

* :class:`Unsupported`: a graph break.  Something graphjit does not (yet) trace.  It
  carries a structured reason (``gb_type``, ``context``, ``explanation``, ``hints``) and
  the user's source location, so every break can say what, where and how to fix.
* :class:`InternalError`: a bug in graphjit.  Never swallowed in tests; with
  ``config.suppress_errors`` the frame falls back to eager and the error is logged.
* :class:`ObservedException`: the *user's* program raised while graphjit evaluated it
  at trace time (``[].pop()``, a missing attribute, ``l.index(99)``).  It unwinds the
  inlined frames (no handler in them can be modelled yet); ``getattr``/``hasattr`` catch
  an observed ``AttributeError``; at the root frame the instruction that raised is run in
  Python after the graph, so the user gets eager's exception, with every side effect before
  it applied once.  It is not a graph break and is allowed under ``fullgraph=True``.
"""

from __future__ import annotations

import dataclasses
import linecache

from .break_hints import hints_for


@dataclasses.dataclass(frozen=True)
class UserFrame:
    """One user source location: ``filename:lineno`` in function ``name``."""

    filename: str
    lineno: int
    name: str

    @property
    def line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self) -> str:
        return f'File "{self.filename}", line {self.lineno}, in {self.name}\n    {self.line}'


class GraphjitError(Exception):
    """Base of graphjit's own exceptions."""


class Unsupported(GraphjitError):
    """A construct graphjit cannot put in a graph: a graph break.

    ``user_stack`` is innermost-last: the chain of inlined frames down to the construct.
    """

    def __init__(
        self,
        gb_type: str,
        context: str = "",
        explanation: str = "",
        hints: tuple[str, ...] = (),
    ) -> None:
        self.gb_type = gb_type
        self.context = context
        self.explanation = explanation
        self.hints = tuple(hints)
        self.user_stack: list[UserFrame] = []
        self.user_error = False  # the program raised here (not a graph break)
        self.instruction: str | None = None  # the opcode the frame broke at
        self.resumed: str | None = None      # how execution continued after it
        super().__init__(gb_type)

    @property
    def reason(self) -> str:
        """One line: the break's type and context."""
        return f"{self.gb_type}: {self.context}" if self.context else self.gb_type

    def add_frame(self, frame: UserFrame) -> None:
        """Record an enclosing user frame (called while the error unwinds outwards)."""
        self.user_stack.insert(0, frame)

    def __str__(self) -> str:
        lines = [self.reason]
        if self.explanation:
            lines.append(f"  Explanation: {self.explanation}")
        for hint in self.hints:
            lines.append(f"  Hint: {hint}")
        if self.instruction:
            lines.append(f"  Broke at: {self.instruction} ({self.resumed})")
        if self.user_stack:
            lines.append("  User code (innermost last):")
            for fr in self.user_stack:
                lines.extend("    " + ln for ln in str(fr).splitlines())
        return "\n".join(lines)


class InternalError(GraphjitError):
    """A bug in graphjit, with the user location it happened at when known."""


class BackendCompilerFailed(GraphjitError):
    """The backend raised while compiling a graph (torch.compile's ``BackendCompilerFailed``):
    the backend's exception is ``__cause__``; the message names the backend, the graph and
    the user's frame it was traced from."""


class ObservedException(GraphjitError):
    """The traced program raised ``exc`` (a real exception object, as eager would raise it)."""

    #: raised out of a generator's ``next``/``send``/``throw``/``close`` (the generator
    #: cannot be run again in Python: see ``tracer/raise_at_end.py``)
    from_generator = False

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        super().__init__(f"{type(exc).__name__}: {exc}")

    def is_attribute_error(self) -> bool:
        return isinstance(self.exc, AttributeError)


def observed(exc_type: type, *args) -> ObservedException:
    """Build (not raise) an :class:`ObservedException` for ``exc_type(*args)``."""
    return ObservedException(exc_type(*args))


class RestartAnalysis(GraphjitError):
    """Tracing must start again from the first instruction (a break was recorded)."""


def unsupported(gb_type: str, context: str = "", explanation: str = "", hints=()) -> Unsupported:
    """Build (not raise) an :class:`Unsupported`; callers write ``raise unsupported(...)``.
    Without ``hints`` the break gets its kind's hint (``break_hints.py``)."""
    return Unsupported(gb_type, context, explanation, tuple(hints) or hints_for(gb_type))


def drop_tracebacks(e: BaseException) -> BaseException:
    """``e`` (and the exceptions it was raised from) without their tracebacks: a reason
    kept for later (``graphjit.stats()``, the report) must not keep the tracer's frames
    alive, and with them the call's arguments.  Returns ``e``."""
    seen: set[int] = set()
    stack: list = [e]
    while stack:
        x = stack.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        x.__traceback__ = None
        stack += [x.__cause__, x.__context__]
    return e

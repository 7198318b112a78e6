"""``StopIteration.value`` that is not a constant (a generator returning a tensor or an
object made in the trace, seen through ``throw``/``send``/``next``).

The trace keeps exceptions as real objects (``exceptions.ExceptionVariable``), which can
hold constants only.  Contract: such a ``StopIteration`` is a real one whose only arg is
a :class:`PendingValue` holding the return value's tracker; its tracker reads ``e.value``
and ``e.args`` as that tracker, and everything else that would read the real object
(``str(e)``, other methods, use as a constant, a copy in a chain of another exception)
is a graph break, never the placeholder.  Where it escapes on its own (no cause, context
or attributes) it is rebuilt as ``StopIteration(value)``.
"""

from __future__ import annotations


class PendingValue:
    """The placeholder arg: ``tracker`` is the value (its repr is for messages only)."""

    __slots__ = ("tracker",)

    def __init__(self, tracker) -> None:
        self.tracker = tracker

    def __repr__(self) -> str:
        return "<a value computed in the trace>"


def stop_iteration_with(tracker) -> StopIteration:
    """A ``StopIteration`` whose value is ``tracker`` (not a constant)."""
    return StopIteration(PendingValue(tracker))


def pending_value(exc: BaseException):
    """The tracker of ``exc``'s value if it is such a ``StopIteration``, else ``None``."""
    args = getattr(exc, "args", ())
    if isinstance(exc, StopIteration) and len(args) == 1 and isinstance(args[0], PendingValue):
        return args[0].tracker
    return None


def chain_has_pending(exc: BaseException | None, seen: set[int] | None = None) -> bool:
    """Whether ``exc`` or an exception it chains to holds a :class:`PendingValue`."""
    seen = set() if seen is None else seen
    if exc is None or id(exc) in seen:
        return False
    seen.add(id(exc))
    if any(isinstance(a, PendingValue) for a in getattr(exc, "args", ())):
        return True
    return chain_has_pending(exc.__cause__, seen) or chain_has_pending(exc.__context__, seen)

"""Generators the compiled frame leaves open are closed when it returns.

CPython closes a generator when its last reference dies: a generator made in a function,
started and left suspended, is closed (``GeneratorExit`` raised at its ``yield``, its
``finally`` blocks run) when the frame's locals are cleared on return, before the caller
sees the result.  A generator made while tracing exists only as a tracker, so the trace
does that itself: at the root frame's ``RETURN_VALUE``, every generator created in this
trace that started and did not finish, and that nothing the frame leaves behind can reach
(the return value, values stored into pre-existing objects, cells and globals), is closed
in creation order, as TorchDynamo closes its local generators.  An exception raised by
that close (eager prints it as an unraisable exception and goes on) is a graph break.
"""

from __future__ import annotations

from ..exc import ObservedException, unsupported
from ..variables.base import VariableTracker


def register_generator(tx, gen: VariableTracker) -> None:
    """Record a generator made while tracing on the root frame (``tx``'s outermost)."""
    root = tx
    while root.parent is not None:
        root = root.parent
    gens = getattr(root, "local_generators", None)
    if gens is not None:
        gens.append(gen)


def _reachable(roots: list) -> set[int]:
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
            continue
        if not isinstance(item, VariableTracker) or id(item) in seen:
            continue
        seen.add(id(item))
        stack.extend(item.children())
    return seen


def close_abandoned_generators(tx, return_value: VariableTracker) -> None:
    """Close the root frame ``tx``'s open, unreachable generators (see the module
    docstring)."""
    open_gens = [g for g in getattr(tx, "local_generators", ())
                 if g.frame.started and not g.frame.exhausted]
    if not open_gens:
        return
    log = tx.output.side_effects.log
    live = _reachable([return_value, *[(e.target, e.value) for e in log]])
    for gen in open_gens:
        if id(gen) in live or gen.frame.exhausted:
            continue
        try:
            gen.call_method(tx, "close", [], {})
        except ObservedException as e:
            raise unsupported("exception while closing a generator",
                              f"{gen!r}.close() raised {type(e.exc).__name__}: {e.exc}",
                              "A generator left open by the compiled frame is closed when it "
                              "returns; eager reports this exception as unraisable.") from None

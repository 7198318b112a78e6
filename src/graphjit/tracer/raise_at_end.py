"""An exception a generator raises out of the compiled frame ends the graph.

A user exception that leaves the root frame is normally a break *before* the raising
instruction: the graph so far runs, then the instruction runs again in Python and raises
there.  When the instruction is a generator's ``next``/``send``/``throw``/``close`` that
cannot work: running it in Python needs the real generator in the state the trace left it
in, which a generator whose steps wrote outside it (a ``nonlocal``, a list append) cannot
be rebuilt in; and the generator's own handlers and ``finally`` blocks, which ran in the
trace on the way out, would then not be in the graph.

The same holds where the frame's own handlers (a ``finally``, a ``with`` block's exit, a
bare ``raise``) run and re-raise that same exception object.

Contract: such an exception ends the trace where it leaves the frame, as a return does:
the graph runs, the side effects recorded up to that point (the generator's ``finally``
blocks included) are replayed in program order, and a fresh copy of the exception (class,
args, attributes, ``__cause__``/``__context__`` chain: ``exceptions.fresh_exception``) is
raised.  Only where that is exact:

* the exception and every exception it chains to hold plain constants only (args and
  instance attributes), so the copy is eager's; or it is a ``StopIteration`` alone whose
  value is not a constant (``variables/stop_values.py``), rebuilt as ``StopIteration(value)``;
* no generator made in the trace is left suspended: eager keeps such a generator alive
  in the traceback and closes it when the traceback dies (its ``finally`` runs then), which
  the trace cannot time.

Otherwise the usual break before the instruction is kept (where the generator cannot be
rebuilt, that is the "generator escapes the graph" break, a fullgraph error).  The
traceback starts at the compiled frame, not at the generator's line.
"""

from __future__ import annotations

from ..exc import ObservedException
from ..variables.stop_values import pending_value

_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def _plain(value) -> bool:
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return type(value) in _PLAIN


def _rebuildable(exc: BaseException | None, seen: set[int]) -> bool:
    """``exc`` and its chain copy exactly with constants only."""
    if exc is None or id(exc) in seen:
        return True
    seen.add(id(exc))
    if pending_value(exc) is not None:  # rebuilt as StopIteration(value) on its own only
        return not seen - {id(exc)} and exc.__cause__ is None and exc.__context__ is None \
            and not exc.__suppress_context__ and not vars(exc)
    if not _plain(exc.args) or not all(_plain(v) for v in getattr(exc, "__dict__", {}).values()):
        return False
    if isinstance(exc, StopIteration) and not _plain(exc.value):
        return False
    return _rebuildable(exc.__cause__, seen) and _rebuildable(exc.__context__, seen)


def ends_frame_raising(tx, error: ObservedException) -> bool:
    """Whether ``error``, leaving the root frame ``tx`` at its current instruction, ends
    the trace there (see the module docstring)."""
    from_generator = error.from_generator or any(error.exc is e for e in tx.generator_exceptions)
    if not from_generator or not _rebuildable(error.exc, set()):
        return False
    return not any(g.frame.started and not g.frame.exhausted for g in tx.local_generators)

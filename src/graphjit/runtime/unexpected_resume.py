"""The resume function after an instruction the trace saw raise.

When an instruction raises during tracing (``ObservedException``: the program's own
error, as far as the trace can tell), the frame is compiled up to it, the instruction
runs in Python (where it raises the user's exception), and a resume function follows it
for the calls where it does not raise.  Where the trace is wrong (a fake kernel fails and
the real one does not; a Python operation graphjit models as raising), the instruction
does not raise, and the frame goes on in the resume function: it has been split as at a
graph break.

Contract: :class:`UnexpectedResume` stands in for that resume function in the generated
code.  Its first call records the split as a graph break (``graph_breaks``,
``break_reasons``, the ``graph_breaks`` log) naming the instruction and the error the
trace saw, so no frame is split without being counted; every call runs the resume
function unchanged.
"""

from __future__ import annotations

import threading
import types
from typing import Any

from ..diagnostics import logs
from ..exc import Unsupported, UserFrame, unsupported
from . import stats


class UnexpectedResume:
    """The resume function ``resume`` of ``fn`` after the raising instruction of
    ``reason`` (an ``Unsupported`` with ``user_error`` set)."""

    _graphjit_runtime = True
    #: the persistent cache writes it as what it records (:meth:`__reduce__`): a process
    #: that loads it records the split on its own first call
    __graphjit_portable__ = True

    def __init__(self, resume: Any, fn: types.FunctionType | str, reason: Unsupported | tuple, opname: str) -> None:
        self.resume = resume
        self.fn_name = fn if isinstance(fn, str) else fn.__qualname__
        # (what the record needs: the context's first line and the user's stack)
        self.context, self.user_stack = reason if isinstance(reason, tuple) else (
            (reason.context.splitlines() or [""])[0],
            tuple((f.filename, f.lineno, f.name) for f in reason.user_stack))
        self.opname = opname
        self.recorded = False
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple:
        return (UnexpectedResume, (self.resume, self.fn_name, (self.context, self.user_stack), self.opname))

    def __repr__(self) -> str:
        return f"UnexpectedResume({self.fn_name} at {self.opname}, recorded={self.recorded})"

    def __call__(self, *args, **kwargs):
        if not self.recorded:
            with self._lock:
                if not self.recorded:
                    self.recorded = True
                    self._record()
        return self.resume(*args, **kwargs)

    def _record(self) -> None:
        reason = unsupported(
            "instruction did not raise", self.context,
            "Tracing found that this instruction raises, but it did not when it ran (an "
            "operator that fails on fake values, or a Python operation graphjit models as "
            "raising); the frame continues after it in a resume function.",
            ["If an operator's fake (meta) implementation is wrong, fix it "
             "(torch.library.register_fake); otherwise report it to graphjit."])
        reason.user_stack = [UserFrame(*where) for where in self.user_stack]
        reason.instruction = self.opname
        reason.resumed = "the instruction ran in Python, then a resume function"
        stats.bump("graph_breaks")
        stats.record("break_reasons", reason)
        logs.emit("graph_breaks", f"Graph break in {self.fn_name} at {self.opname} "
                                  f"({reason.resumed}): {reason}")

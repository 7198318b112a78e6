"""Logging artifacts, selected like TORCH_LOGS: ``GRAPHJIT_LOGS=graph_code,bytecode,guards,
graph_breaks,recompiles,decompiled`` (comma list) or :func:`set_logs` from Python
(``decompiled``: each transformed function and its resume functions as Python).  Output goes to the
``graphjit`` logger, which prints to stderr when any artifact is on."""

from __future__ import annotations

import logging
import os
import sys

from .. import config
from .describe import check_user_text

ARTIFACTS = ("graph_code", "bytecode", "guards", "graph_breaks", "recompiles", "decompiled", "cache")
_enabled: set[str] = set()
log = logging.getLogger("graphjit")
_handler: logging.Handler | None = None


class _StderrHandler(logging.Handler):
    """Writes each message to ``sys.stderr`` as it is when the message is logged (a
    redirected or captured stderr gets it; a handler made once would keep the first)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001  (logging must not raise into the program)
            self.handleError(record)


def set_logs(spec: str | list[str] | tuple[str, ...] | None = None, **flags: bool) -> None:
    """Enable artifacts: ``set_logs("graph_code,guards")`` or ``set_logs(guards=True)``;
    ``set_logs("")`` turns all off."""
    global _handler
    names = spec.split(",") if isinstance(spec, str) else list(spec or [])
    names = [n.strip() for n in names if n.strip()]
    names += [k for k, v in flags.items() if v]
    unknown = [n for n in names if n not in ARTIFACTS]
    if unknown:
        raise ValueError(f"unknown log artifact(s) {unknown}; known: {', '.join(ARTIFACTS)}")
    _enabled.clear()
    _enabled.update(names)
    if _enabled and _handler is None:
        _handler = _StderrHandler()
        _handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(_handler)
        log.propagate = False
    if _enabled and not log.isEnabledFor(logging.INFO):  # (a caller may have reset the level)
        log.setLevel(logging.INFO)


def enabled(artifact: str) -> bool:
    return artifact in _enabled


def wanted(artifact: str) -> bool:
    """Whether a text for ``artifact`` should be made: it is logged, or the debug checks
    read every text (a text costly to make, such as a deep model's guard list, is made
    only then)."""
    return artifact in _enabled or config.debug_checks


def emit(artifact: str, text: str) -> None:
    """Log ``text`` if ``artifact`` is on.  With ``config.debug_checks`` every line, logged
    or not, is checked to show no tracker's repr (``describe.check_user_text``)."""
    check_user_text(text)
    if artifact in _enabled:
        log.info(text)


set_logs(os.environ.get("GRAPHJIT_LOGS", ""))

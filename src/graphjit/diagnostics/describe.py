"""What a person reads about a traced value, and the check that no message shows a tracker.

Contract:

* :func:`describe(value) <describe>` names a value for a break or recompile reason: its
  Python type and, when short, its value (``an int (3)``, ``a Tensor float32[2, 3]``, ``a
  symbolic float``, ``a list of 3 items``, ``a Counter object``) -- never a tracker's
  ``repr`` (that is for debuggers).  It reads what a tracker already knows: a lazy
  tracker is not realized (no guard is added), a symbolic number is not specialized.
* :func:`check_user_text(text) <check_user_text>` raises ``InternalError`` when a message
  meant for the user contains a tracker's repr (``SomethingVariable(``,
  ``LazyVariableTracker``); ``diagnostics/logs.py`` and ``runtime/stats.py`` run it on
  every log line, break reason and skipped-frame reason while ``config.debug_checks`` is
  on (always in tests).

This module imports no tracker module: it duck-types them (``python_type``,
``peek_value``, ``value``, ``example_value``), so every layer may use it.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from .. import config
from ..exc import InternalError

_TRACKER_REPR = re.compile(r"\b[A-Z]\w*Variable\(|\bLazyVariableTracker\b|\bVariableTracker\(")
_SHORT = 40


def _is_tracker(value: Any) -> bool:
    return any(c.__name__ == "VariableTracker" for c in type(value).__mro__)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


_PRIMITIVE = (int, float, complex, str, bytes, bool, type(None))


def _short(value: Any) -> str | None:
    """A short repr of a primitive, or of a small container of primitives (no user
    ``__repr__`` runs: it could be slow or have effects)."""
    if not isinstance(value, _PRIMITIVE) and not (
            isinstance(value, (list, tuple, set, frozenset)) and all(type(v) in _PRIMITIVE for v in value)) \
            and not (isinstance(value, dict) and all(type(v) in _PRIMITIVE for kv in value.items() for v in kv)):
        return None
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001  (a broken __repr__ must not break a message)
        return None
    return text if len(text) <= _SHORT and "\n" not in text and not _TRACKER_REPR.search(text) else None


def describe_python(value: Any) -> str:
    """A real Python value: ``an int (3)``, ``a str ('abc')``, ``a Counter object``."""
    if isinstance(value, torch.Tensor):
        return f"a Tensor {str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if isinstance(value, type):
        return f"the class {value.__qualname__}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"the {type(value).__name__} {value.__qualname__}"
    name = type(value).__name__
    if isinstance(value, (list, tuple, dict, set, frozenset)) and len(value) > 3:
        return f"{_article(name)} {name} of {len(value)} items"
    short = _short(value) if isinstance(value, (int, float, complex, str, bytes, bool, type(None), list,
                                                tuple, dict, set, frozenset, range, slice)) else None
    if short is not None:
        return f"{_article(name)} {name} ({short})"
    return f"{_article(name)} {name} object"


def describe(value: Any) -> str:
    """See the module docstring."""
    try:
        return _describe(value)
    except Exception:  # noqa: BLE001  (naming a value must never fail the trace)
        return f"a {type(value).__name__.removesuffix('Variable') or 'value'}"


def _describe(value: Any) -> str:
    if not _is_tracker(value):
        return describe_python(value)
    if type(value).__name__ == "LazyVariableTracker":
        if not value.is_realized():
            return describe_python(value.peek_value())
        value = value.realize()
    name = type(value).__name__
    if name == "SymNodeVariable":
        return f"a symbolic {value.python_type().__name__}"
    if hasattr(value, "value") and name in ("ConstantVariable", "EnumVariable"):
        return describe_python(value.value)
    example = _example(value)
    if example is not None:
        return describe_python(example)
    items = getattr(value, "items", None)
    try:
        kind = value.python_type()
    except Exception:  # noqa: BLE001  (a tracker that cannot say its type)
        kind = None
    if kind is not None:
        if isinstance(items, (list, tuple)):
            return f"{_article(kind.__name__)} {kind.__name__} of {len(items)} items"
        real = getattr(value, "value", None)
        if real is not None and not _is_tracker(real):
            return describe_python(real)
        return f"{_article(kind.__name__)} {kind.__name__} object"
    return "a value graphjit cannot name"


def _example(value: Any) -> Any:
    try:
        ev = getattr(type(value), "example_value", None)
        if ev is None:
            return None
        ex = value.example_value() if callable(ev) else value.example_value
    except Exception:  # noqa: BLE001
        return None
    return ex if isinstance(ex, torch.Tensor) else None


_USER_LINE = re.compile(r'File "[^"\n]*", line \d+, in [^\n]*\n[^\n]*')


def check_user_text(text: str) -> None:
    """Debug check (see the module docstring); the user's own source lines quoted after
    ``File "...", line N`` are not checked."""
    if config.debug_checks and _TRACKER_REPR.search(_USER_LINE.sub("", text)):
        raise InternalError(f"a message for the user shows a tracker's repr: {text[:300]!r}")

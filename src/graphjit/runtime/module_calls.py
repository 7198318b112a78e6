"""One compiled call per module class and compile options, shared by every
``graphjit.compile(module)`` of that class (as torch.compile's cache, which lives on the
code object of the module's call: three ``Sequential`` instances compiled one by one make
one graph, not three).

Contract:

* :func:`shared_module_call` returns the :class:`CompiledFunction` of ``call_object`` for
  ``(type(module), backend, fullgraph, dynamic, mode, options)``; a second
  ``CompiledModule`` of the same class with the same options gets the same object, so the
  entries (and the recompile limit) are shared, per class, as torch.compile's per code
  object.  Different options never share (their entries would differ by backend anyway).
* Its traces treat the module as *generic* from the first trace (``graph/shapes.py``):
  guarded by type and by every attribute read, its parameters and buffers graph inputs,
  so one entry serves every instance.  Any state an instance differs by (a parameter's
  value, ``training``, a hook, a ``forward`` set on the instance) is read per call or
  guarded.
* The compiled calls live as long as their class (or until ``graphjit.reset()``, which
  forgets them with everything the sessions recorded, as ``torch._dynamo.reset()``): a
  ``CompiledModule`` made again for another instance later finds the entries, as
  torch.compile's cache on the code object.  Options that cannot be hashed (a dict of
  unhashable values, an unhashable backend object) get a call of their own.
"""

from __future__ import annotations

import weakref
from typing import Any

from .dispatch import CompiledFunction, call_object

#: class -> {options key: the compiled call}
_SHARED: "weakref.WeakKeyDictionary[type, dict]" = weakref.WeakKeyDictionary()


def _options_key(options: dict[str, Any]) -> tuple | None:
    opts = dict(options)
    extra = opts.pop("options", None)
    key = (*sorted(opts.items()), tuple(sorted(extra.items())) if extra else None)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def shared_module_call(module, **options: Any) -> CompiledFunction:
    """The compiled ``call_object`` every ``CompiledModule`` of ``type(module)`` compiled
    with these options shares (see the module docstring)."""
    key = _options_key(options)
    if key is None:
        return CompiledFunction(call_object, **options)
    calls = _SHARED.setdefault(type(module), {})
    cf = calls.get(key)
    if cf is None:
        cf = calls[key] = CompiledFunction(call_object, **options)
    return cf


def forget_shared_calls() -> None:
    """``graphjit.reset()``: a module compiled from now on starts a new session (no sizes
    or instances seen), as after ``torch._dynamo.reset()``."""
    _SHARED.clear()


__all__ = ["shared_module_call", "forget_shared_calls"]

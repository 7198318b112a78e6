"""One compiled call per module class and compile options, shared by every
``graphjit.compile(module)`` of that class (as torch.compile's cache, which lives on the
code object of the module's call: three ``Sequential`` instances compiled and then called
make one graph, not three).

Contract:

* :func:`shared_module_call` returns the :class:`CompiledFunction` of ``call_object`` for
  ``(type(module), backend, fullgraph, dynamic, mode, options)``; a second
  ``CompiledModule`` of the same class with the same options gets the same object, so the
  entries (and the recompile limit) are shared, per class, as torch.compile's per code
  object.  Different options never share (their entries would differ by backend anyway).
* While one module of a class has been compiled (``graphjit.compile`` again on the same
  module changes nothing), its traces are *specialized* to its
  module (identity guards, parameters as graph attributes: the cheapest guards, what a
  user compiling one model pays per call).  From a second module on, the call's traces
  are *generic* (``graph/shapes.py``: guarded by type and by every attribute read,
  parameters and buffers graph inputs), so one entry serves every instance: instances
  wrapped before their first call make one graph, as torch.compile's; an instance
  compiled and called before the second is wrapped keeps its specialized entry, and the
  others share one generic entry (2 graphs; torch.compile 1).
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

#: class -> {options key: (the compiled call, the modules compiled with it)}
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
    known = calls.get(key)
    if known is None:
        known = calls[key] = (CompiledFunction(call_object, **options), weakref.WeakSet())
    cf, modules = known
    if modules and module not in modules:  # a second module of the class: generic from now on
        cf._session.hooks.shapes.for_code(call_object.__code__).make_modules_generic()
    modules.add(module)
    return cf


def forget_shared_calls() -> None:
    """``graphjit.reset()``: a module compiled from now on starts a new session (no sizes
    or instances seen), as after ``torch._dynamo.reset()``."""
    _SHARED.clear()


__all__ = ["shared_module_call", "forget_shared_calls"]

"""Libraries set up on first use, as torch.compile sets them up (its lazy module init
functions).

Contract.

* A set-up function is registered for a library's root module name
  (:func:`register`).  It runs once per process, eagerly (real tensors: no fake or
  dispatch mode the trace may have entered, no graphjit), the first time traced code
  builds a callable whose ``__module__`` is in that library (:func:`on_first_use`, called
  by ``variables/builder.build_callable``): before the trace reads anything the
  library's code reads; or when the persistent cache checks, in a new process, a written
  entry whose guard reads the library's modules (:func:`before_loaded_guard`, called by
  ``cache/entries.EntryPayload.bind``: the trace that wrote it ran after the set-up, and
  without it every new process would miss).  ``graphjit.reset()`` does not arm it again (nor does
  ``torch._dynamo.reset()`` torch.compile's).  A set-up that raises is ignored: it only
  spares a recompile, and without it the trace reads the library as it is.
* This mirrors ``torch._dynamo.trace_rules.add_module_init_func`` /
  ``_maybe_init_lazy_module`` (torch 2.13: ``torch/_dynamo/trace_rules.py:3297-3316``;
  2.14: ``:3322-3341``), which run a library's init the first time Dynamo looks a
  callable of it up.  Only the set-ups torch.compile has are registered here, each
  citing its source; a set-up changes what the process holds before the program's own
  first call, exactly as torch.compile's does, and nothing else.
* Registered: **einops** (0.8.2 and later): ``einops.rearrange(torch.empty(1), "i -> i")``,
  as ``_allow_in_graph_einops`` does (torch 2.13: ``torch/_dynamo/decorators.py:1501-1508``,
  registered at ``:1539``; 2.14: ``:1447-1454``, ``:1485``), "to avoid a later guard failure
  that would otherwise cause a recompilation": einops fills its backend registries
  (``einops._backends._loaded_backends``, ``_type2backend``) on its first call.  Without
  the set-up, a compiled function making the process's first einops call traces the
  "registry empty" path, its replayed writes fill the registry, and the second call's
  guard on the registry fails: two graphs where torch.compile has one.  Once set up, the
  trace reads the filled registry and guards on it as on any dict: a program that empties
  it later recompiles and follows eager (``tests/test_first_use_registries.py``).  For
  einops before 0.8.2 torch.compile makes einops' ops graph nodes instead; graphjit
  traces them (not mirrored).

A registry filled on first use by the program itself (a rotary-frequency cache in a
module-level dict or an attribute) is not a library set-up: the first call takes the
"absent" path, the second the "present" one, and both systems trace each once (two
graphs, measured equal to torch.compile's in the same test file).  Its guard is not
relaxed: the cached value may no longer be what the first path computes.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

import torch
from torch._vendor.packaging.version import InvalidVersion, Version
from torch.utils._python_dispatch import _disable_current_modes

__all__ = ["register", "on_first_use", "before_loaded_guard"]

#: root module name -> set-up functions not run yet (an entry is removed when it runs)
_pending: dict[str, list[Callable[[], None]]] = {}


def register(root: str, setup: Callable[[], None]) -> None:
    """Run ``setup()`` once, the first time traced code builds a callable of ``root``."""
    if "." in root:
        raise ValueError(f"expected a root module name, got {root!r}")
    _pending.setdefault(root, []).append(setup)


def on_first_use(value: Any) -> None:
    """Run the pending set-ups of ``value``'s library (one dict check when none is)."""
    if not _pending:
        return
    module = getattr(value, "__module__", None)
    if isinstance(module, str):
        _run(module.partition(".")[0])


def before_loaded_guard(constants: list) -> None:
    """Run the pending set-ups of the libraries whose modules (or modules' globals) are
    among a written entry's guard constants, before its guard is checked in a new
    process: the trace that wrote it read those after the set-up had run there."""
    if not _pending:
        return
    for value in constants:
        if isinstance(value, types.ModuleType):
            name = value.__name__
        elif isinstance(value, dict) and isinstance(value.get("__name__"), str) and \
                getattr(sys.modules.get(value["__name__"]), "__dict__", None) is value:
            name = value["__name__"]
        else:
            continue
        if isinstance(name, str):
            _run(name.partition(".")[0])
            if not _pending:
                return


def _run(root: str) -> None:
    setups = _pending.pop(root, None)
    for setup in setups or ():
        try:
            with _disable_current_modes(), torch._C.DisableTorchFunction():
                setup()
        except Exception:  # noqa: BLE001  (a set-up only spares a recompile)
            pass


def _einops_setup() -> None:
    einops = sys.modules.get("einops")
    if einops is None:
        return
    try:  # (the version read as torch.compile reads it)
        recent = Version(einops.__version__) >= Version("0.8.2")
    except (AttributeError, InvalidVersion):
        return  # (torch.compile: an unparsable version is not 0.8.2 or later)
    if recent and hasattr(getattr(einops, "einops", None), "get_backend"):
        einops.rearrange(torch.empty(1), "i -> i")


register("einops", _einops_setup)

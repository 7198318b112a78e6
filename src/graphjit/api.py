"""The public entry points: compile, reset, stats, list_backends, register_backend."""

from __future__ import annotations

import types
from typing import Any, Callable

import torch

from . import cache as _cache
from .backends.registry import list_backends, register_backend
from .runtime import stats as _stats
from .runtime.call_forms import canonical_call
from .runtime.dispatch import CompiledFunction, ObjectCall, call_object, reset_all
from .runtime.module_calls import forget_shared_calls, shared_module_call
from .runtime.persist import flush as flush_cache_writes


class CompiledModule(torch.nn.Module):
    """``graphjit.compile(module)``: an ``nn.Module`` whose call is compiled.

    Like torch.compile's ``OptimizedModule``: the original is ``_orig_mod`` (so state-dict
    keys gain an ``_orig_mod.`` prefix) and other attributes are forwarded to it.  It is
    not an ``OptimizedModule`` for ``isinstance`` (that class is TorchDynamo's, and graphjit
    uses none of Dynamo): a library that recognises a compiled model only that way
    (accelerate's ``is_compiled_module``) sees a plain module, and ``_orig_mod`` unwraps it.
    What is
    compiled is the call ``mod(*args)`` itself, so a ``forward`` patched on the instance
    later, hooks and ``training`` are seen (and guarded) like in any traced call.  Every
    ``CompiledModule`` of one class with the same options shares its compiled call
    (``runtime/module_calls.py``): specialized to the module while it is the only one, generic
    once a second module of the class is compiled (instances wrapped before their first
    call: one graph, as torch.compile's)."""

    _graphjit_runtime = True  # eager code calls it as it is (it compiles itself)
    #: the wrapper's own state (everything else is the wrapped module's)
    _OWN_ATTRIBUTES = frozenset({"_orig_mod", "_compiled_call", "_options"})

    def __init__(self, mod: torch.nn.Module, **options: Any) -> None:
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled_call"] = shared_module_call(mod, **options)
        self.__dict__["_options"] = options
        self.__dict__["_initialized"] = True

    def __reduce__(self):
        """Pickled (``torch.save``, ``copy.deepcopy``) as the wrapped module and the
        options, as torch.compile's ``OptimizedModule`` is: loading compiles it again
        (the compiled code is not saved; a backend that is not picklable is an error)."""
        return (_rebuild_compiled_module, (self._modules["_orig_mod"], self.__dict__["_options"]))

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._modules["_orig_mod"].training

    @training.setter
    def training(self, value: bool) -> None:
        # Module.__init__ sets the wrapper's default: ignored, the wrapped module's counts
        if self.__dict__.get("_initialized"):
            self._modules["_orig_mod"].training = value

    def __setattr__(self, name: str, value: Any) -> None:
        """As torch.compile's wrapper: an attribute of the wrapper's class or of its own
        state is set on it; any other is set on the wrapped module (so ``forward`` sees it)."""
        if hasattr(type(self), name) or name in self._OWN_ATTRIBUTES or not self.__dict__.get("_initialized"):
            return super().__setattr__(name, value)
        return setattr(self._modules["_orig_mod"], name, value)

    def __delattr__(self, name: str) -> None:
        if hasattr(type(self), name) or name in self._OWN_ATTRIBUTES:
            return super().__delattr__(name)
        return delattr(self._modules["_orig_mod"], name)

    def __len__(self) -> int:
        mod = self._modules["_orig_mod"]
        if hasattr(type(mod), "__len__"):
            return len(mod)
        raise TypeError(f"{type(mod).__name__} does not support len()")

    def __dir__(self) -> list[str]:
        inner = self._modules["_orig_mod"].__dir__()
        return inner + [a for a in super().__dir__() if a not in inner]

    def forward(self, *args, **kwargs):
        mod = self._modules["_orig_mod"]
        args, kwargs = canonical_call(mod, args, kwargs)
        return self.__dict__["_compiled_call"](mod, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        # the wrapper's own Module.__call__ only matters for hooks registered on the
        # wrapper itself; global hooks are the wrapped module's business (its call is traced)
        if self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or \
                self._backward_pre_hooks:
            return torch.nn.Module.__call__(self, *args, **kwargs)
        mod = self._modules["_orig_mod"]
        args, kwargs = canonical_call(mod, args, kwargs)
        return self.__dict__["_compiled_call"](mod, *args, **kwargs)

    def __getattr__(self, name: str):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __repr__(self) -> str:
        return f"CompiledModule({self._orig_mod!r})"


def _rebuild_compiled_module(mod: torch.nn.Module, options: dict) -> CompiledModule:
    return CompiledModule(mod, **options)


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Callable = "inductor", mode: str | None = None,
            options: dict | None = None, disable: bool = False):
    """Compile a function, bound method or ``nn.Module`` (like ``torch.compile``).

    Used as ``graphjit.compile(fn, backend="eager")`` or as a decorator, with or without
    arguments.  ``fullgraph=True`` raises :class:`graphjit.Unsupported` at the first
    construct that cannot be captured.  ``dynamic``: ``None`` (automatic: a dimension or
    number argument seen with a second value is symbolic from the next entry on),
    ``True`` (symbolic from the first trace) or ``False`` (a new shape or number
    recompiles); see :func:`mark_dynamic` and ``docs/architecture.md``."""
    opts = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options)
    if model is None:
        return lambda fn: compile(fn, **opts, disable=disable)
    if disable:
        return model
    _cache.prefetch()
    if isinstance(model, torch.nn.Module):
        return CompiledModule(model, **opts)
    if isinstance(model, types.MethodType):
        compiled = CompiledFunction(model.__func__, **opts)
        return types.MethodType(compiled, model.__self__)
    if isinstance(model, types.FunctionType):
        return CompiledFunction(model, **opts)
    if callable(model):  # an object with __call__: compile the call, as torch.compile does
        return ObjectCall(model, CompiledFunction(call_object, **opts))
    raise TypeError(f"graphjit.compile: cannot compile {type(model).__name__}: it is not callable")


def reset() -> None:
    """Forget every compiled entry and zero the counters."""
    reset_all()
    forget_shared_calls()


def stats() -> dict[str, Any]:
    """``{"graph_breaks", "break_reasons", "frames_total", "frames_ok", "recompiles"}``
    since the last :func:`reset` (and the persistent cache's counts: entries queued to be
    written are written first)."""
    flush_cache_writes()
    return _stats.snapshot()


__all__ = ["compile", "reset", "stats", "list_backends", "register_backend", "CompiledModule"]

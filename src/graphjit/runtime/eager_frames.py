"""Eager frames with their calls intercepted: graphjit's pure-Python stand-in for a frame
hook.

When graphjit runs user code in Python on the user's behalf (a frame it cannot trace, a
function past the recompile limit, a generator function), it runs a copy of the code made
by ``bytecode/intercept.py``: before each call, the callable goes through
:attr:`Interceptor.resolve`, which returns

* for a Python function the trace rules say to compile: its compiled stand-in (one cache
  per function; per *code object* for functions made by a ``def`` inside another
  function, whose guards read the closure);
* for a bound method: the same, bound to its ``self`` (when ``self`` is an ``nn.Module``,
  one compiled function serves every instance, its traces treating modules as generic);
* for an ``nn.Module`` other than a ``torch.nn`` leaf or a TorchScript module: a call
  that runs the module's call path (hooks included) with its class's ``forward`` compiled
  (shared, likewise);
* for a generator function or a ``graphjit.skip``-ped one: a copy of it whose own calls
  are intercepted;
* anything else (builtins, C functions, torch ops, classes, skipped files): itself.

The hot path is a type test and a dictionary read; decisions are cached per function,
per code object and per type.  :meth:`Interceptor.eager` gives the intercepted copy of a
function, refreshed when its defaults or closure change.
"""

from __future__ import annotations

import functools
import logging
import types
import weakref
from typing import Any, Callable

import torch

from ..bytecode.intercept import intercepted_code
from ..diagnostics import logs
from ..trace_rules import Rule, frame_rule, library_rule_reason, register_dependent_cache, trace_rule
from ..variables.nn_module import is_leaf_module
from . import stats
from .convert_frame import TRANSPARENT_CODES

log = logging.getLogger("graphjit")

_DIRECT_TYPES = frozenset({
    types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
    types.MethodWrapperType, types.ClassMethodDescriptorType, type,
    torch._ops.OpOverload, torch._ops.OpOverloadPacket,
})

# per-type decisions for objects that are neither functions nor methods
_T_DIRECT, _T_MODULE, _T_CALLABLE, _T_PARTIAL = range(4)


def _is_nested(fn: types.FunctionType) -> bool:
    """Made by a ``def``/``lambda`` inside a function, so maybe a new object on every
    call (cached per code object).  A decorator's wrapper (it has ``__wrapped__``) lives as
    long as what it decorates, and each wraps another function: cached per function."""
    return "<locals>" in fn.__qualname__ and not hasattr(fn, "__wrapped__")


class Interceptor:
    """The resolver of one compile session and the intercepted copies it runs.

    ``compiled_for(fn)``: the compiled stand-in of a plain function; ``nested_for(code)``:
    the per-code dispatcher of nested functions (``dispatcher(fn)`` gives a callable);
    ``module_call_for(module)``: the compiled call of a module; ``method_for(fn, module)``:
    ``fn`` compiled for calls bound to this module instance."""

    def __init__(self, compiled_for: Callable, nested_for: Callable, module_call_for: Callable,
                 method_for: Callable) -> None:
        self._compiled_for, self._nested_for = compiled_for, nested_for
        self._module_call_for, self._method_for = module_call_for, method_for
        self._copies: dict[types.FunctionType, tuple] = {}
        self._caches = _Caches()
        register_dependent_cache(self._caches)  # a new graphjit.disable/skip empties them
        self.resolve = self._make_resolver()

    def __repr__(self) -> str:
        return f"<graphjit interceptor, {len(self._copies)} intercepted copies>"

    # -- intercepted copies ----------------------------------------------------------------
    def eager(self, fn: types.FunctionType) -> types.FunctionType:
        """``fn`` with its calls intercepted (same globals, defaults, closure and name;
        made again when the function's code or defaults are replaced)."""
        cached = self._copies.get(fn)
        if cached is not None and cached[1] is fn.__defaults__ and cached[2] is fn.__kwdefaults__ \
                and cached[3] is fn.__code__:
            return cached[0]
        try:
            code = intercepted_code(fn.__code__, self.resolve)
        except Exception:  # a graphjit bug must not stop the user's program: run it as is
            log.exception("graphjit could not intercept the calls of %s; it runs as it is",
                          fn.__qualname__)
            self._copies[fn] = (fn, fn.__defaults__, fn.__kwdefaults__, fn.__code__)
            return fn
        copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__kwdefaults__ = fn.__kwdefaults__
        copy.__qualname__ = fn.__qualname__
        copy.__dict__.update(fn.__dict__)
        copy.__wrapped_eager__ = fn
        if not _is_nested(fn):  # (nested ones are new objects each time: not kept)
            self._copies[fn] = (copy, fn.__defaults__, fn.__kwdefaults__, fn.__code__)
        return copy

    def copies(self) -> list[tuple[types.FunctionType, types.FunctionType]]:
        """``(function, its intercepted copy)`` of every copy kept (the persistent cache
        names a copy by its function)."""
        return [(fn, made[0]) for fn, made in list(self._copies.items()) if made[0] is not fn]

    # -- the resolver ------------------------------------------------------------------------
    def _make_resolver(self) -> Callable[[Any], Any]:
        c = self._caches
        fn_cache, nested_cache, type_cache = c.fn_cache, c.nested_cache, c.type_cache
        module_cache, method_cache, seen_user_rules = c.module_cache, c.method_cache, c.seen_user_rules
        FunctionType, MethodType, Module = types.FunctionType, types.MethodType, torch.nn.Module
        direct = _DIRECT_TYPES

        def for_function(f):
            rule = frame_rule(f)
            user = trace_rule(f)
            if user in (Rule.DISABLE, Rule.SKIP_FRAME) and f.__code__ not in seen_user_rules:
                seen_user_rules.add(f.__code__)
                skip_frame(f, library_rule_reason(f) or (
                    "graphjit.skip" if user is Rule.SKIP_FRAME else
                    "graphjit.disable / torch.compiler.disable: nothing under it is compiled"))
            if _is_nested(f):
                if rule is Rule.COMPILE:
                    nd = nested_cache.get(f.__code__)
                    if nd is None:
                        nd = nested_cache[f.__code__] = self._nested_for(f.__code__)
                    return nd(f)
                return self.eager(f) if rule is Rule.INTERCEPT else f
            if rule is Rule.COMPILE:
                out = self._compiled_for(f)
            elif rule is Rule.INTERCEPT:
                out = self.eager(f)
            else:
                out = f
            fn_cache[f] = out
            return out

        def for_module_method(f, func, module):
            key = (id(module), func)
            out = method_cache.get(key)
            if out is None:
                rule = frame_rule(func)
                if rule is not Rule.COMPILE:
                    return MethodType(self.eager(func), module) if rule is Rule.INTERCEPT else f
                compiled = self._method_for(func, module)
                out = method_cache[key] = (weakref.ref(module), compiled)
                weakref.finalize(module, method_cache.pop, key, None)
            if out[0]() is not module:
                return f
            return MethodType(out[1], module)

        def for_object(f, t):
            kind = type_cache.get(t)
            if kind is None:
                kind = type_cache[t] = _type_kind(t)
            if kind == _T_DIRECT:
                return f
            if kind == _T_MODULE:
                if is_leaf_module(f):
                    return f
                key = id(f)
                call = module_cache.get(key)
                if call is None:
                    call = module_cache[key] = self._module_call_for(f)
                    weakref.finalize(f, module_cache.pop, key, None)
                return call
            if kind == _T_PARTIAL:
                inner = resolve(f.func)
                return f if inner is f.func else functools.partial(inner, *f.args, **f.keywords)
            call = t.__call__
            rule = frame_rule(call)
            if rule is Rule.CALL:
                return f
            return MethodType(self._compiled_for(call) if rule is Rule.COMPILE else self.eager(call), f)

        def resolve(f):
            t = type(f)
            if t in direct:
                return f
            if t is FunctionType:
                out = fn_cache.get(f)
                return for_function(f) if out is None else out
            if t is MethodType:
                func = f.__func__
                if type(func) is not FunctionType:
                    return f
                owner = f.__self__
                if isinstance(owner, Module):
                    return for_module_method(f, func, owner)
                out = fn_cache.get(func)
                if out is None:
                    out = for_function(func)
                return f if out is func else MethodType(out, owner)
            return for_object(f, t)

        return resolve


class _Caches:
    """The resolver's decisions (per function, code object, type, module instance)."""

    def __init__(self) -> None:
        self.fn_cache: dict[types.FunctionType, Any] = {}
        self.nested_cache: dict[types.CodeType, Any] = {}
        self.type_cache: dict[type, int] = {}
        self.module_cache: dict[int, Any] = {}
        self.method_cache: dict[tuple[int, types.FunctionType], Any] = {}
        self.seen_user_rules: set[types.CodeType] = set()

    def clear(self) -> None:
        for cache in vars(self).values():
            cache.clear()


def _type_kind(t: type) -> int:
    if getattr(t, "_graphjit_runtime", False):
        return _T_DIRECT  # graphjit's own compiled callables compile themselves
    if issubclass(t, torch.jit.ScriptModule):
        return _T_DIRECT  # runs in the TorchScript interpreter: nothing in it is Python
    if issubclass(t, torch.nn.Module):
        return _T_MODULE
    if t is functools.partial:
        return _T_PARTIAL
    call = getattr(t, "__call__", None)
    if isinstance(call, types.FunctionType):
        return _T_CALLABLE
    return _T_DIRECT


def skip_frame(fn: types.FunctionType, reason: str) -> None:
    """Record (stats, ``graph_breaks`` log) that ``fn``'s frame runs in Python from now on."""
    if fn.__code__ in TRANSPARENT_CODES:
        return
    code = fn.__code__
    frame = stats.SkippedFrame(fn.__qualname__, code.co_filename, code.co_firstlineno, reason)
    stats.record("skipped_frames", frame)
    logs.emit("graph_breaks", f"Skipping frame {frame} (it runs in Python; the functions and "
                              f"modules it calls are still compiled)")


def uses_torch_global(fn: types.FunctionType) -> bool:
    """Does ``fn``'s code name a global that is torch (or a torch submodule)?"""
    g = fn.__globals__
    for name in fn.__code__.co_names:
        obj = g.get(name)
        if isinstance(obj, types.ModuleType) and (obj is torch or obj.__name__.startswith("torch.")):
            return True
    return False


_SCALARS = frozenset({int, float, str, bool, type(None), bytes, complex})


def has_tensor(obj: Any, depth: int = 0) -> bool:
    """A tensor or module in ``obj`` (looking into lists, tuples and dicts, as TorchDynamo
    decides whether a frame is worth tracing)."""
    t = type(obj)
    if t in _SCALARS:
        return False
    if t is tuple or t is list:
        if depth > 4:
            return False
        for v in obj:
            if type(v) not in _SCALARS and has_tensor(v, depth + 1):
                return True
        return False
    if t is dict:
        if depth > 4:
            return False
        for v in list(obj.values()):
            if type(v) not in _SCALARS and has_tensor(v, depth + 1):
                return True
        return False
    if isinstance(obj, (torch.Tensor, torch.nn.Module)) or (t is type and issubclass(obj, torch.nn.Module)):
        return True
    if isinstance(obj, tuple) and hasattr(obj, "_fields") and depth <= 4:  # a namedtuple
        return has_tensor(tuple(obj), depth + 1)
    return False

"""The dispatcher: per compiled function, a list of guarded cache entries.

Hot path (``__call__``): run each entry's guard with the call's own arguments; the first
that passes runs its transformed function.  On a miss the frame is traced again and a new
entry is added; past ``config.recompile_limit`` entries the function runs eagerly, with one
warning naming the guard that failed.  A call never runs stale code: every hit passed all
of its entry's guards.

Threads: compiling is serialised per :class:`CompileSession` (one re-entrant lock); a
thread that waited for the lock checks the entries again, so eight threads making the
first call at once compile once.  The hot path takes no lock: entry lists are replaced,
never mutated, so a reader always iterates a complete list.
"""

from __future__ import annotations

import logging
import threading
import types
import warnings
import weakref
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

from .. import config
from ..backends.registry import keeps_attributes, lookup_backend, shares_graphs
from ..diagnostics import logs
from ..graph.shapes import RECEIVER_CODES, ShapePolicy
from ..graph.shared_graphs import SharedGraphs
from ..exc import BackendCompilerFailed, InternalError, Unsupported, drop_tracebacks
from ..variables.grad_mode import GradModeExit
from ..variables.nn_module import has_hooks
from ..report import record
from ..variables.mode_stack import is_mode_exit
from ..variables.object_protocol import type_attr_raw
from ..trace_rules import Rule, forget_frame_decisions, frame_rule, register_dependent_cache, register_library_rule
from . import persist, stats
from .convert_frame import (EAGER_THIS_CALL, PLAIN_THIS_CALL, TRANSPARENT_CODES, CacheEntry, Hooks, RunEagerly,
                            convert_frame, inside_functorch_transform)
from .eager_frames import Interceptor, has_tensor, skip_frame, uses_torch_global

_live: "weakref.WeakSet[CompiledFunction]" = weakref.WeakSet()
_nested_live: "weakref.WeakSet[NestedDispatcher]" = weakref.WeakSet()
log = logging.getLogger("graphjit")


#: backends known to take a SymFloat graph input; any other (inductor, a user's callable,
#: which may call inductor) gets a float argument as a 0-d float64 tensor, as TorchDynamo
#: passes it to every backend
_SYMFLOAT_BACKENDS = ("eager", "aot_eager")


class CompileSession:
    """Options shared by a compiled function and everything compiled on its behalf
    (resume functions, callees wrapped at graph breaks), with their caches."""

    def __init__(self, backend, fullgraph: bool, mode, options, dynamic) -> None:
        self.backend, self.fullgraph, self.dynamic = backend, fullgraph, dynamic
        self.mode, self.options = mode, options
        self.compiler_fn = lookup_backend(backend, mode, options)
        self.lock = threading.RLock()
        self._resumes: dict[types.CodeType, CompiledFunction] = {}
        self._wrapped: "weakref.WeakKeyDictionary[types.FunctionType, CompiledFunction]" = \
            weakref.WeakKeyDictionary()
        self._nested: dict[types.CodeType, NestedDispatcher] = {}
        self.interceptor = Interceptor(self.wrap_callable, self.wrap_callable, self.wrap_callable,
                                       lambda fn, module: self.module_method(fn))
        self.hooks = Hooks(self.compiler_fn, self.make_resume, self.wrap_callable, fullgraph,
                           self.interceptor.resolve,
                           ShapePolicy(dynamic, floats_as_tensors=backend not in _SYMFLOAT_BACKENDS),
                           SharedGraphs() if shares_graphs(backend) else None,
                           lambda: keeps_attributes(backend, options, mode))

    def __repr__(self) -> str:
        return f"CompileSession(backend={self.backend!r}, fullgraph={self.fullgraph})"

    def make_resume(self, code: types.CodeType, f_globals: dict,
                    closure: tuple | None = None) -> "CompiledFunction":
        """The dispatcher of a resume function (one per resume code object and closure;
        resume functions take the frame's cells as arguments, and keep only ``__class__``,
        for ``super()``, as a closure)."""
        key = (code, tuple(map(id, closure)) if closure else None)  # cells are unhashable
        cf = self._resumes.get(key)
        if cf is None:
            fn = types.FunctionType(code, f_globals, code.co_name, None, closure)
            cf = self._resumes[key] = CompiledFunction(fn, session=self)
            cf._resume = True
        return cf

    def wrap_callable(self, fn):
        """The compiled stand-in for a user function, user module, or the code of nested
        functions, called at a graph break (there is no frame hook to compile the callee
        when Python calls it).  Their traces treat modules as generic (see
        ``graph/shapes.py``): one function serves the many instances Python calls it
        with (the layers of a model calling one ``forward``)."""
        if isinstance(fn, types.CodeType):
            nd = self._nested.get(fn)
            if nd is None:
                self.hooks.shapes.for_code(fn).make_modules_generic()
                nd = self._nested[fn] = NestedDispatcher(fn, self)
            return nd
        if isinstance(fn, torch.jit.ScriptModule):
            return fn  # TorchScript: nothing to compile, it runs as it is
        if isinstance(fn, types.FunctionType) and frame_rule(fn) is Rule.CALL:
            # torch's own Python (a validating distribution's log_prob, a decorator's
            # wrapper): not a frame to compile (TorchDynamo compiles none either), it runs
            # with its calls intercepted, so the user code it calls is compiled
            return self.interceptor.eager(fn)
        cf = self._wrapped.get(fn)
        if cf is None:
            if isinstance(fn, torch.nn.Module):
                raw = type_attr_raw(type(fn), "forward")
                static = isinstance(raw, staticmethod)
                func = raw.__func__ if static else type(fn).forward
                if isinstance(func, types.FunctionType) and frame_rule(func) is Rule.INTERCEPT:
                    forward = self.interceptor.eager(func)  # a library forward run in Python (DDP's)
                else:
                    forward = self.module_method(func)
                cf = self._wrapped[fn] = ModuleCall(fn, forward, self.interceptor, static)
            else:
                self.hooks.shapes.for_code(fn.__code__).make_modules_generic()
                cf = self._wrapped[fn] = CompiledFunction(fn, session=self, only_with_tensors=True)
        return cf

    def module_method(self, fn: types.FunctionType) -> "CompiledFunction":
        """A module method (its ``forward``) called from Python: one compiled function
        for every instance that has it, its traces treating modules as generic."""
        cf = self._wrapped.get(fn)
        if cf is None:
            self.hooks.shapes.for_code(fn.__code__).make_modules_generic()
            cf = self._wrapped[fn] = CompiledFunction(fn, session=self)
        return cf


class NestedDispatcher:
    """Compiled calls of functions made by a ``def``/``lambda`` inside another function:
    a new function object (new closure) on every call of the outer one, so entries are
    kept per *code object* and their guards read the closure passed as ``___closure``.
    ``dispatcher(fn)`` returns the callable that runs ``fn`` (applied at a graph break)."""

    def __init__(self, code: types.CodeType, session: "CompileSession") -> None:
        self.code, self.session = code, session
        self._entries: list[CacheEntry] = []
        self._run_eagerly = False
        self._eager_code: bool | None = None  # whether the code runs as eager code (Rule.CALL)

    def __repr__(self) -> str:
        return f"<graphjit nested dispatcher {self.code.co_qualname}>"

    _graphjit_runtime = True

    def __call__(self, fn: types.FunctionType):
        if fn.__defaults__ or fn.__kwdefaults__ or self._run_eagerly:
            # defaults may differ per function object: not shared, run with calls intercepted
            return self.session.interceptor.eager(fn)
        if self._eager_code is None:  # torch's own closures (a decorator's wrapper): not a frame
            self._eager_code = frame_rule(fn) is Rule.CALL
        if self._eager_code:
            return self.session.interceptor.eager(fn)
        return _BoundNested(self, fn)

    def call(self, fn: types.FunctionType, args: tuple, kwargs: dict):
        closure = fn.__closure__
        entry = self._find(closure, args, kwargs)
        if entry is None:
            with self.session.lock:
                entry = self._find(closure, args, kwargs) or self._compile(fn, args, kwargs)
        if entry is None:
            return self.session.interceptor.eager(fn)(*args, **kwargs)
        if entry is fn:  # PLAIN_THIS_CALL
            return fn(*args, **kwargs)
        code = entry.fn.__code__
        return types.FunctionType(code, fn.__globals__, fn.__name__, None, closure)(*args, **kwargs)

    def _find(self, closure, args, kwargs):
        for entry in self._entries:
            if entry.guard.check(*args, ___closure=closure, **kwargs):
                return entry
        return None

    def _compile(self, fn, args, kwargs):
        if self._run_eagerly or len(self._entries) >= config.recompile_limit:
            if not self._run_eagerly:
                skip_frame(fn, f"recompile limit ({config.recompile_limit}) reached")
            self._run_eagerly = True
            return None
        disk_kwargs = {**kwargs, "___closure": fn.__closure__}
        entry = persist.load(self, fn, self.code, "nested", args, disk_kwargs)
        if isinstance(entry, persist.cache.Skipped):
            skip_frame(fn, entry.reason)
            self._run_eagerly = True
            return None
        if entry is not None:
            self._entries = [*self._entries, entry]
            _nested_live.add(self)
            return entry
        stats.bump("frames_total")
        try:
            with record.compiling(fn) as recording:
                entry = convert_frame(fn, args, kwargs, self.session.hooks, closure_arg=True)
                recording.done(entry)
        except Unsupported as e:
            entry = RunEagerly(e.reason)
        if entry is EAGER_THIS_CALL:
            return None
        if entry is PLAIN_THIS_CALL:
            return fn
        if isinstance(entry, RunEagerly):
            skip_frame(fn, entry.reason)
            persist.save_skip(self, self.code, "nested", entry.reason, recording)
            self._run_eagerly = True
            return None
        stats.bump("frames_ok")
        persist.save(self, fn, self.code, "nested", entry, args, disk_kwargs, recording)
        self._entries = [*self._entries, entry]
        _nested_live.add(self)
        return entry

    @property
    def _session(self) -> CompileSession:
        return self.session

    def _reset(self) -> None:
        self._entries = []
        self._run_eagerly = False
        if self.__dict__.get("_disk") is not None:
            self._disk.reset()


class _BoundNested:
    __slots__ = ("dispatcher", "fn")
    _graphjit_runtime = True

    def __init__(self, dispatcher: NestedDispatcher, fn: types.FunctionType) -> None:
        self.dispatcher, self.fn = dispatcher, fn

    def __call__(self, *args, **kwargs):
        return self.dispatcher.call(self.fn, args, kwargs)


def call_object(obj, *args, **kwargs):
    """The frame graphjit compiles for a module or callable object: ``obj(...)``, traced
    like any call (``Module.__call__``'s hooks check, the instance's ``forward``, a class
    ``__call__``), every decision guarded."""
    return obj(*args, **kwargs)


RECEIVER_CODES.add(call_object.__code__)  # (its module is specialized until a second one)


TRANSPARENT_CODES.add(call_object.__code__)


def _nested_code(fn: types.FunctionType, name: str) -> types.CodeType:
    for const in fn.__code__.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == name:
            return const
    raise InternalError(f"{fn.__qualname__} has no nested function {name!r}")


# ``Module._call_impl`` with hooks runs them and ``forward`` from its nested ``inner``: when
# a module call runs in Python (ModuleCall below), that frame's calls are intercepted too,
# so the module's ``forward`` is compiled while its hooks run as they are
register_library_rule(_nested_code(torch.nn.Module._call_impl, "inner"), Rule.INTERCEPT,
                      "Module._call_impl runs the hooks in Python; forward is compiled")


class ModuleCall:
    """A module called at a graph break (the call itself broke: compiling the call again
    would break again) or from eager code: its class's ``forward``, compiled once for all
    its instances, when ``Module.__call__`` would run nothing else (no hooks, no
    ``forward`` on the instance, no ``__call__`` override); otherwise the module's call
    path runs in Python with its calls intercepted (hooks and ``forward`` compiled)."""

    _graphjit_runtime = True

    def __init__(self, module, forward: "CompiledFunction", interceptor: Interceptor,
                 static: bool = False) -> None:
        self._module_ref = weakref.ref(module)
        self._forward = forward
        self._interceptor = interceptor
        self._static = static  # ``forward`` is a staticmethod: no ``self``

    def __repr__(self) -> str:
        return f"<graphjit module call {self._forward.__qualname__}>"

    def __call__(self, *args, **kwargs):
        module = self._module_ref()
        call = type(module).__call__
        if call is not torch.nn.Module.__call__:
            return self._interceptor.resolve(types.MethodType(call, module))(*args, **kwargs)
        if has_hooks(module) or "forward" in module.__dict__:
            return self._interceptor.eager(torch.nn.Module._call_impl)(module, *args, **kwargs)
        if self._static:
            return self._forward(*args, **kwargs)
        return self._forward(module, *args, **kwargs)


class ObjectCall:
    """``obj(*args, **kwargs)`` through a compiled :func:`call_object` (a module called at
    a graph break, ``graphjit.compile(callable_object)``)."""

    _graphjit_runtime = True

    def __init__(self, obj, compiled: "CompiledFunction") -> None:
        self._ref = weakref.ref(obj) if isinstance(obj, torch.nn.Module) else (lambda: obj)
        self._compiled = compiled

    def __repr__(self) -> str:
        return f"<graphjit call of {type(self._ref()).__qualname__}>"

    def __call__(self, *args, **kwargs):
        return self._compiled(self._ref(), *args, **kwargs)


class CompiledFunction:
    """``graphjit.compile(fn)``: calls ``fn`` through guarded, compiled cache entries."""

    _graphjit_compiled = True  # traced code that calls one inlines ``__wrapped__``
    _graphjit_runtime = True   # eager code calls it as it is

    def __init__(self, fn: types.FunctionType, *, backend="inductor", fullgraph: bool = False,
                 mode: str | None = None, options: dict | None = None, dynamic=None,
                 session: CompileSession | None = None, only_with_tensors: bool = False) -> None:
        if not isinstance(fn, types.FunctionType):
            raise TypeError(f"graphjit.compile expects a Python function, got {type(fn).__name__}")
        self._fn = fn
        self._session = session or CompileSession(backend, fullgraph, mode, options, dynamic)
        self._fullgraph = self._session.fullgraph
        self._backend = self._session.backend
        self._entries: list[CacheEntry] = []
        self._fast: list[tuple] = []  # (check, fn) per entry: the hot path reads only these
        self._run_eagerly = False
        #: past the recompile limit: the function runs as it is, and what it calls is not
        #: compiled either (TorchDynamo skips the frame recursively there)
        self._run_plain = False
        self._resume = False  # a resume function (see ``_miss``)
        # a callee compiled on the user's behalf is traced only for calls that involve
        # torch (a torch global in its code, a tensor or module among its arguments):
        # plain Python helpers run as they are, as TorchDynamo skips tensor-free frames
        self._only_with_tensors = only_with_tensors and not uses_torch_global(fn)
        self._lock = self._session.lock
        self.__wrapped__ = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        _live.add(self)

    def __repr__(self) -> str:
        return f"<graphjit compiled {self._fn.__qualname__}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        for check, fn in self._fast:
            if check(*args, **kwargs):
                return fn(*args, **kwargs)
        return self._miss(args, kwargs)

    def _reset(self) -> None:
        self._entries = []
        self._fast = []
        self._run_eagerly = self._run_plain = False
        if self.__dict__.get("_disk") is not None:
            self._disk.reset()

    def _skip(self, reason: str) -> None:
        self._run_eagerly = True
        skip_frame(self._fn, reason)

    def _frame_label(self, args: tuple) -> str:
        """The user's frame this dispatcher compiles, as a person names it: a module's or
        callable object's class and its ``forward``/``__call__``, else the function."""
        fn = self._fn
        if fn is call_object and args:
            cls = type(args[0])
            method = getattr(cls, "forward", None) if isinstance(args[0], torch.nn.Module) else \
                getattr(cls, "__call__", None)
            code = getattr(method, "__code__", None)
            at = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
            return f"{cls.__qualname__}.{getattr(method, '__name__', '__call__')}{at}"
        code = fn.__code__
        return f"{fn.__qualname__} ({code.co_filename}:{code.co_firstlineno})"

    def _eager(self) -> types.FunctionType:
        """The function run in Python: its calls still go through graphjit."""
        return self._session.interceptor.eager(self._fn)

    def _miss(self, args: tuple, kwargs: dict) -> Any:
        if self._run_plain:
            return self._fn(*args, **kwargs)
        if self._run_eagerly or (self._only_with_tensors and not has_tensor(args)
                                 and not (kwargs and has_tensor(kwargs))):
            return self._eager()(*args, **kwargs)
        if torch._C._get_tracing_state() is not None:  # (its tensors are the JIT tracer's)
            raise RuntimeError(f"torch.jit.trace of a graphjit-compiled function ({self._fn.__qualname__}) is not "
                               "supported, as torch.compile does not support it: trace the original function "
                               "(the compiled function's __wrapped__)")
        with self._lock:
            for check, fn in self._fast:  # another thread may have compiled it meanwhile
                if check(*args, **kwargs):
                    break
            else:
                try:
                    fn = self._compile(args, kwargs)
                except InternalError as e:
                    if self._resume:
                        leave_with_blocks(args, e)
                    raise
        try:
            return fn(*args, **kwargs)
        finally:
            persist.written()

    def recompile_reason(self, args: tuple, kwargs: dict) -> str:
        """Why no entry matched: the failing checks of the entry closest to matching
        (fewest failures), with expected and actual values."""
        best = min((e.guard.failures(*args, **kwargs) for e in self._entries), key=len, default=[])
        if not best:
            return "no cache entry"
        more = f" (and {len(best) - 1} more)" if len(best) > 1 else ""
        return best[0] + more

    def _compile(self, args: tuple, kwargs: dict):
        """Trace a new entry (under the session lock); the function to run this call."""
        if self._run_eagerly or inside_functorch_transform(self._fn):
            return self._eager()
        if len(self._entries) >= config.recompile_limit:
            reason = self.recompile_reason(args, kwargs)
            warnings.warn(
                f"graphjit: {self._fn.__qualname__} hit the recompile limit "
                f"({config.recompile_limit}); running it eagerly from now on. "
                f"Last guard failure: {reason}", stacklevel=4)
            self._skip(f"recompile limit ({config.recompile_limit}) reached; last guard failure: {reason}")
            self._run_plain = True  # as TorchDynamo: its callees are not compiled either
            return self._fn
        reason = None
        entry = persist.load(self, self._fn, self._fn.__code__, "function", args, kwargs)
        if isinstance(entry, persist.cache.Skipped):
            self._skip(entry.reason)
            return self._eager()
        if entry is not None:  # written by an earlier process: no trace
            self._install(entry)
            return entry.fn
        if self._entries:
            stats.bump("recompiles")
            reason = self.recompile_reason(args, kwargs)
            logs.emit("recompiles", f"Recompiling function {self._fn.__qualname__} in "
                      f"{self._fn.__code__.co_filename}:{self._fn.__code__.co_firstlineno}\n"
                      f"    triggered by the following guard failure(s):\n    - {reason}")
        stats.bump("frames_total")
        try:
            with record.compiling(self._fn, reason, args[0] if self._fn is call_object else None) as recording:
                entry = convert_frame(self._fn, args, kwargs, self._session.hooks)
                recording.done(entry)
        except Unsupported as e:
            stats.bump("graph_breaks")
            stats.record("break_reasons", e)
            logs.emit("graph_breaks", f"Graph break in {self._fn.__qualname__}: {e}")
            if self._fullgraph:
                raise
            drop_tracebacks(e)  # (kept in stats: not the trace's frames, nor the call's arguments)
            self._skip(e.reason)
            persist.save_skip(self, self._fn.__code__, "function", e.reason, recording)
            return self._eager()
        except ConstraintViolationError:  # the user's mark_dynamic cannot hold: theirs to fix
            raise
        except BackendCompilerFailed as e:  # the backend's failure: the user's to see, named
            where = self._frame_label(args)
            if not config.suppress_errors:
                raise BackendCompilerFailed(f"{e} (traced from {where})") from e.__cause__
            log.warning("graphjit: %s (traced from %s); running it eagerly", e, where)
            self._skip(f"the backend failed: {e}")
            return self._eager()
        except InternalError:
            if not config.suppress_errors:
                raise
            log.exception("graphjit internal error; running %s eagerly", self._fn.__qualname__)
            self._skip("graphjit internal error (logged)")
            return self._eager()
        except Exception as e:
            if not config.suppress_errors:
                raise InternalError(
                    f"while compiling {self._fn.__qualname__} "
                    f"({self._fn.__code__.co_filename}:{self._fn.__code__.co_firstlineno}): "
                    f"{type(e).__name__}: {e}") from e
            log.exception("graphjit internal error; running %s eagerly", self._fn.__qualname__)
            self._skip("graphjit internal error (logged)")
            return self._eager()
        if entry is EAGER_THIS_CALL:
            return self._eager()
        if entry is PLAIN_THIS_CALL:
            return self._fn
        if isinstance(entry, RunEagerly):
            self._skip(entry.reason)
            persist.save_skip(self, self._fn.__code__, "function", entry.reason, recording)
            return self._eager()
        stats.bump("frames_ok")
        for g in entry.graphs:
            stats.record("graphs", g)
        persist.save(self, self._fn, self._fn.__code__, "function", entry, args, kwargs, recording)
        self._install(entry, recording.check(entry.guard.check))
        return entry.fn

    def _install(self, entry: CacheEntry, check=None) -> None:
        self._entries = [*self._entries, entry]
        self._fast = [*self._fast, (check or entry.guard.check, entry.fn)]


def leave_with_blocks(args: tuple, exc: BaseException) -> None:
    """A resume function starts inside the ``with`` blocks whose ``__exit__`` its stack
    arguments hold (grad-mode blocks, ``with Mode():`` blocks a graph break resumed in).
    When graphjit fails to compile it, the error leaves those blocks, innermost first, as
    an exception leaving them does in eager: grad mode and the mode stack are restored."""
    for arg in reversed(args):
        if isinstance(arg, GradModeExit) or is_mode_exit(arg):
            arg(type(exc), exc, exc.__traceback__)


class _CompiledEntries:
    """Every compiled entry, as a cache that depends on the trace rules: a
    ``graphjit.disable``/``skip``/``allow_in_graph`` added later drops them (a trace may
    have inlined the function the new rule is about), counters kept."""

    def clear(self) -> None:
        for cf in [*_live, *_nested_live]:
            cf._reset()


_COMPILED_ENTRIES = _CompiledEntries()
register_dependent_cache(_COMPILED_ENTRIES)


def all_entries() -> list[CacheEntry]:
    """Every live cache entry (for explain and reports)."""
    return [e for cf in [*_live, *_nested_live] for e in cf._entries]


def reset_all() -> None:
    persist.flush()  # (a queued entry is written with the session it was traced in)
    for cf in [*_live, *_nested_live]:
        cf._reset()
    forget_frame_decisions()
    stats.clear()

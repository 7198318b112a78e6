"""Callables written in Python: user functions (inlined), functions made while tracing
(lambdas, comprehensions, closures), bound methods, and opaque callables.

A pre-existing function is guarded by its code object (functions a ``def`` makes on every
call of an outer function share it); what else the trace reads of it is guarded where it
is read: each default through ``f.__defaults__[i]``, keyword defaults through
``f.__kwdefaults__[k]``, closure contents through ``f.__closure__[i].cell_contents``.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from ..exc import observed, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, ConstSource, GetItemSource
from .arg_binding import check_call
from .base import AttributeMutationNew, MethodVariable, ValueMutationNew, VariableTracker, call_python, register_builder
from .dicts import MISSING, DictVariable, items_of
from .sequences import TupleVariable


def _qualname(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class UserFunctionVariable(VariableTracker):
    """A plain Python function that existed before tracing; calls are inlined.
    ``trusted`` functions (graphjit's polyfills) read their globals without guards."""

    def __init__(self, fn: types.FunctionType, *, trusted: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn
        self.trusted = trusted
        if self.source is None and not trusted:  # still guardable: the object is known
            self.source = ConstSource(fn, _qualname(fn))

    def _repr_body(self) -> str:
        return self.fn.__qualname__

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self):
        return self.fn

    def identity(self):
        return self.fn

    def get_code(self) -> types.CodeType:
        return self.fn.__code__

    def get_globals(self) -> dict:
        return self.fn.__globals__

    def get_name(self) -> str:
        return self.fn.__qualname__

    def get_defaults(self, tx) -> tuple[list, dict]:
        def src(attr, key):
            return None if self.trusted else GetItemSource(AttrSource(self.source, attr), key)

        defaults = [VariableTracker.build(tx, d, src("__defaults__", i))
                    for i, d in enumerate(self.fn.__defaults__ or ())]
        kwdefaults = {k: VariableTracker.build(tx, v, src("__kwdefaults__", k))
                      for k, v in (self.fn.__kwdefaults__ or {}).items()}
        return defaults, kwdefaults

    def get_closure_cells(self, tx) -> list:
        closure = self.fn.__closure__ or ()
        cells = []
        for i, cell in enumerate(closure):
            source = None if self.trusted else GetItemSource(AttrSource(self.source, "__closure__"), i)
            cells.append(VariableTracker.build(tx, cell, source, realize=True))
        return cells

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            value = getattr(self.fn, name)
        except AttributeError:
            raise observed(AttributeError, f"'function' object has no attribute '{name}'") from None
        return VariableTracker.build(tx, value, AttrSource(self.source, name))

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return tx.inline_user_function(self, args, kwargs)


#: the attributes of a function that are descriptors of its type (not in its ``__dict__``)
_FUNCTION_DESCRIPTORS = frozenset(
    name for name, v in vars(types.FunctionType).items()
    if hasattr(v, "__set__") or name in ("__doc__", "__module__"))


class NestedUserFunctionVariable(UserFunctionVariable):
    """A function created by MAKE_FUNCTION while tracing (lambda, comprehension, closure).

    ``closure`` is a list of CellVariables.  If it escapes (returned, stored, called at a
    break) it is rebuilt with ``types.FunctionType`` from the code, globals, defaults and
    the cells (the frame's own cells, or cells made for it)."""

    def __init__(self, code, f_globals, name, defaults, kwdefaults, closure, qualname=None,
                 **kwargs) -> None:
        VariableTracker.__init__(self, mutation_type=AttributeMutationNew(), **kwargs)
        self.code, self.f_globals, self.name = code, f_globals, name
        self.qualname = qualname or code.co_qualname
        self.defaults, self.kwdefaults, self.closure = defaults, kwdefaults, closure
        self.trusted = False
        #: descriptor attributes written in the trace (``functools.wraps``: ``__doc__``,
        #: ``__module__``, ``__annotations__``)
        self.attrs: dict[str, VariableTracker] = {}
        #: the function's ``__dict__``: every other attribute (``__wrapped__``...)
        self.dict_var = DictVariable({})

    def _repr_body(self) -> str:
        return self.name

    def as_python_constant(self):
        raise unsupported("not a constant", f"nested function {self.name}")

    def identity(self):
        return self

    def get_code(self):
        return self.code

    def get_globals(self):
        return self.f_globals

    def get_name(self) -> str:
        return self.qualname

    def get_defaults(self, tx):
        return list(self.defaults), dict(self.kwdefaults)

    def get_closure_cells(self, tx):
        return list(self.closure)

    def children(self) -> list[VariableTracker]:
        return [*self.defaults, *self.kwdefaults.values(), *self.closure, *self.attrs.values(),
                self.dict_var]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.attrs:
            return self.attrs[name]
        if name == "__dict__":
            return self.dict_var
        if name == "__annotations__":  # made (empty) when first read, as CPython does
            self.attrs[name] = DictVariable({})
            return self.attrs[name]
        if name not in _FUNCTION_DESCRIPTORS:
            found = self.dict_var.lookup(tx, name)
            if found is not MISSING:
                return found
        if name in ("__name__", "__qualname__"):
            return VariableTracker.build(tx, self.name if name == "__name__" else self.qualname)
        if name == "__code__":
            return VariableTracker.build(tx, self.code)
        if name == "__module__":
            return VariableTracker.build(tx, self.f_globals.get("__name__"))
        if name == "__doc__":
            doc = self.code.co_consts[0] if self.code.co_consts and isinstance(self.code.co_consts[0], str) else None
            return VariableTracker.build(tx, doc)
        raise observed(AttributeError, f"'function' object has no attribute '{name}'")

    def has_attr(self, tx, name: str) -> bool:
        return name in self.attrs or name in ("__name__", "__qualname__", "__code__", "__module__",
                                               "__doc__", "__dict__", "__defaults__", "__kwdefaults__") \
            or self.dict_var.lookup(tx, name) is not MISSING

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """A write to a function made in the trace: kept, and applied when it is rebuilt
        (``functools.update_wrapper``'s ``__name__``, ``__doc__``, ``__wrapped__``...)."""
        if name in ("__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__", "__dict__"):
            raise unsupported("attribute write on a nested function", f"{self.name}.{name}")
        if name in ("__name__", "__qualname__"):
            if not (value.is_python_constant() and isinstance(value.as_python_constant(), str)):
                raise observed(TypeError, f"{name} must be set to a string object")
            if name == "__name__":
                self.name = value.as_python_constant()
            else:
                self.qualname = value.as_python_constant()
            return
        if name in _FUNCTION_DESCRIPTORS:
            self.attrs[name] = value
        else:
            self.dict_var.call_method(tx, "__setitem__", [VariableTracker.build(tx, name), value], {})

    def reconstruct(self, cg) -> None:
        """``types.FunctionType(code, globals, name, defaults, closure)`` (+ keyword
        defaults): the frame's cells are loaded with LOAD_CLOSURE, cells made while
        tracing come from their temporaries."""
        cg.push_null()
        cg.load_const(types.FunctionType)
        cg.load_const(self.code)
        cg.load_const(self.f_globals)
        cg.load_const(self.name)
        for d in self.defaults:
            cg.reconstruct(d)
        cg.build(tuple, len(self.defaults))
        for cell in self.closure:
            cg.reconstruct(cell)
        cg.build(tuple, len(self.closure))
        cg.call(5)
        if self.kwdefaults:
            cg.dup_top()
            for k, v in self.kwdefaults.items():
                cg.load_const(k)
                cg.reconstruct(v)
            cg.build(dict, len(self.kwdefaults))
            cg.swap(2)
            cg.store_attr("__kwdefaults__")
        if self.qualname != self.code.co_qualname:
            cg.dup_top()
            cg.load_const(self.qualname)
            cg.swap(2)
            cg.store_attr("__qualname__")
        for name, value in [*self.attrs.items(), *self.dict_var._items.items()]:
            if not isinstance(name, str):
                raise unsupported("function attribute with a non-string name", repr(name))
            cg.dup_top()
            cg.reconstruct(value)
            cg.swap(2)
            cg.store_attr(name)


class UserMethodVariable(VariableTracker):
    """A function bound to ``self_var`` (a method, or a classmethod bound to its class):
    calling it calls the function with ``self_var`` first."""

    def __init__(self, fn_var: VariableTracker, self_var: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn_var, self.self_var = fn_var, self_var

    def _repr_body(self) -> str:
        return f"{self.fn_var!r} bound to {self.self_var!r}"

    def python_type(self) -> type:
        return types.MethodType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.fn_var.call_function(tx, [self.self_var, *args], kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__func__":
            return self.fn_var
        if name == "__self__":
            return self.self_var
        return self.fn_var.var_getattr(tx, name)

    def children(self) -> list[VariableTracker]:
        return [self.fn_var, self.self_var]

    def reconstruct(self, cg, fn_override=None) -> None:
        if self.source is not None and fn_override is None:
            cg.extend(self.source.reconstruct())
            return
        cg.push_null()
        cg.load_const(types.MethodType)
        if fn_override is not None:
            cg.load_const(fn_override)
        else:
            cg.reconstruct(self.fn_var)
        cg.reconstruct(self.self_var)
        cg.call(2)


class ValueCallableVariable(VariableTracker):
    """Base of the trackers that stand for one known callable object, ``value`` (what
    ``type()``, constants and identity see)."""

    value: Any

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def identity(self):
        return self.value


class OpaqueCallableVariable(ValueCallableVariable):
    """A callable graphjit does not trace (``print``, C functions, skipped libraries):
    calling it is a graph break with ``reason``."""

    def __init__(self, value: Any, reason: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value, self.reason = value, reason

    def _repr_body(self) -> str:
        return _qualname(self.value)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        name = self._repr_body()
        raise unsupported(
            self.reason, f"call to {name}",
            f"graphjit does not trace into {name}; it runs in Python between graphs.",
            ["If it is pure and tensor-free, move it out of the compiled function."],
        )


class PolyfilledCallableVariable(ValueCallableVariable):
    """A builtin or standard-library callable with a polyfill (``polyfills/``): calling it
    traces the polyfill.  The value itself is what is reconstructed and compared."""

    def __init__(self, value: Any, polyfill: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value, self.polyfill = value, polyfill

    def _repr_body(self) -> str:
        return f"{_qualname(self.value)} as {self.polyfill.__module__}.{self.polyfill.__qualname__}"

    def is_python_constant(self) -> bool:
        return True

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        check_call(self.value, args, kwargs)  # the original's signature, not the polyfill's
        if isinstance(self.polyfill, type):  # a class standing for a C type: instantiated
            return VariableTracker.build(tx, self.polyfill).call_function(tx, list(args), dict(kwargs))
        if getattr(self.polyfill, "takes_class", False):  # a C class method through a subclass
            args = [VariableTracker.build(tx, self.value.__self__), *args]
        result = tx.inline_polyfill(self.polyfill, list(args), dict(kwargs))
        if getattr(result, "escapes_as", False) is None:  # a generator of the polyfill
            result.escapes_as = self.value
            result.origin = (list(args), dict(kwargs))  # to make the real one again
        return result

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return VariableTracker.build(tx, getattr(self.value, name))

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.value, name)

    def reconstruct(self, cg) -> None:
        cg.load_const(self.value)


class CachedFunctionVariable(ValueCallableVariable):
    """A ``functools.lru_cache``/``cache`` wrapper: a call traces the wrapped function (the
    call passes through the cache, as in TorchDynamo; its statistics are not updated).
    The wrapper itself is what is reconstructed and compared."""

    def __init__(self, value: Any, wrapped: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value, self.wrapped = value, wrapped

    def _repr_body(self) -> str:
        return f"lru_cache({_qualname(self.value.__wrapped__)})"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.wrapped.call_function(tx, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__wrapped__":
            return self.wrapped
        raise unsupported("attribute of an lru_cache wrapper", f"{self._repr_body()}.{name}")

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
        else:
            cg.load_const(self.value)


class ConstantResultFunctionVariable(ValueCallableVariable):
    """A function marked ``torch._dynamo.assume_constant_result`` (its
    ``_dynamo_marked_constant`` attribute; transformers marks its install and hardware
    probes so): a call with constant arguments runs at trace time and its answer is a
    constant of the graph, unguarded, as the marker promises (and as torch.compile does)."""

    def __init__(self, value: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return _qualname(self.value)

    def identity(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            raise unsupported("assume_constant_result function with non-constant arguments",
                              f"call to {self._repr_body()}")
        result = call_python(self._repr_body(), self.value, *[a.as_python_constant() for a in args],
                             **{k: v.as_python_constant() for k, v in kwargs.items()})
        return VariableTracker.build(tx, result)


class NoOpFunctionVariable(VariableTracker):
    """A function whose call only does bookkeeping that does not concern the traced
    program (TorchDynamo's module generation tags), or a logging function the user asked
    to drop (``config.ignore_logging_functions``): calling it returns ``None``."""

    def __init__(self, value: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return _qualname(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return VariableTracker.build(tx, None)


class PartialVariable(VariableTracker):
    """A ``functools.partial``: calling it calls ``func`` with the stored arguments first
    and the stored keywords overridden by the call's.  One made in the trace is rebuilt
    (once) with ``functools.partial(func, *args, **keywords)`` if it escapes.  One that
    existed is read through its ``func`` and ``args`` (guarded as used) and its
    ``keywords`` dict, a tracker of the real dict (``keywords_var``), so writes to
    ``p.keywords`` in the trace are seen by later calls of ``p``."""

    def __init__(self, func: VariableTracker, args: list, keywords: dict,
                 keywords_var: VariableTracker | None = None, dict_var: VariableTracker | None = None,
                 **kwargs) -> None:
        if kwargs.get("source") is None:
            kwargs.setdefault("mutation_type", ValueMutationNew())
        super().__init__(**kwargs)
        self.func, self.args, self.keywords = func, list(args), dict(keywords)
        self.keywords_var = keywords_var
        #: the partial's ``__dict__`` (its own attributes), made when first used
        self.dict_var = dict_var

    def _repr_body(self) -> str:
        return f"partial({self.func!r}, {len(self.args)} args, {sorted(self.keywords)})"

    def python_type(self) -> type:
        return functools.partial

    def identity(self):
        return self

    def children(self) -> list[VariableTracker]:
        kw = [self.keywords_var] if self.keywords_var is not None else list(self.keywords.values())
        return [self.func, *self.args, *kw, *([self.dict_var] if self.dict_var is not None else [])]

    def _instance_dict(self, tx) -> VariableTracker:
        if self.dict_var is None:
            self.dict_var = DictVariable({})  # (an existing partial's is built with it)
        return self.dict_var

    def current_keywords(self, tx) -> dict:
        if self.keywords_var is None:
            return self.keywords
        return {k: v for k, v in items_of(tx, self.keywords_var)}

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.func.call_function(tx, [*self.args, *args], {**self.current_keywords(tx), **kwargs})

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "func":
            return self.func
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            if self.keywords_var is None:  # a new partial's: a dict of its own, from now on
                self.keywords_var = DictVariable(dict(self.keywords))
            return self.keywords_var
        if name == "__dict__":
            return self._instance_dict(tx)
        if name == "__class__":
            return VariableTracker.build(tx, functools.partial)
        found = self._instance_dict(tx).lookup(tx, name)
        if found is not MISSING:
            return found
        owner = next((k for k in functools.partial.__mro__ if name in k.__dict__), None)
        attr = MISSING if owner is None else getattr(functools.partial, name)  # (not the metaclass's)
        if attr is MISSING:
            raise observed(AttributeError, f"'functools.partial' object has no attribute '{name}'")
        if callable(attr) and not isinstance(attr, type):
            return MethodVariable(self, name)  # ``p.__call__``, ``p.__reduce__``...
        return VariableTracker.build(tx, attr)  # ``__doc__``, ``__module__`` of the class

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__call__":
            return self.call_function(tx, args, kwargs)
        raise unsupported("partial method", f"partial.{name}")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``p.name = v``: partial's own slots are read-only; anything else goes to its
        ``__dict__``."""
        if name in ("func", "args", "keywords"):
            raise observed(AttributeError, "readonly attribute")
        if name == "__dict__":
            raise unsupported("partial __dict__ assignment", "p.__dict__ = ...")
        self._instance_dict(tx).call_method(tx, "__setitem__", [VariableTracker.build(tx, name), value], {})

    def del_attr(self, tx, name: str) -> None:
        if name in ("func", "args", "keywords"):
            raise observed(AttributeError, "readonly attribute")
        self._instance_dict(tx).call_method(tx, "__delitem__", [VariableTracker.build(tx, name)], {})

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        cg.push_null()
        cg.load_const(self.python_type())  # (a subclass: partial_subclasses)
        cg.reconstruct(self.func)
        for arg in self.args:
            cg.reconstruct(arg)
        keywords = self.keywords if self.keywords_var is None else self.keywords_var.realize_items(None)
        for value in keywords.values():
            cg.reconstruct(value)
        cg.call(1 + len(self.args) + len(keywords), tuple(keywords))
        for name, value in (self.dict_var.realize_items(None) if self.dict_var is not None else {}).items():
            cg.dup_top()
            cg.reconstruct(value)
            cg.swap(2)
            cg.store_attr(name)


@register_builder(functools.partial, exact=True)
def _build_partial(tx, value: functools.partial, source):
    """An existing partial: its parts read through ``.func``/``.args`` (the argument count
    guarded) and its ``.keywords`` dict."""
    func, args, keywords_var, dict_var = partial_parts(tx, value, source, "a partial without a source")
    return PartialVariable(func, args, {}, keywords_var, dict_var, source=source)


def partial_parts(tx, value: functools.partial, source, missing: str) -> tuple:
    """The trackers of an existing partial's ``func``, ``args``, ``keywords`` and
    ``__dict__``, read through its source (its exact type and argument count guarded)."""
    if source is None:
        raise unsupported("partial object", missing)
    tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
    args_src = AttrSource(source, "args")
    tx.output.add_guard(args_src, GuardKind.LENGTH_CHECK, value.args)
    func = VariableTracker.build(tx, value.func, AttrSource(source, "func"))
    args = [VariableTracker.build(tx, a, GetItemSource(args_src, i)) for i, a in enumerate(value.args)]
    keywords_var = VariableTracker.build(tx, value.keywords, AttrSource(source, "keywords"))
    dict_var = VariableTracker.build(tx, value.__dict__, AttrSource(source, "__dict__"))
    return func, args, keywords_var, dict_var


class FunctionGetVariable(VariableTracker):
    """``fn.__get__`` of a Python function (a slot wrapper, a new object on every read):
    calling it with an object binds the function to it, as CPython's ``func_descr_get``
    (torch's optimizer wrappers do ``func.__get__(opt, type(opt))(*args)``); with ``None``
    it is the function itself."""

    def __init__(self, fn_var: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn_var = fn_var

    def _repr_body(self) -> str:
        return f"{self.fn_var!r}.__get__"

    def python_type(self) -> type:
        return types.MethodWrapperType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if kwargs or not 1 <= len(args) <= 2:
            raise unsupported("function.__get__ with other arguments", "function.__get__(...)")
        obj = args[0]
        if obj.is_python_constant() and obj.as_python_constant() is None:
            return self.fn_var
        return UserMethodVariable(self.fn_var, obj)

    def children(self) -> list[VariableTracker]:
        return [self.fn_var]

"""Portable pickling: values written by content, objects with an identity written as a
way to find them again, and nothing else.

The rule behind every case: **an object whose identity the entry relies on is found
again, never copied.**  An entry made in memory holds its objects themselves: the
transformed code's constants, the graphs' targets and attributes, the guard's constants.
A copy written to disk and read back is another object, with the state it had when the
trace ran (a ``random.Random`` copied is a generator that draws the same numbers on every
load).  So the pickler writes by content only what has no identity to keep, and refuses
(:class:`NotCacheable`, naming the type) anything else it cannot name.

Contract (:class:`PortablePickler` / :func:`loads`):

* By content: immutable plain data (numbers, strings, bytes, ``None``, tuples and
  frozensets of such, slices, ``Ellipsis``, ``torch.dtype``/``Size``/``device``/``layout``/
  ``memory_format``); lists, dicts and sets as *structure* of graphjit's own records (a
  list or dict that generated code holds as a constant is refused: the code would mutate
  a copy); plain dense tensors held as graph constants (written as their bytes by
  :func:`_tensor`, never through ``torch.load``); ``functools.partial`` of named parts;
  FX's immutable containers and pytree specs; instances of graphjit's own classes that
  declare themselves data (``__graphjit_portable__ = True``) and of ``graphjit_runtime``
  graph targets.
* By name, checked on load (written as persistent ids): Python modules; a module's
  globals dict; classes and functions by module and qualified name (pickle's rule: the
  name must lead back to the very object; also a function made elsewhere but bound to a
  name in its module, such as ``torch.nn.functional.max_pool2d``); a function also with a
  digest of its code and a class with the qualified names of its MRO, so that an edited
  function or a class with other bases is *stale* (:class:`Stale`: the entry is not
  used); an object bound to a name in the module of its type (``random._inst``, a
  module-level config object); an ``Enum`` member by its class and name; a function
  graphjit makes per class (``fn.__graphjit_made_by__ = (factory, args)``, the factory a
  ``graphjit_runtime`` function marked ``__graphjit_factory__``) by the factory and its
  arguments; torch operators
  (``OpOverload``, ``OpOverloadPacket``, higher-order operators) by their names;
  graphjit's own graph targets (``__module__ == "graphjit_runtime"``) by name.
* Code objects are written field by field, their constants through the same rules: a
  constant that is an object with state of its own (a generator, a tensor, a user
  object, a view of a dict) refuses the entry; a list, dict or set of constants is a
  snapshot the code reads (a prologue step's arguments) and is written by content.
* Anything else that compares by identity (an ``nn.Module``, a parameter, a closure made
  at run time) cannot be written: :class:`NotCacheable` names it.  Callers that know how to
  find such an object (the cache entry binds guard constants through their sources) pass
  a ``refs`` map from ``id(obj)`` to a reference and a ``resolve`` function for loading.

Loading is restricted to the same table (:class:`PortableUnpickler`): ``find_class``
answers only the loaders and classes above (never ``builtins.eval``, ``getattr``,
``os.system``...), and persistent ids only the kinds above.  The store authenticates an
entry (``store.py``, ``trust.py``) before a byte of it reaches the unpickler; the
restriction bounds what an entry that passes that check can reach.
"""

from __future__ import annotations

import collections
import enum
import functools
import gc
import hashlib
import importlib
import inspect
import io
import pickle
import sys
import types
from typing import Any, Callable

import numpy as np
import torch
import torch.fx.immutable_collections as fx_immutable
import torch.utils._pytree as pytree

#: graphjit's graph targets and helpers that are written into generated code as globals
#: under this module name (see ``graph/output_graph.py: _leaf_forward``)
RUNTIME_MODULE = "graphjit_runtime"


class NotCacheable(Exception):
    """An entry holds something that cannot be written for another process."""


class Stale(Exception):
    """A written reference leads to something else now (an edited function, a class with
    other bases, a name that no longer exists): the entry that holds it is not used."""


_code_digests: dict[int, tuple[types.CodeType, str]] = {}


def code_digest(code: types.CodeType) -> str:
    """A digest of everything a code object holds (bytecode, constants and nested code,
    names, file, qualified name, line and exception tables): equal digests, equal
    behaviour.  (Not ``marshal``: its output depends on reference counts.)"""
    known = _code_digests.get(id(code))
    if known is not None and known[0] is code:
        return known[1]
    h = hashlib.sha256()
    _hash_code(code, h)
    digest = h.hexdigest()[:32]
    _code_digests[id(code)] = (code, digest)
    return digest


def _hash_code(code: types.CodeType, h) -> None:
    for field in _code_fields(code):
        if isinstance(field, tuple):  # constants or names
            h.update(b"(")
            for item in field:
                _hash_const(item, h)
            h.update(b")")
        else:
            h.update(repr(field).encode())
        h.update(b"|")


def _hash_const(value: Any, h) -> None:
    if isinstance(value, types.CodeType):
        h.update(b"code:")
        h.update(code_digest(value).encode())
    elif isinstance(value, tuple):
        h.update(b"(")
        for item in value:
            _hash_const(item, h)
        h.update(b")")
    elif isinstance(value, frozenset):  # (iteration order depends on string hashing)
        h.update(b"frozenset" + repr(sorted(repr(v) for v in value)).encode())
    elif type(value) in (str, bytes, int, float, complex, bool, type(None), type(Ellipsis)):
        h.update(f"{type(value).__name__}:{value!r}".encode())
    else:  # generated code: an object among the constants
        h.update(hashlib.sha256(dumps(value)).digest())
    h.update(b",")


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def mro_names(cls: type) -> tuple[str, ...]:
    return tuple(qualified_name(k) for k in cls.__mro__)


def _runtime_registry() -> dict[str, Any]:
    """``graphjit_runtime`` names -> objects (graph targets, rebuild helpers)."""
    found: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("graphjit.") or module is None:
            continue
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) == RUNTIME_MODULE and hasattr(value, "__qualname__"):
                found.setdefault(value.__qualname__, value)
    return found


_RUNTIME: dict[str, Any] = {}


def runtime_home(obj: Any) -> str | None:
    """The ``graphjit.`` module that defines a runtime object (its ``__module__`` says
    ``graphjit_runtime``): its functions' globals name it."""
    fns = [obj] if isinstance(obj, types.FunctionType) else \
        [v for v in vars(obj).values() if isinstance(v, types.FunctionType)] if isinstance(obj, type) else []
    for fn in fns:
        home = fn.__globals__.get("__name__")
        if isinstance(home, str) and home.startswith("graphjit."):
            return home
    return None


def runtime_object(qualname: str, home: str | None = None) -> Any:
    """The runtime object named ``qualname``: looked up in its ``home`` module where the
    entry names one (no scan), else found by scanning graphjit's loaded modules."""
    if qualname not in _RUNTIME and home is not None and home.startswith("graphjit.") \
            and "." not in qualname:
        module = sys.modules.get(home)
        value = getattr(module, qualname, None) if module is not None else None
        if getattr(value, "__module__", None) == RUNTIME_MODULE and \
                getattr(value, "__qualname__", None) == qualname:
            _RUNTIME[qualname] = value
    if qualname not in _RUNTIME:
        _RUNTIME.update(_runtime_registry())
    try:
        return _RUNTIME[qualname]
    except KeyError:
        raise Stale(f"graphjit has no runtime object {qualname!r}") from None


def _importable(obj: Any) -> tuple[str, str] | None:
    """``(module, name)`` when importing gives back ``obj`` itself: by its qualified name,
    or (a function made by a factory and bound to a name in its module, such as
    ``torch.nn.functional.max_pool2d``) by its ``__name__`` in its module."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    candidates = [qualname] if "<locals>" not in qualname else []
    name = getattr(obj, "__name__", None)
    if isinstance(name, str) and name != qualname and name.isidentifier():
        candidates.append(name)
    for candidate in candidates:
        try:
            if _lookup(module, candidate) is obj:
                return module, candidate
        except Exception:
            continue
    return None


def _static_builtin_home(obj: Any) -> type | None:
    """The C class (of ``torch._C`` or ``builtins``) whose ``__dict__`` holds the builtin
    ``obj`` as a ``staticmethod``: such a builtin has no ``__self__`` nor ``__module__``,
    only its ``__qualname__`` (``TensorBase._make_subclass``)."""
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(qualname, str) or qualname.count(".") != 1:
        return None
    cls_name, attr = qualname.split(".")
    for home in ("torch._C", "builtins"):
        cls = getattr(sys.modules.get(home), cls_name, None)
        raw = vars(cls).get(attr) if isinstance(cls, type) else None
        if isinstance(raw, staticmethod) and raw.__func__ is obj:
            return cls
    return None


#: modules that name types whose ``__module__``/``__qualname__`` do not lead back to them
#: (``types.CodeType`` says ``builtins.code``)
_TYPE_ALIASES = ("types", "_collections_abc", "collections", "typing")


def _aliased(obj: Any) -> tuple[str, str] | None:
    for module in _TYPE_ALIASES:
        for name, value in vars(sys.modules.get(module) or importlib.import_module(module)).items():
            if value is obj and not name.startswith("__"):
                return module, name
    return None


def _module_of_globals(d: dict) -> str | None:
    """The name in ``sys.modules`` of the module whose globals ``d`` is."""
    name = d["__name__"]
    if getattr(sys.modules.get(name), "__dict__", None) is d:
        return name
    for key, module in list(sys.modules.items()):  # (``_collections_abc`` calls itself ``collections.abc``)
        if getattr(module, "__dict__", None) is d:
            return key
    return None


def _module_global(obj: Any) -> tuple[str, str] | None:
    """``(module, name)`` of a name that the module of ``obj``'s type binds to ``obj``
    itself (``random._inst``, a library's module-level default object), or (a sentinel,
    ``_MISSING = object()``) a module of graphjit's polyfills does."""
    module = sys.modules.get(getattr(type(obj), "__module__", None) or "")
    modules = [module] if module is not None else []
    if type(obj) is object:
        modules += [m for n, m in list(sys.modules.items()) if n.startswith("graphjit.polyfills.") and m is not None]
    for module in modules:
        for name, value in list(vars(module).items()):
            if value is obj and name.isidentifier():
                return module.__name__, name
    return None


def _class_of_dict(proxy: types.MappingProxyType) -> type | None:
    """The class whose ``__dict__`` ``proxy`` is (found through the names the class dict
    holds, or among the builtin types)."""
    referents = gc.get_referents(proxy)
    if len(referents) != 1:
        return None
    d = referents[0]
    module = d.get("__module__")
    if isinstance(module, str) and module in sys.modules:  # a Python class: among its module's
        top = [v for v in vars(sys.modules[module]).values() if isinstance(v, type)]
        candidates = top + [v for k in top for v in vars(k).values() if isinstance(v, type)]
    else:  # a builtin type
        candidates = [v for m in ("builtins", *_TYPE_ALIASES) for v in vars(sys.modules[m]).values()
                      if isinstance(v, type)]
    for cls in candidates:
        if isinstance(cls, type) and gc.get_referents(cls.__dict__)[0] is d:
            return cls
    return None


def _lookup(module: str, qualname: str) -> Any:
    obj = sys.modules.get(module) or importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _code_fields(code: types.CodeType) -> tuple:
    return (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_nlocals,
            code.co_stacksize, code.co_flags, code.co_code, code.co_consts, code.co_names,
            code.co_varnames, code.co_filename, code.co_name, code.co_qualname, code.co_firstlineno,
            code.co_linetable, code.co_exceptiontable, code.co_freevars, code.co_cellvars)


# -- loaders: the only callables a written entry may name (``find_class``) --------------------

def _make_code(*fields) -> types.CodeType:
    return types.CodeType(*fields)


def _tensor(dtype: torch.dtype, shape: tuple, stride: tuple, offset: int, data: bytes,
            requires_grad: bool) -> torch.Tensor:
    """A dense CPU tensor from its storage's bytes (never ``torch.load``)."""
    if not isinstance(dtype, torch.dtype):
        raise pickle.UnpicklingError("a tensor without a dtype")
    storage = (torch.frombuffer(bytearray(data), dtype=torch.uint8) if data
               else torch.empty(0, dtype=torch.uint8)).untyped_storage()
    out = torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)
    return out.requires_grad_(requires_grad) if requires_grad else out


def _method(owner: Any, fn: types.FunctionType) -> types.MethodType:
    """A Python function bound to an object (written as the object and the function)."""
    if not isinstance(fn, types.FunctionType):
        raise pickle.UnpicklingError("a method of a non-function")
    return types.MethodType(fn, owner)


def _method_by_name(owner: Any, name: str) -> types.MethodType:
    """``owner.name`` for a function or ``classmethod`` defined on ``owner``'s class (or
    on ``owner``, a class), found in the class dicts (no attribute lookup runs)."""
    cls = owner if isinstance(owner, type) else type(owner)
    for klass in cls.__mro__:
        member = klass.__dict__.get(name)
        if member is None:
            continue
        if isinstance(member, classmethod) and isinstance(member.__func__, types.FunctionType):
            return types.MethodType(member.__func__, cls)
        if isinstance(member, types.FunctionType) and not isinstance(owner, type):
            return types.MethodType(member, owner)
        break
    raise Stale(f"{cls.__qualname__}.{name} is not a method now")


def _exception(cls: type, args: tuple, attrs: dict, cause, context, suppress: bool) -> BaseException:
    """An exception like the one written (its ``__init__`` is not run again: it ran when the
    program made the one the trace saw)."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise pickle.UnpicklingError("an exception of a non-exception class")
    exc = BaseException.__new__(cls)
    exc.args = args
    exc.__dict__.update(attrs)
    exc.__cause__, exc.__context__, exc.__suppress_context__ = cause, context, suppress
    return exc


def _ndarray(dtype: str, shape: tuple, data: bytes) -> np.ndarray:
    """A numpy array from its bytes (a template generated code copies on every call)."""
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape).copy()


def _npscalar(dtype: str, data: bytes) -> np.generic:
    return np.frombuffer(data, dtype=np.dtype(dtype))[0]


def _npdtype(dtype: str) -> np.dtype:
    return np.dtype(dtype)


def _enum_member(cls: type, name: str) -> enum.Enum:
    if not isinstance(cls, enum.EnumMeta):
        raise pickle.UnpicklingError(f"{cls!r} is not an Enum")
    return cls[name]


#: bound builtin methods (``{}.get``, ``"".join``): the owner types they may be bound to
_METHOD_OWNERS = (dict, list, set, frozenset, tuple, str, bytes, int, float)


def _bound_ok(owner: Any, name: str) -> bool:
    """May a bound builtin method be written (and read) as ``getattr(owner, name)``?  Public
    methods of plain values and containers, and a function's ``__get__``."""
    if type(owner) in _METHOD_OWNERS:
        return isinstance(name, str) and not name.startswith("_")
    return type(owner) is types.FunctionType and name == "__get__"


def _bound_method(owner: Any, name: str) -> Any:
    if not _bound_ok(owner, name):
        raise pickle.UnpicklingError(f"refusing {type(owner).__name__}.{name}")
    return getattr(owner, name)


_LOADER_FUNCTIONS = (_make_code, _tensor, _method, _method_by_name, _exception, _enum_member, _bound_method,
                     _ndarray, _npscalar, _npdtype)
for _loader in _LOADER_FUNCTIONS:
    _loader.__module__ = __name__

#: ``(module, name)`` -> the object ``find_class`` answers: the loaders above, and the
#: constructors of the plain values pickle writes with ``REDUCE``/``GLOBAL``
_LOADERS: dict[tuple[str, str], Any] = {
    (__name__, f.__name__): f for f in _LOADER_FUNCTIONS}
_LOADERS.update({
    ("builtins", "complex"): complex, ("builtins", "slice"): slice, ("builtins", "range"): range,
    ("builtins", "Ellipsis"): Ellipsis, ("builtins", "NotImplemented"): NotImplemented,
    ("builtins", "frozenset"): frozenset, ("builtins", "set"): set, ("builtins", "bytearray"): bytearray,
    ("torch", "Size"): torch.Size, ("torch", "device"): torch.device,
    ("functools", "partial"): functools.partial, ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch.fx.immutable_collections", "immutable_list"): fx_immutable.immutable_list,
    ("torch.fx.immutable_collections", "immutable_dict"): fx_immutable.immutable_dict,
})
for _cls in (pytree.TreeSpec, getattr(pytree, "LeafSpec", None)):
    if isinstance(_cls, type):
        _LOADERS[(_cls.__module__, _cls.__qualname__)] = _cls
#: torch's named singletons (``torch.float32``, ``torch.strided``, ``torch.channels_last``)
_TORCH_VALUE_TYPES = (torch.dtype, torch.layout, torch.memory_format)

#: types written by content as they are (their elements are checked as they are written)
_PLAIN = frozenset({int, float, bool, str, bytes, type(None), tuple, list, frozenset, set, complex,
                    slice, range, type(Ellipsis), type(NotImplemented), torch.dtype, torch.Size,
                    torch.device, torch.memory_format, torch.layout, torch.DispatchKeySet})
#: of those, the ones whose instances have no identity to keep (constants of code)
_IMMUTABLE = frozenset({int, float, bool, str, bytes, type(None), complex, slice, range,
                        type(Ellipsis), type(NotImplemented), torch.dtype, torch.Size, torch.device,
                        torch.memory_format, torch.layout, torch.DispatchKeySet})
#: written by content through their own reduction (their parts through these rules)
_CONTENT_TYPES = frozenset({functools.partial, collections.OrderedDict, fx_immutable.immutable_list,
                            fx_immutable.immutable_dict, bytearray,
                            *(c for c in (pytree.TreeSpec, getattr(pytree, "LeafSpec", None))
                              if isinstance(c, type))})


def _portable_class(cls: type) -> bool:
    """A class of graphjit's own whose instances are data (``__graphjit_portable__``)."""
    return cls.__dict__.get("__graphjit_portable__", False) is True and \
        (cls.__module__ == RUNTIME_MODULE or cls.__module__.startswith("graphjit."))


def _immutable_constant(value: Any) -> bool:
    kind = type(value)
    if kind in _IMMUTABLE or kind is types.CodeType:
        return True
    if kind in (tuple, frozenset):
        return all(_immutable_constant(v) for v in value)
    return False


#: "nothing wrong" (``None`` is itself a constant)
_NONE = object()


class PortablePickler(pickle.Pickler):
    """See the module docstring.  ``refs``: ``id(obj) -> reference`` for objects the
    caller knows how to find again (written as persistent ids ``("ref", reference)``)."""

    def __init__(self, file, refs: dict[int, Any] | None = None) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.refs = refs or {}
        #: id(obj) -> (obj, its persistent id), for objects met again in one dump (a class,
        #: a module's globals...): the same tuple, which the pickle memo then writes once
        self._pids: dict[int, tuple] = {}

    def persistent_id(self, obj: Any) -> Any:
        kind = type(obj)
        if kind in _PLAIN and id(obj) not in self.refs:
            return None
        known = self._pids.get(id(obj))
        if known is None:  # (the object is kept with its id: no other takes the id meanwhile)
            known = self._pids[id(obj)] = (obj, self._persistent_id(obj))
        return known[1]

    def _persistent_id(self, obj: Any) -> Any:  # noqa: C901  (one table of cases)
        ref = self.refs.get(id(obj))
        if ref is not None:
            return ("ref", ref)
        kind = type(obj)
        if kind in _PLAIN:
            return None
        if isinstance(obj, types.ModuleType):
            if sys.modules.get(obj.__name__) is obj:
                return ("module", obj.__name__)
            for key, module in list(sys.modules.items()):  # (``_collections_abc`` calls itself ``collections.abc``)
                if module is obj:
                    return ("module", key)
        if kind is dict:
            if obj is sys.modules:
                return ("sys.modules",)
            if isinstance(obj.get("__name__"), str):
                module = _module_of_globals(obj)
                if module is not None:
                    return ("globals", module)
            return None
        if kind is types.MappingProxyType:
            cls = _class_of_dict(obj)
            if cls is None:
                raise NotCacheable("a mappingproxy that is not a class's __dict__")
            return ("classdict", cls)
        if isinstance(obj, torch._ops.OpOverload):
            return ("op", obj.namespace, obj._schema.name.split("::", 1)[1], obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            return ("op", obj._qualified_op_name.split("::", 1)[0], obj._qualified_op_name.split("::", 1)[1], None)
        if isinstance(obj, torch._ops.HigherOrderOperator):
            return ("hop", obj.name())
        if isinstance(obj, torch._ops._OpNamespace) and getattr(torch.ops, obj.name, None) is obj:
            return ("opns", obj.name)
        if getattr(obj, "__module__", None) == RUNTIME_MODULE and isinstance(obj, (type, types.FunctionType)):
            return ("runtime", obj.__qualname__, runtime_home(obj))
        if kind is types.FunctionType:
            made = obj.__dict__.get("__graphjit_made_by__")
            if made is not None:  # (a function graphjit makes per class: made again by its factory)
                return ("made", made[0].__qualname__, made[1], runtime_home(made[0]))
            where = _importable(obj)
            if where is None:
                raise NotCacheable(f"function {obj.__qualname__} ({obj.__code__.co_filename}) cannot be "
                                   "found by its name")
            return ("function", *where, code_digest(obj.__code__))
        if isinstance(obj, type):
            if _portable_class(obj):
                return None  # (written as a global: ``find_class`` checks it is portable)
            where = _importable(obj) or _aliased(obj)
            if where is None:
                raise NotCacheable(f"class {obj.__qualname__} cannot be found by its name")
            return ("class", *where, mro_names(obj))
        if kind in _BOUND_BUILTINS:
            owner = obj.__self__
            where = _importable(obj)  # (also pybind11's functions, bound to a function record)
            if where is not None:
                return ("builtin", *where)
            if owner is None or isinstance(owner, (types.ModuleType, type)):
                if owner is not None and getattr(owner, obj.__name__, None) == obj:  # (``cls.__subclasses__``)
                    return ("builtin-of", owner, obj.__name__)
                home = _static_builtin_home(obj) if owner is None else None
                if home is not None:  # (``Tensor._make_subclass``: a C class's static method)
                    return ("builtin-of", home, obj.__name__)
                raise NotCacheable(f"builtin {obj!r} cannot be found by its name")
            if type(owner) in (dict, list, set, bytearray) and self.persistent_id(owner) is None:
                raise NotCacheable(f"{obj!r} is bound to a {type(owner).__name__} known by identity")
            return None  # (reduced by ``reducer_override``)
        if kind in _DESCRIPTORS:
            owner = getattr(obj, "__objclass__", None)
            if isinstance(owner, type) and owner.__dict__.get(obj.__name__) is obj:
                return ("descriptor", owner, obj.__name__)
            raise NotCacheable(f"a {kind.__name__} {obj!r} not found in its class")
        if isinstance(obj, enum.Enum) or kind is types.MethodType:
            return None  # (reduced by ``reducer_override``)
        if isinstance(obj, torch.nn.Module):
            raise NotCacheable(f"a {type(obj).__qualname__} module held by identity")
        if isinstance(obj, torch.nn.Parameter):
            raise NotCacheable("a parameter held by identity")
        if kind in _CONTENT_TYPES or kind is torch.Tensor or _portable_class(kind) or kind is np.ndarray or \
                isinstance(obj, (np.generic, np.dtype)) or \
                getattr(kind, "__module__", None) == RUNTIME_MODULE:
            return None
        where = _module_global(obj)
        if where is not None:
            return ("global", *where, qualified_name(kind))
        return None  # (``reducer_override`` refuses it)

    def _constant_ok(self, value: Any) -> bool:
        return self._bad_constant(value) is _NONE

    def _bad_constant(self, value: Any) -> Any:
        """What in ``value`` generated code may not hold as a written constant
        (:data:`_NONE`: nothing).  Immutable values, named objects, graphjit's portable
        data, ``functools.partial``s and bound methods of those, exception templates, and
        containers of those (see the module docstring)."""
        if _immutable_constant(value) or _portable_class(type(value)):
            return _NONE
        if isinstance(value, np.dtype) and not value.hasobject or \
                (isinstance(value, np.generic) or type(value) is np.ndarray) and not value.dtype.hasobject:
            return _NONE  # (values; an array is a template numpy_values copies on every call)
        try:
            if self.persistent_id(value) is not None:
                return _NONE
        except NotCacheable:
            return value
        kind = type(value)
        if kind is types.MethodType:  # (no state of its own: its object and function)
            try:
                self._method_reduce(value)
            except NotCacheable:
                return value
            return self._bad_constant(value.__self__)
        if isinstance(value, BaseException):  # (a template: generated code raises fresh copies)
            if kind.__dict__.get("__reduce__") is not None:
                return value
            parts = [kind, *value.args, *vars(value).values(),
                     *(x for x in (value.__cause__, value.__context__) if x is not None)]
        elif kind is functools.partial and not value.__dict__:
            parts = [value.func, *value.args, *value.keywords.values()]
        elif kind in (tuple, frozenset, list, set):
            # (a list or set: a snapshot the code reads, a prologue step's arguments; code
            # run on every call cannot rely on a container it mutates, and the guard holds
            # the contents of any it read from outside; a live view stays refused)
            parts = list(value)
        elif kind is dict:
            parts = [*value.keys(), *value.values()]
        elif isinstance(value, enum.Enum):
            parts = [kind]
        else:
            return value
        for part in parts:
            bad = self._bad_constant(part)
            if bad is not _NONE:
                return bad
        return _NONE

    def _method_reduce(self, method: types.MethodType) -> tuple:
        """A bound method as its object and function, or (a function that cannot be
        named: ``namedtuple``'s ``_make``) its object and the name its class defines it by."""
        try:
            if self.persistent_id(method.__func__) is not None:
                return _method, (method.__self__, method.__func__)
        except NotCacheable:
            pass
        name = method.__func__.__name__
        try:
            again = _method_by_name(method.__self__, name)
        except Stale:
            again = None
        if again is None or again.__func__ is not method.__func__ or again.__self__ is not method.__self__:
            raise NotCacheable(f"method {method.__func__.__qualname__} cannot be found by its name")
        return _method_by_name, (method.__self__, name)

    def reducer_override(self, obj: Any) -> Any:  # noqa: C901  (one table of cases)
        kind = type(obj)
        if kind is types.CodeType:
            for const in obj.co_consts:
                bad = self._bad_constant(const)
                if bad is not _NONE:
                    inside = f" (in a {_what(const)})" if bad is not const else ""
                    raise NotCacheable(f"the generated code holds a {_what(bad)}{inside} by identity "
                                       "(a copy would not be the object it uses)")
            return _make_code, _code_fields(obj)
        if kind is torch.Tensor:
            return _tensor_reduce(obj)
        if isinstance(obj, enum.Enum):
            return _enum_member, (kind, obj.name)
        if kind in _BOUND_BUILTINS:
            if not _bound_ok(obj.__self__, obj.__name__):
                raise NotCacheable(f"a builtin method {obj.__name__} of a {_what(obj.__self__)}")
            return _bound_method, (obj.__self__, obj.__name__)
        if kind is types.MethodType:
            return self._method_reduce(obj)
        if isinstance(obj, BaseException) and kind.__dict__.get("__reduce__") is None:
            return _exception, (kind, obj.args, dict(vars(obj)), obj.__cause__, obj.__context__,
                                obj.__suppress_context__)
        if isinstance(obj, _TORCH_VALUE_TYPES) or kind in _PLAIN or kind in _CONTENT_TYPES or \
                isinstance(obj, type) or kind is types.FunctionType:
            return NotImplemented
        if _portable_class(kind) or getattr(kind, "__module__", None) == RUNTIME_MODULE:
            return NotImplemented
        if kind is np.ndarray and not obj.dtype.hasobject:
            return _ndarray, (obj.dtype.str, obj.shape, np.ascontiguousarray(obj).tobytes())
        if isinstance(obj, np.generic) and not obj.dtype.hasobject:
            return _npscalar, (obj.dtype.str, np.asarray(obj).tobytes())
        if isinstance(obj, np.dtype) and not obj.hasobject:
            return _npdtype, (obj.str,)
        if isinstance(obj, torch.Tensor):
            raise NotCacheable(f"a tensor of type {qualified_name(kind)} held as a constant")
        raise NotCacheable(f"a {_what(obj)} held by identity (a copy would not be the object the entry uses)")


def _tensor_reduce(t: torch.Tensor) -> tuple:
    if t.layout != torch.strided or t.device.type != "cpu" or t.is_quantized or t.is_neg() or t.is_conj():
        raise NotCacheable(f"a {t.layout} {t.device.type} tensor held as a constant")
    if t.grad_fn is not None:
        raise NotCacheable("a tensor with autograd history held as a constant")
    storage = t.untyped_storage()
    data = bytes(storage) if storage.nbytes() else b""
    return _tensor, (t.dtype, tuple(t.shape), tuple(t.stride()), t.storage_offset(), data, t.requires_grad)


def _what(value: Any) -> str:
    if isinstance(value, type):
        return f"class {value.__module__}.{value.__qualname__}"
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else qualified_name(kind)


#: builtin methods bound to an object (``{}.get``, ``f.__get__``)
_BOUND_BUILTINS = (types.BuiltinMethodType, types.MethodWrapperType)
#: C-level descriptors, found again in their class's ``__dict__`` (``object.__setattr__``)
_DESCRIPTORS_T = (types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType,
                  types.GetSetDescriptorType, types.MemberDescriptorType)
_DESCRIPTORS = frozenset(_DESCRIPTORS_T)


class PortableUnpickler(pickle.Unpickler):
    """Reads what :class:`PortablePickler` wrote, and nothing else: ``find_class`` answers
    only the loaders and data classes of the module docstring, ``persistent_load`` only the
    kinds the pickler writes.  ``resolve(reference)`` finds the objects the writer's caller
    referred to.  Raises :class:`Stale` for a reference that leads to something else now,
    ``pickle.UnpicklingError`` for anything the pickler would not have written."""

    def __init__(self, file, resolve: Callable[[Any], Any] | None = None) -> None:
        super().__init__(file)
        self.resolve = resolve

    def persistent_load(self, pid: Any) -> Any:  # noqa: C901  (one table of cases)
        if not isinstance(pid, tuple) or not pid or not isinstance(pid[0], str):
            raise pickle.UnpicklingError("malformed persistent id")
        kind = pid[0]
        try:
            if kind == "ref":
                if self.resolve is None:
                    raise Stale(f"no resolver for {pid[1]!r}")
                return self.resolve(pid[1])
            if kind == "module":
                return _import(pid[1])
            if kind == "globals":
                return vars(_import(pid[1]))
            if kind == "sys.modules":
                return sys.modules
            if kind == "classdict":
                if not isinstance(pid[1], type):
                    raise pickle.UnpicklingError("classdict of a non-class")
                return pid[1].__dict__
            if kind == "op":
                packet = getattr(getattr(torch.ops, pid[1]), pid[2])
                return packet if pid[3] is None else getattr(packet, pid[3])
            if kind == "opns":
                return getattr(torch.ops, pid[1])
            if kind == "hop":
                return getattr(torch.ops.higher_order, pid[1])
            if kind == "runtime":
                return runtime_object(pid[1], pid[2] if len(pid) > 2 and isinstance(pid[2], str) else None)
            if kind == "function":
                fn = _lookup(pid[1], pid[2])
                if not isinstance(fn, types.FunctionType) or code_digest(fn.__code__) != pid[3]:
                    raise Stale(f"function {pid[1]}.{pid[2]} changed")
                return fn
            if kind == "class":
                cls = _lookup(pid[1], pid[2])
                if not isinstance(cls, type) or mro_names(cls) != pid[3]:
                    raise Stale(f"class {pid[1]}.{pid[2]} changed")
                return cls
            if kind == "builtin":
                fn = _lookup(pid[1], pid[2])
                if not isinstance(fn, _BOUND_BUILTINS + (types.BuiltinFunctionType,)):
                    raise Stale(f"builtin {pid[1]}.{pid[2]} changed")
                return fn
            if kind == "builtin-of":
                owner, name = pid[1], pid[2]
                if not isinstance(owner, (types.ModuleType, type)) or not isinstance(name, str):
                    raise pickle.UnpicklingError("builtin of a non-module")
                fn = inspect.getattr_static(owner, name)  # (a descriptor: bound below, no lookup code runs)
                fn = fn.__get__(None, owner) if isinstance(fn, _DESCRIPTORS_T) else getattr(owner, name)
                if not isinstance(fn, _BOUND_BUILTINS):
                    raise Stale(f"builtin {name} changed")
                return fn
            if kind == "made":
                factory = runtime_object(pid[1], pid[3] if len(pid) > 3 and isinstance(pid[3], str) else None)
                if not getattr(factory, "__graphjit_factory__", False):
                    raise pickle.UnpicklingError(f"{pid[1]} is not a graphjit factory")
                return factory(*pid[2])
            if kind == "descriptor":
                owner, name = pid[1], pid[2]
                found = owner.__dict__.get(name) if isinstance(owner, type) else None
                if type(found) not in _DESCRIPTORS:
                    raise Stale(f"{owner!r}.{name} is not a descriptor now")
                return found
            if kind == "global":
                obj = getattr(_import(pid[1]), pid[2])
                if qualified_name(type(obj)) != pid[3]:
                    raise Stale(f"{pid[1]}.{pid[2]} is a {type(obj).__qualname__} now")
                return obj
        except (ImportError, AttributeError, KeyError) as e:
            raise Stale(f"{pid[:3]!r} not found: {e}") from None
        raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")

    def find_class(self, module: str, name: str) -> Any:
        found = _LOADERS.get((module, name))
        if found is not None:
            return found
        if module == "torch" and isinstance(getattr(torch, name, None), _TORCH_VALUE_TYPES):
            return getattr(torch, name)
        if module.startswith("graphjit.") and "." not in name:
            obj = getattr(sys.modules.get(module), name, None)
            if isinstance(obj, type) and _portable_class(obj) or \
                    obj is not None and not isinstance(obj, type) and _portable_class(type(obj)):
                return obj
        raise pickle.UnpicklingError(f"a graphjit cache entry does not name {module}.{name}")


def _import(name: str) -> types.ModuleType:
    """A module an entry names: one already imported (a program's frames run after the
    modules their globals name were imported), or imported now by its dotted name."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    if not all(part.isidentifier() for part in name.split(".")):
        raise pickle.UnpicklingError(f"not a module name: {name!r}")
    return importlib.import_module(name)


def dumps(obj: Any, refs: dict[int, Any] | None = None) -> bytes:
    buf = io.BytesIO()
    try:
        PortablePickler(buf, refs).dump(obj)
    except NotCacheable:
        raise
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:
        raise NotCacheable(f"{type(e).__name__}: {e}") from None
    return buf.getvalue()


def loads(data: bytes, resolve: Callable[[Any], Any] | None = None) -> Any:
    return PortableUnpickler(io.BytesIO(data), resolve).load()


def describe(obj: Any) -> tuple:
    """A short fingerprint of an object bound by identity in another process: what must be
    the same for the entry to hold (a function's code, a class's bases, a tensor's
    metadata, otherwise the type)."""
    if isinstance(obj, types.FunctionType):
        return ("function", code_digest(obj.__code__))
    if isinstance(obj, types.CodeType):
        return ("code", code_digest(obj))
    if isinstance(obj, type):
        return ("class", mro_names(obj))
    if isinstance(obj, torch.nn.parameter.UninitializedTensorMixin):  # (no shape until its module's first call)
        return ("uninitialized", qualified_name(type(obj)))
    if isinstance(obj, torch.Tensor):
        return ("tensor", qualified_name(type(obj)), str(obj.dtype), str(obj.device), tuple(obj.shape),
                tuple(obj.stride()) if obj.layout == torch.strided else None, obj.requires_grad)
    if isinstance(obj, types.MethodType):
        return ("method", describe(obj.__func__))
    return ("object", qualified_name(type(obj)))


__all__ = ["NotCacheable", "Stale", "PortablePickler", "PortableUnpickler", "dumps", "loads", "describe",
           "code_digest", "RUNTIME_MODULE"]

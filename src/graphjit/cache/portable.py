"""Portable pickling: values written by content, objects with an identity written as a
way to find them again in another process.

Contract (:class:`PortablePickler` / :func:`loads`):

* Plain data (numbers, strings, tuples, lists, dicts, sets, slices, ``torch.dtype``,
  ``torch.Size``, ``torch.device``, tensors held as constants) is written by content.
* Objects found through an import are written as how to import them, and checked on load:
  Python modules by name; a module's globals dict (``vars(module)``) by the module name;
  classes and functions by module and qualified name (pickle's own rule: the name must
  lead back to the very object); a function also with a digest of its code, and a class
  with the qualified names of its MRO, so that an edited function or a class with other
  bases is *stale* (:class:`Stale`: the entry that holds it is not used); torch operators
  (``OpOverload``, ``OpOverloadPacket``, higher-order operators) by their names;
  graphjit's own graph targets (``__module__ == "graphjit_runtime"``) by name.
* Code objects are written field by field (their constants through the same rules).
* Anything else that compares by identity (an ``nn.Module``, a parameter, a closure made
  at run time) cannot be written: :class:`NotCacheable` names it.  Callers that know how to
  find such an object (the cache entry binds guard constants through their sources) pass
  a ``refs`` map from ``id(obj)`` to a reference and a ``resolve`` function for loading.
"""

from __future__ import annotations

import builtins
import copyreg
import gc
import hashlib
import importlib
import io
import pickle
import sys
import types
from typing import Any, Callable

import torch

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


def runtime_object(qualname: str) -> Any:
    if qualname not in _RUNTIME:
        _RUNTIME.update(_runtime_registry())
    try:
        return _RUNTIME[qualname]
    except KeyError:
        raise Stale(f"graphjit has no runtime object {qualname!r}") from None


def _importable(obj: Any) -> tuple[str, str] | None:
    """``(module, qualname)`` when importing gives back ``obj`` itself."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        return None
    try:
        found = _lookup(module, qualname)
    except Exception:
        return None
    return (module, qualname) if found is obj else None


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


def _make_code(*fields) -> types.CodeType:
    return types.CodeType(*fields)


_make_code.__module__ = __name__


class PortablePickler(pickle.Pickler):
    """See the module docstring.  ``refs``: ``id(obj) -> reference`` for objects the
    caller knows how to find again (written as persistent ids ``("ref", reference)``)."""

    def __init__(self, file, refs: dict[int, Any] | None = None) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.refs = refs or {}
        self.dispatch_table = copyreg.dispatch_table.copy()
        self.dispatch_table[types.CodeType] = lambda code: (_make_code, _code_fields(code))
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
        if kind is types.ModuleType:
            return ("module", obj.__name__)
        if kind is dict and isinstance(obj.get("__name__"), str):
            module = _module_of_globals(obj)
            if module is not None:
                return ("globals", module)
        if obj is sys.modules:
            return ("sys.modules",)
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
        if getattr(obj, "__module__", None) == RUNTIME_MODULE and isinstance(obj, (type, types.FunctionType)):
            return ("runtime", obj.__qualname__)
        if kind is types.FunctionType:
            where = _importable(obj)
            if where is None:
                raise NotCacheable(f"function {obj.__qualname__} ({obj.__code__.co_filename}) cannot be "
                                   "found by its name")
            return ("function", *where, code_digest(obj.__code__))
        if isinstance(obj, type):
            where = _importable(obj) or _aliased(obj)
            if where is None:
                raise NotCacheable(f"class {obj.__qualname__} cannot be found by its name")
            return ("class", *where, mro_names(obj))
        if kind in _BOUND_BUILTINS:
            owner = obj.__self__
            if owner is not None and type(owner) in (dict, list, set, bytearray) and \
                    self.persistent_id(owner) is None:  # (not a module's globals)
                raise NotCacheable(f"{obj!r} is bound to a {type(owner).__name__} known by identity")
            return None
        if isinstance(obj, torch.nn.Module):
            raise NotCacheable(f"a {type(obj).__qualname__} module held by identity")
        if isinstance(obj, torch.nn.Parameter):
            raise NotCacheable("a parameter held by identity")
        return None


#: types always written by content (the common case, checked first)
_PLAIN = frozenset({int, float, bool, str, bytes, type(None), tuple, list, frozenset, set, complex,
                    slice, type(Ellipsis), torch.dtype, torch.Size, torch.device, torch.memory_format,
                    torch.layout})


#: builtin methods bound to an object (``{}.get``, ``f.__get__``): pickled as
#: ``getattr(owner, name)``, so the owner must be found again, not copied
_BOUND_BUILTINS = (types.BuiltinMethodType, types.MethodWrapperType)


class PortableUnpickler(pickle.Unpickler):
    """Reads what :class:`PortablePickler` wrote; ``resolve(reference)`` finds the objects
    the writer's caller referred to.  Raises :class:`Stale` for a reference that leads to
    something else now."""

    def __init__(self, file, resolve: Callable[[Any], Any] | None = None) -> None:
        super().__init__(file)
        self.resolve = resolve

    def persistent_load(self, pid: Any) -> Any:
        kind = pid[0]
        try:
            if kind == "ref":
                if self.resolve is None:
                    raise Stale(f"no resolver for {pid[1]!r}")
                return self.resolve(pid[1])
            if kind == "module":
                return importlib.import_module(pid[1])
            if kind == "globals":
                return vars(importlib.import_module(pid[1]))
            if kind == "sys.modules":
                return sys.modules
            if kind == "classdict":
                return pid[1].__dict__
            if kind == "op":
                packet = getattr(getattr(torch.ops, pid[1]), pid[2])
                return packet if pid[3] is None else getattr(packet, pid[3])
            if kind == "hop":
                return getattr(torch.ops.higher_order, pid[1])
            if kind == "runtime":
                return runtime_object(pid[1])
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
        except (ImportError, AttributeError) as e:
            raise Stale(f"{pid[:3]!r} not found: {e}") from None
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in ("eval", "exec", "compile", "__import__"):
            raise pickle.UnpicklingError(f"refusing builtins.{name}")
        return super().find_class(module, name)


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
    if isinstance(obj, torch.Tensor):
        return ("tensor", qualified_name(type(obj)), str(obj.dtype), str(obj.device), tuple(obj.shape),
                tuple(obj.stride()) if obj.layout == torch.strided else None, obj.requires_grad)
    if isinstance(obj, types.MethodType):
        return ("method", describe(obj.__func__))
    return ("object", qualified_name(type(obj)))


__all__ = ["NotCacheable", "Stale", "PortablePickler", "PortableUnpickler", "dumps", "loads", "describe",
           "code_digest", "RUNTIME_MODULE"]
del builtins

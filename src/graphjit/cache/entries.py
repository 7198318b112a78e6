"""A compiled cache entry as data for another process, and that data bound again there.

Contract.  :func:`capture` turns an entry (its guard's :class:`GuardRecipe`, its
transformed code, its graphs) into an :class:`EntryPayload`, or raises
:class:`NotCacheable` naming what cannot be written.  Each constant of the guard is

* a value (compared with ``==``): written by content;
* an object compared by identity that has a name (a class, a function, a module, a
  module's globals, a builtin, a torch operator): written as that name, with the code
  digest of a function and the bases of a class (an edited one is stale);
* any other object compared by identity (the model, its submodules and parameters, a
  function's ``__code__``, a closure made at run time): a *slot*, written as the
  guard's own expression for where it was read (``obj._modules['fc']``, never an
  ``id``) and a fingerprint (:func:`portable.describe`: the type, a function's code, a
  tensor's metadata).

The transformed code and the graphs refer to slot objects (a parameter ``get_attr`` reads,
a module a break calls through its wrapper) and to the runtime's objects (the compiled
graphs, resume functions, wrappers: ``session_refs``) by reference.

:meth:`EntryPayload.bind` is the other half, at the first call of a new process that
misses in memory: it evaluates the slot expressions on the call's own arguments (a
binder function with the guard's signature), checks each fingerprint, makes the guard
with those constants and runs it; if it passes, the graphs are rebuilt with their
attributes bound, the code is rebuilt with its references resolved, and each graph is
compiled by the session's backend on its first call (``eager`` and ``aot_eager`` rebuild
their callables from the graph; ``inductor`` finds its own FX graph and AOTAutograd
caches).  Nothing is traced.  A fingerprint that differs or a guard that fails: the entry
does not serve this call (it may serve another).
"""

from __future__ import annotations

import dataclasses
import gc
import io
import threading
import types
from typing import Any, Callable

import torch
from torch._guards import TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from .. import library_setup
from ..graph.compile import CompiledGraph, new_graph_name
from ..guards.codegen import GuardFunction, GuardRecipe, guard_helpers, instantiate_guard, make_guard_callable
from ..sources import (AttrSource, ConstSource, FloatTensorSource, GetItemSource, GlobalSource, GuardScope, Source,
                       TypeSource)
from .graphs import GraphRecord, build_graph_module, graph_record
from .portable import NotCacheable, PortablePickler, Stale, describe, dumps, loads, qualified_name


@dataclasses.dataclass(frozen=True)
class _Slot:
    """The place of a constant found again by its expression when the entry is bound."""

    __graphjit_portable__ = True  # (written by content into the persistent cache)

    index: int


@dataclasses.dataclass
class EntryPayload:
    """What one entry needs in another process (see the module docstring)."""

    __graphjit_portable__ = True  # (written by content into the persistent cache)

    qualname: str
    recipe: GuardRecipe            # its constants: values, names, or _Slot markers
    slot_exprs: list[str]          # per slot: the guard expression that reads it
    slot_descs: list[tuple]        # per slot: its fingerprint
    slot_consts: list[int]         # per slot: its index among the recipe's constants
    binder_code: types.CodeType    # ``___make(...)`` returning the binder
    extra_names: list[str]         # constants only the binder reads (named objects)
    extra_values: list[Any]
    graphs_blob: bytes             # [GraphRecord], references resolved at bind
    code_blob: bytes | None        # the transformed code (None: the function itself)
    graph_count: int
    breaks: list[str]

    def bind(self, fn: types.FunctionType, args: tuple, kwargs: dict, refs: "SessionRefs",
             compiler_fn: Callable, finish: Callable, explain: bool = False) -> tuple | str:
        """``(guard, function, graphs)`` for this call, or why the entry does not serve it
        (with ``explain``, the first failing check).  Raises :class:`Stale` when a
        reference leads to something else now."""
        values = [c.value for c in self.recipe.consts]
        if self.slot_exprs:
            bound = self._run_binder(fn, values, args, kwargs)
            if isinstance(bound, str):
                return bound
            for i, obj in enumerate(bound):
                if describe(obj) != self.slot_descs[i]:
                    return f"{self.slot_exprs[i]} is not what it was ({describe(obj)} != {self.slot_descs[i]})"
                values[self.slot_consts[i]] = obj
        library_setup.before_loaded_guard(values)  # (the libraries its trace read, set up)
        guard = instantiate_guard(self.recipe, fn, values, self.recipe.make_code())
        try:
            passed = guard.check(*args, **kwargs)
        except TypeError as e:  # the arguments do not bind to the signature
            return f"arguments do not match ({e})"
        if not passed:
            return "guard failed" + (f": {guard.why(*args, **kwargs)}" if explain else "")
        slot_objects = {i: values[c] for i, c in enumerate(self.slot_consts)}
        compiled: list[CompiledGraph] = []

        def resolve(ref):
            if ref[0] == "slot":
                return slot_objects[ref[1]]
            if ref[0] == "graph":
                return compiled[ref[1]]
            return refs.resolve(ref, fn)

        records: list[GraphRecord] = loads(self.graphs_blob, resolve)
        for record in records:
            gm = build_graph_module(record)
            name = new_graph_name()
            gm.meta["graphjit_name"] = name
            cg = CompiledGraph(name, gm, None, [])
            cg.lifted = record.lifted
            cg.fn = _CompileOnFirstCall(cg, compiler_fn, finish)
            compiled.append(cg)
        if self.code_blob is None:
            return guard, fn, compiled
        code = loads(self.code_blob, resolve)
        new_fn = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        new_fn.__kwdefaults__ = fn.__kwdefaults__
        new_fn.__qualname__ = fn.__qualname__
        return guard, new_fn, compiled

    def _run_binder(self, fn, values, args, kwargs) -> tuple | None:
        recipe = self.recipe
        cells = [None if isinstance(v, _Slot) else v for v in values] + self.extra_values + \
            guard_helpers(recipe, fn)
        names = recipe.const_names + self.extra_names + recipe.helper_names
        binder = make_guard_callable(recipe, self.binder_code, fn, cells, names)
        try:
            return binder(*args, **kwargs)
        except Exception as e:  # a value of another shape: not this entry
            return f"a bound constant is not there ({type(e).__name__}: {e})"


class _CompileOnFirstCall:
    """A loaded graph's callable until its first call: then the backend compiles the
    graph with that call's inputs as example inputs (as it did in the first process)."""

    def __init__(self, compiled: CompiledGraph, compiler_fn: Callable, finish: Callable) -> None:
        self.compiled, self.compiler_fn, self.finish = compiled, compiler_fn, finish
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<compile {self.compiled.name} on its first call>"

    def __call__(self, *args):
        compiled = self.compiled
        with self.lock:
            if compiled.fn is self and getattr(self.compiler_fn, "graphjit_runs_graph", False):
                compiled.fn = self.finish(compiled.gm, self.compiler_fn(compiled.gm, list(args)))
            elif compiled.fn is self:
                # the inputs faked with static sizes, as the trace faked them (a backend
                # faking them again gets these); inductor's FX graph cache wants a ShapeEnv
                fake_mode = FakeTensorMode(shape_env=ShapeEnv())
                fakes = [fake_mode.from_tensor(a, static_shapes=True)  # (held: the memo is weak)
                         for a in args if isinstance(a, torch.Tensor)]
                with tracing(TracingContext(fake_mode)):
                    fn = self.compiler_fn(compiled.gm, list(args))
                del fakes
                compiled.fn = self.finish(compiled.gm, fn)
        return compiled.fn(*args)


class SessionRefs:
    """How the runtime names its own objects in generated code (resume functions,
    wrappers of callees, the resolver) and finds them again: implemented by the runtime
    (``runtime/persist.py``)."""

    def references(self) -> dict[int, tuple]:
        raise NotImplementedError

    def resolve(self, ref: tuple, fn: types.FunctionType) -> Any:
        raise NotImplementedError


#: objects a guard compares by identity that are found by name in another process
_NAMED_TYPES = (types.ModuleType, types.BuiltinFunctionType, types.MethodDescriptorType,
                types.WrapperDescriptorType, types.ClassMethodDescriptorType, types.GetSetDescriptorType,
                types.MemberDescriptorType, torch.dtype)


def _named(obj: Any) -> bool:
    """Is ``obj`` written as a name that leads back to it (never copied)?"""
    if obj is None or obj is True or obj is False or obj is Ellipsis or obj is NotImplemented:
        return True
    if isinstance(obj, _NAMED_TYPES):
        owner = getattr(obj, "__self__", None)
        if owner is None or isinstance(owner, (types.ModuleType, type)):
            return True
    try:
        return PortablePickler(io.BytesIO()).persistent_id(obj) is not None
    except NotCacheable:
        return False


def capture(qualname: str, guard: GuardFunction, fn: types.FunctionType, entry_fn: types.FunctionType,
            graphs: list[CompiledGraph], session_refs: SessionRefs, breaks: list[str],
            symbolic_ok: bool = True) -> EntryPayload:
    """The payload of an entry (see the module docstring); raises :class:`NotCacheable`.
    ``symbolic_ok``: graphs with symbolic sizes can be written (the ``eager`` backend runs
    them for any size; a compiling backend is called again with one call's inputs, static)."""
    recipe: GuardRecipe | None = guard.recipe
    if recipe is None:
        raise NotCacheable("the guard has no recipe")
    recipe.all_parts()  # (the written entry explains its misses: its constants are all known)
    if not symbolic_ok and any(_symbolic_inputs(cg.gm) or any(isinstance(a.source, FloatTensorSource)
                                                              for a in cg.graph_args) for cg in graphs):
        raise NotCacheable("a graph with symbolic sizes or numbers for a compiling backend")
    consts: list = []
    slot_sources: list[Source | str] = []
    slot_consts: list[int] = []
    slot_descs: list[tuple] = []
    refs: dict[int, Any] = {}
    derived = _derived_binds(recipe, fn)
    for i, info in enumerate(recipe.consts):
        value = info.value
        if not info.identity or _named(value):
            consts.append(info)
            continue
        if info.bind is None:
            info = dataclasses.replace(info, bind=derived.get(id(value)))
        if info.bind is None:
            raise NotCacheable(f"guard constant {recipe.const_names[i]} ({_what(value)}) is "
                               "compared by identity and has no source")
        refs[id(value)] = ("slot", len(slot_sources))
        slot_sources.append(info.bind)
        slot_consts.append(i)
        slot_descs.append(describe(value))
        consts.append(dataclasses.replace(info, value=_Slot(len(slot_sources) - 1), bind=None))
    for i, info in enumerate(consts):
        if info.bind is not None:
            consts[i] = dataclasses.replace(info, bind=None)
    slot_values = {id(recipe.consts[c].value): slot_sources[j] for j, c in enumerate(slot_consts)}
    exprs, extra_names, extra_values = _render(recipe, slot_sources, slot_values)
    portable = dataclasses.replace(recipe, consts=consts, scope_args=())
    portable.make_code()  # compiled once here, written with the payload
    refs.update(session_refs.references())
    for index, cg in enumerate(graphs):
        refs[id(cg)] = ("graph", index)
    records = [graph_record(cg.gm, cg.lifted) for cg in graphs]
    graphs_blob = dumps(records, refs)
    code_blob = None if entry_fn is fn else dumps(entry_fn.__code__, refs)
    body = "    def ___bind(" + recipe.sig + "):\n        return (" + "".join(f"{e}, " for e in exprs) + ")\n"
    binder_src = recipe.module_src(body, "___bind", extra_names)
    binder_code = compile(binder_src, f"<graphjit guard binder {recipe.name}>", "exec")
    payload = EntryPayload(qualname, portable, exprs, slot_descs, slot_consts, binder_code, extra_names,
                           extra_values, graphs_blob, code_blob, len(graphs), breaks)
    return payload


def _symbolic_inputs(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride())):
            return True
    return False


def _derived_binds(recipe: GuardRecipe, fn: types.FunctionType) -> dict[int, Source]:
    """Sources for objects made at run time that the guard reads as constants, found
    through a constant it binds by its source or finds by name: the classes of a bound
    object's MRO (``torch.nn.utils.parametrize`` makes one per module class) and of a bound
    class's, their ``__dict__``s, and the globals dicts of the functions they define
    (code made by ``exec``: ``namedtuple``'s ``__new__``, an FX ``GraphModule``'s
    ``forward``) or of a bound function."""
    out: dict[int, Source] = {}
    dicts: dict[int, Source] = {}
    visited: set[int] = set()

    def visit_class(cls: type, src: Source) -> None:
        if id(cls) in visited:
            return
        visited.add(id(cls))
        out.setdefault(id(cls), src)
        under = gc.get_referents(cls.__dict__)[0]
        dict_src = dicts.setdefault(id(under), AttrSource(src, "__dict__"))
        for name, member in list(under.items()):
            fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            if isinstance(fn, types.FunctionType) and isinstance(name, str):
                item = GetItemSource(dict_src, name)
                out.setdefault(id(fn.__globals__), AttrSource(AttrSource(item, "__func__") if fn is not member
                                                              else item, "__globals__"))

    for info in recipe.consts:
        if not info.identity:
            continue
        value = info.value
        src = info.bind if isinstance(info.bind, Source) else \
            (ConstSource(value, "named") if info.bind is None and _named(value) else None)
        if src is None:
            continue
        if isinstance(value, type):
            for i, cls in enumerate(value.__mro__):
                visit_class(cls, src if i == 0 else GetItemSource(AttrSource(src, "__mro__"), i))
        elif isinstance(value, types.FunctionType):
            out.setdefault(id(value.__globals__), AttrSource(src, "__globals__"))
        elif not _named(value):
            for i, cls in enumerate(type(value).__mro__):
                visit_class(cls, TypeSource(src) if i == 0 else
                            GetItemSource(AttrSource(TypeSource(src), "__mro__"), i))
    for info in recipe.consts:
        if isinstance(info.value, types.MappingProxyType):
            under = gc.get_referents(info.value)
            if len(under) == 1 and id(under[0]) in dicts:
                out.setdefault(id(info.value), dicts[id(under[0])])
    wanted = {id(info.value) for info in recipe.consts if info.identity and info.bind is None and id(info.value) not in out}
    if wanted:  # an object bound to a name of the function's module (a sentinel ``_MISSING = object()``)
        for name, value in list(fn.__globals__.items()):
            if id(value) in wanted and isinstance(name, str) and name.isidentifier():
                out.setdefault(id(value), GlobalSource(name))
    return out


def _render(recipe: GuardRecipe, sources: list, slot_values: dict[int, Any]) -> tuple[list[str], list[str], list[Any]]:
    """The guard expressions of ``sources`` (``str`` ones are expressions already), and the
    named constants they read that the guard itself does not.  A constant that is itself a
    slot (a class made at run time read through ``ConstSource``) is written as its own
    source, so the binder needs no slot to find another."""
    by_id = {id(info.value): recipe.const_names[i] for i, info in enumerate(recipe.consts)}
    extra_names: list[str] = []
    extra_values: list[Any] = []
    rendering: set[int] = set()

    def ref(value: Any, name: str | None = None, *, identity: bool = False, bind: Any = None) -> str:
        slot = slot_values.get(id(value))
        if slot is not None:
            if id(value) in rendering:
                raise NotCacheable("a bound constant found only through itself")
            rendering.add(id(value))
            try:
                return "(" + (slot if isinstance(slot, str) else slot.guard_expr(scope)) + ")"
            finally:
                rendering.discard(id(value))
        known = by_id.get(id(value))
        if known is not None:
            return known
        if identity and not _named(value):
            raise NotCacheable(f"a {type(value).__qualname__} read by identity on the way to a bound constant")
        known = by_id[id(value)] = f"___x{len(extra_names)}"
        extra_names.append(known)
        extra_values.append(value)
        return known

    local_names, renamed, closure_index = recipe.scope_args
    scope = GuardScope(local_names, renamed, closure_index, ref)
    exprs = [s if isinstance(s, str) else s.guard_expr(scope) for s in sources]
    return exprs, extra_names, extra_values


def arg_types(args: tuple, kwargs: dict) -> list[str]:
    """The argument types a call is filtered on before an entry is read in full."""
    return [qualified_name(type(a)) for a in args] + \
        [f"{k}={qualified_name(type(v))}" for k, v in sorted(kwargs.items())]


__all__ = ["EntryPayload", "SessionRefs", "capture", "arg_types", "NotCacheable", "Stale"]


def _what(value: Any) -> str:
    if isinstance(value, type):
        return f"class {value.__module__}.{value.__qualname__}"
    return f"a {type(value).__qualname__}"

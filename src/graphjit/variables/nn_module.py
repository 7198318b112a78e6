"""``torch.nn.Module`` instances: user objects with module-specific knowledge.

* Attributes follow the generic protocol (``object_protocol``); ``Module.__getattr__``,
  reached when that fails, is modelled: parameters and buffers become ``get_attr`` nodes
  guarded by identity through ``_parameters``/``_buffers``, submodules are read through
  ``_modules``.  ``Module.__setattr__`` is modelled for plain values (an instance-dict
  write, seed 001's patched ``forward`` included); assigning parameters, buffers or
  submodules is a graph break.
* A call mirrors ``Module.__call__``: a class-level ``__call__`` override is inlined;
  without hooks, the module's hook dicts (one combined check) and the global ones are
  guarded empty; with forward pre-hooks or forward hooks (the module's or global ones),
  those are traced as ``_call_impl`` runs them, their dicts guarded by their keys (backward
  hooks: graph break).  ``forward`` is looked up through the protocol, so an instance
  ``forward``, even one written earlier in this trace, is what runs.
* ``torch.nn`` modules without children whose ``forward`` is their class's own are leaves:
  traced inline (``config.inline_nn_leaves``), or one node calling their class's
  ``forward`` (an RNN, the option off, or a class whose inline trace failed: a restart).
  A leaf node's ``training`` flag is guarded unless its forward never reads it; the fake
  run that gives the node's metadata uses a fake copy of the module, so no real buffer is
  updated while tracing.  Everything else (containers, user modules) is inlined.
"""

from __future__ import annotations

import functools
import inspect
import types

import torch
from torch.nn.modules import module as _module_globals

from .. import config
from ..exc import RestartAnalysis, Unsupported, observed, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, ConstSource, LocalSource, module_attr_source
from . import lazy_modules, object_protocol as proto
from .arg_binding import check_call
from .base import MethodVariable, VariableTracker, in_body, register_builder
from .constant import ConstantVariable
from .dicts import MISSING, DictVariable
from .functions import UserMethodVariable
from .iterators import ListIteratorVariable
from .objects import UserObjectVariable
from .sequences import TupleVariable
from ..diagnostics.describe import describe

_MODULE_GLOBALS = ConstSource(_module_globals, "torch.nn.modules.module")
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks")

#: ``torch.nn`` leaves whose ``forward`` does not read ``self.training``.
TRAINING_INDEPENDENT = frozenset({
    torch.nn.Linear, torch.nn.Bilinear, torch.nn.Identity, torch.nn.Flatten, torch.nn.Unflatten,
    torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d,
    torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d, torch.nn.ReLU, torch.nn.ReLU6,
    torch.nn.GELU, torch.nn.SiLU, torch.nn.Mish, torch.nn.Tanh, torch.nn.Sigmoid,
    torch.nn.Softmax, torch.nn.LogSoftmax, torch.nn.LeakyReLU, torch.nn.ELU, torch.nn.Softplus,
    torch.nn.Hardtanh, torch.nn.Hardswish, torch.nn.Hardsigmoid, torch.nn.PReLU,
    torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.RMSNorm, torch.nn.Embedding,
    torch.nn.MaxPool1d, torch.nn.MaxPool2d, torch.nn.MaxPool3d, torch.nn.AvgPool1d,
    torch.nn.AvgPool2d, torch.nn.AvgPool3d, torch.nn.AdaptiveAvgPool1d, torch.nn.AdaptiveAvgPool2d,
    torch.nn.AdaptiveAvgPool3d, torch.nn.AdaptiveMaxPool1d, torch.nn.AdaptiveMaxPool2d,
    torch.nn.Upsample, torch.nn.PixelShuffle, torch.nn.ZeroPad2d, torch.nn.ConstantPad1d,
    torch.nn.ConstantPad2d,
})


def is_leaf_module(module: torch.nn.Module) -> bool:
    """A ``torch.nn`` module with no children (Linear, Dropout, BatchNorm...)."""
    return type(module).__module__.startswith("torch.nn.") and not module._modules


@functools.lru_cache(maxsize=None)
def forward_reads(cls: type) -> frozenset[str] | None:
    """The attribute names a ``torch.nn`` leaf's ``forward`` (and the methods of its class
    that it calls, transitively) can read: the names in their code.  A setting outside this
    set (``Linear.in_features``) cannot change what the call computes.  ``None`` when that
    is not known (no Python ``forward``, or a ``getattr`` by name)."""
    names: set[str] = set()
    todo = [getattr(cls, "forward", None)]
    seen: set = set()
    while todo:
        fn = todo.pop()
        code = getattr(fn, "__code__", None)
        if code is None or code in seen:
            if code is None:
                return None
            continue
        seen.add(code)
        stack = [code]
        while stack:
            c = stack.pop()
            if {"getattr", "__getattr__", "__dict__", "vars"} & set(c.co_names):
                return None
            names.update(c.co_names)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        todo.extend(getattr(cls, n) for n in names
                    if isinstance(inspect.getattr_static(cls, n, None), types.FunctionType)
                    and getattr(cls, n).__code__ not in seen)
    return frozenset(names)


def has_hooks(module: torch.nn.Module) -> bool:
    """Would ``Module.__call__`` run anything besides ``forward``?  (On the hot path of
    compiled module calls: attribute reads only, no imports.)"""
    mod = _module_globals
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or mod._global_forward_hooks
                or mod._global_forward_pre_hooks or mod._global_backward_hooks
                or mod._global_backward_pre_hooks)


#: ``hook(tx, module, forward, args, kwargs) -> tracker | None``, tried before a module's
#: ``forward`` is inlined (registered by later layers: repeated blocks)
FORWARD_CALL_HOOKS: list = []


class NNModuleVariable(UserObjectVariable):
    """An ``nn.Module`` that existed before tracing.  ``specialized``: guarded by
    identity, its parameters graph attributes and its ``torch.nn`` leaves one node;
    otherwise *generic* (guarded by type, every tensor it holds a graph input, every
    ``forward`` inlined), so the entry serves any instance of the class (see
    ``graph/shapes.py`` for which one a trace uses)."""

    def __init__(self, value, *, specialized: bool = True, **kwargs) -> None:
        super().__init__(value, **kwargs)
        self.specialized = specialized

    def _repr_body(self) -> str:
        return super()._repr_body() + ("" if self.specialized else ", generic")

    def _hint(self, name: str = "") -> str:
        base = self.source.display() if self.source is not None else type(self.value).__name__
        return f"{base}_{name}" if name else base

    def as_python_constant(self):
        if not self.specialized:  # the entry serves other instances: not a constant
            return super().as_python_constant()
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _MEMBER_METHODS and self.source is not None and \
                proto.type_attr_raw(self.cls, name) is getattr(torch.nn.Module, name):
            self.instance_dict(tx).lookup(tx, name)  # not shadowed by an instance attribute
            return MethodVariable(self, name)  # walked by call_method (see _members)
        return super().var_getattr(tx, name)

    # -- Module.__getattr__ ---------------------------------------------------------------
    def getattr_fallback(self, tx, name: str, getattr_fn) -> VariableTracker:
        if getattr_fn is not torch.nn.Module.__getattr__:
            return super().getattr_fallback(tx, name, getattr_fn)
        m, src = self.value, self.source
        d = m.__dict__
        overrides = tx.output.param_overrides
        if overrides and (id(m), name) in overrides:  # functional_call's tensor for it
            return overrides[(id(m), name)]
        for kind in ("_parameters", "_buffers", "_modules"):
            table = d.get(kind)
            if table is None:
                continue
            if src is not None:
                registry = self.instance_dict(tx).lookup(tx, kind)
                if isinstance(registry, DictVariable) and name in registry.written:
                    # registered (register_buffer...) or removed earlier in this trace
                    value = registry.lookup(tx, name)
                    if value is MISSING:
                        continue
                    return value
            if name in table:
                if kind == "_modules":
                    sub_src = module_attr_source(src, name, kind) if src is not None else None
                    return VariableTracker.build(tx, table[name], sub_src)
                return _member(tx, table[name], src, kind, name, self._hint(name), self.specialized)
            if src is not None:  # its absence decides: a later registration must recompile
                tx.output.add_guard(AttrSource(src, kind), GuardKind.DICT_CONTAINS, (name, False))
        raise observed(AttributeError, f"'{type(m).__name__}' object has no attribute '{name}'")

    # -- Module.__setattr__ / __delattr__ ------------------------------------------------
    def _check_not_overridden(self, tx, name: str) -> None:
        if (id(self.value), name) in tx.output.param_overrides:
            raise unsupported("writing a parameter or buffer functional_call replaced", self._hint(name),
                              "Eager writes the replacement and hands it back to the caller's dict; "
                              "the call runs in Python.")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``Module.__setattr__``: a parameter, a submodule, ``None`` or a tensor for a
        registered name goes to its registry (a logged write to ``_parameters``,
        ``_modules`` or ``_buffers``, replayed after the graph; later reads in the trace
        see it), the name leaving the other registries and the instance ``__dict__``; a
        value of the wrong kind for a registered name is eager's ``TypeError``; anything
        else is an instance attribute."""
        self._check_not_overridden(tx, name)
        if proto.type_attr_raw(self.cls, "__setattr__") is not torch.nn.Module.__setattr__:
            return super().store_attr(tx, name, value)
        if self.source is None:
            raise unsupported("assigning to a module without a source", f"{self._hint(name)} = ...")
        regs = {kind: self._registry(tx, kind) for kind in ("_parameters", "_modules", "_buffers")}
        none = value.is_python_constant() and value.as_python_constant() is None
        vtype = torch.Tensor if value.is_tensor() else value.python_type()
        is_param = value.is_tensor() and issubclass(vtype, torch.nn.Parameter)
        is_module = isinstance(vtype, type) and issubclass(vtype, torch.nn.Module)
        if is_param or (not is_module and self._registered(tx, regs, "_parameters", name)):
            if not (is_param or none):
                raise observed(TypeError, f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                          "(torch.nn.Parameter or None expected)")
            self._register(tx, regs, "_parameters", name, value, "_global_parameter_registration_hooks")
        elif is_module or self._registered(tx, regs, "_modules", name):
            if not (is_module or none):
                raise observed(TypeError, f"cannot assign '{_typename(value)}' as child module '{name}' "
                                          "(torch.nn.Module or None expected)")
            if is_module:
                self._expect_other_submodules(tx)
            self._register(tx, regs, "_modules", name, value, "_global_module_registration_hooks")
        elif self._registered(tx, regs, "_buffers", name):
            if not (none or value.is_tensor()):
                raise observed(TypeError, f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                          "(torch.Tensor or None expected)")
            if not none and issubclass(vtype, torch.nn.Parameter):
                raise unsupported("assigning a parameter to a buffer name", self._hint(name))
            self._register(tx, regs, "_buffers", name, value, "_global_buffer_registration_hooks",
                           remove_others=False)
        else:
            proto.generic_setattr(tx, self, name, value)

    def _expect_other_submodules(self, tx) -> None:
        """A frame that puts a module into a submodule slot meets other instances there on
        its next call (``self.a = self.b``, a module built in ``forward``): identity guards
        on the submodules would fail every call.  A specialized trace of modules reached
        through the frame's locals starts again generic (guarded by type and structure, as
        torch.compile's), so the entry serves whatever module the slot holds next."""
        shapes = tx.output.shapes
        if (self.specialized and shapes is not None and not shapes.modules_generic
                and isinstance(self.source.root(), LocalSource)):
            shapes.make_modules_generic()
            raise RestartAnalysis()

    def _registry(self, tx, kind: str) -> VariableTracker | None:
        registry = self.instance_dict(tx).lookup(tx, kind)
        return registry if isinstance(registry, DictVariable) else None

    @staticmethod
    def _registered(tx, regs: dict, kind: str, name: str) -> bool:
        registry = regs.get(kind)
        return registry is not None and registry.lookup(tx, name) is not MISSING

    def _register(self, tx, regs: dict, kind: str, name: str, value: VariableTracker, hooks: str,
                  remove_others: bool = True) -> None:
        """``registry[name] = value`` as ``Module.__setattr__`` does it (``remove_from`` the
        instance dict and the other registries first; the global registration hooks, which
        would run, guarded empty)."""
        if regs.get(kind) is None:
            raise unsupported("module registry missing", f"{self._hint(name)} ({kind})")
        tx.output.add_guard(AttrSource(_MODULE_GLOBALS, hooks), GuardKind.EMPTY)
        if remove_others:
            if self.instance_dict(tx).lookup(tx, name) is not MISSING:
                self.instance_dict(tx).call_method(tx, "__delitem__", [ConstantVariable(name)], {})
            for other in ("_parameters", "_buffers", "_modules"):
                if other != kind and self._registered(tx, regs, other, name):
                    regs[other].call_method(tx, "__delitem__", [ConstantVariable(name)], {})
            if name in self.value.__dict__.get("_non_persistent_buffers_set", ()):
                raise unsupported("replacing a non-persistent buffer", self._hint(name))
        regs[kind].setitem_key(tx, name, value)

    def del_attr(self, tx, name: str) -> None:
        self._check_not_overridden(tx, name)
        if proto.type_attr_raw(self.cls, "__delattr__") is not torch.nn.Module.__delattr__:
            return super().del_attr(tx, name)
        d = self.value.__dict__
        if any(name in d.get(kind, ()) for kind in ("_parameters", "_buffers", "_modules")):
            raise unsupported("deleting a parameter, buffer or submodule", f"del {self._hint(name)}")
        proto.generic_delattr(tx, self, name)

    # -- containers -----------------------------------------------------------------------
    def _child(self, tx, key: str) -> VariableTracker:
        sub_src = module_attr_source(self.source, key, "_modules") if self.source is not None else None
        return VariableTracker.build(tx, self.value._modules[key], sub_src)

    def _container_keys(self, tx) -> list[str]:
        if self.source is not None:
            tx.output.add_guard(AttrSource(self.source, "_modules"), GuardKind.DICT_KEYS, self.value._modules)
        return list(self.value._modules)

    def unpack(self, tx) -> list[VariableTracker]:
        m = self.value
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
            return [self._child(tx, key) for key in self._container_keys(tx)]
        if isinstance(m, torch.nn.ModuleDict):
            return [ConstantVariable(key) for key in self._container_keys(tx)]
        return super().unpack(tx)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        m = self.value
        if name in _MEMBER_METHODS and self.source is not None and \
                proto.type_attr_raw(self.cls, name) is getattr(torch.nn.Module, name):
            return self._members(tx, name, args, kwargs)
        if _container_method(type(m), name):  # torch's own method, not a subclass's
            if name == "__len__" and not args:
                return ConstantVariable(len(self._container_keys(tx)))
            if name == "__getitem__" and len(args) == 1:
                idx = tx.as_index(args[0]).as_python_constant()
                if isinstance(idx, slice):  # a new container: torch's Python code makes it
                    return super().call_method(tx, name, args, kwargs)
                return self._getitem(tx, idx)
            if name == "__iter__" and not args:
                return tx.make_iterator(self)
            if name == "__contains__" and isinstance(m, torch.nn.ModuleDict):
                return ConstantVariable(args[0].as_python_constant() in self._container_keys(tx))
        return super().call_method(tx, name, args, kwargs)

    def _members(self, tx, method: str, args: list, kwargs: dict) -> VariableTracker:
        """``parameters()``, ``named_parameters()``, ``buffers()``, ``named_buffers()``:
        the module tree walked at trace time as ``Module._named_members`` walks it, every
        ``_modules`` and parameter/buffer dict on the way guarded by its keys, each
        tensor the same graph attribute as reading it by name gives (and guarded by
        identity).  An iterator over the items."""
        if tx.output.param_overrides:
            raise unsupported(f"Module.{method}() inside functional_call", self._hint(),
                              "It would list the replaced tensors; the call runs in Python.")
        kind, named = _MEMBER_METHODS[method]
        check_call(getattr(torch.nn.Module, method), [self, *args], kwargs)  # eager's TypeError
        cargs = [a.as_python_constant() for a in args]
        ckwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
        bound = inspect.signature(getattr(torch.nn.Module, method)).bind(self.value, *cargs, **ckwargs)
        bound.apply_defaults()
        prefix = bound.arguments.get("prefix", "")
        recurse = bound.arguments.get("recurse", True)
        dedupe = bound.arguments.get("remove_duplicate", True)
        seen: set = set()
        items: list[VariableTracker] = []
        for path, module, src in _walk_modules(tx, self.value, self.source, prefix, recurse, dedupe):
            pending = _pending_registry(tx, module, src, kind)
            if pending is not None:  # written in this trace (register_buffer...): its items now
                entries = [(k, None, v) for k, v in pending.realize_items(tx).items()]
            else:
                table = module.__dict__[kind]
                tx.output.add_guard(AttrSource(src, kind), GuardKind.DICT_KEYS, table)
                entries = [(k, v, None) for k, v in table.items()]
            for key, value, var in entries:
                if var is not None:
                    if var.is_python_constant() and var.as_python_constant() is None:
                        continue
                    ident = var.identity() if hasattr(var, "identity") else var
                else:
                    if value is None:
                        continue
                    ident = value
                if dedupe and id(ident) in seen:
                    continue
                seen.add(id(ident))
                if var is None:
                    var = _member(tx, value, src, kind, key, f"{src.display()}_{key}", self.specialized)
                items.append(TupleVariable([ConstantVariable(path + ("." if path else "") + key), var])
                             if named else var)
        return ListIteratorVariable(items, origin=TupleVariable(items))

    def _getitem(self, tx, idx) -> VariableTracker:
        m = self.value
        keys = self._container_keys(tx)
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
            if not -len(keys) <= idx < len(keys):
                raise observed(IndexError, f"index {idx} is out of range")
            return self._child(tx, keys[idx])
        if isinstance(m, torch.nn.ModuleDict):
            if idx not in keys:
                raise observed(KeyError, idx)
            return self._child(tx, idx)
        raise unsupported("module subscript", f"{type(m).__qualname__}[{describe(idx)}]")

    # -- calls ----------------------------------------------------------------------------
    def call_function(self, tx, args, kwargs) -> VariableTracker:
        m = self.value
        if lazy_modules.needs_initialization(m):  # (its parameters, then its call traced)
            lazy_modules.initialize(tx, m, self._hint(), args, kwargs)
            self.cls = type(m)
        call = proto.type_attr_raw(self.cls, "__call__")
        if call is not torch.nn.Module.__call__:
            return self.var_getattr(tx, "__call__").call_function(tx, args, kwargs)
        if m.__dict__.get("_compiled_call_impl") is not None:
            raise unsupported("module compiled with Module.compile()", type(m).__qualname__)
        if not has_hooks(m):
            if self.source is not None:
                tx.output.add_guard(self.source, GuardKind.MODULE_HOOKS)
            for name in _GLOBAL_HOOKS:
                tx.output.add_guard(AttrSource(_MODULE_GLOBALS, name), GuardKind.EMPTY)
            return self._call_forward(tx, args, kwargs, hooks_traced=False)
        return self._call_with_hooks(tx, args, kwargs)

    def _call_forward(self, tx, args, kwargs, hooks_traced: bool) -> VariableTracker:
        forward = self.var_getattr(tx, "forward")
        if self._is_leaf_call(tx, forward) and not tx.output.torch_function.needs_dispatch(args, kwargs):
            if self._inline_leaf(tx):
                return self._call_inlined_leaf(tx, forward, args, kwargs)
            return self._call_leaf(tx, args, kwargs, hooks_traced)  # (under a mode: its ops dispatch)
        for hook in FORWARD_CALL_HOOKS:  # (a repeated block traced once: hops/repeated_blocks.py)
            result = hook(tx, self, forward, args, kwargs)
            if result is not None:
                return result
        return forward.call_function(tx, args, kwargs)

    def _hook_dict(self, tx, name: str) -> DictVariable:
        """A hook dict of this module (``_forward_hooks``...) or a global one."""
        if name.startswith("_global"):
            var = VariableTracker.build(tx, getattr(_module_globals, name), AttrSource(_MODULE_GLOBALS, name))
        else:
            var = self.var_getattr(tx, name)
        if not isinstance(var, DictVariable):
            raise unsupported("module hook registry of an unexpected type", f"{self._hint(name)}")
        return var

    def _call_with_hooks(self, tx, args, kwargs) -> VariableTracker:
        """``Module._call_impl`` with forward pre-hooks and forward hooks, traced."""
        for name in ("_backward_hooks", "_backward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks"):
            if self._hook_dict(tx, name).truthiness(tx):
                raise unsupported("module backward hooks", f"{type(self.value).__qualname__}",
                                  "Backward hooks are not traced; this module call runs in Python.")
        args_var, kwargs_var = TupleVariable(list(args)), DictVariable(dict(kwargs))
        with_kwargs = self._hook_dict(tx, "_forward_pre_hooks_with_kwargs")
        for hook_id, hook in self._hooks(tx, "_global_forward_pre_hooks", "_forward_pre_hooks"):
            if with_kwargs.lookup(tx, hook_id) is not MISSING:
                result = hook.call_function(tx, [self, args_var, kwargs_var], {})
                if not _is_none(result):
                    pair = result.unpack(tx) if isinstance(result, TupleVariable) else ()
                    if len(pair) != 2:
                        raise unsupported("forward pre-hook result", "not None or (args, kwargs)")
                    args_var, kwargs_var = pair
            else:
                result = hook.call_function(tx, [self, args_var], {})
                if not _is_none(result):
                    args_var = result if isinstance(result, TupleVariable) else TupleVariable([result])
        kwargs_items = {k: v for k, v in kwargs_var.realize_items(tx).items()}
        result = self._call_forward(tx, args_var.unpack(tx), kwargs_items, hooks_traced=True)
        post_kwargs = self._hook_dict(tx, "_forward_hooks_with_kwargs")
        global_kwargs = self._hook_dict(tx, "_global_forward_hooks_with_kwargs")
        for hook_id, hook in self._hooks(tx, "_global_forward_hooks", "_forward_hooks"):
            if post_kwargs.lookup(tx, hook_id) is not MISSING or global_kwargs.lookup(tx, hook_id) is not MISSING:
                out = hook.call_function(tx, [self, args_var, kwargs_var, result], {})
            else:
                out = hook.call_function(tx, [self, args_var, result], {})
            if not _is_none(out):
                result = out
        return result

    def _hooks(self, tx, global_name: str, name: str) -> list:
        """``(id, hook)`` pairs of the global dict then the module's, in ``_call_impl``'s order."""
        out = []
        for dict_name in (global_name, name):
            out += list(self._hook_dict(tx, dict_name).realize_items(tx).items())
        return out

    def _is_leaf_call(self, tx, forward: VariableTracker) -> bool:
        """One node for the module (see ``_call_leaf``)?  Not in a higher-order operator's
        body (a leaf is inlined there: its parameters must be lifted to the body's
        inputs), nor when this trace replaced one of its parameters or buffers
        (``functional_call``'s swap: the node would read the module's own)."""
        m = self.value
        return (self.specialized and not in_body() and is_leaf_module(m) and isinstance(forward, UserMethodVariable)
                and forward.fn_var.as_python_constant() is proto.type_attr_raw(type(m), "forward")
                and not self._registry_written(tx)
                and not any(key[0] == id(m) for key in tx.output.param_overrides))

    def _inline_leaf(self, tx) -> bool:
        """Trace this leaf's ``forward`` inline (``config.inline_nn_leaves``)?  Not an RNN
        (its forward reads the flat weight list and picks a kernel by the argument's type:
        one node, ``_rnn_leaf_forward``), nor a module whose inline trace failed in an
        earlier attempt at this frame (``OutputGraph.leaf_fallback``)."""
        m = self.value
        return (config.inline_nn_leaves and not isinstance(m, torch.nn.RNNBase)
                and type(m) not in tx.output.leaf_fallback)

    def _call_inlined_leaf(self, tx, forward, args, kwargs) -> VariableTracker:
        """``forward`` traced inline: the graph holds its ops, its parameters are graph
        attributes guarded by identity (as any specialized module's), the settings it reads
        are guarded by value as they are read.  Where the trace fails (a construct graphjit
        does not support inside the module's code), tracing starts again with the module
        as one node (``_call_leaf``): a ``torch.nn`` leaf never breaks the user's frame."""
        try:
            return forward.call_function(tx, args, kwargs)
        except Unsupported:
            tx.output.leaf_fallback.add(type(self.value))
            raise RestartAnalysis() from None

    def _registry_written(self, tx) -> bool:
        d = self._dict
        if d is None:
            return False
        for kind in ("_parameters", "_buffers"):
            registry = d.lookup(tx, kind)
            if isinstance(registry, DictVariable) and registry.written:
                return True
        return False

    def _call_leaf(self, tx, args, kwargs, hooks_traced: bool) -> VariableTracker:
        """One node calling the class's ``forward`` alone: its hook dicts are guarded empty
        (or the trace ran the hooks itself), so ``Module.__call__`` would add nothing but
        its cost to every call of the graph."""
        m = self.value
        named = next((a for a in [*args, *kwargs.values()] if isinstance(a, TupleVariable) and a.namedtuple_cls), None)
        if named is not None:  # a graph argument is a plain tuple: forward would see another type
            raise unsupported("torch.nn module called with a named tuple", f"{type(m).__qualname__}("
                              f"{named.namedtuple_cls.__qualname__}(...))",
                              "The module's forward may decide on the argument's type (an RNN on a "
                              "PackedSequence); the call runs in Python.")
        if type(m) not in TRAINING_INDEPENDENT and self.source is not None:
            tx.output.add_guard(AttrSource(self.source, "training"), GuardKind.CONSTANT_MATCH, m.training)
        tx.output.leaf_modules.append((m, self.source))
        return tx.output.call_leaf_forward(tx, m, self._hint(), list(args), dict(kwargs))


def _is_none(var: VariableTracker) -> bool:
    return var.is_python_constant() and var.as_python_constant() is None


@register_builder(torch.nn.Module)
def _build_module(tx, value, source):
    # an RNN module (flat weights checked through weak references, a native kernel) stays
    # specialized, one graph node, in a generic trace too (torch.compile's builder breaks on
    # RNN, GRU and LSTM modules unless ``allow_rnn``)
    if source is not None and tx.output.module_is_generic(value, source) and \
            not isinstance(value, torch.nn.RNNBase) and not lazy_modules.needs_initialization(value):
        # (a lazy module changes its class on its first call: guarded by identity)
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
        return NNModuleVariable(value, source=source, specialized=False)
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    else:
        source = ConstSource(value, f"<{type(value).__qualname__} module>")
    return NNModuleVariable(value, source=source)


__all__ = ["NNModuleVariable", "is_leaf_module", "has_hooks", "forward_reads", "MISSING"]


_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)


def _container_method(cls: type, name: str) -> bool:
    """Is ``cls.name`` the method of the torch container ``cls`` derives from (so the
    tracker models it), not a subclass's own?"""
    base = next((k for k in cls.__mro__ if k in _CONTAINERS), None)
    if base is None or name not in base.__dict__:
        return False
    return proto.type_attr_raw(cls, name) is base.__dict__[name]


#: Module methods over parameters or buffers that the tracker walks itself:
#: name -> (the registry, whether items are ``(name, tensor)`` pairs)
_MEMBER_METHODS = {"parameters": ("_parameters", False), "named_parameters": ("_parameters", True),
                   "buffers": ("_buffers", False), "named_buffers": ("_buffers", True)}


def _typename(value: VariableTracker) -> str:
    """``torch.typename`` of what the tracker stands for (eager's error messages)."""
    if value.is_python_constant():
        return torch.typename(value.as_python_constant())
    t = value.python_type()
    return torch.typename(t) if t is not torch.Tensor else "torch.FloatTensor"


def _member(tx, value, src, kind: str, name: str, hint: str, specialized: bool = True) -> VariableTracker:
    """A parameter or buffer ``name`` of the module at ``src`` (``kind``: its registry):
    a parameter of a specialized module is a graph attribute guarded by identity; a
    buffer, or any tensor of a generic module, a graph input; or ``None``."""
    item_src = module_attr_source(src, name, kind) if src is not None else None
    if value is None:
        if item_src is not None:
            tx.output.add_guard(item_src, GuardKind.CONSTANT_MATCH, None)
        return ConstantVariable(None)
    if (kind == "_buffers" or not specialized) and item_src is not None:
        # a graph input (guarded by its metadata): a buffer that forward reassigns
        # (``self.avg = ...``) is a new tensor on every call, and must not recompile
        return VariableTracker.build(tx, value, item_src, realize=True)
    if item_src is not None:
        tx.output.add_guard(item_src, GuardKind.ID_MATCH, value)
    return tx.output.get_attr_tensor(value, hint, None, origin=item_src)


def _pending_registry(tx, module, src, kind: str) -> DictVariable | None:
    """The tracker of ``module``'s registry ``kind`` if this trace wrote to it
    (``register_buffer``, a submodule assigned), else ``None`` (the real dict is read)."""
    known = tx.output.side_effects.known_tracker(module.__dict__.get(kind))
    if isinstance(known, DictVariable) and known.written:
        return known
    return None


def _walk_modules(tx, module, src, prefix: str, recurse: bool, dedupe: bool):
    """``(path, module, source)`` as ``Module.named_modules`` visits them (just the
    module without ``recurse``), each ``_modules`` dict guarded by its keys."""
    if not recurse:
        yield prefix, module, src
        return
    memo: set[int] = set()

    def visit(m, m_src, path):
        if dedupe and id(m) in memo:
            return
        memo.add(id(m))
        yield path, m, m_src
        pending = _pending_registry(tx, m, m_src, "_modules")
        if pending is not None:  # a submodule assigned in this trace
            for name, var in pending.realize_items(tx).items():
                if var.is_python_constant() and var.as_python_constant() is None:
                    continue
                if not isinstance(var, NNModuleVariable) or var.source is None:
                    raise unsupported("listing a module made in the trace", f"{m_src.display()}.{name}")
                yield from visit(var.value, var.source, path + ("." if path else "") + name)
            return
        tx.output.add_guard(AttrSource(m_src, "_modules"), GuardKind.DICT_KEYS, m._modules)
        for name, child in m._modules.items():
            if child is None:
                continue
            yield from visit(child, module_attr_source(m_src, name, "_modules"),
                             path + ("." if path else "") + name)

    yield from visit(module, src, prefix)

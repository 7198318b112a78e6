"""Functions from the ``torch`` namespace: recorded in the graph, folded to constants,
turned into grad-mode context managers, or refused (graph break) when they act outside
the graph (seeding RNGs, saving files, running autograd)."""

from __future__ import annotations

import sys
import types
import weakref
from typing import Any

import torch

from .. import _compat
from ..exc import Unsupported, unsupported
from ..guards.guard import GlobalQuery, GuardKind
from ..polyfills.autograd import FunctionCtx
from ..trace_rules import is_compiling as _graphjit_is_compiling
from ..sources import AttrSource, FromNumpySource
from .base import VariableTracker, call_python, register_builder_by_id, register_builder_predicate
from .constant import ConstantVariable
from .functions import UserMethodVariable
from .grad_mode import GradModeVariable, InferenceModeVariable, set_grad_mode
from .numpy_tensors import NdarrayTensorVariable
from .numpy_values import constant_tensor
from .sequences import TupleVariable
from ..diagnostics.describe import describe
from .sizes import holds_symbolic_numbers


def _compiling_flags() -> set:
    """Functions that answer "are we compiling?": True while graphjit traces."""
    flags = {torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling, torch._utils.is_compiling,
             _graphjit_is_compiling}
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        flags.add(dynamo.is_compiling)
        ext = sys.modules.get("torch._dynamo.external_utils")
        if ext is not None:
            flags.add(ext.is_compiling)
    return flags


#: Folded by calling them at trace time: pure functions of their arguments' metadata.
CONSTANT_FOLD = {
    torch.is_tensor, torch.is_floating_point, torch.is_complex, torch.finfo, torch.iinfo,
    torch.device, torch.Size, torch.is_storage, torch.numel, torch.jit.is_scripting,
}

#: Queries of global state: folded, and the answer guarded (``fn(*args) == answer`` is
#: checked on every call, so a change recompiles).
GLOBAL_QUERIES = {
    torch.is_inference_mode_enabled, torch.is_autocast_enabled, torch.get_autocast_dtype,
    torch.autograd._profiler_enabled, torch.are_deterministic_algorithms_enabled,
    torch.is_deterministic_algorithms_warn_only_enabled, torch.get_default_dtype,
    torch._C._get_tracing_state, torch.jit.is_tracing, torch._C._is_any_autocast_enabled,
    # (torch.compile folds these two to False: ``torch/_dynamo/variables/torch.py``)
    torch.fx._symbolic_trace.is_fx_tracing, torch.fx._symbolic_trace.is_fx_symbolic_tracing,
}

#: Called for their logging only: nothing to trace.
NO_OPS = {torch._C._log_api_usage_once}

#: Refused: they act outside the graph.
SKIPPED = {
    torch.manual_seed: "seeding the RNG", torch.seed: "seeding the RNG",
    torch.set_default_dtype: "changing global state", torch.save: "file I/O",
    torch.load: "file I/O", torch.autograd.grad: "running autograd",
    torch.autograd.backward: "running autograd", torch.set_printoptions: "changing global state",
    torch.use_deterministic_algorithms: "changing global state",
    torch.set_num_threads: "changing global state", torch.Tensor.backward: "running autograd",
    torch.Tensor.item: "reading tensor data", torch.Tensor.tolist: "reading tensor data",
    torch._C._enter_dual_level: "entering a forward-mode AD level (it would be entered while tracing)",
    torch._C._exit_dual_level: "leaving a forward-mode AD level",
}


#: ``node.meta`` key of a ``vmap`` body's batched placeholder
BATCHED = "graphjit_vmap_batched"


def is_batched(node: torch.fx.Node) -> bool:
    """Does ``node`` (in a ``vmap`` body) compute from a batched input?  (In eager its
    value is a ``BatchedTensor`` then: ``torch._C._functorch.is_batchedtensor``.)"""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.meta.get(BATCHED):
            return True
        todo.extend(n.all_input_nodes)
    return False


class TorchFunctionVariable(VariableTracker):
    """A callable from torch (``torch.relu``, ``F.linear``, ``torch.Tensor.add``)."""

    def __init__(self, fn: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        mod = getattr(self.fn, "__module__", "") or ""
        return f"{mod}.{getattr(self.fn, '__qualname__', getattr(self.fn, '__name__', self.fn))}"

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def identity(self):
        return self.fn

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """``fn.__name__``, ``fn.__module__``... (a ``__torch_function__`` handler reads them):
        torch's callables are stable objects, their attributes constants."""
        return VariableTracker.build(tx, call_python("getattr", getattr, self.fn, name))

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        fn = unwrap_torch(self.fn)
        if fn in _compiling_flags():
            return ConstantVariable(True)
        if fn is torch.is_grad_enabled and not args:
            return ConstantVariable(tx.output.grad_enabled)  # the traced grad mode
        if fn is torch.is_inference_mode_enabled and not args and \
                tx.output.inference_mode != tx.output.initial_inference_mode:
            return ConstantVariable(tx.output.inference_mode)  # inside a traced block
        if fn in NO_OPS:  # bookkeeping with no effect on results
            return ConstantVariable(None)
        if fn is torch._C._functorch.is_batchedtensor and len(args) == 1 and not kwargs and args[0].is_tensor():
            return ConstantVariable(is_batched(args[0].node))  # (a vmap body's tensors are its slices)
        if fn is torch._assert and args and args[0].is_python_constant() and args[0].as_python_constant():
            return ConstantVariable(None)  # a condition known true: no node (as torch.compile)
        if fn in SKIPPED:
            raise unsupported(
                "skipped torch function", f"{self._repr_body()} ({SKIPPED[fn]})",
                "This function acts outside the graph, so it runs in Python between graphs.")
        if fn in (torch.no_grad, torch.enable_grad) and not args and not kwargs:
            return GradModeVariable(fn is torch.enable_grad)
        if fn in (torch.no_grad, torch.enable_grad) and len(args) == 1 and not kwargs:
            # ``no_grad(f)``: the class called on a function decorates it
            return GradModeVariable(fn is torch.enable_grad).call_function(tx, args, {})
        if fn in (torch.addcdiv, torch.addcmul) and len(args) == 3 and "value" in kwargs \
                and args[0].is_tensor() and kwargs["value"].is_tensor():
            # ``torch.addcdiv(x, a, b, value=t)``: the method's rewrite of a tensor value
            return args[0].call_method(tx, fn.__name__, list(args[1:]), kwargs)
        if fn is torch.inference_mode and len(args) + len(kwargs) <= 1:
            mode = args[0] if args else kwargs.get("mode", ConstantVariable(True))
            if mode.is_python_constant() and isinstance(mode.as_python_constant(), bool):
                return InferenceModeVariable(mode.as_python_constant())
        if fn is torch._C._set_grad_enabled and len(args) == 1 and not kwargs and args[0].is_python_constant():
            set_grad_mode(tx, bool(args[0].as_python_constant()))  # (a context manager's __enter__)
            return ConstantVariable(None)
        if fn is torch.set_grad_enabled and len(args) == 1 and args[0].is_python_constant():
            ctx = GradModeVariable(bool(args[0].as_python_constant()))
            ctx.enter(tx)  # like torch.set_grad_enabled(b): the mode changes at the call
            ctx.entered = True
            return ctx
        dispatched = tx.output.torch_function.call_function(tx, fn, args, kwargs)  # modes, subclasses
        if dispatched is not None:
            return dispatched
        if fn in _FROM_NUMPY and len(args) == 1 and not kwargs and isinstance(args[0], NdarrayTensorVariable):
            # an array of a graph tensor: the tensor again (aliasing it), or a copy
            alias = tx.output.call(tx, "call_function", torch.ops.aten.alias.default, [args[0].tensor], {})
            return alias if fn is not torch.tensor else args[0].tensor.call_method(tx, "clone", [], {})
        if fn in _FROM_NUMPY and len(args) == 1 and not kwargs:
            made = constant_tensor(tx, args[0], fn)  # a numpy value made in the trace
            if made is not None:
                return made
            tensor = _numpy_input(tx, args[0])
            if tensor is not None:  # torch.tensor copies: the graph must not alias the array
                return tensor if fn is not torch.tensor else tensor.call_method(tx, "clone", [], {})
        consts = all(a.is_python_constant() for a in [*args, *kwargs.values()])
        if fn in GLOBAL_QUERIES and consts and not kwargs:
            cargs = tuple(a.as_python_constant() for a in args)
            result = call_python(self._repr_body(), fn, *cargs)
            tx.output.add_guard(None, GuardKind.GLOBAL_STATE,
                                GlobalQuery(getattr(fn, "__name__", "query"), fn, cargs, result))
            return VariableTracker.build(tx, result)
        if fn in CONSTANT_FOLD:
            if consts:
                return VariableTracker.build(tx, fn(*[a.as_python_constant() for a in args],
                                                    **{k: v.as_python_constant() for k, v in kwargs.items()}))
            if fn in (torch.is_tensor, torch.is_floating_point, torch.is_complex, torch.numel) and args:
                if fn is torch.is_tensor:
                    return ConstantVariable(args[0].is_tensor())
                return args[0].call_method(tx, fn.__name__, [], {})
        if consts and (args or kwargs) and isinstance(fn, types.FunctionType) and \
                fn.__module__ == "torch.functional":
            cargs = [a.as_python_constant() for a in args]
            ckwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
            if not _holds_tensor([*cargs, *ckwargs.values()]):
                # torch.functional's Python on plain values (``torch.split("a,b", ",")`` is
                # ``str.split``, ``broadcast_shapes`` of sizes): folded, unless it makes a tensor
                value = call_python(self._repr_body(), fn, *cargs, **ckwargs)
                if not _holds_tensor([value]):
                    return VariableTracker.build(tx, value)
        if fn is torch.tensor and args and not args[0].is_tensor() and holds_symbolic_numbers(args[0]):
            fn = torch._refs.tensor  # built from the symbolic values, none specialized (as TorchDynamo)
        return tx.output.call(tx, "call_function", fn, list(args), dict(kwargs))


_FROM_NUMPY = (torch.from_numpy, torch.as_tensor, torch.tensor)


def _holds_tensor(values: list) -> bool:
    """Whether one of ``values`` is or holds a tensor (in a tuple, list or dict)."""
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            return True
        if isinstance(value, (tuple, list)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return False


def _numpy_input(tx, var: VariableTracker) -> VariableTracker | None:
    """A numpy array that existed before the call, as a graph input ``torch.from_numpy(a)``
    (read on every call: the array's current values are used, its metadata guarded)."""
    value = getattr(var, "value", None)
    if type(value).__module__ != "numpy" or type(value).__name__ != "ndarray" or var.source is None:
        return None
    return VariableTracker.build(tx, torch.from_numpy(value), FromNumpySource(var.source), realize=True)


def unwrap_torch(fn: Any) -> Any:
    """Importing torch._dynamo wraps some torch functions (``torch.manual_seed``) in a
    ``functools.wraps`` decorator; look through it to the function our tables name."""
    inner = getattr(fn, "__wrapped__", None)
    if inner is not None and getattr(fn, "__module__", "").startswith("torch"):
        return inner
    return fn


#: Python (not C) functions from these modules are recorded as graph calls; other torch
#: Python functions (helpers, methods) are inlined like user code.
GRAPHABLE_PY_MODULES = frozenset({"torch", "torch.functional", "torch.nn.functional",
                                  "torch.random", "torch._refs", "torch.special", "torch.fft",
                                  "torch.linalg"})


def is_torch_callable(value: Any) -> bool:
    """Does ``value`` belong to torch's API (so it is recorded rather than inlined)?"""
    try:
        plain = unwrap_torch(value)
        if plain in CONSTANT_FOLD or plain in SKIPPED or plain in GLOBAL_QUERIES or plain in NO_OPS \
                or plain in _compiling_flags():
            return True
    except TypeError:  # unhashable
        return False
    mod = getattr(value, "__module__", None)
    if isinstance(value, types.MethodType):
        return False  # a Python method bound to an object: built from its parts
    if isinstance(value, types.FunctionType):
        module = sys.modules.get(mod or "")
        return mod in GRAPHABLE_PY_MODULES and getattr(module, value.__name__, None) is value
    if isinstance(mod, str) and (mod == "torch" or mod.startswith("torch.")):
        return True
    # methods of torch.Tensor and builtins from torch._C report odd modules
    objclass = getattr(value, "__objclass__", None)
    if objclass is not None and objclass in (torch._C.TensorBase, torch.Tensor):
        return True
    self_obj = getattr(value, "__self__", None)
    if isinstance(self_obj, type(torch)) and self_obj.__name__.startswith("torch"):
        return True
    return isinstance(value, torch._ops.OpOverload | torch._ops.OpOverloadPacket)


_GRAD_MODE_FACTORIES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled, torch.inference_mode)
#: torch classes whose instances are trace-time constants (calling them is folded)
_TORCH_VALUE_CLASSES = (torch.finfo, torch.iinfo, torch.device, torch.Size)


@register_builder_by_id(*_GRAD_MODE_FACTORIES, *_TORCH_VALUE_CLASSES)
def _build_torch_class(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return TorchFunctionVariable(value, source=source)



class AutogradFunctionApplyVariable(VariableTracker):
    """``torch.autograd.Function.apply`` (the function behind ``MyFn.apply``): a call is one
    graph node calling ``MyFn.apply``, so autograd runs the Function's own ``forward`` and
    ``backward`` (with every backend: AOTAutograd traces through it).  The class is
    guarded by identity where it was read.

    The node runs ``forward`` when the graph runs, and its fake run runs it at trace time:
    so ``forward`` is first *speculated*, traced like user code on a stand-in ``ctx``
    (``polyfills.autograd.FunctionCtx``), its graph nodes then dropped.  What it reads is
    guarded (a global it reads that changes recompiles); if it changes pre-existing Python
    state, draws from ``random`` or cannot be traced, the call is a graph break (it runs
    in Python, once, as in eager)."""

    def _repr_body(self) -> str:
        return "Function.apply"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        cls = args[0].as_python_constant()
        if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
            raise unsupported("Function.apply on a non-Function", describe(args[0]))
        if "vjp" in cls.__dict__ or "jvp" in cls.__dict__ or "vmap" in cls.__dict__:
            raise unsupported("autograd.Function with custom vjp/jvp/vmap", cls.__qualname__)
        if tx.output.torch_function.needs_dispatch(args[1:], kwargs):
            raise unsupported("autograd.Function under __torch_function__ dispatch", f"{cls.__qualname__}.apply",
                              "A torch-function mode is active (or an argument is a __torch_function__ "
                              "subclass): the ops of its forward must reach it, as in eager, so the "
                              "call runs in Python.")
        _speculate_forward(tx, args[0], cls, list(args[1:]), dict(kwargs))
        return tx.output.call(tx, "call_function", _apply_of(cls), list(args[1:]), dict(kwargs))


def _speculate_forward(tx, cls_var: VariableTracker, cls: type, args: list, kwargs: dict) -> None:
    """Trace ``cls.forward`` on the call's arguments (see the class docstring); raises
    ``Unsupported`` if it has Python side effects."""
    out = tx.output
    mark, steps = out.side_effects.mark(), len(out.prologue.steps)
    before = set(out.graph.nodes)
    forward = cls_var.var_getattr(tx, "forward")
    needs = tuple(bool(a.is_tensor() and a.example_value.requires_grad) for a in args)
    ctx = VariableTracker.build(tx, FunctionCtx).call_function(tx, [VariableTracker.build(tx, needs)], {})
    if cls.setup_context is torch.autograd.function._SingleLevelFunction.setup_context:
        result = forward.call_function(tx, [ctx, *args], kwargs)
    else:  # the setup_context style: forward takes no ctx
        result = forward.call_function(tx, args, kwargs)
        cls_var.var_getattr(tx, "setup_context").call_function(
            tx, [ctx, TupleVariable(list(args)), result], {})
    if out.side_effects.mark() != mark or len(out.prologue.steps) != steps:
        raise unsupported("autograd.Function forward with Python side effects", f"{cls.__qualname__}.apply",
                          "Its forward changes Python state (or draws from random); the call runs "
                          "in Python so that this happens once, as in eager.")
    if any(needs):
        _speculate_backward(tx, cls_var, cls, ctx, result)
    for node in reversed(list(out.graph.nodes)):  # the speculation's ops: the node runs forward
        if node not in before and node.op in ("call_function", "call_method", "call_module"):
            out.graph.erase_node(node)


def _speculate_backward(tx, cls_var: VariableTracker, cls: type, ctx: VariableTracker,
                        result: VariableTracker) -> None:
    """Trace ``cls.backward`` on the forward's stand-in ``ctx`` and a gradient for each
    tensor output: a compiling backend traces backward when it compiles, so what backward
    reads must be guarded (a global it reads would be baked in), and Python side effects
    there would happen at compile time only: they make the call a graph break."""
    out = tx.output
    mark, steps = out.side_effects.mark(), len(out.prologue.steps)
    outputs = result.unpack(tx) if isinstance(result, TupleVariable) else [result]
    grads = [out.call(tx, "call_function", torch.ones_like, [o], {}) if o.is_tensor() else ConstantVariable(None)
             for o in outputs]
    try:
        cls_var.var_getattr(tx, "backward").call_function(tx, [ctx, *grads], {})
    except Unsupported as e:
        raise unsupported("autograd.Function backward that is not traceable", f"{cls.__qualname__}.backward: "
                          f"{e.reason}", "Its backward is traced to guard what it reads (a compiling "
                          "backend bakes it in); the call runs in Python.") from None
    if out.side_effects.mark() != mark and len(out.prologue.steps) == steps and \
            _nullified(out.side_effects, mark[0], mark[1:]):
        return  # (backward undid what it changed: nothing happens on a backward pass)
    if out.side_effects.mark() != mark or len(out.prologue.steps) != steps:
        raise unsupported("autograd.Function backward with Python side effects", f"{cls.__qualname__}.backward",
                          "A compiling backend runs backward once, when it compiles; the call runs "
                          "in Python so that it happens on every backward pass, as in eager.")


def _nullified(side_effects, start: int, rest: tuple) -> bool:
    """Did the mutations logged from ``start`` on (a traced backward's) leave every attribute
    and dict item they wrote as it was before (a counter incremented then decremented, a
    flag set then restored)?  Then they are dropped from the log: a backward pass changes
    nothing, so running backward only when the backend compiles it is eager's behaviour.
    Only attribute and dict writes of objects that existed before the call qualify."""
    if side_effects.mark()[1:] != rest:  # list or class-attribute changes: not checked here
        return False
    log, new = side_effects.log[:start], side_effects.log[start:]
    final = {}
    for e in new:
        if e.kind not in ("attr", "dict") or side_effects.existing_value(e.target) is None:
            return False
        final[(e.kind, id(e.target), e.key)] = e
    for (kind, _, key), e in final.items():
        before = next((p.value for p in reversed(log) if p.kind == kind and p.target is e.target and p.key == key),
                      _UNSET)
        if before is _UNSET:  # the object's own value, as the call found it
            obj = side_effects.existing_value(e.target)[0]
            try:
                before = getattr(obj, key) if kind == "attr" else obj[key]
            except Exception:  # noqa: BLE001  (absent before: a write that stays is a change)
                return False
            if not (isinstance(e.value, VariableTracker) and e.value.is_python_constant()):
                return False
            after = e.value.as_python_constant()
            if type(after) is not type(before) or not (after is before or after == before):
                return False
        elif e.value is not before and not (
                isinstance(e.value, VariableTracker) and isinstance(before, VariableTracker) and
                e.value.is_python_constant() and before.is_python_constant() and
                type(e.value.as_python_constant()) is type(before.as_python_constant()) and
                e.value.as_python_constant() == before.as_python_constant()):
            return False
    del side_effects.log[start:]
    return True


_UNSET = object()

_APPLY_WRAPPERS: "weakref.WeakKeyDictionary[type, Any]" = weakref.WeakKeyDictionary()


def _apply_of(cls: type):
    """``cls.apply`` as a plain function of the user's module (a bound method of a torch
    class would be written into graph code as ``torch.autograd.function.apply``).  The
    persistent cache writes it as this factory and the class (``__graphjit_made_by__``)."""
    fn = _APPLY_WRAPPERS.get(cls)
    if fn is None:
        def apply(*args, **kwargs):
            return cls.apply(*args, **kwargs)

        apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
        apply.__module__ = cls.__module__
        apply.__graphjit_made_by__ = (_apply_of, (cls,))
        fn = _APPLY_WRAPPERS[cls] = apply
    return fn


_apply_of.__module__ = "graphjit_runtime"
_apply_of.__graphjit_factory__ = True


@register_builder_by_id(_compat.FUNCTION_APPLY)
def _build_function_apply(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return AutogradFunctionApplyVariable(source=source)


def _is_bound_c_apply(value) -> bool:
    return type(value) is types.BuiltinMethodType and _compat.function_apply_owner(value) is not None


@register_builder_predicate(_is_bound_c_apply)
def _build_bound_function_apply(tx, value, source):
    """``MyFn.apply`` where ``Function.apply`` is a C class method (torch 2.14, see
    ``graphjit._compat``): a new object on every read, so the class it is bound to and its
    name decide (both guarded), not its identity."""
    owner = value.__self__
    if source is None:
        return UserMethodVariable(AutogradFunctionApplyVariable(), VariableTracker.build(tx, owner))
    tx.output.add_guard(AttrSource(source, "__name__"), GuardKind.CONSTANT_MATCH, value.__name__)
    cls_var = VariableTracker.build(tx, owner, AttrSource(source, "__self__"), realize=True)
    return UserMethodVariable(AutogradFunctionApplyVariable(), cls_var, source=source)

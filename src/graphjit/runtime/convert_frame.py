"""convert_frame: trace one call of a function and build a guarded cache entry.

Contract: returns a :class:`CacheEntry` whose ``fn`` gives the same result as the
original function for every call that passes ``check``, or ``None`` when the frame has
nothing to compile (it then runs as it is).  With ``fullgraph`` the first graph break
raises ``Unsupported`` (with the user's location); otherwise a break compiles the graph
so far and continues in a resume function (see ``graph/breaks.py``).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import time
import types
from typing import Any, Callable

import torch
from torch._dynamo.exc import TensorifyScalarRestartAnalysis  # AOTAutograd's request to retrace
from torch.fx.passes._tensorify_python_scalars import TensorifyState

from .. import config
from ..backends.registry import eager as eager_backend
from ..bytecode import assemble, format_code
from ..diagnostics import logs
from ..distributed import graph_compiler
from ..diagnostics.format import graph_code, guards_text
from ..exc import InternalError, RestartAnalysis, Unsupported, drop_tracebacks
from ..graph.breaks import BreakCodegen, break_values
from ..graph.codegen import PyCodegen
from ..graph.compile import (
    CompiledGraph,
    code_overrides,
    codegen_call_graph,
    compile_graph,
    finish_graph,
    graph_outputs_for,
    prefix_instructions,
)
from ..graph.output_graph import OutputGraph
from ..graph.region_resume import RegionExit, eager_code_with_exit, region_exit
from ..graph.shapes import ShapePolicy
from ..graph.shared_graphs import SharedGraphs
from ..report import record
from ..report.decompile import entry_text
from ..guards.shapes import shape_guard_texts
from ..guards.codegen import GuardFunction, build_guard_function
from ..guards.guard import GuardKind, snapshot_global_state
from ..sources import AttrSource, ChainedSource, GetItemSource, ObjectKey, module_attr_source
from ..variables.constant import is_constant_value
from ..variables.nn_module import forward_reads
from ..variables.object_ids import add_identity_guards
from ..variables.mode_stack import overrides_torch_function, torch_function_as_at_call, torch_function_cleared
from ..tracer.assertions import raising_assertions
from ..tracer.translator import InstructionTranslator, Speculation
from . import stats
from .mode_state import preserved_modes, restoring_modes
from .unexpected_resume import UnexpectedResume

MAX_RESTARTS = 64

#: ``convert_frame``'s answer for a call whose program raises before anything could be
#: compiled: run this call as it is (the user gets eager's exception), cache nothing.
EAGER_THIS_CALL = object()
#: ... for a call to run as it is with nothing under it compiled, caching nothing (the
#: next call is traced): an optimizer's step that creates its state.
PLAIN_THIS_CALL = object()

_OPTIM_DIR = os.path.dirname(torch.optim.__file__) + os.sep


def creates_optimizer_state(fn: types.FunctionType, f_locals: dict) -> bool:
    """Is this a ``torch.optim`` method on an optimizer whose state is not created yet for
    a parameter that has a gradient?  Its first step creates the state (step counters,
    moment buffers): a trace of it would give a graph that runs once, so that call runs
    in Python and the steady-state step is traced on the next call (as TorchDynamo
    initializes the state before tracing)."""
    opt = f_locals.get("self")
    if not isinstance(opt, torch.optim.Optimizer) or not fn.__code__.co_filename.startswith(_OPTIM_DIR):
        return False
    return any(p.grad is not None and p not in opt.state
               for group in opt.param_groups for p in group["params"])


@dataclasses.dataclass(frozen=True)
class RunEagerly:
    """``convert_frame``'s answer for a frame with nothing to compile before its first
    graph break: it runs in Python from now on (with its calls intercepted)."""

    reason: str


@dataclasses.dataclass
class CacheEntry:
    """One compiled specialization of a function."""

    guard: GuardFunction
    fn: types.FunctionType
    graphs: list[CompiledGraph]

    @property
    def guard_labels(self) -> list[str]:
        return self.guard.labels

    def __repr__(self) -> str:
        return f"CacheEntry({self.fn.__qualname__}, {len(self.graphs)} graphs, {self.guard!r})"


@dataclasses.dataclass
class Hooks:
    """What the code generator needs from the runtime layer."""

    compiler_fn: Callable
    make_resume: Callable[..., Callable]
    wrap_callable: Callable[[types.FunctionType], Callable]
    fullgraph: bool = False
    resolve: Callable[[Any], Any] | None = None  # the interceptor's resolver (eager code)
    shapes: ShapePolicy | None = None  # dynamic= and the sizes seen per code object
    shared_graphs: SharedGraphs | None = None  # graphs compiled once per structure
    keeps_attributes: Callable[[], bool] = lambda: False  # module tensors stay graph attributes


def bind_frame_locals(fn: types.FunctionType, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The frame's initial locals for ``fn(*args, **kwargs)`` (defaults applied).
    Generated resume functions may have parameters that are not identifiers (pytest's
    ``@py_assert1``), so plain positional calls are bound by position."""
    code = fn.__code__
    if not kwargs and not fn.__defaults__ and code.co_argcount == len(args) and not (
            code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)) and not code.co_kwonlyargcount:
        return dict(zip(code.co_varnames, args))
    ba = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    ba.apply_defaults()
    return dict(ba.arguments)


def inside_functorch_transform(fn: types.FunctionType) -> bool:
    """Is ``fn`` called inside an eager ``torch.func`` transform (``vmap(compiled)(x)``)?
    Its arguments are then functorch's wrapped tensors, and a graph would bake in levels
    the outer transform owns (TorchDynamo refuses such frames too): the call runs in
    Python.  Entries traced outside still serve calls whose guards they pass."""
    if torch._C._functorch.peek_interpreter_stack() is None:
        return False
    logs.emit("graph_breaks", f"{fn.__qualname__} runs in Python on this call: it is called inside an "
                              "eager torch.func transform (vmap, grad...)")
    return True


def convert_frame(fn: types.FunctionType, args: tuple, kwargs: dict, hooks: Hooks,
                  closure_arg: bool = False) -> CacheEntry | None:
    """Trace ``fn(*args, **kwargs)``; restart whenever a break decision is recorded
    (returns :data:`EAGER_THIS_CALL` when the call raises before any graph,
    :data:`PLAIN_THIS_CALL` when it creates an optimizer's state, a
    :class:`RunEagerly` when the first graph break comes before anything to compile).
    ``closure_arg``: the entry serves every function of ``fn``'s code (its guard takes the
    closure as a ``___closure`` keyword argument)."""
    try:
        f_locals = bind_frame_locals(fn, args, kwargs)
    except TypeError:  # the arguments do not fit: the call raises Python's own TypeError
        return EAGER_THIS_CALL
    if inside_functorch_transform(fn):
        return EAGER_THIS_CALL
    if torch._C._len_torch_dispatch_stack():
        _record_eager_call(fn, "a TorchDispatchMode is active: this call runs in Python, its "
                               "ops reach the mode as in eager")
        return EAGER_THIS_CALL
    with torch._C.DisableTorchFunction():  # (it reads ``p.grad``: the call's modes must not see it)
        makes_state = creates_optimizer_state(fn, f_locals)
    if makes_state:
        logs.emit("graph_breaks", f"{fn.__qualname__} runs in Python on this call: it creates the "
                                  "optimizer's state (the next call is traced)")
        return PLAIN_THIS_CALL
    speculation: dict[int, Speculation] = {}
    leaf_fallback: set[type] = set()  # (torch.nn leaves called as nodes: OutputGraph.leaf_fallback)
    f_args = (args, kwargs)
    for _ in range(MAX_RESTARTS):
        output = OutputGraph(fn.__globals__, hooks.shapes.for_code(fn.__code__) if hooks.shapes else None,
                             hooks.fullgraph)
        output.leaf_fallback = leaf_fallback
        global_state = snapshot_global_state()
        tx = InstructionTranslator(fn.__code__, fn.__globals__, output, f_locals, fn.__closure__,
                                   speculation, hooks.fullgraph)
        try:
            # a mode active at the call must not see graphjit's own tensor work (fake
            # runs, guard building, the backend): the trace has a symbolic copy of it
            with preserved_modes(), torch_function_cleared():
                tx.run()
                return build_entry(fn, tx, output, global_state, hooks, closure_arg, f_args)
        except RestartAnalysis:
            continue
        except Unsupported as e:
            bp = tx.break_point
            if hooks.fullgraph or bp is None or bp.kind == "step":
                raise
            # the code after a resumable break could not be generated: break earlier
            del speculation[bp.step]
            tx.record_step_break(bp.step, e, bp.index)
    raise InternalError(f"{fn.__qualname__}: tracing restarted more than {MAX_RESTARTS} times")


def _resume(hooks: Hooks, output: OutputGraph, code: types.CodeType, fn: types.FunctionType):
    """The dispatcher of a resume function of this trace; it treats modules as
    generic when the trace did (it is called with whatever instance the frame had)."""
    if output.shapes is not None and output.shapes.modules_generic:
        hooks.shapes.for_code(code).make_modules_generic()
    return hooks.make_resume(code, fn.__globals__, class_closure(fn))


def build_entry(fn, tx: InstructionTranslator, output: OutputGraph, global_state, hooks: Hooks,
                closure_arg: bool = False, f_args=((), {})):
    """Compile the graph and generate the transformed function for a finished trace."""
    code = fn.__code__
    bp = tx.break_point
    output.torch_function.finish(tx)  # a changed mode stack: set after the graph
    values = [tx.return_value] if bp is None else break_values(tx, bp)
    values += output.side_effects.values()
    # tensors the graph computes that key a set or dict: outputs, in case one escapes
    values += [output.key_trackers[id(k)] for k in output.node_keys.values()]
    out_nodes = graph_outputs_for(values)
    output.prune_unused_sizes(out_nodes)
    if output.float_outputs_need_pinning(out_nodes):
        # a symbolic float leaving a graph whose floats are tensors: AOTAutograd's
        # tensorify pass bakes such an output in as the value it saw (torch.compile then
        # returns a stale number); the floats of this code stay constants instead
        output.pin_float_inputs()
        raise RestartAnalysis()
    if hooks.compiler_fn is not eager_backend and output.unused_float_inputs():
        # AOTAutograd makes every symbolic float of the ShapeEnv a tensor input, and asks
        # for a retrace with those it cannot (one the graph never reads) specialized
        output.pin_float_inputs()
        raise RestartAnalysis()
    has_graph = output.count_calls() > 0 or bool(out_nodes)
    if bp is None and not has_graph and not output.side_effects and not output.prologue:
        # nothing for a graph: the frame runs as it is while the path it took holds (a
        # guarded entry, so a call taking another path, maybe to tensor code, is traced)
        return _passthrough_entry(fn, output, global_state, hooks, closure_arg, f_args)
    if bp is not None and bp.kind == "step" and output.count_calls() == 0:
        if bp.reason.user_error:  # this call raises: run it as it is, trace the next one
            _record_break(fn, bp)
            return EAGER_THIS_CALL
        # nothing before the break: the frame runs in Python, its calls intercepted, up to
        # the end of the region that broke, then a resume function (graph/region_resume.py)
        exit = region_exit(code, tx.instructions, bp.failed_index, tx.loop_indices()) \
            if bp.failed_index is not None and hooks.resolve is not None else "it is not known where it broke"
        if isinstance(exit, RegionExit):
            try:
                entry = _region_entry(fn, tx, output, hooks, closure_arg, exit)
            except Exception:  # a graphjit bug must not stop the user's program: run it in Python
                _region_log.exception("graphjit could not resume %s after line %s; the frame runs in Python",
                                      fn.__qualname__, exit.lineno)
                exit = "its resume function could not be made (graphjit's bug, logged)"
            else:
                _record_break(fn, bp, f"the frame runs in Python up to line {exit.lineno} (its calls "
                                      "compiled), then a resume function")
                return entry
        _record_break(fn, bp)
        where = bp.reason.user_stack[-1] if bp.reason.user_stack else None
        at = f" at {where.filename}:{where.lineno}" if where else ""
        return RunEagerly(f"graph break before anything to compile ({bp.reason.instruction or bp.inst.opname}{at}), "
                          f"{exit}: {bp.reason.reason}")
    initial_grad = global_state[0].expected
    final_grad = output.grad_enabled
    if final_grad != initial_grad:  # graphs leave global state as they found it
        output.graph.create_node("call_function", torch._C._set_grad_enabled, (initial_grad,))
    cg = PyCodegen(code)
    cg.cells = tx.cells
    cg.key_trackers = output.key_trackers
    cg.extend(prefix_instructions(tx.instructions))
    cg.positions = _first_positions(tx.instructions)
    output.prologue.codegen(cg)  # values drawn from random, in program order
    graphs = []
    compiler_fn = graph_compiler(hooks.compiler_fn)  # (split at DDP's buckets)
    if has_graph:
        compiled = finish_graph(output, out_nodes,
                                lift=compiler_fn is hooks.compiler_fn and not hooks.keeps_attributes())
        compiled.runtime_context = output.torch_function.graph_runtime_context()
        codegen_call_graph(cg, compiled, out_nodes)
        graphs.append(compiled)
    if final_grad != initial_grad:
        cg.push_null()
        cg.load_const(torch._C._set_grad_enabled)
        cg.load_const(final_grad)
        cg.call(1)
        cg.append_pop_top()
    if bp is None:
        cg.reconstruct(tx.return_value)
        output.side_effects.codegen(cg)
        if tx.raises:  # an exception out of a generator ends the frame (tracer/raise_at_end.py)
            cg.raise_top()
        else:
            cg.return_value()
    else:
        make_resume = lambda c: _resume(hooks, output, c, fn)  # noqa: E731
        if bp.reason.user_error:  # reached only if the instruction does not raise after all
            make_resume = lambda c: UnexpectedResume(_resume(hooks, output, c, fn), fn, bp.reason,  # noqa: E731
                                                     bp.inst.opname)
        BreakCodegen(tx, cg, make_resume, hooks.wrap_callable, output.side_effects, hooks.resolve).emit(bp)
        _record_break(fn, bp)
    new_code = assemble(cg.instructions, code, **code_overrides(code, cg))
    for compiled in graphs:  # the code around the graph exists: now compile it
        try:
            started = time.perf_counter()
            shared = hooks.shared_graphs if compiler_fn is hooks.compiler_fn else None
            if compile_graph(compiled, compiler_fn, shared, code):
                record.backend_time(time.perf_counter() - started)
            else:
                stats.bump("graphs_shared")
            compiled.fn = graph_callable(compiled.gm, compiled.fn)
        except TensorifyScalarRestartAnalysis:  # the backend needs the floats specialized
            TensorifyState.clear()
            output.pin_float_inputs()
            raise RestartAnalysis() from None
        except Exception as e:
            if not output.has_float_tensor_inputs():
                raise
            # the backend could not compile float arithmetic it was given as tensors
            # (inductor: a float symbol its tensorify pass left in a kernel): those floats
            # stay constants, and the frame is traced again
            logs.emit("recompiles", f"{fn.__qualname__}: the backend failed on float arguments passed "
                                    f"as tensors ({type(e).__name__}); they are constants from now on")
            TensorifyState.clear()
            output.pin_float_inputs()
            raise RestartAnalysis() from None
    new_fn = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new_fn.__kwdefaults__ = fn.__kwdefaults__
    new_fn.__qualname__ = fn.__qualname__
    guard = _entry_guard(fn, output, global_state, hooks, closure_arg, f_args)
    _log_entry(code, new_code, graphs, guard)
    for compiled in graphs:  # the backend has its examples: the entry keeps no call's tensor alive
        for arg in compiled.graph_args:
            if isinstance(arg.example, torch.Tensor):
                arg.example = None
    return CacheEntry(guard, new_fn, graphs)


_region_log = logging.getLogger("graphjit")


def _region_entry(fn, tx: InstructionTranslator, output: OutputGraph, hooks: Hooks, closure_arg: bool,
                  exit: RegionExit) -> CacheEntry:
    """The entry of a frame run in Python up to ``exit``, then resumed: its code reads
    nothing the trace saw, so its guard checks nothing (but the defaults it binds)."""
    code = fn.__code__
    new_code = eager_code_with_exit(code, tx.instructions, exit, hooks.resolve,
                                    lambda c: _resume(hooks, output, c, fn))
    new_fn = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new_fn.__kwdefaults__ = fn.__kwdefaults__
    new_fn.__qualname__ = fn.__qualname__
    guard = build_guard_function([], code, fn, [], closure_arg=closure_arg, check_defaults=not closure_arg)
    _log_entry(code, new_code, [], guard)
    return CacheEntry(guard, new_fn, [])


def graph_callable(gm: torch.fx.GraphModule, fn: Callable) -> Callable:
    """What the generated code calls for a compiled graph: the backend's ``fn``, putting
    back the modes the graph changes when it raises, with a failed ``assert`` checked in
    the graph raised as the program's ``AssertionError`` (``tracer/assertions.py``)."""
    return raising_assertions(gm, restoring_modes(gm, fn))


def _may_alias(output: OutputGraph) -> frozenset:
    """The tensor inputs the compiled graph may receive as one object: the parameters,
    where the graph writes no input (a module assigned to a second name, tied weights
    that became one; a graph compiled for distinct ones reads the same values, and
    autograd sums both gradients into the one leaf).  A graph writing an input must see
    every input distinct (a write through one name is a read through the other)."""
    if output.may_mutate_inputs():
        return frozenset()
    return frozenset(id(g.value) for g in output.guards.values()
                     if g.kind is GuardKind.TENSOR_MATCH and isinstance(g.value, torch.nn.Parameter))


def _entry_guard(fn, output: OutputGraph, global_state, hooks: Hooks, closure_arg: bool, f_args):
    eager = hooks.compiler_fn is eager_backend
    add_leaf_module_guards(output, tensors=not eager)
    add_no_aliasing_guards(output)
    add_key_identity_guards(output)
    add_identity_guards(output)  # ids used as keys (copy.deepcopy's memo)
    shape_guards = (shape_guard_texts(output.shape_env, output.symbolic_inputs, output.input_contexts)
                    if output.symbolic_inputs else None)
    global_state = [*global_state, *output.torch_function.guard_queries()]
    tf_free = bool(output.torch_function.initial_modes) or has_subclass_inputs(output)
    guard = build_guard_function(needed_guards(output), fn.__code__, fn, global_state,
                                 no_aliasing=not eager, may_alias=frozenset() if eager else _may_alias(output),
                                 closure_arg=closure_arg,
                                 relaxed_tensors=relaxed_tensor_checks(output, hooks),
                                 check_defaults=not closure_arg,
                                 dynamic_tensors=output.dynamic_tensors, shape_guards=shape_guards,
                                 torch_function_free=tf_free,
                                 frame=None if closure_arg else frame_values(fn, f_args))
    if config.debug_checks and not closure_arg:
        with torch_function_as_at_call(output.torch_function):
            _check_guard_holds(guard, fn, f_args)
    return guard


def frame_values(fn, f_args) -> dict | None:
    """The frame's values by name (arguments, free variables) for the guard's analysis."""
    try:
        values = bind_frame_locals(fn, *f_args)
    except TypeError:
        return None
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            values.setdefault(name, cell.cell_contents)
        except ValueError:  # (an empty cell)
            pass
    return values


def has_subclass_inputs(output: OutputGraph) -> bool:
    """Does the trace read a tensor of a ``__torch_function__`` subclass from outside (its
    guards and its graph must then run with that dispatch off)?"""
    return any(g.kind is GuardKind.TENSOR_MATCH and overrides_torch_function(type(g.value))
               for g in output.guards.values()) or \
        any(overrides_torch_function(type(a.example)) for a in output.graph_args)


def _passthrough_entry(fn, output: OutputGraph, global_state, hooks: Hooks, closure_arg: bool,
                       f_args) -> CacheEntry:
    """An entry that runs ``fn`` itself: the trace found nothing to compile."""
    guard = _entry_guard(fn, output, global_state, hooks, closure_arg, f_args)
    if logs.wanted("guards"):
        logs.emit("guards", guards_text(guard.labels))
    return CacheEntry(guard, fn, [])


def class_closure(fn: types.FunctionType) -> tuple | None:
    """The ``__class__`` cell resume functions of ``fn`` keep (zero-argument super())."""
    if "__class__" not in fn.__code__.co_freevars:
        return None
    return (fn.__closure__[fn.__code__.co_freevars.index("__class__")],)


def add_leaf_module_guards(output: OutputGraph, tensors: bool) -> None:
    """The settings of ``torch.nn`` leaves called as graph nodes (``p``, ``eps``,
    ``momentum``, ``negative_slope``...: the constants of their instance ``__dict__``)
    decide what the fake run gave (``Dropout(p=0)`` returns its input itself) and what a
    compiling backend bakes in: guard them by value.  With ``tensors`` (a backend other
    than ``eager``, which bakes the parameters and buffers into the compiled artifact)
    guard those by identity too."""
    for module, source in output.leaf_modules:
        if source is None:
            continue
        read = forward_reads(type(module))  # settings its forward never reads cannot matter
        for name, value in module.__dict__.items():
            if not name.startswith("_") and name != "training" and is_constant_value(value) \
                    and (read is None or name in read):
                output.add_guard(AttrSource(source, name), GuardKind.CONSTANT_MATCH, value)
        if not tensors:
            continue
        for kind in ("_parameters", "_buffers"):
            for name, value in module.__dict__[kind].items():
                kind_guard = GuardKind.CONSTANT_MATCH if value is None else GuardKind.ID_MATCH
                output.add_guard(module_attr_source(source, name, kind), kind_guard, value)


def add_key_identity_guards(output: OutputGraph) -> None:
    """Tensors from outside the graph that keyed a set or dict stay distinct objects (the
    trace counted them as different keys): ``len({id(a), id(b), ...})`` is checked, for
    every backend (the identity of each is guarded only against pre-existing dicts)."""
    seen: dict[int, Any] = {}
    for key_id, var in output.key_trackers.items():
        if isinstance(getattr(var, "node", None), torch.fx.Node) and var.source is not None:
            real = output.real_tensor(var.node)
            if real is not None and id(real) == key_id:
                seen.setdefault(key_id, var.source)
    if len(seen) >= 2:
        output.add_guard(None, GuardKind.NO_ALIASING, tuple(seen.values()))


def add_no_aliasing_guards(output: OutputGraph) -> None:
    """Pre-existing objects that the trace mutated are distinct from the other pre-existing
    objects of their type it read (a write through one must not be visible through another
    the trace thought independent).  Objects it only read may be one object in a later call
    (a submodule assigned to two names: reading the same values through both is what the
    trace did): ``WRITTEN_APART``."""
    side = output.side_effects
    mutated = {id(v) for v in side.mutated_targets()}
    if not mutated:
        return
    groups: dict[type, list] = {}
    for _, var in side._by_id.values():
        if var.source is not None and var.mutation_type is not None:
            try:
                groups.setdefault(var.python_type(), []).append(var)
            except Unsupported:
                continue
    for members in groups.values():
        written = tuple(m.source for m in members if id(m) in mutated)
        read = tuple(m.source for m in members if id(m) not in mutated)
        if not written or len(members) < 2:
            continue
        if read:
            output.add_guard(None, GuardKind.WRITTEN_APART, (written, read))
        else:
            output.add_guard(None, GuardKind.NO_ALIASING, written)


def _check_guard_holds(guard: GuardFunction, fn, f_args) -> None:
    """Debug check: an entry's guard must accept the very call it was traced from."""
    args, kwargs = f_args
    failing = guard.failures(*args, **kwargs)
    if failing:
        raise InternalError(f"{fn.__qualname__}: the new entry's guard rejects the call it was "
                            f"traced from: {failing[:3]}")


def needed_guards(output: OutputGraph) -> list:
    """The trace's guards less the TENSOR_MATCH of inputs that no op used and whose
    metadata nothing read (such tensors only pass through: seed 002's lazy guarding), and
    less type checks another guard of the same value already makes."""
    passthrough = {id(a.example) for a in output.graph_args
                   if not a.node.users and not a.node.meta.get("metadata_used")}
    # a TYPE_MATCH implied by a LENGTH_CHECK/DICT_KEYS of the same source and type
    implied = {(g.source, type(g.value)) for g in output.guards.values()
               if g.kind in (GuardKind.LENGTH_CHECK, GuardKind.DICT_KEYS)}
    # ``key in d`` implied by a check that reads ``d[key]`` (a missing key raises there, and
    # a guard that raises fails): a submodule's ``'fc' in m._modules`` by its identity check
    items_read, seen = set(), set()
    for g in output.guards.values():
        source = g.source
        while isinstance(source, ChainedSource) and id(source) not in seen:  # (chains share their bases)
            seen.add(id(source))
            if isinstance(source, GetItemSource):
                items_read.add(_item_key(source))
            source = source.base
    return [g for g in output.guards.values()
            if not (g.kind is GuardKind.TENSOR_MATCH and id(g.value) in passthrough)
            and not (g.kind is GuardKind.TYPE_MATCH and (g.source, g.value) in implied)
            and not (g.kind is GuardKind.DICT_CONTAINS and g.value[1]
                     and (g.source, _key_id(g.value[0])) in items_read)]


def _key_id(key) -> tuple:
    return ("id", id(key)) if isinstance(key, torch.Tensor) else ("key", type(key), key)


def _item_key(source: GetItemSource) -> tuple:
    index = source.index.obj if isinstance(source.index, ObjectKey) else source.index
    return source.base, _key_id(index)


def relaxed_tensor_checks(output: OutputGraph, hooks: Hooks) -> dict[int, frozenset[str]]:
    """TENSOR_MATCH parts the compiled artifact does not depend on.  With the ``eager``
    backend the graph's ops are dispatched by PyTorch at run time, so a tensor with other
    strides or dispatch keys (an inference tensor, a conjugate view) gets exactly eager's
    behaviour; the checks stay when traced code read strides or key-dependent metadata,
    and for every other backend (they specialize on both)."""
    if hooks.compiler_fn is not eager_backend:
        return {}
    out = {}
    for arg in output.graph_args:
        meta = arg.node.meta
        out[id(arg.example)] = frozenset(
            name for name, used in (("strides", meta.get("strides_used")), ("keys", meta.get("keys_used")))
            if not used)
    return out


def _first_positions(insts):
    """Location of the first real instruction: generated code before a break reports it."""
    for inst in insts:
        if inst.opname not in ("RESUME", "MAKE_CELL", "COPY_FREE_VARS") and inst.positions \
                and inst.positions.lineno is not None:
            return inst.positions
    return None


#: graphjit's own frames (the module/object call wrapper): a break in them is the break of
#: the callee, which reports it when it is compiled on its own
TRANSPARENT_CODES: set[types.CodeType] = set()


def _record_eager_call(fn, reason: str) -> None:
    """Record (stats' ``skipped_frames``, once per function and reason; the
    ``graph_breaks`` log) that a call of ``fn`` runs in Python without being traced."""
    code = fn.__code__
    frame = stats.SkippedFrame(fn.__qualname__, code.co_filename, code.co_firstlineno, reason)
    if frame not in stats.snapshot()["skipped_frames"]:
        stats.record("skipped_frames", frame)
    logs.emit("graph_breaks", f"Not tracing this call of {frame}")


def _record_break(fn, bp, resumed: str | None = None) -> None:
    if bp.reason.user_error:  # the program raises there: not a graph break
        logs.emit("graph_breaks", f"{fn.__qualname__} raises ({bp.kind}): {bp.reason}")
        return
    if fn.__code__ in TRANSPARENT_CODES:
        return
    if bp.reason.instruction is None:
        bp.reason.instruction = bp.inst.opname
    bp.reason.resumed = resumed or _RESUMED[bp.kind]
    stats.bump("graph_breaks")
    stats.record("break_reasons", drop_tracebacks(bp.reason))  # (not the trace's frames)
    logs.emit("graph_breaks", f"Graph break in {fn.__qualname__} at {bp.reason.instruction} "
                              f"({bp.reason.resumed}): {bp.reason}")


_RESUMED = {"resume": "the instruction runs in Python, then a resume function",
            "step": "the rest of the frame runs in Python, its calls compiled"}


def _log_entry(code, new_code, graphs: list[CompiledGraph], guard: GuardFunction) -> None:
    for compiled in graphs if logs.wanted("graph_code") else ():
        logs.emit("graph_code", graph_code(compiled.gm, compiled.name))
    if logs.enabled("bytecode"):
        logs.emit("bytecode", format_code(code, title=f"ORIGINAL BYTECODE {code.co_name} "
                                                      f"{code.co_filename} {code.co_firstlineno}"))
        logs.emit("bytecode", format_code(new_code, title="MODIFIED BYTECODE"))
    if logs.enabled("decompiled"):
        logs.emit("decompiled", entry_text(new_code))
    if logs.wanted("guards"):
        logs.emit("guards", guards_text(guard.labels))

"""OutputGraph: the fx graph being built for one frame, its fake tensors, inputs and guards.

Contract:

* Graph inputs are the tensors read through a Source (locals, globals, attributes); each
  becomes one placeholder, deduplicated by object identity, with ``meta["example_value"]``
  a FakeTensor and ``meta["source"]`` its Source, and a TENSOR_MATCH guard.
* Parameters and buffers of ``nn.Module``s and tensors created outside the graph without a
  source are ``get_attr`` nodes on ``self.root`` (the module the GraphModule is built on);
  a ``torch.nn`` leaf called from traced code is one node calling its class's ``forward``
  (:func:`called_leaf_module` finds the module of such a node).
* Sizes may be symbolic (``shape_env``; ``graph/shapes.py`` decides which): an input's fake
  is made with symbolic dimensions, a number argument is a placeholder with a
  ``SymInt``/``SymFloat`` example, and ops returning symbolic numbers give a
  ``SymNodeVariable`` each.
* :meth:`call` records one op: it runs the op on fake tensors (under the traced grad mode)
  to get the result's metadata, then wraps the result in trackers.  An op that needs data
  values (``nonzero``, ``item``) is a graph break, unless ``config`` lets it give an
  unbacked symbol (its node gets ``unbacked_bindings``, as TorchDynamo's do).  An op that returns one of its inputs
  (``x.add_(1)``) returns that input's tracker (``x.add_(1) is x``).  A ``call_module``
  runs, on fake tensors, a fake copy of the module (no real buffer changes while tracing).
* :meth:`build_value` is what ``VariableTracker.build`` uses: one tracker per source, one
  tracker per pre-existing mutable object (an aliasing guard when a second path reaches
  it), and :meth:`lazy_value` defers building (and guarding) until the value is used.
"""

from __future__ import annotations

import contextlib
import copy
import keyword
import operator
import re
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeCopyMode,
    FakeTensor,
    FakeTensorMode,
)
from torch._subclasses.functional_tensor import FunctionalTensor

from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, compute_unbacked_bindings
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .attr_fakes import attr_fake
from ..exc import ObservedException, unsupported
from ..guards.guard import Guard, GuardKind
from ..sources import (
    AttrSource,
    ChainedSource,
    ConstSource,
    FloatTensorSource,
    GetItemSource,
    LocalSource,
    Source,
    as_float_tensor,
    is_module_tensor_source,
)
from ..variables import (
    ConstantVariable,
    LazyVariableTracker,
    ListVariable,
    SliceVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.base import builder_for
from ..variables.constant import is_constant_value
from ..variables.dicts import GlobalsDictVariable
from ..variables.sizes import SizeVariable
from ..variables.generators import TorchGeneratorVariable
from ..variables.numpy_values import graph_constant
from ..variables.random_values import Prologue, PrologueValueVariable, lift_to_graph
from ..variables.sym_node import SymNodeVariable, as_known, is_symbolic
from ..variables.tensor_subclasses import add_wrapper_subclass_guards
from ..variables.torch_modes import TorchFunctionState
from .shapes import (
    CodeShapes,
    DimDynamic,
    ShapeSource,
    StatelessSymbolicContext,
    captures_scalar_outputs,
    marked_dims,
    new_shape_env,
    symbolic_context,
    symbolic_number,
)
from .fake_run import run_fake, target_name
from .side_effects import SideEffects
from .subgraphs import BodyScope
from ..diagnostics.describe import describe

_UNSAFE_CHARS = re.compile(r"[^0-9a-zA-Z_]+")


def _graph_name(source: Source) -> str:
    if isinstance(source, LocalSource):
        return source.local_name
    name = _UNSAFE_CHARS.sub("_", source.display()).strip("_").lower()
    return name or "arg"


class GraphArg:
    """One graph input: its source, the real value (a tensor, or a number that is
    symbolic in the graph) seen at trace time, its placeholder."""

    __slots__ = ("source", "example", "node")

    def __init__(self, source: Source, example: torch.Tensor, node: torch.fx.Node) -> None:
        self.source, self.example, self.node = source, example, node

    def __repr__(self) -> str:
        return f"GraphArg({self.source.display()} -> {self.node.name})"


class OutputGraph:
    """The graph, fake mode, inputs and guards of one traced frame (plus inlined calls)."""

    def __init__(self, f_globals: dict, shapes: CodeShapes | None = None, fullgraph: bool = False) -> None:
        #: the graph ops are recorded in: the frame's, or the body being traced
        self.graph = self.frame_graph = torch.fx.Graph()
        #: the higher-order operator bodies being traced, innermost last
        self.bodies: list[BodyScope] = []
        self._body_names: dict[str, int] = {}
        #: (id(module), name) -> the tensor ``functional_call`` gives for that parameter
        #: or buffer while its call is traced (variables/functional_call.py)
        self.param_overrides: dict[tuple[int, str], VariableTracker] = {}
        #: reuse key -> a traced nested_compile_region body (variables/hops/compile_region.py)
        self.compile_regions: dict = {}
        #: guards requested and sources read while recording (``recording_reads``)
        self.read_log: list | None = None
        #: repeated blocks traced once (variables/hops/repeated_blocks.py)
        self.block_records: dict = {}
        #: the recorder of the repeated block whose first body is being traced: told of
        #: every read and write of the objects the block was given (hops/block_effects.py)
        self.block_watch = None
        #: attribute reads through a class's Python ``__getattribute__`` on objects that
        #: existed before the call (``variables/object_protocol.py``): (object id, name) ->
        #: (object tracker, function, state stamp, result or AttributeError)
        self.getattribute_memo: dict = {}
        #: mutations logged by anything but a repeated block's replayed effects: how many
        #: times some were seen, and the log's mark after the last replay
        self.block_epoch = 0
        self.block_mark: tuple | None = None
        #: objects that existed before the call which replayed block effects wrote, by id
        self.block_written: dict = {}
        #: inside an activation-checkpointed call (its ops are tagged in this graph)
        self.checkpointing = 0
        #: which sizes and numbers are symbolic (``None``: all static)
        self.shapes = shapes
        #: ``.item()`` traced as an unbacked number (``graph/shapes.py``: config or fullgraph)
        self.capture_scalar_outputs = captures_scalar_outputs(fullgraph)
        self.shape_env = new_shape_env(fullgraph)
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=self.shape_env)
        #: inputs with symbolic sizes or values: (fake tensor or SymInt/SymFloat, source)
        self.symbolic_inputs: list[tuple[Any, Source]] = []
        #: source -> the symbolic context of an input with symbolic sizes
        self.input_contexts: dict[Source, StatelessSymbolicContext] = {}
        #: id(real tensor) -> its fake, for inputs with symbolic sizes
        self.dynamic_tensors: dict[int, torch.Tensor] = {}
        self.f_globals = f_globals
        self.guards: dict[tuple, Guard] = {}
        self.graph_args: list[GraphArg] = []
        self._inputs_by_id: dict[int, TensorVariable] = {}
        self._input_versions: list[tuple[torch.Tensor, int | None]] = []  # (fake, its version at input)
        self._attrs_by_id: dict[int, tuple[str, Any]] = {}
        #: attribute name -> its one ``get_attr`` node (a body lifts each tensor once)
        self._attr_nodes: dict[str, torch.fx.Node] = {}
        self.root = torch.nn.Module()
        self.grad_enabled = torch.is_grad_enabled()
        #: the traced inference mode (fake tensors are computed under it)
        self.inference_mode = self.initial_inference_mode = torch.is_inference_mode_enabled()
        self.side_effects = SideEffects()
        self.source_cache: dict[Source, VariableTracker] = {}
        self.lazy_cache: dict[Source, LazyVariableTracker] = {}
        self.leaf_modules: list[tuple[torch.nn.Module, Source | None]] = []
        #: ``torch.nn`` leaf classes whose inline trace failed: their modules are called as
        #: one node each (``variables/nn_module.py``); the frame's set, kept across restarts
        self.leaf_fallback: set[type] = set()
        self._fake_modules: dict[int, torch.nn.Module] = {}
        self.prologue = Prologue()
        #: tensors used as dict or set keys (by id) -> the tracker each was read as
        self.key_trackers: dict[int, VariableTracker] = {}
        #: fx node -> the key object of a tensor the graph computes (dicts.GraphTensorKey)
        self.node_keys: dict = {}
        self._checkpoints = 0
        #: float argument source -> the ``item()`` node of its tensor input
        self._float_items: dict[Source, torch.fx.Node] = {}
        #: the symbolic torch-function mode stack and flags (``variables/torch_modes.py``)
        self.torch_function = TorchFunctionState()

    def next_checkpoint_id(self) -> int:
        """A new ``ac_graph_id`` for the ops of one activation-checkpointed call."""
        self._checkpoints += 1
        return self._checkpoints

    def __repr__(self) -> str:
        return (f"OutputGraph({len(self.graph_args)} inputs, "
                f"{self.count_calls()} ops, {len(self.guards)} guards)")

    # -- guards ---------------------------------------------------------------------------
    def add_guard(self, source: Source | None, kind: GuardKind, value: Any = None,
                  other: Source | None = None, block: tuple | None = None) -> None:
        guard = Guard(source, kind, value, other, block)
        self.guards.setdefault(guard.key, guard)
        if self.read_log is not None:
            self.read_log.append(guard)

    def add_guards(self, guards: list[Guard]) -> None:
        """Guards made elsewhere (a repeated block's, rebased onto a later block), each
        added as :meth:`add_guard` adds one."""
        for guard in guards:
            self.guards.setdefault(guard.key, guard)
        if self.read_log is not None:
            self.read_log.extend(guards)

    @contextlib.contextmanager
    def recording_reads(self):
        """Record every guard requested and every source read (built, or found already
        built) while the block runs: what a trace of it depended on."""
        outer, self.read_log = self.read_log, []
        try:
            yield self.read_log
        finally:
            log, self.read_log = self.read_log, outer
            if outer is not None:
                outer.extend(log)

    # -- building trackers ----------------------------------------------------------------
    def build_value(self, tx, value: Any, source: Source | None) -> VariableTracker:
        """The tracker of ``value`` (see the module docstring); guards through ``source``."""
        if source is not None and self.read_log is not None:
            self.read_log.append(source)
        if source is not None:
            known = self.source_cache.get(source)
            if known is not None:
                return known
        known = self.side_effects.known_tracker(value)
        if known is not None:
            if source is not None and known.source is not None and known.source != source:
                self.add_guard(source, GuardKind.OBJECT_ALIASING, other=known.source)
            elif source is not None and known.source is None:  # e.g. the frame's own cell
                self.add_guard(source, GuardKind.ID_MATCH, value)
            var = known
        else:
            var = builder_for(value)(tx, value, source)
            if var.mutation_type is not None:
                self.side_effects.register_existing(value, var)
        if source is not None:
            self.source_cache[source] = var
        return var

    def globals_tracker(self, tx, f_globals: dict) -> GlobalsDictVariable:
        """The tracker of a module's globals (the compiled function's own, or another
        module's for functions inlined from it)."""
        known = self.side_effects.known_tracker(f_globals)
        if known is None:
            name = f_globals.get("__name__", "?")
            known = GlobalsDictVariable(f_globals, own=f_globals is self.f_globals,
                                        source=ConstSource(f_globals, f"globals of {name}"))
            self.side_effects.register_existing(f_globals, known)
        return known

    def lazy_value(self, tx, value: Any, source: Source) -> VariableTracker:
        """A tracker for ``value`` that builds (and guards) it when first used."""
        if self.read_log is not None:
            self.read_log.append(source)
        known = self.source_cache.get(source)
        if known is not None:
            return known
        lazy = self.lazy_cache.get(source)
        if lazy is None:
            lazy = self.lazy_cache[source] = LazyVariableTracker(tx, value, source)
        return lazy

    # -- inputs ---------------------------------------------------------------------------
    def add_input(self, tensor: torch.Tensor, source: Source) -> TensorVariable:
        """The placeholder for ``tensor`` read through ``source`` (one per tensor object)."""
        known = self._inputs_by_id.get(id(tensor))
        if known is not None:
            if known.source != source:
                self.add_guard(source, GuardKind.OBJECT_ALIASING, other=known.source)
            return TensorVariable(known.node, known._example, source=source)
        dims = None
        wrapper = is_traceable_wrapper_subclass(tensor)  # (its sizes stay static)
        if self.shapes is not None and not is_module_tensor_source(source) and not wrapper:
            dims = self.shapes.dynamic_dims(tensor, source)
        if dims and any(d is not DimDynamic.STATIC for d in dims):
            context = symbolic_context(dims, marked_dims(tensor))
            with self.shape_env.ignore_fresh_unbacked_symbols():  # (an unbacked size: bound by the input)
                fake = self.fake_mode.from_tensor(tensor, source=ShapeSource(source), symbolic_context=context)
            self.symbolic_inputs.append((fake, source))
            self.input_contexts[source] = context
            self.dynamic_tensors[id(tensor)] = fake
        else:
            fake = attr_fake(self.fake_mode, tensor)  # (static: a parameter of a generic module, say)
        node = self._new_input(source, tensor, fake)
        self._input_versions.append((fake, None if fake.is_inference() else fake._version))
        self.add_guard(source, GuardKind.TENSOR_MATCH, tensor)
        if wrapper:
            add_wrapper_subclass_guards(self, tensor, source)
        var = TensorVariable(node, fake, source=source)
        self._inputs_by_id[id(tensor)] = var
        return var

    def may_mutate_inputs(self) -> bool:
        """Whether the graph may write into a tensor input's data: an in-place op on an
        input or a view of one bumped its fake's version (views share it), or the graph
        holds a higher-order operator (whose body works on fakes of its own).  An inference
        tensor keeps no version: it may."""
        if any(v is None or fake._version != v for fake, v in self._input_versions):
            return True
        return any(n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator)
                   for n in self.frame_graph.nodes)

    def module_is_generic(self, module: torch.nn.Module, source: Source) -> bool:
        """Whether the module read through ``source`` is generic (guarded by type, its
        tensors graph inputs) rather than specialized (see ``graph/shapes.py``)."""
        return self.shapes is not None and self.shapes.module_is_generic(module, source)

    def number_is_dynamic(self, value: Any, source: Source) -> bool:
        """Whether the number read through ``source`` is symbolic in this trace (see
        ``graph/shapes.py``; numbers read from modules and defaults stay static)."""
        return self.shapes is not None and type(value) in (int, float) \
            and not self._static_number_source(source) and self.shapes.number_is_dynamic(value, source)

    def numbers_vary(self, value: tuple, source: Source) -> bool:
        """Whether a number inside the tuple or ``torch.Size`` read through ``source`` is
        symbolic in this trace: then the tuple is built item by item, not as one
        constant (each number is recorded, as :meth:`number_is_dynamic` does)."""
        if self.shapes is None or self._static_number_source(source):
            return False
        varies = [self.shapes.number_is_dynamic(v, GetItemSource(source, i))
                  for i, v in enumerate(value) if type(v) in (int, float)]
        return any(varies)

    def _static_number_source(self, source: Source) -> bool:
        """A source through an ``nn.Module`` or a function's defaults: its numbers stay
        constants (torch.compile keeps module attributes and defaults static)."""
        while isinstance(source, ChainedSource):
            if isinstance(source, AttrSource) and source.attr in ("__defaults__", "__kwdefaults__"):
                return True
            source = source.base
            known = self.source_cache.get(source) or self.lazy_cache.get(source)
            if known is not None and isinstance(_value_of(known), torch.nn.Module):
                return True
        return False

    def add_number_input(self, value: int | float, source: Source) -> SymNodeVariable:
        """The placeholder of an unspecialized number argument (a SymInt or SymFloat in
        the graph; its value is passed on every call, so a new value does not recompile)."""
        known = self._input_node(source)
        if known is not None:
            return SymNodeVariable(known, known.meta["example_value"], source=source)
        sym = symbolic_number(self.shape_env, value, source)
        self.symbolic_inputs.append((sym, source))
        self.add_guard(source, GuardKind.TYPE_MATCH, type(value))
        if type(value) is float and self.shapes is not None and self.shapes.policy.floats_as_tensors:
            # a 0-d float64 tensor input, its ``item()`` the symbolic float (as TorchDynamo
            # does it); the item node is what ``source`` reads in this graph
            example = as_float_tensor(value)
            fake = self.fake_mode.from_tensor(example, static_shapes=True)
            fake.item_memo = sym
            tensor = self._new_input(FloatTensorSource(source), example, fake)
            node = self.frame_graph.create_node("call_method", "item", (tensor,), {})
            self._float_items[source] = node
            return SymNodeVariable(node, sym, source=source)
        node = self._new_input(source, value, sym)
        return SymNodeVariable(node, sym, source=source)

    def real_tensor(self, node: torch.fx.Node) -> torch.Tensor | None:
        """The real tensor behind a graph input or attribute node (``None`` for a tensor
        the graph computes)."""
        if node.op == "placeholder":
            return next((a.example for a in self.graph_args
                         if a.node is node and isinstance(a.example, torch.Tensor)), None)
        if node.op == "get_attr":
            value: Any = self.root
            for part in node.target.split("."):
                value = getattr(value, part)
            return value
        return None

    def add_prologue_input(self, var: VariableTracker, dtype: torch.dtype, source: Source) -> TensorVariable:
        """The placeholder for a prologue value as a 0-d tensor of ``dtype`` (one per value
        and dtype; not guarded: the value is computed after the guards, every call)."""
        known = self._input_node(source)
        if known is not None:
            return TensorVariable(known, known.meta["example_value"], source=source)
        example = torch.scalar_tensor(1, dtype=dtype)
        fake = self.fake_mode.from_tensor(example, static_shapes=True)
        return TensorVariable(self._new_input(source, example, fake), fake, source=source)

    def _input_node(self, source: Source) -> torch.fx.Node | None:
        """The placeholder already read through ``source``, if any (for a float passed as
        a tensor, its ``item()`` node)."""
        if source in self._float_items:
            return self._float_items[source]
        return next((arg.node for arg in self.graph_args if arg.source == source), None)

    def _new_input(self, source: Source, real: Any, example: Any) -> torch.fx.Node:
        """A new placeholder for the value read through ``source`` (``real`` at trace
        time, ``example`` its fake or symbolic stand-in).  Placeholders stay first, in the
        order inputs were read."""
        graph = self.frame_graph
        if self.graph_args:
            where = graph.inserting_after(self.graph_args[-1].node)
        else:
            where = graph.inserting_before(next(iter(graph.nodes), None))
        with where:
            node = graph.placeholder(_graph_name(source))
        node.meta["example_value"] = example
        node.meta["source"] = source
        self.graph_args.append(GraphArg(source, real, node))
        return node

    def add_attr(self, value: Any, hint: str) -> str:
        """Register a parameter, buffer, constant tensor, module or opaque object (a
        ``torch.Generator``) on the root; its name."""
        known = self._attrs_by_id.get(id(value))
        if known is not None:
            return known[0]
        base = _UNSAFE_CHARS.sub("_", hint).strip("_").lower() or "attr"
        name, i = base, 0
        while hasattr(self.root, name):
            i += 1
            name = f"{base}_{i}"
        if isinstance(value, torch.nn.Module):
            self.root.add_module(name, value)
            self._alias_module_tensors(name, value)
        elif isinstance(value, torch.nn.Parameter):
            self.root.register_parameter(name, value)
        elif isinstance(value, torch.Tensor):
            self.root.register_buffer(name, value)
        else:  # an opaque object an op takes (a torch.Generator)
            setattr(self.root, name, value)
        self._attrs_by_id[id(value)] = (name, value)
        return name

    def _alias_module_tensors(self, name: str, module: torch.nn.Module) -> None:
        """A module registered on the root: its parameters and buffers are read through
        it (``get_attr('bn.running_mean')``), also where they were registered on their own
        before, so that no tensor is two attributes of the graph module (AOTAutograd lifts
        each attribute as an input, and a duplicated input that is mutated breaks it)."""
        tensors = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
        for sub, tensor in tensors:
            dotted = f"{name}.{sub}"
            known = self._attrs_by_id.get(id(tensor))
            if known is None:
                self._attrs_by_id[id(tensor)] = (dotted, tensor)
            elif "." not in known[0]:
                for node in self.graph.nodes:
                    if node.op == "get_attr" and node.target == known[0]:
                        node.target = dotted
                delattr(self.root, known[0])
                self._attrs_by_id[id(tensor)] = (dotted, tensor)

    def get_attr_tensor(self, tensor: torch.Tensor, hint: str, source: Source | None,
                        origin: Source | None = None) -> TensorVariable:
        """The ``get_attr`` node of a tensor registered on the root (``origin``: where the
        trace read it, kept in the node's meta)."""
        name = self.add_attr(tensor, hint)
        node = self._attr_nodes.get(name)
        if node is None or node._erased or node.target != name:
            node = self._attr_nodes[name] = self.frame_graph.get_attr(name)
            node.meta["example_value"] = attr_fake(self.fake_mode, tensor)
            if origin is not None:
                node.meta["origin"] = origin
        fake = node.meta["example_value"]
        var = TensorVariable(node, fake, source=source)
        var.class_type = type(tensor)  # a Parameter is one (isinstance(p, nn.Parameter))
        return var

    # -- bodies of higher-order operators (graph/subgraphs.py) ----------------------------
    @contextlib.contextmanager
    def body(self, kind: str, side_effects: bool = False, on_write=None):
        """Trace a body of a higher-order operator: ops go into a new graph until the
        block ends (see ``graph/subgraphs.py``); ``side_effects``: the body runs once per
        call, so it may mutate outer objects (``on_write``: told of each first)."""
        index = self._body_names[kind] = self._body_names.get(kind, -1) + 1
        scope = BodyScope(f"{kind}_{index}", self.bodies[-1] if self.bodies else None, self.frame_graph,
                          side_effects, on_write)
        self.bodies.append(scope)
        self.graph = scope.graph
        try:
            yield scope
        finally:
            scope.close()
            self.bodies.pop()
            self.graph = self.bodies[-1].graph if self.bodies else self.frame_graph

    def lift(self, arg: Any) -> Any:
        """An fx argument with every node from outside the body being traced replaced by
        the body's input for it (nothing to do outside bodies)."""
        if not self.bodies:
            return arg
        return torch.fx.node.map_arg(arg, self.bodies[-1].lift)

    def next_region_id(self) -> int:
        """A new identifier number for an ``invoke_subgraph`` body."""
        self._regions = getattr(self, "_regions", -1) + 1
        return self._regions

    def install_body(self, gm: torch.fx.GraphModule) -> torch.fx.Node:
        """A ``get_attr`` node, in the graph being traced, of a finished body's module."""
        owner = self.bodies[-1].root if self.bodies else self.root
        name, i = gm.__class__.__name__, 0
        while hasattr(owner, name):
            i += 1
            name = f"{gm.__class__.__name__}_{i}"
        owner.add_module(name, gm)
        node = self.graph.get_attr(name)
        node.meta["example_value"] = gm
        return node

    def record(self, tx, target: Any, node_args: tuple, example: Any, wrap: bool = True):
        """A ``call_function`` node with fx arguments already made (a higher-order
        operator's call: bodies as ``get_attr`` nodes) whose fake result is ``example``:
        its tracker (with ``wrap=False`` the node, its example in its meta)."""
        node = self.graph.create_node("call_function", target, self.lift(node_args), {})
        node.meta["stack"] = tx.user_stack_summary() if hasattr(tx, "user_stack_summary") else None
        if self.shape_env.pending_fresh_unbacked_symbols:
            node.meta["unbacked_bindings"] = compute_unbacked_bindings(self.shape_env, example)
        if not wrap:
            node.meta["example_value"] = example
            return node
        return self.wrap_result(node, example, "call_function", target)

    def run_fake(self, target: Any, node_args: tuple) -> Any:
        """``target`` called on the fake values of fx arguments (as :meth:`call` does)."""
        return self._run_fake("call_function", target, torch.fx.node.map_arg(self.lift(node_args), _example), {},
                              specialize=False)

    # -- ops ------------------------------------------------------------------------------
    def call(self, tx, op: str, target: Any, args: list, kwargs: dict) -> VariableTracker:
        """Record ``op``/``target`` on tracker arguments; return the wrapped result."""
        if any(isinstance(a, PrologueValueVariable) for a in [*args, *kwargs.values()]):
            args, kwargs = self._lift_prologue_values(tx, args, kwargs)
        node_args = self.lift(tuple(_to_node_arg(a) for a in args))
        node_kwargs = self.lift({k: _to_node_arg(v) for k, v in kwargs.items()})
        fake_args = torch.fx.node.map_arg(node_args, _example)
        fake_kwargs = torch.fx.node.map_arg(node_kwargs, _example)
        example = self._run_fake(op, target, fake_args, fake_kwargs)
        named = next((k for k in kwargs if keyword.iskeyword(k)), None)
        if named is not None:  # fx writes ``name=value``: ``from=-10`` is not Python
            raise unsupported("keyword argument named by a Python keyword", f"{target_name(op, target)}(..., {named}=...)",
                              f"The graph's generated code passes keyword arguments by name, and '{named}' "
                              "cannot be written as one.",
                              [f"Pass '{named}' by position (e.g. t.uniform_(-10, 10))."])
        node = self.graph.create_node(op, target, node_args, node_kwargs)
        node.meta["stack"] = tx.user_stack_summary() if hasattr(tx, "user_stack_summary") else None
        if self.shape_env.pending_fresh_unbacked_symbols:  # (nonzero's size, item()'s value)
            node.meta["unbacked_bindings"] = compute_unbacked_bindings(self.shape_env, example)
        if isinstance(example, torch.Tensor):
            for arg in [*args, *kwargs.values()]:  # an op that returns its input (in place)
                if isinstance(arg, TensorVariable) and arg._example is example:
                    node.meta["example_value"] = example
                    return arg
        return self.wrap_result(node, example, op, target)

    def _lift_prologue_values(self, tx, args: list, kwargs: dict) -> tuple[list, dict]:
        """Values drawn at run time, next to a tensor operand, become graph inputs."""
        tensor = next((a for a in [*args, *kwargs.values()] if isinstance(a, TensorVariable)), None)
        if tensor is None:
            raise unsupported("value drawn from random at run time as the only operand of a tensor "
                              "operation", ", ".join(describe(a) for a in args), "Its dtype would depend on the value.")

        def lift(v):
            return lift_to_graph(tx, v, tensor.example_value) if isinstance(v, PrologueValueVariable) else v

        return [lift(a) for a in args], {k: lift(v) for k, v in kwargs.items()}

    def call_leaf_forward(self, tx, module: torch.nn.Module, hint: str, args: list,
                          kwargs: dict) -> VariableTracker:
        """``type(module).forward(module, ...)`` as one node: a leaf module whose hooks are
        guarded empty or were run by the trace itself (``call_module`` would run
        ``Module.__call__``: its hook checks on every call, or the hooks again)."""
        target = self.add_attr(module, hint)
        mod_node = self.graph.get_attr(target)
        node_args = (mod_node, *self.lift(tuple(_to_node_arg(a) for a in args)))
        node_kwargs = self.lift({k: _to_node_arg(v) for k, v in kwargs.items()})
        fake_args = torch.fx.node.map_arg(node_args[1:], _example)
        fake_kwargs = torch.fx.node.map_arg(node_kwargs, _example)
        fake = self.fake_module(target)
        forward = _rnn_leaf_forward if isinstance(module, torch.nn.RNNBase) else _leaf_forward
        example = self._run_fake("call_function", forward, (fake, *fake_args), fake_kwargs)
        node = self.graph.create_node("call_function", forward, node_args, node_kwargs)
        node.meta["stack"] = tx.user_stack_summary()
        return self.wrap_result(node, example, "call_function", forward)

    def fake_module(self, target: str) -> torch.nn.Module:
        """The registered module ``target``, to run on fake inputs.  A module with buffers
        is copied with fake parameters and buffers first (its forward may update buffers in
        place, as BatchNorm's running statistics); a module without buffers runs as it is
        (its parameters become fake as they are used)."""
        module = self.root.get_submodule(target)
        if not any(True for _ in module.buffers()):
            return module
        fake = self._fake_modules.get(id(module))
        if fake is None:
            with FakeCopyMode(self.fake_mode):
                fake = self._fake_modules[id(module)] = copy.deepcopy(module)
        return fake

    def inference_ctx(self):
        """The traced inference mode, where it differs from the one the trace began in."""
        if self.inference_mode == self.initial_inference_mode:
            return contextlib.nullcontext()
        return torch.inference_mode(self.inference_mode)

    def _run_fake(self, op, target, args, kwargs, specialize: bool = True):
        """The op on fake values (``graph/fake_run.py``: its failures as breaks, the
        program's errors, or the op specialized to this call's sizes)."""
        return run_fake(self, op, target, args, kwargs, specialize)

    def wrap_result(self, node: torch.fx.Node, example: Any, op: str, target: Any) -> VariableTracker:
        if isinstance(example, torch.Tensor):
            node.meta["example_value"] = example
            return TensorVariable(node, example)
        if is_symbolic(example):
            return SymNodeVariable(node, example)
        example = as_known(example)
        if isinstance(example, (tuple, list)) and _holds_graph_values(example):
            return self._wrap_items(node, example)
        mutating = isinstance(target, str) and target.endswith("_") or op == "call_module"
        if example is None:
            return ConstantVariable(None)
        if is_constant_value(example):
            if not mutating and not node.users:
                self.graph.erase_node(node)
            return ConstantVariable(example)
        raise unsupported("unsupported operator output",
                          f"{target_name(op, target)} returned {type(example).__name__}")

    def _wrap_items(self, node: torch.fx.Node, example: tuple | list) -> VariableTracker:
        """A tuple or list result: its tensors and symbolic numbers as ``getitem`` nodes,
        nested tuples and lists too (an LSTM's ``(out, (h, c))``)."""
        node.meta["example_value"] = example
        items = []
        for i, e in enumerate(example):
            if isinstance(e, torch.Tensor):
                item = self.graph.create_node("call_function", operator.getitem, (node, i))
                item.meta["example_value"] = e
                items.append(TensorVariable(item, e))
            elif is_symbolic(e):
                item = self.graph.create_node("call_function", operator.getitem, (node, i))
                items.append(SymNodeVariable(item, e))
            elif type(e) in (tuple, list) and _holds_graph_values(e):
                items.append(self._wrap_items(self.graph.create_node("call_function", operator.getitem,
                                                                     (node, i)), e))
            elif is_constant_value(e := as_known(e)):
                items.append(ConstantVariable(e))
            else:
                raise unsupported("unsupported operator output", f"{type(e).__name__} item")
        if isinstance(example, list):
            return ListVariable(items)
        if type(example) is torch.Size:
            return SizeVariable(items)
        named = type(example) if type(example) is not tuple else None
        return TupleVariable(items, namedtuple_cls=named)

    def prune_unused_sizes(self, keep: list[torch.fx.Node]) -> None:
        """Remove nodes that compute sizes or symbolic numbers nothing uses (a size read
        only to decide a branch: the decision is a guard, not graph work)."""
        keep_set = set(keep)
        for node in reversed(list(self.graph.nodes)):
            if node.op in ("call_function", "call_method") and not node.users and node not in keep_set \
                    and _is_size_value(node.meta.get("example_value")):
                self.graph.erase_node(node)

    def unused_float_inputs(self) -> bool:
        """Whether a symbolic float argument's placeholder has no users."""
        return any(isinstance(a.node.meta.get("example_value"), torch.SymFloat) and not a.node.users
                   for a in self.graph_args)

    def has_float_tensor_inputs(self) -> bool:
        """Whether a float argument is passed to this graph as a 0-d tensor."""
        return bool(self._float_items)

    def float_outputs_need_pinning(self, out_nodes: list[torch.fx.Node]) -> bool:
        """Whether a graph output is a symbolic float computed from a float argument
        passed as a tensor (see ``convert_frame.build_entry``)."""
        inputs = {node.meta["example_value"].node.expr for node in self._float_items.values()}
        return any(isinstance(v := n.meta.get("example_value"), torch.SymFloat)
                   and v.node.expr.free_symbols & inputs for n in out_nodes)

    def pin_float_inputs(self) -> None:
        """A backend could not keep this trace's symbolic floats symbolic (AOTAutograd's
        tensorify pass asks for a restart): the next traces of this code specialize them."""
        for value, source in self.symbolic_inputs:
            if isinstance(value, torch.SymFloat) and self.shapes is not None:
                self.shapes.pin(source)

    def count_calls(self) -> int:
        """Ops in the graph, not counting grad-mode toggles (a graph of only those is not
        compiled: the generated code sets the final grad mode itself)."""
        return sum(1 for n in self.graph.nodes
                   if n.op in ("call_function", "call_method", "call_module")
                   and n.target is not torch._C._set_grad_enabled)


def _value_of(var: VariableTracker) -> Any:
    """The Python object a tracker of a pre-existing value stands for (``None`` if unknown)."""
    if isinstance(var, LazyVariableTracker):
        return var.peek_value()
    return getattr(var, "value", None)


def _holds_graph_values(example) -> bool:
    """A tensor or symbolic number among the items (of nested tuples and lists too)."""
    return any(isinstance(e, torch.Tensor) or is_symbolic(e) or
               (type(e) in (tuple, list) and _holds_graph_values(e)) for e in example)


def _is_size_value(value) -> bool:
    """A number, symbolic number, or tuple of them (``x.size()``): what size arithmetic
    computes, never a tensor."""
    if isinstance(value, (tuple, list)):
        return all(_is_size_value(v) for v in value)
    return isinstance(value, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool))


def _leaf_forward(module, *args, **kwargs):
    """A module's class ``forward``, without ``Module.__call__`` (graph target)."""
    return type(module).forward(module, *args, **kwargs)


_leaf_forward.__module__ = "graphjit_runtime"  # written into graph code as a global


def _rnn_leaf_forward(module, *args, **kwargs):
    """An RNN module's class ``forward`` (graph target).  Traced by a compiling backend
    (fake or functional inputs), it runs with oneDNN off: AOTAutograd's trace of the
    oneDNN LSTM kernel (``mkldnn_rnn_layer``) saves an undefined workspace that its runtime
    rejects (``torch.compile`` with ``allow_rnn`` fails the same way), the native kernels
    trace cleanly.  Run on real tensors, the module's kernels are eager's."""
    first = args[0] if args else None
    if isinstance(first, (FakeTensor, FunctionalTensor)) and torch._C._get_mkldnn_enabled():
        torch._C._set_mkldnn_enabled(False)
        try:
            return type(module).forward(module, *args, **kwargs)
        finally:
            torch._C._set_mkldnn_enabled(True)
    return type(module).forward(module, *args, **kwargs)


_rnn_leaf_forward.__module__ = "graphjit_runtime"


def called_leaf_module(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.nn.Module | None:
    """The leaf module ``node`` of ``gm`` calls (a ``call_module`` node, or the call of a
    module's ``forward`` that graphjit emits for leaves), else ``None``."""
    if node.op == "call_module":
        return gm.get_submodule(node.target)
    if node.op == "call_function" and node.target in (_leaf_forward, _rnn_leaf_forward) and \
            node.args[0].op == "get_attr":
        return gm.get_submodule(node.args[0].target)
    return None


def _example(node: torch.fx.Node):
    return node.meta["example_value"]


def _to_node_arg(var: VariableTracker):
    """A tracker as an fx argument: nodes for tensors, values for constants."""
    if isinstance(var, (TensorVariable, SymNodeVariable)) or getattr(var, "is_graph_value", False):
        return var.node
    if isinstance(var, TorchGeneratorVariable):
        return var.graph_node()
    if isinstance(var, (TupleVariable, ListVariable)):
        items = [_to_node_arg(v) for v in var.items]
        return items if isinstance(var, ListVariable) else tuple(items)
    if isinstance(var, SliceVariable):
        return slice(*(_to_node_arg(p) for p in var.parts))
    if isinstance(var, ConstantVariable):
        return graph_constant(var.value)  # (numpy scalars as Python numbers)
    if var.is_python_constant():
        return graph_constant(var.as_python_constant())
    raise unsupported("unsupported argument to a tensor operation", describe(var),
                      "Only tensors, symbolic numbers, constants and tuples or lists of them "
                      "can be arguments of a graph operation.")

"""finish_graph / compile_graph: close the fx graph, call the backend, and emit the bytecode that
calls the compiled graph and rebuilds the frame's return value from its outputs."""

from __future__ import annotations

import itertools
import types
from typing import Any

import torch
import torch.fx
from torch._dynamo.exc import TensorifyScalarRestartAnalysis
from torch._guards import TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode

from ..bytecode.instruction import create_instruction
from ..exc import BackendCompilerFailed
from ..variables import TensorVariable, VariableTracker
from ..variables.base import LazyVariableTracker
from ..variables.sym_node import SymNodeVariable, reload_source
from ..variables.mode_stack import overrides_torch_function, without_torch_function
from ..sources import AttrSource, ChainedSource, GetItemSource, LocalSource
from .codegen import PyCodegen
from .output_graph import GraphArg, OutputGraph
from .shared_graphs import SharedGraphs, lift_attrs, shareable

_counter = itertools.count()


class CompiledGraph:
    """The backend's callable for one graph, named ``__compiled_fn_<n>`` in bytecode."""

    def __init__(self, name: str, gm: torch.fx.GraphModule, fn, graph_args: list[GraphArg],
                 fake_mode: FakeTensorMode | None = None) -> None:
        self.name, self.gm, self.fn, self.graph_args = name, gm, fn, graph_args
        self.fake_mode = fake_mode  # the trace's (its ShapeEnv knows the symbolic sizes)
        #: what the graph runs under (``torch_modes.runtime_context``), or ``None``
        self.runtime_context = None
        #: module tensors passed after ``graph_args`` (the graph's last placeholders,
        #: ``shared_graphs.py``), by the generated code
        self.lifted: tuple = ()
        self.shared = None  # the shared-graph table's record of ``fn`` (kept alive with it)
        self.__name__ = self.__qualname__ = name

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self) -> str:
        return f"<compiled graph {self.name}>"


#: values that hold no tensor: left lazy when only passed through
_SCALARS = frozenset({int, float, bool, complex, str, bytes, type(None)})


def collect_tensors(var: VariableTracker, out: list[TensorVariable], seen: set[int] | None = None) -> None:
    """Tensor trackers reachable from ``var`` (through containers, objects, bound methods;
    trackers may form cycles, each is visited once)."""
    seen = set() if seen is None else seen
    stack = [var]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, LazyVariableTracker) and not v.is_realized() and type(v.peek_value()) in _SCALARS:
            continue  # a number or string only passed through: reloaded from its source, not guarded
        if isinstance(v, (TensorVariable, SymNodeVariable)):  # what only the graph computes
            out.append(v)
        stack.extend(reversed(v.children()))  # (a tensor's: attributes set on a new one)


def graph_outputs_for(values: list[VariableTracker]) -> list[torch.fx.Node]:
    """Nodes the graph must return: tensors that are not reloadable inputs, each once."""
    tensors: list[TensorVariable | SymNodeVariable] = []
    seen: set[int] = set()
    for v in values:
        collect_tensors(v, tensors, seen)
    nodes: dict[torch.fx.Node, None] = {}
    for t in tensors:
        if t.node.op == "placeholder" and t.source is not None:
            continue
        if isinstance(t, SymNodeVariable) and reload_source(t) is not None:
            continue  # an input's size: read again from the input
        nodes.setdefault(t.node)
    return list(nodes)


def finish_graph(output: OutputGraph, out_nodes: list[torch.fx.Node], lift: bool = True) -> CompiledGraph:
    """Close the graph with ``out_nodes``, drop unused inputs, lint, build the module.
    The backend is called later (:func:`compile_graph`), once the code around the graph
    has been generated, so no graph is compiled for code that is then thrown away.
    ``lift``: the module tensors the graph reads as attributes become its last inputs
    (``shared_graphs.py``; not where a backend splits the graph by its parameters, DDP's,
    or folds them as constants, inductor's freezing)."""
    graph = output.graph
    graph.output(tuple(out_nodes))
    used = []
    for arg in output.graph_args:
        if arg.node.users:
            used.append(arg)
        else:
            graph.erase_node(arg.node)
    lifted = lift_attrs(graph, output.root) if lift else []
    graph.lint()
    gm = torch.fx.GraphModule(output.root, graph, class_name="GraphModule")
    name = new_graph_name()
    gm.meta["graphjit_name"] = name
    compiled = CompiledGraph(name, gm, None, used, output.fake_mode)
    compiled.lifted = tuple(lifted)
    return compiled


def new_graph_name() -> str:
    """A new ``__compiled_fn_<n>`` (unique in the process)."""
    return f"__compiled_fn_{next(_counter)}"


def compile_graph(compiled: CompiledGraph, compiler_fn, shared: SharedGraphs | None = None,
                  scope: Any = None) -> bool:
    """Call the backend with ``(gm, example_inputs)`` as torch.compile does: real tensors,
    and the SymInt/SymFloat of each unspecialized number; the tracing context holds the
    trace's fake mode, so a backend that fakes the real tensors again gets the same
    symbolic sizes.  With a ``shared`` table, a graph of the structure of one compiled
    before in ``scope`` (the traced frame's code) takes its callable instead (then
    ``False``: the backend was not called)."""
    example_inputs = [a.example if isinstance(a.example, torch.Tensor) else a.node.meta["example_value"]
                      for a in compiled.graph_args]
    example_inputs += compiled.lifted
    # a ``__torch_function__`` subclass input is a plain tensor to the graph (its fake is
    # plain; the trace already ran its ``__torch_function__``)
    plain = tuple(i for i, a in enumerate(example_inputs)
                  if isinstance(a, torch.Tensor) and overrides_torch_function(type(a)))
    for i in plain:
        example_inputs[i] = example_inputs[i].as_subclass(torch.Tensor)
    if shared is not None and (plain or compiled.runtime_context is not None or not shareable(compiled.fake_mode)):
        shared = None
    if shared is not None:
        found = shared.find(compiled.gm, scope)
        if found is not None:
            compiled.fn, compiled.shared = found
            return False
    try:
        with tracing(TracingContext(compiled.fake_mode or FakeTensorMode())):
            fn = compiler_fn(compiled.gm, example_inputs)
    except TensorifyScalarRestartAnalysis:  # (AOTAutograd asks for another trace)
        raise
    except Exception as e:
        raise BackendCompilerFailed(f"backend {_backend_name(compiler_fn)!r} raised {type(e).__name__} compiling graph "
                                    f"{compiled.name} ({len(compiled.gm.graph.nodes)} nodes): {e}") from e
    if not callable(fn):
        raise BackendCompilerFailed(f"backend {_backend_name(compiler_fn)!r} returned a non-callable {type(fn).__name__} for graph "
                                    f"{compiled.name}")
    if shared is not None:
        compiled.shared = shared.add(compiled.gm, fn, scope)
    if compiled.runtime_context is not None or plain:  # the handlers' ops must not dispatch again
        fn = without_torch_function(fn, compiled.runtime_context, plain)
    compiled.fn = fn
    return True


def _backend_name(compiler_fn) -> str:
    return getattr(compiler_fn, "__name__", type(compiler_fn).__name__)


def codegen_call_graph(cg: PyCodegen, compiled: CompiledGraph, out_nodes: list[torch.fx.Node]) -> None:
    """``___out_0, ... = compiled(*inputs)``: call the graph, unpack into temp locals."""
    temps = _read_shared_registries(cg, [arg.source for arg in compiled.graph_args])
    cg.push_null()
    cg.load_const(compiled)
    cg.append(create_instruction("LOAD_ATTR", argval="fn"))  # the backend's callable itself
    for arg in compiled.graph_args:
        cg.extend(_from_temps(arg.source, temps).reconstruct())
    if compiled.lifted:  # fn(*inputs, *compiled.lifted)
        cg.append(create_instruction("BUILD_LIST", arg=len(compiled.graph_args)))
        cg.load_const(compiled)
        cg.append(create_instruction("LOAD_ATTR", argval="lifted"))
        cg.append(create_instruction("LIST_EXTEND", arg=1))
        cg.append(create_instruction("CALL_FUNCTION_EX", arg=0))
    else:
        cg.call(len(compiled.graph_args))
    if not out_nodes:
        cg.append(create_instruction("POP_TOP"))
        return
    cg.append(create_instruction("UNPACK_SEQUENCE", arg=len(out_nodes)))
    for node in out_nodes:
        name = cg.new_var("graph_out")
        cg.graph_outputs[node] = name
        cg.store_fast(name)


def prefix_instructions(instructions) -> list:
    """The frame set-up instructions (MAKE_CELL, COPY_FREE_VARS, RESUME) to keep."""
    out = []
    for inst in instructions:
        if inst.opname in ("MAKE_CELL", "COPY_FREE_VARS"):
            out.append(create_instruction(inst.opname, argval=inst.argval, arg=inst.arg))
        elif inst.opname == "RESUME":
            out.append(create_instruction("RESUME", arg=0))
            break
        else:
            break
    return out


def code_overrides(code: types.CodeType, cg: PyCodegen) -> dict:
    return {"co_varnames": code.co_varnames + tuple(cg.new_varnames)}


_REGISTRIES = ("_modules", "_parameters", "_buffers")


def _registry_steps(source) -> list:
    """The module-tree reads ``source`` is made of, outermost first: each registry dict
    (``m._modules``, ``m._parameters``, ``m._buffers``) and each item read from one."""
    out = []
    while isinstance(source, ChainedSource):
        base = source.base
        if isinstance(source, AttrSource) and source.attr in _REGISTRIES or \
                isinstance(source, GetItemSource) and isinstance(base, AttrSource) and base.attr == "_modules":
            out.append(source)
        source = base
    return out[::-1]


def _read_shared_registries(cg: PyCodegen, sources: list) -> dict:
    """Module-tree reads shared by two or more graph inputs (the parameters of a generic
    module's submodules, each a chain from the frame's module), each read once into a
    temporary before the graph's call: a 24-layer model passes hundreds of parameters,
    whose chains repeat the same ``_modules`` lookups.  These reads are of plain dicts
    (the guard checked their types), so reading them once reads the same objects."""
    counts: dict = {}
    for source in sources:
        for step in _registry_steps(source):
            counts[step] = counts.get(step, 0) + 1
    temps: dict = {}
    for step in dict.fromkeys(s for source in sources for s in _registry_steps(source)):
        if counts[step] < 2 or step in temps:
            continue
        cg.extend(_from_temps(step, temps).reconstruct())
        name = cg.new_var("tree")
        cg.store_fast(name)
        temps[step] = LocalSource(name)
    return temps


def _from_temps(source, temps: dict):
    """``source`` read from the deepest of its steps held in a temporary."""
    if not temps:
        return source
    chain = []
    node = source
    while isinstance(node, ChainedSource) and node not in temps:
        chain.append(node)
        node = node.base
    if node not in temps:
        return source
    node = temps[node]
    for step in reversed(chain):
        node = step.with_base(node)
    return node

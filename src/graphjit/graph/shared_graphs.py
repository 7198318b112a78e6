"""Graphs that are one computation compile once: a specialized graph's attribute tensors
passed as inputs, and a session's table of compiled graphs by structure.

A module compiled on its own traces *specialized* (its parameters are ``get_attr`` nodes
of the graph, the cheapest guards).  Another instance of its class met later (a second
module compiled with the same options, another module's bound ``forward`` patched on the
instance) gets a trace of its own, whose graph is the same computation on other tensors.
torch.compile compiles ``forward``'s frame generically and meets its cache there; graphjit
keeps the cheap specialized entry and shares the backend's work instead.

Contract:

* :func:`lift_attrs` turns the ``get_attr`` nodes of a frame's graph that read a tensor
  the trace found through a source (``meta["origin"]``: a module's parameter or buffer,
  directly on the graph's root) into placeholders after the graph's own (graph order),
  before the graph module is built: the compiled callable holds no module's tensors, as
  torch.compile's graphs of inlined modules take their parameters as inputs.  The
  generated code passes them after the graph's arguments (``CompiledGraph.lifted``; the
  persistent cache writes them with the graph, as references to the entry's modules).
* :class:`SharedGraphs` (one per compile session whose backend allows it:
  ``backends.registry.shares_graphs``, a backend named by a string or a callable with
  ``graphjit_shares_graphs = True``; a user's other callable is called for every graph, as
  torch.compile calls it) remembers each compiled graph with its
  *scope*, the code object whose frame the graph was traced from.  A new graph of the
  same scope with the same *structure* as one compiled before reuses its compiled
  callable instead of calling the backend (as torch.compile's cache on the code object
  serves a second call without compiling; graphs of other code are not looked at, so
  graph counts stay comparable with torch.compile's): the same nodes in the same order
  (the same targets, constants and edges; inputs numbered by first use, so a graph whose
  parameters are inputs matches one whose parameters were lifted), the same input
  metadata (class, dtype, device, sizes, strides, offset, ``requires_grad``, leaf or view,
  storages shared between inputs), the same constant tensors (bodies of higher-order
  operators by structure), under the same grad and autocast modes.  A graph with symbolic
  sizes, a tensor subclass input, a call of a Python function that is not torch's
  (``_pure_target``: a compiling backend traces it, baking in what it reads), a module
  call, any other value it cannot describe exactly, or run under ``__torch_function__``
  handlers or a functorch transform is never shared.  The structure is only computed
  when a cheap signature (scope, node count, modes) matches a graph compiled before, so
  a session whose graphs all differ pays nothing but that signature.
* A shared callable is called with the new graph's inputs reordered to the first graph's
  where they differ (an adapter); the backend's callable is the same object.  The table
  holds its graphs weakly: it dies with the entries using it (or ``graphjit.reset()``).
"""

from __future__ import annotations

import types
import weakref
from typing import Any, Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

#: node metadata that changes what a backend does with the graph (activation
#: checkpointing's tags): part of a graph's structure, and kept by the persistent cache
KEPT_META = ("recompute", "ac_graph_id")


class NotDescribable(Exception):
    """A graph holds something whose equality cannot be told exactly: never shared."""


def lift_attrs(graph: torch.fx.Graph, root: torch.nn.Module) -> list[torch.Tensor]:
    """Turn the ``get_attr`` nodes of ``graph`` that read a tensor the trace found through
    a source (``meta["origin"]``) directly on ``root`` into placeholders after the graph's
    own (graph order, one per attribute, names kept); the tensors, in that order."""
    placeholders = list(graph.find_nodes(op="placeholder"))
    anchor = placeholders[-1] if placeholders else None
    by_target: dict[str, torch.fx.Node] = {}
    lifted: list[torch.Tensor] = []
    for node in list(graph.find_nodes(op="get_attr")):
        if "origin" not in node.meta or "." in node.target:
            continue
        value = getattr(root, node.target, None)
        if not isinstance(value, torch.Tensor):
            continue
        known = by_target.get(node.target)
        if known is not None:
            node.replace_all_uses_with(known)
            graph.erase_node(node)
            continue
        by_target[node.target] = node
        node.op, node.target = "placeholder", node.name
        if anchor is None:
            next(iter(graph.nodes)).prepend(node)
        else:
            anchor.append(node)
        anchor = node
        lifted.append(value)
    return lifted


# -- structure -----------------------------------------------------------------------------
_ATOMS = (type(None), bool, int, str, torch.dtype, torch.device, torch.layout, torch.memory_format,
          type(Ellipsis))


def _tensor_meta(t: Any, storages: dict) -> tuple:
    """An input's metadata, from its fake (a plain dense tensor of static sizes)."""
    if type(t) is not FakeTensor or t.layout is not torch.strided:
        raise NotDescribable(type(t).__name__)
    if any(isinstance(s, torch.SymInt) for s in (*t.shape, *t.stride(), t.storage_offset())):
        raise NotDescribable("symbolic sizes")
    storage = storages.setdefault(t.untyped_storage()._cdata, len(storages))
    return (isinstance(t, torch.nn.Parameter), t.dtype, t.device, tuple(t.shape), t.stride(),
            t.storage_offset(), t.requires_grad, t.is_leaf, t._is_view(), t.is_inference(), t.is_conj(),
            t.is_neg(), storage)


class _Describer:
    """The structure of one graph (see the module docstring), and the position of each of
    its inputs, numbered by first use."""

    def __init__(self, gm: torch.fx.GraphModule, keep: list) -> None:
        self.gm, self.keep = gm, keep
        self.placeholders = {n: i for i, n in enumerate(gm.graph.find_nodes(op="placeholder"))}
        self.inputs: dict[torch.fx.Node, int] = {}  # placeholder -> number by first use
        self.order: list[int] = []  # position of each input, by number
        self.metas: list[Any] = []
        self.storages: dict = {}

    def describe(self) -> tuple:
        index: dict[torch.fx.Node, int] = {}
        nodes = []
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                continue
            index[node] = len(index)
            args = self._value(node.args, index)
            kwargs = tuple((k, self._value(v, index)) for k, v in node.kwargs.items())
            nodes.append((node.op, self._target(node), args, kwargs,
                          tuple((k, self._value(node.meta[k], index)) for k in KEPT_META if k in node.meta)))
        return tuple(nodes), tuple(self.metas)

    def _input(self, node: torch.fx.Node) -> tuple:
        number = self.inputs.get(node)
        if number is None:
            number = self.inputs[node] = len(self.inputs)
            self.order.append(self.placeholders[node])
            value = node.meta.get("example_value")
            self.metas.append(_tensor_meta(value, self.storages))
        return ("in", number)

    def _target(self, node: torch.fx.Node) -> Any:
        if node.op in ("call_method", "output"):
            return node.target
        if node.op == "call_function":
            if not _pure_target(node.target):
                raise NotDescribable(f"a call of {node.target!r}")
            return node.target
        if node.op == "call_module":  # (a compiling backend traces its forward, reading
            raise NotDescribable("a module call")  # whatever the module holds then)
        value = _attr(self.gm, node.target)
        if isinstance(value, torch.fx.GraphModule):
            body = _Describer(value, self.keep)
            for placeholder in body.placeholders:  # (a body's inputs in its own order)
                body._input(placeholder)
            return ("body", body.describe())
        if not isinstance(value, torch.Tensor):
            raise NotDescribable(type(value).__name__)
        self.keep.append(value)  # (a constant tensor: the same object; its id stays its
        return ("tensor", id(value))  # own while the record lives)

    def _value(self, value: Any, index: dict) -> Any:
        if isinstance(value, torch.fx.Node):
            if value in index:
                return ("n", index[value])
            return self._input(value)
        if isinstance(value, _ATOMS):
            return (type(value), value)
        if isinstance(value, float):
            return (float, repr(value))
        if isinstance(value, (tuple, list)):
            return (type(value).__name__, tuple(self._value(v, index) for v in value))
        if isinstance(value, dict):
            return ("dict", tuple((k, self._value(v, index)) for k, v in value.items()))
        if isinstance(value, slice):
            return ("slice", self._value((value.start, value.stop, value.step), index))
        if isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            return ("op", value)
        raise NotDescribable(type(value).__name__)


def _pure_target(target: Any) -> bool:
    """Whether a graph's call of ``target`` is the same computation whenever its arguments
    are: an operator (``OpOverload``, a higher-order operator, whose bodies are part of the
    structure), a C function (``torch._C._nn.linear``, ``operator.add``), or a Python
    function of torch's own or of ``operator``/``math``, or one of graphjit's runtime
    functions marked ``__graphjit_pure__`` (``invoke_region``, which runs its body, a graph
    attribute compared by structure).  Not any other Python callable (an
    ``autograd.Function``'s apply, a function allowed in the graph): a compiling backend
    traces it when it compiles, baking in whatever it reads then (a global its backward
    reads, guarded, and changed since)."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator,
                           types.BuiltinFunctionType)) or getattr(target, "__graphjit_pure__", False):
        return True
    module = getattr(target, "__module__", None) or ""
    return isinstance(target, types.FunctionType) and (
        module == "torch" or module.startswith("torch.") or module in ("operator", "_operator", "math"))


def _attr(gm: torch.nn.Module, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def describe(gm: torch.fx.GraphModule) -> tuple | None:
    """``(structure, position of each input by number, objects named by id)``, or ``None``
    for a graph that is never shared."""
    keep: list = []
    describer = _Describer(gm, keep)
    try:
        structure = describer.describe()
        hash(structure)
    except (NotDescribable, TypeError):
        return None
    if len(describer.order) != len(describer.placeholders):
        return None  # an input no node reads
    return structure, tuple(describer.order), keep


# -- the table -------------------------------------------------------------------------------
class _Compiled:
    """One compiled graph as the table knows it: its callable, and its structure (computed
    when another graph's signature first matches)."""

    def __init__(self, gm: torch.fx.GraphModule, fn: Callable) -> None:
        self.gm, self.fn = gm, fn
        self._structure: tuple | None | bool = False

    def structure(self) -> tuple | None:
        if self._structure is False:
            self._structure = describe(self.gm)
        return self._structure  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<shared graph {self.gm.meta.get('graphjit_name', '?')}>"


def _signature(gm: torch.fx.GraphModule, scope: Any) -> tuple:
    return (scope, len(gm.graph.nodes), torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"),
            torch.is_autocast_enabled("cuda") if torch.cuda.is_available() else False)


def shareable(fake_mode: FakeTensorMode | None) -> bool:
    """No ``__torch_function__`` or dispatch mode and no functorch transform is active,
    and the trace made no symbol (a backend adds runtime checks from its shape
    environment): the state a shared graph may be compiled and found in."""
    shape_env = fake_mode.shape_env if fake_mode is not None else None
    if shape_env is not None and shape_env.var_to_range:  # (every symbol, backed or not)
        return False
    return torch._C._len_torch_function_stack() == 0 and \
        torch.utils._python_dispatch._get_current_dispatch_mode() is None and \
        torch._C._functorch.peek_interpreter_stack() is None


class SharedGraphs:
    """A compile session's compiled graphs, found again by structure (see above)."""

    def __init__(self) -> None:
        self._by_signature: dict[tuple, list] = {}

    def __repr__(self) -> str:
        return f"SharedGraphs({sum(len(v) for v in self._by_signature.values())} graphs)"

    def find(self, gm: torch.fx.GraphModule, scope: Any) -> tuple[Callable, _Compiled] | None:
        """A callable compiled before in ``scope`` for a graph of ``gm``'s structure,
        taking ``gm``'s inputs in ``gm``'s order, and its record (to keep alive while it
        is used)."""
        candidates = [ref() for ref in self._by_signature.get(_signature(gm, scope), ())]
        candidates = [c for c in candidates if c is not None]
        if not candidates:
            return None
        mine = describe(gm)
        if mine is None:
            return None
        for known in candidates:
            theirs = known.structure()
            if theirs is not None and theirs[0] == mine[0]:
                return _reordered(known.fn, mine[1], theirs[1]), known
        return None

    def add(self, gm: torch.fx.GraphModule, fn: Callable, scope: Any) -> _Compiled:
        """Remember ``fn``, compiled for ``gm`` in ``scope``; the caller keeps the returned
        record alive as long as the callable is in use (the table holds it weakly)."""
        record = _Compiled(gm, fn)
        refs = self._by_signature.setdefault(_signature(gm, scope), [])
        refs[:] = [r for r in refs if r() is not None]
        refs.append(weakref.ref(record))
        return record


def _reordered(fn: Callable, mine: tuple, theirs: tuple) -> Callable:
    """``fn`` (taking inputs in the order ``theirs`` numbers them) called with inputs in
    the order ``mine`` numbers them."""
    if mine == theirs:
        return fn
    position = [0] * len(theirs)
    for number, natural in enumerate(theirs):
        position[natural] = mine[number]

    def call(*args):
        return fn(*[args[i] for i in position])

    return call


__all__ = ["NotDescribable", "SharedGraphs", "describe", "lift_attrs", "shareable"]

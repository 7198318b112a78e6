"""Bodies of higher-order operators: fx subgraphs traced inside the frame's trace.

``torch.cond``'s branches, a ``while_loop``'s condition and body, the function a
``torch.func`` transform applies: each is traced like inlined user code, but its ops go
into a graph of its own, which becomes a ``GraphModule`` attribute of the graph it is
called from (``get_attr`` + ``call_function(op, body, ...)``), as in TorchDynamo's
``speculate_subgraph`` (``torch/_dynamo/variables/higher_order_ops.py``).

Contract:

* :meth:`OutputGraph.body <graphjit.graph.output_graph.OutputGraph.body>` opens a
  :class:`BodyScope`: from then on ``OutputGraph.graph`` is the body's graph, and every
  tracker made belongs to the body (``variables.base.enter_scope``: mutating an object made
  outside it, or one that existed before the call, is refused: the body runs any number of
  times).  Scopes nest (a ``cond`` inside a ``vmap``'d function).
* The body's explicit inputs are its first placeholders, in order (:meth:`BodyScope.input`).
* A value from outside the body (a tensor of the frame, a parameter, a symbolic size) used
  by an op in the body is *lifted*: a placeholder of the body, after the explicit ones,
  stands for it, recursively through every enclosing body, once per value
  (:meth:`BodyScope.lift`).  The operator is then called with those outer values after its
  explicit operands (:attr:`BodyScope.lifted`), so a body reads no tensor except through its
  inputs: AOTAutograd sees every parameter a body uses as an input and differentiates
  through it.
* Graph inputs and tensor attributes (``get_attr``) are always made in the frame's graph,
  and lifted into bodies from there.
* :meth:`BodyScope.finish` makes the ``GraphModule``; bodies called from a body are
  attributes of that body's module, the others of the frame's root module.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

from ..exc import InternalError, unsupported
from ..variables.base import enter_scope, exit_scope


class BodyScope:
    """One body being traced: its graph, the enclosing scope, the outer values lifted."""

    def __init__(self, name: str, parent: "BodyScope | None", frame_graph: torch.fx.Graph,
                 side_effects: bool = False, on_write=None) -> None:
        self.name = name
        self.parent = parent
        self.frame_graph = frame_graph
        self.graph = torch.fx.Graph()
        #: outer node -> the placeholder standing for it here, in lifting order
        self.lifted: dict[torch.fx.Node, torch.fx.Node] = {}
        self.inputs: list[torch.fx.Node] = []
        #: bodies called from this one (attributes of this body's module)
        self.root = torch.nn.Module()
        #: placeholder -> its example's version counter when it was made
        self.versions: dict[torch.fx.Node, int] = {}
        self.scope_id = enter_scope(side_effects, on_write)
        self.closed = False
        #: outer trackers the body mutated (when side effects are allowed)
        self.writes: list = []

    def __repr__(self) -> str:
        return f"BodyScope({self.name}: {len(self.inputs)} inputs, {len(self.lifted)} lifted)"

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writes = exit_scope(self.scope_id)

    # -- inputs ---------------------------------------------------------------------------
    def _last_placeholder(self) -> torch.fx.Node | None:
        last = None
        for node in self.graph.nodes:
            if node.op != "placeholder":
                break
            last = node
        return last

    def _placeholder(self, name: str, example: Any) -> torch.fx.Node:
        last = self._last_placeholder()
        if last is None:
            where = self.graph.inserting_before(next(iter(self.graph.nodes), None))
        else:
            where = self.graph.inserting_after(last)
        with where:
            node = self.graph.placeholder(name)
        # fx names a placeholder's argument by its target, not by its (unique) name: one
        # outer value passed as two inputs (``block(x, x)``) would be one argument twice
        node.target = node.name
        node.meta["example_value"] = example
        if isinstance(example, torch.Tensor):
            if example.is_inference():  # (no version counter: an in-place change would go unseen)
                raise unsupported("body operand is an inference tensor", name,
                                  "graphjit sees a body's in-place changes of its operands by their "
                                  "version counters, which inference tensors do not have; the body is "
                                  "traced inline instead where it can be.",
                                  ["Call it outside torch.inference_mode(), or under torch.no_grad()."])
            self.versions[node] = example._version
        return node

    def input(self, name: str, example: Any) -> torch.fx.Node:
        """A new explicit input (made before anything is lifted)."""
        assert not self.lifted, "explicit inputs come first"
        node = self._placeholder(name, example)
        self.inputs.append(node)
        return node

    def lift(self, node: torch.fx.Node) -> torch.fx.Node:
        """``node`` as a value of this body: itself if it is one, else the placeholder
        lifted for it (lifted into the enclosing bodies first)."""
        if node.graph is self.graph:
            return node
        if self.parent is not None:
            outer = self.parent.lift(node)
        elif node.graph is self.frame_graph:
            outer = node
        else:  # a value of a body whose trace is over (a bug: they never escape it)
            raise InternalError(f"{node.name} belongs to a finished body, not to {self.name}'s callers")
        known = self.lifted.get(outer)
        if known is None:
            known = self.lifted[outer] = self._placeholder(f"lifted_{outer.name}", outer.meta.get("example_value"))
        return known

    # -- purity ---------------------------------------------------------------------------
    def mutated_inputs(self) -> list[torch.fx.Node]:
        """The inputs an op of the body changed in place."""
        return [n for n, v in self.versions.items() if n.meta["example_value"]._version != v]

    def aliased_outputs(self, outputs: list) -> str | None:
        """How ``outputs`` alias an input or each other (``None`` if they do not)."""
        inputs = {_storage(n.meta["example_value"]): n.name for n in self.versions}
        seen: dict = {}
        for out in outputs:
            if not isinstance(out, torch.fx.Node) or not isinstance(out.meta.get("example_value"), torch.Tensor):
                continue
            key = _storage(out.meta["example_value"])
            if key in inputs:
                return f"output {out.name} aliases input {inputs[key]}"
            if key in seen:
                return f"outputs {seen[key]} and {out.name} alias each other"
            seen[key] = out.name
        return None

    # -- the module -----------------------------------------------------------------------
    def finish(self, outputs: Any) -> torch.fx.GraphModule:
        """The body's ``GraphModule`` returning ``outputs`` (nodes and constants, lifted)."""
        outputs = torch.fx.node.map_arg(outputs, self.lift)
        self.graph.output(outputs)
        gm = torch.fx.GraphModule(self.root, self.graph, class_name=self.name)
        gm.graph.lint()
        return gm


def inline_calls(gm: torch.fx.GraphModule, is_call: Callable[[torch.fx.Node], bool]) -> torch.fx.GraphModule:
    """``gm`` with each node ``is_call`` accepts (a higher-order operator's call of the body
    ``node.args[0]``, a ``get_attr``, on the operands ``node.args[2:]``, its result read
    item by item) replaced by the body's nodes: a new module over the same attributes,
    with calls of such bodies inside the bodies inlined too; ``gm`` itself when it has
    none, or when a call's result is used other than item by item."""
    calls = [n for n in gm.graph.nodes if is_call(n)]
    if not calls or any(user.target is not operator.getitem for n in calls for user in n.users):
        return gm
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, Any] = {}
    for node in gm.graph.nodes:
        if is_call(node):
            operands = [env[a] if isinstance(a, torch.fx.Node) else a for a in node.args[2:]]
            target = node.args[0].target
            env[node] = _copy_body(graph, target, _attr(gm, target), operands)
        elif node.target is operator.getitem and node.args[0] in env and is_call(node.args[0]):
            env[node] = env[node.args[0]][node.args[1]]
        else:
            env[node] = graph.node_copy(node, env.__getitem__)
    for node in reversed(graph.nodes):  # (the bodies' get_attr nodes, now unused)
        if node.op == "get_attr" and not node.users and isinstance(_attr(gm, node.target), torch.nn.Module):
            graph.erase_node(node)
    inlined = torch.fx.GraphModule(gm, graph)
    inlined.meta = gm.meta
    return inline_calls(inlined, is_call)  # (calls that were inside the bodies)


def _attr(gm: torch.fx.GraphModule, target: str) -> Any:
    return functools.reduce(getattr, target.split("."), gm)


def _copy_body(graph: torch.fx.Graph, name: str, body: torch.fx.GraphModule, operands: list) -> tuple:
    """The body's nodes copied into ``graph`` on ``operands``; its outputs."""
    env: dict[torch.fx.Node, Any] = {}
    placeholders = iter(operands)
    for node in body.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(placeholders)
        elif node.op == "output":
            return tuple(torch.fx.node.map_arg(node.args[0], env.__getitem__))
        else:
            env[node] = copied = graph.node_copy(node, env.__getitem__)
            if node.op in ("get_attr", "call_module"):  # (an attribute of the body, reached through it)
                copied.target = f"{name}.{node.target}"
    raise AssertionError(f"body {name} without an output")


def _storage(tensor: torch.Tensor):
    return StorageWeakRef(tensor.untyped_storage())

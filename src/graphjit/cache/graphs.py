"""FX graph modules as data, and back.

Contract: :func:`graph_record` turns a ``GraphModule`` into a :class:`GraphRecord`, plain
data for :mod:`portable`: each node's op, name, target (a function, an operator, a
method name, a ``graphjit_runtime`` target such as a ``TransformCall`` object, written by
content), arguments (other nodes by name) and the node metadata a backend reads
(activation-checkpointing tags); the module tensors the graph takes after its arguments
(``CompiledGraph.lifted``); and the module's attributes: a higher-order operator's
body (a ``GraphModule`` attribute) as a nested record, any other object as itself (the
pickler writes parameters and modules as the references the entry binds through their
sources, and tensors without a source, the graph's constants, by content).
:func:`build_graph_module` makes the module again; node names are kept, so the code of
the rebuilt module is the original's (inductor's and AOTAutograd's caches hash it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.fx

from ..graph.shared_graphs import KEPT_META
from .portable import NotCacheable


@dataclasses.dataclass(frozen=True)
class NodeRef:
    """An argument that is another node of the same graph."""

    __graphjit_portable__ = True  # (written by content into the persistent cache)

    name: str


@dataclasses.dataclass
class GraphRecord:
    """One graph module as data (see the module docstring)."""

    __graphjit_portable__ = True  # (written by content into the persistent cache)

    class_name: str
    nodes: list[tuple]
    attrs: list[tuple[str, str, Any]]  # (name, "module" | "parameter" | "buffer" | "body" | "attr", value)
    meta: dict
    lifted: tuple = ()  # the module tensors passed after the graph's arguments


def graph_record(gm: torch.fx.GraphModule, lifted: tuple = ()) -> GraphRecord:
    if type(gm.graph._codegen) is not torch.fx.graph.CodeGen:
        raise NotCacheable(f"a graph with {type(gm.graph._codegen).__name__} code generation")
    nodes = []
    for node in gm.graph.nodes:
        meta = {k: node.meta[k] for k in KEPT_META if k in node.meta}
        args = torch.fx.node.map_arg(node.args, lambda n: NodeRef(n.name))
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: NodeRef(n.name))
        nodes.append((node.op, node.name, node.target, args, kwargs, meta))
    attrs: list[tuple[str, str, Any]] = []
    for name, child in gm.named_children():
        if isinstance(child, torch.fx.GraphModule):
            attrs.append((name, "body", graph_record(child)))
        else:
            attrs.append((name, "module", child))
    attrs += [(name, "parameter", p) for name, p in gm._parameters.items()]
    attrs += [(name, "buffer", b) for name, b in gm._buffers.items()]
    known = {name for name, _, _ in attrs}
    for node in gm.graph.nodes:  # plain attributes a get_attr reads (a torch.Generator the graph holds)
        top = node.target.split(".", 1)[0] if node.op == "get_attr" else None
        if top is not None and top not in known and top in gm.__dict__:
            attrs.append((top, "attr", gm.__dict__[top]))
            known.add(top)
    meta = {k: v for k, v in gm.meta.items() if k == "graphjit_name"}
    return GraphRecord(type(gm).__name__, nodes, attrs, meta, tuple(lifted))


def _resolve(value: Any, env: dict[str, torch.fx.Node]) -> Any:
    return torch.fx.node.map_aggregate(value, lambda a: env[a.name] if isinstance(a, NodeRef) else a)


def build_graph_module(record: GraphRecord) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    for op, name, target, args, kwargs, meta in record.nodes:
        node = graph.create_node(op, target, _resolve(args, env), _resolve(kwargs, env), name=name)
        if node.name != name:
            raise NotCacheable(f"node {name} came back as {node.name}")
        node.meta.update(meta)
        env[name] = node
    root = torch.nn.Module()
    bodies = {}
    for name, kind, value in record.attrs:
        if kind == "body":  # (a stand-in while the outer module is made: its code is generated once)
            bodies[name] = build_graph_module(value)
            root.add_module(name, torch.nn.Module())
        elif kind == "module":
            root.add_module(name, value)
        elif kind == "parameter":
            root.register_parameter(name, value)
        elif kind == "buffer":
            root.register_buffer(name, value)
        else:
            setattr(root, name, value)
    gm = torch.fx.GraphModule(root, graph, class_name=record.class_name)
    for name, body in bodies.items():
        gm._modules[name] = body
    gm.meta.update(record.meta)
    return gm


__all__ = ["GraphRecord", "graph_record", "build_graph_module"]

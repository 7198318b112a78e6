"""``torch.Generator`` objects in traced code.

Contract: a generator that existed before the call and is passed to a random op
(``torch.randn(..., generator=g)``) is an attribute of the graph (a ``get_attr`` node,
the generator guarded by identity), so the op draws from it when the graph runs, in
program order, and leaves it in eager's state; the trace itself draws nothing (fake
tensors do not advance a generator).  AOTAutograd keeps such an object as a constant of
its graph.  Another generator object recompiles (up to the recompile limit; the graph
cannot take one as an input).  TorchDynamo breaks on every generator argument.

The generator's own methods (``manual_seed``, ``get_state``, ``set_state``, ``seed``,
``initial_seed``) read or change its state in Python: each is a graph break, so it runs
between the graphs, in order.  ``g.device`` is a constant.  A generator made in the trace
(``torch.Generator()``) is a break where it is made.
"""

from __future__ import annotations

import torch

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, LocalSource
from .base import AttributeMutationExisting, VariableTracker, register_builder
from .constant import ConstantVariable
from .functions import OpaqueCallableVariable


class TorchGeneratorVariable(VariableTracker):
    """A pre-existing ``torch.Generator``; ``node`` is its ``get_attr`` in the graph, or
    ``None`` for one a resume function holds in a local (see :func:`_fresh_per_call`)."""

    def __init__(self, value: torch.Generator, node, **kwargs) -> None:
        super().__init__(mutation_type=AttributeMutationExisting(), **kwargs)
        self.value, self.node = value, node

    def _repr_body(self) -> str:
        return f"torch.Generator on {self.value.device}"

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "device":
            return ConstantVariable(self.value.device)
        attr = getattr(self.value, name, None)
        if callable(attr):  # a break where it is called (its result depends on the state)
            return OpaqueCallableVariable(attr, "torch.Generator method", source=AttrSource(self.source, name))
        raise unsupported("torch.Generator attribute", f"Generator.{name}")

    def graph_node(self):
        """The generator as an argument of a graph op."""
        if self.node is None:
            raise unsupported("torch.Generator held by a local across a graph break", self._repr_body(),
                              "It may be a new object on every call (made before the break), and a "
                              "graph holds one generator object (another recompiles); the op runs in "
                              "Python.")
        return self.node

    def reconstruct(self, cg) -> None:
        cg.extend(self.source.reconstruct())


def _fresh_per_call(tx, source) -> bool:
    """A local of a resume function: typically made by the code before the break on every
    call (``g = torch.Generator().manual_seed(s)``), so not baked into the graph."""
    if not isinstance(source, LocalSource):
        return False
    root = tx
    while getattr(root, "parent", None) is not None:
        root = root.parent
    return root.code.co_name.startswith("__resume_at_")


@register_builder(torch.Generator)
def _build_generator(tx, value, source):
    if source is None:
        raise unsupported("torch.Generator made in the compiled region", repr(value))
    if _fresh_per_call(tx, source):
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
        return TorchGeneratorVariable(value, None, source=source)
    tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    node = tx.output.graph.get_attr(tx.output.add_attr(value, "generator"))
    node.meta["example_value"] = value  # what the fake run takes: it draws nothing
    return TorchGeneratorVariable(value, node, source=source)


__all__ = ["TorchGeneratorVariable"]

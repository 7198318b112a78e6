"""``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False, ...)`` in traced
code: ``fn(*args, **kwargs)`` is inlined into the graph, and every op it records is
tagged for recomputation (``node.meta["recompute"] = PREFER_RECOMPUTE`` and one
``ac_graph_id`` per call), as torch's own activation-checkpoint tagging does.

What each backend makes of it:

* AOTAutograd (``aot_eager``, ``inductor``) copies the tags onto the aten ops it traces
  and its partitioner recomputes the tagged region in the backward pass instead of
  saving its activations: the memory saving checkpoint is for.
* ``eager`` runs the graph's ops as they are: outputs and gradients are eager's, but
  activations are kept (nothing is recomputed).

Random ops inside the region draw once, in the forward, as in eager (checkpoint replays
the RNG state when it recomputes).  The reentrant variant (``use_reentrant=True``, the
default when it is not given) detaches its inputs and runs under an autograd.Function,
and ``context_fn`` (selective checkpointing) changes which ops are saved: both are graph
breaks (the call runs in Python, with its callees compiled).  A graph break inside
``fn`` breaks at the checkpoint call, which then runs in Python as well.
"""

from __future__ import annotations

import torch
import torch.utils.checkpoint as _checkpoint

from ..exc import unsupported
from ..guards.guard import GuardKind
from .base import VariableTracker, register_builder_by_id

#: options that only steer the recomputation itself (nothing the graph computes)
_IGNORED = ("preserve_rng_state", "determinism_check", "debug", "early_stop")


class CheckpointVariable(VariableTracker):
    """``torch.utils.checkpoint.checkpoint`` itself."""

    def __init__(self, value, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return "torch.utils.checkpoint.checkpoint"

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        kwargs = dict(kwargs)
        reentrant = kwargs.pop("use_reentrant", None)
        if reentrant is None or not reentrant.is_python_constant() or reentrant.as_python_constant() is not False:
            raise unsupported(
                "reentrant activation checkpoint", "torch.utils.checkpoint.checkpoint without use_reentrant=False",
                "The reentrant variant (the default) detaches its inputs inside an autograd.Function; "
                "the call runs in Python.", ["Pass use_reentrant=False (what torch recommends)."])
        context_fn = kwargs.pop("context_fn", None)
        if context_fn is not None and not (context_fn.is_python_constant()
                                           and context_fn.as_python_constant() is _checkpoint.noop_context_fn):
            raise unsupported("selective activation checkpoint", "torch.utils.checkpoint.checkpoint(context_fn=...)",
                              "A context_fn decides per op what is saved; the call runs in Python.")
        for name in _IGNORED:
            kwargs.pop(name, None)
        if not args:
            raise unsupported("torch.utils.checkpoint.checkpoint without a function", "checkpoint()")
        graph = tx.output.graph
        before = set(graph.nodes)
        tx.output.checkpointing += 1  # (its ops are tagged here: not in a reused block's body)
        try:
            result = args[0].call_function(tx, list(args[1:]), kwargs)
        finally:
            tx.output.checkpointing -= 1
        tag = tx.output.next_checkpoint_id()
        for node in graph.nodes:
            if node not in before and node.op in ("call_function", "call_method", "call_module"):
                node.meta["recompute"] = _checkpoint.CheckpointPolicy.PREFER_RECOMPUTE
                node.meta["ac_graph_id"] = tag
        return result


@register_builder_by_id(torch.utils.checkpoint.checkpoint)
def _build_checkpoint(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return CheckpointVariable(value, source=source)

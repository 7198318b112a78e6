"""Distributed training: collectives as graph nodes, DDP and FSDP2 policies.

The layer is a table and two policies, not special cases spread through the tracer:

* ``process_group`` — process groups and reduce ops as trace-time constants (identity-
  guarded groups; ``rank()``/``size()``/``group_name`` folded).
* ``collectives`` — the table mapping c10d's in-place collectives onto the functional
  collectives (a functional op + ``wait_tensor`` + ``copy_`` into the written tensor), and
  the calls that stay out of the graph (each a graph break with its reason).
* ``ddp`` — ``DistributedDataParallel``'s forward runs in Python with its calls
  intercepted (its reducer bookkeeping as it is), so the wrapped module is compiled; a
  graph compiled while a DDP forward is active is split at DDP's gradient buckets
  (``buckets``), one backend call per bucket.
* ``fsdp`` — FSDP2's hooks (all-gather, reshard) are called as they are, around the
  compiled ``forward`` of each sharded module.

Importing this package registers all of it (the trackers' builders, the trace rules) when
``torch.distributed`` is available; ``graph_compiler`` is what ``build_entry`` asks for the
backend of each graph it compiles.
"""

from __future__ import annotations

from typing import Callable

import torch.distributed as _dist

#: torch was built with ``torch.distributed`` (without it, nothing here applies)
AVAILABLE = _dist.is_available()

if AVAILABLE:
    from . import collectives, fsdp, process_group  # noqa: F401  (register builders and rules)
    from .ddp import graph_compiler
else:
    def graph_compiler(compiler_fn: Callable) -> Callable:
        """The backend for a graph compiled now (no DDP without ``torch.distributed``)."""
        return compiler_fn

__all__ = ["AVAILABLE", "graph_compiler"]

"""DistributedDataParallel: its forward runs in Python, the module it wraps is compiled,
and graphs compiled inside its forward are split at its gradient buckets.

Contract.

* ``DistributedDataParallel.forward`` and ``_run_ddp_forward`` run in Python with their
  calls intercepted (trace rules): ``_pre_forward``/``_post_forward`` (the reducer's
  bookkeeping, ``no_sync``, ``find_unused_parameters``, ``static_graph``, buffer
  broadcast) run as they are, and ``self.module(...)`` is compiled (its ``forward`` as a
  generic module entry, shared by every instance of its class).  Traced code that calls a
  DDP module breaks there with that reason, and the call runs the same way.  So
  ``graphjit.compile(DDP(model))`` and ``DDP(graphjit.compile(model))`` compile the same
  ``forward`` (torch.compile skips DDP's frame the same way).  Under ``fullgraph=True``
  that break is an error: ``DDP(graphjit.compile(model, fullgraph=True))`` is the form.
* A graph compiled while a DDP forward is active (``DDP._get_active_ddp_module()``, which
  ``_inside_ddp_forward`` sets around the wrapped module's call) is compiled by
  :func:`graph_compiler`'s backend: split at the gradient buckets (``buckets.py``) with
  DDP's ``bucket_bytes_cap`` and a first bucket of at most
  ``dist._DEFAULT_FIRST_BUCKET_BYTES`` (torch.compile's ``DDPOptimizer`` caps), unless
  ``graphjit.config.optimize_ddp`` is off.  The split graph serves later calls too, inside
  DDP or not (the entry is the same).
"""

from __future__ import annotations

from typing import Callable

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .. import config
from ..trace_rules import Rule, register_library_rule
from .buckets import split_compiler

register_library_rule(
    DistributedDataParallel.forward.__code__, Rule.SKIP_FRAME,
    "DistributedDataParallel's forward runs in Python (its reducer bookkeeping); the module it wraps is "
    "compiled (under fullgraph=True, compile that module: DDP(graphjit.compile(model, fullgraph=True)))")
register_library_rule(
    DistributedDataParallel._run_ddp_forward.__code__, Rule.INTERCEPT,
    "DistributedDataParallel calls the module it wraps from here: that call is compiled")


def active_ddp_module() -> DistributedDataParallel | None:
    """The DDP module whose forward is running (innermost), if any."""
    return DistributedDataParallel._get_active_ddp_module()


def first_bucket_cap(ddp: DistributedDataParallel) -> int:
    """The first bucket's cap (torch.compile's: the reducer's small default first bucket,
    never above the others' cap)."""
    return min(dist._DEFAULT_FIRST_BUCKET_BYTES, ddp.bucket_bytes_cap)


def graph_compiler(compiler_fn: Callable) -> Callable:
    """The backend for a graph compiled now: ``compiler_fn``, split at the gradient buckets
    of the active DDP module (see the module docstring)."""
    ddp = active_ddp_module()
    if ddp is None or not config.optimize_ddp:
        return compiler_fn
    return split_compiler(compiler_fn, ddp.bucket_bytes_cap, first_bucket_cap(ddp))


__all__ = ["active_ddp_module", "first_bucket_cap", "graph_compiler"]

"""Process-wide settings, read by the dispatcher and translator (options passed in where
possible; these are the few that are global by nature, like torch._dynamo.config)."""

from __future__ import annotations

import os


def _cache_dir_from_env() -> str | None:
    value = os.environ.get("GRAPHJIT_CACHE_DIR")
    if value is None:
        return os.path.join("~", ".cache", "graphjit")
    return value or None

#: After this many cache entries for one code object, run it eagerly with one warning.
recompile_limit: int = 8

#: Check each handler's stack effect against ``dis.stack_effect`` (on in tests).
debug_checks: bool = False

#: On an internal graphjit error, log it and run the frame eagerly instead of raising.
suppress_errors: bool = False

#: The two settings below are read when a frame is traced: entries compiled before a
#: change keep what they captured (``graphjit.reset()`` retraces everything).
#:
#: Data-dependent output shapes (``nonzero``, boolean-mask indexing, ``unique``...) are
#: traced with unbacked symbolic sizes instead of graph-breaking (torch.compile's
#: ``capture_dynamic_output_shape_ops``; off by default, as there; on under ``fullgraph``).
capture_dynamic_output_shape_ops: bool = False

#: ``Tensor.item()`` is traced as an unbacked symbolic number instead of graph-breaking
#: (torch.compile's ``capture_scalar_outputs``; off by default, as there; on under
#: ``fullgraph``, as there: ``graph/shapes.py``).
capture_scalar_outputs: bool = False

#: A module called inside ``DistributedDataParallel``'s forward is compiled as graphs split
#: at DDP's gradient buckets (one backend call per bucket), so a bucket's all-reduce starts
#: while the backward of the earlier layers runs (torch.compile's ``optimize_ddp``; on by
#: default, as there).  Read when a graph is compiled.
optimize_ddp: bool = True

#: Guards over fixed objects (module trees, globals, classes, configs) skip the checks
#: that only those objects' state decides while a snapshot of a few machine words (dict
#: version tags, type and ``__dict__`` pointers: ``guards/footprint.py``) is unchanged.
#: Read when a guard is built; off: every check runs on every call.
guard_snapshots: bool = True

#: The guards of repeated blocks (``reuse_repeated_blocks``) are checked through one
#: function per kind of block, called once per block (``guards/blocks.py``), instead of
#: every block's checks written out.  Read when a guard is built.
guard_block_functions: bool = True

#: Where compiled entries are kept across processes (``graphjit.cache``): from
#: ``GRAPHJIT_CACHE_DIR``, default ``~/.cache/graphjit``; ``None`` (or the variable set
#: empty) turns the cache off.  ``graphjit.cache.clear()`` empties it.
cache_dir: str | None = _cache_dir_from_env()

#: Cache directories the user shares on purpose (a team's, a job's ranks' on a shared
#: file system): their permissions and owner are not checked (entries are still
#: authenticated with the key).  From ``GRAPHJIT_CACHE_TRUSTED`` (``os.pathsep``-separated).
cache_trusted: tuple[str, ...] = tuple(p for p in os.environ.get("GRAPHJIT_CACHE_TRUSTED", "").split(os.pathsep) if p)

#: The secret key the cache's entries are authenticated with (``graphjit/cache/trust.py``):
#: from ``GRAPHJIT_CACHE_KEY_FILE``; ``None``: ``~/.config/graphjit/cache-key``, made on
#: first use.  Share a key file on purpose to share a cache.
cache_key_file: str | None = os.environ.get("GRAPHJIT_CACHE_KEY_FILE") or None

#: A module called many times on identical structure (the blocks of a ``ModuleList``) is
#: traced once, as a subgraph called through ``invoke_subgraph`` for every block whose
#: guards re-evaluate the same (``variables/hops/repeated_blocks.py``).
reuse_repeated_blocks: bool = True

#: ``torch.nn`` modules without children (``Linear``, ``Conv2d``, ``LayerNorm``...) have
#: their ``forward`` traced inline, as any module's, so the graph calls the functional op
#: on the parameters (``torch.conv2d(x, weight, bias, ...)``) and a call of the graph runs
#: no module code (torch.compile's ``inline_inbuilt_nn_modules``).  Off, or for an RNN, or
#: where the inline trace fails, the module is one graph node that runs its ``forward``
#: (``variables/nn_module.py``).  Read when a frame is traced.
inline_nn_leaves: bool = True

#: Logging functions a traced call of which does nothing (torch.compile's
#: ``torch._dynamo.config.ignore_logging_functions``): ``logging.Logger.warning`` drops
#: ``log.warning(...)`` from the traced code, so it no longer breaks the graph (its message
#: is not emitted).  Empty by default: a logging call is a graph break, as in torch.compile.
#: Read when a frame is traced.
ignore_logging_functions: set = set()

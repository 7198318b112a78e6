"""Process-wide settings, read by the dispatcher and translator (options passed in where
possible; these are the few that are global by nature, like torch._dynamo.config)."""

from __future__ import annotations

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
#: ``capture_dynamic_output_shape_ops``; off by default, as there).
capture_dynamic_output_shape_ops: bool = False

#: ``Tensor.item()`` is traced as an unbacked symbolic number instead of graph-breaking
#: (torch.compile's ``capture_scalar_outputs``; off by default, as there).
capture_scalar_outputs: bool = False

#: A module called many times on identical structure (the blocks of a ``ModuleList``) is
#: traced once, as a subgraph called through ``invoke_subgraph`` for every block whose
#: guards re-evaluate the same (``variables/hops/repeated_blocks.py``).
reuse_repeated_blocks: bool = True

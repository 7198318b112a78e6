"""FSDP2 (``fully_shard``): its hooks run in Python around each sharded module's compiled
``forward``.

Contract.  ``fully_shard`` registers a forward pre-hook (all-gather the module's
parameters: the module then holds plain unsharded ``nn.Parameter``\\ s) and a forward hook
(reshard: the sharded ``DTensor`` parameters again, unless ``reshard_after_forward=False``)
on each sharded module, and marks them (and its other hooks) with its ``_dynamo_disable``
wrapper.  Traced code that reaches one breaks there (trace rule), so the module call runs
in Python: ``Module._call_impl`` calls the hooks as they are and the module's ``forward``
compiled (a generic entry, shared by identical blocks), on the unsharded parameters.  No
``DTensor`` is a graph input: the graphs only ever see what the pre-hook gathered.
``MixedPrecisionPolicy`` casts (inputs in the pre-hook, parameters when gathered) happen
in the hooks, and the graphs are guarded on the dtypes they see.
"""

from __future__ import annotations

from torch.distributed.fsdp._fully_shard import _fsdp_common

from ..trace_rules import Rule, register_library_rule

# every function FSDP2 decorates with ``_dynamo_disable`` (the pre- and post-forward hooks,
# the backward ones) shares its wrapper's code.  (Importing FSDP2 costs nothing extra:
# torch._dynamo, which graphjit imports, imports it.)
register_library_rule(
    _fsdp_common._dynamo_disable(lambda: None).__code__, Rule.DISABLE,
    "FSDP2's hooks run in Python (all-gather before a sharded module's forward, reshard after)")

__all__: list[str] = []

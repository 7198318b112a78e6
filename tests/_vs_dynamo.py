"""torch.compile's graph and break counts for the same program, measured in the test that
pins them (not a test module itself).

``dynamo_counts(fn, *args)`` compiles ``fn`` with ``torch.compile`` and a counting backend
after ``torch._dynamo.reset()``, calls it ``calls`` times on copies of the arguments and
returns ``(graphs, breaks)``.  ``torch.compile`` patches torch the first time it runs
(``TorchPatcher``: among others ``Distribution.set_default_validate_args(False)``); the
default is put back as it was, so eager code elsewhere sees torch's own default.
"""

from __future__ import annotations

import copy

import torch
import torch._dynamo
from torch._dynamo.utils import counters


def dynamo_counts(fn, *args, calls: int = 1, fullgraph: bool = False) -> tuple[int, int]:
    validate = torch.distributions.Distribution._validate_args
    torch._dynamo.reset()
    counters.clear()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    try:
        compiled = torch.compile(fn, backend=backend, fullgraph=fullgraph)
        for _ in range(calls):
            compiled(*copy.deepcopy(args))
        breaks = sum(counters["graph_break"].values())
    finally:
        torch._dynamo.reset()
        torch.distributions.Distribution.set_default_validate_args(validate)
    return len(graphs), breaks

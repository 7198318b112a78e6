"""Calls with wrong arguments (issue 31): graphjit and torch.compile on the same set.

    python benchmarks/bad_calls_vs_dynamo.py [--system graphjit|torch.compile|both]
                                             [--backend eager|aot_eager] [--list]

Every call ``tests/_bad_calls.py`` generates (a builtin, a builtin type's method, a tensor
method or a torch function given no argument, six, a wrong type or an unexpected keyword,
inside ``try: ... except Exception as e: return type(e).__name__, str(e)``) is compiled
on its own with and without ``fullgraph`` and compared with eager.  One markdown row per
system and mode, counting how each call compared (``_bad_calls.Outcome``):

* ``internal``: the compiler's own error (graphjit's ``InternalError``, TorchDynamo's
  ``InternalTorchDynamoError``);
* ``escaped``: another exception left the compiled call where eager's ``except`` handled
  one (TorchDynamo's ``TorchRuntimeError`` wrapping a fake-tensor failure, an assertion
  inside TorchDynamo);
* ``break``: a graph break under ``fullgraph=True``;
* ``type``: the user's ``except`` saw another exception type (or none where eager raises);
* ``message``: the same type with another message;
* ``other``: another result or receiver.

``--list`` prints every call that is not ``same``.  About 40 s for graphjit and 3 min for
torch.compile with ``eager`` on 2 cores.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import torch  # noqa: E402

import graphjit  # noqa: E402
import _bad_calls as bad  # noqa: E402

KINDS = ("same", "internal", "escaped", "break", "type", "message", "other")


def _graphjit(fn, backend, fullgraph):
    graphjit.reset()
    return graphjit.compile(fn, backend=backend, fullgraph=fullgraph), \
        (graphjit.InternalError,), (graphjit.Unsupported,)


def _dynamo(fn, backend, fullgraph):
    import torch._dynamo

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, fullgraph=fullgraph), \
        (torch._dynamo.exc.InternalTorchDynamoError,), (torch._dynamo.exc.Unsupported,)


def run(system: str, backend: str, fullgraph: bool, listing: bool) -> collections.Counter:
    make = _graphjit if system == "graphjit" else _dynamo
    counts: collections.Counter = collections.Counter()
    for index, call in enumerate(bad.calls()):
        fn = bad.make_function(call, index)
        compiled, internal, breaks = make(fn, backend, fullgraph)
        outcome = bad.compare(call, fn, compiled, internal, breaks)
        counts[outcome.kind] += 1
        if listing and outcome.kind != "same":
            detail = outcome.detail.replace("\n", " ")[:240]
            print(f"  {system} fullgraph={fullgraph}: {outcome.kind}: {call.label}: {detail}", file=sys.stderr)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=("graphjit", "torch.compile", "both"), default="both")
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--list", action="store_true", help="print every call that differs")
    opts = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    graphjit.config.debug_checks = True
    graphjit.config.cache_dir = None
    systems = ("graphjit", "torch.compile") if opts.system == "both" else (opts.system,)
    print(f"{len(bad.calls())} calls, backend {opts.backend}, torch {torch.__version__}\n")
    print("| system | fullgraph | " + " | ".join(KINDS) + " | time |")
    print("|---|---|" + "---:|" * (len(KINDS) + 1))
    for system in systems:
        for fullgraph in (False, True):
            start = time.perf_counter()
            counts = run(system, opts.backend, fullgraph, opts.list)
            cells = " | ".join(str(counts[k]) for k in KINDS)
            print(f"| {system} | {fullgraph} | {cells} | {time.perf_counter() - start:.0f} s |", flush=True)


if __name__ == "__main__":
    main()

"""graphjit: a Python-level JIT for PyTorch that captures FX graphs from CPython 3.11
bytecode (like TorchDynamo), guards them, and caches them per function."""

import sys as _sys

if _sys.version_info[:2] != (3, 11):  # one Python version, asserted once (STYLE.md 13)
    raise ImportError(f"graphjit supports CPython 3.11 only, not {_sys.version.split()[0]}")

from . import _compat  # noqa: E402,F401  (first: a torch outside the supported range is refused here)
from . import config  # noqa: E402
from . import variables as _variables  # noqa: E402,F401  (installs VariableTracker.build)
from . import distributed as _distributed  # noqa: E402,F401  (collectives, DDP, FSDP2: trackers and rules)
from .api import CompiledModule, compile, list_backends, register_backend, reset, stats  # noqa: E402
from .diagnostics.explain import ExplainOutput, explain  # noqa: E402
from .diagnostics.logs import set_logs  # noqa: E402
from .exc import BackendCompilerFailed, InternalError, Unsupported  # noqa: E402
from .graph.shapes import mark_dynamic, mark_static, mark_unbacked, maybe_mark_dynamic  # noqa: E402
from .trace_rules import allow_in_graph, disable, is_compiling, skip  # noqa: E402
from . import report  # noqa: E402  (``graphjit.report.write``; GRAPHJIT_REPORT=DIR records the run)

report.install_from_env()

__all__ = [
    "compile", "reset", "stats", "explain", "ExplainOutput", "list_backends", "register_backend", "set_logs",
    "Unsupported", "InternalError", "BackendCompilerFailed", "CompiledModule", "config", "allow_in_graph", "disable", "skip",
    "is_compiling", "mark_dynamic", "mark_static", "mark_unbacked", "maybe_mark_dynamic", "report",
]
__version__ = "0.1.0"

from .cache import prefetch as _prefetch_cache_key  # noqa: E402

_prefetch_cache_key()  # (graphjit's sources' digest, hashed beside the program's start)

"""Running one recorded op on fake values: the metadata of its result, or what its
failure means.

Contract (:func:`run_fake`):

* The op runs under the trace's ``FakeTensorMode`` with the Python dispatcher enabled, as
  TorchDynamo runs it (``torch._dynamo.utils.get_fake_value``): ops whose C++ kernels
  take concrete sizes (``expand`` inside ``addcmul``'s meta, ``constant_pad_nd``, the
  FFTs) then dispatch to their symbolic-size decompositions instead of failing on a
  ``SymInt`` ("SymIntArrayRef expected to contain only concrete integers").
* FakeTensor's own log of a failing meta kernel (a full traceback at ERROR level) is
  dropped while graphjit runs an op: what the failure means is decided here and
  reported as a graph break reason or as the program's own exception, never as a
  traceback on the user's stderr.
* Failures that are limits of tracing (a data-dependent output, an op with no fake
  kernel) are graph breaks with their reason.
* Any other failure is the program's own error (a shape mismatch: eager raises it), an
  :class:`~graphjit.exc.ObservedException` holding eager's exception (:func:`eager_error`:
  the op run again on real stand-ins of its tensors, as torch's C++ kernels check), unless the op's inputs hold symbolic sizes
  or numbers.  Then the op runs again on *static* fakes of its inputs (their sizes the
  ones this call has): if that fails too, the error is the program's; if it succeeds,
  the symbolic kernel was what failed, and the op is traced *specialized*: every symbol
  its inputs hold is guarded equal to its value in this call (``s0 == 5``: the entry
  holds for these sizes), and the static run's result is the op's.  An op that mutates
  its input (``x.resize_(...)``, ``out=``) is not specialized that way (the static copy
  would take the mutation): that is a graph break naming the op and the kernel's error.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from typing import Any

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, guard_bool, guard_float, guard_int
from torch.utils._pytree import tree_flatten, tree_map

from ..exc import ObservedException, unsupported

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


class _QuietFakeErrors(logging.Filter):
    """Drops FakeTensor's ERROR records (``log.exception`` of a failing meta kernel) while
    graphjit runs an op on fake values in this thread."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def __repr__(self) -> str:
        return f"_QuietFakeErrors(active={getattr(self.local, 'depth', 0)})"

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(self.local, "depth", 0) and record.levelno >= logging.ERROR)

    @contextlib.contextmanager
    def active(self):
        self.local.depth = getattr(self.local, "depth", 0) + 1
        try:
            yield
        finally:
            self.local.depth -= 1


_QUIET = _QuietFakeErrors()
logging.getLogger("torch._subclasses.fake_tensor").addFilter(_QUIET)


def target_name(op: str, target: Any) -> str:
    """How a recorded op is named in messages (``Tensor.add``, ``torch.addcmul``)."""
    if isinstance(target, str):
        return f"Tensor.{target}" if op == "call_method" else target
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    if name.startswith("_VariableFunctionsClass."):  # ``torch.equal``'s C class, as users write it
        name = name.split(".", 1)[1]
    return f"{mod}.{name}" if mod and mod != "builtins" else name


def run_fake(out, op: str, target: Any, args: tuple, kwargs: dict, specialize: bool = True) -> Any:
    """``op``/``target`` on fake ``args`` under ``out``'s fake mode (an ``OutputGraph``):
    the fake result (see the module docstring).  ``specialize=False``: a failure with
    symbolic inputs is the program's error too (a higher-order operator, whose bodies were
    traced on symbolic values)."""
    try:
        return _call(out, op, target, args, kwargs)
    except (DynamicOutputShapeException, DataDependentOutputException, GuardOnDataDependentSymNode,
            torch._subclasses.fake_tensor.UnsupportedFakeTensorException, NotImplementedError) as e:
        raise _tracing_limit(op, target, e) from None
    except Exception as e:  # noqa: BLE001 (classified below)
        error = e
    if specialize and _holds_symbols(args, kwargs):
        return _run_specialized(out, op, target, args, kwargs, error)
    raise ObservedException(eager_error(op, target, args, kwargs, error).with_traceback(None)) from None


def _call(out, op: str, target: Any, args: tuple, kwargs: dict) -> Any:
    with _QUIET.active(), out.fake_mode, enable_python_dispatcher(), \
            torch.set_grad_enabled(out.grad_enabled), out.inference_ctx():
        if op == "call_function":
            return target(*args, **kwargs)
        if op == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        if op == "call_module":
            return out.fake_module(target)(*args, **kwargs)
    raise AssertionError(op)


# -- eager's exception for an op that fails -------------------------------------------------

#: a failing op is run again on zero-filled CPU tensors while its CPU tensors hold at most
#: this many bytes in all, else on meta tensors
STAND_IN_BYTES = 1 << 20
#: ... else on zero-stride CPU tensors (one element each, the C++ kernels' checks) while
#: no tensor has more elements than this, unless what they raise is about their strides
EXPANDED_ELEMENTS = 1 << 24
_EXPANDED_ARTIFACTS = ("stride", "memory location", "contiguous", "expanded")
#: what a run on stand-ins may report as eager's exception (not ``NotImplementedError``:
#: a stand-in's own limit, a kernel missing for meta)
_EAGER_ERROR_TYPES = (RuntimeError, TypeError, IndexError, ValueError)
#: modules whose functions are torch's own ops (a custom op's kernel is never run again)
_TORCH_MODULES = ("torch", "torch.functional", "torch.nn.functional", "torch._C._nn",
                  "torch._C._linalg", "torch._C._fft", "torch._C._special", "_operator")


def eager_error(op: str, target: Any, args: tuple, kwargs: dict, error: Exception) -> Exception:
    """The exception eager raises for an op whose fake run raised ``error``.

    Under the Python dispatcher a fake run takes torch's Python references and meta
    registrations, whose checks are not always the C++ kernel's (``permute`` with too many
    dims: ``IndexError`` where eager raises ``RuntimeError``; ``clamp()`` with no bound:
    ``ValueError``).  The op is run once more, outside the fake mode, on real stand-ins of
    its tensors (no gradient, the RNG state kept), and what that run raises is eager's
    exception: zero-filled CPU tensors of the same sizes, strides and dtype when every
    tensor is a small CPU tensor; else zero-stride CPU tensors of the same sizes and dtype
    (one element each: the C++ kernels check sizes before they read a value), unless what
    those raise is about their strides; else meta tensors.  ``error`` stands when the op is
    not one of torch's own, its inputs hold symbolic sizes, or the stand-ins run without
    error."""
    if not _is_torch_op(op, target):
        return error
    flat = tree_flatten((args, kwargs))[0]
    tensors = [v for v in flat if isinstance(v, torch.Tensor)]
    if any(isinstance(v, _SYM_TYPES) for v in flat) or \
            any(t.layout != torch.strided or _symbols_of(t) for t in tensors):
        return error
    if sum(t.numel() * t.element_size() for t in tensors) <= STAND_IN_BYTES and \
            all(t.device.type == "cpu" for t in tensors):
        return _stand_in_error(op, target, args, kwargs, _zeros_like) or error
    if all(t.numel() <= EXPANDED_ELEMENTS for t in tensors):
        found = _stand_in_error(op, target, args, kwargs, _expanded_like)
        if found is not None and not any(w in str(found) for w in _EXPANDED_ARTIFACTS):
            return found
    found = _stand_in_error(op, target, args, kwargs, _meta_like)
    return found if found is not None and "meta" not in str(found) else error


def _stand_in_error(op: str, target: Any, args: tuple, kwargs: dict, stand_in) -> Exception | None:
    """What ``op`` raises on ``stand_in(t)`` for each tensor ``t`` (``None``: it ran)."""
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stand_args, stand_kwargs = tree_map(
                lambda v: stand_in(v) if isinstance(v, torch.Tensor) else v, (args, kwargs))
            if op == "call_function":
                target(*stand_args, **stand_kwargs)
            else:  # through the type, as ``t.name(...)`` calls it (``TensorBase.dim()`` in messages)
                getattr(type(stand_args[0]), target)(*stand_args, **stand_kwargs)
    except _EAGER_ERROR_TYPES as e:
        return e
    except Exception:  # noqa: BLE001 (the stand-ins' own failure: no word on the program's)
        return None
    return None


def _zeros_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu").zero_()


def _meta_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def _expanded_like(t: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), dtype=t.dtype).expand(t.shape)


def _is_torch_op(op: str, target: Any) -> bool:
    if op == "call_method":
        return isinstance(target, str)
    if op != "call_function":
        return False
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace in ("aten", "prims")
    if isinstance(target, torch._ops.OpOverloadPacket):  # (a packet has no ``namespace``)
        return target._qualified_op_name.split("::")[0] in ("aten", "prims")
    return getattr(target, "__module__", None) in _TORCH_MODULES


def _tracing_limit(op: str, target: Any, e: Exception):
    """The graph break for a failure that is a limit of tracing, not the program's error."""
    name = target_name(op, target)
    if isinstance(e, DynamicOutputShapeException):
        return unsupported(
            "data-dependent operator", f"{name}: {type(e).__name__}",
            "The shape of this operator's output depends on tensor values.",
            ["Set graphjit.config.capture_dynamic_output_shape_ops = True to trace it with "
             "an unbacked symbolic size, avoid value-dependent shapes in the compiled "
             "region, or accept the graph break."])
    if isinstance(e, DataDependentOutputException):
        return unsupported(
            "data-dependent operator", f"{name}: {type(e).__name__}",
            "The output of this operator is a Python value read from tensor data.",
            ["Keep values as tensors inside the compiled region, or accept the graph break."])
    if isinstance(e, GuardOnDataDependentSymNode):
        return unsupported(
            "data-dependent guard",
            f"{name} decides on an unbacked size or value: {str(e).splitlines()[0]}",
            "The operator needs a decision on a size or value known only when the graph runs.",
            ["Use torch._check() on the value before this operator to tell the tracer what "
             "holds, or accept the graph break."])
    if isinstance(e, NotImplementedError):
        return unsupported("operator not supported on fake tensors", f"{name}: {type(e).__name__}: {e}")
    return unsupported("operator not supported on fake tensors", f"{name}: {e}")


def _holds_symbols(args: tuple, kwargs: dict) -> bool:
    """Whether a fake tensor among the arguments has a symbolic size, stride or offset, or
    an argument is a symbolic number."""
    for value in tree_flatten((args, kwargs))[0]:
        if isinstance(value, _SYM_TYPES):
            if not value.node.expr.is_number:
                return True
        elif isinstance(value, torch.Tensor) and _symbols_of(value):
            return True
    return False


def _symbols_of(t: torch.Tensor) -> list:
    """The symbolic sizes, strides and storage offset of a fake tensor."""
    parts = [*t.shape, *(t.stride() if t.layout == torch.strided else ()),
             t.storage_offset() if t.layout == torch.strided else 0]
    return [p for p in parts if isinstance(p, torch.SymInt) and not p.node.expr.is_number]


def _hint(value):
    """The value a symbolic number has in this call (``None``: unbacked, none)."""
    hint = value.node.hint
    if hint is None:
        return None
    return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(value)](hint)


def _static(out, value):
    """``value`` with this call's sizes: a static fake of a fake tensor (same dtype,
    device, strides and ``requires_grad``), the hint of a symbolic number."""
    if isinstance(value, _SYM_TYPES):
        hint = _hint(value)
        if hint is None:
            raise _NoHint
        return hint
    if isinstance(value, torch.Tensor) and _symbols_of(value):
        if value.layout != torch.strided or any(_hint(s) is None for s in _symbols_of(value)):
            raise _NoHint
        sizes = [_hint(s) if isinstance(s, torch.SymInt) else s for s in value.shape]
        strides = [_hint(s) if isinstance(s, torch.SymInt) else s for s in value.stride()]
        with out.fake_mode, torch.set_grad_enabled(False):
            static = torch.empty_strided(sizes, strides, dtype=value.dtype, device=value.device)
        return static.requires_grad_(value.requires_grad) if value.requires_grad else static
    return value


class _NoHint(Exception):
    """A symbolic input has no value in this call (an unbacked size)."""


def _mutates(op: str, target: Any, kwargs: dict) -> bool:
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return "out" in kwargs or name.endswith("_") and not name.endswith("__") or op == "call_module"


def _run_specialized(out, op: str, target: Any, args: tuple, kwargs: dict, error: Exception) -> Any:
    """The op on static fakes of its symbolic inputs, after its symbolic run failed with
    ``error`` (see the module docstring)."""
    name = target_name(op, target)
    reason = f"{name}: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    try:
        static_args, static_kwargs = tree_map(lambda v: _static(out, v), (args, kwargs))
    except _NoHint:
        raise unsupported("operator failed on symbolic sizes", reason,
                          "Its fake kernel failed on sizes known only when the graph runs.") from None
    try:
        result = _call(out, op, target, static_args, static_kwargs)
    except Exception as e:  # noqa: BLE001 (with this call's sizes it fails too: the program's error)
        raise ObservedException(eager_error(op, target, static_args, static_kwargs, e)
                                .with_traceback(None)) from None
    if _mutates(op, target, kwargs):
        raise unsupported(
            "operator failed on symbolic sizes", reason,
            "Its fake kernel cannot run on symbolic sizes, and it mutates its input, so it is "
            "not traced with this call's sizes instead: it runs in Python.",
            ["Mark the dimensions static (graphjit.mark_static) or compile with dynamic=False."])
    for value in tree_flatten((args, kwargs))[0]:  # the entry holds for these sizes only
        if isinstance(value, torch.Tensor):
            for s in _symbols_of(value):
                guard_int(s)
        elif isinstance(value, torch.SymInt):
            guard_int(value)
        elif isinstance(value, torch.SymFloat):
            guard_float(value)
        elif isinstance(value, torch.SymBool):
            guard_bool(value)
    return result

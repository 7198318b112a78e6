"""Dynamic shapes: which sizes and numbers a trace keeps symbolic, and the guards that
make such an entry exact.

Policy (``graphjit.compile(dynamic=...)``, as torch.compile's):

* ``dynamic=False``: every size and every ``int``/``float`` argument is a constant of
  the entry (a new value recompiles); ``mark_dynamic`` dimensions are still symbolic.
* ``dynamic=True``: every dimension of a tensor input and every ``int``/``float``
  argument of the frame is symbolic from the first trace.
* ``dynamic=None`` (automatic): a trace records, per code object (resume functions and
  nested functions have their own), the sizes of each tensor input and the value of each
  number argument it saw.  When a later trace of the same code sees another size in a
  dimension (the first entry missed on it), that dimension is symbolic from then on; a
  number argument seen with two values is symbolic from then on.  One recompile, then
  one entry for all sizes.  As TorchDynamo's frame state (``pgo.py``,
  ``FrameStateSizeEntry``): a tensor seen with another number of dimensions, or where a
  number was seen before, has every dimension symbolic from then on (whatever its rank);
  a number where a tensor was seen before is symbolic.
* ``mark_dynamic(t, d)`` / ``mark_static(t, d)`` / ``mark_unbacked(t, d)`` (also
  torch's ``torch._dynamo`` marks) override the policy for one tensor's dimension.
* Numbers: what holds for a number argument holds for every ``int``/``float`` the
  trace reads through a source rooted at a local of the frame (an item of a tuple, list,
  dict or ``torch.Size`` argument, an attribute of an object argument, a closure's
  content), except those read from an ``nn.Module`` or from function defaults (static,
  as torch.compile's ``is_int_specialization_case``).  A value that was a tensor in an
  earlier call counts as changed.
* An ``nn.Parameter`` passed as an argument keeps static sizes unless marked.

Sizes 0 and 1 are specialized by the ``ShapeEnv`` (as torch.compile's): a symbolic
dimension's entry requires a size of at least 2.  Parameters and buffers of modules are
not inputs (``get_attr``) and stay static.

The guards that make such an entry exact come from the ShapeEnv (``guards/shapes.py``).

The same per-code record decides whether the modules a trace reaches through the
frame's locals are *specialized* (guarded by identity; their parameters are graph
attributes) or *generic* (guarded by type and by the attributes read; parameters and
buffers are graph inputs, so one entry serves every instance of the class, as
torch.compile's inlined modules do).  Specialized is the default: the cheapest guards for
the one model a user compiles.  A code object switches to generic when a module local is
seen holding a second instance of its class (the layers of a model calling one
``forward``), or from the start when it is marked so (:meth:`CodeShapes.make_modules_generic`:
a module's ``forward`` called from Python for many instances, resume functions of a
generic trace, and the call shared by a second ``graphjit.compile`` of a module's class:
``runtime/module_calls.py``).  A module passed to a plain function (a parameter other than
a method's ``self``) is generic from the first trace, as torch.compile's: any instance may
come next.
"""

from __future__ import annotations

import math
import types
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    RelaxedUnspecConstraint,
    ShapeEnv,
    StatelessSymbolicContext,
)

from .. import config
from ..guards.shapes import ShapeSource
from ..sources import LocalSource, Source

#: a number argument seen with more than one value; one a backend needs specialized
_VARIES = object()
_PINNED = object()
#: the key of a code object's module mode in its record (present: generic)
_GENERIC_MODULES = "generic modules"

#: code objects whose first parameter is the object they were compiled for (graphjit's
#: own frame that calls a compiled module), registered by the runtime
RECEIVER_CODES: set = set()


def _plain_argument(code: types.CodeType | None, name: str) -> bool:
    """Whether the local ``name`` is a parameter of a plain function (not the receiver of
    a method, ``self``/``cls``, nor of graphjit's own call frame, nor a resume function's
    carried value): a module passed there is generic from the first trace, as
    torch.compile's, since any instance may come next."""
    if code is None or code in RECEIVER_CODES or code.co_name.startswith("__resume"):
        return False
    params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    parts = code.co_qualname.split(".")
    method = len(parts) >= 2 and parts[-2] != "<locals>"  # (a function defined in a class)
    return name in params and name not in ("self", "cls") and not (method and name == params[0])


class ShapePolicy:
    """A session's ``dynamic=`` setting and, per code object, the sizes and numbers its
    traces saw (see the module docstring)."""

    def __init__(self, dynamic: bool | None, floats_as_tensors: bool = False) -> None:
        if dynamic not in (None, True, False):
            raise TypeError(f"dynamic must be None, True or False, not {dynamic!r}")
        self.dynamic = dynamic
        #: whether a symbolic float argument is passed to the graph as a 0-d float64
        #: tensor, read by ``item()`` in the graph (inductor's C++ code cannot take a
        #: SymFloat input; AOTAutograd turns the float arithmetic into tensor ops)
        self.floats_as_tensors = floats_as_tensors
        self._seen: dict[types.CodeType, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"ShapePolicy(dynamic={self.dynamic}, {len(self._seen)} code objects)"

    def for_code(self, code: types.CodeType) -> "CodeShapes":
        return CodeShapes(self, self._seen.setdefault(code, {}), code)


class CodeShapes:
    """The policy as it applies to one code object's traces."""

    def __init__(self, policy: ShapePolicy, seen: dict[str, Any], code: types.CodeType | None = None) -> None:
        self.policy, self.seen, self.code = policy, seen, code

    def __repr__(self) -> str:
        return f"CodeShapes(dynamic={self.policy.dynamic}, {len(self.seen)} values seen)"

    def dynamic_dims(self, tensor: torch.Tensor, source: Source) -> list[DimDynamic]:
        """For each dimension of ``tensor`` (read through ``source``): ``STATIC``,
        ``DYNAMIC`` or ``UNBACKED`` (``mark_unbacked``).  Records the sizes seen
        (automatic mode).  An ``nn.Parameter`` passed in keeps static sizes unless marked
        (torch.compile's ``force_parameter_static_shapes``)."""
        sizes = tuple(tensor.shape)
        dynamic = self.policy.dynamic
        if isinstance(tensor, torch.nn.Parameter):
            out = [False] * len(sizes)
        elif dynamic is True:
            out = [True] * len(sizes)
        else:
            out = [False] * len(sizes)
            key = "tensor " + source.display()
            before = self.seen.get(key)
            if before is None and "number " + source.display() not in self.seen:
                self.seen[key] = sizes
            elif before is None or before is _VARIES or len(before) != len(sizes):
                # was a number, or had another number of dimensions: every dimension
                # varies from now on (TorchDynamo's frame state merges such a size to
                # "auto dynamic" as a whole)
                self.seen[key] = _VARIES
                if dynamic is None:
                    out = [True] * len(sizes)
            else:
                merged = tuple(b if b == s else None for b, s in zip(before, sizes))
                self.seen[key] = merged
                if dynamic is None:
                    out = [m is None for m in merged]
        marked = marked_dims(tensor) | set(getattr(tensor, "_dynamo_weak_dynamic_indices", ())) | \
            set(getattr(tensor, "_graphjit_weak_dynamic_dims", ()))
        static = set(getattr(tensor, "_dynamo_static_indices", ())) | \
            set(getattr(tensor, "_graphjit_static_dims", ()))
        unbacked = unbacked_dims(tensor)
        return [DimDynamic.UNBACKED if i in unbacked else
                DimDynamic.DYNAMIC if (d or i in marked) and i not in static else DimDynamic.STATIC
                for i, d in enumerate(out)]

    # -- modules --------------------------------------------------------------------------
    @property
    def modules_generic(self) -> bool:
        """Whether modules reached through the frame's locals are generic in this trace."""
        return _GENERIC_MODULES in self.seen

    def make_modules_generic(self) -> None:
        self.seen[_GENERIC_MODULES] = True

    def module_is_generic(self, module: torch.nn.Module, source: Source) -> bool:
        """Whether ``module``, read through ``source``, is generic in this trace.  A
        module held directly by a local is recorded: another instance of the same class
        there later makes the code generic (the trace seeing it is the first generic one)."""
        root = source.root()
        if not isinstance(root, LocalSource):
            return False
        if not self.modules_generic and source is root and _plain_argument(self.code, root.local_name):
            self.make_modules_generic()  # (a function of a module, as torch.compile: any instance)
        if not self.modules_generic and source is root:
            key = "module " + root.local_name
            before = self.seen.get(key)
            if before is None:
                self.seen[key] = (type(module), id(module))
            elif before[0] is type(module) and before[1] != id(module):
                self.make_modules_generic()
        return self.modules_generic

    def pin(self, source: Source) -> None:
        """The number read through ``source`` stays a constant from now on."""
        self.seen["number " + source.display()] = _PINNED

    def number_is_dynamic(self, value: int | float, source: Source) -> bool:
        """Whether a number read through ``source`` (rooted at a local of the frame: an
        argument, an item of a tuple or list argument, an attribute of an object argument,
        a closure's content) is symbolic in this trace.  Records it: automatic mode makes
        it symbolic once it has been seen with two values, or where a tensor was seen
        before (the value changed kind), as TorchDynamo's frame state does.  The caller
        excludes numbers read from modules and from function defaults (static, as
        torch.compile keeps them)."""
        if not isinstance(source.root(), LocalSource):
            return False
        key = "number " + source.display()
        if type(value) is float and not math.isfinite(value):  # NaN, inf: always constants
            self.seen[key] = _VARIES if key in self.seen else (float, value)
            return False
        before = self.seen.get(key)
        if before is _PINNED:
            return False
        dynamic = self.policy.dynamic
        if dynamic is not None:
            return dynamic
        if before is _VARIES:
            return True
        if before is None:
            if "tensor " + source.display() in self.seen:  # was a tensor: it changed
                self.seen[key] = _VARIES
                return True
            self.seen[key] = (type(value), value)
            return False
        if before == (type(value), value):
            return False
        self.seen[key] = _VARIES
        return True


def captures_scalar_outputs(fullgraph: bool) -> bool:
    """Whether ``.item()`` (and ``int(t)``/``float(t)``) is traced as an unbacked symbolic
    number: with ``config.capture_scalar_outputs``, and always under ``fullgraph`` (as
    torch.compile's ``OutputGraph``: ``allow_scalar_outputs=one_graph or
    config.capture_scalar_outputs``; there is no graph break to fall back on)."""
    return fullgraph or config.capture_scalar_outputs


def captures_dynamic_output_shapes(fullgraph: bool) -> bool:
    """Whether data-dependent output shapes (``nonzero``...) get unbacked sizes: with
    ``config.capture_dynamic_output_shape_ops``, and always under ``fullgraph`` (as
    torch.compile)."""
    return fullgraph or config.capture_dynamic_output_shape_ops


def new_shape_env(fullgraph: bool = False) -> ShapeEnv:
    """The ShapeEnv of one trace.  ``.item()`` and data-dependent output shapes are graph
    breaks unless ``config.capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops``
    (or ``fullgraph``) make them unbacked symbols (as torch.compile's settings of those
    names)."""
    return ShapeEnv(allow_scalar_outputs=captures_scalar_outputs(fullgraph),
                    allow_dynamic_output_shape_ops=captures_dynamic_output_shapes(fullgraph))


def unbacked_dims(tensor: torch.Tensor) -> set[int]:
    """The dimensions ``mark_unbacked`` (graphjit's or torch's) marked on ``tensor``."""
    return set(getattr(tensor, "_dynamo_unbacked_indices", ())) | \
        set(getattr(tensor, "_graphjit_unbacked_dims", ()))


def marked_dims(tensor: torch.Tensor) -> set[int]:
    """The dimensions ``mark_dynamic`` (graphjit's or torch's) marked on ``tensor``."""
    return set(getattr(tensor, "_dynamo_dynamic_indices", ())) | \
        set(getattr(tensor, "_graphjit_dynamic_dims", ()))


def symbolic_context(dims: list[DimDynamic], marked: set[int] = frozenset()) -> StatelessSymbolicContext:
    """Which dimensions are symbolic; a ``mark_dynamic`` one carries a constraint, so
    ``produce_guards`` raises ``ConstraintViolationError`` if the trace specialized it (as
    torch.compile does)."""
    return StatelessSymbolicContext(
        dynamic_sizes=list(dims),
        constraint_sizes=[RelaxedUnspecConstraint(warn_only=False)
                          if d is DimDynamic.DYNAMIC and i in marked else None
                          for i, d in enumerate(dims)])


def symbolic_number(shape_env: ShapeEnv, value: int | float, source: Source):
    """A SymInt/SymFloat standing for the number argument read through ``source``."""
    shape_source = ShapeSource(source)
    symbol = shape_env.create_unspecified_symbol(value, source=shape_source,
                                                 dynamic_dim=DimDynamic.DYNAMIC)
    if type(value) is int:
        return shape_env.create_symintnode(symbol, hint=value, source=shape_source)
    return shape_env.create_symfloatnode(symbol, hint=value, source=shape_source)


def mark_dynamic(t: torch.Tensor, dim: int | list[int]) -> None:
    """Make dimension ``dim`` of ``t`` symbolic in every trace that reads ``t`` (whatever
    ``dynamic=`` says; a size of 0 or 1 is still specialized).  A trace that ties it to a
    constant raises ``ConstraintViolationError`` (as torch.compile does); see
    :func:`maybe_mark_dynamic`."""
    _mark(t, dim, "_graphjit_dynamic_dims")


def maybe_mark_dynamic(t: torch.Tensor, dim: int | list[int]) -> None:
    """Like :func:`mark_dynamic`, but a trace that specializes the dimension is no error
    (the entry then holds for that size only)."""
    _mark(t, dim, "_graphjit_weak_dynamic_dims")


def mark_unbacked(t: torch.Tensor, dim: int | list[int]) -> None:
    """Make dimension ``dim`` of ``t`` an *unbacked* symbolic size in every trace that
    reads ``t`` (as ``torch._dynamo.mark_unbacked``): no size is specialized, 0 and 1
    included, and the entry's guard checks nothing about it; a branch or any other
    decision on it in traced code is a graph break (state what holds with
    ``torch._check``)."""
    _mark(t, dim, "_graphjit_unbacked_dims")


def mark_static(t: torch.Tensor, dim: int | list[int]) -> None:
    """Keep dimension ``dim`` of ``t`` static (a new size recompiles), also with
    ``dynamic=True`` or after it has changed."""
    _mark(t, dim, "_graphjit_static_dims")


def _mark(t: torch.Tensor, dim, attr: str) -> None:
    dims = [dim] if isinstance(dim, int) else list(dim)
    marks = set(getattr(t, attr, ()))
    for d in dims:
        if not -t.dim() <= d < t.dim():
            raise IndexError(f"dimension {d} out of range for a tensor of {t.dim()} dimensions")
        marks.add(d % t.dim())
    setattr(t, attr, marks)

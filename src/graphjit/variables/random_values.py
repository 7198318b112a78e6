"""``random`` in traced code: values drawn when the compiled code runs, never at trace time.

TorchDynamo replays the RNG state it saw while tracing, so every call of the compiled
function returns the same "random" numbers.  graphjit instead records each call of a
``random.Random`` method (the module-level functions are methods of the hidden
``random._inst``) as a *prologue step*: the generated code makes the calls, in program
order, on the live generator, before it calls the graph.  The values are therefore
eager's on every call and the generator is left in eager's state.

* :class:`PrologueValueVariable` is the result of a step: a Python value known only at
  run time.  Arithmetic on it with constants or other prologue values is another step
  (``operator.mul(r, 2)``), evaluated in Python as eager would.  Where it meets a tensor
  it becomes a graph input: a 0-d tensor made from the value, of the dtype the tensor op
  gives a Python scalar of that type (:func:`scalar_input_dtype`), so a new value never
  recompiles.  Anything that needs the value itself while tracing (a branch, ``range``,
  an index into a list) is a graph break, after which the value is the real one.
* :class:`RandomObjectVariable` is a generator of exactly ``random.Random`` (the hidden
  one, one passed in, or one made in the trace: ``random.Random(seed)`` is a step too, so
  seeding it with a value drawn before works).  Subclasses are opaque (their overrides
  could have effects the prologue would move).
* Arguments of a step must be trace-time constants or prologue values: the prologue runs
  before the side effects of the trace are replayed, so a container the trace mutated is
  passed as the snapshot the trace saw.  ``shuffle`` (an in-place permutation) and draws
  from sequences of non-constants are graph breaks.
"""

from __future__ import annotations

import functools
import operator
import random
from typing import Any

import torch

from ..bytecode.instruction import create_call, create_instruction
from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import ConstSource, Source
from .base import MethodVariable, VariableTracker, register_builder, register_builder_by_id
from .constant import ConstantVariable
from .tensor import TensorVariable
from ..diagnostics.describe import describe

#: ``random.Random`` methods recorded as steps, with the Python type of their result
#: (``None``: not known before the call)
_METHOD_TYPES: dict[str, Any] = {
    "random": float, "uniform": float, "triangular": float, "gauss": float,
    "normalvariate": float, "lognormvariate": float, "expovariate": float,
    "vonmisesvariate": float, "gammavariate": float, "betavariate": float,
    "paretovariate": float, "weibullvariate": float, "binomialvariate": int,
    "randint": int, "randrange": int, "getrandbits": int,
    "choice": None, "choices": list, "sample": list,
    "seed": type(None), "getstate": tuple, "setstate": type(None), "randbytes": bytes,
}
#: methods that return None: the step is made, the result is the constant None
_RETURNS_NONE = {"seed", "setstate"}


def _call(fn, args, kwargs):
    """What a prologue step runs: ``fn(*args, **kwargs)``."""
    return fn(*args, **kwargs)


_call.__module__ = "graphjit_runtime"


class PrologueStep:
    """One call the generated code makes before the graph; its result is stored in the
    local ``name``."""

    __slots__ = ("fn", "args", "kwargs", "name", "var")

    def __init__(self, fn: VariableTracker, args: list, kwargs: dict, name: str) -> None:
        self.fn, self.args, self.kwargs, self.name = fn, args, kwargs, name
        self.var: VariableTracker | None = None

    def __repr__(self) -> str:
        return f"PrologueStep({self.name} = {self.fn!r}(*{self.args!r}, **{self.kwargs!r}))"


class Prologue:
    """The steps of one trace, in program order (owned by the ``OutputGraph``)."""

    def __init__(self) -> None:
        self.steps: list[PrologueStep] = []

    def __repr__(self) -> str:
        return f"Prologue({len(self.steps)} steps)"

    def __bool__(self) -> bool:
        return bool(self.steps)

    def add(self, fn: VariableTracker, args: list, kwargs: dict) -> PrologueStep:
        for a in [*args, *kwargs.values()]:
            _check_step_argument(a)
        step = PrologueStep(fn, list(args), dict(kwargs), f"___prologue_{len(self.steps)}")
        self.steps.append(step)
        return step

    def codegen(self, cg) -> None:
        """``___prologue_i = fn(*args, **kwargs)`` for each step, in order."""
        for step in self.steps:
            cg.push_null()
            cg.load_const(_call)
            cg.reconstruct(step.fn)
            for a in step.args:
                cg.reconstruct(a)
            cg.build(tuple, len(step.args))
            for k, v in step.kwargs.items():
                cg.load_const(k)
                cg.reconstruct(v)
            cg.build(dict, len(step.kwargs))
            cg.call(3)
            cg.new_varnames.append(step.name)
            cg.store_fast(step.name)
            if step.var is not None:
                cg.set_temp(step.var, step.name)


def _check_step_argument(var: VariableTracker) -> None:
    if isinstance(var, (PrologueValueVariable, RandomObjectVariable)) or var.is_python_constant():
        return
    raise unsupported("random call with an argument that is not a constant", describe(var),
                      "Arguments of random calls are evaluated before the graph runs; pass "
                      "constants (or values drawn from random).")


def _step_arg(tx, var: VariableTracker) -> VariableTracker:
    """A step argument: prologue values as they are, anything else as its constant value
    (a snapshot: a list the trace mutates later is passed as it is now)."""
    if isinstance(var, (PrologueValueVariable, RandomObjectVariable)):
        return var
    _check_step_argument(var)
    return ConstantVariable(var.as_python_constant())


class PrologueValueVariable(VariableTracker):
    """A value computed by a prologue step (a random draw, or arithmetic on one)."""

    def __init__(self, step: PrologueStep, ptype: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.step, self.ptype = step, ptype
        step.var = self

    def _repr_body(self) -> str:
        kind = self.ptype.__name__ if self.ptype is not None else "?"
        return f"{self.step.name}: {kind}, drawn at run time"

    def python_type(self) -> type:
        if self.ptype is None:
            raise _needs_value(self, "its type")
        return self.ptype

    def is_python_constant(self) -> bool:
        return False

    def as_python_constant(self):
        raise _needs_value(self, "its value")

    def truthiness(self, tx) -> bool:
        raise _needs_value(self, "its truth value (a branch on it)")

    def unpack(self, tx) -> list[VariableTracker]:
        raise _needs_value(self, "its items")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise _needs_value(self, f"attribute {name!r}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        raise _needs_value(self, f"method {name!r}")

    def identity(self):
        return self

    def reconstruct(self, cg) -> None:
        cg.load_fast(self.step.name)


def _needs_value(var: PrologueValueVariable, what: str):
    return unsupported("value drawn from random at run time", f"{what} of {describe(var)}",
                       "The value is drawn when the compiled code runs, so tracing cannot "
                       "depend on it; the graph breaks here and Python uses the real value.")


def derived_value(tx, fn, args: list) -> PrologueValueVariable:
    """``fn(*args)`` on prologue values and constants (operators, ``int()``, ``float()``,
    ``abs``, ``round``): another step, typed by applying ``fn`` to sample values."""
    samples = []
    for a in args:
        if isinstance(a, PrologueValueVariable):
            if a.ptype not in (int, float, bool):
                raise _needs_value(a, f"{getattr(fn, '__name__', fn)}()")
            samples.append(a.ptype(3))
        else:
            samples.append(a.as_python_constant())
    try:
        ptype = type(fn(*samples))
    except Exception:
        ptype = None
    if fn is operator.pow and ptype is int:
        ptype = None  # int ** negative int is a float: not known before the value
    step = tx.output.prologue.add(ConstantVariable(fn), [_step_arg(tx, a) for a in args], {})
    return PrologueValueVariable(step, ptype if ptype in (int, float, bool, str, tuple) else None)


_WIDEST = {"float": torch.float64, "int": torch.int64, "complex": torch.complex128, "bool": torch.bool}


def _category(dtype: torch.dtype) -> str:
    if dtype is torch.bool:
        return "bool"
    if dtype.is_complex:
        return "complex"
    return "float" if dtype.is_floating_point else "int"


def scalar_input_dtype(tensor_example: torch.Tensor, ptype: type) -> torch.dtype:
    """The dtype a 0-d tensor standing for a Python ``ptype`` scalar must have so that an
    op with ``tensor_example`` promotes as it does with the scalar and sees its full value:
    the widest dtype of the result's category when the tensor is of that category already
    (a 0-d operand then does not promote it; CPU kernels read it at its own precision, as
    they read a Python scalar), else the result's dtype itself."""
    result = torch.result_type(tensor_example, ptype(1))
    if tensor_example.dim() > 0 and _category(tensor_example.dtype) == _category(result):
        return _WIDEST[_category(result)]
    return result


def lift_to_graph(tx, var: PrologueValueVariable, tensor_example: torch.Tensor) -> TensorVariable:
    """``var`` as a graph input next to a tensor operand (see the module docstring)."""
    if var.ptype not in (int, float, bool):
        raise _needs_value(var, "use in a tensor operation")
    dtype = scalar_input_dtype(tensor_example, var.ptype)
    return tx.output.add_prologue_input(var, dtype, PrologueTensorSource(var.step.name, dtype))


class PrologueTensorSource(Source):
    """A 0-d tensor made from a prologue value: ``torch.scalar_tensor(v, dtype=...)``.
    Read only by the generated code after the prologue (never by guards)."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: torch.dtype) -> None:
        self.name, self.dtype = name, dtype

    def __eq__(self, other) -> bool:
        return type(other) is PrologueTensorSource and (other.name, other.dtype) == (self.name, self.dtype)

    def __hash__(self) -> int:
        return hash((self.name, self.dtype))

    def display(self) -> str:
        return f"{self.name}_as_{str(self.dtype).replace('torch.', '')}"

    def render(self, scope) -> str:
        raise AssertionError("prologue values are not guarded")

    def reconstruct(self) -> list:
        return [create_instruction("PUSH_NULL"),
                create_instruction("LOAD_CONST", argval=functools.partial(torch.scalar_tensor, dtype=self.dtype)),
                create_instruction("LOAD_FAST", argval=self.name),
                *create_call(1)]


class RandomObjectVariable(VariableTracker):
    """A ``random.Random`` instance: its draws are prologue steps.  ``value`` is the real
    generator when it existed before the call, ``None`` for one made in the trace (whose
    prologue step made it: ``step``)."""

    def __init__(self, value: random.Random | None, step: PrologueStep | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value, self.step = value, step
        if step is not None:
            step.var = self

    def _repr_body(self) -> str:
        if self.value is random._inst:
            return "the random module's generator"
        return "new, made in the prologue" if self.value is None else f"at {id(self.value):#x}"

    def python_type(self) -> type:
        return random.Random

    def identity(self):
        return self.value if self.value is not None else self

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _METHOD_TYPES or name == "shuffle":
            return MethodVariable(self, name)
        raise unsupported("random.Random attribute", f"Random.{name}")

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(random.Random, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "shuffle":
            raise unsupported("random.shuffle", "shuffle() permutes a list in place",
                              "The permutation is drawn at run time; the call runs in Python.")
        if name not in _METHOD_TYPES:
            raise unsupported("random.Random method", f"Random.{name}")
        ptype = _METHOD_TYPES[name]
        if name == "choice" and args and not isinstance(args[0], PrologueValueVariable):
            items = args[0].as_python_constant() if args[0].is_python_constant() else None
            if items is None:
                raise unsupported("random.choice over non-constants", describe(args[0]),
                                  "The item is picked at run time; the call runs in Python.")
            kinds = {type(i) for i in items}
            ptype = kinds.pop() if len(kinds) == 1 else None
        step = tx.output.prologue.add(MethodVariable(self, name), [_step_arg(tx, a) for a in args],
                                      {k: _step_arg(tx, v) for k, v in kwargs.items()})
        if name in _RETURNS_NONE:
            return ConstantVariable(None)
        return PrologueValueVariable(step, ptype)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
        else:
            cg.load_fast(self.step.name)


class RandomClassVariable(VariableTracker):
    """The class ``random.Random``: calling it makes a generator in the prologue."""

    def _repr_body(self) -> str:
        return "random.Random"

    def python_type(self) -> type:
        return type

    def as_python_constant(self):
        return random.Random

    def identity(self):
        return random.Random

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        step = tx.output.prologue.add(ConstantVariable(random.Random), [_step_arg(tx, a) for a in args],
                                      {k: _step_arg(tx, v) for k, v in kwargs.items()})
        return RandomObjectVariable(None, step)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return VariableTracker.build(tx, getattr(random.Random, name))

    def reconstruct(self, cg) -> None:
        cg.load_const(random.Random)


_GLOBAL_RNG_SOURCE = ConstSource(random._inst, "random._inst")


@register_builder(random.Random, exact=True)
def _build_random_object(tx, value: random.Random, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, random.Random)
    if value is random._inst:
        source = _GLOBAL_RNG_SOURCE
    return RandomObjectVariable(value, source=source)


_MODULE_FUNCTIONS = [getattr(random, name) for name in [*_METHOD_TYPES, "shuffle"]
                     if getattr(getattr(random, name, None), "__self__", None) is random._inst]


@register_builder_by_id(*_MODULE_FUNCTIONS)
def _build_module_function(tx, value, source):
    """``random.random`` and the other module-level functions: methods of ``random._inst``."""
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return MethodVariable(RandomObjectVariable(random._inst, source=_GLOBAL_RNG_SOURCE), value.__name__,
                          source=source)


@register_builder_by_id(random.Random)
def _build_random_class(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return RandomClassVariable(source=source)

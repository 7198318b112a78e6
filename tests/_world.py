"""Comparing two runs' worlds by structure and identity (not a test module itself).

``copy.copy``/``copy.deepcopy`` tests need more than ``==``: the copy must have the
original's state, the original must be left as eager leaves it, and the *identity
structure* must be eager's: which objects are shared between the copy and the original,
shared inside the copy, or cycles.  :func:`assert_same_world` walks the values of two runs
in parallel (the eager run's and the compiled run's, each on its own fresh arguments) and
keeps a one-to-one map between their objects: an object met twice in one run must be met
at the same places in the other.

:func:`run_both` calls a function eagerly and compiled on fresh arguments from a factory
and compares outcome (return value or exception type and message), stdout and the
arguments afterwards, all as one world.
"""

from __future__ import annotations

import contextlib
import io
import types
from typing import Any, Callable

import torch

#: compared by value only (no identity: interning and small-int caching differ by path)
_VALUES = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), range, torch.dtype,
           torch.device, torch.Size)
#: compared by identity: the same object in both runs (classes, functions, modules)
_SHARED = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, types.MethodType)


class WorldMismatch(AssertionError):
    pass


class _Walk:
    def __init__(self) -> None:
        self.pairs: dict[int, Any] = {}  # id(expected) -> actual
        self.back: dict[int, Any] = {}   # id(actual) -> expected
        self.keep: list = []

    def same(self, a: Any, e: Any, path: str) -> None:
        if (isinstance(e, _VALUES) and not isinstance(e, tuple)) or _constant_tuple(e):
            if type(a) is not type(e) or not (a == e or (a != a and e != e)):
                raise WorldMismatch(f"{path}: {a!r} != {e!r}")
            return
        if isinstance(e, _SHARED):
            if a is not e:
                raise WorldMismatch(f"{path}: {a!r} is not {e!r}")
            return
        if type(a) is not type(e):
            raise WorldMismatch(f"{path}: type {type(a).__qualname__} != {type(e).__qualname__}")
        known = self.pairs.get(id(e))
        if known is not None:
            if known is not a:
                raise WorldMismatch(f"{path}: eager meets an object again here, compiled another object")
            return
        if id(a) in self.back:
            raise WorldMismatch(f"{path}: compiled meets an object again here, eager another object")
        self.pairs[id(e)] = a
        self.back[id(a)] = e
        self.keep += [a, e]
        self._contents(a, e, path)

    def _contents(self, a: Any, e: Any, path: str) -> None:
        if isinstance(e, torch.Tensor):
            if e.shape != a.shape or e.dtype != a.dtype or e.requires_grad != a.requires_grad:
                raise WorldMismatch(f"{path}: tensor {tuple(a.shape)} {a.dtype} != {tuple(e.shape)} {e.dtype}")
            if not torch.equal(a.detach(), e.detach()):
                raise WorldMismatch(f"{path}: tensor values differ")
            return
        if isinstance(e, BaseException):
            self.same(a.args, e.args, f"{path}.args")
        if isinstance(e, (list, tuple)):
            if len(a) != len(e):
                raise WorldMismatch(f"{path}: length {len(a)} != {len(e)}")
            for i, (x, y) in enumerate(zip(a, e)):
                self.same(x, y, f"{path}[{i}]")
        elif isinstance(e, (set, frozenset)):
            if a != e:
                raise WorldMismatch(f"{path}: {a!r} != {e!r}")
        elif isinstance(e, dict):
            ka, ke = list(dict.keys(a)), list(dict.keys(e))
            if ka != ke:
                raise WorldMismatch(f"{path}: keys {ka!r} != {ke!r}")
            for k in ke:
                self.same(dict.__getitem__(a, k), dict.__getitem__(e, k), f"{path}[{k!r}]")
            factory = getattr(e, "default_factory", None)
            if factory is not None or hasattr(a, "default_factory"):
                self.same(a.default_factory, factory, f"{path}.default_factory")
        elif isinstance(e, types.GeneratorType):
            return
        for name in _slot_names(type(e)):
            va, ve = _slot(a, name), _slot(e, name)
            if (va is _UNSET) != (ve is _UNSET):
                raise WorldMismatch(f"{path}.{name}: set in one run only")
            if ve is not _UNSET:
                self.same(va, ve, f"{path}.{name}")
        da, de = _instance_dict(a), _instance_dict(e)
        if (da is None) != (de is None):
            raise WorldMismatch(f"{path}: __dict__ in one run only")
        if de is not None:
            self.same(da, de, f"{path}.__dict__")


_UNSET = object()


def _constant_tuple(value: Any) -> bool:
    """A tuple of values: compared by value (Python shares such tuples as it pleases)."""
    return type(value) is tuple and all(
        (isinstance(v, _VALUES) and not isinstance(v, tuple)) or _constant_tuple(v) for v in value)


def _slot(obj: Any, name: str) -> Any:
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        return _UNSET


def _slot_names(cls: type) -> list[str]:
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__"):
                names.append(f"_{klass.__name__.lstrip('_')}{name}" if name.startswith("__") else name)
    return names


def _instance_dict(obj: Any) -> dict | None:
    if isinstance(obj, (torch.Tensor, torch.nn.Module)) or not type(obj).__dictoffset__:
        return None
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None


def assert_same_world(actual: Any, expected: Any, path: str = "world") -> None:
    """``actual`` and ``expected`` have the same values *and* the same identity structure
    (see the module docstring)."""
    _Walk().same(actual, expected, path)


def _run(fn: Callable, args: tuple, kwargs: dict) -> tuple:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            return ("ok", fn(*args, **kwargs)), out.getvalue()
        except Exception as e:  # noqa: BLE001 (the program's exception is compared)
            return ("raised", e), out.getvalue()


def run_both(fn: Callable, compiled: Callable, make_args: Callable[[], tuple]) -> None:
    """One call eagerly and one compiled, each on fresh ``make_args()`` (a tuple of
    positional arguments, or ``(args, kwargs)`` when it returns a pair whose second item is
    a dict); outcome, stdout and arguments compared as one world."""
    def fresh():
        made = make_args()
        if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], dict) \
                and isinstance(made[0], tuple):
            return made
        return made, {}

    e_args, e_kwargs = fresh()
    c_args, c_kwargs = fresh()
    expected, e_out = _run(fn, e_args, e_kwargs)
    actual, c_out = _run(compiled, c_args, c_kwargs)
    if actual[0] == "raised" and not (expected[0] == "raised" and type(actual[1]) is type(expected[1])):
        raise AssertionError(f"compiled raised {type(actual[1]).__name__}: {actual[1]}; eager: {expected}") \
            from actual[1]
    assert actual[0] == expected[0], f"eager {expected}, compiled {actual}"
    assert c_out == e_out, f"stdout differs: {c_out!r} vs {e_out!r}"
    if expected[0] == "raised":
        assert str(actual[1]) == str(expected[1]), f"exception: {actual[1]!r} vs {expected[1]!r}"
        assert_same_world((c_args, c_kwargs), (e_args, e_kwargs), "args")
    else:
        assert_same_world((actual[1], c_args, c_kwargs), (expected[1], e_args, e_kwargs),
                          "(result, args, kwargs)")

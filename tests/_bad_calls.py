"""Generated calls with wrong arguments, for ``test_bad_calls.py`` (not a test module itself).

Issue 31: a program that calls a builtin, a builtin type's method, a tensor method or a
torch function with the wrong number or types of arguments inside ``try``/``except``
(input validation, ``assertRaises``, probing an API) must get eager's exception there.
:func:`calls` enumerates such calls; each is one small function

    def f(x, p):
        y = x + 1
        try:
            r = <call>
        except Exception as e:
            return y, type(e).__name__, str(e)
        return y, "ok", type(r).__name__

compiled on its own (``x`` a tensor, ``p`` the receiver, a fresh copy per call), so a
graph is made whatever the call does.  The variants of one callable:

* ``none``: no argument;
* ``many``: six positional arguments ``(1, 2, 3, 4, 5, 6)``;
* ``type``: the required positional parameters (one if it has none or no signature) given
  a value of a wrong type (``"x"``; ``1.5`` for ``str`` and ``bytes`` receivers);
* ``kw``: an unexpected keyword argument (``bogus=1``);
* ``hand``: :data:`HAND_WRITTEN`, calls of the standard library's callables graphjit
  models, dunder methods, ``__new__``, ``operator`` and ``math`` (group ``other``).

:func:`classify` runs one call eagerly and compiled and says how they compare;
:func:`dynamo_outcome` does the same with ``torch.compile`` for the comparison the test
prints.  A call that succeeds is a sample too (the result's type and the receiver after
the call are compared).
"""

from __future__ import annotations

import builtins
import collections
import copy
import dataclasses
import functools
import inspect
import itertools
import linecache
import math
import operator
import re
import sys

import torch

# -- what is called ----------------------------------------------------------------------

#: receiver name -> (its literal, its methods called); the receiver is passed in (a fresh
#: copy per call), made in the function from the literal, and its type's method is called
#: unbound (``list.append(p, ...)``)
METHODS: dict[str, tuple[str, tuple[str, ...]]] = {
    "list": ("[3, 1, 2]", (
        "append", "extend", "insert", "pop", "remove", "index", "count", "clear", "copy",
        "reverse", "sort")),
    "tuple": ("(3, 1, 2)", ("index", "count")),
    "dict": ("{'a': 1, 'b': 2}", (
        "get", "pop", "popitem", "setdefault", "update", "keys", "values", "items", "clear",
        "copy")),
    "set": ("{1, 2, 3}", (
        "add", "remove", "discard", "pop", "clear", "copy", "union", "intersection",
        "difference", "symmetric_difference", "update", "issubset", "issuperset",
        "isdisjoint")),
    "frozenset": ("frozenset({1, 2, 3})", (
        "copy", "union", "intersection", "difference", "symmetric_difference", "issubset",
        "issuperset", "isdisjoint")),
    "str": ("'a,b'", (
        "upper", "lower", "split", "rsplit", "join", "strip", "replace", "startswith",
        "endswith", "find", "index", "count", "format", "zfill", "center", "ljust", "encode",
        "partition", "splitlines", "isdigit")),
    "bytes": ("b'a,b'", (
        "decode", "split", "join", "startswith", "find", "count", "hex", "upper", "strip",
        "replace")),
    "int": ("7", ("bit_length", "to_bytes", "conjugate", "as_integer_ratio", "bit_count",
                  "__add__")),
    "float": ("2.5", ("is_integer", "hex", "as_integer_ratio", "conjugate", "__add__")),
    "deque": ("collections.deque([3, 1, 2])", (
        "append", "appendleft", "pop", "popleft", "extend", "extendleft", "clear", "copy",
        "count", "index", "insert", "remove", "reverse", "rotate")),
    "OrderedDict": ("collections.OrderedDict(a=1, b=2)", (
        "get", "pop", "popitem", "move_to_end", "setdefault", "update", "keys", "copy")),
    "defaultdict": ("collections.defaultdict(list, a=[1])", ("get", "pop", "copy", "setdefault", "update")),
    "range": ("range(5)", ("index", "count")),
    "Size": ("torch.Size([2, 3])", ("index", "count", "numel")),
    "tensor": ("torch.arange(6.0).reshape(2, 3)", (
        "view", "reshape", "permute", "transpose", "clamp", "sum", "mean", "add", "mul",
        "index_select", "expand", "repeat", "split", "chunk", "to", "size", "dim", "unsqueeze",
        "squeeze", "flatten", "narrow", "gather", "masked_fill", "matmul", "softmax", "max",
        "argmax", "cumsum", "topk", "new_zeros", "type_as", "view_as", "contiguous", "float",
        "numel", "select", "flip", "pow", "sub", "div")),
}

#: builtins called with no receiver (``p`` is then unused)
BUILTINS = (
    "len", "abs", "min", "max", "sum", "sorted", "isinstance", "issubclass", "getattr",
    "setattr", "hasattr", "delattr", "range", "enumerate", "zip", "map", "filter", "iter",
    "next", "divmod", "pow", "round", "int", "float", "str", "bool", "list", "tuple", "dict",
    "set", "frozenset", "any", "all", "reversed", "callable", "repr", "chr", "ord", "hex",
    "bin", "oct", "format", "hash", "slice", "id", "complex", "bytes", "ascii",
    "super")

#: torch functions called with no receiver
TORCH_FUNCTIONS = (
    "cat", "stack", "zeros", "ones", "add", "where", "clamp", "matmul", "sum", "reshape",
    "split", "flatten", "transpose", "softmax", "zeros_like", "arange", "full", "tensor",
    "einsum", "chunk", "narrow", "gather")


#: the globals of the generated functions (and of the literals)
NAMESPACE = {"torch": torch, "collections": collections, "functools": functools,
             "inspect": inspect, "itertools": itertools, "math": math, "operator": operator,
             "re": re, "sys": sys}


#: written by hand: the standard library's callables graphjit models or polyfills, dunder
#: methods, constructors' ``__new__``, calls through ``operator`` and ``math``
HAND_WRITTEN = (
    "sys.exc_info(1)", "sys.exc_info(bogus=1)", "globals(1)", "locals(1)", "object.__new__()",
    "object.__new__(1.5)", "type(1, 2)", "type()", "collections.OrderedDict(1, 2, 3)",
    "collections.OrderedDict(1.5)", "collections.deque(1, 2, 3, 4)", "collections.deque(bogus=1)",
    "collections.deque(1.5)", "itertools.chain(bogus=1)", "functools.partial()",
    "functools.partial(1.5)", "functools.reduce()", "functools.reduce(1.5)",
    "functools.reduce(len, [], 1, 2)", "tuple.__new__()", "tuple.__new__(tuple, 1, 2)",
    "dict.__new__()", "print(bogus=1)", "inspect.signature()", "re.compile()", "re.compile(1.5)",
    "re.search('a')", "re.sub('a')", "re.escape()", "collections.defaultdict(list).__copy__(1)",
    "(1).__add__()", "'a'.__len__(1)", "[].__len__(1)", "{}.__getitem__()", "[1].__getitem__()",
    "[1].__setitem__(0)", "{1}.__contains__()", "(1,).__getitem__()", "list.__len__([], 1)",
    "vars(1, 2)", "dir(1, 2)", "iter(1, 2, 3)", "max(1, key=len, bogus=2)", "sorted([], 1)",
    "sum([], 1, 2)", "operator.add(1)", "operator.getitem([])", "math.sqrt()", "math.sqrt(1, 2)",
    "math.floor('x')", "operator.itemgetter()", "operator.attrgetter()", "operator.methodcaller()",
    "functools.partial(len)(1, 2)", "range(1).index()", "(1.5).as_integer_ratio(1)",
    "complex(1, 2, 3)", "torch.Size([1]).index()", "torch.Size([1]).numel(1)",
    "torch.zeros(2).dim(1)", "torch.zeros(2).add()", "torch.zeros(2).shape.count()",
    "int('1', 10, 3)", "min(key=len)", "object.__setattr__()", "object.__getattribute__(1)",
    "object.__init__()", "BaseException().with_traceback()", "ValueError('x').add_note()",
    "iter([1]).__next__(1)", "(i for i in ()).send()", "(i for i in ()).close(1)",
    "(i for i in ()).throw()", "enumerate([]).__next__(1)", "zip().__next__(1)",
    "{}.keys().isdisjoint()", "collections.deque().rotate('x')", "collections.deque([1]).index('x')",
)


@dataclasses.dataclass(frozen=True)
class BadCall:
    """One generated call: ``group`` (the receiver kind, ``builtin`` or ``torch``), the
    callable's name, the variant, the receiver's ``form`` (``arg``: passed in; ``local``:
    made in the function; ``unbound``: the type's method called with it first; ``none``)
    and the Python text of the call."""

    group: str
    name: str
    variant: str
    form: str
    text: str

    @property
    def label(self) -> str:
        return f"{self.text}  [{self.group}, {self.form}]"


def _required(fn) -> int:
    """How many positional parameters ``fn`` requires (one when it has no signature)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return max(1, sum(1 for p in sig.parameters.values()
                      if p.kind in kinds and p.default is inspect.Parameter.empty))


def _variants(group: str, name: str, form: str, head: str, fn, wrong: str, first: str = "") -> list[BadCall]:
    def call(variant: str, args: str) -> BadCall:
        return BadCall(group, name, variant, form, f"{head}({', '.join(a for a in (first, args) if a)})")

    return [
        call("none", ""),
        call("many", "1, 2, 3, 4, 5, 6"),
        call("type", ", ".join([wrong] * _required(fn))),
        call("kw", "bogus=1"),
    ]


def calls() -> list[BadCall]:
    """Every generated call, in a fixed order."""
    out: list[BadCall] = []
    for group, (literal, names) in METHODS.items():
        wrong = "1.5" if group in ("str", "bytes") else '"x"'
        value = eval(literal, dict(NAMESPACE))
        for name in names:
            method = getattr(value, name)
            for form in ("arg", "local"):
                out += _variants(group, name, form, f"p.{name}", method, wrong)
            if getattr(builtins, group, None) is type(value):
                out += _variants(group, name, "unbound", f"{group}.{name}", method, wrong, first="p")
    for name in BUILTINS:
        out += _variants("builtin", name, "none", name, getattr(builtins, name), "1.5")
    for name in TORCH_FUNCTIONS:
        out += _variants("torch", name, "none", f"torch.{name}", getattr(torch, name), '"x"')
    out += [BadCall("other", text.split("(")[0], "hand", "none", text) for text in HAND_WRITTEN]
    return out


def receiver(call: BadCall):
    """A fresh receiver passed to ``call``'s function (``None`` for builtins and torch
    functions, and where it is made in the function)."""
    entry = METHODS.get(call.group)
    return eval(entry[0], dict(NAMESPACE)) if entry is not None and call.form != "local" else None


_TEMPLATE = """\
def {fname}(x, p):
    y = x + 1{setup}
    try:
        r = {text}
    except Exception as e:
        return y, type(e).__name__, str(e)
    return y, "ok", type(r).__name__
"""


def make_function(call: BadCall, index: int):
    """The function that makes ``call`` (its source registered with ``linecache``)."""
    fname = f"bad_call_{index}"
    setup = f"\n    p = {METHODS[call.group][0]}" if call.form == "local" else ""
    source = _TEMPLATE.format(fname=fname, text=call.text, setup=setup)
    filename = f"<bad_calls:{index}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(NAMESPACE)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[fname]


# -- comparing ---------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    """How one compiled call compared with eager: ``kind`` is ``same``, ``message``
    (same exception type, another message), ``type`` (another exception type caught, or
    none where eager raises one), ``escaped`` (an exception left the compiled call where
    eager's ``except`` handled one), ``internal`` (the compiler's own error:
    ``InternalError``), ``break`` (``Unsupported`` under ``fullgraph``), ``other`` (another
    difference: result or receiver), with ``detail``."""

    kind: str
    detail: str = ""


def _summary(result) -> tuple:
    """(``ok``/exception name, message) of one run's return value or escaped exception."""
    status, value = result
    if status == "raised":
        return ("escaped " + type(value).__name__, str(value))
    y, kind, text = value
    return (kind, text)


def _run(fn, x, p):
    try:
        return "ok", fn(x, p)
    except Exception as e:  # noqa: BLE001
        return "raised", e


def compare(call: BadCall, fn, compiled, internal_types: tuple, break_types: tuple) -> Outcome:
    """Run ``fn`` eagerly and ``compiled`` on fresh copies and classify the difference."""
    x = torch.arange(6.0).reshape(2, 3)
    p = receiver(call)
    p_eager, p_compiled = copy.deepcopy(p), copy.deepcopy(p)
    expected = _run(fn, x, p_eager)
    actual = _run(compiled, x.clone(), p_compiled)
    if actual[0] == "raised" and isinstance(actual[1], internal_types):
        return Outcome("internal", f"{type(actual[1]).__name__}: {str(actual[1])[:300]}")
    if actual[0] == "raised" and isinstance(actual[1], break_types):
        return Outcome("break", str(actual[1]).splitlines()[0][:300])
    want, got = _summary(expected), _summary(actual)
    if actual[0] == "raised" and expected[0] == "ok":
        return Outcome("escaped", f"eager {want[0]}: {want[1][:200]!r}, compiled {got[0]}: {got[1][:200]!r}")
    if want[0] != got[0]:
        return Outcome("type", f"eager {want[0]}: {want[1][:200]!r}, compiled {got[0]}: {got[1][:200]!r}")
    if want[1] != got[1]:
        return Outcome("message", f"{want[0]}: eager {want[1][:200]!r}, compiled {got[1][:200]!r}")
    if expected[0] == "ok" and not torch.equal(expected[1][0], actual[1][0]):
        return Outcome("other", "tensor result differs")
    if isinstance(p, torch.Tensor):
        same_receiver = torch.equal(p_eager, p_compiled)
    elif isinstance(p, float):
        same_receiver = p_eager == p_compiled or p_eager != p_eager and p_compiled != p_compiled
    else:
        same_receiver = p_eager == p_compiled
    if not same_receiver:
        return Outcome("other", f"receiver after the call: eager {p_eager!r}, compiled {p_compiled!r}")
    return Outcome("same")

"""Calls with wrong arguments inside ``try``/``except``: eager's exception, never graphjit's.

Issue 31, item 1: a program that calls a builtin, a builtin type's method, a tensor method
or a torch function with the wrong number or types of arguments (input validation,
``assertRaises``, a library probing an API) gets eager's exception inside the traced
program, where its ``except`` handles it, also under ``fullgraph=True``.

* :func:`test_generated_bad_calls` runs every call ``_bad_calls.calls()`` generates (no
  argument, six, a wrong type, an unexpected keyword; receivers passed in, made in the
  function and called through their type) with ``eager`` and ``aot_eager``, with and
  without ``fullgraph``: no ``InternalError``, no break, eager's exception type and
  message (CPython's and torch's own), result and receiver afterwards.  ``python
  benchmarks/bad_calls_vs_dynamo.py`` counts the same set for ``torch.compile``.
* The binding tables (``variables/arg_binding.py``) agree with CPython: every row that
  refuses a call refuses it as CPython does, and every method graphjit models for a
  builtin type has a signature to bind to (no user's call reaches a handler's own
  Python signature).
* Python functions the tracer inlines: a missing, extra or unexpected argument is CPython's
  TypeError word for word (a ``staticmethod`` through ``self``, through the class and
  through ``cls``; a module's ``forward``; functions, lambdas, ``functools.partial``); one
  not caught propagates as the user's TypeError.
"""

from __future__ import annotations

import collections
import functools
import inspect

import pytest
import torch

import graphjit
import _bad_calls as bad
from graphjit.variables import arg_binding
from graphjit.variables.dicts import _DICT_METHODS
from graphjit.variables.sequences import _LIST_METHODS

CALLS = bad.calls()
GROUPS = sorted({c.group for c in CALLS})


def test_the_generated_set_covers_what_the_issue_names():
    assert len(CALLS) >= 1500
    assert {c.variant for c in CALLS} == {"none", "many", "type", "kw", "hand"}
    assert {c.form for c in CALLS} == {"arg", "local", "unbound", "none"}
    names = {c.name for c in CALLS}
    for builtin in ("len", "abs", "min", "max", "sum", "sorted", "isinstance", "getattr", "setattr",
                    "hasattr", "range", "enumerate", "zip", "map", "iter", "next", "divmod", "pow",
                    "round", "int", "float", "str", "list", "dict"):
        assert builtin in names, builtin
    for method in ("view", "reshape", "permute", "transpose", "clamp", "sum", "mean", "add", "mul",
                   "index_select", "expand", "repeat", "split", "chunk", "to"):
        assert method in names, method


@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph-breaks", "fullgraph"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("group", GROUPS)
def test_generated_bad_calls(group, backend, fullgraph):
    failures = []
    for index, call in enumerate(CALLS):
        if call.group != group:
            continue
        fn = bad.make_function(call, index)
        graphjit.reset()
        compiled = graphjit.compile(fn, backend=backend, fullgraph=fullgraph)
        for _ in range(2):  # the trace, then the entry it made
            outcome = bad.compare(call, fn, compiled, (graphjit.InternalError,), (graphjit.Unsupported,))
            if outcome.kind != "same":
                failures.append(f"{outcome.kind}: {call.label}: {outcome.detail}")
                break
    assert not failures, f"{len(failures)} calls differ from eager:\n" + "\n".join(failures)


LARGE_TENSOR_CALLS = {
    "permute, too many dims": lambda t: t.permute(1, 2, 3),
    "clamp, no bound": lambda t: t.clamp(),
    "expand, another size": lambda t: t.expand(3, 5),
    "view, another size": lambda t: t.view(7, -1),
    "add, not broadcastable": lambda t: t + t[:3],
    "matmul, inner sizes": lambda t: t @ t[:3],
    "cat, another rank": lambda t: torch.cat([t, t[0]]),
    "transposed view": lambda t: t.t().view(-1),
}


@pytest.mark.parametrize("name", list(LARGE_TENSOR_CALLS))
def test_a_failing_op_on_a_large_tensor_raises_eagers_exception(name):
    """Past ``fake_run.STAND_IN_BYTES`` the failing op runs again on zero-stride CPU
    tensors of the same sizes (or on meta tensors)."""
    call = LARGE_TENSOR_CALLS[name]

    def fn(x):
        y = x + 1
        try:
            return y, call(x)
        except Exception as e:
            return y, type(e).__name__, str(e)

    x = torch.zeros(1024, 1024)
    expected = fn(x)[1:]
    actual = graphjit.compile(fn, backend="eager", fullgraph=True)(x)[1:]
    assert actual == expected


# -- the binding tables ----------------------------------------------------------------------

def _table_rows():
    for key in arg_binding.SIGNATURES:
        if isinstance(key, tuple):
            owner, name = key
            if hasattr(owner, name):
                yield pytest.param(key, id=f"{owner.__name__}.{name}")
        else:
            yield pytest.param(key, id=key.__name__)


@pytest.mark.parametrize("key", list(_table_rows()))
def test_a_table_row_refuses_only_what_cpython_refuses(key):
    """For 0..6 positional arguments, with and without an unknown keyword: where the row
    says the call does not bind, CPython's call with placeholders raises TypeError."""
    if isinstance(key, tuple):
        owner, name = key
        sig = arg_binding.signature_of(owner, name)
        raw = owner.__dict__[name]
        call = functools.partial(raw, arg_binding.RECEIVERS[owner]()) \
            if isinstance(raw, (type(list.append), type(list.__add__))) else getattr(owner, name)
    else:
        sig = arg_binding._from_text(arg_binding.SIGNATURES[key])
        call = key
    placeholder = object()
    for nargs in range(7):
        for kwargs in ({}, {"bogus_keyword": placeholder}):
            try:
                sig.bind(*[placeholder] * nargs, **kwargs)
                continue
            except TypeError:
                pass
            with pytest.raises(TypeError):
                call(*[placeholder] * nargs, **kwargs)


@pytest.mark.parametrize("owner, names", [
    (list, _LIST_METHODS), (dict, _DICT_METHODS), (collections.OrderedDict, _DICT_METHODS),
    (set, ("add", "remove", "discard", "pop", "clear", "copy", "union", "intersection",
           "difference", "symmetric_difference", "update", "intersection_update",
           "difference_update", "symmetric_difference_update", "issubset", "issuperset",
           "isdisjoint", "__contains__", "__len__", "__iter__")),
], ids=["list", "dict", "OrderedDict", "set"])
def test_every_modelled_method_has_a_signature_to_bind(owner, names):
    """The methods graphjit's handlers model for a builtin type: each is bound to the real
    method's signature before its handler runs."""
    missing = [n for n in names if hasattr(owner, n) and arg_binding.signature_of(owner, n) is None]
    assert not missing, f"{owner.__name__}: no signature for {missing}"


def test_a_wrong_table_row_is_an_internal_error_under_debug_checks(monkeypatch):
    """A row stricter than CPython would make a call that binds raise: with debug checks
    the placeholder call that does not fail says so."""
    monkeypatch.setitem(arg_binding.SIGNATURES, (list, "append"), "")
    monkeypatch.setattr(arg_binding, "_SIGNATURE_CACHE", {})
    monkeypatch.setattr(arg_binding, "_VERDICTS", {})
    with pytest.raises(graphjit.InternalError, match="does not bind its signature, but the call did not raise"):
        arg_binding.check_method_call(list, "append", [1], {})


def test_binding_is_cached_per_callable_and_argument_shape():
    arg_binding.check_method_call(list, "append", [1], {})
    arg_binding.check_call(len, [1], {})
    assert arg_binding._VERDICTS[(list, "append", 1, ())] is None
    assert arg_binding._VERDICTS[(len, 1, ())] is None
    with pytest.raises(graphjit.exc.ObservedException) as info:
        arg_binding.check_method_call(list, "append", [], {})
    assert str(info.value.exc) == "list.append() takes exactly one argument (0 given)"
    assert isinstance(arg_binding._VERDICTS[(list, "append", 0, ())], TypeError)


# -- Python functions the tracer inlines ----------------------------------------------------

class Holder:
    @staticmethod
    def helper(x):
        return x + 1

    def through_self(self, x):
        return self.helper(x)

    def through_self_bad(self, x):
        return self.helper(x, 2)

    @classmethod
    def through_cls_bad(cls, x):
        return cls.helper()

    def keyword_only(self, a, *, b):
        return a


class Doubler(torch.nn.Module):
    @staticmethod
    def helper(x):
        return x * 2

    def forward(self, x):
        return self.helper(x)


def two_and_keyword(a, b, *, c=1):
    return a


def every_kind(a, /, b=2, *args, c, **kw):
    return a


HOLDER, DOUBLER = Holder(), Doubler()

INLINED = {
    "staticmethod through self": lambda y: HOLDER.through_self(y),
    "staticmethod through self, extra": lambda y: HOLDER.through_self_bad(y),
    "staticmethod through the class, extra": lambda y: Holder.helper(y, y),
    "staticmethod through cls, missing": lambda y: Holder.through_cls_bad(y),
    "staticmethod through the instance, missing": lambda y: HOLDER.helper(),
    "method, missing": lambda y: HOLDER.through_self(),
    "method, extra": lambda y: HOLDER.through_self(y, 1),
    "method, keyword-only missing": lambda y: HOLDER.keyword_only(y),
    "method, unexpected keyword": lambda y: HOLDER.keyword_only(y, b=1, d=2),
    "method, multiple values": lambda y: HOLDER.keyword_only(y, a=1, b=2),
    "module's staticmethod through self": lambda y: DOUBLER.helper(y),
    "forward, extra": lambda y: DOUBLER(y, 1),
    "forward, missing": lambda y: DOUBLER(),
    "forward, unexpected keyword": lambda y: DOUBLER(y, bogus=2),
    "function, missing": lambda y: two_and_keyword(y),
    "function, extra": lambda y: two_and_keyword(y, 1, 2),
    "function, unexpected keyword": lambda y: two_and_keyword(y, 1, d=2),
    "function, multiple values": lambda y: two_and_keyword(y, 1, a=2),
    "positional-only as keyword": lambda y: every_kind(a=y, c=1),
    "keyword-only missing": lambda y: every_kind(y),
    "lambda, missing": lambda y: (lambda q: q)(),
    "nested, keyword-only missing": lambda y: (lambda q, *, r: q)(y),
    "partial, missing": lambda y: functools.partial(two_and_keyword, y)(),
}


def _caught(body):
    def caught(x):
        y = x + 1
        try:
            return body(y)
        except TypeError as e:
            return y, str(e)
    return caught


def _uncaught(body):
    def uncaught(x):
        y = x + 1
        return body(y)
    return uncaught


@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph-breaks", "fullgraph"])
@pytest.mark.parametrize("wrap", [_caught, _uncaught], ids=["caught", "uncaught"])
@pytest.mark.parametrize("name", list(INLINED))
def test_inlined_calls_with_wrong_arguments_raise_cpythons_typeerror(name, wrap, fullgraph):
    fn = wrap(INLINED[name])
    x = torch.ones(2)
    try:
        expected = ("ok", fn(x))
    except TypeError as e:
        expected = ("raised", str(e))
    compiled = graphjit.compile(fn, backend="eager", fullgraph=fullgraph)
    for _ in range(2):
        try:
            actual = ("ok", compiled(x))
        except TypeError as e:  # the user's TypeError (an InternalError would fail the test)
            actual = ("raised", str(e))
        assert actual[0] == expected[0] and str(actual[1]) == str(expected[1]), (actual, expected)
    if wrap is _caught and expected[0] == "raised" or fullgraph:
        assert graphjit.stats()["graph_breaks"] == 0


# -- methods of objects, subclasses of builtins and modules ---------------------------------

class Plain:
    def __init__(self):
        self.a = 1

    def super_setattr(self):
        return super().__setattr__("a")

    def super_init(self):
        return super().__init__(1)

    def super_getattribute(self):
        return super().__getattribute__()

    def super_eq(self):
        return super().__eq__()


class ListSub(list):
    def super_append(self):
        return super().append()

    def own_append(self):
        return self.append(1, 2)


class DictSub(dict):
    def super_get(self):
        return super().get()

    def super_setitem(self):
        return super().__setitem__(1)


class WithLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)


OBJECT_CALLS = (
    "o.__setattr__('a')", "o.__getattribute__()", "o.__delattr__()", "o.__setattr__()",
    "o.super_setattr()", "o.super_init()", "o.super_getattribute()", "o.super_eq()",
    "o.__eq__()", "o.__hash__(1)", "o.__repr__(1)", "o.__init__(1)", "o.__sizeof__(1)",
    "l.super_append()", "l.own_append()", "l.append()", "d.super_get()", "d.super_setitem()",
    "d.get()", "d.__getitem__()", "l.__getitem__()", "m.lin(1, 2)", "m.lin()",
    "m.parameters(1, 2, 3)", "m.named_parameters(bogus=1)", "m.lin.forward()",
    "m.lin.forward(1, 2)", "m.register_buffer()", "m.train(1, 2)", "m.__setattr__('a')",
    "m.__getattr__()", "m.children(1)", "m.modules(1)", "m.zero_grad(1, 2)", "x.shape.index()",
    "x.size().count()", "x.device.__eq__()",
)


@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph-breaks", "fullgraph"])
def test_methods_of_objects_subclasses_and_modules_with_wrong_arguments(fullgraph):
    """``super()`` reaching a C method of a builtin base (its message names the subclass),
    ``object``'s slots, a module's Python methods (``Module.parameters``)."""
    failures = []
    for index, text in enumerate(OBJECT_CALLS):
        namespace = {"torch": torch}
        exec(f"def f(x, o, l, d, m):\n    y = x + 1\n    try:\n        r = {text}\n"
             f"    except Exception as e:\n        return y, type(e).__name__, str(e)\n"
             f"    return y, 'ok', type(r).__name__\n", namespace)
        fn = namespace["f"]

        def arguments():
            return torch.ones(2), Plain(), ListSub([1]), DictSub(a=1), WithLinear()

        expected = fn(*arguments())[1:]
        graphjit.reset()
        try:
            actual = graphjit.compile(fn, backend="eager", fullgraph=fullgraph)(*arguments())[1:]
        except Exception as e:  # noqa: BLE001 (reported below)
            actual = ("escaped", type(e).__name__, str(e).splitlines()[0])
        if actual != expected:
            failures.append(f"{text}: eager {expected}, compiled {actual}")
    assert not failures, "\n".join(failures)


def test_a_stub_keeps_the_functions_qualified_name_and_defaults():
    code = every_kind.__code__
    error = arg_binding.python_call_error(code, "every_kind", 1, ("c",), 0, ())
    assert str(error) == "every_kind() missing 1 required positional argument: 'a'"
    assert arg_binding.python_call_error(code, "every_kind", 1, ("c",), 5, ()) is None
    # a comprehension's parameter ``.0`` cannot be written: no stub (graphjit's own words)
    comprehension = next(c for c in _squares.__code__.co_consts if inspect.iscode(c))
    assert arg_binding.python_call_error(comprehension, "<listcomp>", 0, (), 3, ()) is None


def _squares(xs):
    return [x * x for x in xs]

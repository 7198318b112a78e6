"""The decompiler (``graphjit.report.decompile``): every transformed function and every
resume function graphjit makes for the corpus of test programs is decompiled, compiled
back, and *run in place of the bytecode*; the programs must still give eager's results.

Corpus: every case of ``test_py_exceptions``, ``test_py_context_managers``,
``test_py_iterators``, ``test_py_containers``, ``test_py_records``, ``test_py_builtins``,
``test_py_random`` (issue 8's differential cases, run and compared by ``_semantics``'
harness), every program of ``test_resume_anywhere`` (a break at each kind of
instruction) and the break programs of ``_shared`` (branches on tensors, breaks in loops and ``try``, ``no_grad`` blocks).
"""

from __future__ import annotations

import dis
import types

import pytest
import torch

import graphjit
import graphjit.runtime.convert_frame as convert_frame_mod
import test_py_builtins
import test_py_containers
import test_py_context_managers
import test_py_exceptions
import test_py_iterators
import test_py_random
import test_py_records
import test_resume_anywhere
import _shared
from _semantics import Case
from graphjit.report.decompile import DecompileError, decompile, recompile
from graphjit.report.decompile_ops import UNSUPPORTED, handled_opnames
from graphjit.runtime.dispatch import CompileSession
from graphjit.testing import CompileCounter


def test_every_opcode_is_handled_or_unsupported():
    handled = handled_opnames()
    assert not handled & UNSUPPORTED
    missing = set(dis.opmap) - handled - UNSUPPORTED
    assert not missing, sorted(missing)


class Swapper:
    """While installed, every new cache entry runs the recompiled decompilation of its
    transformed code, and every resume function is made from its decompiled code."""

    def __init__(self, monkeypatch) -> None:
        self.swapped = {"transformed": 0, "resume": 0}
        self.failures: list[str] = []
        self._resume_codes: dict[types.CodeType, types.CodeType] = {}
        build, make_resume = convert_frame_mod.build_entry, CompileSession.make_resume

        def build_entry(fn, *args, **kwargs):
            entry = build(fn, *args, **kwargs)
            if isinstance(entry, convert_frame_mod.CacheEntry) and entry.fn is not fn:
                code = self.swap(entry.fn.__code__, "transformed")
                new = types.FunctionType(code, entry.fn.__globals__, entry.fn.__name__,
                                         entry.fn.__defaults__, entry.fn.__closure__)
                new.__kwdefaults__, new.__qualname__ = entry.fn.__kwdefaults__, entry.fn.__qualname__
                entry.fn = new
            return entry

        def resume(session, code, f_globals, closure=None):
            if code not in self._resume_codes:
                self._resume_codes[code] = self.swap(code, "resume")
            return make_resume(session, self._resume_codes[code], f_globals, closure)

        monkeypatch.setattr(convert_frame_mod, "build_entry", build_entry)
        monkeypatch.setattr(CompileSession, "make_resume", resume)

    def swap(self, code: types.CodeType, kind: str) -> types.CodeType:
        try:
            new, _ = recompile(code)
        except DecompileError as e:
            self.failures.append(f"{kind} {code.co_qualname}: {e}")
            return code
        self.swapped[kind] += 1
        return new


@pytest.fixture
def swapper(monkeypatch):
    return Swapper(monkeypatch)


def _cases():
    out = []
    for module in (test_py_exceptions, test_py_context_managers, test_py_iterators, test_py_containers,
                   test_py_records, test_py_builtins, test_py_random):
        for entry in module.CASES:
            case = entry if isinstance(entry, Case) else entry.values[0]
            if isinstance(entry, Case) or not any(m.name == "xfail" for m in entry.marks):
                out.append(case)
    return out


def _run(fn, inputs):
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=CompileCounter())
    _shared.check_sequence(fn, compiled, inputs)


@pytest.mark.cache_limits("the generated code holds a dict_keys")  # (a dict's view is read live)
def test_semantics_corpus_runs_decompiled(swapper):
    cases = _cases()
    assert len(cases) >= 250
    wrong = []
    for case in cases:
        try:
            _run(case.fn, case.inputs)
        except AssertionError as e:
            wrong.append(f"{case.name}: {str(e).splitlines()[0]}")
    assert not wrong, wrong
    assert not swapper.failures, swapper.failures
    assert swapper.swapped["transformed"] >= 250, swapper.swapped
    assert swapper.swapped["resume"] >= 20, swapper.swapped


def _break_programs():
    x = lambda seed: (test_resume_anywhere.X(seed=seed),)  # noqa: E731
    progs = [(fn, [x(0)]) for fn, _ in test_resume_anywhere.CASES]
    signs = [(torch.ones(4),), (-torch.ones(4),), (torch.randn(4),)]
    for fn in (_shared.elif_chain, _shared.item_math, _shared.tolist_sum, _shared.no_grad_break,
               _shared.print_then_ops, _shared.while_tensor_condition, _shared.print_in_for_loop,
               _shared.break_in_try, _shared.raise_in_branch, _shared.no_grad_decorated_helper,
               _shared.helper_depth_2, _shared.helper_depth_3, _shared.print_two):
        progs.append((fn, signs))
    pairs = [(torch.ones(4), torch.ones(4)), (torch.ones(4), -torch.ones(4)), (-torch.ones(4), torch.ones(4))]
    for fn in (_shared.toy_example, _shared.nested_ifs, _shared.half_built_call):
        progs.append((fn, pairs))
    return progs


@pytest.mark.cache_limits("(a list) is compared by identity")  # (programs exec'd in a namespace of their own)
def test_break_programs_run_decompiled(swapper, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "gj_resume_fake_mod", test_resume_anywhere.TL)
    wrong = []
    for fn, inputs in _break_programs():
        test_resume_anywhere.LOG.clear()
        test_resume_anywhere.GD.clear()
        try:
            _run(fn, inputs)
        except AssertionError as e:
            wrong.append(f"{fn.__name__}: {str(e).splitlines()[0]}")
    assert not wrong, wrong
    assert not swapper.failures, swapper.failures
    assert swapper.swapped["resume"] >= 30, swapper.swapped
    assert swapper.swapped["transformed"] >= 40, swapper.swapped


def test_toy_example_reads_as_python():
    graphjit.reset()
    compiled = graphjit.compile(_shared.toy_example, backend="eager")
    compiled(torch.ones(3), -torch.ones(3))
    entry = compiled._entries[0]
    src = decompile(entry.fn.__code__)
    assert "__compiled_fn_" in src and ".fn(a, b)" in src
    assert "__resume_at_" in src and "return __resume_at_" in src
    assert "__pc" not in src  # straight-line code with one if: no block machine


def test_try_except_loops_and_with_round_trip():
    def prog(xs, fail):
        total = 0
        for i, v in enumerate(xs):
            while total < i:
                total += 1
            try:
                if fail and i == 1:
                    raise KeyError(v)
                total += v
            except KeyError as e:
                total -= len(str(e))
            finally:
                total *= 2
        with torch.no_grad():
            t = torch.ones(2) * total
        return total, t.requires_grad, [a * 2 for a in xs if a], f"{total:>4}|{xs!r}"

    code, src = recompile(prog.__code__)
    clone = types.FunctionType(code, prog.__globals__, "prog", None, prog.__closure__)
    for args in (([1, 2, 3], False), ([1, 2, 3], True), ([], True)):
        got, want = clone(*args), prog(*args)
        assert got[0] == want[0] and got[1:] == want[1:] if not isinstance(got[1], torch.Tensor) else True
        assert repr(got) == repr(want)


def test_exception_context_is_chained_in_handlers():
    def prog(d):
        try:
            return d["missing"]
        except KeyError:
            raise ValueError("no key")

    code, _ = recompile(prog.__code__)
    clone = types.FunctionType(code, prog.__globals__, "prog")
    with pytest.raises(ValueError) as info:
        clone({})
    assert isinstance(info.value.__context__, KeyError)


def test_generators_comprehensions_and_star_calls_round_trip():
    def prog(xs, k, **kw):
        t = sum(x * k for x in xs if x)

        def gen(n):
            for i in range(n):
                got = yield i * 2
                if got:
                    return got

        out = list(gen(3))
        it = gen(5)
        next(it)
        try:
            it.send(7)
        except StopIteration as e:
            out.append(e.value)
        d = {"x": 1, **kw, "y": t}
        return t, out, {a: b for a, b in d.items()}, dict(**d, z=3), [*xs, *out], f"{t!r:>6}|{k}"

    code, _ = recompile(prog.__code__)
    clone = types.FunctionType(code, prog.__globals__, "prog")
    assert clone([1, 2, 0, 3], 2, q=5) == prog([1, 2, 0, 3], 2, q=5)
    with pytest.raises(TypeError, match="got multiple values for keyword argument 'z'") as theirs:
        prog([1], 1, z=0, x=3)
    with pytest.raises(TypeError) as ours:
        clone([1], 1, z=0, x=3)
    assert str(ours.value) == str(theirs.value)

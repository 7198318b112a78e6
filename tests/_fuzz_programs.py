"""Seeded random programs for the differential fuzzer (``test_fuzz.py``); not a test module.

``generate(seed)`` writes the source of a small module: a prelude (module globals ``G0``
and ``GL``; a user class ``Box`` with instance attributes ``a`` (int) and ``b`` (tensor), a
class attribute, a mutating method and a property, and a subclass ``Sub`` using
``super()``; a dict subclass with ``__missing__``; an exception class with an attribute; a
``contextlib.contextmanager`` and a context-manager class that may swallow ``ValueError``;
fixed helpers with ``*args``, ``**kwargs``, recursion and a tensor generator), then a few
generated helper functions and generator functions, then ``prog(x, y, obj, lst, d)``.

Statements are drawn with ``random.Random(seed)`` from typed building blocks: every name
keeps one kind (tensor of shape (3,), 0-d tensor, int, float, bool, str, list of ints, dict
str -> int, set of ints, list of tensors, Box, iterator, closures), names bound in a block
are not used after it, loops are bounded and values kept small, so every program is valid
and quick.  They cover tensor arithmetic, views and in-place ops (aliases see them),
indexing, dtype changes and data-dependent shapes; Python arithmetic, comparisons,
containers (also defaultdict, Counter, OrderedDict), comprehensions, iterators, generators,
itertools/functools/heapq/operator; attribute reads, writes and deletes, the instance dict;
helpers mutating their arguments or raising; closures with ``nonlocal``, bound methods and
partials; branches on Python values and on tensors; ``break``/``continue``, loops changing
what they iterate; ``try``/``except``/``else``/``finally`` around operations that really
raise, exception chaining; ``with`` blocks; ``del``; global and class-attribute writes; now
and then a ``print`` or ``.item()`` (graph breaks).  Each program leans on three kinds of
statement drawn from the seed, for variety.

The writer lives in ``_fuzz_expressions.py`` (kinds, prelude, expressions, helpers) and
``_fuzz_statements.py`` (statements, the program, ``generate``); this module runs them.

``run_one(seed)`` runs the program eagerly and compiled by graphjit, four calls (inputs
0, the same again, inputs 1, inputs 0) on deep copies, and compares the results, the
arguments afterwards, the globals, stdout, grad mode, exceptions (type and message) and
which results are the very argument objects; graphjit's own errors count as mismatches.
``python tests/_fuzz_programs.py --start 0 --count 10000`` runs a range of seeds;
``--show SEED`` prints a program; ``--minimize SEED`` shrinks a mismatching one.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import copy
import io
import linecache
import random
import re
import signal
import sys
import threading
import time
import types
import warnings

import torch

import graphjit
from graphjit.testing import assert_equal

from _fuzz_expressions import KEYS
from _fuzz_statements import generate


# --------------------------------------------------------------------------------------
# running and comparing
# --------------------------------------------------------------------------------------

def make_inputs(seed: int, variant: int, ns: dict) -> tuple:
    """``(x, y, obj, lst, d)`` for ``seed``; inputs 1 differ from inputs 0 in values, list
    length, dict keys and sometimes the class of ``obj`` or its attributes (so the third
    call may need a new trace)."""
    r = random.Random(f"inputs {seed} {variant}")
    g = torch.Generator().manual_seed(seed * 2 + variant)
    x, y, b = (torch.randn(3, generator=g) for _ in range(3))
    cls = ns["Sub"] if variant and r.random() < 0.25 else ns["Box"]
    obj = cls(r.randint(-3, 5), b)
    if variant and r.random() < 0.3:
        obj.c = r.randint(0, 3)
    lst = [r.randint(-2, 6) for _ in range(r.randint(0, 4))]
    d = {k: r.randint(-2, 6) for k in KEYS if r.random() < 0.6}
    return x, y, obj, lst, d


def load(source: str, seed: int) -> dict:
    """Execute ``source`` as a fresh module (its lines registered with ``linecache``)."""
    filename = f"<fuzz {seed}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": f"fuzz_{seed}", "__builtins__": builtins, "__file__": filename}
    exec(compile(source, filename, "exec"), ns)
    return ns


def observable(value, box_cls: type):
    """``value`` with every Box replaced by ``(class name, [(attribute, value), ...])`` in
    the order of its ``__dict__`` (so assert_equal compares them by content)."""
    if isinstance(value, box_cls):
        return (type(value).__name__, [(k, observable(v, box_cls)) for k, v in vars(value).items()])
    if isinstance(value, (list, tuple)):
        return type(value)(observable(v, box_cls) for v in value)
    if isinstance(value, dict):
        return {k: observable(v, box_cls) for k, v in value.items()}
    return value


def identities(result, args) -> list:
    """Which returned values and Box attributes are the very objects of the arguments (or
    of each other): ``[(label, label of the first object with the same identity)]``."""
    labelled = [(f"arg{i}", a) for i, a in enumerate(args)]
    labelled += [(f"arg2.{k}", v) for k, v in vars(args[2]).items()]
    items = result if type(result) is tuple else (result,)
    labelled += [(f"ret[{i}]", v) for i, v in enumerate(items)]
    first, out = {}, []
    for label, v in labelled:
        if isinstance(v, (int, float, bool, str, type(None), tuple)):
            continue
        out.append((label, first.setdefault(id(v), label)))
    return out


def _globals_of(ns: dict) -> dict:
    """The state a program may change besides its arguments: globals and a class attribute."""
    state = {k: copy.deepcopy(v) for k, v in ns.items() if re.fullmatch(r"G\w*", k)}
    state["Box.scale"] = ns["Box"].__dict__["scale"]
    return state


def _set_globals(ns: dict, values: dict) -> None:
    """Put ``values`` back (lists in place: guards may check their identity)."""
    for k, v in values.items():
        if k == "Box.scale":
            ns["Box"].scale = v
        elif isinstance(ns.get(k), list) and isinstance(v, list):
            ns[k][:] = copy.deepcopy(v)
        else:
            ns[k] = copy.deepcopy(v)


class _Timeout(BaseException):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    if not seconds or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _run(fn, args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            return ("ok", fn(*args)), out.getvalue()
        except Exception as e:  # the program's exception is part of its behaviour
            return ("raised", e), out.getvalue()


def _drop_addresses(text: str) -> str:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def _compare(ns, fn, compiled, args) -> str | None:
    """Run ``fn`` and ``compiled`` on deep copies of ``args`` from the same globals; the
    first difference, or None.  Leaves the globals as eager left them."""
    box_cls = ns["Box"]
    start = _globals_of(ns)
    e_args, c_args = copy.deepcopy(args), copy.deepcopy(args)
    expected, e_out = _run(fn, e_args)
    e_grad = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    e_globals = _globals_of(ns)
    _set_globals(ns, start)
    actual, c_out = _run(compiled, c_args)
    c_grad = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    c_globals = _globals_of(ns)
    _set_globals(ns, e_globals)
    if actual[0] == "raised" and isinstance(actual[1], (graphjit.InternalError, graphjit.Unsupported)):
        return f"graphjit error: {type(actual[1]).__name__}: {actual[1]}"
    if actual[0] != expected[0]:
        return f"outcome differs: eager {expected[0]} {expected[1]!r}, compiled {actual[0]} {actual[1]!r}"
    try:
        if expected[0] == "raised":
            a, e = actual[1], expected[1]
            if type(a) is not type(e) or _drop_addresses(str(a)) != _drop_addresses(str(e)):
                return f"exception differs: eager {e!r}, compiled {a!r}"
        else:
            assert_equal(observable(actual[1], box_cls), observable(expected[1], box_cls), "result")
        assert_equal(observable(c_args, box_cls), observable(e_args, box_cls), "args after the call")
    except AssertionError as err:
        what = "result differs" if str(err).startswith("result") else "args differ"
        return f"{what}: {err}"
    if c_out != e_out:
        return f"stdout differs: eager {e_out!r}, compiled {c_out!r}"
    if c_grad != e_grad:
        return f"grad mode differs afterwards: eager {e_grad}, compiled {c_grad}"
    try:
        assert_equal(c_globals, e_globals, "globals")
    except AssertionError as err:
        return f"globals differ: {err}"
    if expected[0] == "ok":
        e_ids, c_ids = identities(expected[1], e_args), identities(actual[1], c_args)
        if e_ids != c_ids:
            diff = [f"{a} is {b} / {c}" for (a, b), (_, c) in zip(e_ids, c_ids) if b != c]
            return f"identity differs (eager / compiled): {diff or (e_ids, c_ids)}"
    return None


#: the calls each program gets: inputs 0, the same again (the cached entry), inputs 1,
#: inputs 0 once more (an older entry)
CALLS = (0, 0, 1, 0)


def run_one(seed: int, backend="eager", *, source: str | None = None, timeout: float = 60.0,
            calls: tuple = CALLS) -> str | None:
    """Run program ``seed`` (or ``source`` with ``seed``'s inputs) eagerly and compiled;
    None if they agree, else a description of the first difference."""
    source = generate(seed) if source is None else source
    graphjit.reset()
    ns = load(source, seed)
    try:
        fn = ns["prog"]
        compiled = graphjit.compile(fn, backend=backend)
        for k, variant in enumerate(calls):
            args = make_inputs(seed, variant, ns)
            try:
                with _time_limit(timeout), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # e.g. the recompile limit's
                    problem = _compare(ns, fn, compiled, args)
            except _Timeout:
                problem = f"timed out after {timeout} s"
            if problem is not None:
                return f"seed {seed}: call {k + 1} (inputs {variant}): {problem}"
        return None
    finally:
        graphjit.reset()
        linecache.cache.pop(f"<fuzz {seed}>", None)


def eager_outcome(seed: int) -> str:
    """'ok' or the name of the exception eager raises on inputs 0 (for the summary)."""
    ns = load(generate(seed), seed)
    (status, value), _ = _run(ns["prog"], make_inputs(seed, 0, ns))
    linecache.cache.pop(f"<fuzz {seed}>", None)
    return "ok" if status == "ok" else type(value).__name__


# --------------------------------------------------------------------------------------
# minimizing
# --------------------------------------------------------------------------------------

def _category(problem: str | None) -> str | None:
    """What kind of mismatch ``problem`` is, values left out (the minimizer keeps it)."""
    if problem is None:
        return None
    what = problem.split(": ", 2)[-1]
    if what.startswith("graphjit error"):
        return what.split(":")[1].strip()
    if what.startswith("outcome differs"):
        return what.split(", compiled")[0]
    return re.sub(r"-?\d+(\.\d*)?(?!\])", "N", ":".join(what.split(":")[:3]))


def _blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) of every statement with its indented body."""
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip())
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > ind):
            j += 1
        out.append((i, j))
    return out


def minimize(seed: int, backend="eager", source: str | None = None) -> str:
    """Greedily drop statements (and unwrap blocks) while the same kind of mismatch stays."""
    source = generate(seed) if source is None else source
    want = _category(run_one(seed, backend, source=source))
    if want is None:
        return source
    lines = source.splitlines()
    changed = True
    while changed:
        changed = False
        for start, end in reversed(_blocks(lines)):
            if end > len(lines) or lines[start].lstrip().startswith(("def prog", "import")):
                continue
            header = lines[start]
            candidates = [lines[:start] + lines[end:]]
            if end - start > 1 and header.rstrip().endswith(":") and \
                    header.lstrip().startswith(("if ", "with ", "for ", "while ", "else", "elif ", "try")):
                candidates.append(lines[:start] + [ln[4:] for ln in lines[start + 1:end]] + lines[end:])
            for cand in candidates:
                text = "\n".join(cand) + "\n"
                try:
                    if not isinstance(load(text, seed)["prog"], types.FunctionType):
                        continue  # (a decorator left behind now decorates prog)
                    problem = run_one(seed, backend, source=text, timeout=20)
                except Exception:  # noqa: BLE001  (a broken candidate: no Box.__init__...)
                    continue
                if _category(problem) == want:
                    lines, changed = cand, True
                    break
            if changed:
                break
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--backend", default="eager")
    p.add_argument("--show", type=int, help="print the program of this seed and exit")
    p.add_argument("--minimize", type=int, help="shrink the program of this mismatching seed")
    p.add_argument("--stats", action="store_true", help="also count eager outcomes")
    a = p.parse_args(argv)
    graphjit.config.debug_checks = True  # as in the tests
    if a.show is not None:
        print(generate(a.show), end="")
        return 0
    if a.minimize is not None:
        small = minimize(a.minimize, a.backend)
        print(small, end="")
        print("#", run_one(a.minimize, a.backend, source=small))
        return 0
    t0 = time.perf_counter()
    bad, outcomes = [], {}
    for seed in range(a.start, a.start + a.count):
        problem = run_one(seed, a.backend)
        if problem is not None:
            bad.append(seed)
            print(problem.splitlines()[0][:400], flush=True)
        if a.stats:
            o = eager_outcome(seed)
            outcomes[o] = outcomes.get(o, 0) + 1
    dt = time.perf_counter() - t0
    print(f"{a.count} programs (seeds {a.start}..{a.start + a.count - 1}), backend {a.backend}: "
          f"{len(bad)} mismatches in {dt:.1f} s ({dt / max(a.count, 1) * 1000:.0f} ms/program)")
    if outcomes:
        print("eager outcomes on inputs 0:", dict(sorted(outcomes.items(), key=lambda kv: -kv[1])))
    if bad:
        print("mismatching seeds:", " ".join(map(str, bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Registries filled on first use (issue 31, item 4): a library's, and a program's own cache.

* einops fills its backend registries (``einops._backends._loaded_backends``,
  ``_type2backend``) on its first call.  torch.compile calls einops once before its trace
  reads them (``_allow_in_graph_einops``, a lazy module init); graphjit does the same
  (``graphjit/library_setup.py``).  A compiled function making the process's first einops
  call, called twice: one graph, as torch.compile (measured side by side, both set up
  afresh as a new process is).  Without the set-up the first call's replayed writes fill
  the registry its trace guarded empty, and the second call retraces: two graphs.
* The world changes between calls: the registries emptied (a new dict, or the same dict
  cleared) or a different backend object registered for ``torch.Tensor``: the guard on the
  registry fails, the retrace follows eager (values, and the registries as eager leaves
  them); graph counts equal torch.compile's where both are counted.
* A rotary-frequency cache the program fills on first use (a module-level dict, a dict
  attribute, a tensor attribute grown when too short): the first call takes the "absent"
  path, the second the "present" one: two graphs, torch.compile's count too.  Not relaxed:
  the cached value may no longer be what the "absent" path computes (an entry replaced
  between calls, below: the compiled function reads the new one, as eager does).
* The persistent cache: a new process sets einops up before checking a written entry
  whose guard reads einops' registries, and loads it (without that, each new process
  missed: the entry was traced after the set-up).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing

import graphjit
from graphjit import library_setup
from _shared import counting_backend, graphs_traced
from graphjit.testing import assert_equal

einops = pytest.importorskip("einops", reason="needs einops: pip install -c constraints.txt -e '.[libs]'")
import einops._backends  # noqa: E402

BACKENDS = ("eager", "aot_eager")


def _x(seed: int) -> torch.Tensor:
    return torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(3100 + seed))


XS = [_x(0), _x(1), _x(2)]


def einops_ops(x):
    y = einops.rearrange(x, "b c (h w) -> b (c h) w", h=2)
    z = einops.reduce(y, "b c w -> b c", "mean")
    return einops.repeat(z, "b c -> b c r", r=2) + 1


def _empty_registries(monkeypatch) -> None:
    monkeypatch.setattr(einops._backends, "_type2backend", {})
    monkeypatch.setattr(einops._backends, "_loaded_backends", {})


def _registries() -> tuple:
    """What the registries hold, by name and type (the backend objects are new each fill)."""
    return ({k: type(v) for k, v in einops._backends._loaded_backends.items()},
            {k: type(v) for k, v in einops._backends._type2backend.items()})


@pytest.fixture
def new_process(monkeypatch):
    """einops as a new process has it: registries empty, neither graphjit's set-up nor
    torch.compile's run yet.  Returns a function that makes it so again."""
    rules = torch._dynamo.trace_rules
    decorators = torch._dynamo.decorators
    torch_setup = getattr(decorators, "_allow_in_graph_einops", None)

    def again():
        _empty_registries(monkeypatch)
        monkeypatch.setitem(library_setup._pending, "einops", [library_setup._einops_setup])
        if torch_setup is not None and hasattr(rules, "_lazy_module_init"):
            monkeypatch.setitem(rules._lazy_module_init, "einops", [torch_setup])

    again()
    return again


def _torch_compile_count(fn, inputs, between=None) -> int:
    torch._dynamo.reset()
    cnt = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(fn, backend=cnt)
    for i, x in enumerate(inputs):
        if between is not None and i:
            between(i)
        compiled(x)
    return cnt.frame_count


@pytest.mark.parametrize("backend", BACKENDS)
def test_einops_first_call_is_one_graph(new_process, backend):
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(einops_ops, backend=be)
    for x in XS:
        got = compiled(x)
        assert_equal(got, einops_ops(x))  # (eager after: the compiled call is the first)
    assert graphs_traced(cnt) == 1
    assert graphjit.stats()["graph_breaks"] == 0
    assert list(einops._backends._loaded_backends) == ["torch"]
    assert list(einops._backends._type2backend) == [torch.Tensor]


def test_einops_first_call_against_torch_compile(new_process):
    graphjit.reset()
    cnt, be = counting_backend("counter")
    compiled = graphjit.compile(einops_ops, backend=be)
    for x in XS:
        compiled(x)
    ours = graphs_traced(cnt)
    new_process()
    assert _torch_compile_count(einops_ops, XS) == ours == 1


def test_the_setup_runs_once_and_outside_the_trace(new_process):
    """The set-up is an eager call with real tensors (no fake mode, no graph node), run
    once: the registries are filled before the trace reads them."""
    graphjit.reset()
    cnt, be = counting_backend("counter")
    graphjit.compile(einops_ops, backend=be)(XS[0])
    assert "einops" not in library_setup._pending
    assert list(einops._backends._type2backend) == [torch.Tensor]  # (a fake tensor's type: not)
    assert "empty" not in cnt.graphs[0].code


class Logged(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def test_the_setup_is_not_seen_by_the_programs_mode(new_process, monkeypatch):
    """A compiled call made under the program's torch function mode: the mode sees what
    eager's first call shows it, not the set-up's call."""
    with Logged() as mode:
        want = einops_ops(XS[0])
    eager_names = mode.names
    _empty_registries(monkeypatch)
    graphjit.reset()
    compiled = graphjit.compile(einops_ops, backend="eager")
    with Logged() as mode:
        got = compiled(XS[0])
    assert_equal(got, want)
    assert mode.names == eager_names


@pytest.mark.parametrize("how", ["new dicts", "cleared"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_einops_registries_emptied_between_calls(new_process, monkeypatch, backend, how):
    """After the set-up and the first call, the program empties einops' registries: the
    retrace reads them empty, its replayed writes fill them as eager's call does."""

    def empty(_i=None):
        if how == "new dicts":
            _empty_registries(monkeypatch)
        else:
            einops._backends._loaded_backends.clear()
            einops._backends._type2backend.clear()

    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(einops_ops, backend=be)
    assert_equal(compiled(XS[0]), einops_ops(XS[0]))
    for x in XS[1:]:
        empty()
        got = compiled(x)
        after_compiled = _registries()
        empty()
        assert_equal(got, einops_ops(x))
        assert after_compiled == _registries() == ({"torch": type(einops._backends._loaded_backends["torch"])},
                                                   {torch.Tensor: type(einops._backends._loaded_backends["torch"])})
    ours = graphs_traced(cnt)
    assert ours == 2  # the registry emptied is another path; then filled, the first entry's
    new_process()
    assert _torch_compile_count(einops_ops, XS, between=empty) == ours


class DoublingBackend:
    """Another object registered as the tensor backend (not an einops subclass: einops'
    own lookup never makes one): its reshape doubles."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def reshape(self, x, shape):
        return self.inner.reshape(x, shape) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_another_backend_registered_between_calls(new_process, monkeypatch, backend):
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(einops_ops, backend=be)
    first = compiled(XS[0])
    assert_equal(first, einops_ops(XS[0]))
    plain = einops_ops(XS[1])
    real = einops._backends._type2backend[torch.Tensor]
    monkeypatch.setitem(einops._backends._type2backend, torch.Tensor, DoublingBackend(real))
    want = einops_ops(XS[1])
    assert not torch.equal(want, plain)
    assert_equal(compiled(XS[1]), want)
    monkeypatch.setitem(einops._backends._type2backend, torch.Tensor, real)
    assert_equal(compiled(XS[2]), einops_ops(XS[2]))


# -- a program's own cache, filled on first use ------------------------------------------

_FREQS: dict = {}


def _freqs(n):
    if n not in _FREQS:
        _FREQS[n] = torch.outer(torch.arange(n, dtype=torch.float32), torch.tensor([1.0, 0.5]))
    return _FREQS[n]


def rotary_global_dict(x):
    f = _freqs(x.shape[-2])
    return x * f.cos() + x.flip(-1) * f.sin()


class RotaryDictAttr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        n = x.shape[-2]
        if n not in self.cache:
            self.cache[n] = torch.outer(torch.arange(n, dtype=torch.float32), torch.tensor([1.0, 0.5]))
        return x * self.cache[n].cos()


class RotaryGrownTensor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = None

    def forward(self, x):
        n = x.shape[-2]
        if self.cached is None or self.cached.shape[0] < n:
            self.cached = torch.outer(torch.arange(n, dtype=torch.float32), torch.tensor([1.0, 0.5]))
        return x * self.cached[:n].sin()


def _cache_of(program):
    return _FREQS if program is rotary_global_dict else (
        program.cache if isinstance(program, RotaryDictAttr) else program.__dict__)


def _reset_cache(program) -> None:
    if program is rotary_global_dict:
        _FREQS.clear()
    elif isinstance(program, RotaryDictAttr):
        program.cache = {}
    else:
        program.cached = None


def _snapshot(program):
    if isinstance(program, RotaryGrownTensor):
        return None if program.cached is None else program.cached.clone()
    return {k: v.clone() for k, v in _cache_of(program).items()}


ROTARY = {"global_dict": rotary_global_dict, "dict_attr": RotaryDictAttr, "grown_tensor": RotaryGrownTensor}
R = [torch.randn(4, 2, generator=torch.Generator().manual_seed(3110 + i)) for i in range(3)]


def _program(name):
    p = ROTARY[name]
    return p() if isinstance(p, type) else p


def _run(program, fn, world=None):
    """Outputs and cache snapshots of three calls, ``world(i, program)`` before call i."""
    _reset_cache(program)
    seen = []
    for i, x in enumerate(R):
        if world is not None and i:
            world(i, program)
        seen.append((fn(x), _snapshot(program)))
    return seen


def _replace_entry(i, program):
    """Between calls the cached value is replaced by another (as a program that rescales
    its frequencies would): the next call must read the new one."""
    scaled = torch.full((4, 2), 0.25 * i)
    if isinstance(program, RotaryGrownTensor):
        program.cached = scaled
    else:
        _cache_of(program)[4] = scaled


def _empty(i, program):
    _reset_cache(program)


@pytest.mark.parametrize("world", [None, _replace_entry, _empty], ids=["same", "entry_replaced", "emptied"])
@pytest.mark.parametrize("name", sorted(ROTARY))
@pytest.mark.parametrize("backend", BACKENDS)
def test_rotary_cache_filled_on_first_use(backend, name, world):
    program = _program(name)
    want = _run(program, program, world)
    graphjit.reset()
    cnt, be = counting_backend(backend)
    got = _run(program, graphjit.compile(program, backend=be), world)
    assert_equal(got, want)
    assert graphjit.stats()["graph_breaks"] == 0
    if world is None:  # the "absent" path, then the "present" one: as torch.compile
        assert graphs_traced(cnt) == 2
        program = _program(name)
        _reset_cache(program)
        assert _torch_compile_count(program, R) == 2


# -- the persistent cache: a new process -------------------------------------------------

_CHILD = """
import json, torch, einops, graphjit
def f(x):
    y = einops.rearrange(x, "b c (h w) -> b (c h) w", h=2)
    return einops.reduce(y, "b c w -> b c", "mean")
xs = [torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(i)) for i in range(3)]
compiled = graphjit.compile(f, backend="eager")
got = [compiled(x) for x in xs]  # (the process's first einops calls)
same = all(torch.equal(g, f(x)) for g, x in zip(got, xs))
s = graphjit.stats()
print("RESULT " + json.dumps({"same": same, "recompiles": s["recompiles"], "hits": s["cache_hits"],
                              "misses": s["cache_misses"], "writes": s["cache_writes"]}))
"""


@pytest.mark.uncached("manages the persistent cache itself")
def test_a_new_process_loads_the_written_entry(tmp_path):
    """The entry was traced after einops' set-up; a new process sets einops up before
    checking its guard (which reads einops' registries): loaded, not traced again."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHJIT_")}
    env.update(PYTHONPATH=str(pathlib.Path(graphjit.__file__).parent.parent),
               GRAPHJIT_CACHE_DIR=str(tmp_path / "cache"), GRAPHJIT_CACHE_KEY_FILE=str(tmp_path / "key"))
    results = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        results.append(json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))[7:]))
    first, second = results
    assert first == {"same": True, "recompiles": 0, "hits": 0, "misses": 1, "writes": 1}, first
    assert second == {"same": True, "recompiles": 0, "hits": 1, "misses": 0, "writes": 0}, second

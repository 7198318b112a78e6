"""What a warm process's first call does to load an entry, and nothing more (issue 29,
item "warm first call / cold first call <= 0.10"): runtime objects found in their home
module without scanning graphjit's modules, each graph's code generated once (a body
inside a graph too), graphjit's sources' digest hashed beside the program, and the
``eager`` backend handed no fake inputs."""

from __future__ import annotations

import torch

import graphjit
from graphjit.backends import registry
from graphjit.cache import graphs, key, portable


def _scan() -> dict:
    return portable._runtime_registry()


def test_every_runtime_object_is_found_in_its_home_without_a_scan(monkeypatch):
    found = _scan()
    assert len(found) >= 10, found  # (the scan itself still works: the fallback)
    monkeypatch.setattr(portable, "_RUNTIME", {})
    monkeypatch.setattr(portable, "_runtime_registry", lambda: (_ for _ in ()).throw(AssertionError("scanned")))
    for qualname, obj in found.items():
        home = portable.runtime_home(obj)
        assert home is not None and home.startswith("graphjit."), qualname
        if "." in qualname:
            continue
        assert portable.runtime_object(qualname, home) is obj


def test_a_wrong_home_falls_back_to_the_scan(monkeypatch):
    qualname, obj = next((q, o) for q, o in _scan().items() if "." not in q)
    monkeypatch.setattr(portable, "_RUNTIME", {})
    assert portable.runtime_object(qualname, "graphjit.api") is obj
    monkeypatch.setattr(portable, "_RUNTIME", {})
    assert portable.runtime_object(qualname, "os") is obj  # (only graphjit's modules are homes)


def test_a_graph_with_a_body_generates_each_code_once(monkeypatch):
    def f(x):
        return torch.cond(x.sum() > 0, lambda y: y.sin() + 1, lambda y: y.cos() - 1, (x,))

    counter = graphjit.testing.CompileCounter()
    graphjit.compile(f, backend=counter, fullgraph=True)(torch.randn(3))
    gm = counter.graphs[0]
    record = graphs.graph_record(gm)
    assert sum(kind == "body" for _, kind, _ in record.attrs) == 2
    made = []
    real = torch.fx.GraphModule.recompile
    monkeypatch.setattr(torch.fx.GraphModule, "recompile", lambda self: made.append(self) or real(self))
    rebuilt = graphs.build_graph_module(record)
    assert len(made) == len({id(m) for m in made}) == 3  # the graph and its two bodies, once each
    x = torch.randn(3)
    assert torch.equal(rebuilt(x)[0] if isinstance(rebuilt(x), (tuple, list)) else rebuilt(x),
                       gm(x)[0] if isinstance(gm(x), (tuple, list)) else gm(x))
    assert rebuilt.code == gm.code


def test_the_digest_hashed_in_the_background_is_the_sources_digest():
    assert key.graphjit_digest() == key._compute_digest()
    key.prefetch_digest()  # (computed: starts nothing)
    assert key.graphjit_digest() == key._compute_digest()


def test_the_eager_backend_runs_the_graph():
    assert registry.eager.graphjit_runs_graph is True
    assert not getattr(registry.aot_eager, "graphjit_runs_graph", False)

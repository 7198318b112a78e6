"""TorchScript and other C++ callables in compiled code (issue 19, item 5).

* ``torch.jit.script``/``torch.jit.trace`` *functions* keep their Python original
  (``_torchdynamo_inline``), which is traced: one graph, as torch.compile gets.
* Script modules (scripted, traced, loaded, frozen) and ScriptFunctions without Python
  source run in the TorchScript interpreter: each call is one call in Python at a graph
  break (torch.compile breaks there too, or gives up on the frame), never an error.
* Pybind objects graphjit does not model (``ScriptMethod``) are called at a break.

Every program runs eagerly and compiled (``eager`` and ``aot_eager``, gradients where
there are parameters); graph and break counts are pinned next to torch.compile's.
"""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

import graphjit
from graphjit.testing import check_same
from _shared import counting_backend
from _vs_dynamo import dynamo_counts

BACKENDS = ["eager", "aot_eager"]
X = torch.randn(2, 3, generator=torch.Generator().manual_seed(19))


def _counts(fn, *args, fullgraph=False, calls=2):
    """graphjit's (graphs, breaks) for ``fn`` checked against eager by check_same."""
    cnt = check_same(fn, *args, fullgraph=fullgraph, calls=calls)
    return cnt.frame_count, graphjit.stats()["graph_breaks"]


# --------------------------------------------------------------------------------------
# script and traced functions: their Python is traced
# --------------------------------------------------------------------------------------

@torch.jit.script
def scripted(x):
    return x.sin() + 1


def _cos2(x):
    return x.cos() * 2


traced = torch.jit.trace(_cos2, (X,))


def calls_scripted(x):
    return scripted(x) * 2 + traced(x)


def test_script_and_traced_functions_are_one_graph():
    assert isinstance(scripted, torch.jit.ScriptFunction) and isinstance(traced, torch.jit.ScriptFunction)
    assert _counts(calls_scripted, X, fullgraph=True) == (1, 0)
    assert dynamo_counts(calls_scripted, X, fullgraph=True) == (1, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_script_function_ops_are_graph_nodes(backend):
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(calls_scripted, backend=be, fullgraph=True)
    torch.testing.assert_close(compiled(X), calls_scripted(X))
    code = cnt.graphs[0].code
    assert "sin" in code and "cos" in code


@torch.jit.script
def scripted_other(x):
    return x.tanh() - 1


def calls_global_script(x):
    return GLOBAL_SCRIPT(x) + 1


GLOBAL_SCRIPT = scripted


def test_replaced_script_function_recompiles():
    global GLOBAL_SCRIPT
    graphjit.reset()
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(calls_global_script, backend=be)
    try:
        torch.testing.assert_close(compiled(X), calls_global_script(X))
        GLOBAL_SCRIPT = scripted_other
        torch.testing.assert_close(compiled(X), calls_global_script(X))
        assert cnt.frame_count == 2
    finally:
        GLOBAL_SCRIPT = scripted


_CU = torch.jit.CompilationUnit("def double(x):\n    return x * 2\n")
DOUBLE = _CU.double


def calls_compilation_unit(x):
    y = x + 1
    return DOUBLE(y) - 1


def reads_compilation_unit(x):
    y = x + 1
    return _CU.double(y) - 1  # a pybind object's attribute, then its call: two breaks


def test_script_function_without_python_is_a_break():
    assert not hasattr(DOUBLE, "_torchdynamo_inline")
    assert _counts(calls_compilation_unit, X) == (2, 1)
    reasons = [str(r) for r in graphjit.stats()["break_reasons"]]
    assert reasons[0].startswith("TorchScript function without its Python source: call to "
                                 "torch.jit function double")
    # torch.compile refuses the global as it loads it, before the graph of ``x + 1``
    assert dynamo_counts(calls_compilation_unit, X) == (0, 1)
    assert _counts(reads_compilation_unit, X) == (2, 2)
    assert dynamo_counts(reads_compilation_unit, X) == (0, 0)  # it skips the frame


def _if_tracing_helper(x):
    return x * 3


if_tracing = torch.jit._script_if_tracing(_if_tracing_helper)


def calls_script_if_tracing(x):
    return if_tracing(x) + 1


def test_script_if_tracing_wrapper_is_traced():
    assert _counts(calls_script_if_tracing, X, fullgraph=True) == (1, 0)
    assert dynamo_counts(calls_script_if_tracing, X, fullgraph=True) == (1, 0)


# --------------------------------------------------------------------------------------
# script modules: one call in Python at a break
# --------------------------------------------------------------------------------------

class HoldsScript(nn.Module):
    """The issue's repro: a scripted submodule called from forward."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.pre = nn.Linear(3, 3)
        self.s = torch.jit.script(nn.Linear(3, 3))

    def forward(self, x):
        return self.s(self.pre(x).relu()).sigmoid()


def test_script_submodule_is_called_at_a_break():
    m = HoldsScript()
    assert _counts(m, X) == (2, 1)
    reasons = [str(r) for r in graphjit.stats()["break_reasons"]]
    assert reasons[0].startswith("call of a TorchScript module: RecursiveScriptModule Linear")
    # torch.compile gives up on the whole frame (it refuses script modules as it meets them)
    assert dynamo_counts(HoldsScript(), X) == (0, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_script_submodule_gradients(backend):
    m, ref = HoldsScript(), HoldsScript()
    compiled = graphjit.compile(m, backend=backend)
    for step in range(3):
        x = torch.randn(4, 3, generator=torch.Generator().manual_seed(step))
        for net, run in ((m, compiled), (ref, ref)):
            net.zero_grad()
            run(x).sum().backward()
        for p, q in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
        with torch.no_grad():  # the world changes: both modules' weights move
            for net in (m, ref):
                for p in net.parameters():
                    p.sub_(0.1 * p.grad)


class ReadsScriptAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = torch.jit.script(nn.Linear(3, 3))

    def forward(self, x):
        assert isinstance(self.s, nn.Module) and type(self.s) is torch.jit.RecursiveScriptModule
        y = x @ self.s.weight.t()  # an attribute of a script module: read in Python
        return y + self.s(x)


def test_script_module_attribute_read_is_a_break():
    assert _counts(ReadsScriptAttributes(), X) == (2, 2)


def _traced_linear():
    torch.manual_seed(1)
    return torch.jit.trace(nn.Linear(3, 3), (X,))


TRACED_MODULE = _traced_linear()


def calls_traced_module(x):
    return TRACED_MODULE(x + 1) * 2


def test_traced_module_is_called_at_a_break():
    assert _counts(calls_traced_module, X) == (2, 1)
    assert dynamo_counts(calls_traced_module, X) == (2, 1)


def _loaded_and_frozen():
    torch.manual_seed(2)
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(nn.Sequential(nn.Linear(3, 4), nn.ReLU())), buf)
    buf.seek(0)
    return torch.jit.load(buf), torch.jit.freeze(torch.jit.script(nn.Linear(4, 2)).eval())


LOADED, FROZEN = _loaded_and_frozen()


def calls_loaded_and_frozen(x):
    h = LOADED(x.abs())
    return FROZEN(h * 2).sum(-1)


def test_loaded_and_frozen_modules():
    assert _counts(calls_loaded_and_frozen, X) == (3, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_a_script_module_itself(backend):
    """torch.compile(script_module) raises RuntimeError; graphjit runs it as it is."""
    s = torch.jit.script(nn.Linear(3, 3))
    compiled = graphjit.compile(s, backend=backend)
    torch.testing.assert_close(compiled(X), s(X))
    torch.testing.assert_close(compiled(X + 1), s(X + 1))
    with pytest.raises(RuntimeError):
        torch._dynamo.reset()
        torch.compile(s, backend="eager")(X)
    torch._dynamo.reset()


class Blocks(nn.Module):
    """Called from eager code (the loop's ``print`` is a step break): each block's forward
    is compiled once for the three instances (generic modules), each block's script
    submodule called as it is; script modules are guarded by type, not identity, so the
    blocks share the entry."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([HoldsScript() for _ in range(3)])

    def forward(self, x):
        for block in self.blocks:
            print("block")
            x = block(x)
        return x


def test_script_submodules_of_generic_blocks_share_one_entry():
    assert _counts(Blocks(), X) == (3, 3)
    # one recompile only: the first block's input does not require grad, the others' do
    assert graphjit.stats()["recompiles"] == 1


SCRIPT_METHOD = torch.jit.script(nn.Linear(3, 3)).forward


def calls_script_method(x):
    return SCRIPT_METHOD(x + 1) - 1


def test_script_method_is_called_at_a_break():
    assert type(SCRIPT_METHOD) is torch._C.ScriptMethod
    assert _counts(calls_script_method, X) == (2, 1)

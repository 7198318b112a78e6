"""Distributed training: DDP (split at its gradient buckets), FSDP2, collectives as graph
nodes, against eager and torch.compile.

The multi-process tests share one world of two ranks (``_dist_world.World``: spawned
processes, gloo on 127.0.0.1, a free port, bounded waits, every process ended when the
module is done); the programs they run are in ``_dist_programs.py``.  Each program trains
or calls the same code eagerly and compiled on both ranks and compares gradients and
parameters after every step (on each rank), and returns its graph and break counts.
The bucket assignment itself is tested in this process on hand-made graphs.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.fx
from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState
from torch.nn.parallel import DistributedDataParallel as DDP

import graphjit
from graphjit.backends.registry import lookup_backend
from graphjit.distributed.buckets import assign_buckets, split_compiler
from graphjit.testing import CompileCounter, check_same
from graphjit.trace_rules import Rule, frame_rule, trace_rule

from _dist_world import RankFailed, World, free_port

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="torch.distributed with gloo is not available")

KB = 1000


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(200, 200)
        self.fc2 = torch.nn.Linear(200, 200)

    def forward(self, x):
        return torch.relu(self.fc2(torch.relu(self.fc1(x))))


class Layers(torch.nn.Module):
    """Five identical blocks of two 160 KB layers each."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer() for _ in range(5)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


# --------------------------------------------------------------------------------------
# the bucket assignment, in this process
# --------------------------------------------------------------------------------------

def chain(sizes, preamble=False, frozen=(), ignored=()):
    """``x -> x * w0.sum() -> ... -> x * wn.sum()`` with ``wi`` a parameter of ``sizes[i]``
    bytes (placeholders, as a generic module's parameters are)."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    params = []
    for i, size in enumerate(sizes):
        p = torch.nn.Parameter(torch.zeros(size // 4 // 4, 4), requires_grad=i not in frozen)
        if i in ignored:
            p._ddp_ignored = True
        params.append(p)
    weights = [g.placeholder(f"w{i}") for i in range(len(sizes))]
    h = g.call_function(torch.mul, (x, 2.0)) if preamble else x
    for w in weights:
        h = g.call_function(torch.mul, (h, g.call_function(torch.sum, (w,))))
    g.output((h,))
    return torch.fx.GraphModule(torch.nn.Module(), g), [torch.randn(2, 4), *params]


def bucket_sizes(gm, inputs, cap, first):
    return [b.size for b in assign_buckets(gm, inputs, cap, first)]


def test_buckets_fill_in_reverse_order_and_close_at_the_cap():
    gm, inputs = chain([400 * KB] * 4)
    # from the output back: w3, w2, w1 (1.2 MB >= 1 MB closes), then w0
    assert bucket_sizes(gm, inputs, 1000 * KB, 1000 * KB) == [400 * KB, 1200 * KB]


def test_first_bucket_has_its_own_cap():
    gm, inputs = chain([400 * KB] * 4)
    assert bucket_sizes(gm, inputs, 1000 * KB, 500 * KB) == [800 * KB, 800 * KB]
    assert bucket_sizes(gm, inputs, 10_000 * KB, 10_000 * KB) == [1600 * KB]


def test_frozen_and_ignored_parameters_do_not_count():
    gm, inputs = chain([400 * KB] * 4, frozen={3}, ignored={2})
    assert bucket_sizes(gm, inputs, 700 * KB, 700 * KB) == [800 * KB]


def test_a_preamble_without_parameters_joins_the_next_piece():
    gm, inputs = chain([400 * KB] * 3, preamble=True)
    buckets = assign_buckets(gm, inputs, 400 * KB, 400 * KB)
    assert [b.size for b in buckets] == [400 * KB, 400 * KB, 400 * KB]
    assert [n.target for n in reversed(buckets[0].nodes)][:3] == [torch.mul, torch.sum, torch.mul]


def test_split_compiler_calls_the_backend_once_per_bucket_and_keeps_the_results():
    gm, inputs = chain([400 * KB] * 4, preamble=True)
    counter = CompileCounter()
    compiled = split_compiler(counter, 1000 * KB, 500 * KB)(gm, inputs)
    assert counter.frame_count == 2
    torch.testing.assert_close(compiled(*inputs)[0], gm(*inputs)[0])
    one = CompileCounter()
    split_compiler(one, 10_000 * KB, 10_000 * KB)(gm, inputs)
    assert one.frame_count == 1 and one.graphs[0] is gm  # one bucket: the graph itself


def region_calls(gm: torch.fx.GraphModule) -> int:
    return sum(getattr(n.target, "__name__", "") == "invoke_region" for n in gm.graph.nodes)


def split_pieces(model, x, backend, reuse):
    """The pieces (ops, region calls) of ``model``'s graph split at 400 KB buckets, the
    region calls of the whole graph, and the output and gradients."""
    pieces, calls = CompileCounter(), []

    def piece_backend(gm, example_inputs):
        pieces(gm, example_inputs)
        return lookup_backend(backend)(gm, example_inputs)

    def backend_fn(gm, example_inputs):
        calls.append(region_calls(gm))
        return split_compiler(piece_backend, 400 * KB, 400 * KB)(gm, example_inputs)

    graphjit.reset()
    old, graphjit.config.reuse_repeated_blocks = graphjit.config.reuse_repeated_blocks, reuse
    try:
        out = graphjit.compile(model, backend=backend_fn)(x)
    finally:
        graphjit.config.reuse_repeated_blocks = old
    out.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    shape = [(sum(n.op == "call_function" for n in g.graph.nodes), region_calls(g)) for g in pieces.graphs]
    return shape, calls, out, grads


@pytest.mark.parametrize("backend", ["aot_eager"])  # (each piece with its own backward)
def test_repeated_blocks_are_inlined_for_the_split(backend):
    """A ``ModuleList`` of identical blocks is traced once (``config.reuse_repeated_blocks``:
    ``invoke_region`` calls of one body); DDP's buckets close inside blocks (two 160 KB
    layers each, 400 KB buckets), so the split inlines the calls first: the pieces are
    those of the graph traced block by block (torch.compile's), 4 here where cutting
    between whole blocks would make 3; output and gradients equal eager's."""
    torch.manual_seed(0)
    layers, x = Layers(), torch.randn(4, 200)
    shared, calls, out, grads = split_pieces(layers, x, backend, reuse=True)
    inline, inline_calls, _, _ = split_pieces(layers, x, backend, reuse=False)
    assert calls == [5] and inline_calls == [0]
    assert len(shared) == 4 and shared == inline, (shared, inline)
    expected = layers(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    for got, p in zip(grads, layers.parameters(), strict=True):
        torch.testing.assert_close(got, p.grad)


def test_ddp_and_fsdp_frames_are_library_rules():
    assert frame_rule(DDP.forward) is Rule.INTERCEPT and trace_rule(DDP.forward) is Rule.SKIP_FRAME
    assert frame_rule(DDP._run_ddp_forward) is Rule.INTERCEPT and trace_rule(DDP._run_ddp_forward) is None
    assert trace_rule(FSDPState._pre_forward) is Rule.DISABLE
    graphjit.trace_rules.clear_overrides()  # the user's overrides only
    assert trace_rule(DDP.forward) is Rule.SKIP_FRAME


def no_group_rank(x):
    return x + dist.get_rank()


def no_group_all_reduce(x):
    dist.all_reduce(x)
    return x


@pytest.mark.parametrize("fn", [no_group_rank, no_group_all_reduce])
def test_without_a_process_group_the_program_raises_eagers_error(fn):
    assert not dist.is_initialized()
    cnt = check_same(fn, torch.ones(2))  # (eager's ValueError, from the same instruction)
    assert cnt.frame_count == 0


# --------------------------------------------------------------------------------------
# two ranks
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world():
    w = World(2)
    yield w
    procs = list(w._procs)
    w.close()
    assert not any(p.is_alive() for p in procs), "a rank outlived the world"


def run(world, program, **kwargs):
    return world.run(f"_dist_programs:{program}", **kwargs)


def same_on_all_ranks(results):
    assert all(r == results[0] for r in results), results
    return results[0]


def test_a_failing_rank_is_reported_with_its_traceback(world):
    with pytest.raises(RankFailed, match="rank 0 fails on purpose"):
        run(world, "fails_on_rank_0")
    assert run(world, "ping") == [0, 1]  # the world goes on


@pytest.mark.slow
def test_a_rank_hung_in_a_collective_ends_the_world(world):
    with pytest.raises(RankFailed, match="did not finish within"):
        run(world, "fails_on_rank_0", then_wait=True)
    assert run(world, "ping") == [0, 1]  # a new world


@pytest.mark.parametrize("wrap", ["outer", "inner"])
def test_ddp_graphs_are_torch_compile_buckets(world, wrap):
    """``graphjit.compile(DDP(m))`` and ``DDP(graphjit.compile(m))``: one graph per bucket
    (1.6 MB of parameters, 1 MB buckets: 2), as torch.compile's; training equals eager DDP."""
    tc = same_on_all_ranks(run(world, "ddp_graphs_torch_compile", wrap=wrap))
    out = same_on_all_ranks(run(world, "ddp_train", wrap=wrap))
    assert tc == 2 and out["graphs"] == tc, (out, tc)
    assert out["breaks"] == 0, out


@pytest.mark.parametrize("cap_mb, layers", [(None, 10), (1, 25), pytest.param(2, 25, marks=pytest.mark.slow)])
def test_ddp_bucket_caps(world, cap_mb, layers):
    """Other caps and sizes (the default 25 MB cap keeps a 1 MB first bucket)."""
    tc = same_on_all_ranks(run(world, "ddp_graphs_torch_compile", cap_mb=cap_mb, layers=layers))
    out = same_on_all_ranks(run(world, "ddp_train", cap_mb=cap_mb, layers=layers, steps=2))
    assert out["graphs"] == tc, (out, tc)


def test_ddp_optimize_ddp_off_is_one_graph(world):
    out = same_on_all_ranks(run(world, "ddp_train", optimize_ddp=False))
    assert out["graphs"] == 1


def test_ddp_aot_eager_pieces_with_a_dynamic_batch(world):
    """With AOTAutograd each piece has its own backward (its bucket is reduced when it
    ends); a new batch size recompiles once with a symbolic batch, which the split graph
    passes to its pieces as an input of its own; gradients and parameters equal eager
    DDP's (``static_graph=True``)."""
    out = same_on_all_ranks(run(world, "ddp_train", backend="aot_eager", static_graph=True,
                                batches=(4, 6, 8, 3), steps=4))
    assert out["recompiles"] == 1 and out["graphs"] == 4, out


def test_ddp_no_sync_gradient_accumulation(world):
    out = same_on_all_ranks(run(world, "ddp_train", accumulate=2))
    assert out["graphs"] == 2


def test_ddp_find_unused_parameters(world):
    """A head unused on every other step: DDP's reducer finds it through the compiled
    graph's autograd graph; one entry (2 pieces) per head."""
    out = same_on_all_ranks(run(world, "ddp_train", model="two_heads", find_unused=True, steps=4))
    assert out["graphs"] == 4


def test_ddp_module_called_inside_a_compiled_function(world):
    out = same_on_all_ranks(run(world, "ddp_inside_traced_code"))
    assert out["breaks"] == 1 and "DistributedDataParallel's forward runs in Python" in out["reasons"][0]
    assert out["graphs"] == 4  # before, the two pieces of the wrapped module, after


@pytest.mark.parametrize("options", [dict(), dict(reshard=False), dict(mixed=True),
                                     dict(backend="aot_eager")],
                         ids=["reshard", "no_reshard", "bf16_params", "aot_eager"])
def test_fsdp2_trains_like_eager(world, options):
    """``fully_shard`` per block and on the root: the hooks run in Python, the root's
    forward and the blocks' shared forward are graphs, no DTensor is a graph input."""
    out = same_on_all_ranks(run(world, "fsdp_train", **options))
    assert out["graphs"] == 2 and out["entries"] == ["Block.forward", "Stack.forward"], out
    assert out["dtensor_inputs"] == 0 and out["recompiles"] == 0
    assert out["breaks"] == 1 and "FSDP2's hooks run in Python" in out["break_reasons"][0]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fsdp2_forward_whose_first_break_precedes_any_op(world, backend):
    """The root's ``forward`` starts with the loop over its sharded blocks (each call breaks
    at FSDP2's hooks): the loop runs in Python and a resume function compiles what follows
    it (the head); torch.compile skips that frame (a graph break in a loop) and compiles the
    blocks' forward only (as graphjit did before)."""
    out = same_on_all_ranks(run(world, "fsdp_train", model="loop_first", backend=backend))
    # the blocks' forward twice: the first block's input does not require grad, the others' do
    assert out["graphs"] == 3 and out["recompiles"] == 1, out
    assert out["entries"][:2] == ["Block.forward", "Block.forward"], out
    assert out["entries"][2].startswith("__resume_at_"), out  # the head, after the loop
    assert out["dtensor_inputs"] == 0, out
    assert not [name for name, _ in out["skipped"] if name.startswith("LoopFirst")], out
    assert out["breaks"] == 1 and "FSDP2's hooks run in Python" in out["break_reasons"][0], out
    # torch.compile: the blocks' two graphs, LoopFirst.forward skipped (graphjit before: the same)
    assert same_on_all_ranks(run(world, "fsdp_graphs_torch_compile", model="loop_first")) == 2


def test_fsdp2_torch_compile_makes_fewer_graphs(world):
    """(What torch.compile makes of the same model, for the record: graphjit compiles the
    blocks too.)"""
    assert same_on_all_ranks(run(world, "fsdp_graphs_torch_compile")) == 1


def test_collectives_are_graph_nodes(world):
    """c10d's in-place collectives and the functional ones: one graph under
    ``fullgraph=True`` (torch.compile: one), results equal eager's on both ranks."""
    out = same_on_all_ranks(run(world, "collectives"))
    for name, r in out.items():
        assert r["graphs"] == 1 == r["tc_graphs"] and r["breaks"] == 0, (name, r)
        if name != "rank_and_size":
            assert "_c10d_functional.wait_tensor" in r["ops"], (name, r)
    assert out["c10d_all_reduce"]["ops"] == ["_c10d_functional.all_reduce", "_c10d_functional.wait_tensor"]
    assert out["rank_and_size"]["ops"] == []


def test_async_collectives_and_barriers_break(world):
    out = same_on_all_ranks(run(world, "collectives", fullgraph=False))
    assert out["async_all_reduce"]["graphs"] == 2 == out["async_all_reduce"]["tc_graphs"]
    assert out["async_all_reduce"]["reasons"][0].startswith("async collective: torch.distributed.all_reduce")
    assert out["async_all_reduce"]["reasons"][1].startswith("collective work handle: Work.wait()")
    assert out["with_barrier"]["graphs"] == 2 == out["with_barrier"]["tc_graphs"]
    assert "torch.distributed.barrier: a barrier" in out["with_barrier"]["reasons"][0]


def test_c10d_collective_on_a_tensor_that_requires_grad_keeps_eagers_gradient(world):
    out = same_on_all_ranks(run(world, "c10d_on_grad_tensor"))
    assert out["grads"]["graphjit"] == out["grads"]["eager"] == [6.0] * 3, out
    assert out["grads"]["torch.compile"] == [12.0] * 3  # (the recorded difference)
    assert len(out["breaks"]) == 1 and out["breaks"][0].startswith("collective on a tensor that requires grad")


def test_process_group_identity_is_guarded(world):
    out = same_on_all_ranks(run(world, "group_guard"))
    assert out == {"graphs_after_each_call": [1, 1, 2], "recompiles": 1}


def test_broadcast_source_is_a_rank_of_the_group(world):
    out = same_on_all_ranks(run(world, "broadcast_in_group"))
    assert out == {"graphs": 3, "graphs_after_the_error": 4}, out  # (the error: the graph before the call)


def test_functional_collective_gradient(world):
    assert same_on_all_ranks(run(world, "funcol_gradient")) == 1


# --------------------------------------------------------------------------------------
# slow: a transformers model, inductor
# --------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("wrap", ["ddp", "fsdp2"])
def test_transformers_gpt2(world, wrap):
    """transformers' GPT-2 (tied input and output embeddings, a loss that logs a warning:
    a break) under DDP and FSDP2: parameters equal eager's after AdamW steps, graph counts
    equal torch.compile's."""
    pytest.importorskip("transformers")
    out = same_on_all_ranks(run(world, "gpt2_train", wrap=wrap, timeout=600))
    assert out["graphs"] == out["tc_graphs"], out
    assert out["recompiles"] == 0


@pytest.mark.slow
def test_ddp_inductor(world):
    """The split graph's pieces compiled by Inductor (each piece's inputs are the fake
    outputs AOTAutograd's first call gives for the previous one)."""
    out = same_on_all_ranks(run(world, "ddp_train", backend="inductor", steps=2, timeout=900))
    assert out["graphs"] == 2


EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                       "train_distributed.py")


def torchrun_example(wrap: str, compiler: str, steps: int = 4) -> tuple[list[float], int | None]:
    """The README's command (``torchrun --nproc-per-node 2 examples/train_distributed.py``)
    on a free port: each step's loss and the graph count it prints."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.path.dirname(graphjit.__path__[0]),
                                                                   os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
         "--master-port", str(free_port()), EXAMPLE, "--wrap", wrap, "--compiler", compiler, "--steps", str(steps)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:  # (torchrun and its ranks are one process group: none outlives the test)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    losses = [float(v) for v in re.findall(r"^step +\d+ +loss ([\d.]+)$", stdout, re.M)]
    assert len(losses) == steps and "(loss finite)" in stdout, stdout
    graphs = re.search(r"^(\d+) graphs", stdout, re.M)
    return losses, int(graphs.group(1)) if graphs else None


@pytest.mark.slow
@pytest.mark.parametrize("wrap", ["ddp", "fsdp2"])
def test_the_example_under_torchrun(wrap):
    """``examples/train_distributed.py`` under torchrun: the losses of graphjit, torch.compile
    and eager agree at every step; DDP: graphjit's graph count is torch.compile's (one graph
    per gradient bucket); FSDP2: graphjit makes graphs (torch.compile: the blocks')."""
    eager, _ = torchrun_example(wrap, "none")
    ours, graphs = torchrun_example(wrap, "graphjit")
    theirs, tc_graphs = torchrun_example(wrap, "torch")
    assert ours == eager == theirs, (ours, eager, theirs)
    assert graphs == tc_graphs if wrap == "ddp" else graphs >= 2, (graphs, tc_graphs)

"""TENSOR_MATCH: which parts a cache entry checks, by backend (differential + source)."""

from __future__ import annotations

import torch

import graphjit


def _guard_source(compiled) -> str:
    return compiled._entries[0].guard.source


def f(x, y):
    return x * 2 + y


def test_specializing_backend_checks_type_dtype_grad_sizes_strides_keys():
    compiled = graphjit.compile(f, backend="aot_eager")
    compiled(torch.ones(3), torch.ones(3))
    src = _guard_source(compiled)
    for part in ("type(x) is", "x.dtype is", "x.requires_grad is False", "x.shape ==",
                 "x.stride() ==", "___dispatch_keys(x) ==", "x is not y"):
        assert part in src, part


def test_eager_backend_leaves_out_strides_and_keys_it_does_not_depend_on():
    compiled = graphjit.compile(f, backend="eager")
    compiled(torch.ones(3, 3), torch.ones(3, 3))
    src = _guard_source(compiled)
    assert "x.shape ==" in src and "x.stride()" not in src and "___dispatch_keys(x)" not in src
    # a transposed (non-contiguous) input reuses the entry and still matches eager
    a, b = torch.randn(3, 3), torch.randn(3, 3)
    torch.testing.assert_close(compiled(a.t(), b), f(a.t(), b))
    assert graphjit.stats()["recompiles"] == 0


def test_eager_backend_keeps_strides_that_traced_code_read():
    def g(x):
        if x.is_contiguous():
            return x + 1
        return x - 1

    compiled = graphjit.compile(g, backend="eager", fullgraph=True)
    a = torch.randn(3, 3)
    torch.testing.assert_close(compiled(a), g(a))
    assert "x.stride() ==" in _guard_source(compiled)
    torch.testing.assert_close(compiled(a.t()), g(a.t()))  # other strides: recompiles
    assert graphjit.stats()["recompiles"] == 1


def test_inference_tensor_does_not_reuse_a_specialized_entry():
    compiled = graphjit.compile(f, backend="aot_eager")
    compiled(torch.ones(3), torch.ones(3))
    with torch.inference_mode():
        x, y = torch.ones(3), torch.ones(3)
    torch.testing.assert_close(compiled(x, y), f(x, y))
    assert graphjit.stats()["recompiles"] == 1

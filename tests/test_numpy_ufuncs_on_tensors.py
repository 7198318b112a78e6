"""numpy ufuncs applied to torch tensors in traced code (issue 31, item 5):
``variables/numpy_ufuncs.py`` traces ``np.sin(t)`` through ``torch._numpy`` with eager's
protocol (``Tensor.__array__`` in, ``Tensor.__array_wrap__`` out: a tensor result, ``bool``
as ``uint8``, numpy's dtype rules, new memory).

Compared with eager with the ``eager`` and ``aot_eager`` backends; graph counts against
torch.compile's.  torch.compile traces the same programs in one graph but returns an
``ndarray`` where eager returns a tensor (its result differs from eager: ``TORCH_WRONG``).
Where numpy computes in another dtype than ``torch._numpy`` (``np.sin`` of ``int16`` in
``float32``, ``np.true_divide`` of ints in ``float64``) the operands are cast first; where
that cannot agree (``np.reciprocal`` of ints) the call is a break.  A tensor that requires
grad (eager raises in ``__array__``) and a numpy function that is not a ufunc
(``np.mean(t)`` calls ``t.mean(axis=...)``: eager raises) stay breaks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import graphjit
from _breadth import case_tests
from _semantics import Case
from _shared import seeded_randn

#: eager's ``Tensor.__array_wrap__`` warns under numpy 2 (its signature); not ours to test
pytestmark = pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context:DeprecationWarning")

_r = seeded_randn(31500)
XS = [(_r(3, 4),), (_r(3, 4, seed=1),)]
INTS = [(torch.arange(6, dtype=torch.int32).reshape(2, 3),)]


def sin_plus_add(x):
    return np.sin(x) + np.add(x, 1)


def chained(x):
    return np.tanh(np.cos(x)) * 2 + np.exp2(x)


def comparison_is_uint8(x):
    return np.greater(x, 0), np.logical_and(x > 0, x < 1)


def int_promotion(i):
    return np.exp(i), np.add(i, 1.5), np.multiply(i, 2), np.true_divide(i, i + 1), np.add(i.float(), 1.5)


def small_int_loops(i):
    """numpy computes these in float32 or float16 (torch._numpy in float64): cast first."""
    i16 = i.to(torch.int16)
    return np.sin(i16), np.sqrt(i.to(torch.uint8)), np.arctan2(i16, i16 + 1), np.exp(i > 2)


def reciprocal_of_ints(i):
    return np.reciprocal(i + 1)


def arrays_of_int_tensors(i):
    """The same loop-dtype check for ufuncs and operators on ``t.numpy()`` arrays (int
    arrays divide in ``float64``; ``+a`` is a copy: a later write to ``t`` changes ``a``,
    which shares its memory, and not ``b``)."""
    t = i + 1
    a = t.numpy()
    b = +a
    out = (np.true_divide(a, a + 1), a / (a + 1), np.sin(a), a * 2, a > 2, -a, b)
    t.add_(1)
    return out, a


def zero_dim(x):
    return np.sqrt(np.abs(x[0, 0])), np.sin(x.sum())


def with_array_of_tensor(x):
    return np.maximum(x, x.numpy() * 0.5), np.arctan2(x, 2.0)


def result_is_new_memory(x):
    y = np.positive(x)
    y.add_(1)
    return x, y


def requires_grad_raises(w):
    return np.sin(w * 2)


def mean_is_not_a_ufunc(x):
    return np.mean(x)


CASES = [
    Case(sin_plus_add, XS),
    Case(chained, XS),
    Case(comparison_is_uint8, XS),
    Case(int_promotion, INTS),
    Case(small_int_loops, INTS),
    # numpy's integer loop (1 // x); torch._numpy's gives floats: a break, not a wrong dtype
    Case(reciprocal_of_ints, INTS, graphs=1, breaks=1),
    Case(arrays_of_int_tensors, INTS),
    Case(zero_dim, XS),
    Case(with_array_of_tensor, XS),
    Case(result_is_new_memory, XS),
    Case(requires_grad_raises, [(_r(3, 4).requires_grad_(True),)], graphs=1, breaks=1),
    Case(mean_is_not_a_ufunc, XS, graphs=0, breaks=1),
]

#: torch.compile returns ndarrays where eager returns tensors (``__array_wrap__``), gives
#: int arrays ``torch._numpy``'s dtypes (``a / b`` in ``float32``), and
#: computes ``np.mean(t)`` where eager raises (``t.mean(axis=None, ...)``)
TORCH_WRONG = {"sin_plus_add", "chained", "comparison_is_uint8", "int_promotion", "zero_dim",
               "with_array_of_tensor", "result_is_new_memory", "mean_is_not_a_ufunc", "requires_grad_raises",
               "small_int_loops", "reciprocal_of_ints", "arrays_of_int_tensors"}

test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile = \
    case_tests(CASES, torch_wrong=TORCH_WRONG)


def test_fullgraph_one_graph_where_torch_compile_has_one():
    for fn, inputs in [(sin_plus_add, XS), (chained, XS), (int_promotion, INTS)]:
        graphjit.reset()
        torch._dynamo.reset()
        graphs = []
        torch.compile(fn, backend=lambda gm, ex: (graphs.append(gm), gm.forward)[1], fullgraph=True)(*inputs[0])
        torch._dynamo.reset()
        from graphjit.testing import CompileCounter
        cnt = CompileCounter()
        graphjit.compile(fn, backend=cnt, fullgraph=True)(*inputs[0])
        assert cnt.frame_count == len(graphs) == 1


def test_keyword_argument_breaks_naming_the_ufunc():
    def with_out(x):
        return np.sin(x, out=None)

    graphjit.reset()
    with pytest.raises(graphjit.Unsupported) as info:
        graphjit.compile(with_out, backend="eager", fullgraph=True)(_r(3))
    assert "numpy.sin" in str(info.value) and "test_numpy_ufuncs_on_tensors.py" in str(info.value)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

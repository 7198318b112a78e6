"""Differential tests: straight-line tensor code, eager vs graphjit.

Each case runs through :func:`graphjit.testing.check_same` (eager and compiled, twice, on
deep copies; return values, mutated arguments, stdout and exceptions compared) and asserts
how many graphs were compiled: one graph, captured with ``fullgraph=True``, for code that
has no data-dependent control flow.
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F

import graphjit
from _shared import one_graph
from graphjit.testing import CompileCounter, check_same


def _r(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed + 7 * len(shape) + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype)


def _pos(*shape, seed=0):
    return _r(*shape, seed=seed).abs() + 0.5


def _ints(*shape, lo=1, hi=9, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randint(lo, hi, shape, generator=g)


def _bools(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + 100 + sum(shape))
    return torch.rand(*shape, generator=g) > 0.5


# --------------------------------------------------------------------------------------
# Binary arithmetic operators
# --------------------------------------------------------------------------------------

BINARY_FLOAT = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow,
}


@pytest.mark.parametrize("name", sorted(BINARY_FLOAT))
def test_binary_op_float(name):
    op = BINARY_FLOAT[name]

    def fn(x, y):
        return op(x, y)

    one_graph(fn, _pos(3, 4), _pos(3, 4, seed=1))


@pytest.mark.parametrize("op", ["&", "|", "^"])
def test_bitwise_on_bool(op):
    fns = {"&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b}
    f = fns[op]

    def fn(a, b):
        return f(a, b)

    one_graph(fn, _bools(5), _bools(5, seed=3))


def test_shifts_on_int():
    def fn(a, b):
        return a << b, a >> 1

    one_graph(fn, _ints(4), _ints(4, lo=0, hi=3))


def test_matmul_operator():
    def fn(a, b):
        return a @ b

    one_graph(fn, _r(3, 4), _r(4, 5))


def test_int_floordiv_mod_pow():
    def fn(a, b):
        return a // b, a % b, a ** 2

    one_graph(fn, _ints(6), _ints(6, seed=5))


def test_chain_of_arithmetic():
    def fn(x, y):
        z = (x + y) * 2 - x / 3
        return z * z + 1

    one_graph(fn, _r(4), _r(4, seed=2))


def test_broadcasting():
    def fn(x, b):
        return x * b + b

    one_graph(fn, _r(3, 4), _r(4))


# --------------------------------------------------------------------------------------
# In-place operator forms
# --------------------------------------------------------------------------------------

def test_iadd_mutates_input():
    def fn(x, y):
        x += y
        return x

    one_graph(fn, _r(3), _r(3, seed=1))


def test_isub_imul_itruediv_on_input():
    def fn(x, y):
        x -= y
        x *= 2
        x /= 4
        return x * 1

    one_graph(fn, _r(3), _r(3, seed=1))


def test_iadd_local_temp():
    def fn(x, y):
        z = x * 1
        z += y
        return z

    one_graph(fn, _r(3), _r(3, seed=1))


def test_imatmul():
    def fn(x, w):
        x @= w
        return x

    one_graph(fn, _r(2, 3), _r(3, 3))


def test_ipow_ifloordiv_imod():
    def fn(x):
        x **= 2
        x //= 3
        x %= 5
        return x

    one_graph(fn, _ints(5))


def test_iand_ior_on_bool():
    def fn(a, b):
        a &= b
        c = a.clone()
        c |= b
        return a, c

    one_graph(fn, _bools(6), _bools(6, seed=4))


def test_iadd_python_scalar():
    def fn(x):
        x += 1.5
        return x

    one_graph(fn, _r(4))


# --------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------

COMPARE = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
           "eq": operator.eq, "ne": operator.ne}


@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare_tensor_tensor(name):
    op = COMPARE[name]

    def fn(x, y):
        return op(x, y)

    x = _ints(8)
    one_graph(fn, x, _ints(8, seed=11))


@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare_tensor_scalar(name):
    op = COMPARE[name]

    def fn(x):
        return op(x, 4)

    one_graph(fn, _ints(8))


def test_compare_scalar_on_left():
    def fn(x):
        return 0.0 < x, 1 == x

    one_graph(fn, _r(5))


# --------------------------------------------------------------------------------------
# Unary operators and reflected operators with Python scalars
# --------------------------------------------------------------------------------------

def test_neg():
    one_graph(lambda x: -x, _r(4))


def test_pos():
    def fn(x):
        return +x

    one_graph(fn, _r(4))


def test_invert_bool():
    def fn(m):
        return ~m

    one_graph(fn, _bools(5))


def test_invert_int():
    def fn(m):
        return ~m

    one_graph(fn, _ints(5))


def test_builtin_abs():
    def fn(x):
        return abs(x)

    one_graph(fn, _r(5))


@pytest.mark.parametrize("expr", ["2 - x", "1 / x", "2 ** x", "3 * x", "1 + x", "7 // x",
                                  "7 % x", "10.0 - x * 2"])
def test_reflected_scalar_ops(expr):
    fn = eval(f"lambda x: {expr}")
    one_graph(fn, _pos(5))


@pytest.mark.parametrize("expr", ["x ** 2", "x ** 0.5", "x // 2", "x % 3", "x / 2",
                                  "x - 1", "x * True"])
def test_scalar_on_right(expr):
    fn = eval(f"lambda x: {expr}")
    one_graph(fn, _pos(5))


# --------------------------------------------------------------------------------------
# torch.* functions
# --------------------------------------------------------------------------------------

def test_torch_relu():
    one_graph(lambda x: torch.relu(x), _r(6))


def test_torch_cat_list():
    def fn(a, b):
        return torch.cat([a, b])

    one_graph(fn, _r(2, 3), _r(4, 3))


def test_torch_cat_dim_kwarg_tuple():
    def fn(a, b):
        return torch.cat((a, b), dim=1)

    one_graph(fn, _r(2, 3), _r(2, 5))


def test_torch_stack():
    def fn(a, b):
        return torch.stack([a, b, a], dim=0)

    one_graph(fn, _r(3), _r(3, seed=1))


def test_torch_where():
    def fn(x, y):
        return torch.where(x > 0, x, y)

    one_graph(fn, _r(6), _r(6, seed=1))


def test_torch_where_scalar():
    def fn(x):
        return torch.where(x > 0, x, 0.0)

    one_graph(fn, _r(6))


def test_torch_matmul():
    one_graph(lambda a, b: torch.matmul(a, b), _r(2, 3, 4), _r(4, 2))


def test_torch_einsum():
    def fn(a, b):
        return torch.einsum("bij,bjk->bik", a, b)

    one_graph(fn, _r(2, 3, 4), _r(2, 4, 5))


def test_torch_softmax():
    one_graph(lambda x: torch.softmax(x, dim=-1), _r(3, 5))


def test_torch_zeros_like_ones_like():
    def fn(x):
        return torch.zeros_like(x) + torch.ones_like(x) * x

    one_graph(fn, _r(3, 2))


def test_torch_arange():
    def fn(x):
        return x + torch.arange(4)

    one_graph(fn, _r(2, 4))


def test_torch_arange_from_shape():
    def fn(x):
        return torch.arange(x.shape[0], dtype=x.dtype) * x

    one_graph(fn, _r(5))


def test_torch_ones_3():
    def fn(x):
        return x + torch.ones(3)

    one_graph(fn, _r(3))


def test_torch_zeros_dtype():
    def fn(x):
        return torch.zeros(2, 3, dtype=torch.int64) + x

    one_graph(fn, _ints(2, 3))


def test_torch_full():
    def fn(x):
        return torch.full((2, 3), 7.0) * x

    one_graph(fn, _r(2, 3))


def test_torch_max_dim_values_indices():
    def fn(x):
        m = torch.max(x, dim=1)
        return m.values, m.indices

    one_graph(fn, _r(4, 5))


def test_torch_max_dim_unpack():
    def fn(x):
        values, idx = torch.max(x, 0)
        return values * 2, idx

    one_graph(fn, _r(4, 5))


def test_torch_max_namedtuple_returned():
    def fn(x):
        return torch.max(x, dim=1)

    cnt = check_same(fn, _r(3, 4), fullgraph=True)
    assert cnt.frame_count == 1


def test_torch_split_unpack():
    def fn(x):
        a, b = torch.split(x, 2)
        return b - a

    one_graph(fn, _r(4, 3))


def test_torch_split_sizes():
    def fn(x):
        a, b, c = torch.split(x, [1, 2, 3], dim=1)
        return a.sum() + b.sum() + c.sum()

    one_graph(fn, _r(2, 6))


def test_torch_chunk_unpack():
    def fn(x):
        q, k, v = torch.chunk(x, 3, dim=-1)
        return q * k + v

    one_graph(fn, _r(2, 9))


def test_tensor_chunk_method_starred():
    def fn(x):
        first, *rest = x.chunk(3)
        return first, rest

    one_graph(fn, _r(6, 2))


def test_torch_topk():
    def fn(x):
        v, i = torch.topk(x, 2)
        return v, i

    one_graph(fn, _r(3, 6))


def test_torch_reductions():
    def fn(x):
        return torch.sum(x), torch.mean(x, dim=0), x.amax(-1), torch.argmax(x, dim=1)

    one_graph(fn, _r(3, 4))


def test_torch_pointwise_chain():
    def fn(x):
        return torch.tanh(torch.exp(torch.sigmoid(x))) + torch.clamp(x, -0.5, 0.5)

    one_graph(fn, _r(10))


def test_torch_addmm_bmm():
    def fn(b, a, w, p, q):
        return torch.addmm(b, a, w), torch.bmm(p, q)

    one_graph(fn, _r(3), _r(2, 4), _r(4, 3), _r(2, 3, 4), _r(2, 4, 2))


def test_torch_flatten_squeeze():
    def fn(x):
        return torch.flatten(x, 1), torch.squeeze(x, 1)

    one_graph(fn, _r(2, 1, 3))


def test_torch_tensor_constant():
    def fn(x):
        return x * torch.tensor([1.0, 2.0, 3.0])

    one_graph(fn, _r(3))


def test_torch_eye_linspace():
    def fn(x):
        return x @ torch.eye(3) + torch.linspace(0, 1, 3)

    one_graph(fn, _r(2, 3))


# --------------------------------------------------------------------------------------
# torch.nn.functional
# --------------------------------------------------------------------------------------

def test_F_relu():
    one_graph(lambda x: F.relu(x), _r(5))


@pytest.mark.parametrize("approx", ["none", "tanh"])
def test_F_gelu(approx):
    def fn(x):
        return F.gelu(x, approximate=approx)

    one_graph(fn, _r(5))


def test_F_linear_bias():
    one_graph(lambda x, w, b: F.linear(x, w, b), _r(2, 4), _r(3, 4), _r(3))


def test_F_linear_no_bias():
    one_graph(lambda x, w: F.linear(x, w), _r(2, 4), _r(3, 4))


def test_F_softmax_dim():
    one_graph(lambda x: F.softmax(x, dim=-1), _r(2, 5))


def test_F_log_softmax():
    one_graph(lambda x: F.log_softmax(x, 1), _r(2, 5))


def test_F_layer_norm():
    def fn(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)

    one_graph(fn, _r(2, 3, 4), _r(4), _r(4, seed=1))


def test_F_dropout_eval():
    def fn(x):
        return F.dropout(x, p=0.5, training=False)

    one_graph(fn, _r(3, 4))


def test_F_conv2d():
    def fn(x, w, b):
        return F.conv2d(x, w, b, stride=1, padding=1)

    one_graph(fn, _r(1, 2, 5, 5), _r(3, 2, 3, 3), _r(3))


def test_F_cross_entropy():
    def fn(logits, target):
        return F.cross_entropy(logits, target)

    one_graph(fn, _r(4, 5), torch.tensor([0, 3, 1, 4]))


def test_F_mse_loss():
    one_graph(lambda a, b: F.mse_loss(a, b, reduction="sum"), _r(4), _r(4, seed=1))


def test_F_misc():
    def fn(x):
        return F.silu(x), F.normalize(x, dim=-1), F.pad(x, (1, 1))

    one_graph(fn, _r(2, 4))


def test_F_pooling():
    def fn(x):
        return F.max_pool2d(x, 2), F.avg_pool2d(x, kernel_size=2)

    one_graph(fn, _r(1, 1, 4, 4))


def test_F_embedding():
    def fn(idx, table):
        return F.embedding(idx, table)

    one_graph(fn, torch.tensor([[0, 2], [1, 1]]), _r(3, 4))


# --------------------------------------------------------------------------------------
# Tensor methods
# --------------------------------------------------------------------------------------

def test_sum_dim_keepdim():
    one_graph(lambda x: x.sum(dim=1, keepdim=True), _r(3, 4))


def test_view_minus_one():
    one_graph(lambda x: x.view(-1), _r(3, 4))


def test_reshape_from_shape():
    def fn(x):
        return x.reshape(x.shape[0], -1)

    one_graph(fn, _r(2, 3, 4))


def test_permute_transpose():
    def fn(x):
        return x.permute(2, 0, 1), x.transpose(0, 1)

    one_graph(fn, _r(2, 3, 4))


def test_T_and_mT():
    def fn(x, y):
        return x.T * 1, y.mT * 1

    one_graph(fn, _r(2, 3), _r(4, 2, 3))


def test_contiguous_after_transpose():
    def fn(x):
        return x.t().contiguous().view(-1)

    one_graph(fn, _r(3, 4))


def test_dtype_conversions():
    def fn(x):
        return x.float(), x.to(torch.float64), x.double() * 2, x.long(), x.half()

    one_graph(fn, _ints(4))


def test_to_dtype_kwarg():
    def fn(x):
        return x.to(dtype=torch.int32)

    one_graph(fn, _r(4) * 10)


def test_to_other_tensor_dtype():
    def fn(x, y):
        return x.to(y.dtype) + y

    one_graph(fn, _ints(4), _r(4, dtype=torch.float64))


def test_clone():
    def fn(x):
        y = x.clone()
        y.add_(1)
        return y

    one_graph(fn, _r(3))


def test_unsqueeze_expand():
    def fn(x):
        return x.unsqueeze(0).expand(3, -1) + 0

    one_graph(fn, _r(4))


def test_repeat():
    one_graph(lambda x: x.repeat(2, 3), _r(2, 2))


def test_masked_fill():
    def fn(x, m):
        return x.masked_fill(m, float("-inf"))

    one_graph(fn, _r(3, 3), _bools(3, 3))


def test_clamp_min_kwarg():
    def fn(x):
        return x.clamp(min=0.1), x.clamp(max=0.0), x.clamp_min(0.0)

    one_graph(fn, _r(6))


def test_add_inplace_on_input():
    def fn(x, y):
        x.add_(y)
        return x * 2

    one_graph(fn, _r(3), _r(3, seed=1))


def test_add_inplace_alpha():
    def fn(x, y):
        x.add_(y, alpha=0.5)
        return x

    one_graph(fn, _r(3), _r(3, seed=1))


def test_mul_inplace_on_input_no_return():
    def fn(x):
        x.mul_(3)

    one_graph(fn, _r(3))


def test_zero_inplace():
    def fn(x, y):
        x.zero_()
        return y + 1

    one_graph(fn, _r(3), _r(3, seed=1))


def test_inplace_on_input_then_reads_see_mutation():
    def fn(x):
        before = x * 1
        x.mul_(2)
        after = x + 0
        return before, after

    one_graph(fn, _r(3))


def test_new_zeros_new_ones():
    def fn(x):
        return x.new_zeros(2, 3), x.new_ones((4,)), x.new_full((2,), 3.0)

    one_graph(fn, _r(1, dtype=torch.float64))


def test_method_chain():
    def fn(x):
        return x.abs().sqrt().log1p().mean(dim=-1).neg()

    one_graph(fn, _r(3, 4))


def test_type_as_and_flatten():
    def fn(x, y):
        return x.type_as(y).flatten()

    one_graph(fn, _ints(2, 2), _r(1))


# --------------------------------------------------------------------------------------
# Metadata (constants at trace time)
# --------------------------------------------------------------------------------------

def test_shape_in_arithmetic():
    def fn(x):
        n, d = x.shape
        return x * n + d

    one_graph(fn, _r(3, 4))


def test_size_dim_ndim_numel():
    def fn(x):
        return x + x.size(0) + x.dim() + x.ndim + x.numel() + x.size()[-1]

    one_graph(fn, _r(2, 3))


def test_shape_returned():
    def fn(x):
        return x * 2, x.shape, x.size(1), x.dtype, x.device

    one_graph(fn, _r(2, 3))


def test_len_tensor():
    def fn(x):
        return x / len(x)

    one_graph(fn, _r(5, 2))


def test_scale_by_sqrt_last_dim():
    def fn(q, k):
        return (q @ k.transpose(-2, -1)) / k.shape[-1] ** 0.5

    one_graph(fn, _r(2, 3, 8), _r(2, 3, 8, seed=1))


def test_is_floating_point_branch():
    def fn(x):
        if x.is_floating_point():
            return x * 0.5
        return x * 2

    one_graph(fn, _r(3))
    one_graph(fn, _ints(3))


def test_dtype_branch():
    def fn(x):
        if x.dtype == torch.float32:
            return x + 1
        return x - 1

    one_graph(fn, _r(3))


def test_device_in_factory():
    def fn(x):
        return x + torch.zeros(x.shape, device=x.device, dtype=x.dtype)

    one_graph(fn, _r(2, 2))


# --------------------------------------------------------------------------------------
# Indexing
# --------------------------------------------------------------------------------------

INDEX_EXPRS = ["x[0]", "x[:, 1]", "x[..., :2]", "x[None]", "x[1:3, ::2]", "x[-1, -2:]",
               "x[:, None, 1]", "x[1][2]"]


@pytest.mark.parametrize("expr", INDEX_EXPRS)
def test_getitem(expr):
    fn = eval(f"lambda x: ({expr}) * 1")
    one_graph(fn, _r(4, 5))


def test_index_with_tensor():
    def fn(x, idx):
        return x[idx]

    one_graph(fn, _r(5, 2), torch.tensor([4, 0, 2]))


def test_index_with_mask_is_data_dependent():
    """``x[m]`` with a bool mask has a data-dependent size: under fullgraph it is one graph
    with an unbacked size, as torch.compile captures it (fullgraph allows scalar outputs);
    without, the same result as eager."""
    def fn(x, m):
        return x[m]

    x, m = _r(6), _bools(6)
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt, fullgraph=True)
    torch.testing.assert_close(compiled(x, m), fn(x, m))
    assert cnt.frame_count == 1
    check_same(fn, x, m)  # not fullgraph: same result as eager


def test_setitem_scalar():
    def fn(x):
        x[0] = 5
        return x + 1

    one_graph(fn, _r(3, 2))


def test_setitem_slice_tensor():
    def fn(x, v):
        y = x.clone()
        y[:, 1:3] = v
        return y

    one_graph(fn, _r(2, 4), _r(2, 2))


def test_augmented_setitem():
    def fn(x):
        x[:, 0] += 1
        return x

    one_graph(fn, _r(3, 3))


def test_getitem_on_tuple_from_shape():
    def fn(x):
        return x.view(x.shape[0] * x.shape[1], x.shape[2])

    one_graph(fn, _r(2, 3, 4))


# --------------------------------------------------------------------------------------
# Exceptions raised by tensor code behave as in eager mode
# --------------------------------------------------------------------------------------

def test_shape_mismatch_raises_same_error():
    def fn(x, y):
        return x + y

    check_same(fn, _r(3), _r(4))


def test_matmul_shape_mismatch_raises_same_error():
    def fn(x, w):
        y = x * 2
        return y @ w

    check_same(fn, _r(2, 3), _r(4, 5))

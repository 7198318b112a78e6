"""``torch.Tensor._make_subclass(cls, data, require_grad)`` in traced code (issue 31, item
3): the polyfill ``polyfills/tensor.py`` traces it as TorchDynamo's does (``detach``,
``requires_grad`` as asked, ``as_subclass``).

The programs: a plain subclass and a Parameter subclass made from a tensor (the result
keeps its type where it leaves the graph, and ``return t, t`` gives one object), a
subclass whose ``__new__`` calls it (the ``Buffer`` shim and ``ModeTensor`` of PyTorch's
tests pass ``data.requires_grad``), one whose ``__new__`` then sets attributes on the new
object (quantized tensors do: read back in the trace, set on the object the compiled code
returns), ``cls=torch.Tensor``, ``require_grad=`` by keyword.
Asking for a ``requires_grad`` the detached data does not have is a graph break in both
systems (torch.compile: "setattr() on Tensor.requires_grad").  Each is compared with eager
with the ``eager`` and ``aot_eager`` backends and its graph count against torch.compile's.
"""

from __future__ import annotations

import pytest
import torch

import graphjit
from _breadth import case_tests
from _semantics import Case
from _shared import seeded_randn
from _torch_compile_releases import on_release
from graphjit.testing import CompileCounter

#: the persistent cache cannot name ``Tensor._make_subclass`` (a C static method: no
#: ``__module__``, ``__self__`` None), which the entries' guards and code hold: not written
pytestmark = pytest.mark.cache_limits("_make_subclass", "builtin_function_or_method by identity")

_r = seeded_randn(31300)
XS = [(_r(3, 4),), (_r(3, 4, seed=1),)]


class Plain(torch.Tensor):
    pass


class MyParam(torch.nn.Parameter):
    pass


class Buffer(torch.Tensor):
    """A ``Buffer`` shim as libraries write it for older torch releases."""

    def __new__(cls, data=None):
        if data is None:
            data = torch.empty(0)
        return torch.Tensor._make_subclass(cls, data, data.requires_grad)


class Scaled(torch.Tensor):
    """A quantization-style tensor: ``_make_subclass`` then attributes set in ``__new__``."""

    def __new__(cls, data, scale, original_dtype):
        instance = torch.Tensor._make_subclass(cls, data, require_grad=False)
        instance.scale = scale
        instance.original_dtype = original_dtype
        return instance

    def dequantize(self):
        return self.as_subclass(torch.Tensor) * self.scale


def attributes_set_in_new(x):
    s = Scaled(x * 4, x.abs().max(), torch.float32)
    return s.dequantize(), s.scale, s.original_dtype, s


def only_the_object(x):
    return Scaled(x * 4, x.abs().max(), torch.float32)


def plain_subclass(x):
    t = torch.Tensor._make_subclass(Plain, x, False)
    return t, type(t) is Plain, t * 2


def parameter_subclass(x):
    p = torch.Tensor._make_subclass(MyParam, x)
    return p, p, isinstance(p, torch.nn.Parameter), p.requires_grad


def through_new(x):
    b = Buffer(x + 1)
    return b.sum(), b


def to_plain_tensor(x):
    t = torch.Tensor._make_subclass(torch.Tensor, x, require_grad=False)
    return t + 1, t.requires_grad


def shares_storage(x):
    t = torch.Tensor._make_subclass(Plain, x)
    t.add_(1)  # (the subclass view shares x's storage: x changes too)
    return t


def new_leaf_requiring_grad(x):
    return torch.Tensor._make_subclass(MyParam, x * 2, True)


CASES = [
    Case(plain_subclass, XS),
    Case(attributes_set_in_new, XS),
    Case(only_the_object, XS),
    Case(parameter_subclass, XS),
    Case(through_new, XS),
    Case(to_plain_tensor, XS),
    Case(shares_storage, XS),
    Case(new_leaf_requiring_grad, XS, graphs=1, breaks=1),
]

#: torch.compile's polyfill names the flag ``requires_grad`` and asserts that no other
#: keyword is passed: ``require_grad=`` (the C function's name) gives the frame up
RELATION = {"to_plain_tensor": "torch_none",
            # torch.compile's trace sees an exception eager does not raise ("Observed
            # exception") and gives the frame up
            "only_the_object": "torch_none"}
#: torch.compile 2.14 raises a NameError from its own generated code (2.13 gives eager's result)
TORCH_WRONG = on_release(v2_13=set(), v2_14={"shares_storage"})

test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile = \
    case_tests(CASES, RELATION, TORCH_WRONG)


def test_one_object_for_one_make_subclass():
    graphjit.reset()
    x = _r(3)
    p, q, *_ = graphjit.compile(parameter_subclass, backend=CompileCounter(), fullgraph=True)(x)
    assert p is q and type(p) is MyParam and p.data_ptr() == x.data_ptr()


def test_attributes_of_the_new_object_as_in_eager():
    graphjit.reset()
    x = _r(3)
    s = graphjit.compile(only_the_object, backend=CompileCounter(), fullgraph=True)(x)
    e = only_the_object(x)
    assert type(s) is Scaled and sorted(vars(s)) == sorted(vars(e)) == ["original_dtype", "scale"]
    assert torch.equal(s.scale, e.scale) and s.original_dtype is torch.float32


def test_requires_grad_change_names_the_users_line():
    graphjit.reset()
    with pytest.raises(graphjit.Unsupported) as info:
        graphjit.compile(new_leaf_requiring_grad, backend="eager", fullgraph=True)(_r(3))
    assert "test_make_subclass.py" in str(info.value) and "requires_grad" in str(info.value)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

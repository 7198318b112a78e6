"""gpytorch's ExactGP on a new input size every call (issue 21: the third call, after the
dynamic recompile, crashed with "SymIntArrayRef expected to contain only concrete
integers": a ``torch.Size`` slice stored on a distribution made in compiled code came
back as a tuple of SymInts).

Prediction and a training step (marginal log likelihood, gradients), differential
against eager on four sizes; no symbolic value anywhere in the objects the calls leave
behind (the model, its prediction cache, the likelihood); nothing on stderr; graphs no
more than torch.compile's on the same calls (``TORCH_COMPILE``, measured again by the
slow test).  Skipped when gpytorch (the ``libs`` extra) is not installed.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as DynamoCounter

import graphjit
from graphjit.testing import assert_equal
from _shared import counting_backend

gpytorch = pytest.importorskip("gpytorch")

SIZES = (5, 7, 9, 11)

#: torch.compile's graphs (counting backend, dynamic=None) over the calls below
TORCH_COMPILE = {"predict": 70, "train_step": 43}


def _model(n_train: int):
    class GP(gpytorch.models.ExactGP):
        def __init__(self, x, y, likelihood):
            super().__init__(x, y, likelihood)
            self.mean = gpytorch.means.ConstantMean()
            self.cov = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean(x), self.cov(x))

    torch.manual_seed(0)
    x = torch.linspace(0, 1, n_train)
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    return GP(x, torch.sin(6 * x), likelihood), likelihood


def _data(n: int):
    x = torch.linspace(0, 1, n)
    return x, torch.sin(6 * x) + 0.01 * n


def _predict_fn():
    model, likelihood = _model(20)
    model.eval()
    likelihood.eval()

    def predict(x):
        with gpytorch.settings.fast_pred_var(False):
            out = likelihood(model(x))
            return out.mean, out.variance, out.batch_shape, out.event_shape, out.mean.shape[-1]

    return predict, (model, likelihood)


def _train_fn():
    model, likelihood = _model(8)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)

    def train_step(x, y):
        model.set_train_data(x, y, strict=False)
        loss = -mll(model(x), y)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        return loss.detach(), grads, model.train_inputs[0].shape

    return train_step, (model, likelihood)


PROGRAMS = {"predict": (_predict_fn, "eager"), "train_step": (_train_fn, "aot_eager")}


def _symbolic_values(obj, seen: set, path: str = "", depth: int = 0) -> list[str]:
    """Where a SymInt/SymFloat/SymBool sits among ``obj``'s attributes and items."""
    if isinstance(obj, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return [path]
    if depth > 6 or id(obj) in seen or isinstance(obj, (torch.Tensor, str, bytes, type)):
        return []
    seen.add(id(obj))
    found = []
    if isinstance(obj, dict):
        children = [(f"[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = [(f"[{i}]", v) for i, v in enumerate(obj)]
    else:
        children = [(f".{k}", v) for k, v in getattr(obj, "__dict__", {}).items()]
    for label, child in children:
        found += _symbolic_values(child, seen, path + label, depth + 1)
    return found


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_new_size_every_call(name, capfd):
    make, backend = PROGRAMS[name]
    fn, _ = make()  # eager's results, on a model of its own
    expected = [fn(*_args(name, n)) for n in SIZES]
    fn, objects = make()
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(fn, backend=be)
    for n, want in zip(SIZES, expected):
        got = compiled(*_args(name, n))
        assert_equal(got, want, f"{name} size {n}")  # types exactly: torch.Size, int
    assert _symbolic_values(objects, set()) == []
    assert cnt.frame_count <= TORCH_COMPILE[name], (cnt.frame_count, TORCH_COMPILE[name])
    err = capfd.readouterr().err
    assert "Traceback" not in err and "SymIntArrayRef" not in err, err


def _args(name: str, n: int) -> tuple:
    x, y = _data(n)
    return (x,) if name == "predict" else (x, y)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_torch_compile_counts(name):
    fn, _ = PROGRAMS[name][0]()
    torch._dynamo.reset()
    cnt = DynamoCounter()
    compiled = torch.compile(fn, backend=cnt)
    for n in SIZES:
        compiled(*_args(name, n))
    torch._dynamo.reset()
    assert cnt.frame_count == TORCH_COMPILE[name]

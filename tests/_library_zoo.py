"""The library zoo's models (issue 21, item 1): small models built from libraries people
compile, with random weights and fixed inputs; nothing is downloaded.

Each builder returns a fresh :class:`Spec` every call (a cold trace must not reuse a model
built for an earlier one).  A builder imports its library itself: a missing library is
an ``ImportError`` from the builder, which the tests turn into a skip naming the
``libs`` extra.  Shared by ``tests/test_library_zoo.py`` and
``benchmarks/bench_library_zoo.py``.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402


@dataclasses.dataclass
class Spec:
    """A callable (a module in eval mode, or a function), the arguments it is called with,
    and ``seed``: when not ``None``, torch's RNG is seeded with it before every call (a
    model that draws random numbers must draw eager's)."""

    model: Callable
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    seed: int | None = None


@dataclasses.dataclass(frozen=True)
class Entry:
    """A zoo model: its library (the import name, and the distribution in the ``libs``
    extra) and its builder."""

    library: str
    distribution: str
    build: Callable[[], Spec]


def _randn(*shape: int, seed: int = 2) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _eval(module: torch.nn.Module) -> torch.nn.Module:
    return module.eval()


# --------------------------------------------------------------------------- PyG

def _graph(nodes: int = 12, features: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """A small random directed graph: node features and a ``[2, E]`` edge index."""
    g = torch.Generator().manual_seed(3)
    src = torch.randint(0, nodes, (40,), generator=g)
    dst = torch.randint(0, nodes, (40,), generator=g)
    return _randn(nodes, features), torch.stack([src, dst])


def _pyg(model: str, **options) -> Spec:
    """One of PyG's ready-made GNNs (``torch_geometric.nn.models``): two layers, 8 -> 16 -> 4
    channels, on :func:`_graph`."""
    import torch_geometric.nn.models as models
    torch.manual_seed(0)
    x, edge_index = _graph()
    gnn = getattr(models, model)(8, 16, num_layers=2, out_channels=4, **options)
    return Spec(_eval(gnn), (x, edge_index))


def pyg_gcn() -> Spec:
    return _pyg("GCN")


def pyg_gat() -> Spec:
    return _pyg("GAT", heads=2)


def pyg_sage() -> Spec:
    return _pyg("GraphSAGE")


def pyg_gin() -> Spec:
    return _pyg("GIN")


# --------------------------------------------------------------------------- x-transformers

def xtransformers_decoder() -> Spec:
    from x_transformers import Decoder, TransformerWrapper
    torch.manual_seed(0)
    model = TransformerWrapper(num_tokens=100, max_seq_len=32,
                               attn_layers=Decoder(dim=32, depth=2, heads=2, rotary_pos_emb=True))
    tokens = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    return Spec(_eval(model), (tokens,))


def xtransformers_vit() -> Spec:
    from x_transformers import Encoder, ViTransformerWrapper
    torch.manual_seed(0)
    model = ViTransformerWrapper(image_size=16, patch_size=4, num_classes=10,
                                 attn_layers=Encoder(dim=32, depth=2, heads=2))
    return Spec(_eval(model), (_randn(2, 3, 16, 16),))


def xtransformers_rotary_encoder() -> Spec:
    """A rotary-embedding encoder called with a padding mask (the second sequence is
    three tokens short): x-transformers reads einx's signatures (``X | Y`` annotations) and
    calls its ``allow_in_graph`` ops."""
    from x_transformers import Encoder, TransformerWrapper
    torch.manual_seed(0)
    model = TransformerWrapper(num_tokens=100, max_seq_len=32,
                               attn_layers=Encoder(dim=32, depth=2, heads=2, rotary_pos_emb=True))
    tokens = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[True] * 8, [True] * 5 + [False] * 3])
    return Spec(_eval(model), (tokens,), {"mask": mask})


# --------------------------------------------------------------------------- kornia

def kornia_augment() -> Spec:
    import kornia.augmentation as K
    torch.manual_seed(0)
    aug = K.AugmentationSequential(
        K.ColorJitter(0.2, 0.2, 0.2, 0.1, p=1.0), K.RandomHorizontalFlip(p=0.5),
        K.RandomAffine(degrees=15.0, translate=(0.1, 0.1), p=1.0), data_keys=["input"])
    return Spec(aug, (_randn(2, 3, 16, 16).sigmoid(),), seed=5)


def kornia_filters() -> Spec:
    import kornia

    def edges(img: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gray = kornia.color.rgb_to_grayscale(img)
        blurred = kornia.filters.gaussian_blur2d(gray, (5, 5), (1.5, 1.5))
        magnitude, edges = kornia.filters.canny(img)
        return kornia.filters.sobel(blurred), magnitude + edges

    return Spec(edges, (_randn(2, 3, 16, 16).sigmoid(),))


# --------------------------------------------------------------------------- monai

def monai_unet() -> Spec:
    from monai.networks.nets import UNet
    torch.manual_seed(0)
    model = UNet(spatial_dims=2, in_channels=1, out_channels=2, channels=(4, 8, 16),
                 strides=(2, 2), num_res_units=1)
    return Spec(_eval(model), (_randn(1, 1, 16, 16),))


def monai_swin_unetr() -> Spec:
    from monai.networks.nets import SwinUNETR
    torch.manual_seed(0)
    # batch norm (eval: running statistics): the bottleneck of a 32x32 input is 1x1,
    # where instance norm refuses
    model = SwinUNETR(in_channels=1, out_channels=2, feature_size=12, spatial_dims=2,
                      depths=(1, 1, 1, 1), num_heads=(1, 2, 2, 4), norm_name="batch")
    return Spec(_eval(model), (_randn(1, 1, 32, 32),))


# --------------------------------------------------------------------------- torchdiffeq

class _ODEFunc(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))

    def forward(self, t, y):
        return self.net(y) * torch.cos(t)


class _ODEBlock(torch.nn.Module):
    """A neural ODE block (torchdiffeq's ``examples/odenet_mnist.py``): ``odeint`` over a
    fixed time grid."""

    def __init__(self, method: str, **options) -> None:
        super().__init__()
        self.func, self.method, self.options = _ODEFunc(), method, options
        self.register_buffer("t", torch.linspace(0.0, 1.0, 5))

    def forward(self, y0):
        from torchdiffeq import odeint
        return odeint(self.func, y0, self.t, method=self.method, **self.options)


def torchdiffeq_rk4() -> Spec:
    torch.manual_seed(0)
    return Spec(_eval(_ODEBlock("rk4", options={"step_size": 0.1})), (_randn(3, 4),))


def torchdiffeq_dopri5() -> Spec:
    torch.manual_seed(0)
    return Spec(_eval(_ODEBlock("dopri5", rtol=1e-3, atol=1e-4)), (_randn(3, 4),))


# --------------------------------------------------------------------------- e3nn

class _E3Conv(torch.nn.Module):
    """An equivariant point-cloud layer (e3nn's ``Gate`` and tensor-product convolution
    pattern): spherical harmonics of the edge vectors, a weighted tensor product of node
    features with them (weights from a radial MLP), summed per node, gated."""

    def __init__(self) -> None:
        super().__init__()
        from e3nn import nn as enn, o3
        self.irreps_in = o3.Irreps("4x0e + 2x1o")
        self.irreps_sh = o3.Irreps.spherical_harmonics(2)
        self.gate = enn.Gate("4x0e", [torch.tanh], "2x0e", [torch.sigmoid], "2x1o")
        self.tp = o3.FullyConnectedTensorProduct(self.irreps_in, self.irreps_sh,
                                                 self.gate.irreps_in, shared_weights=False)
        self.radial = enn.FullyConnectedNet([4, 16, self.tp.weight_numel], torch.relu)

    def forward(self, x, pos, src, dst):
        from e3nn import o3
        from e3nn.math import soft_one_hot_linspace
        vec = pos[dst] - pos[src]
        sh = o3.spherical_harmonics(self.irreps_sh, vec, normalize=True, normalization="component")
        emb = soft_one_hot_linspace(vec.norm(dim=1), 0.0, 2.0, 4, basis="smooth_finite", cutoff=True)
        messages = self.tp(x[src], sh, self.radial(emb))
        out = torch.zeros(x.shape[0], messages.shape[1]).index_add(0, dst, messages)
        return self.gate(out)


def e3nn_conv() -> Spec:
    torch.manual_seed(0)
    model = _E3Conv()
    g = torch.Generator().manual_seed(3)
    src, dst = torch.randint(0, 6, (20,), generator=g), torch.randint(0, 6, (20,), generator=g)
    return Spec(_eval(model), (_randn(6, 10), _randn(6, 3, seed=4), src, dst))


class _E3Script(torch.nn.Module):
    """A tensor product and an equivariant linear layer whose generated code e3nn compiles
    with TorchScript (``jit_mode="script"``: each holds a ``RecursiveScriptModule`` made
    from an fx ``GraphModule``, without a Python original): the TorchScript calls run in
    Python between graphs, as under torch.compile."""

    def __init__(self) -> None:
        super().__init__()
        from e3nn import o3
        self.tp = o3.FullyConnectedTensorProduct("4x0e + 2x1o", "1x0e + 1x1o", "4x0e + 2x1o")
        self.lin = o3.Linear("4x0e + 2x1o", "2x0e + 1x1o")

    def forward(self, x, y):
        return self.lin(self.tp(x, y)).relu()


def e3nn_torchscript() -> Spec:
    import e3nn
    mode = e3nn.get_optimization_defaults()["jit_mode"]
    e3nn.set_optimization_defaults(jit_mode="script")
    try:
        torch.manual_seed(0)
        model = _E3Script()
    finally:
        e3nn.set_optimization_defaults(jit_mode=mode)
    return Spec(_eval(model), (_randn(5, 10), _randn(5, 4, seed=4)))


# --------------------------------------------------------------------------- peft

def peft_lora_llama() -> Spec:
    import peft
    import transformers
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                   num_key_value_heads=1, intermediate_size=64, vocab_size=100,
                                   max_position_embeddings=64, use_cache=False,
                                   attn_implementation="eager")
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(cfg)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0,
                           init_lora_weights=False)
    model = peft.get_peft_model(base, lora)
    tokens = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    return Spec(_eval(model), kwargs={"input_ids": tokens})


# --------------------------------------------------------------------------- gpytorch

def gpytorch_exact_gp() -> Spec:
    import gpytorch

    class ExactGP(gpytorch.models.ExactGP):
        def __init__(self, x, y, likelihood):
            super().__init__(x, y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    class Predict(torch.nn.Module):
        """Posterior mean and variance at test points (gpytorch's regression tutorial)."""

        def __init__(self, gp):
            super().__init__()
            self.gp = gp

        def forward(self, x):
            posterior = self.gp.likelihood(self.gp(x))
            return posterior.mean, posterior.variance

    torch.manual_seed(0)
    train_x = torch.linspace(0, 1, 20).unsqueeze(-1)
    train_y = torch.sin(train_x.squeeze(-1) * 6.0)
    gp = ExactGP(train_x, train_y, gpytorch.likelihoods.GaussianLikelihood()).eval()
    return Spec(Predict(gp).eval(), (torch.linspace(0, 1, 7).unsqueeze(-1),))


# --------------------------------------------------------------------------- vector-quantize

def vq_residual() -> Spec:
    from vector_quantize_pytorch import ResidualVQ
    torch.manual_seed(0)
    model = ResidualVQ(dim=16, codebook_size=32, num_quantizers=2, kmeans_init=False)
    return Spec(_eval(model), (_randn(2, 8, 16),))


# --------------------------------------------------------------------------- stable-baselines3

def _gym_spaces():
    import gymnasium
    import numpy as np
    obs = gymnasium.spaces.Box(-1.0, 1.0, (6,), dtype=np.float32)
    return obs, gymnasium.spaces.Discrete(3), gymnasium.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)


def sb3_ppo_policy() -> Spec:
    """PPO's actor-critic policy (a discrete action space): actions, values and
    log-probabilities, deterministic (the distribution's mode)."""
    from stable_baselines3.common.policies import ActorCriticPolicy
    obs, discrete, _ = _gym_spaces()
    torch.manual_seed(0)
    policy = ActorCriticPolicy(obs, discrete, lambda _: 3e-4, net_arch=[32, 32])
    return Spec(_eval(policy), (_randn(4, 6),), {"deterministic": True})


def sb3_sac_actor() -> Spec:
    """SAC's squashed-Gaussian actor (a continuous action space), sampling actions
    (torch's RNG: seeded before every call)."""
    from stable_baselines3.sac.policies import SACPolicy
    obs, _, box = _gym_spaces()
    torch.manual_seed(0)
    policy = SACPolicy(obs, box, lambda _: 3e-4, net_arch=[32, 32])
    return Spec(_eval(policy.actor), (_randn(4, 6),), seed=7)


# --------------------------------------------------------------------------- julius

class _Resampler(torch.nn.Module):
    """Audio preprocessing as demucs does it with julius: a low-pass filter, a
    fractional resampling and a band split."""

    def __init__(self) -> None:
        super().__init__()
        import julius
        self.lowpass = julius.LowPassFilter(0.2)
        self.resample = julius.ResampleFrac(8, 5)
        self.bands = julius.SplitBands(sample_rate=8000, n_bands=3)

    def forward(self, wav):
        low = self.lowpass(wav)
        return self.resample(low), self.bands(wav)


def julius_resample() -> Spec:
    return Spec(_eval(_Resampler()), (_randn(2, 1, 400),))


# --------------------------------------------------------------------------- the table

ZOO: dict[str, Entry] = {
    "pyg_gcn": Entry("torch_geometric", "torch-geometric", pyg_gcn),
    "pyg_gat": Entry("torch_geometric", "torch-geometric", pyg_gat),
    "pyg_sage": Entry("torch_geometric", "torch-geometric", pyg_sage),
    "pyg_gin": Entry("torch_geometric", "torch-geometric", pyg_gin),
    "xtransformers_decoder": Entry("x_transformers", "x-transformers", xtransformers_decoder),
    "xtransformers_vit": Entry("x_transformers", "x-transformers", xtransformers_vit),
    "xtransformers_rotary_encoder": Entry("x_transformers", "x-transformers", xtransformers_rotary_encoder),
    "kornia_augment": Entry("kornia", "kornia", kornia_augment),
    "kornia_filters": Entry("kornia", "kornia", kornia_filters),
    "monai_unet": Entry("monai", "monai", monai_unet),
    "monai_swin_unetr": Entry("monai", "monai", monai_swin_unetr),
    "torchdiffeq_rk4": Entry("torchdiffeq", "torchdiffeq", torchdiffeq_rk4),
    "torchdiffeq_dopri5": Entry("torchdiffeq", "torchdiffeq", torchdiffeq_dopri5),
    "e3nn_conv": Entry("e3nn", "e3nn", e3nn_conv),
    "e3nn_torchscript": Entry("e3nn", "e3nn", e3nn_torchscript),
    "peft_lora_llama": Entry("peft", "peft", peft_lora_llama),
    "gpytorch_exact_gp": Entry("gpytorch", "gpytorch", gpytorch_exact_gp),
    "vq_residual": Entry("vector_quantize_pytorch", "vector-quantize-pytorch", vq_residual),
    "sb3_ppo_policy": Entry("stable_baselines3", "stable-baselines3", sb3_ppo_policy),
    "sb3_sac_actor": Entry("stable_baselines3", "stable-baselines3", sb3_sac_actor),
    "julius_resample": Entry("julius", "julius", julius_resample),
}


def available(name: str) -> str | None:
    """``None`` when the model's library imports, else why not (a skip reason)."""
    entry = ZOO[name]
    try:
        importlib.import_module(entry.library)
    except ImportError as e:
        return (f"{entry.distribution} is not installed ({e}): "
                f"pip install -c constraints.txt -e '.[libs]'")
    return None

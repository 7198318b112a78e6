"""A SwinUNETR-like block, written after monai's ``monai/networks/nets/swin_unetr.py``
(window partition with numpy padding, shifted windows, ``get_window_size``,
``compute_mask``, the input-size check done with numpy), for tests/test_numpy_values.py.
Not a test module itself.

The window and shift sizes are module globals read by ``forward``, so tests can change
them between calls."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

WINDOW = (4, 4)
SHIFT = (2, 2)
PATCH = 2


def get_window_size(x_size, window_size, shift_size=None):
    use_window_size = list(window_size)
    if shift_size is not None:
        use_shift_size = list(shift_size)
    for i in range(len(x_size)):
        if x_size[i] <= window_size[i]:
            use_window_size[i] = x_size[i]
            if shift_size is not None:
                use_shift_size[i] = 0
    if shift_size is None:
        return tuple(use_window_size)
    return tuple(use_window_size), tuple(use_shift_size)


def window_partition(x, window_size):
    b, h, w, c = x.shape
    x = x.view(b, h // window_size[0], window_size[0], w // window_size[1], window_size[1], c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size[0] * window_size[1], c)


def window_reverse(windows, window_size, dims):
    b, h, w = dims
    x = windows.view(b, h // window_size[0], w // window_size[1], window_size[0], window_size[1], -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(b, h, w, -1)


def compute_mask(dims, window_size, shift_size, device):
    cnt = 0
    h, w = dims
    img_mask = torch.zeros((1, h, w, 1), device=device)
    for h in slice(-window_size[0]), slice(-window_size[0], -shift_size[0]), slice(-shift_size[0], None):
        for w in slice(-window_size[1]), slice(-window_size[1], -shift_size[1]), slice(-shift_size[1], None):
            img_mask[:, h, w, :] = cnt
            cnt += 1
    mask_windows = window_partition(img_mask, window_size).squeeze(-1)
    attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
    return attn_mask.masked_fill(attn_mask != 0, -100.0).masked_fill(attn_mask == 0, 0.0)


class WindowAttention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(b // nw, nw, self.num_heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, n, n)
        attn = attn.softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class SwinBlock(nn.Module):
    def __init__(self, dim, num_heads, shifted):
        super().__init__()
        self.shifted = shifted
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, num_heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x, mask_matrix):
        shortcut = x
        b, h, w, c = x.shape
        x = self.norm1(x)
        window_size, shift_size = get_window_size((h, w), WINDOW, SHIFT if self.shifted else (0, 0))
        pad_b = (window_size[0] - h % window_size[0]) % window_size[0]
        pad_r = (window_size[1] - w % window_size[1]) % window_size[1]
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        _, hp, wp, _ = x.shape
        if any(i > 0 for i in shift_size):
            shifted_x = torch.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
            attn_mask = mask_matrix
        else:
            shifted_x, attn_mask = x, None
        attn_windows = self.attn(window_partition(shifted_x, window_size), mask=attn_mask)
        attn_windows = attn_windows.view(-1, *(window_size + (c,)))
        shifted_x = window_reverse(attn_windows, window_size, [b, hp, wp])
        if any(i > 0 for i in shift_size):
            x = torch.roll(shifted_x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
        else:
            x = shifted_x
        if pad_r > 0 or pad_b > 0:
            x = x[:, :h, :w, :].contiguous()
        x = shortcut + x
        return x + self.mlp(self.norm2(x))


class SwinStage(nn.Module):
    """monai's ``BasicLayer``: the padded size computed with ``np.ceil``."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.blocks = nn.ModuleList([SwinBlock(dim, num_heads, shifted=i % 2 == 1) for i in range(2)])

    def forward(self, x):
        b, c, h, w = x.shape
        window_size, shift_size = get_window_size((h, w), WINDOW, SHIFT)
        x = x.permute(0, 2, 3, 1)
        hp = int(np.ceil(h / window_size[0])) * window_size[0]
        wp = int(np.ceil(w / window_size[1])) * window_size[1]
        attn_mask = compute_mask([hp, wp], window_size, shift_size, x.device)
        for blk in self.blocks:
            x = blk(x, attn_mask)
        return x.view(b, h, w, -1).permute(0, 3, 1, 2)


class SwinLike(nn.Module):
    def __init__(self, in_ch=3, dim=8, num_heads=2):
        super().__init__()
        self.patch_size = PATCH
        self.embed = nn.Conv2d(in_ch, dim, PATCH, stride=PATCH)
        self.stage = SwinStage(dim, num_heads)
        self.head = nn.Conv2d(dim, 2, 1)

    def _check_input_size(self, spatial_shape):
        img_size = np.array(spatial_shape)
        remainder = (img_size % np.power(self.patch_size, 1)) > 0
        if remainder.any():
            wrong_dims = (np.where(remainder)[0] + 2).tolist()
            raise ValueError(f"spatial dimensions {wrong_dims} of input image (spatial shape: {spatial_shape})"
                             f" must be divisible by {self.patch_size}.")

    def forward(self, x):
        if not torch.jit.is_scripting() and not torch.jit.is_tracing():
            self._check_input_size(x.shape[2:])
        h = self.stage(self.embed(x))
        return self.head(h)

"""Hand-written blocks: what the model zoo rarely does, and a compiler must still do well.

    scan_block       cumsum, cumprod and logcumsumexp along a middle dim (time of
                     (batch, time, channels), and of a (batch, heads, time, dim) view)
    shift_block      roll, pad (positive and negative), strided slices and their concat
                     (Swin's patch merging), a token shift along the sequence
    gather_block     index_select, an embedding bag, index_add into buckets, gather, and
                     indexing by a computed index
    attn_mask_block  attention with an additive float bias and with boolean masks of
                     several broadcast shapes, through SDPA and written out by hand
    resnet18         ResNet-18 written out (basic blocks: conv + BatchNorm + ReLU, residual
                     adds, a strided 1x1 shortcut), so that a ResNet-style network runs
                     where torchvision is not installed (the CPU suite, issue 24)

Indices come from the inputs, never from float values: a rounding difference between
backends must not change which row is read.
"""
from __future__ import annotations

from .registry import Model, register


def _modules():
    """The block classes, defined on first use so that importing the registry does not
    import torch."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class ScanBlock(nn.Module):
        def __init__(self, dim: int, heads: int):
            super().__init__()
            self.heads = heads
            self.norm = nn.LayerNorm(dim)
            self.inp = nn.Linear(dim, 4 * dim)
            self.out = nn.Linear(dim, dim)

        def forward(self, x):  # (batch, time, dim)
            a, g, l, h = self.inp(self.norm(x)).chunk(4, dim=-1)
            total = torch.cumsum(a, dim=1)
            decay = torch.cumprod(torch.sigmoid(g) * 0.01 + 0.99, dim=1)  # stays within (0.99^T, 1]
            lse = torch.logcumsumexp(l.float(), dim=1).to(x.dtype)
            b, t, d = h.shape
            heads = h.view(b, t, self.heads, d // self.heads).transpose(1, 2)  # (batch, heads, time, dim)
            per_head = torch.cumsum(heads, dim=2).transpose(1, 2).reshape(b, t, d)
            return x + self.out(total * decay + lse + per_head / t)

    class ShiftBlock(nn.Module):
        def __init__(self, channels: int):
            super().__init__()
            self.mix = nn.Parameter(torch.rand(4 * channels))
            self.proj = nn.Linear(4 * channels, channels)

        def forward(self, x):  # (batch, channels, height, width), height and width even
            y = torch.roll(x, shifts=(3, -2), dims=(2, 3))
            y = F.pad(y, (1, 1, 1, 1))[:, :, 1:-1, :]  # pad W and H by one, crop H back
            y = F.pad(y, (-1, -1))  # negative padding crops W back
            merged = torch.cat([y[:, :, 0::2, 0::2], y[:, :, 1::2, 0::2], y[:, :, 0::2, 1::2], y[:, :, 1::2, 1::2]],
                               dim=1)  # (batch, 4 channels, height / 2, width / 2)
            tokens = merged.flatten(2).transpose(1, 2)  # (batch, tokens, 4 channels)
            shifted = F.pad(tokens, (0, 0, 1, -1))  # each token sees the previous one
            return self.proj(tokens * self.mix + shifted * (1 - self.mix))

    class GatherBlock(nn.Module):
        def __init__(self, rows: int, dim: int, buckets: int):
            super().__init__()
            self.buckets = buckets
            self.table = nn.Parameter(torch.randn(rows, dim) * 0.1)
            self.bag = nn.EmbeddingBag(rows, dim, mode="mean")
            self.proj = nn.Linear(dim, dim)

        def forward(self, x, idx, offsets, bag_of_row):
            rows = torch.index_select(self.table, 0, idx)  # (n, dim)
            bags = self.bag(idx, offsets)  # (bags, dim)
            h = self.proj(x + rows)
            bucket = (idx * 7 + 3) % self.buckets  # computed indices
            acc = h.new_zeros(self.buckets, h.shape[1]).index_add(0, bucket, h)
            picked = torch.gather(h, 1, (idx % h.shape[1]).unsqueeze(1).expand(-1, 8))
            return h + acc[bucket] * 0.01 + bags[bag_of_row], picked

    class AttnMaskBlock(nn.Module):
        def __init__(self, dim: int, heads: int, seq: int):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)
            self.bias = nn.Parameter(torch.randn(heads, seq, seq) * 0.1)  # a learned relative bias
            self.register_buffer("causal", torch.ones(seq, seq, dtype=torch.bool).tril())

        def forward(self, x, keep):  # x (batch, seq, dim); keep (batch, seq) bool: False = padding
            b, s, d = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            sdpa = F.scaled_dot_product_attention
            float_bias = sdpa(q, k, v, attn_mask=self.bias.unsqueeze(0).to(q.dtype))  # (1, h, s, s)
            padding = sdpa(q, k, v, attn_mask=keep[:, None, None, :])  # (b, 1, 1, s)
            causal = sdpa(q, k, v, attn_mask=self.causal)  # (s, s)
            both = sdpa(q, k, v, attn_mask=keep[:, None, None, :] & self.causal)  # (b, 1, s, s)
            scores = (q @ k.transpose(-1, -2)) * (d // self.heads) ** -0.5 + self.bias.to(q.dtype)
            scores = scores.masked_fill(~keep[:, None, None, :] | ~self.causal, float("-inf"))  # masked_fill's mask
            by_hand = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v
            y = (float_bias + padding + causal + both + by_hand).transpose(1, 2).reshape(b, s, d)
            return self.out(y)

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        """torchvision's resnet18 layer for layer (stem, four stages of two basic blocks,
        global average pool, classifier)."""

        def __init__(self, classes: int = 1000):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(512, classes)
            for m in self.modules():  # running statistics that are not the identity
                if isinstance(m, nn.BatchNorm2d):
                    with torch.no_grad():
                        m.running_mean.uniform_(-0.1, 0.1)
                        m.running_var.uniform_(0.5, 1.5)
                        m.weight.uniform_(0.5, 1.5)
                        m.bias.uniform_(-0.1, 0.1)

        def forward(self, x):
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))

    return ScanBlock, ShiftBlock, GatherBlock, AttnMaskBlock, ResNet18


def _seeded(device, dtype, make):
    import torch

    torch.manual_seed(0)
    with torch.device(device):
        model = make()
    return model.to(dtype)


def _scan(device, dtype, size="full"):
    import torch

    batch, time, dim = (16, 1024, 1024) if size == "full" else (2, 64, 64)
    model = _seeded(device, dtype, lambda: _modules()[0](dim, heads=8))
    return model, (torch.randn(batch, time, dim, device=device, dtype=dtype),)


def _shift(device, dtype, size="full"):
    import torch

    batch, channels, side = (32, 128, 128) if size == "full" else (2, 16, 16)
    model = _seeded(device, dtype, lambda: _modules()[1](channels))
    return model, (torch.randn(batch, channels, side, side, device=device, dtype=dtype),)


def _gather(device, dtype, size="full"):
    import torch

    n, dim, rows, buckets, bags = (65536, 512, 100000, 1024, 4096) if size == "full" else (256, 32, 1000, 16, 16)
    model = _seeded(device, dtype, lambda: _modules()[2](rows, dim, buckets))
    idx = torch.randint(0, rows, (n,), device=device)
    offsets = torch.arange(0, n, n // bags, device=device)
    bag_of_row = torch.arange(n, device=device) // (n // bags)
    return model, (torch.randn(n, dim, device=device, dtype=dtype), idx, offsets, bag_of_row)


def _attn_masks(device, dtype, size="full"):
    import torch

    batch, seq, dim, heads = (16, 512, 1024, 16) if size == "full" else (2, 32, 64, 4)
    model = _seeded(device, dtype, lambda: _modules()[3](dim, heads, seq))
    keep = torch.ones(batch, seq, dtype=torch.bool, device=device)
    keep[batch // 2:, seq - seq // 8:] = False  # the second half of the batch is padded
    return model, (torch.randn(batch, seq, dim, device=device, dtype=dtype), keep)


def _resnet18(device, dtype, size="full"):
    import torch

    batch, side = (64, 224) if size == "full" else (2, 64)
    model = _seeded(device, dtype, lambda: _modules()[4]())
    return model, (torch.randn(batch, 3, side, side, device=device, dtype=dtype),)


register(Model("scan_block", "block", "hand-written", _scan, train=True, weight=0.4,
               note="cumsum / cumprod / logcumsumexp along a middle dim"))
register(Model("shift_block", "block", "hand-written", _shift, weight=0.4,
               note="roll, pad (and negative pad), strided slices + cat, token shift"))
register(Model("gather_block", "block", "hand-written", _gather, train=True, weight=0.4,
               note="index_select, embedding bag, index_add, gather, computed indices"))
register(Model("attn_mask_block", "block", "hand-written", _attn_masks, train=True, weight=0.5,
               note="attention with a float bias and boolean masks of four broadcast shapes"))
register(Model("resnet18", "convnet", "hand-written", _resnet18, train=True, weight=0.6,
               note="ResNet-18 written out: conv + BatchNorm + ReLU, residual adds (no torchvision needed)"))

"""Graphs the CUDA path is tested on: test_cuda_codegen.py compiles their generated CUDA
with NVRTC on any machine; test_cuda_runtime.py runs them on a GPU against eager.

Each case builds (fn, args) on a device. `refused` names a case whose graph the CUDA
printer refuses in phase 1 (it must then run eagerly, never wrongly).
"""
import torch
import torch.nn.functional as F

from helpers import load_examples


def _pointwise(x, y, z):
    return torch.sigmoid((x * 2 + y).relu()) * z - torch.tanh(z) / (1 + x.abs())


def _lowp_pointwise(x, y):
    return (F.gelu(x) * y + x.exp().clamp(max=100)).to(x.dtype)


def _ints(a, b):
    return torch.where(a > b, a // (b + 1), a % 7) + (a >> 1)


def _softmax(x):
    return torch.softmax(x, -1)


def _log_softmax(x):
    return torch.log_softmax(x, -1)


def _ln_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b), approximate="tanh")


def _residual_layer_norm(x, r, w, b):
    """BERT's and ViT's LayerNorm: a residual add fused in front (rows of 768)."""
    return F.layer_norm(x + r, (x.shape[-1],), w, b)


def _layer_norm_backward(x, w, b, g):
    """A training step's LayerNorm forward and backward, as AOTAutograd traces them: the
    row kernel reads x and the incoming gradient in several stages (the row tile keeps
    them in registers, and the normalized x between stages)."""
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [x.shape[-1]], w, b, 1e-5)
    gx, gw, gb = torch.ops.aten.native_layer_norm_backward(g, x, [x.shape[-1]], mean, rstd, w, b, [True, True, True])
    return out, gx, gw, gb


def _layer_norm_backward_args(device, dtype, rows=256, width=768):
    return (_rand(rows, width, device=device, dtype=dtype), _rand(width, device=device, dtype=dtype),
            _rand(width, device=device, dtype=dtype), _rand(rows, width, device=device, dtype=dtype))


def _short_misaligned_rows(device):
    """1,001 rows of 96 bf16 starting 6 bytes into the storage: several rows a warp
    (schedule/cuda/row_tile.h), the last warp's rows past the end, through the
    per-element loop on the packed lanes."""
    base = _rand(1001 * 96 + 3, device=device, dtype=torch.bfloat16)
    return base[3:].view(1001, 96), _rand(96, device=device, dtype=torch.bfloat16), _rand(96, device=device, dtype=torch.bfloat16)


def _misaligned_rows(device):
    """Rows of 768 bf16 whose data starts 6 bytes into the storage: the row tile's
    alignment check fails and the per-element loop runs."""
    base = _rand(64 * 768 + 3, device=device, dtype=torch.bfloat16)
    return base[3:].view(64, 768), _rand(768, device=device, dtype=torch.bfloat16), _rand(768, device=device, dtype=torch.bfloat16)


def _offset_softmax(x):
    """Rows that start one element past a chunk boundary (a column slice): their loads
    stay element by element inside the row tile, the output is written by chunks."""
    return torch.softmax(x[:, 1:769], -1)


def _reductions(x):
    return x.sum(-1), x.amax(-1), x.mean((1, 2)), x.prod(-1), (x > 0).any(-1), (x > -3).all(-1), x.var(-1)


def _transposed(x, y):
    return (x.t() + y).relu().sum(-1)


def _gather_transposed(x, index, y):
    """Disentangled attention's position-to-content term: rows of relative positions
    gathered by an index of the scores' layout, transposed, added to the scores."""
    return y + torch.gather(x, -1, index.expand(x.shape[0], -1, -1)).transpose(-1, -2)


def _gather_transposed_args(d, n=200, span=256):
    # n x n scores (a tile edge: 200 is no multiple of the tile), rows of 2 x span positions,
    # an index clamped into range as DeBERTa builds it; 6 heads.
    rel = torch.arange(n, device=d)[:, None] - torch.arange(n, device=d)[None, :]
    index = (rel + span).clamp(0, 2 * span - 1)[None]
    return (_rand(6, n, 2 * span, device=d, dtype=torch.bfloat16), index, _rand(6, n, n, device=d, dtype=torch.bfloat16))


def _cat_relu(a, b, c):
    """ASPP's concatenation: branches relu'd and joined along the channels-last dim."""
    return torch.cat((a.relu(), b.relu(), c), dim=-1)


def _cat_relu_args(d, widths):
    return tuple(_rand(2, 16, 16, w, device=d, dtype=torch.bfloat16) for w in widths)


def _column_sum(x):
    return x.sum(0)


def _column_stats(g, x, n):
    """A backward's parameter gradients: column sums over many rows (bias, LayerNorm
    weight), a per-column epilogue, a max that meets a NaN, any/all, an integer sum."""
    gx = (g * x).sum(0)
    gs = g.sum(0)
    return (gx * 2).to(g.dtype), gs + 1, x.amax(0), (x > 2).any(0), (x > -4).all(0), n.sum(0), (g.float() ** 2).mean(0)


def _column_sums(x):
    """Column sums and a max over rows (schedule/cuda/column_split.h): the partial launch's
    vector geometry (8 bf16 or 4 f32 consecutive columns a thread, one load a row) where
    the width allows it, the scalar one where it does not."""
    return x.sum(0), (x.float() * 2).sum(0), x.float().amax(0)


def _column_sums_args(device, rows, columns, dtype):
    x = _rand(rows, columns, device=device, dtype=dtype)
    x[rows // 2, columns // 2] = float("nan")  # that column's sums and max are NaN
    return (x,)


def _pool_columns(x, mean, var, w, b):
    """Channels-last global pools of a few images, their columns split across blocks with
    several columns a thread (schedule/cuda/column_split.h, columns_a_thread): a BatchNorm
    + ReLU + mean (per-channel values computed before the rows), and a max that meets a NaN."""
    y = F.relu(F.batch_norm(x, mean, var, w, b, False))
    return y.mean((2, 3), keepdim=True), x.amax((2, 3))


def _pool_columns_args(device, channels):
    x = _rand(4, channels, 9, 9, device=device, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    x[1, 700, 3, 4] = float("nan")
    per = [_rand(channels, device=device, dtype=torch.bfloat16) for _ in range(4)]
    per[1] = per[1].abs() + 0.5
    return (x, *per)


def _column_stats_args(device, dtype=torch.float32):
    x = _rand(4096, 96, device=device, dtype=dtype)
    x[1000, 7] = float("nan")
    return _rand(4096, 96, device=device, dtype=dtype), x, torch.randint(-9, 9, (4096, 96), device=device)


def _bias_relu(x, b):
    return (x * 2 + b).relu()


def _widen(x, y):
    return x.float() * 3 + y


def _abs_diff(x, b):
    return (x - b).abs()


def _misaligned(device):
    """A contiguous input whose data starts 6 bytes into its storage: the vector path's
    alignment check fails and the scalar loop runs."""
    base = _rand(64 * 768 + 3, device=device, dtype=torch.bfloat16)
    return base[3:].view(64, 768), _rand(768, device=device, dtype=torch.bfloat16)


def _misaligned_image(device):
    """A 3-channel image whose data starts 2 bytes into its storage: the tiled transpose's
    vector accesses (16-byte words) are skipped at run time for its scalar tile loop."""
    base = _rand(2 * 3 * 64 * 64 + 1, device=device, dtype=torch.bfloat16)
    return (base[1:].view(2, 3, 64, 64),)


def _to_channels_last(x):
    return x.contiguous(memory_format=torch.channels_last)


def _to_contiguous(x):
    return x.contiguous()


def _t_contiguous(x):
    return x.t().contiguous()


def _transpose_inner(x):
    """[b, m, n] -> [b, n, m], contiguous: with dynamic=True every side of the tile symbolic."""
    return x.transpose(1, 2).contiguous()


def _rope_keys_transposed(k, cos, sin):
    """Falcon's keys: one KV head, rotated (RoPE), scaled, broadcast over 4 query heads and
    stored transposed ([b, h, d, s]) for the attention's matmul: loads contiguous along the
    head dim (static), the store along the sequence (symbolic), the batch symbolic."""
    half = k.shape[-1] // 2
    rotated = torch.cat((-k[..., half:], k[..., :half]), dim=-1)
    r = (k * cos + rotated * sin) * 0.42
    return r[:, None].expand(-1, 4, -1, -1).transpose(-1, -2).contiguous()


def _permute_scale_relu(x, y):
    """NCHW x permuted to NHWC, scaled, added to an NHWC y, relu, widened to f32: a
    transposing read fused with pointwise work, one operand in each layout."""
    return (x.permute(0, 2, 3, 1) * 2 + y).relu().float()


def _two_transposed(x, z, y):
    """Two loads transposed against the store (staged together) and one that is not."""
    return (x.t() + z.t()).contiguous() * y


def _conv_layer_norm(x, w, b, gamma, beta):
    """ConvNeXt's downsample: a LayerNorm over the channels of a biased convolution's
    output, permuted to NHWC and back. The bias joins the LayerNorm's kernel, whose input
    is laid out with its channels last."""
    y = F.conv2d(x, w, b, padding=1).permute(0, 2, 3, 1) * 2
    # y.to(gamma.dtype), not y.float(): f32 in the bf16 run, f64 in the fp64 reference that
    # judges it. ember adds the bias after the convolution's bf16 rounding, eager's cuDNN
    # before it: an ulp apart in places, equally far from the fp64 result.
    return F.layer_norm(y.to(gamma.dtype), (y.shape[-1],), gamma, beta).to(x.dtype).permute(0, 3, 1, 2)


def _conv_layer_norm_args(device, dtype=torch.bfloat16, c=96):
    return (_rand(4, c, 14, 14, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last),
            _rand(c, c, 3, 3, device=device, dtype=dtype), _rand(c, device=device, dtype=dtype),
            _rand(c, device=device), _rand(c, device=device))


def _stem_layer_norm(x, w, b, gamma, beta):
    """ConvNeXt's stem in a bf16 model: a 4x4/4 convolution of an NCHW image, its bias
    added by the LayerNorm's kernel as it reads the output across its channels, the
    LayerNorm over the channels (bf16 weights). The biased output, an f32 value that only
    the kernel's later stages read, stays in the row tile's registers and is never
    stored (schedule_cuda: keep_in_registers)."""
    y = F.conv2d(x, w, b, stride=4).permute(0, 2, 3, 1)
    return F.layer_norm(y, (y.shape[-1],), gamma, beta, 1e-6).permute(0, 3, 1, 2)


def _stem_layer_norm_args(device, c=96, misaligned=False):
    """`misaligned`: the bias starts 2 bytes into its storage, so the row tile's alignment
    check fails and its accesses go element by element, the biased output still in
    registers only."""
    bias = _rand(c + 1, device=device, dtype=torch.bfloat16)
    return (_rand(2, 3, 56, 56, device=device, dtype=torch.bfloat16),
            _rand(c, 3, 4, 4, device=device, dtype=torch.bfloat16), bias[1:] if misaligned else bias[:c].clone(),
            _rand(c, device=device, dtype=torch.bfloat16), _rand(c, device=device, dtype=torch.bfloat16))


def _stem(x, w):
    """ResNet's first convolution: the 3-channel image is copied to channels-last for it
    (a transpose kernel), and its channels-last result back to NCHW with the relu."""
    return F.conv2d(x, w, stride=2, padding=3).relu()


def _stem_pool(x, w, mean, var, gamma, beta):
    """ResNet's whole stem in inference: convolution, BatchNorm, ReLU, 3x3/2 max-pool. In a
    channels-last graph the BatchNorm + ReLU is recomputed at each window read of the pool
    (the max-pool reads along the channels its layout makes innermost), so the convolution's
    output is read once and nothing stores the normalized activation."""
    y = F.batch_norm(F.conv2d(x, w, stride=2, padding=3), mean, var, gamma, beta, False, 0.0, 1e-5)
    return F.max_pool2d(y.relu(), 3, 2, 1)


def _stem_pool_args(device, dtype=torch.bfloat16):
    c = 64
    return (_rand(2, 3, 64, 64, device=device, dtype=dtype), _rand(c, 3, 7, 7, device=device, dtype=dtype),
            _rand(c, device=device, dtype=dtype), _rand(c, device=device, dtype=dtype).abs() + 0.5,
            _rand(c, device=device, dtype=dtype), _rand(c, device=device, dtype=dtype))


def _batch_norm_pair(x, y, *p):
    """The first block of a ResNet stage with a downsample branch, after its convolutions:
    two channels-last activations, each normalized by its own BatchNorm (inference),
    added, relu. Each thread's channel is fixed when C divides the grid-stride step:
    the per-channel scale is computed before the grid loop (kHoistWords, csrc/schedule/cuda/vector_plan.h)."""
    a = F.batch_norm(x, p[0], p[1], p[2], p[3], False, 0.0, 1e-5)
    b = F.batch_norm(y, p[4], p[5], p[6], p[7], False, 0.0, 1e-5)
    return (a + b).relu()


def _batch_norm_pair_args(device, c, dtype, n=16, hw=28):
    def act():
        return _rand(n, c, hw, hw, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)

    def stats():
        return [_rand(c, device=device, dtype=dtype), _rand(c, device=device, dtype=dtype).abs() + 0.5,
                _rand(c, device=device, dtype=dtype), _rand(c, device=device, dtype=dtype)]

    return (act(), act(), *stats(), *stats())


def _max_pool(x):
    """ResNet's stem pool on a channels-last activation: 9 window loads of one buffer,
    each a vector load of its own, under padding guards that depend on h and w only."""
    return F.max_pool2d_with_indices(x.relu(), 3, 2, 1)


def _cumsum(x):
    return torch.cumsum(x, -1)


def _middle_scans(x):
    """scan_block's scans: cumsum, cumprod and logcumsumexp along a middle dim of
    [batch, time, channels] chunks (strided views of one buffer), fused with their
    epilogue; the ScanColumns shape (schedule/cuda/scan_columns.h)."""
    a, g, l = x.chunk(3, dim=-1)
    total = torch.cumsum(a, dim=1)
    decay = torch.cumprod(torch.sigmoid(g) * 0.01 + 0.99, dim=1)
    lse = torch.logcumsumexp(l.float(), dim=1).to(x.dtype)
    return total * decay + lse


def _head_scan(h):
    """A cumsum over time of a [batch, heads, time, dim] view of [batch, time, width]."""
    b, t, d = h.shape
    heads = h.view(b, t, 4, d // 4).transpose(1, 2)
    return torch.cumsum(heads, dim=2).transpose(1, 2).reshape(b, t, d)


def _argmax(x):
    return x.argmax(-1)


def _argmin_keepdim(x):
    return x.argmin(-1, keepdim=True)


def _max_dim(x):
    """Values and indices of each row's maximum (torch.max(x, dim)): one kernel, two
    reductions."""
    return x.max(-1)


def _argmax_outer(x):
    return x.argmax(0)


def _ties(device, dtype, rows=64, width=300):
    """Few distinct values (ties everywhere: the first index wins), a row of -inf, rows
    with NaNs (the first NaN wins), a row of NaNs."""
    x = torch.randint(-3, 4, (rows, width), generator=torch.Generator().manual_seed(0)).to(dtype)
    x[1] = float("-inf")
    x[3, 10] = x[3, width - 100] = float("nan")
    x[4, width - 1] = float("nan")
    x[6] = float("nan")
    return x.to(device)


def _greedy(device):
    """The next token of a greedy decode: the last position's logits, argmax over the
    vocabulary, in the same graph as the model."""
    model, args = load_examples().get("tiny_gpt2")
    model = model.to(device)

    def next_token(ids):
        return model(ids)[:, -1].argmax(-1)

    return next_token, tuple(a.to(device) for a in args)


def _masked_attention(q, k, v, keep):
    """BERT's traced attention: a boolean padding mask expanded over the query rows, whose
    last dim is not contiguous (BERT's has stride 0 there; here the keep mask is column-major)."""
    keep = keep.t().contiguous().t()
    mask = keep[:, None, None, :].expand(q.shape[0], 1, q.shape[2], q.shape[2])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.125)
    return (out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1) * 2).relu()


def _padded_matmuls(x, w, b, q, k):
    """Matmuls that pad_matmuls pads (odd sizes, over its thresholds): an LM head (N padded,
    its slice read by softmax), a linear layer sharing the head's weight (the bias padded
    too) and a bmm of a transposed operand (M padded per batch, the result sliced by a copy)."""
    logits = x @ w.t()
    return torch.softmax(logits, -1), F.linear(x, w, b).relu(), torch.bmm(q.transpose(1, 2), k) * 2


def _padded_matmul_args(device):
    bf16 = torch.bfloat16
    return (_rand(256, 768, device=device, dtype=bf16), _rand(2053, 768, device=device, dtype=bf16),
            _rand(2053, device=device, dtype=bf16), _rand(8, 255, 129, device=device, dtype=bf16),
            _rand(8, 255, 513, device=device, dtype=bf16))


def _attention_args(device):
    q, k, v = (_rand(2, 4, 64, 64, device=device, dtype=torch.bfloat16) for _ in range(3))
    return q, k, v, torch.rand(2, 64, device=device) > 0.2


def _group_norm(x, w, b):
    """poolformer's GroupNorm(1, C) over a channels-last activation: a row of 65,536 per
    image, its statistics read in memory order and split across blocks."""
    return F.group_norm(x, 1, w, b)


def _group_norm_args(device):
    x = _rand(4, 64, 32, 32, device=device, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    return x, _rand(64, device=device, dtype=torch.bfloat16), _rand(64, device=device, dtype=torch.bfloat16)


def _mean_square(x):
    """A training step's loss over a whole output: one result."""
    return x.float().square().mean()


def _amax_rows(x):
    return torch.amax(x, 1)


def _with_nan(x):
    """A NaN in one chunk of row 1: the partials must carry it to the row's max."""
    x[1, 40000] = float("nan")
    return x


def _index_add_buckets(h, idx):
    """gather_block's forward index_add (benchmarks/suite/models_blocks.py): buckets computed
    from the indices, a pointwise producer's values added into zeros (ember's scatter-add:
    atomic adds in the values' kernel), the sums gathered back by bucket."""
    bucket = (idx * 7 + 3) % 50
    acc = h.new_zeros(50, h.shape[1]).index_add(0, bucket, torch.relu(h) * 2)
    return h + acc[bucket] * 0.01


def _index_add_self(x, idx, src):
    """index_add into a tensor that is not zero, with alpha: self plus the f32 sums."""
    return x.index_add(0, idx, src, alpha=0.5) * 2


def _scatter_add(x, index, src):
    return torch.scatter_add(x, 1, index, src.exp())


def _index_put_accumulate(x, idx, v):
    """x[idx] += v with repeated and negative indices (traced as index_add)."""
    return torch.index_put(x, (idx,), v, accumulate=True) + 1


def _index_put_two_indices(x, i, j, v):
    """x[i, j] += v (index_put with two indices, accumulating): a scatter-add over [400, 8]."""
    return torch.index_put(x, (i, j), v, accumulate=True)


def _scatter_args(device, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (_rand(30, 16, device=device, dtype=dtype), torch.randint(0, 30, (400,), generator=g).to(device),
            _rand(400, 16, device=device, dtype=dtype))


def _rand(*shape, device, dtype=torch.float32):
    return torch.randn(*shape, device=device).to(dtype)


def _model(name, dtype=torch.float32):
    def make(device):
        model, args = load_examples().get(name)
        model = model.to(device=device)
        if dtype != torch.float32:
            model = model.to(dtype)
            args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
        return model, tuple(a.to(device) for a in args)

    return make


def _gpt2_bf16(device):
    """A small transformers GPT-2 (2 layers, GPT-2's widths and vocabulary) in bf16."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, use_cache=False)
    model = GPT2LMHeadModel(config).eval().to(device, torch.bfloat16)

    def logits(ids):
        return model(input_ids=ids, use_cache=False).logits

    return logits, (torch.randint(0, config.vocab_size, (2, 128), device=device),)


CASES = {
    "pointwise_f32": lambda d: (_pointwise, (_rand(64, 300, device=d), _rand(300, device=d), _rand(64, 300, device=d))),
    "pointwise_large": lambda d: (_pointwise, (_rand(1 << 20, device=d), _rand(1 << 20, device=d), _rand(1 << 20, device=d))),
    "pointwise_bf16": lambda d: (_lowp_pointwise, (_rand(32, 257, device=d, dtype=torch.bfloat16),
                                                   _rand(32, 257, device=d, dtype=torch.bfloat16))),
    "pointwise_f16": lambda d: (_lowp_pointwise, (_rand(32, 257, device=d, dtype=torch.float16),
                                                  _rand(32, 257, device=d, dtype=torch.float16))),
    "ints": lambda d: (_ints, (torch.randint(-50, 50, (16, 33), device=d), torch.randint(0, 9, (33,), device=d))),
    "softmax_100": lambda d: (_softmax, (_rand(64, 100, device=d),)),
    "softmax_3000": lambda d: (_softmax, (_rand(16, 3000, device=d),)),
    "softmax_50257_bf16": lambda d: (_softmax, (_rand(4, 50257, device=d, dtype=torch.bfloat16),)),
    "softmax_f16": lambda d: (_softmax, (_rand(8, 12, 128, 128, device=d, dtype=torch.float16),)),
    "log_softmax": lambda d: (_log_softmax, (_rand(32, 1000, device=d),)),
    "layer_norm_gelu_f32": lambda d: (_ln_gelu, (_rand(4, 8, 64, device=d), _rand(64, device=d), _rand(64, device=d))),
    "layer_norm_gelu_bf16": lambda d: (_ln_gelu, (_rand(8, 128, 768, device=d, dtype=torch.bfloat16),
                                                  _rand(768, device=d, dtype=torch.bfloat16),
                                                  _rand(768, device=d, dtype=torch.bfloat16))),
    # Row tiles (kRowTileValues): vector chunks, rows kept in registers across stages.
    "layer_norm_768_bf16": lambda d: (_residual_layer_norm, (_rand(512, 768, device=d, dtype=torch.bfloat16),
                                                             _rand(512, 768, device=d, dtype=torch.bfloat16),
                                                             _rand(768, device=d, dtype=torch.bfloat16),
                                                             _rand(768, device=d, dtype=torch.bfloat16))),
    "layer_norm_768_f32": lambda d: (_residual_layer_norm, (_rand(256, 768, device=d), _rand(256, 768, device=d),
                                                            _rand(768, device=d), _rand(768, device=d))),
    "layer_norm_1000_f16": lambda d: (_residual_layer_norm, (_rand(64, 1000, device=d, dtype=torch.float16),
                                                             _rand(64, 1000, device=d, dtype=torch.float16),
                                                             _rand(1000, device=d, dtype=torch.float16),
                                                             _rand(1000, device=d, dtype=torch.float16))),
    "layer_norm_misaligned_bf16": lambda d: (_ln_gelu, _misaligned_rows(d)),
    # Short rows, several a warp (ConvNeXt's and Swin's LayerNorms; row counts that leave
    # a warp's last rows past the end).
    "layer_norm_96_bf16": lambda d: (_residual_layer_norm, (_rand(1001, 96, device=d, dtype=torch.bfloat16),
                                                            _rand(1001, 96, device=d, dtype=torch.bfloat16),
                                                            _rand(96, device=d, dtype=torch.bfloat16),
                                                            _rand(96, device=d, dtype=torch.bfloat16))),
    "layer_norm_192_bf16": lambda d: (_ln_gelu, (_rand(4, 999, 192, device=d, dtype=torch.bfloat16),
                                                 _rand(192, device=d, dtype=torch.bfloat16),
                                                 _rand(192, device=d, dtype=torch.bfloat16))),
    "layer_norm_384_f32": lambda d: (_residual_layer_norm, (_rand(333, 384, device=d), _rand(333, 384, device=d),
                                                            _rand(384, device=d), _rand(384, device=d))),
    "layer_norm_96_misaligned_bf16": lambda d: (_ln_gelu, _short_misaligned_rows(d)),
    "layer_norm_backward_96_bf16": lambda d: (_layer_norm_backward,
                                              _layer_norm_backward_args(d, torch.bfloat16, 1001, 96)),
    "softmax_96_bf16": lambda d: (_softmax, (_rand(3, 7, 77, 96, device=d, dtype=torch.bfloat16),)),
    "softmax_12": lambda d: (_softmax, (_rand(1001, 12, device=d),)),
    "layer_norm_backward_bf16": lambda d: (_layer_norm_backward, _layer_norm_backward_args(d, torch.bfloat16)),
    "layer_norm_backward_f32": lambda d: (_layer_norm_backward, _layer_norm_backward_args(d, torch.float32)),
    "layer_norm_backward_4096_f32": lambda d: (_layer_norm_backward, _layer_norm_backward_args(d, torch.float32, 32, 4096)),
    "softmax_50": lambda d: (_softmax, (_rand(128, 50, device=d),)),
    "softmax_768_bf16": lambda d: (_softmax, (_rand(8, 12, 16, 768, device=d, dtype=torch.bfloat16),)),
    "softmax_1000_bf16": lambda d: (_softmax, (_rand(64, 1000, device=d, dtype=torch.bfloat16),)),
    "softmax_1001": lambda d: (_softmax, (_rand(64, 1001, device=d),)),
    "softmax_4096": lambda d: (_softmax, (_rand(32, 4096, device=d),)),
    "softmax_4100_bf16": lambda d: (_softmax, (_rand(16, 4100, device=d, dtype=torch.bfloat16),)),
    "softmax_65536": lambda d: (_softmax, (_rand(4, 65536, device=d),)),
    "softmax_offset_bf16": lambda d: (_offset_softmax, (_rand(64, 776, device=d, dtype=torch.bfloat16),)),
    "log_softmax_768_f16": lambda d: (_log_softmax, (_rand(64, 768, device=d, dtype=torch.float16),)),
    "reductions": lambda d: (_reductions, (_rand(6, 5, 40, device=d),)),
    "transposed": lambda d: (_transposed, (_rand(48, 32, device=d), _rand(32, 48, device=d))),
    "mlp": _model("mlp"),
    "ln_gelu_block": _model("ln_gelu"),
    "ln_gelu_block_bf16": _model("ln_gelu", torch.bfloat16),
    "small_cnn": _model("small_cnn"),
    "tiny_gpt2": _model("tiny_gpt2"),
    "tiny_gpt2_bf16": _model("tiny_gpt2", torch.bfloat16),
    "gpt2_2layer_bf16": _gpt2_bf16,
    "column_sum": lambda d: (_column_sum, (_rand(64, 100, device=d),)),
    "column_sum_long": lambda d: (_column_sum, (_rand(20000, 3, device=d),)),
    "column_stats": lambda d: (_column_stats, _column_stats_args(d)),
    "column_stats_bf16": lambda d: (_column_stats, _column_stats_args(d, torch.bfloat16)),
    "column_sums_64_bf16": lambda d: (_column_sums, _column_sums_args(d, 20000, 64, torch.bfloat16)),
    "column_sums_96_f32": lambda d: (_column_sums, _column_sums_args(d, 20000, 96, torch.float32)),
    "column_sums_1000_bf16": lambda d: (_column_sums, _column_sums_args(d, 4096, 1000, torch.bfloat16)),
    "column_sums_3_bf16": lambda d: (_column_sums, _column_sums_args(d, 20000, 3, torch.bfloat16)),  # scalar loads
    "batch_norm_stats_channels_last_bf16": lambda d: (_batch_norm_stats, _batch_norm_stats_args(d)),
    "pool_columns_768_bf16": lambda d: (_pool_columns, _pool_columns_args(d, 768)),  # 3 columns a thread
    "pool_columns_2048_bf16": lambda d: (_pool_columns, _pool_columns_args(d, 2048)),  # 8 columns a thread
    "vector_bias_relu_bf16": lambda d: (_bias_relu, (_rand(64, 768, device=d, dtype=torch.bfloat16),
                                                     _rand(768, device=d, dtype=torch.bfloat16))),
    "vector_widen_bf16_f32": lambda d: (_widen, (_rand(32, 1024, device=d, dtype=torch.bfloat16), _rand(1024, device=d))),
    "vector_misaligned_bf16": lambda d: (_abs_diff, _misaligned(d)),
    # Tiled transposes (csrc/schedule/cuda/transpose_plan.h): loads and store contiguous along
    # different dims, odd extents, tile edges, fused pointwise work.
    "transpose_image_bf16": lambda d: (_to_channels_last, (_rand(4, 3, 224, 224, device=d, dtype=torch.bfloat16),)),
    "transpose_image_f32": lambda d: (_to_channels_last, (_rand(2, 3, 61, 67, device=d),)),
    "transpose_to_nhwc_64_bf16": lambda d: (_to_channels_last, (_rand(2, 64, 56, 56, device=d, dtype=torch.bfloat16),)),
    # A 3x3 convolution's weight made channels-last: the load side (9 taps) whole, one run.
    "transpose_weight_bf16": lambda d: (_to_channels_last, (_rand(512, 256, 3, 3, device=d, dtype=torch.bfloat16),)),
    "transpose_misaligned_bf16": lambda d: (_to_channels_last, _misaligned_image(d)),
    "transpose_to_nchw_64_bf16": lambda d: (_to_contiguous, (_to_channels_last(_rand(2, 64, 28, 28, device=d,
                                                                                       dtype=torch.bfloat16)),)),
    "transpose_to_nchw_3_f32": lambda d: (_to_contiguous, (_to_channels_last(_rand(2, 3, 45, 50, device=d)),)),
    "transpose_odd_f32": lambda d: (_t_contiguous, (_rand(1000, 37, device=d),)),
    "transpose_odd_bf16": lambda d: (_t_contiguous, (_rand(1000, 37, device=d, dtype=torch.bfloat16),)),
    "transpose_square_odd_f32": lambda d: (_t_contiguous, (_rand(333, 517, device=d),)),
    "transpose_fused_bf16": lambda d: (_permute_scale_relu, (_rand(2, 64, 20, 20, device=d, dtype=torch.bfloat16),
                                                             _rand(2, 20, 20, 64, device=d, dtype=torch.bfloat16))),
    "transpose_two_loads_f32": lambda d: (_two_transposed, (_rand(100, 70, device=d), _rand(100, 70, device=d),
                                                            _rand(70, 100, device=d))),
    # A gather read across the store's contiguous dim (deberta's position-to-content term).
    # A cat along the innermost dim: each operand read only by the lane groups that take it,
    # boundaries on a group's edge (256) and inside one (12 + 20).
    "cat_channels_bf16": lambda d: (_cat_relu, _cat_relu_args(d, (256, 256, 64))),
    "cat_straddling_bf16": lambda d: (_cat_relu, _cat_relu_args(d, (12, 20, 8))),
    "transpose_gather_bf16": lambda d: (_gather_transposed, _gather_transposed_args(d)),
    "transpose_stem_bf16": lambda d: (_stem, (_rand(2, 3, 64, 64, device=d, dtype=torch.bfloat16),
                                              _rand(64, 3, 7, 7, device=d, dtype=torch.bfloat16))),
    "stem_pool_bf16": lambda d: (_stem_pool, _stem_pool_args(d)),
    "conv_bias_layer_norm_bf16": lambda d: (_conv_layer_norm, _conv_layer_norm_args(d)),
    "stem_layer_norm_96_bf16": lambda d: (_stem_layer_norm, _stem_layer_norm_args(d)),
    "stem_layer_norm_192_misaligned_bf16": lambda d: (_stem_layer_norm,
                                                            _stem_layer_norm_args(d, 192, misaligned=True)),
    # Channels-last BatchNorm pairs: per-channel values hoisted out of the grid loop when
    # C divides its step (64, 256), or after rounding the grid (200: 25 blocks, 96 f32: 3).
    "batch_norm_pair_64_bf16": lambda d: (_batch_norm_pair, _batch_norm_pair_args(d, 64, torch.bfloat16, hw=56)),
    "batch_norm_pair_256_bf16": lambda d: (_batch_norm_pair, _batch_norm_pair_args(d, 256, torch.bfloat16)),
    "batch_norm_pair_200_bf16": lambda d: (_batch_norm_pair, _batch_norm_pair_args(d, 200, torch.bfloat16)),
    "batch_norm_pair_256_f32": lambda d: (_batch_norm_pair, _batch_norm_pair_args(d, 256, torch.float32)),
    "batch_norm_pair_96_f32": lambda d: (_batch_norm_pair, _batch_norm_pair_args(d, 96, torch.float32)),
    "max_pool_3x3_bf16": lambda d: (_max_pool, (_rand(8, 64, 56, 56, device=d, dtype=torch.bfloat16)
                                                .contiguous(memory_format=torch.channels_last),)),
    "cumsum": lambda d: (_cumsum, (_rand(8, 100, device=d),)),
    # Scans along a middle dim: 2 x 40 = 80 columns (the last block's lanes past the end),
    # 300 steps in segments; a short scan of 5 steps in one segment.
    "middle_scans_bf16": lambda d: (_middle_scans, (_rand(2, 300, 120, device=d, dtype=torch.bfloat16),)),
    "middle_scans_f32": lambda d: (_middle_scans, (_rand(3, 5, 30, device=d),)),
    "head_scan_bf16": lambda d: (_head_scan, (_rand(2, 257, 64, device=d, dtype=torch.bfloat16),)),
    "masked_attention_bf16": lambda d: (_masked_attention, _attention_args(d)),
    "padded_matmuls_bf16": lambda d: (_padded_matmuls, _padded_matmul_args(d)),
    # Arg-reductions: (value, index) pairs per thread, combined across the row's threads.
    "argmax": lambda d: (_argmax, (_rand(8, 100, device=d),)),
    "argmin_ties_bf16": lambda d: (_argmin_keepdim, (_ties(d, torch.bfloat16),)),
    "argmax_ties_f32": lambda d: (_argmax, (_ties(d, torch.float32),)),
    "argmax_long_rows_bf16": lambda d: (_argmax, (_ties(d, torch.bfloat16, rows=8, width=5000),)),
    "argmax_ints": lambda d: (_argmax, (torch.randint(-5, 5, (32, 700), device=d),)),
    "argmax_outer": lambda d: (_argmax_outer, (_ties(d, torch.float32),)),
    "max_dim": lambda d: (_max_dim, (_ties(d, torch.float32),)),
    "tiny_gpt2_greedy": _greedy,
    # Long reductions into few results (lower/split_long_reductions.h): partials over
    # chunks on many blocks, then a reduction of the partials.
    "group_norm_channels_last_bf16": lambda d: (_group_norm, _group_norm_args(d)),
    "mean_square_loss_bf16": lambda d: (_mean_square, (_rand(4, 256, 1024, device=d, dtype=torch.bfloat16),)),
    "amax_long_rows_nan": lambda d: (_amax_rows, (_with_nan(_rand(3, 65536, device=d)),)),
    # index_add and scatter_add as ember's scatter-add (lower/program.h, ComputedBuffer::add_at).
    "index_add_buckets_f32": lambda d: (_index_add_buckets, (_rand(2000, 64, device=d),
                                                              torch.randint(0, 10**6, (2000,), device=d))),
    "index_add_self_f32": lambda d: (_index_add_self, _scatter_args(d)),
    "index_add_self_bf16": lambda d: (_index_add_self, _scatter_args(d, torch.bfloat16)),
    "index_add_self_f16": lambda d: (_index_add_self, _scatter_args(d, torch.float16)),
    "scatter_add_dim1_f32": lambda d: (_scatter_add, (_rand(64, 32, device=d), torch.randint(0, 32, (64, 8), device=d),
                                                      _rand(64, 8, device=d))),
    "index_put_two_indices_bf16": lambda d: (_index_put_two_indices, (_rand(20, 30, 8, device=d, dtype=torch.bfloat16),
                                                                       torch.randint(-20, 20, (400,), device=d),
                                                                       torch.randint(-30, 30, (400,), device=d),
                                                                       _rand(400, 8, device=d, dtype=torch.bfloat16))),
    "index_put_accumulate_f32": lambda d: (_index_put_accumulate, (_rand(30, 16, device=d),
                                                                    torch.randint(-30, 30, (400,), device=d),
                                                                    _rand(400, 16, device=d))),
}

# Graphs the CUDA printer refuses, by the words of its refusal (none of CASES now; the
# eager fallback of a refused graph is tested with a forced refusal in test_cuda_runtime.py).
REFUSED: dict[str, str] = {}


def _layer_norm_train(x, r, w, b, g):
    """A residual LayerNorm's training step: the loss's gradient is g (a real tensor, not
    the broadcast ones of a plain sum), so the backward graph reads x, r and g by rows."""
    return (F.layer_norm(x + r, (x.shape[-1],), w, b) * g).float().sum()


def _layer_norm_train_args(device, dtype, rows=256, width=768):
    def leaf(*shape):
        return _rand(*shape, device=device, dtype=dtype).requires_grad_()

    return leaf(rows, width), leaf(rows, width), leaf(width), leaf(width), _rand(rows, width, device=device, dtype=dtype)


def _gather_block_train(table, h, idx, g):
    """gather_block's training step (benchmarks/suite/models_blocks.py) without its Linear and
    EmbeddingBag: index_select, index_add into buckets, gather, acc[bucket]. Its backward adds
    with index_add (index_select's and acc[bucket]'s gradients) and scatter_add (gather's)."""
    x = h + torch.index_select(table, 0, idx)
    bucket = (idx * 7 + 3) % 64
    acc = x.new_zeros(64, x.shape[1]).index_add(0, bucket, x)
    picked = torch.gather(x, 1, (idx % x.shape[1]).unsqueeze(1).expand(-1, 8))
    return ((x + acc[bucket] * 0.01) * g).sum() + (picked * g[:, :8]).sum()


def _gather_block_train_args(device):
    def leaf(t):
        return t.requires_grad_()

    gen = torch.Generator().manual_seed(0)
    return (leaf(_rand(500, 64, device=device)), leaf(_rand(2000, 64, device=device)),
            torch.randint(0, 500, (2000,), generator=gen).to(device), _rand(2000, 64, device=device))


def _batch_norm_stats(x):
    """A training BatchNorm's statistics over a channels-last activation: the variance's
    deviations read the mean, each a column reduction of 25,600 rows (split across blocks,
    schedule/cuda/column_split.h), and a max whose partials carry NaN."""
    xf = x.float()
    return xf.mean((0, 2, 3)), xf.var((0, 2, 3), unbiased=False), x.amax((0, 2, 3))


def _batch_norm_stats_args(device):
    x = _rand(16, 64, 40, 40, device=device, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    x[3, 5, 7, 9] = float("nan")  # column 5's max and sums are NaN, the others are not
    return (x,)


def _batch_norm_train(x, w, b):
    """A channels-last convolution's BatchNorm in training mode and its backward."""
    return (F.relu(F.batch_norm(x, None, None, w, b, training=True)) * x).float().sum()


def _batch_norm_train_args(device):
    def leaf(t):
        return t.requires_grad_()

    x = _rand(16, 64, 40, 40, device=device, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    return leaf(x), leaf(_rand(64, device=device, dtype=torch.bfloat16)), leaf(_rand(64, device=device, dtype=torch.bfloat16))


# Graphs traced with grad: the forward and backward graphs of a training step
# (test_cuda_codegen.py compiles both; test_cuda_runtime.py checks the gradients).
TRAINING = {
    "layer_norm_train_bf16": lambda d: (_layer_norm_train, _layer_norm_train_args(d, torch.bfloat16)),
    "layer_norm_train_f32": lambda d: (_layer_norm_train, _layer_norm_train_args(d, torch.float32)),
    "layer_norm_train_4096_f32": lambda d: (_layer_norm_train, _layer_norm_train_args(d, torch.float32, 16, 4096)),
    "batch_norm_train_channels_last_bf16": lambda d: (_batch_norm_train, _batch_norm_train_args(d)),
    "gather_block_train_f32": lambda d: (_gather_block_train, _gather_block_train_args(d)),
}

# (rtol, atol) for whole bf16 models, whose fp64 reference the RMSE rule cannot build (the
# weights are bf16): a matmul's rounding moves a LayerNorm input by an ulp now and then.
# small_cnn: eager's cuDNN convolutions use TF32, and the algorithm (so the rounding)
# depends on the layout, which ember chooses (channels-last operands).
# column_stats: f32 sums of 4,096 products (|sum| ~ 64) in another order than eager's.
# Copies move bits: the transposes must equal eager exactly.
EXACT = ("cat_channels_bf16", "cat_straddling_bf16", "transpose_gather_bf16", "transpose_image_bf16", "transpose_image_f32", "transpose_to_nhwc_64_bf16", "transpose_to_nchw_64_bf16",
         "transpose_to_nchw_3_f32", "transpose_odd_f32", "transpose_odd_bf16", "transpose_square_odd_f32")

# transpose_fused_bf16 widens a bf16 chain to f32: eager rounds the chain's result to bf16
# first, ember (emulate_precision_casts off, as Inductor) does not, so they differ by a
# bf16 rounding in an f32 output.
# The scatter-adds' f32 sums: atomic adds in another order than eager's.
# column_sums: the f32 sum of 4,096-20,000 rows, in column-split chunks, is eager's to a few
# f32 ulps of the sum, not to 1.3e-6 (one column of 1,000 differed by 2.9e-6 on an H200); in
# the bf16 cases the bf16 sum beside it sets the tolerance (an f32 difference may flip a bf16
# rounding).
TOLERANCE = {**{name: (0.0, 0.0) for name in EXACT}, "index_add_buckets_f32": (1e-5, 1e-5),
             "index_add_self_f32": (1e-5, 1e-5), "scatter_add_dim1_f32": (1e-5, 1e-5),
             "index_put_accumulate_f32": (1e-5, 1e-5), "index_add_self_bf16": (1.6e-2, 1e-2),
             "index_add_self_f16": (1e-3, 1e-3), "index_put_two_indices_bf16": (1.6e-2, 1e-2), "column_stats": (1e-5, 1e-4),
             **{f"column_sums_{n}": (1.6e-2, 1e-4) for n in ("64_bf16", "1000_bf16", "3_bf16")},
             "column_sums_96_f32": (1e-5, 1e-4), "ln_gelu_block_bf16": (1.6e-2, 1e-2),
             "tiny_gpt2_bf16": (1.6e-2, 2e-2), "gpt2_2layer_bf16": (1.6e-2, 5e-2), "small_cnn": (1e-3, 1e-4),
             "transpose_fused_bf16": (8e-3, 1e-5), "transpose_inner_f32": (0.0, 0.0),
             "transpose_rope_keys_bf16": (1.6e-2, 2e-2)}


def _gpt2_ids(device, shapes):
    logits, _ = _gpt2_bf16(device)
    return logits, [(torch.randint(0, 50257, shape, device=device),) for shape in shapes]


def _per_shape(make, shapes):
    """(fn, [args per shape]) from make(device, shape) -> (fn, args)."""
    def build(device):
        fn = None
        sets = []
        for shape in shapes:
            fn, args = make(device, shape)
            sets.append(args)
        return fn, sets

    return build


# Graphs compiled with dynamic=True and called at several shapes: the first call compiles
# kernels over symbolic sizes, every later shape runs them (no new graph). Sizes 0 and 1
# are left out: Dynamo specializes them (a new graph, for every backend).
DYNAMIC = {
    "pointwise_bf16": _per_shape(lambda d, s: (_pointwise, tuple(_rand(*s, device=d, dtype=torch.bfloat16) for _ in range(3))),
                                 [(37, 129), (64, 1000), (3, 5)]),
    "ints": _per_shape(lambda d, s: (_ints, (torch.randint(-50, 50, s, device=d), torch.randint(0, 9, s, device=d))),
                       [(17, 33), (5, 1000)]),
    "softmax_bf16": _per_shape(lambda d, s: (_softmax, (_rand(*s, device=d, dtype=torch.bfloat16),)),
                               [(8, 100), (300, 1001), (5, 4100), (2, 50257)]),
    "log_softmax_f32": _per_shape(lambda d, s: (_log_softmax, (_rand(*s, device=d),)), [(64, 768), (9, 3000)]),
    "residual_layer_norm_bf16": _per_shape(
        lambda d, s: (_residual_layer_norm, (_rand(*s, device=d, dtype=torch.bfloat16), _rand(*s, device=d, dtype=torch.bfloat16),
                                             _rand(s[-1], device=d, dtype=torch.bfloat16), _rand(s[-1], device=d, dtype=torch.bfloat16))),
        [(64, 768), (7, 1000), (3, 4096)]),
    "column_sum": _per_shape(lambda d, s: (_column_sum, (_rand(*s, device=d),)), [(64, 100), (20000, 3), (5, 7)]),
    "cumsum": _per_shape(lambda d, s: (_cumsum, (_rand(*s, device=d),)), [(16, 50), (3, 700)]),
    "gpt2_2layer_bf16": lambda d: _gpt2_ids(d, [(2, 128), (3, 77), (4, 200)]),
    # Tiled transposes over symbolic sizes (schedule/cuda/transpose_plan.h): tiles chosen at
    # the hints, partial last tiles at other sizes.
    "transpose_inner_f32": _per_shape(lambda d, s: (_transpose_inner, (_rand(*s, device=d),)),
                                      [(2, 64, 96), (3, 50, 130), (4, 33, 7)]),
    "transpose_rope_keys_bf16": _per_shape(
        lambda d, s: (_rope_keys_transposed, (_rand(s[0], s[1], 64, device=d, dtype=torch.bfloat16),
                                              _rand(s[1], 64, device=d, dtype=torch.bfloat16),
                                              _rand(s[1], 64, device=d, dtype=torch.bfloat16))),
        [(2, 128), (3, 77), (5, 200)]),
}

"""A gather read transposed (DeBERTa's position-to-content scores) takes the Transpose
shape (schedule/cuda/transpose_plan.h); its generated kernel, run on the CPU under a small
emulation (tests/tools/emulate_cuda.py: a block's threads as std::threads), gives the
values eager gives: aligned (16-byte stores) and not (the scalar walk), odd sizes with
partial last tiles, indices out of range (clamped). No GPU and no NVRTC needed: the
source stops before NVRTC; the host's C++ compiler builds it."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import emulate_cuda  # noqa: E402

pytestmark = pytest.mark.skipif(emulate_cuda.compiler() is None, reason="no host C++ compiler")


def deberta_scores(B: int, S: int, P: int) -> str:
    """q k^T (%0) + c2p (%1) gathered at clamp(rel + A) + p2c (%2) gathered at
    clamp(A - rel) and read transposed; rel (%3) is i64 [S, S]. As tests/cpp's."""
    A, bss = P // 2, f"[{B},{S},{S}]"
    rows = f"{bss}{{{S * S},{S},1}}"
    sq = f"i64[{S},{S}]{{{S},1}}"
    return f"""graph {{
  %0 = input(0) : bf16{rows}
  %1 = input(1) : bf16[{B},{S},{P}]{{{S * P},{P},1}}
  %2 = input(2) : bf16[{B},{S},{P}]{{{S * P},{P},1}}
  %3 = input(3) : {sq}
  %4 = aten.add.Tensor(%3, {A}, 1) : {sq}
  %5 = aten.clamp.default(%4, 0, {P - 1}) : {sq}
  %6 = aten.expand.default(%5, {bss}, false) : i64{bss}{{0,{S},1}}
  %7 = aten.gather.default(%1, -1, %6, false) : bf16{rows}
  %8 = aten.neg.default(%3) : {sq}
  %9 = aten.add.Tensor(%8, {A}, 1) : {sq}
  %10 = aten.clamp.default(%9, 0, {P - 1}) : {sq}
  %11 = aten.expand.default(%10, {bss}, false) : i64{bss}{{0,{S},1}}
  %12 = aten.gather.default(%2, -1, %11, false) : bf16{rows}
  %13 = aten.permute.default(%12, [0, 2, 1]) : bf16{bss}{{{S * S},1,{S}}}
  %14 = aten.add.Tensor(%7, %13, 1) : bf16{rows}
  %15 = aten.add.Tensor(%0, %14, 1) : bf16{rows}
  return (%15)
}}
"""


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """Exact bf16 values (small multiples of 1/8) as their bits."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bits(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("B,S,P,offset", [
    (2, 128, 256, 0),   # 64 x 64 tiles, 16-byte stores
    (2, 128, 256, 1),   # every pointer one element off 16 bytes: the scalar tile loop
    (3, 37, 48, 0),     # partial last tiles along both sides, scalar stores
    (1, 200, 64, 0),    # most positions clamped (|i - j| > 32), partial tiles
])
def test_transposed_gather_kernel_matches_eager(B, S, P, offset):
    source, kernels = emulate_cuda.compiled_kernels(deberta_scores(B, S, P))
    assert len(kernels) == 1 and kernels[0]["shape"] == "transpose"
    k = kernels[0]
    rng = np.random.default_rng(S * 1000 + offset)
    qk = rng.integers(-32, 32, (B, S, S)) / 8
    c2p = rng.integers(-32, 32, (B, S, P)) / 8
    p2c = rng.integers(-32, 32, (B, S, P)) / 8
    i = np.arange(S)
    rel = (i[:, None] - i[None, :]) + rng.integers(-2, 3, (S, S))  # not quite a relative position
    buffers = {0: bf16_bits(qk), 1: bf16_bits(c2p), 2: bf16_bits(p2c), 3: rel.astype(np.int64)}
    out_id = k["writes"][0]
    buffers[out_id] = np.zeros((B, S, S), np.uint16)
    assert sorted(k["args"]) == [0, 1, 2, 3, out_id]
    emulate_cuda.run_kernel(source, k, buffers, offsets={b: offset for b in k["args"]})

    A = P // 2
    c2p_at = np.clip(rel + A, 0, P - 1)                      # [i, j]
    p2c_at = np.clip(A - rel, 0, P - 1)                      # [j, i]
    bb = np.arange(B)[:, None, None]
    ii, jj = i[None, :, None], i[None, None, :]
    expected = qk + c2p[bb, ii, c2p_at[None]] + p2c[bb, jj, p2c_at.T[None]]
    got = from_bits(buffers[out_id])
    np.testing.assert_array_equal(got, expected.astype(np.float32))

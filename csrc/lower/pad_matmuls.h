// Pads matmul operands so that cuBLAS sees 16-byte aligned leading dimensions.
//
// cuBLAS runs its fast GEMM kernels only when every matrix's leading dimension is a
// multiple of 16 bytes (8 bf16/f16 elements, 4 f32): with GPT-2's 50,257-word vocabulary
// it falls back to an sm75 "align1" kernel several times slower (TorchInductor's pad_mm
// pass exists for the same reason). For each large aten.mm, addmm, bmm or baddbmm extern
// (result [.., M, N] = a [.., M, K] @ b [.., K, N], static sizes):
//
//   - N, the result's leading dim, is padded when misaligned: b (and a bias that has an N
//     dim) gets zero columns, the extern returns a wider result, and the buffer the graph
//     reads becomes an ember copy of the result's [.., :N] slice (fused into its readers
//     where fusion allows). A graph output that is the slice, or a reshape of it, is a
//     strided view of the wider result where its caller takes any strides
//     (Graph::any_strides_outputs: a user's outputs, not a forward's saved activations),
//     as Inductor returns it: no copy (GPT-2's logits, 412 MB in bf16 at 8x512, ~230 us
//     of copy kernel on an H200). Otherwise the output is that copy.
//   - K is padded on both operands (zeros add nothing) when it is the leading dim of one of
//     them: a row-major a, or a column-major (transposed) b.
//   - M is padded when it is a's leading dim (a column-major a). The result's extra rows
//     are never read; a 2-D result just grows (its strides are unchanged).
//   - An operand whose sizes need no padding but whose view is misaligned (an odd offset
//     or stride) is copied densely.
//
// An operand that is a view of a graph input (a parameter: the LM head's transposed, tied
// embedding) is padded once by the runtime and kept while the input is unchanged
// (ExternCall::padded_args; python/ember/runtime/prepared.py, the same identity + version
// counter rule as the CPU's prepared convolution weights): a parameter is the same on every
// call, and GPT-2's [768, 50257] bf16 head is 77 MB to read and write again per call.
// Other operands are ember copy kernels run on every call (computed buffers: zeros outside
// the source), shared by every matmul that pads the same memory the same way: the
// backward's grad @ W and grad^T @ x pad one copy of grad.
//
// GEMMs too small or too memory-bound to gain (PadMatmulOptions) are left alone, and so is
// one whose per-call copies (operands that are not graph inputs, and the result's slice)
// cost more than the aligned kernel saves: bytes / copy_bytes_per_s against multiply-adds
// times the difference of the unaligned and aligned rates. Each extern's reason says what
// was done and why, so the dump after this pass and ember.explain show the decision.
//
// A CUDA pass: the pipeline runs it between lowering and dead-code elimination when
// asked (PipelineOptions::pad_matmuls: on for CUDA graphs, on the CPU in tests only).
#pragma once
#include <cstdint>

#include "ir/graph.h"
#include "lower/program.h"

namespace ember {

struct PadMatmulOptions {
  // A GEMM is padded only if it has at least this many multiply-adds (batch * M * N * K) ...
  int64_t min_macs = int64_t(1) << 27;
  // ... and this many per element it reads and writes: below it the GEMM is bound by
  // memory, runs no faster aligned, and the copies cost as much as it does.
  int64_t min_intensity = 32;
  // The cost model for per-call copies. Figures (docs/gpu.md, "Aligned GEMM operands"):
  // GPT-2's LM head at 8x512 (4096 x 768 x 50257, 1.58e11 multiply-adds) took 3.3 ms in
  // cuBLAS's align1 kernel on an H100, 4.8e13 multiply-adds/s; aligned, an H100/H200 runs a
  // bf16 GEMM of that size at ~400 TFLOP/s, 2e14 multiply-adds/s. A copy kernel moves
  // ~4.15e12 B/s on an H200 (benchmarks/suite's copy figure, /work/notes/final-0127d) and
  // ~1e12 B/s reading a transposed source; 2e12 is taken between them.
  double unaligned_macs_per_s = 4.8e13;
  double aligned_macs_per_s = 2.0e14;
  double copy_bytes_per_s = 2.0e12;  // infinity: no cost model (the reason then omits it)
  // Operands that are views of graph inputs become padded_args (padded once by the runtime)
  // rather than copy kernels; false: every operand is copied on every call.
  bool pad_inputs_once = true;
};

void pad_matmuls(Program& p, const Graph& g, const PadMatmulOptions& opts = {});

}  // namespace ember

// What a reduction accumulates in: shared by the schedules that size partials and by
// the C and CUDA printers that declare accumulators.
#pragma once
#include <cstdint>

#include "lower/program.h"

namespace ember {

// Float sums of more than this many elements into one accumulator lose precision in
// f32: one f32 accumulator per SIMD lane over half a million elements lost about 4
// digits against eager's cascade summation. The CPU printer then adds blocks of this
// many elements into a double total; a CUDA thread adding more than this sums in double.
constexpr int64_t kLongSum = 4096;

// The CPU printer's block: float sums over more elements than this add each block's f32
// partial (split across SIMD lanes) into a double total. At 4096, one AVX2 lane still
// added 512 terms in f32: LayerNorm's variance over 4099 values came out 7e-6 off
// (relative) where eager's cascade was 7e-8 off, over 496 values 2.4e-6 where eager was
// 5e-8 (CPU fuzz seeds 348235, 342941; the affine weights of about 100 made the outputs
// 20x and 8x eager's error against fp64). At 256, a lane adds at most 32 terms. Its cost,
// A/B in one process at 1 thread (CPU time, medians of 40-80 interleaved calls): LayerNorm
// [2048,768], BatchNorm training [32,64,56,56], row sums of [4096,4096] within +-5% of 4096's,
// as the unchanged softmax's kernel (the noise of a shared machine), none slower in every run.
constexpr int64_t kCpuSumBlock = 256;

// Whether a reduction whose accumulator takes `chain` elements sums in double (CUDA).
bool sums_in_double(const ComputedBuffer& c, int64_t chain);

// Bytes of one partial of that accumulator, as a column split stores them: 4 for float
// and 32-bit accumulators, 8 for double and 64-bit ones (and narrower integers and bool,
// which take a slot as wide as the widest).
int64_t accumulator_bytes(const ComputedBuffer& c, int64_t chain);

}  // namespace ember

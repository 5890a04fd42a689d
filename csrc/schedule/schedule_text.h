// The text form of a Schedule: the dump after each schedule pass, and what a pass test
// of one starts from (with the program text it refers to). A kernel, its stages (each
// with the buffers it computes, as a summary), and under each stage its items, the
// buffer's store index and value in the kernel's loop vars (o<d> outer, i<d> inner):
//
//   kernel ember_k0 outer=[4]
//     stage 0 inner=[16]: buf2(sum)
//       reduce buf2[o0] = buf0[((o0 * 16) + i0)]
//     stage 1 vector split=4 inner=[64,8]: buf3(sum)
//       ...
//     stage 2 inner=[16]: buf4
//       buf4[((o0 * 16) + i0)] = ...
//   extern %3 aten.mm.default  # matmul: ATen (BLAS)
//
// `reduce` marks a reduction item, `scan` a scan; `vector` a vector stage, `split=k` a
// stage split k ways (kernel.h). parse_schedule(print_schedule(s, p), p) is s.
#pragma once
#include <string>

#include "lower/program.h"
#include "schedule/kernel.h"

namespace ember {

std::string print_schedule(const Schedule& s, const Program& p);
// The kernel and stage lines only (what fusion decided, without the items' expressions).
std::string schedule_summary(const std::string& schedule_text);
// Throws std::invalid_argument, naming the line and column, on malformed text.
Schedule parse_schedule(const std::string& text, const Program& p);

}  // namespace ember

// The Elementwise shape's vector path, planned: each thread takes groups of 4 or 8
// consecutive elements along the innermost dim, reads each buffer contiguous along it
// with one 16-byte (or 8/4-byte) load and writes contiguous outputs with one store; and,
// where the grid allows, per-lane values that depend only on the innermost index are
// computed once per thread before the grid-stride loop (hoisting, lane_invariant.h).
// Printed by codegen/cuda/vector_path.h, before the scalar loop that runs when the
// vector path's run-time checks fail.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/expr.h"
#include "lower/program.h"
#include "schedule/cuda/kernel_info.h"
#include "schedule/cuda/launch.h"
#include "schedule/kernel.h"
#include "schedule/placement.h"

namespace ember {

// Hoisting in the elementwise vector path. When the grid-stride step (blocks x 256
// threads x lanes elements) is a multiple of the innermost extent, a thread's innermost
// coordinate is the same in every step, so values that depend on it alone (channels-last
// BatchNorm's per-channel scale) are computed once per thread, per lane, before the
// loop (lane_invariant.h says which), and the vector words such buffers are read in
// are loaded there too. At most kHoistWords 32-bit registers a thread. Only when the
// grid would give threads several steps: it is then made at most 1/kHoistSteps of the
// blocks the elements need, at least kHoistBlocks (a full H100 at 8 blocks an SM), and
// a multiple of extent / gcd(extent, block x lanes) (no hoisting when that multiple
// exceeds an eighth of the grid).
constexpr int64_t kHoistWords = 48;  // 32 left two of ResNet's six bf16 [C] words in the loop (73% vs 84%)
constexpr int64_t kHoistSteps = 8;
// A kernel holding more than kHoistMinBlocksAbove registers of hoisted values and words
// (ResNet's pairs of BatchNorms: 40) reached 79 registers, 3 blocks an SM; declared at 4
// blocks (64 registers) those ran 1.5-5% faster on an H100. Single BatchNorms (20, at
// 48 registers) ran 8% slower with the same declaration, so they are left alone.
constexpr int64_t kHoistMinBlocksAbove = 32;
constexpr int kHoistMinBlocks = 4;
constexpr int64_t kHoistBlocks = 1024;

// An elementwise kernel's vector path. Each thread takes groups of `lanes` consecutive
// elements along the innermost dim (var v).
struct VectorPlan {
  // A Where condition (as taken: negated for the else branch) tested at one lane of the
  // group, which holds there exactly when it holds for some lane of the group.
  struct LaneTest {
    Expr cond;
    bool last;  // at the group's last lane (else its first)
  };
  struct Word {  // one vector load: a buffer at one index, lane u at v = iv + u
    int buffer = 0;
    Expr index;
    std::vector<Expr> loads;  // the Load exprs it stands for (structurally distinct, same index)
    std::string name;         // raw<b>; raw<b>_<n> for a buffer's later indices
    bool invariant = false;   // the index depends on v alone
    bool clamp = false;       // read only under Where branches, possibly out of bounds
    // Read only under Where branches whose conditions are monotone along the group
    // (a cat's `v < 256`): the word is loaded when, for one of these alternatives (its
    // reads' branches), every test holds; empty: always loaded. A lane whose branch is
    // not taken discards the word's value, so one no lane needs is never read (a cat
    // of five branches read all five operands for every element: 13% of copy bandwidth).
    std::vector<std::vector<LaneTest>> needed;
  };
  int lanes = 0;  // 0: no vector path
  int v = 0;
  int64_t extent = 0;  // v's
  std::vector<Word> words;
  std::set<int> stores;
  // plan_hoist (kHoistWords): per-lane values computed before the grid-stride loop
  // (h<k>[u]), words loaded there, and the words the loop itself reads.
  std::vector<Expr> hoisted;
  std::set<size_t> kept;
  int64_t hoisted_registers = 0;  // 32-bit registers a thread holds them and the kept words in
  std::set<size_t> loop_words;
};

// The vector path of kernel `ki`, an Elementwise one of one stage whose innermost dim is
// a multiple of `launch.per_thread` lanes; lanes == 0 (none) otherwise, or when no
// access would be a vector one.
VectorPlan plan_vector(const Program& p, const Schedule& s, const Placement& m, int ki, const CudaLaunch& launch);

// See kHoistWords. Values first (most costly first), then the invariant words the loop
// still reads, within the registers given; nothing unless some value is hoisted. Sets
// info.grid, info.hoisted_values and info.hoisted_words when it hoists.
void plan_hoist(VectorPlan& vec, const Program& p, const Schedule& s, const Placement& m, int ki, CudaKernelInfo& info);
// The minimum blocks per SM to declare for a kernel with this plan and blocks of `block`
// threads: when its hoisted registers exceed kHoistMinBlocksAbove, as many as make
// kHoistMinBlocks blocks of kElementwiseBlock threads (at least 1), else 0 (none declared).
int hoist_min_blocks(const VectorPlan& vec, uint32_t block);

// The words whose loads `roots` reach, not looking inside `stop` (values computed elsewhere).
std::set<size_t> words_read(const VectorPlan& vec, const std::vector<Expr>& roots,
                            const std::unordered_set<Expr, ExprHash, ExprEqual>& stop);

}  // namespace ember

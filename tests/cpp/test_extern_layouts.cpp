// Layouts ember gives extern operands: attention masks as SDPA's fused kernels take them.
#include "check.h"
#include "pipeline_util.h"

using namespace ember;
using ember_test::Pipeline;

namespace {

const ExternCall& the_extern(const Program& p, const std::string& op, const Graph& g) {
  for (const auto& e : p.externs)
    if (g.nodes[e.node].op == op) return e;
  throw std::runtime_error("no extern " + op);
}

}  // namespace

TEST(permuted_attention_bias_is_stored_with_contiguous_aligned_rows) {
  // T5's relative position bias: [q, k, heads] permuted to [1, heads, q, k] (last dim
  // strided by the head count): SDPA would run its math path on it.
  Pipeline p(R"(graph {
  %0 = input(0) : bf16[2,4,8,16]{512,128,16,1}
  %1 = input(1) : bf16[8,8,4]{32,4,1}
  %2 = aten.permute.default(%1, [2, 0, 1]) : bf16[4,8,8]{1,32,4}
  %3 = aten.unsqueeze.default(%2, 0) : bf16[1,4,8,8]{256,1,32,4}
  %4 = ember.sdpa_masked.default(%0, %0, %0, %3, false, none) : bf16[2,4,8,16]{512,128,16,1}
  return (%4)
}
)");
  const ExternCall& e = the_extern(p.program, "ember.sdpa_masked.default", p.graph);
  const StridedView& mask = e.tensor_views.at(3);
  CHECK_EQ(print_dims(mask.strides), "[512,128,16,1]");
  CHECK_EQ(print_dims(mask.sizes), "[1,4,8,8]");
  CHECK(p.program.buffers[mask.buffer].kind == Buffer::Kind::Computed);
}

TEST(broadcast_attention_mask_is_stored_once_along_its_broadcast_dims) {
  // BERT's padding mask [b, 1, 1, k] expanded over the query rows: stored compact, [b, 1, 1, k]
  // with aligned rows, and passed as a view that broadcasts it again.
  Pipeline p(R"(graph {
  %0 = input(0) : bf16[2,1,8,16]{128,128,16,1}
  %1 = input(1) : bf16[2,8]{8,1}
  %2 = aten.rsub.Scalar(%1, 1.0, 1) : bf16[2,8]{8,1}
  %3 = aten.mul.Tensor(%2, -10000.0) : bf16[2,8]{8,1}
  %4 = aten.view.default(%3, [2, 1, 1, 8]) : bf16[2,1,1,8]{8,8,8,1}
  %5 = aten.expand.default(%4, [2, 1, 8, 8], false) : bf16[2,1,8,8]{8,8,0,1}
  %6 = ember.sdpa_masked.default(%0, %0, %0, %5, false, none) : bf16[2,1,8,16]{128,128,16,1}
  return (%6)
}
)");
  const ExternCall& e = the_extern(p.program, "ember.sdpa_masked.default", p.graph);
  const StridedView& mask = e.tensor_views.at(3);
  CHECK_EQ(print_dims(mask.sizes), "[2,1,8,8]");
  CHECK_EQ(print_dims(mask.strides), "[16,16,0,1]");
  const Buffer& b = p.program.buffers[mask.buffer];
  CHECK(b.kind == Buffer::Kind::Computed);
  CHECK_EQ(print_dims(b.sizes), "[2,1,1,8]");
}

TEST(contiguous_aligned_attention_mask_is_passed_as_it_is) {
  Pipeline p(R"(graph {
  %0 = input(0) : bf16[2,4,8,16]{512,128,16,1}
  %1 = input(1) : bf16[2,4,8,16]{512,128,16,1}
  %2 = ember.sdpa_masked.default(%0, %0, %0, %1, false, none) : bf16[2,4,8,16]{512,128,16,1}
  return (%2)
}
)");
  const ExternCall& e = the_extern(p.program, "ember.sdpa_masked.default", p.graph);
  CHECK(p.program.buffers[e.tensor_views.at(3).buffer].kind == Buffer::Kind::Input);
  CHECK(p.program.computed.empty());
}

// Layouts ember gives extern operands: attention masks as SDPA's fused kernels take them;
// convolutions and their backward channels-last, with a training forward's saved activations.
#include "check.h"
#include "lower/extern_layouts.h"
#include "pipeline_util.h"

using namespace ember;
using ember_test::CudaPipeline;
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

TEST(padded_broadcast_bias_reaches_an_extern_in_eager_strides) {
  // SDPA's memory-efficient decomposition pads an attention bias's rows to 8 elements,
  // slices them back and expands the bias over the batch (Swin's relative position bias,
  // [1, heads, 49, 49]). Stored densely the bias would have batch stride 3*49*49, which the
  // kernel refuses; in eager's strides it keeps the padded rows and the broadcast batch.
  Pipeline p(R"(graph {
  %0 = input(0) : bf16[4,3,49,32]{4704,1568,32,1}
  %1 = input(1) : bf16[1,3,49,49]{7203,2401,49,1}
  %2 = aten.mul.Tensor(%1, 2.0) : bf16[1,3,49,49]{7203,2401,49,1}
  %3 = aten.constant_pad_nd.default(%2, [0, 7], 0.0) : bf16[1,3,49,56]{8232,2744,56,1}
  %4 = aten.slice.Tensor(%3, -1, 0, 49) : bf16[1,3,49,49]{8232,2744,56,1}
  %5 = aten.expand.default(%4, [4, 3, 49, 49], false) : bf16[4,3,49,49]{0,2744,56,1}
  %6 = aten._scaled_dot_product_efficient_attention.default(%0, %0, %0, %5, false) : bf16[4,3,49,32]{4704,1568,32,1}
  return (%6)
}
)");
  const ExternCall& e = the_extern(p.program, "aten._scaled_dot_product_efficient_attention.default", p.graph);
  const StridedView& bias = e.tensor_views.at(3);
  CHECK_EQ(print_dims(bias.sizes), "[4,3,49,49]");
  CHECK_EQ(print_dims(bias.strides), "[0,2744,56,1]");
  CHECK_EQ(print_dims(p.program.buffers[bias.buffer].sizes), "[1,3,49,49]");
}

TEST(overlapping_eager_strides_are_not_a_layout_for_an_extern) {
  // An expand of a value eager stores with overlapping rows is materialized as before.
  TensorType t;
  t.is_tensor = true;
  t.dtype = DType::F32;
  t.strides = {0, 4, 8};
  CHECK(!eager_broadcast_layout({2, 4, 8}, t).has_value());
  t.strides = {0, 8, 1};
  CHECK(eager_broadcast_layout({2, 4, 8}, t).has_value());
  t.strides = {32, 8, 1};  // broadcasts nothing
  CHECK(!eager_broadcast_layout({2, 4, 8}, t).has_value());
}

TEST(padded_bias_reaches_an_extern_in_eager_strides) {
  // Swin's shifted windows: the bias is [windows, heads, 49, 49], a sum, padded the same way.
  Pipeline p(R"(graph {
  %0 = input(0) : bf16[4,3,49,32]{4704,1568,32,1}
  %1 = input(1) : bf16[1,3,49,49]{7203,2401,49,1}
  %2 = input(2) : bf16[4,1,49,49]{2401,2401,49,1}
  %3 = aten.add.Tensor(%1, %2) : bf16[4,3,49,49]{7203,2401,49,1}
  %4 = aten.constant_pad_nd.default(%3, [0, 7], 0.0) : bf16[4,3,49,56]{8232,2744,56,1}
  %5 = aten.slice.Tensor(%4, -1, 0, 49) : bf16[4,3,49,49]{8232,2744,56,1}
  %6 = aten.expand.default(%5, [4, 3, 49, 49], false) : bf16[4,3,49,49]{8232,2744,56,1}
  %7 = aten._scaled_dot_product_efficient_attention.default(%0, %0, %0, %6, false) : bf16[4,3,49,32]{4704,1568,32,1}
  return (%7)
}
)");
  const ExternCall& e = the_extern(p.program, "aten._scaled_dot_product_efficient_attention.default", p.graph);
  const StridedView& bias = e.tensor_views.at(3);
  CHECK_EQ(print_dims(bias.strides), "[8232,2744,56,1]");
}

TEST(attention_operand_held_in_another_layout_is_stored_again_for_the_call) {
  // Swin's relative position bias is gathered as [q*k, heads] and permuted: held in memory
  // with the heads innermost (strides [.., 1, 147, 3]), it breaks the memory-efficient
  // kernel's rule that the bias's last dim is contiguous. The call gets a copy in eager's
  // layout, which meets the rules.
  Pipeline p(R"(graph {
  %0 = input(0) : bf16[4,3,49,32]{4704,1568,32,1}
  %1 = input(1) : bf16[4,49,49,3]{7203,147,3,1}
  %2 = aten.permute.default(%1, [0, 3, 1, 2]) : bf16[4,3,49,49]{7203,1,147,3}
  %3 = aten._scaled_dot_product_efficient_attention.default(%0, %0, %0, %2, false) : bf16[4,3,49,32]{4704,1568,32,1}
  return (%3)
}
)");
  const ExternCall& e = the_extern(p.program, "aten._scaled_dot_product_efficient_attention.default", p.graph);
  const StridedView& bias = e.tensor_views.at(3);
  CHECK_EQ(print_dims(bias.strides), "[9408,3136,64,1]");
  CHECK(p.program.buffers[bias.buffer].kind == Buffer::Kind::Computed);
  CHECK(p.program.buffers[e.tensor_views.at(0).buffer].kind == Buffer::Kind::Input);  // q meets the rules as it is
}

TEST(attention_layout_rules) {
  CHECK(meets_attention_layout_rules({4, 3, 49, 49}, {8232, 2744, 56, 1}, 0, DType::BF16));
  CHECK(!meets_attention_layout_rules({4, 3, 49, 49}, {7203, 2401, 49, 1}, 0, DType::BF16));
  CHECK(!meets_attention_layout_rules({4, 3, 49, 49}, {7203, 1, 147, 3}, 0, DType::BF16));
  CHECK(meets_attention_layout_rules({4, 3, 49, 49}, {0, 2744, 56, 1}, 0, DType::BF16));
  CHECK(!meets_attention_layout_rules({4, 3, 49, 56}, {8232, 2744, 56, 1}, 4, DType::BF16));
  CHECK(meets_attention_layout_rules({4, 3, 49, 52}, {7644, 2548, 52, 1}, 0, DType::F32));
}

TEST(lazy_attention_operand_in_a_layout_against_the_rules_is_stored_aligned) {
  // The same bias computed here (a sum), eager's strides keeping the heads innermost.
  Pipeline p(R"(graph {
  %0 = input(0) : bf16[4,3,49,32]{4704,1568,32,1}
  %1 = input(1) : bf16[4,49,49,3]{7203,147,3,1}
  %2 = aten.permute.default(%1, [0, 3, 1, 2]) : bf16[4,3,49,49]{7203,1,147,3}
  %3 = aten.mul.Tensor(%2, 2.0) : bf16[4,3,49,49]{7203,1,147,3}
  %4 = aten._scaled_dot_product_efficient_attention.default(%0, %0, %0, %3, false) : bf16[4,3,49,32]{4704,1568,32,1}
  return (%4)
}
)");
  const ExternCall& e = the_extern(p.program, "aten._scaled_dot_product_efficient_attention.default", p.graph);
  CHECK_EQ(print_dims(e.tensor_views.at(3).strides), "[9408,3136,64,1]");
}

namespace {

// A training forward: conv -> relu, the relu's result both saved for the backward (position
// 1) and, in the second graph, also returned to the user (position 2).
const char* kForward = R"(graph {
  %0 = input(0) : f32[2,8,6,6]{288,36,6,1}
  %1 = input(1) : f32[8,8,3,3]{72,9,3,1}
  %2 = aten.convolution.default(%0, %1, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : f32[2,8,6,6]{288,36,6,1}
  %3 = aten.relu.default(%2) : f32[2,8,6,6]{288,36,6,1}
  %4 = aten.sum.default(%3) : f32[]{}
  return (%4, %3)OWN
}
)";

std::string forward(const std::string& own) {
  std::string text = kForward;
  return text.replace(text.find("OWN"), 3, own);
}

}  // namespace

TEST(saved_activation_leaves_in_embers_layout_where_the_graph_allows) {
  // Declared strides: the relu's result is written NCHW. In ember's own layout it leaves
  // channels-last, the layout its convolution produced, with no transposing kernel.
  for (bool cuda : {false, true}) {
    PipelineOptions opts = cuda ? PipelineOptions::cuda() : PipelineOptions::cpu();
    opts.channels_last_activations = true;
    Pipeline declared(forward(""), opts);
    CHECK_EQ(print_dims(declared.program.outputs.at(1).view.strides), "[288,36,6,1]");
    Pipeline own(forward(" own_layout(1)"), opts);
    CHECK_EQ(print_dims(own.program.outputs.at(1).view.strides), "[288,1,48,8]");
  }
}

TEST(output_returned_also_in_declared_strides_keeps_them) {
  PipelineOptions opts = PipelineOptions::cpu();
  opts.channels_last_activations = true;
  std::string text = forward(" own_layout(1)");
  text.replace(text.find("return (%4, %3)"), 15, "return (%4, %3, %3)");
  Pipeline p(text, opts);
  CHECK_EQ(print_dims(p.program.outputs.at(1).view.strides), "[288,36,6,1]");
  CHECK_EQ(print_dims(p.program.outputs.at(2).view.strides), "[288,36,6,1]");
}

TEST(convolution_backward_takes_and_returns_channels_last) {
  // A backward graph has no forward convolution: its convolution_backward still runs on
  // channels-last operands (cuDNN transposed NCHW ones on every call) and returns
  // channels-last gradients, and the graph's activations are stored channels-last.
  Pipeline p(R"(graph {
  %0 = input(0) : f32[2,8,6,6]{288,1,48,8}
  %1 = input(1) : f32[2,8,6,6]{288,1,48,8}
  %2 = input(2) : f32[8,8,3,3]{72,9,3,1}
  %3 = aten.threshold_backward.default(%0, %1, 0.0) : f32[2,8,6,6]{288,36,6,1}
  %4 = aten.convolution_backward.default(%3, %1, %2, [0], [1, 1], [1, 1], [1, 1], false, [0, 0], 1, [true, true, false]) : (f32[2,8,6,6]{288,36,6,1}, f32[8,8,3,3]{72,9,3,1}, none)
  %5 = aten.mul.Tensor(%4.0, 2.0) : f32[2,8,6,6]{288,36,6,1}
  %6 = aten.convolution_backward.default(%5, %1, %2, [0], [1, 1], [1, 1], [1, 1], false, [0, 0], 1, [false, true, false]) : (none, f32[8,8,3,3]{72,9,3,1}, none)
  return (%4.1, %6.1)
}
)");
  const ExternCall& e = the_extern(p.program, "aten.convolution_backward.default", p.graph);
  for (int k = 0; k < 3; ++k) {
    const StridedView& v = e.tensor_views.at(k);
    CHECK_EQ(print_dims(v.strides), k < 2 ? "[288,1,48,8]" : "[72,1,24,8]");
  }
  CHECK_EQ(print_dims(p.program.buffers.at(e.output_buffers.at(0)).strides), "[288,1,48,8]");
  CHECK_EQ(print_dims(p.program.buffers.at(e.output_buffers.at(1)).strides), "[72,1,24,8]");
  // The gradients leave in the strides the graph declares (the parameters').
  CHECK_EQ(print_dims(p.program.outputs.at(0).view.strides), "[72,9,3,1]");
}

namespace {

// ConvNeXt's LayerNorm over channels: an NCHW value permuted to [N, H, W, C], its mean
// over C ([N, H, W, 1]) and the normalized value, both kept for a backward (own_layout).
// A convolution elsewhere makes the graph's activations channels-last.
Compiled permuted_layer_norm(const std::string& input_strides) {
  std::string text = R"(graph {
  %0 = input(0) : f32[2,8,6,5]STRIDES
  %1 = input(1) : f32[8,8,3,3]{72,9,3,1}
  %2 = aten.convolution.default(%0, %1, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : f32[2,8,6,5]{240,30,5,1}
  %3 = aten.permute.default(%0, [0, 2, 3, 1]) : f32[2,6,5,8]{240,5,1,30}
  %4 = aten.mean.dim(%3, [-1], true) : f32[2,6,5,1]{30,5,1,1}
  %5 = aten.sub.Tensor(%3, %4) : f32[2,6,5,8]{240,40,8,1}
  return (%2, %4, %5) own_layout(1, 2)
}
)";
  text.replace(text.find("STRIDES"), 7, input_strides);
  return Pipeline(text, [] {
    PipelineOptions o = PipelineOptions::cpu();
    o.channels_last_activations = true;
    return o;
  }());
}

}  // namespace

TEST(a_mean_over_channels_last_channels_is_stored_in_eager_strides) {
  // [N, H, W, 1]: "channels-last" would make H the unit-stride dim, where the mean was
  // computed and is read W-innermost.
  Compiled c = permuted_layer_norm("{240,30,5,1}");
  CHECK_EQ(print_dims(c.program.outputs.at(1).view.strides), "[30,5,1,1]");
}

TEST(a_value_reading_an_nchw_tensor_through_a_permute_is_stored_w_innermost) {
  // [N, H, W, C] read from NCHW memory: neither its channels-last strides (H innermost) nor
  // eager's (C innermost) walk the input along W; the stored value follows the input.
  Compiled c = permuted_layer_norm("{240,30,5,1}");
  const Dims& strides = c.program.outputs.at(2).view.strides;
  CHECK_EQ(strides.at(2).hint(), 1);
  CHECK_EQ(strides.at(1).hint(), 5);
  // Read from channels-last memory the same value is contiguous [N, H, W, C].
  Compiled cl = permuted_layer_norm("{240,1,40,8}");
  CHECK_EQ(print_dims(cl.program.outputs.at(2).view.strides), "[240,40,8,1]");
}

TEST(a_cuda_graph_with_few_convolutions_keeps_eager_layouts_for_its_activations) {
  // A transformer with a convolution for its patch embedding is not a convnet: on CUDA its
  // 4-D values keep eager's layouts once it has 300 nodes or more per convolution (as
  // TorchInductor's layout optimization decides). Its convolution still takes channels-last
  // operands.
  auto graph = [](int extra_nodes) {
    std::string text = R"(graph {
  %0 = input(0) : f32[2,8,6,5]{240,30,5,1}
  %1 = input(1) : f32[8,8,3,3]{72,9,3,1}
  %2 = input(2) : f32[4]{1}
  %3 = aten.convolution.default(%0, %1, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1) : f32[2,8,6,5]{240,30,5,1}
  %4 = aten.relu.default(%3) : f32[2,8,6,5]{240,30,5,1}
)";
    int last = 2;
    for (int k = 0; k < extra_nodes; ++k) {
      text += "  %" + std::to_string(5 + k) + " = aten.neg.default(%" + std::to_string(last) + ") : f32[4]{1}\n";
      last = 5 + k;
    }
    return text + "  return (%4, %" + std::to_string(last) + ") own_layout(0)\n}\n";
  };
  CudaPipeline convnet(graph(10));
  CHECK_EQ(print_dims(convnet.program.outputs.at(0).view.strides), "[240,1,40,8]");
  CudaPipeline transformer(graph(300));
  CHECK_EQ(print_dims(transformer.program.outputs.at(0).view.strides), "[240,30,5,1]");
  const ExternCall& conv = the_extern(transformer.program, "aten.convolution.default", transformer.graph);
  CHECK_EQ(print_dims(conv.tensor_views.at(0).strides), "[240,1,40,8]");
}

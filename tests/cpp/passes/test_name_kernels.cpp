// name_kernels: graph text in (the pass reads the graph's ops), schedule text out; and the
// naming function itself.
#include <cctype>

#include "check.h"
#include "pipeline_util.h"
#include "schedule/name_kernels.h"

using ember::descriptive_kernel_name;
using ember_test::after;
using ember_test::Pipeline;
using ember_test::schedule_part;

namespace {

// LayerNorm, then GELU: one kernel (three stages), then the linear's matmul, then a softmax.
constexpr const char* kBlock = R"(graph {
  %0 = input(0) : f32[4,16]{16,1}
  %1 = input(1) : f32[16]{1}
  %2 = input(2) : f32[16]{1}
  %3 = input(3) : f32[16,16]{16,1}
  %4 = aten.var_mean.correction(%0, [1], 0, true) : (f32[4,1]{1,1}, f32[4,1]{1,1})
  %5 = aten.add.Tensor(%4, 1e-05, 1) : f32[4,1]{1,1}
  %6 = aten.rsqrt.default(%5) : f32[4,1]{1,1}
  %7 = aten.sub.Tensor(%0, %4.1, 1) : f32[4,16]{16,1}
  %8 = aten.mul.Tensor(%7, %6) : f32[4,16]{16,1}
  %9 = aten.mul.Tensor(%8, %1) : f32[4,16]{16,1}
  %10 = aten.add.Tensor(%9, %2, 1) : f32[4,16]{16,1}
  %11 = aten.gelu.default(%10, "none") : f32[4,16]{16,1}
  %12 = aten.mm.default(%11, %3) : f32[4,16]{16,1}
  %13 = aten._softmax.default(%12, 1, false) : f32[4,16]{16,1}
  return (%13)
}
)";

const std::vector<std::string> kToNames = {"lower_graph", "eliminate_dead_code", "fuse", "merge_inner_dims",
                                           "split_reductions", "name_kernels"};

std::string plan(const std::string& graph, ember::PipelineOptions opts = ember::PipelineOptions::cpu()) {
  return ember::schedule_summary(schedule_part(after(graph, kToNames, opts)));
}

bool is_c_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

TEST(kernel_names_give_kind_main_ops_and_index) {
  // LayerNorm's ops: reductions and functions first, then arithmetic, each once, at most
  // four, then how many more.
  CHECK_EQ(descriptive_kernel_name("red", {"aten.var_mean.correction", "aten.add.Tensor", "aten.rsqrt.default",
                                           "aten.sub.Tensor", "aten.mul.Tensor", "aten.mul.Tensor", "aten.add.Tensor"},
                                   12),
           "ember_red_var_mean_rsqrt_add_sub_plus1_12");
  CHECK_EQ(descriptive_kernel_name("poi", {"aten.mul.Tensor", "aten.add.Tensor"}, 3), "ember_poi_mul_add_3");
  // Ops that only move data are left out beside ones that compute...
  CHECK_EQ(descriptive_kernel_name("poi", {"aten.permute.default", "aten.clone.default", "aten.gelu.default",
                                           "aten._to_copy.default", "aten.view.default"},
                                   0),
           "ember_poi_gelu_0");
  // So are ops that make constants.
  CHECK_EQ(descriptive_kernel_name("poi", {"aten.arange.default", "aten.full.default", "aten.gather.default",
                                           "aten.add.Tensor"},
                                   4),
           "ember_poi_gather_add_4");
  // ... and name a kernel that does nothing else; a layout copy does no op's work.
  CHECK_EQ(descriptive_kernel_name("poi", {"aten.permute.default", "aten.clone.default"}, 7),
           "ember_poi_permute_clone_7");
  CHECK_EQ(descriptive_kernel_name("poi", {"aten._to_copy.default"}, 1), "ember_poi_to_copy_1");
  CHECK_EQ(descriptive_kernel_name("poi", {}, 2), "ember_poi_copy_2");
  CHECK_EQ(descriptive_kernel_name("scan", {"aten.cumsum.default"}, 0), "ember_scan_cumsum_0");
  // Other namespaces, odd characters and long names: a C identifier of bounded length.
  const std::string odd = descriptive_kernel_name(
      "red", {"prims.convert_element_type.default", "my_lib.weird-op!.default",
              "aten._native_batch_norm_legit_no_training.default", "aten.amax.default", "aten.exp.default",
              "aten.log.default"},
      5);
  CHECK_EQ(odd, "ember_red_weird_op_native_batch_norm_legit_amax_exp_plus1_5");
  CHECK(is_c_identifier(odd));
  CHECK_EQ(ember::short_kernel_name(5), "ember_k5");
}

TEST(name_kernels_names_a_layer_norm_gelu_and_a_softmax) {
  CHECK_EQ(plan(kBlock),
           "kernel ember_red_var_mean_rsqrt_gelu_add_plus2_0 outer=[4]\n"
           "  stage 0 inner=[16]: buf4(sum)\n"
           "  stage 1 inner=[16]: buf5(sum) buf6(sum)\n"
           "  stage 2 inner=[16]: buf7\n"
           "extern %12 aten.mm.default  # matmul: ATen (BLAS)\n"
           "kernel ember_red_softmax_1 outer=[4]\n"
           "  stage 0 inner=[16]: buf9(max)\n"
           "  stage 1 inner=[16]: buf10(sum)\n"
           "  stage 2 inner=[16]: buf11\n");
  // descriptive_names off: fusion's short names.
  ember::PipelineOptions short_names = ember::PipelineOptions::cpu();
  short_names.descriptive_names = false;
  const std::string plain = plan(kBlock, short_names);
  CHECK(plain.find("kernel ember_k0 outer=[4]") != std::string::npos);
  CHECK(plain.find("kernel ember_k1 outer=[4]") != std::string::npos);
  // The pass reads the graph's ops: program text alone is refused with the reason.
  bool refused = false;
  try {
    after(ember_test::after(kBlock, {"lower_graph", "eliminate_dead_code", "fuse"}), {"name_kernels"});
  } catch (const std::invalid_argument& e) {
    refused = std::string(e.what()).find("start from graph text") != std::string::npos;
  }
  CHECK(refused);
}

TEST(name_kernels_names_the_c_functions_and_their_launchers) {
  Pipeline p(kBlock);
  const auto& k = p.c_code.kernels;
  CHECK_EQ(k.size(), 2u);
  if (k.size() != 2) return;
  CHECK_EQ(k[0].name, p.schedule.kernels[0].name);
  CHECK(k[0].name.rfind("ember_red_var_mean", 0) == 0);
  const std::string& c = p.c_code.source;
  for (const auto& info : k) {
    CHECK(c.find("void " + info.name + "(int64_t begin, int64_t end, char* const* args)") != std::string::npos);
    CHECK(c.find("void " + info.name + "_launch(int64_t rows") != std::string::npos);
  }
  CHECK(c.find("ember_k") == std::string::npos);
}

// Kernels equal but for their buffers still share one function: the name is taken out of
// the text they are compared by, so two layers whose kernels differ in name only (their
// index) compile once.
TEST(kernels_equal_but_for_their_names_share_one_function) {
  const std::string two_layers = R"(graph {
  %0 = input(0) : f32[4,8]{8,1}
  %1 = input(1) : f32[8,8]{8,1}
  %2 = aten.tanh.default(%0) : f32[4,8]{8,1}
  %3 = aten.mm.default(%2, %1) : f32[4,8]{8,1}
  %4 = aten.tanh.default(%3) : f32[4,8]{8,1}
  %5 = aten.mm.default(%4, %1) : f32[4,8]{8,1}
  return (%5)
}
)";
  Pipeline p(two_layers);
  const auto& k = p.c_code.kernels;
  CHECK_EQ(k.size(), 2u);
  if (k.size() != 2) return;
  CHECK_EQ(k[0].name, "ember_poi_tanh_0");
  CHECK_EQ(k[1].name, "ember_poi_tanh_1");
  CHECK_EQ(k[1].function, k[0].name);
  CHECK(p.c_code.source.find("void ember_poi_tanh_1(") == std::string::npos);

  ember_test::CudaPipeline q(two_layers);
  const auto& ck = q.cuda_code.kernels;
  CHECK_EQ(ck.size(), 2u);
  if (ck.size() != 2) return;
  CHECK_EQ(ck[1].name, "ember_poi_tanh_1");
  CHECK_EQ(ck[1].function, ck[0].name);
  CHECK_EQ(q.cuda_code.kernel_sources[1], "/* ember_poi_tanh_1: runs ember_poi_tanh_0 */\n");

  // The same graph names its kernels the same way every time: its cache keys are stable.
  CHECK_EQ(Pipeline(two_layers).c_code.source, p.c_code.source);
}

// On CUDA the kind follows the CUDA schedule: a row kept in registers across the stages
// (a row tile with slots) is a persistent reduction, as Inductor's triton_per_ kernels.
TEST(cuda_kernel_names_follow_the_cuda_schedule) {
  ember_test::CudaPipeline p(R"(graph {
  %0 = input(0) : bf16[64,768]{768,1}
  %1 = aten._to_copy.default(%0, "f32", none, none, none, false, none) : f32[64,768]{768,1}
  %2 = aten.var_mean.correction(%1, [1], 0, true) : (f32[64,1]{1,1}, f32[64,1]{1,1})
  %3 = aten.add.Tensor(%2, 1e-05, 1) : f32[64,1]{1,1}
  %4 = aten.rsqrt.default(%3) : f32[64,1]{1,1}
  %5 = aten.sub.Tensor(%1, %2.1, 1) : f32[64,768]{768,1}
  %6 = aten.mul.Tensor(%5, %4) : f32[64,768]{768,1}
  %7 = aten._to_copy.default(%6, "bf16", none, none, none, false, none) : bf16[64,768]{768,1}
  return (%7)
}
)");
  const auto& k = p.cuda_code.kernels;
  CHECK_EQ(k.size(), 1u);
  if (k.size() != 1) return;
  CHECK(k[0].row_slots > 0);
  CHECK_EQ(k[0].name, "ember_per_var_mean_rsqrt_add_sub_plus1_0");
  CHECK_EQ(p.cuda_schedule.kernels[0].info.name, k[0].name);
  CHECK(p.cuda_code.source.find(" ember_per_var_mean_rsqrt_add_sub_plus1_0(") != std::string::npos);
  // The same graph on the CPU: a reduction.
  Pipeline cpu(R"(graph {
  %0 = input(0) : f32[64,768]{768,1}
  %1 = aten.var_mean.correction(%0, [1], 0, true) : (f32[64,1]{1,1}, f32[64,1]{1,1})
  return (%1, %1.1)
}
)");
  CHECK_EQ(cpu.c_code.kernels.at(0).name, "ember_red_var_mean_0");
}

#include "codegen/cuda/elementwise.h"

#include "codegen/stage_items.h"

namespace ember {

std::vector<std::string> elementwise_body(CudaPrinter& pr) {
  const Program& p = pr.p;
  const Kernel& k = pr.k;
  CEmitter& em = *pr.em;
  const std::string I = pr.index_type();
  const bool per_row = k.stages[0].inner.empty() || k.stages.size() > 1;
  const Dim inner = per_row ? Dim(1) : product(k.stages[0].inner);
  // Sizes first: a symbolic one is a function-scope value.
  const std::string inner_text = pr.size_text(inner);
  const std::string total = pr.launch.symbolic ? pr.size_text(pr.launch.total_dim) : std::to_string(pr.launch.total);
  em.open_scope(pr.outer_vars());
  for (const auto& l : pr.decompose_dims("x", k.outer, "o")) em.line(l);
  pr.pin_own_loads();
  std::vector<Acc> no_accs;  // no reductions in this shape
  for (size_t st = 0; st < k.stages.size(); ++st) {
    const Stage& stage = k.stages[st];
    if (!per_row) {
      em.open_scope(pr.inner_vars(stage));
      for (const auto& l : pr.decompose_dims("j", stage.inner, "i")) em.line(l);
    }
    print_stage_items(em, {p, stage, pr.m.in_memory, no_accs, nullptr, ""});
    if (!per_row)
      for (const auto& l : em.close_scope()) em.line(l);
  }
  std::vector<std::string> row = em.close_scope();
  // The body of one element e, indented by `pad`.
  auto element = [&](std::vector<std::string>& out, const std::string& pad) {
    if (inner == Dim(1)) {
      out.push_back(pad + "const " + I + " x = e;");
    } else {
      out.push_back(pad + "const " + I + " x = e / " + inner_text + ";");
      out.push_back(pad + "const " + I + " j = e - x * " + inner_text + ";");
    }
    for (const auto& l : row) out.push_back(pad + l);
  };
  const int per_thread = pr.launch.per_thread;
  std::vector<std::string> out;
  if (per_thread == 1) {
    out.push_back("for (" + I + " e = (" + I + ")blockIdx.x * blockDim.x + threadIdx.x; e < " + total +
                  "; e += (" + I + ")gridDim.x * blockDim.x) {");
    element(out, "  ");
    out.push_back("}");
    return out;
  }
  // Each step takes elements t, t + block, ..., t + (U-1) * block: a full tile unrolled
  // with no bounds checks (its elements' loads issue together), the last partial tile
  // one element at a time. Elements are independent, so their order does not matter.
  const std::string U = std::to_string(per_thread);
  const std::string block = std::to_string(pr.launch.block);
  const std::string tile = std::to_string(int64_t{pr.launch.block} * per_thread);
  out.push_back("for (" + I + " t = (" + I + ")blockIdx.x * " + tile + " + threadIdx.x; t < " + total + "; t += (" + I +
                ")gridDim.x * " + tile + ") {");
  out.push_back("  if (t + " + std::to_string(int64_t{pr.launch.block} * (per_thread - 1)) + " < " + total + ") {");
  out.push_back("    #pragma unroll");
  out.push_back("    for (int u = 0; u < " + U + "; ++u) {");
  out.push_back("      const " + I + " e = t + u * " + block + ";");
  element(out, "      ");
  out.push_back("    }");
  out.push_back("  } else {");
  out.push_back("    #pragma unroll 1");
  out.push_back("    for (" + I + " e = t; e < " + total + "; e += " + block + ") {");
  element(out, "      ");
  out.push_back("    }");
  out.push_back("  }");
  out.push_back("}");
  return out;
}

std::string scatter_zeroing_kernel(CudaPrinter& pr) {
  const CudaKernelInfo& info = pr.ks.info;
  std::string head = pr.signature(pr.k.name + "_partial", info.partial_block, info.args);
  std::vector<std::string> body;
  for (const auto& item : pr.k.stages.at(0).items) {
    const int b = pr.p.computed[item.computed].buffer;
    const int64_t extent = pr.p.buffers[b].extent().hint();  // static (lowering)
    const std::string& ptr = pr.em->buffer_name(b);
    auto loop = [&](int64_t n, const std::string& store, const std::string& pad) {
      body.push_back(pad + "for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < " + std::to_string(n) +
                     "LL; e += (int64_t)gridDim.x * blockDim.x)");
      body.push_back(pad + "  " + store);
    };
    // 16-byte stores where the extent and the pointer allow (the arena's buffers and
    // torch's allocations are aligned; the test costs nothing).
    if (extent % 4 == 0) {
      body.push_back("if (((uintptr_t)" + ptr + " & 15) == 0) {");
      loop(extent / 4, "reinterpret_cast<float4*>(" + ptr + ")[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);", "  ");
      body.push_back("} else {");
      loop(extent, ptr + "[e] = 0.0f;", "  ");
      body.push_back("}");
    } else {
      loop(extent, ptr + "[e] = 0.0f;", "");
    }
  }
  return pr.function(head, body);
}

}  // namespace ember

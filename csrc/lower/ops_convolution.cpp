// aten.convolution runs in ATen (cuDNN, oneDNN). With
// LowerOptions::convolution_bias_in_kernels a biased one runs without its bias, and its
// result is a lazy value adding the bias per channel (dim 1, for every rank and for
// transposed convolutions alike), which joins the kernels that read it.
#include <algorithm>

#include "lower/ops_common.h"

namespace ember {

namespace {

bool reads(const Arg& a, int node) {
  if (a.is_tensor() && a.ref.node == node) return true;
  for (const Arg& x : a.list)
    if (reads(x, node)) return true;
  return false;
}

// Whether every reader of node `n`'s result would fuse a bias add into its kernel: ember
// lowers it, and it is no reshape (which stores a costly value first). A graph output, an
// ATen operand (the next convolution) or a flattening view stores the result whole, where
// ATen's add does the same work: the bias then stays in the convolution.
bool readers_fuse_a_bias(const Graph& g, const Node& n) {
  for (const Arg& out : g.outputs)
    if (reads(out, n.id)) return false;
  for (const Node& user : g.nodes) {
    if (user.id <= n.id || std::none_of(user.args.begin(), user.args.end(), [&](const Arg& a) { return reads(a, n.id); }))
      continue;
    if (!has_lowering(user.op) || user.op == "aten.view.default" || user.op == "aten._unsafe_view.default" ||
        user.op == "aten.reshape.default" || user.op == "aten.convolution.default")
      return false;
  }
  return true;
}

}  // namespace

void register_convolution_ops(LoweringTable& t) {
  t["aten.convolution.default"] = [](LowerCtx& ctx, const Node& n) {
    // Unsupported sends the node to ATen whole, under the reason every convolution has.
    const std::string reason = extern_reason(n.op);
    if (!ctx.options().convolution_bias_in_kernels || n.args.size() < 3 || !n.args[2].is_tensor() ||
        !readers_fuse_a_bias(ctx.graph(), n))
      throw Unsupported(reason);
    const TensorType& out = ctx.out_type();
    const TensorIR bias = ctx.tensor(n.args[2]);
    if (out.opaque || out.sizes.size() < 2 || bias.rank() != 1 || !compatible(bias.sizes[0], out.dims()[1]))
      throw Unsupported(reason);
    std::vector<TensorIR> outs = ctx.extern_call(reason, {2});
    const TensorIR conv = outs.at(0);
    const DType dt = out.dtype, compute = compute_type(dt);
    outs[0] = ctx.lazy(dt, out.dims(), [conv, bias, dt, compute](const std::vector<Expr>& idx) {
      return cast(op2(ExprOp::Add, cast(conv.fn(idx), compute), cast(bias.fn({idx[1]}), compute)), dt);
    }, {&conv, &bias});
    return outs;
  };
}

std::vector<TensorIR> LowerCtx::extern_call(const std::string& reason, const std::vector<size_t>& none_args) {
  lower_extern(*node_, reason, none_args);
  std::vector<TensorIR> outs = std::move(values_[node_->id]);
  values_[node_->id].clear();
  return outs;
}

}  // namespace ember

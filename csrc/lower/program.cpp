#include "lower/program.h"

#include <sstream>

namespace ember {

const char* reduce_op_name(ReduceOp op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "any", "all", "argmax", "argmin"};
  return names[static_cast<int>(op)];
}

Dim Buffer::numel() const { return product(sizes); }

Dim Buffer::extent() const {
  Dim e = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    if (!(strides[i] == 0)) e = e + (sizes[i] - 1) * strides[i];
  }
  return e;
}

int Program::add_buffer(Buffer b) {
  b.id = static_cast<int>(buffers.size());
  buffers.push_back(std::move(b));
  return buffers.back().id;
}

Expr strided_index(const std::vector<Expr>& idx, const Dims& strides, const Dim& offset) {
  Expr e = int_const(0);
  Dim constant = offset;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (strides[d] == 0 || idx[d]->is_int_const(0)) continue;
    if (idx[d]->is_const()) {
      constant = constant + Dim(idx[d]->ival) * strides[d];
      continue;
    }
    e = add(e, mul(idx[d], strides[d].expr()));
  }
  return add(e, constant.expr());
}

namespace {
void print_ints(std::ostream& os, const Dims& v) { os << print_dims(v); }
}  // namespace

std::string print_program(const Program& p, const Graph& g) {
  std::ostringstream os;
  for (const auto& b : p.buffers) {
    if (b.kind != Buffer::Kind::Input) continue;
    os << "buf" << b.id << " = input(" << b.input_index << ") : ";
    if (b.opaque) os << "opaque";
    else os << dtype_name(b.dtype) << print_dims(b.sizes);
    os << '\n';
  }
  for (const auto& s : p.steps) {
    if (s.kind == Step::Kind::Extern) {
      const auto& e = p.externs[s.index];
      os << "extern " << g.nodes[e.node].op << " (" << e.reason << ") ->";
      for (int b : e.output_buffers) os << " buf" << b;
      os << '\n';
      continue;
    }
    const auto& c = p.computed[s.index];
    const auto& b = p.buffers[c.buffer];
    os << "buf" << c.buffer << " : " << dtype_name(b.dtype);
    print_ints(os, b.sizes);
    os << " = ";
    if (c.scan_dim >= 0) {
      os << "scan " << reduce_op_name(c.reduce_op) << " along dim " << c.scan_dim << " of ";
    } else if (c.is_reduction) {
      os << reduce_op_name(c.reduce_op) << " over ";
      print_ints(os, c.reduce_sizes);
      os << " of ";
    }
    os << to_string(c.body) << '\n';
  }
  os << "return";
  for (const auto& o : p.outputs) {
    if (o.is_tensor) os << " buf" << o.view.buffer; else os << " none";
  }
  os << '\n';
  return os.str();
}

}  // namespace ember

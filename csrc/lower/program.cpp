#include "lower/program.h"

#include <sstream>

namespace ember {

const char* reduce_op_name(ReduceOp op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "any", "all", "argmax", "argmin"};
  return names[static_cast<int>(op)];
}

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t Buffer::extent() const {
  int64_t e = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    e += (sizes[i] - 1) * strides[i];
  }
  return e;
}

int Program::add_buffer(Buffer b) {
  b.id = static_cast<int>(buffers.size());
  buffers.push_back(std::move(b));
  return buffers.back().id;
}

Expr strided_index(const std::vector<Expr>& idx, const std::vector<int64_t>& strides, int64_t offset) {
  Expr e = int_const(0);
  for (size_t d = 0; d < idx.size(); ++d) {
    if (strides[d] == 0 || idx[d]->is_int_const(0)) continue;
    if (idx[d]->is_const()) {
      offset += idx[d]->ival * strides[d];
      continue;
    }
    e = add(e, mul(idx[d], strides[d]));
  }
  return add(e, offset);
}

namespace {
void print_ints(std::ostream& os, const std::vector<int64_t>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
}
}  // namespace

std::string print_program(const Program& p, const Graph& g) {
  std::ostringstream os;
  for (const auto& b : p.buffers) {
    if (b.kind != Buffer::Kind::Input) continue;
    os << "buf" << b.id << " = input(" << b.input_index << ") : " << dtype_name(b.dtype);
    print_ints(os, b.sizes);
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

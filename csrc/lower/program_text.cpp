#include "lower/program_text.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

#include "ir/expr_text.h"
#include "ir/size_expr.h"
#include "ir/text_reader.h"

namespace ember {

namespace {

std::vector<DType> buffer_dtypes(const Program& p) {
  std::vector<DType> out;
  for (const auto& b : p.buffers) out.push_back(b.dtype);
  return out;
}

// A buffer's type: `opaque` for a tensor ember does not model (lower/program.h).
std::string type_text(const Buffer& b) {
  return b.opaque ? "opaque" : print_buffer_type(b.dtype, b.sizes, b.strides);
}

std::string vars_text(const std::vector<int>& vars) {
  std::string out = "[";
  for (size_t i = 0; i < vars.size(); ++i)
    out += (i ? ", " : "") + (vars[i] < 0 ? std::string("_") : "v" + std::to_string(vars[i]));
  return out + "]";
}

bool is_identity(const std::vector<int>& order) {
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int>(i)) return false;
  return true;
}

std::string computed_text(const ComputedBuffer& c, const Program& p, const std::vector<DType>& dtypes) {
  const Buffer& b = p.buffers[c.buffer];
  std::ostringstream os;
  os << "buf" << c.buffer << " : " << print_buffer_type(b.dtype, b.sizes, b.strides) << " for " << vars_text(c.vars);
  if (!is_identity(c.iter_order)) {
    os << " order [";
    for (size_t i = 0; i < c.iter_order.size(); ++i) os << (i ? ", " : "") << c.iter_order[i];
    os << "]";
  }
  os << " = ";
  if (c.is_scatter_add())
    os << "scatter_add over " << print_dims(c.sizes) << " at " << print_expr(c.add_at, &dtypes) << " of ";
  if (c.is_reduction) {
    if (c.scan_dim >= 0) os << "scan ";
    os << reduce_op_name(c.reduce_op) << " " << dtype_name(c.acc_dtype);
    if (c.scan_dim >= 0) os << " along " << c.scan_dim;
    os << " over " << print_dims(c.reduce_sizes) << " for " << vars_text(c.reduce_vars) << " of ";
  }
  os << print_expr(c.body, &dtypes);
  if (!c.origins.empty()) {
    os << "  from";
    for (int o : c.origins) os << " %" << o;
  }
  return os.str();
}

std::string value_ref_text(const ValueRef& r) {
  return "%" + std::to_string(r.node) + (r.index ? "." + std::to_string(r.index) : "");
}

std::string extern_text(const ExternCall& e, const Program& p) {
  std::ostringstream os;
  os << "extern %" << e.node << " " << e.op << "(";
  for (size_t i = 0; i < e.tensor_args.size(); ++i) {
    os << (i ? ", " : "") << value_ref_text(e.tensor_args[i]) << " = " << print_view(e.tensor_views[i], p);
    if (std::find(e.prepared_args.begin(), e.prepared_args.end(), static_cast<int>(i)) != e.prepared_args.end())
      os << " prepared";
    for (const auto& pa : e.padded_args)
      if (pa.arg == static_cast<int>(i)) os << " padded " << print_buffer_type(e.tensor_views[i].dtype, pa.sizes, pa.strides);
  }
  for (size_t i = 0; i < e.none_args.size(); ++i)
    os << (i || !e.tensor_args.empty() ? ", " : "") << value_ref_text(e.none_args[i]) << " = none";
  os << ") ->";
  for (size_t k = 0; k < e.output_buffers.size(); ++k) {
    os << (k ? ", " : " ");
    const int b = e.output_buffers[k];
    if (b < 0) {
      os << "none";
    } else {
      os << "buf" << b << " : " << type_text(p.buffers[b]);
    }
  }
  os << "  " << quote(e.reason);
  return os.str();
}

// ---- parsing: declarations first (every line), then bodies (which may read any buffer).

struct Declared {
  bool known = false;
  Buffer buffer;
};

ReduceOp reduce_op_from(ProgramReader& in) {
  const std::string w = in.identifier();
  for (int op = 0; op <= static_cast<int>(kLastReduceOp); ++op)
    if (w == reduce_op_name(static_cast<ReduceOp>(op))) return static_cast<ReduceOp>(op);
  in.error("unknown reduction '" + w + "'");
}

class ProgramParser {
 public:
  explicit ProgramParser(const std::string& text) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines_.push_back(line);
  }

  Program parse() {
    size_t first = 0;
    while (first < lines_.size() && blank(lines_[first])) ++first;
    if (first == lines_.size()) throw std::invalid_argument("program text: empty");
    header(first);
    for (size_t i = first + 1; i < lines_.size(); ++i)
      if (!blank(lines_[i])) declare(i);
    for (size_t b = 0; b < decl_.size(); ++b) {
      if (!decl_[b].known) throw std::invalid_argument("program text: buf" + std::to_string(b) + " is not declared");
      decl_[b].buffer.id = static_cast<int>(b);
      p_.buffers.push_back(decl_[b].buffer);
      dtypes_.push_back(decl_[b].buffer.dtype);
    }
    bool returned = false;
    for (size_t i = first + 1; i < lines_.size(); ++i)
      if (!blank(lines_[i])) returned |= statement(i);
    if (!returned) throw std::invalid_argument("program text: no return line");
    return std::move(p_);
  }

 private:
  static bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }
  ProgramReader reader(size_t i) { return ProgramReader(lines_[i], static_cast<int>(i) + 1, hints_); }

  void header(size_t i) {
    ProgramReader in = reader(i);
    in.expect_word("program");
    in.expect('(');
    while (in.at_symbolic_word()) {
      const std::string name = in.identifier();
      if (name != "s" + std::to_string(hints_.size())) in.error("symbols must be named s0, s1, ... in order");
      in.expect('=');
      hints_.push_back(in.integer());
      if (!in.try_consume(',')) in.expect(';');
    }
    in.expect_word("vars");
    in.expect('=');
    p_.num_vars = static_cast<int>(in.integer());
    in.expect(')');
    in.expect_end();
    p_.num_symbols = static_cast<int>(hints_.size());
    p_.symbol_hints = hints_;
  }

  Buffer& declare_buffer(ProgramReader& in, int b) {
    if (b < 0) in.error("bad buffer id");
    if (static_cast<size_t>(b) >= decl_.size()) decl_.resize(b + 1);
    if (decl_[b].known) in.error("buf" + std::to_string(b) + " is declared twice");
    decl_[b].known = true;
    return decl_[b].buffer;
  }

  // Pass 1: the buffers each line declares.
  void declare(size_t i) {
    ProgramReader in = reader(i);
    if (in.peek_word("return")) return;
    if (in.try_word("extern")) {
      in.value_ref();
      in.op_name();
      in.skip_group();
      in.expect_word("->");
      int k = 0;
      do {
        if (!in.try_word("none")) {
          Buffer& b = declare_buffer(in, in.buffer_ref());
          in.expect(':');
          b.opaque = in.try_word("opaque");
          if (!b.opaque) in.type(b.dtype, b.sizes, b.strides);
          b.kind = Buffer::Kind::Extern;
          b.extern_call = externs_;
          b.extern_output = k;
        }
        ++k;
      } while (in.try_consume(','));
      ++externs_;
      return;
    }
    in.try_word("dead");
    Buffer& b = declare_buffer(in, in.buffer_ref());
    if (in.try_consume('=')) {
      in.expect_word("input");
      in.expect('(');
      b.kind = Buffer::Kind::Input;
      b.input_index = static_cast<int>(in.integer());
      in.expect(')');
    }
    in.expect(':');
    b.opaque = in.try_word("opaque");
    if (!b.opaque) in.type(b.dtype, b.sizes, b.strides);
  }

  // Pass 2: steps, computed buffers, extern calls, outputs. Returns whether it was `return`.
  bool statement(size_t i) {
    ProgramReader in = reader(i);
    if (in.try_word("return")) {
      if (!in.at_end()) {
        do {
          ProgramOutput o;
          if (!in.try_word("none")) {
            o.is_tensor = true;
            o.view = in.view(p_);
          }
          p_.outputs.push_back(o);
        } while (in.try_consume(','));
      }
      in.expect_end();
      return true;
    }
    if (in.try_word("extern")) {
      extern_call(in);
      return false;
    }
    const bool dead = in.try_word("dead");
    const int b = in.buffer_ref();
    if (in.try_consume('=')) return false;  // an input: declared already
    Dims sizes, strides;
    DType dtype;
    in.expect(':');
    if (!in.try_word("opaque")) in.type(dtype, sizes, strides);
    if (in.at_end()) return false;  // a buffer nothing computes
    computed(in, b, sizes, dead);
    return false;
  }

  void computed(ProgramReader& in, int b, const Dims& sizes, bool dead) {
    ComputedBuffer c;
    c.buffer = b;
    c.sizes = sizes;
    in.expect_word("for");
    c.vars = in.vars();
    for (size_t d = 0; d < c.vars.size(); ++d) c.iter_order.push_back(static_cast<int>(d));
    if (in.try_word("order")) {
      c.iter_order.clear();
      in.expect('[');
      do c.iter_order.push_back(static_cast<int>(in.integer())); while (in.try_consume(','));
      in.expect(']');
    }
    in.expect('=');
    if (in.try_word("scatter_add")) {
      in.expect_word("over");
      c.sizes = in.dims('[', ']');
      in.expect_word("at");
      c.add_at = in.expr(dtypes_);
      in.expect_word("of");
    }
    const bool scan = in.try_word("scan");
    if (scan || peek_reduction(in)) {
      c.is_reduction = true;
      c.reduce_op = reduce_op_from(in);
      c.acc_dtype = dtype_from_name(in.identifier());
      if (scan) {
        in.expect_word("along");
        c.scan_dim = static_cast<int>(in.integer());
      }
      in.expect_word("over");
      c.reduce_sizes = in.dims('[', ']');
      in.expect_word("for");
      c.reduce_vars = in.vars();
      in.expect_word("of");
    }
    c.body = in.expr(dtypes_);
    if (in.try_word("from"))
      while (in.try_consume('%')) c.origins.push_back(static_cast<int>(in.integer()));
    in.expect_end();
    if (!dead) p_.steps.push_back({Step::Kind::Compute, static_cast<int>(p_.computed.size())});
    p_.computed.push_back(std::move(c));
  }

  // A reduction's op name followed by its accumulator's dtype (not an expression).
  static bool peek_reduction(ProgramReader& in) {
    for (int op = 0; op <= static_cast<int>(kLastReduceOp); ++op)
      if (in.peek_word(reduce_op_name(static_cast<ReduceOp>(op)))) {
        // `max(` and `min(` are expressions; `max f32` is a reduction.
        ProgramReader probe = in;
        probe.identifier();
        return probe.cur() != '(';
      }
    return false;
  }

  void extern_call(ProgramReader& in) {
    ExternCall e;
    e.node = in.value_ref().node;
    e.op = in.op_name();
    in.expect('(');
    if (!in.try_consume(')')) {
      do {
        const ValueRef r = in.value_ref();
        in.expect('=');
        if (in.try_word("none")) {
          e.none_args.push_back(r);
          continue;
        }
        e.tensor_args.push_back(r);
        e.tensor_views.push_back(in.view(p_));
        if (in.try_word("prepared")) e.prepared_args.push_back(static_cast<int>(e.tensor_args.size()) - 1);
        if (in.try_word("padded")) {
          ExternCall::PaddedArg pa;
          pa.arg = static_cast<int>(e.tensor_args.size()) - 1;
          DType dtype;
          in.type(dtype, pa.sizes, pa.strides);
          e.padded_args.push_back(std::move(pa));
        }
      } while (in.try_consume(','));
      in.expect(')');
    }
    in.expect_word("->");
    do {
      if (in.try_word("none")) {
        e.output_buffers.push_back(-1);
        continue;
      }
      e.output_buffers.push_back(in.buffer_ref());
      DType dtype;
      Dims sizes, strides;
      in.expect(':');
      if (!in.try_word("opaque")) in.type(dtype, sizes, strides);
    } while (in.try_consume(','));
    e.reason = in.quoted();
    in.expect_end();
    p_.steps.push_back({Step::Kind::Extern, static_cast<int>(p_.externs.size())});
    p_.externs.push_back(std::move(e));
  }

  std::vector<std::string> lines_;
  std::vector<int64_t> hints_;
  std::vector<Declared> decl_;
  std::vector<DType> dtypes_;
  int externs_ = 0;
  Program p_;
};

}  // namespace

std::string print_buffer_type(DType dtype, const Dims& sizes, const Dims& strides) {
  std::string s = print_dims(strides);
  return std::string(dtype_name(dtype)) + print_dims(sizes) + "{" + s.substr(1, s.size() - 2) + "}";
}

std::string print_view(const StridedView& v, const Program& p) {
  const Buffer& b = p.buffers.at(v.buffer);
  std::string out = "buf" + std::to_string(v.buffer);
  if (v.dtype == b.dtype && v.sizes == b.sizes && v.strides == b.strides && v.offset == 0) return out;
  return out + ":" + print_buffer_type(v.dtype, v.sizes, v.strides) + "+" + print_dim(v.offset);
}

std::string print_program(const Program& p) {
  const std::vector<DType> dtypes = buffer_dtypes(p);
  std::ostringstream os;
  os << "program(";
  for (size_t s = 0; s < p.symbol_hints.size(); ++s)
    os << "s" << s << "=" << p.symbol_hints[s] << (s + 1 < p.symbol_hints.size() ? ", " : "; ");
  os << "vars=" << p.num_vars << ")\n";
  std::vector<bool> declared(p.buffers.size(), false);
  for (const auto& b : p.buffers) {
    if (b.kind != Buffer::Kind::Input) continue;
    os << "buf" << b.id << " = input(" << b.input_index << ") : " << type_text(b) << "\n";
    declared[b.id] = true;
  }
  std::vector<bool> stepped(p.computed.size(), false);
  for (const auto& s : p.steps) {
    if (s.kind == Step::Kind::Extern) {
      const ExternCall& e = p.externs[s.index];
      os << extern_text(e, p) << "\n";
      for (int b : e.output_buffers)
        if (b >= 0) declared[b] = true;
      continue;
    }
    stepped[s.index] = true;
    declared[p.computed[s.index].buffer] = true;
    os << computed_text(p.computed[s.index], p, dtypes) << "\n";
  }
  for (size_t c = 0; c < p.computed.size(); ++c) {
    if (stepped[c]) continue;
    declared[p.computed[c].buffer] = true;
    os << "dead " << computed_text(p.computed[c], p, dtypes) << "\n";
  }
  for (const auto& b : p.buffers)
    if (!declared[b.id]) os << "buf" << b.id << " : " << type_text(b) << "\n";
  os << "return";
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    os << (i ? ", " : " ");
    const ProgramOutput& o = p.outputs[i];
    os << (o.is_tensor ? print_view(o.view, p) : "none");
  }
  os << "\n";
  return os.str();
}

Program parse_program(const std::string& text) { return ProgramParser(text).parse(); }

ProgramReader::ProgramReader(const std::string& line, int number, const std::vector<int64_t>& hints)
    : TextReader(line, "program text", number), hints_(hints) {}

Dim ProgramReader::dim() {
  Expr e = size_expr(hints_.size());
  try {
    return Dim::of(e, eval_size(e, hints_));
  } catch (const std::exception& ex) {
    error(ex.what());
  }
}

Dims ProgramReader::dims(char open, char close) {
  Dims out;
  expect(open);
  if (try_consume(close)) return out;
  do out.push_back(dim()); while (try_consume(','));
  expect(close);
  return out;
}

void ProgramReader::type(DType& dtype, Dims& sizes, Dims& strides) {
  dtype = dtype_from_name(identifier());
  sizes = dims('[', ']');
  strides = dims('{', '}');
  if (sizes.size() != strides.size()) error("sizes and strides differ in rank");
}

int ProgramReader::buffer_ref() {
  const std::string w = identifier();
  if (w.rfind("buf", 0) != 0 || w.size() < 4 || w.find_first_not_of("0123456789", 3) != std::string::npos)
    error("expected a buffer (bufN)");
  return static_cast<int>(std::stoll(w.substr(3)));
}

std::vector<int> ProgramReader::vars() {
  std::vector<int> out;
  expect('[');
  if (try_consume(']')) return out;
  do {
    if (try_consume('_')) {
      out.push_back(-1);
    } else {
      const std::string w = identifier();
      if (w.size() < 2 || w[0] != 'v' || w.find_first_not_of("0123456789", 1) != std::string::npos)
        error("expected a var (vN) or _");
      out.push_back(static_cast<int>(std::stoll(w.substr(1))));
    }
  } while (try_consume(','));
  expect(']');
  return out;
}

ValueRef ProgramReader::value_ref() {
  expect('%');
  ValueRef r;
  r.node = static_cast<int>(integer());
  if (try_adjacent('.')) r.index = static_cast<int>(integer());
  return r;
}

StridedView ProgramReader::view(const Program& p) {
  StridedView v;
  v.buffer = buffer_ref();
  if (static_cast<size_t>(v.buffer) >= p.buffers.size()) error("undeclared buffer buf" + std::to_string(v.buffer));
  if (!try_adjacent(':')) {
    const Buffer& b = p.buffers[v.buffer];
    v.dtype = b.dtype;
    v.sizes = b.sizes;
    v.strides = b.strides;
    return v;
  }
  type(v.dtype, v.sizes, v.strides);
  expect('+');
  v.offset = dim();
  return v;
}

Expr ProgramReader::expr(const std::vector<DType>& dtypes) { return parse_expr(*this, dtypes); }

void ProgramReader::expect_end() {
  if (!at_end()) error("unexpected text");
}


}  // namespace ember

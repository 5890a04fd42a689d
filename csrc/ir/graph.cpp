#include "ir/graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "ir/expr_text.h"
#include "ir/size_expr.h"
#include "ir/text_reader.h"

namespace ember {

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

Arg Arg::of_bool(bool v) { Arg a; a.kind = Kind::Bool; a.b = v; return a; }
Arg Arg::of_int(int64_t v) { Arg a; a.kind = Kind::Int; a.i = v; return a; }
Arg Arg::of_float(double v) { Arg a; a.kind = Kind::Float; a.f = v; return a; }
Arg Arg::of_str(std::string v) { Arg a; a.kind = Kind::Str; a.s = std::move(v); return a; }
Arg Arg::of_list(std::vector<Arg> v) { Arg a; a.kind = Kind::List; a.list = std::move(v); return a; }
Arg Arg::of_tensor(ValueRef r) { Arg a; a.kind = Kind::Tensor; a.ref = r; return a; }

double Arg::as_double() const {
  if (kind == Kind::Int && sym) throw SymbolicValue("a symbolic size where a static number is needed: " + print_size(sym));
  switch (kind) {
    case Kind::Int: return static_cast<double>(i);
    case Kind::Float: return f;
    case Kind::Bool: return b ? 1.0 : 0.0;
    default: throw std::invalid_argument("argument is not a number");
  }
}

int64_t Arg::as_int() const {
  if (kind == Kind::Int && sym) throw SymbolicValue("a symbolic size where a static integer is needed: " + print_size(sym));
  if (kind == Kind::Int) return i;
  if (kind == Kind::Bool) return b ? 1 : 0;
  throw std::invalid_argument("argument is not an integer");
}

std::vector<int64_t> Arg::as_ints() const {
  if (kind == Kind::Int) return {i};
  if (kind != Kind::List) throw std::invalid_argument("argument is not an int list");
  std::vector<int64_t> out;
  for (const auto& a : list) out.push_back(a.as_int());
  return out;
}

Dim Arg::as_dim() const {
  if (kind == Kind::Int && sym) return Dim::of(sym, i);
  return Dim(as_int());
}

Dims Arg::as_dims() const {
  if (kind == Kind::Int) return {as_dim()};
  if (kind != Kind::List) throw std::invalid_argument("argument is not an int list");
  Dims out;
  for (const auto& a : list) out.push_back(a.as_dim());
  return out;
}

namespace {
Dims type_dims(const std::vector<int64_t>& hints, const std::vector<Expr>& sym) {
  if (sym.empty()) return to_dims(hints);
  Dims d;
  for (size_t k = 0; k < hints.size(); ++k) d.push_back(Dim::of(sym[k], hints[k]));
  return d;
}
}  // namespace

Dims TensorType::dims() const { return type_dims(sizes, sym_sizes); }
Dims TensorType::stride_dims() const { return type_dims(strides, sym_strides); }

namespace {

void specialize(Arg& a, const std::vector<int64_t>& values) {
  if (a.sym) a.i = eval_size(a.sym, values);
  a.sym = nullptr;
  for (Arg& x : a.list) specialize(x, values);
}

void specialize(std::vector<int64_t>& out, std::vector<Expr>& exprs, const std::vector<int64_t>& values) {
  for (size_t i = 0; i < exprs.size() && i < out.size(); ++i)
    if (exprs[i]) out[i] = eval_size(exprs[i], values);
  exprs.clear();
}

}  // namespace

Graph specialize(Graph g, const std::vector<int64_t>& values) {
  // Without their size expressions, types and arguments are static; sym_input nodes
  // bind nothing then, and lower to nothing.
  g.symbols.clear();
  for (Node& n : g.nodes) {
    for (Arg& a : n.args) specialize(a, values);
    for (TensorType& t : n.outputs) {
      specialize(t.sizes, t.sym_sizes, values);
      specialize(t.strides, t.sym_strides, values);
    }
  }
  for (Arg& a : g.outputs) specialize(a, values);
  return g;
}

bool Graph::output_takes_any_strides(int position) const {
  return std::binary_search(any_strides_outputs.begin(), any_strides_outputs.end(), position);
}

bool Graph::output_has_own_layout(int position) const {
  return std::binary_search(own_layout_outputs.begin(), own_layout_outputs.end(), position);
}

std::vector<int64_t> Graph::hints() const {
  std::vector<int64_t> h;
  for (const auto& s : symbols) h.push_back(s.hint);
  return h;
}

// ---- printing ----------------------------------------------------------------

namespace {

void print_arg(std::ostream& os, const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::None: os << "none"; break;
    case Arg::Kind::Bool: os << (a.b ? "true" : "false"); break;
    case Arg::Kind::Int:
      if (a.sym) os << print_size(a.sym);
      else os << a.i;
      break;
    case Arg::Kind::Float: os << print_float(a.f); break;
    case Arg::Kind::Str: os << '"' << a.s << '"'; break;
    case Arg::Kind::Tensor:
      os << '%' << a.ref.node;
      if (a.ref.index) os << '.' << a.ref.index;
      break;
    case Arg::Kind::List:
      os << '[';
      for (size_t i = 0; i < a.list.size(); ++i) {
        if (i) os << ", ";
        print_arg(os, a.list[i]);
      }
      os << ']';
      break;
  }
}

void print_ints(std::ostream& os, const std::vector<int64_t>& v, const std::vector<Expr>& sym) {
  for (size_t i = 0; i < v.size(); ++i) {
    os << (i ? "," : "");
    if (i < sym.size()) os << print_size(sym[i]);
    else os << v[i];
  }
}

}  // namespace

std::string print_type(const TensorType& t) {
  if (!t.is_tensor) return "none";
  if (t.opaque) return "opaque";
  std::ostringstream os;
  os << dtype_name(t.dtype) << '[';
  print_ints(os, t.sizes, t.sym_sizes);
  os << "]{";
  print_ints(os, t.strides, t.sym_strides);
  os << '}';
  return os.str();
}

std::string print_graph(const Graph& g) {
  std::ostringstream os;
  os << "graph";
  if (!g.symbols.empty()) {
    os << '(';
    for (size_t i = 0; i < g.symbols.size(); ++i) os << (i ? ", " : "") << g.symbols[i].name << '=' << g.symbols[i].hint;
    os << ')';
  }
  os << " {\n";
  for (const auto& n : g.nodes) {
    os << "  %" << n.id << " = " << n.op << '(';
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) os << ", ";
      print_arg(os, n.args[i]);
    }
    os << ") : ";
    if (n.outputs.size() == 1) {
      os << print_type(n.outputs[0]);
    } else {
      os << '(';
      for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << print_type(n.outputs[i]);
      os << ')';
    }
    if (n.internal) os << " internal";
    os << '\n';
  }
  os << "  return (";
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (i) os << ", ";
    print_arg(os, g.outputs[i]);
  }
  os << ")";
  auto print_positions = [&](const char* word, const std::vector<int>& positions) {
    if (positions.empty()) return;
    os << ' ' << word << '(';
    for (size_t i = 0; i < positions.size(); ++i) os << (i ? ", " : "") << positions[i];
    os << ")";
  };
  print_positions("any_strides", g.any_strides_outputs);
  print_positions("own_layout", g.own_layout_outputs);
  os << "\n}\n";
  return os.str();
}

// ---- parsing -----------------------------------------------------------------

namespace {

class Parser : TextReader {
 public:
  explicit Parser(const std::string& text) : TextReader(text, "graph text") {}

  Graph graph() {
    Graph g;
    expect_word("graph");
    if (try_consume('(')) {
      do {
        Symbol sym;
        sym.name = identifier();
        if (sym.name != "s" + std::to_string(g.symbols.size())) error("symbols must be named s0, s1, ... in order");
        expect('=');
        sym.hint = integer();
        g.symbols.push_back(sym);
      } while (try_consume(','));
      expect(')');
    }
    hints_ = g.hints();
    expect('{');
    while (true) {
      skip_ws();
      if (peek_word("return")) break;
      g.nodes.push_back(node(static_cast<int>(g.nodes.size())));
    }
    expect_word("return");
    expect('(');
    if (!try_consume(')')) {
      do g.outputs.push_back(arg()); while (try_consume(','));
      expect(')');
    }
    skip_ws();
    auto positions = [&](const char* word, std::vector<int>& out) {
      if (!try_word(word)) return;
      expect('(');
      do {
        int64_t k = integer();
        if (k < 0 || k >= static_cast<int64_t>(g.outputs.size()) || (!out.empty() && k <= out.back()))
          error(std::string(word) + " lists output positions in ascending order");
        out.push_back(static_cast<int>(k));
      } while (try_consume(','));
      expect(')');
      skip_ws();
    };
    positions("any_strides", g.any_strides_outputs);
    positions("own_layout", g.own_layout_outputs);
    expect('}');
    skip_ws();
    if (pos_ != s_.size()) error("trailing text");
    return g;
  }

 private:
  Node node(int expected_id) {
    Node n;
    expect('%');
    n.id = static_cast<int>(integer());
    if (n.id != expected_id) error("node ids must be 0, 1, 2, ... in order");
    expect('=');
    n.op = op_name();
    expect('(');
    if (!try_consume(')')) {
      do n.args.push_back(arg()); while (try_consume(','));
      expect(')');
    }
    expect(':');
    if (try_consume('(')) {
      do n.outputs.push_back(type()); while (try_consume(','));
      expect(')');
    } else {
      n.outputs.push_back(type());
    }
    skip_ws();
    if (peek_word("internal")) {
      expect_word("internal");
      n.internal = true;
    }
    return n;
  }

  TensorType type() {
    TensorType t;
    skip_ws();
    if (peek_word("none")) {
      expect_word("none");
      t.is_tensor = false;
      return t;
    }
    if (peek_word("opaque")) {
      expect_word("opaque");
      t.opaque = true;
      return t;
    }
    t.dtype = dtype_from_name(identifier());
    expect('[');
    size_list(']', t.sizes, t.sym_sizes);
    expect('{');
    size_list('}', t.strides, t.sym_strides);
    if (t.sizes.size() != t.strides.size()) error("sizes and strides differ in rank");
    // One symbolic entry makes the type symbolic: keep every entry as an Expr.
    if (!t.sym_sizes.empty() || !t.sym_strides.empty()) {
      if (t.sym_sizes.empty())
        for (int64_t v : t.sizes) t.sym_sizes.push_back(int_const(v));
      if (t.sym_strides.empty())
        for (int64_t v : t.strides) t.sym_strides.push_back(int_const(v));
    }
    return t;
  }

  // Integers or size expressions; `sym` is filled (one Expr per entry) only when some
  // entry is symbolic, and `v` then holds the hints.
  void size_list(char close, std::vector<int64_t>& v, std::vector<Expr>& sym) {
    if (try_consume(close)) return;
    std::vector<Expr> all;
    bool symbolic = false;
    do {
      Expr e = size_expr();
      symbolic |= is_symbolic(e);
      v.push_back(hint_of(e));
      all.push_back(std::move(e));
    } while (try_consume(','));
    expect(close);
    if (symbolic) sym = std::move(all);
  }

  Expr size_expr() { return TextReader::size_expr(hints_.size()); }
  int64_t hint_of(const Expr& e) {
    try {
      return eval_size(e, hints_);
    } catch (const std::exception& ex) {
      error(ex.what());
    }
  }
  Arg arg() {
    skip_ws();
    char c = cur();
    if (c == '%') {
      ++pos_;
      ValueRef r;
      r.node = static_cast<int>(integer());
      if (cur() == '.') {
        ++pos_;
        r.index = static_cast<int>(integer());
      }
      return Arg::of_tensor(r);
    }
    if (c == '[') {
      ++pos_;
      std::vector<Arg> items;
      if (!try_consume(']')) {
        do items.push_back(arg()); while (try_consume(','));
        expect(']');
      }
      return Arg::of_list(std::move(items));
    }
    if (c == '"') {
      ++pos_;
      size_t end = s_.find('"', pos_);
      if (end == std::string::npos) error("unterminated string");
      std::string v = s_.substr(pos_, end - pos_);
      pos_ = end + 1;
      return Arg::of_str(v);
    }
    if (c == '(' || ((c == 's' || c == 'm') && at_symbolic_word())) return size_arg(pos_);
    if (std::isalpha(static_cast<unsigned char>(c))) {
      std::string w = identifier();
      if (w == "none") return Arg::none();
      if (w == "true") return Arg::of_bool(true);
      if (w == "false") return Arg::of_bool(false);
      if (w == "inf") return Arg::of_float(INFINITY);
      if (w == "nan") return Arg::of_float(NAN);
      error("unexpected word '" + w + "'");
    }
    size_t start = pos_;
    Arg a = number();
    // An integer followed by an operator starts a size expression (`8*s1`).
    char n = cur();
    if (a.kind == Arg::Kind::Int && (n == '*' || n == '/' || n == '%' || n == '+' || n == '-')) return size_arg(start);
    return a;
  }

  // A size expression argument starting at `start`: an Int with its hint, symbolic
  // or folded to a constant.
  Arg size_arg(size_t start) {
    pos_ = start;
    Expr e = size_expr();
    Arg a = Arg::of_int(hint_of(e));
    if (is_symbolic(e)) a.sym = e;
    return a;
  }

  Arg number() {
    size_t start = pos_;
    if (cur() == '-' || cur() == '+') ++pos_;
    if (s_.compare(pos_, 3, "inf") == 0) {
      pos_ += 3;
      return Arg::of_float(s_[start] == '-' ? -INFINITY : INFINITY);
    }
    if (s_.compare(pos_, 3, "nan") == 0) {
      pos_ += 3;
      return Arg::of_float(s_[start] == '-' ? -NAN : NAN);
    }
    bool is_float = false;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E') {
        is_float = true;
        ++pos_;
        if ((c == 'e' || c == 'E') && (cur() == '-' || cur() == '+')) ++pos_;
      } else {
        break;
      }
    }
    std::string tok = s_.substr(start, pos_ - start);
    if (tok.empty() || tok == "-" || tok == "+") error("expected a value");
    try {
      return is_float ? Arg::of_float(std::stod(tok)) : Arg::of_int(std::stoll(tok));
    } catch (const std::exception&) {
      error("bad number '" + tok + "'");
    }
  }

  std::vector<int64_t> hints_;  // the symbols' hints, for the hint of each size expression
};

}  // namespace

Graph parse_graph(const std::string& text) {
  Graph g = Parser(text).graph();
  for (const auto& n : g.nodes)
    for (const auto& a : n.args)
      if (a.is_tensor() && (a.ref.node < 0 || a.ref.node >= n.id))
        throw std::invalid_argument("node %" + std::to_string(n.id) + " uses a value not defined before it");
  return g;
}

}  // namespace ember

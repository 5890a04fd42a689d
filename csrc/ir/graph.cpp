#include "ir/graph.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace ember {

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorType::is_contiguous() const {
  int64_t expected = 1;
  for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
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
  switch (kind) {
    case Kind::Int: return static_cast<double>(i);
    case Kind::Float: return f;
    case Kind::Bool: return b ? 1.0 : 0.0;
    default: throw std::invalid_argument("argument is not a number");
  }
}

int64_t Arg::as_int() const {
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

int Graph::num_inputs() const {
  int n = 0;
  for (const auto& node : nodes) n += node.op == "input";
  return n;
}

// ---- printing ----------------------------------------------------------------

namespace {

std::string print_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void print_arg(std::ostream& os, const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::None: os << "none"; break;
    case Arg::Kind::Bool: os << (a.b ? "true" : "false"); break;
    case Arg::Kind::Int: os << a.i; break;
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

void print_ints(std::ostream& os, const std::vector<int64_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
}

}  // namespace

std::string print_type(const TensorType& t) {
  if (!t.is_tensor) return "none";
  std::ostringstream os;
  os << dtype_name(t.dtype) << '[';
  print_ints(os, t.sizes);
  os << "]{";
  print_ints(os, t.strides);
  os << '}';
  return os.str();
}

std::string print_graph(const Graph& g) {
  std::ostringstream os;
  os << "graph {\n";
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
  os << ")\n}\n";
  return os.str();
}

// ---- parsing -----------------------------------------------------------------

namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Graph graph() {
    Graph g;
    expect_word("graph");
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
    t.dtype = dtype_from_name(identifier());
    expect('[');
    t.sizes = int_list(']');
    expect('{');
    t.strides = int_list('}');
    if (t.sizes.size() != t.strides.size()) error("sizes and strides differ in rank");
    return t;
  }

  std::vector<int64_t> int_list(char close) {
    std::vector<int64_t> v;
    if (try_consume(close)) return v;
    do v.push_back(integer()); while (try_consume(','));
    expect(close);
    return v;
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
    if (std::isalpha(static_cast<unsigned char>(c))) {
      std::string w = identifier();
      if (w == "none") return Arg::none();
      if (w == "true") return Arg::of_bool(true);
      if (w == "false") return Arg::of_bool(false);
      if (w == "inf") return Arg::of_float(INFINITY);
      if (w == "nan") return Arg::of_float(NAN);
      error("unexpected word '" + w + "'");
    }
    return number();
  }

  Arg number() {
    size_t start = pos_;
    if (cur() == '-' || cur() == '+') ++pos_;
    if (s_.compare(pos_, 3, "inf") == 0) {
      pos_ += 3;
      return Arg::of_float(s_[start] == '-' ? -INFINITY : INFINITY);
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

  int64_t integer() {
    skip_ws();
    size_t start = pos_;
    if (cur() == '-') ++pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ == start || (pos_ == start + 1 && s_[start] == '-')) error("expected an integer");
    return std::stoll(s_.substr(start, pos_ - start));
  }

  std::string identifier() {
    skip_ws();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (pos_ == start) error("expected a name");
    return s_.substr(start, pos_ - start);
  }

  std::string op_name() {
    skip_ws();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '.')) ++pos_;
    if (pos_ == start) error("expected an op name");
    return s_.substr(start, pos_ - start);
  }

  void skip_ws() {
    while (pos_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[pos_]))) {
        ++pos_;
      } else if (s_[pos_] == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  char cur() {
    skip_ws();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool try_consume(char c) {
    if (cur() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!try_consume(c)) error(std::string("expected '") + c + "'");
  }
  bool peek_word(const char* w) {
    skip_ws();
    size_t n = std::char_traits<char>::length(w);
    return s_.compare(pos_, n, w) == 0 && (pos_ + n >= s_.size() || !std::isalnum(static_cast<unsigned char>(s_[pos_ + n])));
  }
  void expect_word(const char* w) {
    if (!peek_word(w)) error(std::string("expected '") + w + "'");
    pos_ += std::char_traits<char>::length(w);
  }
  [[noreturn]] void error(const std::string& what) {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw std::invalid_argument("graph text " + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  const std::string& s_;
  size_t pos_ = 0;
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

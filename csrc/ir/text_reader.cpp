#include "ir/text_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace ember {

namespace {

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

bool TextReader::try_consume(const char* token) {
  skip_ws();
  const size_t n = std::strlen(token);
  if (s_.compare(pos_, n, token) != 0) return false;
  pos_ += n;
  return true;
}

bool TextReader::try_adjacent(char c) {
  if (pos_ >= s_.size() || s_[pos_] != c) return false;
  ++pos_;
  return true;
}

bool TextReader::at_float() {
  skip_ws();
  size_t p = pos_;
  if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
  if (s_.compare(p, 3, "inf") == 0 || s_.compare(p, 3, "nan") == 0) return true;
  while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) ++p;
  return p < s_.size() && (s_[p] == '.' || s_[p] == 'e' || s_[p] == 'E');
}

void TextReader::expect(char c) {
  if (!try_consume(c)) error(std::string("expected '") + c + "'");
}

bool TextReader::peek_word(const char* w) {
  skip_ws();
  const size_t n = std::strlen(w);
  return s_.compare(pos_, n, w) == 0 && (pos_ + n >= s_.size() || !word_char(s_[pos_ + n]));
}

bool TextReader::try_word(const char* w) {
  if (!peek_word(w)) return false;
  pos_ += std::strlen(w);
  return true;
}

void TextReader::expect_word(const char* w) {
  if (!try_word(w)) error(std::string("expected '") + w + "'");
}

std::string TextReader::identifier() {
  skip_ws();
  const size_t start = pos_;
  while (pos_ < s_.size() && word_char(s_[pos_])) ++pos_;
  if (pos_ == start) error("expected a name");
  return s_.substr(start, pos_ - start);
}

std::string TextReader::op_name() {
  skip_ws();
  const size_t start = pos_;
  while (pos_ < s_.size() && (word_char(s_[pos_]) || s_[pos_] == '.')) ++pos_;
  if (pos_ == start) error("expected an op name");
  return s_.substr(start, pos_ - start);
}

int64_t TextReader::integer() {
  skip_ws();
  const size_t start = pos_;
  if (cur() == '-') ++pos_;
  while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  if (pos_ == start || (pos_ == start + 1 && s_[start] == '-')) error("expected an integer");
  try {
    return std::stoll(s_.substr(start, pos_ - start));
  } catch (const std::exception&) {
    error("bad integer '" + s_.substr(start, pos_ - start) + "'");
  }
}

double TextReader::floating() {
  skip_ws();
  const size_t start = pos_;
  const bool negative = cur() == '-';
  if (negative || cur() == '+') ++pos_;
  if (try_word("inf")) return negative ? -INFINITY : INFINITY;
  if (try_word("nan")) return negative ? -NAN : NAN;
  while (pos_ < s_.size()) {
    const char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      ++pos_;
    } else if (c == 'e' || c == 'E') {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
    } else {
      break;
    }
  }
  const std::string tok = s_.substr(start, pos_ - start);
  try {
    size_t used = 0;
    const double v = std::stod(tok, &used);
    if (used != tok.size()) throw std::invalid_argument(tok);
    return v;
  } catch (const std::exception&) {
    pos_ = start;
    error("bad number '" + tok + "'");
  }
}

std::string TextReader::quoted() {
  expect('"');
  std::string out;
  while (pos_ < s_.size() && s_[pos_] != '"') {
    if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
    out += s_[pos_++];
  }
  if (pos_ >= s_.size()) error("unterminated string");
  ++pos_;
  return out;
}

void TextReader::skip_group() {
  expect('(');
  for (int depth = 1; depth > 0;) {
    if (pos_ >= s_.size()) error("unbalanced '('");
    const char c = s_[pos_];
    if (c == '"') {
      quoted();
      continue;
    }
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    ++pos_;
  }
}

// expr := term (('+'|'-') term)*; term := unary (('*'|'//'|'%') unary)*;
// unary := '-' unary | primary; primary := int | sN | '(' expr ')' | max(expr, expr) | min(expr, expr).
Expr TextReader::size_expr(size_t symbols) {
  Expr e = size_term(symbols);
  while (true) {
    if (try_consume('+')) e = binary(ExprOp::Add, e, size_term(symbols), DType::I64);
    else if (cur() == '-') { ++pos_; e = binary(ExprOp::Sub, e, size_term(symbols), DType::I64); }
    else return e;
  }
}

Expr TextReader::size_term(size_t symbols) {
  Expr e = size_unary(symbols);
  while (true) {
    if (try_consume("//")) e = binary(ExprOp::FloorDiv, e, size_unary(symbols), DType::I64);
    else if (try_consume('*')) e = binary(ExprOp::Mul, e, size_unary(symbols), DType::I64);
    else if (try_consume('%')) e = binary(ExprOp::Mod, e, size_unary(symbols), DType::I64);
    else return e;
  }
}

Expr TextReader::size_unary(size_t symbols) {
  if (try_consume('-')) return binary(ExprOp::Mul, int_const(-1), size_unary(symbols), DType::I64);
  if (try_consume('(')) {
    Expr e = size_expr(symbols);
    expect(')');
    return e;
  }
  if (std::isdigit(static_cast<unsigned char>(cur()))) return int_const(integer());
  const std::string w = identifier();
  if (w == "max" || w == "min") {
    expect('(');
    Expr a = size_expr(symbols);
    expect(',');
    Expr b = size_expr(symbols);
    expect(')');
    return binary(w == "max" ? ExprOp::Max : ExprOp::Min, a, b, DType::I64);
  }
  if (w.size() > 1 && w[0] == 's' &&
      std::all_of(w.begin() + 1, w.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
    const size_t k = std::stoul(w.substr(1));
    if (k >= symbols) error("undeclared symbol " + w);
    return sym(static_cast<int>(k));
  }
  error("unexpected '" + w + "' in a size expression");
}

bool TextReader::at_symbolic_word() {
  skip_ws();
  size_t p = pos_;
  if (s_.compare(p, 4, "max(") == 0 || s_.compare(p, 4, "min(") == 0) return true;
  if (p >= s_.size() || s_[p] != 's' || p + 1 >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p + 1])))
    return false;
  ++p;
  while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) ++p;
  return p >= s_.size() || !word_char(s_[p]);
}

void TextReader::error(const std::string& what) {
  int line = first_line_, col = 1;
  for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
    if (s_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  throw std::invalid_argument(what_ + " " + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace ember

// A cursor over IR text, shared by the parsers of the graph, program and schedule texts:
// whitespace and `#` comments skipped, words, integers, numbers, quoted strings, size
// expressions, and errors that name the line and column.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace ember {

class TextReader {
 public:
  // `what` names the text in errors ("graph text 3:7: expected ')'"); `first_line` is
  // the line number of the text's first line (a reader over one line of a longer text).
  TextReader(const std::string& text, std::string what, int first_line = 1)
      : s_(text), what_(std::move(what)), first_line_(first_line) {}

  // Whitespace and `#` comments up to the next token (inline: the parsers' hot path).
  void skip_ws() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  char cur() {  // the next character after whitespace, '\0' at the end
    skip_ws();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool at_end() { return cur() == '\0'; }
  bool try_consume(char c) {
    if (cur() != c) return false;
    ++pos_;
    return true;
  }
  bool try_consume(const char* token);  // a punctuation token such as "->"
  bool try_adjacent(char c);            // `c` at the cursor itself, no whitespace before it
  void expect(char c);
  bool peek_word(const char* w);
  bool try_word(const char* w);
  void expect_word(const char* w);
  std::string identifier();  // letters, digits, '_'
  std::string op_name();     // an identifier that may contain '.' (aten.add.Tensor)
  int64_t integer();
  double floating();         // a number, inf, -inf, nan
  bool at_float();           // whether the number at the cursor is a float ('.', e, inf, nan)
  std::string quoted();      // "..." with \" and \\ escapes
  void skip_group();         // from '(' to its matching ')', quoted strings inside
  // A size expression (size_expr.h): integers, symbols sN (below `symbols`), + - * // %,
  // max(a, b), min(a, b), parentheses.
  Expr size_expr(size_t symbols);
  // Whether the word at the cursor is a symbol (sN) or max/min of size expressions.
  bool at_symbolic_word();
  [[noreturn]] void error(const std::string& what);

 protected:
  Expr size_term(size_t symbols);
  Expr size_unary(size_t symbols);

  const std::string& s_;
  std::string what_;
  int first_line_ = 1;
  size_t pos_ = 0;
};

// `s` with '"' and '\' escaped, in quotes: what TextReader::quoted reads back.
std::string quote(const std::string& s);

}  // namespace ember

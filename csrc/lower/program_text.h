// The text form of a Program: what the dump after each program pass shows, and what a
// pass test starts from (parse_program(print_program(p)) is p, up to the numbering of
// its computed entries and extern calls, which follows the steps).
//
//   program(s0=64; vars=5)                        symbols with their hints; Program::num_vars
//   buf0 = input(0) : f32[s0,768]{768,1}         an input buffer
//   buf1 : f32[s0,768]{768,1} for [v0, v1] = (buf0[((v0 * 768) + v1)] * 2.0)  from %1
//                                                 a computed buffer: its vars (one per dim,
//                                                 _ for a unit dim), `order [...]` when its
//                                                 loop order is not the dims', its body
//                                                 (expr_text.h), the graph nodes it computes
//   buf2 : f32[s0,1]{1,1} for [v0, _] = sum f32 over [768] for [v2] of buf1[...]  from %2
//                                                 a reduction: op, accumulator dtype, reduced
//                                                 sizes and vars; `scan sum f32 along 1 ...`
//                                                 for a scan along dim 1
//   buf3 : f32[64,32]{32,1} for [v3, v4] = scatter_add over [1000, 32] at (buf9[v3] * 32 + v4) of buf8[...]
//                                                 a scatter-add (ComputedBuffer::add_at): its
//                                                 values' sizes, whose vars `for` names, the
//                                                 element offset each value adds at
//   extern %3 aten.mm.default(%1 = buf1, %2 = buf4:f32[4,8]{1,4}+0) -> buf5 : f32[4,4]{4,1}, none  "reason"
//                                                 an extern call: each tensor argument and
//                                                 where it lives (a buffer, or a view of one;
//                                                 `buf1 prepared`: a parameter the runtime
//                                                 prepares, ExternCall::prepared_args), its
//                                                 outputs' buffers, why ATen runs it
//   dead buf6 : ... = ...                         a computed buffer no step computes
//   buf7 : u8[1536]{1}                            a buffer nothing computes (a scratch area)
//   ... : opaque                                  the type of a tensor ember does not model
//   return buf1, none                             the outputs (views, like extern arguments)
//
// Lines are in step order; a buffer is declared on the line that computes it.
#pragma once
#include <string>
#include <vector>

#include "ir/text_reader.h"
#include "lower/program.h"

namespace ember {

std::string print_program(const Program& p);
// Throws std::invalid_argument, naming the line and column, on malformed text.
Program parse_program(const std::string& text);

// A strided view as text: `buf3` when it is the buffer's own layout, else
// `buf3:f32[4,8]{1,4}+0` (shared with the schedule text's views).
std::string print_view(const StridedView& v, const Program& p);
// A type as `f32[4,s0]{s0,1}`.
std::string print_buffer_type(DType dtype, const Dims& sizes, const Dims& strides);

// Reads one line of a program or schedule text: the pieces both write.
class ProgramReader : public TextReader {
 public:
  // Line `number` of a text whose symbols have these hints.
  ProgramReader(const std::string& line, int number, const std::vector<int64_t>& hints);

  Dim dim();                              // a size expression
  Dims dims(char open, char close);       // `[4,s0]`
  void type(DType& dtype, Dims& sizes, Dims& strides);  // `f32[4,s0]{s0,1}`
  int buffer_ref();                       // `buf3`
  std::vector<int> vars();                // `[v0, _]`
  ValueRef value_ref();                   // `%3` or `%3.1`
  StridedView view(const Program& p);     // print_view's text, over p's buffers
  Expr expr(const std::vector<DType>& buffer_dtypes);
  void expect_end();

 private:
  const std::vector<int64_t>& hints_;
};

}  // namespace ember

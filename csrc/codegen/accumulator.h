// A reduction's accumulator as both printers write it: declared with the reduction's
// identity, updated per element, and finished into the value a load of the stored
// result would give. What differs per target is how partial accumulators combine (the
// C printer's chunks across OpenMP threads: combine_text below; CUDA's warps and
// blocks: codegen/cuda/reduction.h) and the accumulator's type (CUDA sums long chains in
// double; the C printer adds blocks of them into a double `wide` total).
#pragma once
#include <string>
#include <vector>

#include "codegen/c_emitter.h"
#include "lower/program.h"

namespace ember {

struct Acc {
  std::string acc, type;  // the accumulator and its C type
  std::string flag;       // float max/min: whether a NaN was seen (NaN wins)
  std::string index;      // argmax/argmin: the best element's index (int64_t)
  std::string wide;       // C blocked float sums: the double total of the block partials
};

// Declares the accumulator of reduction `c` in C type `type` (the arg-reductions' is the
// body's compute type; any/all's an int). `wide`: a blocked float sum, whose f32 partial
// the loop declares per block, here only its double total. `clauses`, when given, gets
// the OpenMP reduction clauses of what was declared.
Acc declare_acc(CEmitter& em, const ComputedBuffer& c, const std::string& type, bool wide = false,
                std::vector<std::string>* clauses = nullptr);
// Adds the value `v` (C text) to `a`; an arg-reduction takes the element's flat index in
// the reduced dims (`index`, C text): a thread's elements in increasing index order, so
// that the first extremum wins.
void accumulate(CEmitter& em, const ComputedBuffer& c, const Acc& a, const std::string& v,
                const std::string& index = "");
// `v` added to the accumulator `dst` of a reduction by `op` other than an arg-reduction,
// and to its NaN flag `flag` (a float max/min's; empty: none).
void accumulate_into(CEmitter& em, ReduceOp op, const std::string& dst, const std::string& flag, const std::string& v);
// An arg-reduction's candidate (value `v` at `index`) replaces the running pair when it
// is strictly better, or the first NaN.
std::string arg_update(const ComputedBuffer& c, const Acc& a, const std::string& v, const std::string& index);
// The reduction's result as a local equal to what a load of the stored value (of dtype
// `out`) would give.
std::string finish_acc(CEmitter& em, const ComputedBuffer& c, const Acc& a, DType out);
// `dst` combined with the partial `src` of a later chunk (max/min partials are never
// NaN: their flags carry it; arg-reductions combine by arg_update).
std::string combine_text(ReduceOp op, const std::string& dst, const std::string& src);
// A scan's running value `acc` advanced by the element `v` (sum, product, log-sum-exp).
// `a` is the scan's accumulator (float or double).
std::string scan_step_text(ReduceOp op, const Acc& a, const std::string& v);
// The identity a reduction of `op` over values of `t` starts from.
std::string reduction_identity(ReduceOp op, DType t);

}  // namespace ember

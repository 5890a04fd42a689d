#include "codegen/c_emitter.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ember {

namespace {

// -x of an integer x of type t, wrapping: modulo 2^64, then converted to t (modulo).
// int16 through the prelude's ember_neg_i16: ptxas (NVRTC 13.0's) compiles PTX's neg.s16 and
// abs.s16 as 32-bit negations of the sign-extended value and never narrows the result,
// so -(-32768) compared greater than 0 (GPU fuzz seed 25141, codegen/cuda/prelude.cpp).
std::string wrapping_neg(const std::string& x, DType t) {
  if (t == DType::I16) return "ember_neg_i16(" + x + ")";
  return "(" + CEmitter::c_type(t) + ")(0ull - (unsigned long long)(" + x + "))";
}

// x op y of int32/int64 values, wrapping as in ATen: in unsigned arithmetic, converted
// back (modulo). NVRTC has no -fwrapv, and with signed arithmetic NVVM took overflow for
// impossible: it compiled (b - a) > 0 as b > a, wrong where b - a wraps (GPU fuzz seed
// 40518: rsub of int64 extremes). Narrower integers compute in int, which cannot overflow.
std::string wrapping(const std::string& x, const char* op, const std::string& y, DType t) {
  const char* u = t == DType::I64 ? "(unsigned long long)(" : "(unsigned)(";
  return "(" + CEmitter::c_type(t) + ")(" + u + x + ") " + op + " " + u + y + "))";
}

}  // namespace

std::string CEmitter::c_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::U8: return "uint8_t";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::F64: return "double";
    default: return "float";
  }
}

std::string CEmitter::literal(const Expr& c) {
  char buf[64];
  if (is_bool(c->dtype)) return c->ival ? "true" : "false";
  if (!is_float(c->dtype)) {
    if (c->ival == INT64_MIN) return "INT64_MIN";
    std::snprintf(buf, sizeof buf, "%lldLL", static_cast<long long>(c->ival));
    return c->dtype == DType::I64 ? std::string(buf) : "((" + c_type(c->dtype) + ")" + buf + ")";
  }
  double v = c->fval;
  bool dbl = c->dtype == DType::F64;
  if (std::isnan(v)) return dbl ? "(double)NAN" : "NAN";
  if (std::isinf(v)) return std::string(v > 0 ? "" : "-") + (dbl ? "(double)INFINITY" : "INFINITY");
  if (dbl) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.9gf", v);
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s.insert(dbl ? s.size() : s.size() - 1, ".0");
  return "(" + s + ")";
}

void CEmitter::open_scope(const std::vector<std::pair<int, std::string>>& vars) {
  scopes_.push_back(Scope{});
  for (const auto& [id, name] : vars) {
    var_level_[id] = depth();
    var_name_[id] = name;
  }
  level_cache_.clear();
}

std::vector<std::string> CEmitter::close_scope() {
  int d = depth();
  std::vector<std::string> lines = std::move(scopes_.back().lines);
  scopes_.pop_back();
  for (auto it = locals_.begin(); it != locals_.end();) {
    if (it->second.second >= d) it = locals_.erase(it);
    else ++it;
  }
  level_cache_.clear();
  return lines;
}

void CEmitter::bind_local(int buffer, const std::string& name, int level) {
  locals_[buffer] = {name, level};
  level_cache_.clear();
}

std::string CEmitter::fresh(const std::string& prefix) { return prefix + std::to_string(counter_++); }

std::string CEmitter::opaque_zero(DType t) {
  std::string type = c_type(t);
  auto it = opaque_zeros_.find(type);
  if (it != opaque_zeros_.end()) return it->second;
  // Read once per call through a volatile: the compiler cannot know it is +0.0.
  std::string name = fresh("zero");
  scopes_.front().lines.push_back("volatile " + type + " " + name + "_v = 0; const " + type + " " + name + " = " +
                                  name + "_v;");
  return opaque_zeros_[type] = name;
}

int CEmitter::level_of(const Expr& e) {
  auto it = level_cache_.find(e.get());
  if (it != level_cache_.end()) return it->second.second;
  int level = 0;
  if (e->op == ExprOp::Var) {
    auto v = var_level_.find(static_cast<int>(e->ival));
    if (v == var_level_.end()) throw std::logic_error("unbound loop variable in codegen: v" + std::to_string(e->ival));
    level = v->second;
  } else if (e->op == ExprOp::Load) {
    auto l = locals_.find(static_cast<int>(e->ival));
    if (l != locals_.end()) {
      level = l->second.second;
    } else {
      level = level_of(e->args[0]);
      auto m = min_load_level_.find(static_cast<int>(e->ival));
      if (m != min_load_level_.end()) level = std::max(level, m->second);
    }
  } else {
    for (const auto& a : e->args) level = std::max(level, level_of(a));
  }
  level = std::min(level, depth());
  level_cache_[e.get()] = {e, level};
  return level;
}

std::string CEmitter::load_text(const Expr& e, const std::string& index) {
  auto it = buffers_.find(static_cast<int>(e->ival));
  if (it == buffers_.end()) throw std::logic_error("codegen: unknown buffer " + std::to_string(e->ival));
  // An empty buffer is never read on a taken branch; its base may be null.
  if (it->second.extent == 0) return "0";
  std::string ref = it->second.name + "[" + index + "]";
  switch (it->second.dtype) {
    case DType::F16: return "ember_h2f(" + ref + ")";
    case DType::BF16: return "ember_bf2f(" + ref + ")";
    case DType::Bool: return "(" + ref + " != 0)";
    default: return ref;
  }
}

std::string CEmitter::emit(const Expr& e) {
  if (e->op == ExprOp::Const) return literal(e);
  if (e->op == ExprOp::Sym) return "sym[" + std::to_string(e->ival) + "]";
  if (e->op == ExprOp::Var) {
    auto it = var_name_.find(static_cast<int>(e->ival));
    if (it == var_name_.end()) throw std::logic_error("codegen: unbound var");
    return it->second;
  }
  if (e->op == ExprOp::Load) {
    auto l = locals_.find(static_cast<int>(e->ival));
    if (l != locals_.end()) return l->second.first;
  }
  int level = level_of(e);
  for (int s = level; s >= 0; --s) {
    auto it = scopes_[s].memo.find(e);
    if (it != scopes_[s].memo.end()) return it->second;
  }
  // Also visible: anything memoized in an enclosing scope deeper than `level`
  // cannot exist (it would have been placed at `level`), so print it now.
  std::vector<std::string> args;
  if (e->op == ExprOp::Where) {
    args = {emit(e->args[0]), arm(e->args[1]), arm(e->args[2])};
  } else {
    for (size_t i = 0; i < e->args.size(); ++i) args.push_back(operand(e, i));
  }
  if (e->op == ExprOp::Load && guarded_depth_ > 0) {
    const Dim extent = buffers_.at(static_cast<int>(e->ival)).extent;
    // A symbolic extent may be small at run time (size-oblivious symbols): clamp at 0.
    std::string last = extent.is_static() ? std::to_string(std::max<int64_t>(extent.hint() - 1, 0)) + "LL"
                                          : emit(max(extent - 1, Dim(0)).expr());
    args[0] = "ember_clamp_index(" + args[0] + ", " + last + ")";
  }
  std::string name = "t" + std::to_string(counter_++);
  scopes_[level].lines.push_back("const " + c_type(e->dtype) + " " + name + " = " + print(e, args) + ";");
  scopes_[level].memo.emplace(e, name);
  return name;
}

bool CEmitter::reads_memory(const Expr& e) {
  if (e->op == ExprOp::Load) return true;
  auto it = reads_memory_.find(e);
  if (it != reads_memory_.end()) return it->second;
  bool r = false;
  for (const auto& a : e->args) r = r || reads_memory(a);
  reads_memory_.emplace(e, r);
  return r;
}

bool CEmitter::reads_statistic(const Expr& e) {
  if (e->op == ExprOp::Load) {
    const auto b = static_cast<size_t>(e->ival);
    if (b < statistic_.size() && statistic_[b]) return true;
  }
  if (e->args.empty()) return false;
  auto it = reads_statistic_.find(e);
  if (it != reads_statistic_.end()) return it->second;
  bool r = false;
  for (const auto& a : e->args) r = r || reads_statistic(a);
  reads_statistic_.emplace(e, r);
  return r;
}

std::string CEmitter::operand(const Expr& e, size_t i) {
  const Expr& x = e->args[i];
  const bool sum = (e->op == ExprOp::Add || e->op == ExprOp::Sub) && e->args.size() == 2 && is_float(e->dtype);
  if (statistic_.empty() || !sum || x->op != ExprOp::Mul || !is_float(x->dtype) || !reads_statistic(e->args[1 - i]))
    return emit(x);
  const std::string a = emit(x->args[0]), b = emit(x->args[1]);
  return std::string(x->dtype == DType::F64 ? "__dmul_rn(" : "__fmul_rn(") + a + ", " + b + ")";
}

std::string CEmitter::guarded(const Expr& e) {
  // A Where branch may read an index that is out of bounds when the branch is not
  // taken (padding, cat, pooling windows). Its loads clamp the index into the
  // buffer, so the branch can be evaluated unconditionally and vectorized.
  ++guarded_depth_;
  std::string r = emit(e);
  --guarded_depth_;
  return r;
}

std::string CEmitter::arm(const Expr& e) {
  const bool load = e->op == ExprOp::Load && !locals_.count(static_cast<int>(e->ival));
  if (!taken_arm_loads_ || (!load && e->op != ExprOp::Where)) return guarded(e);
  // A value already computed (a vector lane bound to it, an earlier statement) is reused.
  for (int s = level_of(e); s >= 0; --s) {
    auto it = scopes_[s].memo.find(e);
    if (it != scopes_[s].memo.end()) return it->second;
  }
  // A nested Where's condition and a load's index are statements before the select,
  // evaluated whichever arm is taken: their loads clamp as every branch's do (and the
  // load itself too: ptxas may evaluate the select as both arms).
  ++guarded_depth_;
  std::string first = emit(e->args[0]);
  --guarded_depth_;
  if (e->op == ExprOp::Where) return "(" + first + " ? " + arm(e->args[1]) + " : " + arm(e->args[2]) + ")";
  const std::string& index = first;
  const Dim extent = buffers_.at(static_cast<int>(e->ival)).extent;
  std::string last = extent.is_static() ? std::to_string(std::max<int64_t>(extent.hint() - 1, 0)) + "LL"
                                        : emit(max(extent - 1, Dim(0)).expr());
  return load_text(e, "ember_clamp_index(" + index + ", " + last + ")");
}

std::string CEmitter::print(const Expr& e, const std::vector<std::string>& a) {
  DType t = e->dtype;
  // Values read from memory wrap; arithmetic of loop vars and sizes alone (indices, in
  // bounds by construction) keeps signed arithmetic, whose no-overflow rule lets the
  // compilers combine addresses.
  auto wraps = [&](DType d) { return (d == DType::I32 || d == DType::I64) && reads_memory(e); };
  bool f64 = t == DType::F64;
  bool flt = is_float(t);
  auto fn = [&](const char* name) { return std::string(name) + (f64 ? "" : "f") + "(" + a[0] + ")"; };
  auto fn2 = [&](const char* name) { return std::string(name) + (f64 ? "" : "f") + "(" + a[0] + ", " + a[1] + ")"; };
  std::string one = f64 ? "1.0" : "1.0f";
  auto constant = [](Expr x) {
    while (x->op == ExprOp::Cast) x = x->args[0];
    return x->is_const();
  };
  const bool two_values = e->args.size() == 2 && !constant(e->args[0]) && !constant(e->args[1]);
  switch (e->op) {
    case ExprOp::Load: return load_text(e, a[0]);
    // "-" + "-5LL" would be a decrement. Integers negate through unsigned arithmetic,
    // which wraps (-INT64_MIN is INT64_MIN, as in ATen): NVRTC has no -fwrapv, and with
    // signed negation it took abs(x) >= 0 for granted, so relu(abs(INT64_MIN)) was
    // INT64_MIN (GPU fuzz seed 4844).
    case ExprOp::Neg: return flt || is_bool(t) ? "-(" + a[0] + ")" : wrapping_neg(a[0], t);
    // Floats through each prelude's ember_abs (the CUDA one sidesteps a ptxas fold of
    // |x| >= 0 to true: GPU fuzz seed 53425).
    case ExprOp::Abs:
      if (flt) return std::string(f64 ? "ember_abs_f64(" : "ember_abs_f32(") + a[0] + ")";
      return "(" + a[0] + " < 0 ? " + wrapping_neg(a[0], t) + " : " + a[0] + ")";
    case ExprOp::Exp: return std::string(f64 ? "ember_exp(" : "ember_expf(") + a[0] + (f64 ? ", exp_lo_f64)" : ", exp_lo_f32)");
    case ExprOp::Exp2: return fn("exp2");
    case ExprOp::Expm1: return fn("expm1");
    case ExprOp::Log: return fn("log");
    case ExprOp::Log2: return fn("log2");
    case ExprOp::Log10: return fn("log10");
    case ExprOp::Log1p: return fn("log1p");
    case ExprOp::Sqrt: return fn("sqrt");
    case ExprOp::Rsqrt: return one + " / " + fn("sqrt");
    case ExprOp::Sin: return fn("sin");
    case ExprOp::Cos: return fn("cos");
    case ExprOp::Tan: return fn("tan");
    case ExprOp::Asin: return fn("asin");
    case ExprOp::Acos: return fn("acos");
    case ExprOp::Atan: return fn("atan");
    case ExprOp::Sinh: return fn("sinh");
    case ExprOp::Cosh: return fn("cosh");
    case ExprOp::Tanh: return fn("tanh");
    case ExprOp::Asinh: return fn("asinh");
    case ExprOp::Acosh: return fn("acosh");
    case ExprOp::Atanh: return fn("atanh");
    case ExprOp::Erf: return f64 ? fn("erf") : "ember_erff(" + a[0] + ")";
    case ExprOp::Erfc: return fn("erfc");
    case ExprOp::Sigmoid:
      return one + " / (" + one + " + " + std::string(f64 ? "ember_exp(-" : "ember_expf(-") + a[0] + (f64 ? ", exp_lo_f64))" : ", exp_lo_f32))");
    case ExprOp::Floor: return fn("floor");
    case ExprOp::Ceil: return fn("ceil");
    case ExprOp::Round: return fn("nearbyint");
    case ExprOp::Trunc: return fn("trunc");
    // Integers as selects: LLVM turns (x > 0) - (x < 0) into (x > 0) + (x >> 63), and
    // ptxas (NVRTC 13.0's) takes 2x + (x >> 63) for a rotate, so sign(x) + 2x was
    // rotl(x, 1) = -127 for x = -64 (GPU fuzz seed 11677).
    case ExprOp::Sign:
      if (is_bool(t)) return a[0];
      if (!flt) return "(" + a[0] + " > 0 ? (" + c_type(t) + ")1 : " + a[0] + " < 0 ? (" + c_type(t) + ")-1 : (" + c_type(t) + ")0)";
      return "(" + c_type(t) + ")((" + a[0] + " > 0) - (" + a[0] + " < 0))";
    case ExprOp::Reciprocal: return one + " / " + a[0];
    case ExprOp::IsNan: return "(" + a[0] + " != " + a[0] + ")";
    case ExprOp::IsInf: return std::string(e->args[0]->dtype == DType::F64 ? "fabs(" : "fabsf(") + a[0] + ") == INFINITY";
    case ExprOp::IsFinite: return std::string(e->args[0]->dtype == DType::F64 ? "fabs(" : "fabsf(") + a[0] + ") < INFINITY";
    case ExprOp::LogicalNot: return "!" + a[0];
    case ExprOp::BitNot: return "~" + a[0];
    case ExprOp::Add: return wraps(t) ? wrapping(a[0], "+", a[1], t) : a[0] + " + " + a[1];
    case ExprOp::Sub:
      if (t == DType::I16) return "ember_sub_i16(" + a[0] + ", " + a[1] + ")";  // see wrapping_neg
      return wraps(t) ? wrapping(a[0], "-", a[1], t) : a[0] + " - " + a[1];
    case ExprOp::Mul:
      if (t == DType::I16) return "ember_mul_i16(" + a[0] + ", " + a[1] + ")";
      return wraps(t) ? wrapping(a[0], "*", a[1], t) : a[0] + " * " + a[1];
    case ExprOp::Div: return flt ? a[0] + " / " + a[1] : "ember_tdiv(" + a[0] + ", " + a[1] + ")";
    case ExprOp::FloorDiv: return std::string(flt ? (f64 ? "ember_floordiv(" : "ember_floordivf(") : "ember_fdiv(") + a[0] + ", " + a[1] + ")";
    case ExprOp::TruncDiv: return "ember_tdiv(" + a[0] + ", " + a[1] + ")";
    case ExprOp::Mod: return flt ? (f64 ? "ember_pymod(" : "ember_pymodf(") + a[0] + ", " + a[1] + ")" : "ember_fmod_py(" + a[0] + ", " + a[1] + ")";
    case ExprOp::Fmod: return flt ? fn2("fmod") : "ember_tmod(" + a[0] + ", " + a[1] + ")";
    case ExprOp::Pow: return fn2("pow");
    case ExprOp::Atan2: return fn2("atan2");
    // Of two computed values (a pool's window, torch.maximum): ember_max2_f32, one
    // instruction on the GPU (codegen/cuda/prelude.cpp). With a constant (relu, clamp) the
    // select form, whose NaN test the compiler folds away.
    case ExprOp::Max:
      if (flt && f64) return "ember_max_f64(" + a[0] + ", " + a[1] + ")";
      if (flt) return std::string(two_values ? "ember_max2_f32(" : "ember_max_f32(") + a[0] + ", " + a[1] + ")";
      return a[0] + " > " + a[1] + " ? " + a[0] + " : " + a[1];
    case ExprOp::Min:
      if (flt && f64) return "ember_min_f64(" + a[0] + ", " + a[1] + ")";
      if (flt) return std::string(two_values ? "ember_min2_f32(" : "ember_min_f32(") + a[0] + ", " + a[1] + ")";
      return a[0] + " < " + a[1] + " ? " + a[0] + " : " + a[1];
    case ExprOp::Eq: return a[0] + " == " + a[1];
    case ExprOp::Ne: return a[0] + " != " + a[1];
    case ExprOp::Lt: return a[0] + " < " + a[1];
    case ExprOp::Le: return a[0] + " <= " + a[1];
    case ExprOp::Gt: return a[0] + " > " + a[1];
    case ExprOp::Ge: return a[0] + " >= " + a[1];
    case ExprOp::LogicalAnd: return a[0] + " && " + a[1];
    case ExprOp::LogicalOr: return a[0] + " || " + a[1];
    case ExprOp::LogicalXor: return "(!" + a[0] + ") != (!" + a[1] + ")";
    case ExprOp::BitAnd: return a[0] + " & " + a[1];
    case ExprOp::BitOr: return a[0] + " | " + a[1];
    case ExprOp::BitXor: return a[0] + " ^ " + a[1];
    case ExprOp::Shl: return a[0] + " << " + a[1];
    case ExprOp::Shr: return a[0] + " >> " + a[1];
    case ExprOp::Where: return a[0] + " ? " + a[1] + " : " + a[2];
    case ExprOp::Cast: {
      DType from = e->args[0]->dtype;
      const Expr& x = e->args[0];
      if (flt && from == DType::I64 && x->op == ExprOp::Cast && is_float(x->args[0]->dtype)) {
        // Float -> int64 -> float is a truncation, except that the integer keeps no
        // sign of zero: (float)(int64_t)-0.5f is +0.0. Under -fno-trapping-math gcc
        // fuses the pair into trunc(), which gives -0.0 (then 0 / -0.5 is +0.0 where
        // eager has -0.0: fuzz seed 72148), and it drops a literal + 0.0f first,
        // knowing an int converts to no -0.0. Adding a zero it cannot see gives C's
        // +0.0 back and is the identity on every other value (NVRTC keeps the pair).
        std::string f = "(" + c_type(t) + ")" + a[0] + " + " + opaque_zero(t);
        if (t == DType::F16) return "ember_round_h(" + f + ")";
        if (t == DType::BF16) return "ember_round_bf(" + f + ")";
        return "(" + f + ")";
      }
      if (t == DType::F16) return "ember_round_h((float)" + a[0] + ")";
      if (t == DType::BF16) return "ember_round_bf((float)" + a[0] + ")";
      if (is_bool(t)) return "(" + a[0] + " != 0)";
      if (is_float(from) && !is_float(t)) {
        // Float -> int conversion of NaN/inf/out-of-range is undefined in C; x86
        // (and so eager on x86) gives the "integer indefinite" value. Go through
        // int64 so narrow types wrap like ATen's static_cast chain.
        return "(" + c_type(t) + ")(int64_t)" + a[0];
      }
      return "(" + c_type(t) + ")" + a[0];
    }
    default:
      throw std::logic_error(std::string("codegen: unhandled op ") + expr_op_name(e->op));
  }
}

std::string CEmitter::as_stored(const std::string& value, DType t) {
  if (t == DType::F16) return "ember_round_h((float)" + value + ")";
  if (t == DType::BF16) return "ember_round_bf((float)" + value + ")";
  if (is_bool(t)) return "(" + value + " != 0)";
  return "(" + c_type(t) + ")" + value;
}

std::string CEmitter::store_text(const std::string& ptr, const std::string& index, DType t, const std::string& value) {
  std::string ref = ptr + "[" + index + "]";
  switch (t) {
    case DType::F16: return ref + " = ember_f2h(" + value + ");";
    case DType::BF16: return ref + " = ember_f2bf(" + value + ");";
    case DType::Bool: return ref + " = (uint8_t)(" + value + ");";
    default: return ref + " = " + value + ";";
  }
}

std::string CEmitter::lowest_or_highest(DType t, bool lowest) {
  switch (t) {
    case DType::Bool: return lowest ? "0" : "1";
    case DType::U8: return lowest ? "0" : "UINT8_MAX";
    case DType::I8: return lowest ? "INT8_MIN" : "INT8_MAX";
    case DType::I16: return lowest ? "INT16_MIN" : "INT16_MAX";
    case DType::I32: return lowest ? "INT32_MIN" : "INT32_MAX";
    default: return lowest ? "INT64_MIN" : "INT64_MAX";
  }
}

}  // namespace ember

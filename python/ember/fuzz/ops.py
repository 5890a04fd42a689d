"""The op proposals of the fuzzer's generator: each picks operands from the pool of values
computed so far, checks that the op is defined for them (else _Reject), and emits it."""
from __future__ import annotations

import dataclasses
import math
import re

import torch

from .programs import DTYPE_KEYS, DTYPES


@dataclasses.dataclass
class Value:
    """A value of the program being generated, with what is known of its definedness."""

    name: str
    t: torch.Tensor      # the eager value, so that proposals see shapes, dtypes and data
    exact: bool          # a correct compiler reproduces it exactly (see the module doc)
    # The sign of its zeros (and so of infinities computed from them) is defined. Eager
    # breaks ties of max/min between -0.0 and 0.0 differently in its scalar and vector
    # loops, so values computed from such ties have no defined zero sign.
    zsign: bool = True
    # The mean output of var_mean: eager computes it with Welford's algorithm, which
    # gives NaN or +-inf where the slice holds an infinity, depending on where the
    # infinity falls in eager's reduction order (ember gives NaN). Such values are only
    # outputs (no op reads them), and there ember's NaN matches eager's +-inf.
    welford: bool = False
    # The least precise float dtype it was computed through ("" if none): an f64 output
    # computed from an f32 softmax carries f32 rounding errors.
    prec: str = ""

    @property
    def shape(self):
        return tuple(self.t.shape)

    @property
    def dtype(self):
        return self.t.dtype

    @property
    def key(self):
        return DTYPE_KEYS[self.t.dtype]

    @property
    def is_float(self):
        return self.t.dtype.is_floating_point

    @property
    def is_bool(self):
        return self.t.dtype == torch.bool

    @property
    def rank(self):
        return self.t.dim()


class _Reject(Exception):
    """A proposal that does not apply to the chosen operands; try another."""


def _fmt(x) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    return repr(x)




class Ops:
    """Op proposals, mixed into Generator (generator.py), whose pool, emit() and
    require_*() they use."""

    def op_unary_float(self):
        a = self.pick()
        fn = self.r.choice(["exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
                            "sigmoid", "erf", "atan", "asinh", "reciprocal", "exp2", "erfc", "tan"])
        self.require_regular(a, fn)
        if fn in ("exp", "exp2") and a.dtype != torch.float16:
            # ember's exp flushes results below the smallest normal float to 0 (a
            # documented speed choice, c_prelude.cpp); eager returns the denormal,
            # which a later multiplication by a huge value can make visible.
            lo = (-745.2, -708.4) if a.dtype == torch.float64 else (-104.0, -87.3)
            x = a.t.double() * (math.log(2) if fn == "exp2" else 1.0)
            if bool(((x > lo[0]) & (x < lo[1])).any()):
                raise _Reject()
        self.emit(f"torch.{fn}({a.name})", False)

    def op_activation(self):
        a = self.pick(lambda v: v.is_float)
        e = self.r.choice(["F.gelu({})", "F.gelu({}, approximate='tanh')", "F.silu({})", "F.softplus({})",
                           "F.elu({})", "F.leaky_relu({}, 0.1)", "F.hardswish({})", "F.hardsigmoid({})",
                           "F.mish({})", "F.softplus({}, beta=2.0, threshold=5.0)"])
        if e.startswith("F.gelu") and a.dtype != torch.float64 and bool((a.t.double().abs() > 1e38).any()):
            # Eager's gelu(+inf) is NaN in its vector loop and +inf in its scalar loop, and
            # gelu(3.4e38) likewise inf and 3.4e38.
            raise _Reject()
        self.emit(e.format(a.name), False)

    def op_unary_exact(self):
        a = self.pick(lambda v: not v.is_bool)
        r = self.r
        u = r.random()
        if u < 0.2:
            self.emit(f"torch.neg({a.name})", a.exact)
        elif u < 0.4:
            self.emit(f"torch.abs({a.name})", a.exact)
        elif u < 0.6:
            self.emit(f"torch.relu({a.name})", a.exact)
        elif u < 0.8:
            lo, hi = sorted([r.choice([-1, 0, 2, -3]), r.choice([1, 0, 2, 5])])
            if a.is_float and r.random() < 0.5:
                lo, hi = lo - 0.5, hi + 0.25
            which = r.random()
            if which < 0.4:
                self.emit(f"torch.clamp({a.name}, {lo}, {hi})", a.exact)
            elif which < 0.7:
                self.emit(f"torch.clamp({a.name}, min={lo})", a.exact)
            else:
                self.emit(f"torch.clamp({a.name}, max={hi})", a.exact)
        elif a.is_float:
            self.emit(f"torch.nan_to_num({a.name}, {r.choice(['', 'nan=1.5, posinf=9.0', 'neginf=-2.0'])})", a.exact)
        else:
            self.emit(f"torch.sign({a.name})", a.exact)

    def op_unary_discrete(self):
        a = self.pick(lambda v: v.exact)
        fn = self.r.choice(["floor", "ceil", "round", "trunc", "sign", "isnan", "isinf", "isfinite",
                            "logical_not", "bitwise_not", "signbit"])
        if fn == "bitwise_not" and a.is_float:
            raise _Reject()
        if fn == "signbit" and a.is_float and (not a.zsign or bool(a.t.isnan().any())):
            # The sign of a NaN (x86's fmod(-inf, y) is -NaN) and of an undefined-sign
            # zero are not part of what eager defines.
            raise _Reject()
        self.emit(f"torch.{fn}({a.name})", True)

    def op_binary(self):
        r = self.r
        a = self.pick()
        fn = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "add_alpha", "pow", "atan2",
                       "rsub", "true_divide"])
        if fn in ("pow", "atan2") and not a.is_float:
            raise _Reject()
        if r.random() < 0.3 and fn not in ("maximum", "minimum", "atan2"):
            s = self.scalar(a)
            if fn == "rsub":
                self.emit(f"torch.rsub({a.name}, {_fmt(s)})", False)
            elif fn == "add_alpha":
                self.emit(f"torch.add({a.name}, {_fmt(s)}, alpha=2)", False)
            elif fn == "pow":
                e = r.choice([2, 3, 0.5, -1, -0.5, 1.5, 0, -2])
                self.require_regular(a, "pow" if e in (0.5, -1, -0.5, 1.5, -2) else "")
                self.emit(f"torch.pow({a.name}, {e})", False)
            else:
                if fn in ("div", "true_divide") and s == 0:
                    # x / 0 is +-inf or NaN by the sign of x: discontinuous at x = 0, so an
                    # inexact x stays away from 0 (dynamic seed 312141: eager's f16
                    # log_softmax rounded -4.6e-4 to 0, NaN after / -0.0; ember and fp64 +inf).
                    self.require_regular(a, "reciprocal")
                self.emit(f"torch.{fn}({a.name}, {_fmt(s)})", False)
            return
        b = self.partner(a)
        exact = fn in ("maximum", "minimum") and a.exact and b.exact
        if fn == "add_alpha":
            alpha = r.choice([2, -1, 0.5])
            self.require_finite_scaled(b, alpha)
            self.emit(f"torch.add({a.name}, {b.name}, alpha={alpha})", False)
        else:
            x, y = (a, b) if r.random() < 0.8 else (b, a)
            if fn in ("div", "true_divide", "pow"):
                self.require_regular(y if fn != "pow" else x, "reciprocal")
            if fn in ("div", "true_divide") and bool((y.t == 0).any()):
                self.require_regular(x, "reciprocal")  # x / 0, as for a scalar 0 above
            if fn == "pow" and not y.exact and bool((x.t < 0).any()):
                # A negative base to a non-integer power is NaN, to an integer one is not:
                # discontinuous in an inexact exponent (ember's exp flushes results below
                # 1e-38 to 0, so softplus(-100) is 0 where eager has a denormal).
                raise _Reject()
            if fn == "pow":
                self.require_pow_in_range(x, y)
            if fn == "atan2":
                self.require_regular(x, "reciprocal")
                self.require_regular(y, "reciprocal")
                # atan2(+-0, negative) is +-pi: a zero of undefined sign gives an undefined value.
                if not (x.zsign and y.zsign):
                    raise _Reject()
            self.emit(f"torch.{fn}({x.name}, {y.name})", exact or (not x.is_float and not y.is_float
                                                                   and fn in ("add", "sub", "mul", "rsub")),
                      zero_tie=fn in ("maximum", "minimum"))

    def op_int_arith(self):
        """Integer (and exact float) division family: floor/trunc division, remainder, fmod."""
        r = self.r
        a = self.pick(lambda v: v.exact and not v.is_bool)
        fn = r.choice(["floor_divide", "remainder", "fmod", "div_floor", "div_trunc"])
        if r.random() < 0.4:
            s = r.choice([2, -3, 7, 2.5, -0.75, 0.0, -0.0]) if a.is_float else r.choice([2, -3, 7, 1, -1])
            operand = _fmt(s)
        else:
            b = self.partner(a)
            if not b.exact or b.is_bool:
                raise _Reject()
            operand = b.name
        # Eager's floor division of f16/bf16 tensors rounds its intermediate steps in its
        # vector loop and not in its scalar loop: the last bit is not defined.
        if not a.is_float:
            # Eager's integer division traps (SIGFPE, the process dies) on INT_MIN / -1.
            lo = torch.iinfo(a.dtype).min
            minus_one = operand == "-1" or (operand.startswith(("a", "v"))
                                            and bool((self.value(operand).t == -1).any()))
            if minus_one and bool((a.t == lo).any()):
                raise _Reject()
        elif fn in ("remainder", "fmod"):
            # Eager's vector fmod (Sleef) gives NaN once |a / b| exceeds the float range;
            # its scalar loop gives the exact remainder.
            b = self.value(operand).t if operand.startswith(("a", "v")) else torch.tensor(float(operand))
            with torch.no_grad():
                ratio = (a.t.double() / b.double()).abs()
            if bool((ratio.isfinite() & (ratio > 1e30)).any()) or bool(((ratio == math.inf) & a.t.isfinite() & (b != 0)).any()):
                raise _Reject()
        if fn.startswith("div_"):
            v = self.emit(f"torch.div({a.name}, {operand}, rounding_mode='{fn[4:]}')", True)
        else:
            v = self.emit(f"torch.{fn}({a.name}, {operand})", True)
        if (v[0].dtype in (torch.float16, torch.bfloat16) and fn in ("floor_divide", "div_floor")
                and operand.startswith(("a", "v"))):
            v[0].exact = False

    def op_compare(self):
        r = self.r
        a = self.pick(lambda v: v.exact)
        fn = r.choice(["eq", "ne", "lt", "le", "gt", "ge"])
        if r.random() < 0.4:
            self.emit(f"torch.{fn}({a.name}, {_fmt(self.scalar(a))})", True)
        else:
            b = self.partner(a)
            if not b.exact:
                raise _Reject()
            self.emit(f"torch.{fn}({a.name}, {b.name})", True)

    def op_logical(self):
        r = self.r
        a = self.pick(lambda v: v.exact)
        fn = r.choice(["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"])
        if fn.startswith("bitwise") and a.is_float:
            raise _Reject()
        b = self.partner(a)
        if not b.exact:
            raise _Reject()
        self.emit(f"torch.{fn}({a.name}, {b.name})", True)

    def op_where(self):
        r = self.r
        a = self.pick()
        cond = self.pick(lambda v: v.is_bool)
        if r.random() < 0.3:
            self.emit(f"torch.masked_fill({a.name}, {cond.name}, {_fmt(self.scalar(a))})", a.exact)
            return
        if r.random() < 0.3:
            self.emit(f"torch.where({cond.name}, {a.name}, {_fmt(self.scalar(a))})", a.exact)
            return
        b = self.partner(a)
        self.emit(f"torch.where({cond.name}, {a.name}, {b.name})", a.exact and b.exact)

    def op_mask(self):
        """A bool mask from an exact value (so where/masked_fill have conditions to use)."""
        a = self.pick(lambda v: v.exact and not v.is_bool)
        e = self.r.choice(["{} > 0", "{} <= {}", "{} != {}", "torch.isnan({})"])
        self.emit(e.format(a.name, _fmt(self.scalar(a))) if "{} <=" in e or "!=" in e else e.format(a.name), True)

    def op_cast(self):
        r = self.r
        a = self.pick()
        to = self.random_dtype()
        if DTYPES[to].is_floating_point:
            self.emit(f"{a.name}.to(D_{to})", a.exact or not a.is_float)
        elif a.is_float:
            if not a.exact:
                raise _Reject()
            # Float -> int of NaN, inf or out-of-range values is undefined (in C and in
            # eager, whose scalar and vector paths disagree): make the value defined first.
            self.emit(f"torch.nan_to_num({a.name}, nan=0.0, posinf=3.0, neginf=-3.0).clamp(-100, 100).to(D_{to})", True)
        else:
            self.emit(f"{a.name}.to(D_{to})", True)

    def op_reduce(self):
        r = self.r
        a = self.pick()
        fn = r.choice(["sum", "mean", "prod", "amax", "amin", "max_dim", "min_dim", "argmax", "argmin",
                       "any", "all", "var", "std", "logsumexp", "sum_all", "max_all", "norm", "var_mean"])
        keep = r.random() < 0.4
        dims = self.dims(a)
        if fn == "sum":
            dt = r.choice(["", f", dtype={self.wide}", ", dtype=D_f32"]) if r.random() < 0.15 else ""
            if dt and not a.is_float and a.t.numel() and a.t.double().abs().max().item() > 2 ** (24 if "f32" in dt else 53):
                # Integers the float type cannot hold: sums that cancel (int64 extremes)
                # depend on the order of accumulation, which differs from eager's.
                raise _Reject()
            if "f64" not in dt:
                self.require_order_free_sum(a, dims)
            self.emit(f"torch.sum({a.name}, {dims}, keepdim={keep}{dt})", (a.exact and not a.is_float and not dt))
        elif fn == "sum_all":
            self.require_order_free_sum(a, None)
            self.emit(f"torch.sum({a.name})", a.exact and not a.is_float)
        elif fn == "mean":
            self.require_order_free_sum(a, dims)
            self.emit(f"torch.mean({a.name}, {dims}, keepdim={keep})", False)
        elif fn == "prod":
            d = self.dim(a)
            self.require_order_free_product(a, d)
            self.emit(f"torch.prod({a.name}, {d}, keepdim={keep})", a.exact and not a.is_float)
        elif fn in ("amax", "amin"):
            self.emit(f"torch.{fn}({a.name}, {dims}, keepdim={keep})", a.exact, zero_tie=True)
        elif fn == "max_all":
            self.emit(f"torch.{r.choice(['max', 'min'])}({a.name})", a.exact, zero_tie=True)
        elif fn in ("max_dim", "min_dim"):
            if not a.exact:
                raise _Reject()
            self.emit(f"torch.{fn[:3]}({a.name}, {self.dim(a)}, keepdim={keep})", [True, True], n_out=2,
                      zero_tie=True)
        elif fn in ("argmax", "argmin"):
            if not a.exact:
                raise _Reject()
            d = self.dim(a) if r.random() < 0.8 else None
            self.emit(f"torch.{fn}({a.name}, {d}, keepdim={keep})", True)
        elif fn in ("any", "all"):
            if not a.exact:
                raise _Reject()
            if r.random() < 0.3:
                self.emit(f"torch.{fn}({a.name})", True)
            else:
                self.emit(f"torch.{fn}({a.name}, {self.dim(a)}, keepdim={keep})", True)
        elif fn in ("var", "std"):
            self.require_conditioned(a, dims)
            corr = r.choice([0, 1, 1, 2])
            self.emit(f"torch.{fn}({a.name}, {dims}, correction={corr}, keepdim={keep})", False)
        elif fn == "var_mean":
            self.require_conditioned(a, dims)
            self.emit(f"torch.var_mean({a.name}, {dims}, correction={r.choice([0, 1])}, keepdim={keep})",
                      [False, False], n_out=2)
            self.pool[-1].welford = True
        elif fn == "logsumexp":
            if a.dtype in (torch.float16, torch.bfloat16) and a.t.numel():
                # Eager's logsumexp stores sum(exp(x - max)) in the result's dtype before
                # the log: over many f16 elements that sum overflows to inf, where ember
                # and the fp64 reference sum in f32 and stay finite (GPU seed 152497:
                # 323,136 elements, eager inf, ember 13.17, fp64 13.18). Not compared:
                # where that sum may reach the type's range.
                x = a.t.double()
                x = torch.where(x.isfinite(), x, torch.full_like(x, -math.inf))
                mx = x.amax(dims, keepdim=True) if a.rank else x
                s = torch.where(mx.isfinite(), (x - mx).exp(), torch.zeros_like(x))
                s = s.sum(dims) if a.rank else s
                if bool((s > torch.finfo(a.dtype).max / 2).any()):
                    raise _Reject()
            self.emit(f"torch.logsumexp({a.name}, {dims}, keepdim={keep})", False)
        elif fn == "norm":
            self.emit(f"torch.linalg.vector_norm({a.name}, {r.choice([2, 1])}, {dims}, keepdim={keep})", False)

    def op_normalize(self):
        r = self.r
        a = self.pick(lambda v: v.is_float and v.rank >= 1)
        u = r.random()
        if u < 0.35:
            d = self.dim(a)
            dt = ", dtype=D_f32" if a.dtype in (torch.float16, torch.bfloat16) and r.random() < 0.3 else ""
            fn = r.choice(['softmax', 'log_softmax'])
            if fn == "softmax" and (dt or a.dtype != torch.float16):
                self.require_normal_softmax(a, d)
            self.emit(f"torch.{fn}({a.name}, {d}{dt})", False)
        elif u < 0.8:
            k = r.randint(1, min(a.rank, 2))
            shape = list(a.shape[-k:])
            self.require_conditioned(a, list(range(a.rank - k, a.rank)))
            if r.random() < 0.5:
                # No infinities in the affine parameters: inf * (x - mean) is NaN or inf
                # depending on whether x - mean rounds to exactly zero.
                w = self.new_input(shape, a.key, values="normal")
                b = self.new_input(shape, a.key, values="normal")
                self.emit(f"F.layer_norm({a.name}, {shape}, {w.name}, {b.name}, eps={r.choice([1e-5, 1e-6, 0.1])})",
                          False)
            else:
                self.emit(f"F.layer_norm({a.name}, {shape})", False)
        else:
            d = self.dims(a)
            self.require_conditioned(a, d)
            self.emit(f"({a.name} - {a.name}.mean({d}, keepdim=True)) * torch.rsqrt({a.name}.var({d}, "
                      f"keepdim=True, correction=0) + 1e-5)", False)
    def op_scan(self):
        r = self.r
        a = self.pick(lambda v: v.rank >= 1)
        fn = r.choice(["cumsum", "cumsum", "cumprod"])
        dt = f", dtype={self.wide}" if r.random() < 0.1 else ""
        d = self.dim(a)
        if self.dtypes:  # the GPU campaign's programs
            self.require_order_free_scan(a, d, fn, bool(dt))
        self.emit(f"torch.{fn}({a.name}, {d}{dt})", a.exact and not a.is_float and not dt)

    def op_view(self):
        r = self.r
        a = self.pick()
        ex = a.exact
        shape = list(a.shape)
        rank = a.rank
        u = r.randrange(12)
        if u == 0 and rank >= 2:
            perm = list(range(rank))
            r.shuffle(perm)
            self.emit(f"{a.name}.permute({perm})", ex)
        elif u == 1 and rank >= 2:
            i, j = r.sample(range(rank), 2)
            self.emit(f"{a.name}.transpose({i}, {j})", ex)
        elif u == 2 and rank >= 1:
            d = r.randrange(rank)
            n = shape[d]
            start = r.randint(-n, n) if n else 0
            step = r.choice([1, 1, 2, 3])
            idx = [":"] * rank
            idx[d] = f"{start}::{step}"
            self.emit(f"{a.name}[{', '.join(idx)}]", ex)
        elif u == 3 and rank >= 1 and all(s > 0 for s in shape):
            d = r.randrange(rank)
            i = r.randrange(-shape[d], shape[d])
            self.emit(f"{a.name}.select({d}, {i})", ex)
        elif u == 4:
            self.emit(f"{a.name}.unsqueeze({r.randint(-rank - 1, rank)})", ex)
        elif u == 5 and 1 in shape:
            self.emit(f"{a.name}.squeeze({shape.index(1)})", ex)
        elif u == 6 and 1 in shape:
            new = [r.choice([2, 3, 6]) if s == 1 else -1 for s in shape]
            if r.random() < 0.3:
                new = [r.choice([2, 4])] + new
            self.emit(f"{a.name}.expand({new})", ex)
        elif u == 7 and rank >= 2:
            d = r.randrange(rank - 1)
            self.emit(f"{a.name}.flatten({d}, {d + 1})", ex)
        elif u == 8 and rank >= 1:
            d = r.randrange(rank)
            n = shape[d]
            divs = [k for k in range(2, n) if n % k == 0]
            if not divs:
                raise _Reject()
            k = r.choice(divs)
            self.emit(f"{a.name}.unflatten({d}, ({k}, {n // k}))", ex)
        elif u == 9 and rank >= 1:
            self.emit(f"{a.name}.flip({self.dims(a)})", ex)
        elif u == 10:
            new = list(shape)
            r.shuffle(new)
            if r.random() < 0.5:
                new = [math.prod(shape)] if shape else [1]
            self.emit(f"{a.name}.reshape({new})", ex)
        elif u == 11 and rank >= 1:
            d = r.randrange(rank)
            if shape[d] == 0:
                raise _Reject()
            start = r.randrange(shape[d])
            self.emit(f"{a.name}.narrow({d}, {start}, {r.randint(0, shape[d] - start)})", ex)
        else:
            raise _Reject()

    def op_shape(self):
        """cat, stack, pad, gather, index_select, diagonal, tril, repeat, roll, full_like, arange."""
        r = self.r
        a = self.pick()
        u = r.randrange(10)
        if u == 0 and a.rank >= 1:
            d = r.randrange(a.rank)
            other = list(a.shape)
            other[d] = r.choice([1, 2, 5, 0])
            b = self.new_input(other, r.choice([a.key, a.key, self.random_dtype()]))
            self.emit(f"torch.cat([{a.name}, {b.name}], {d})", a.exact and b.exact and a.dtype == b.dtype)
        elif u == 1:
            b = self.new_input(list(a.shape), a.key)
            self.emit(f"torch.stack([{a.name}, {b.name}], {r.randint(-a.rank - 1, a.rank)})", a.exact)
        elif u == 2 and a.rank >= 1:
            pads = []
            for _ in range(r.randint(1, min(2, a.rank))):
                pads += [r.choice([0, 1, 2, -1]), r.choice([0, 1, 3, -1])]
            self.emit(f"F.pad({a.name}, {pads}, value={_fmt(r.choice([0.0, 1.5, -2.0]) if a.is_float else 0)})",
                      a.exact)
        elif u == 3 and a.rank >= 1:
            d = r.randrange(a.rank)
            n = a.shape[d]
            if n == 0:
                raise _Reject()
            idx = self.new_input([r.choice([1, 3, 5, 8])], "i64", values="index", index_bound=n)
            self.emit(f"torch.index_select({a.name}, {d}, {idx.name})", a.exact)
        elif u == 4 and a.rank >= 1:
            d = r.randrange(a.rank)
            n = a.shape[d]
            if n == 0:
                raise _Reject()
            shape = [r.randint(1, s) if s > 0 else 0 for s in a.shape]
            shape[d] = r.choice([1, 2, 4, 7])
            idx = self.new_input(shape, "i64", values="index", index_bound=n)
            self.emit(f"torch.gather({a.name}, {d}, {idx.name})", a.exact)
        elif u == 5 and a.rank >= 2:
            self.emit(f"torch.{r.choice(['tril', 'triu'])}({a.name}, {r.randint(-2, 2)})", a.exact)
        elif u == 6 and a.rank >= 1:
            reps = [r.choice([1, 1, 2, 3]) for _ in range(a.rank + r.randint(0, 1))]
            self.emit(f"{a.name}.repeat({reps})", a.exact)
        elif u == 7 and a.rank >= 1:
            self.emit(f"torch.roll({a.name}, {r.randint(-3, 3)}, {r.randrange(a.rank)})", a.exact)
        elif u == 8:
            self.emit(f"torch.full_like({a.name}, {_fmt(self.scalar(a))}) + {a.name}", False)
        elif u == 9 and a.rank >= 1:
            n = a.shape[-1]
            dt = r.choice(["D_i64", "D_f32", "D_i32"])
            # Programs of the GPU campaign run on CUDA tensors: the range is made beside `a`.
            dev = f", device={a.name}.device" if self.dtypes else ""
            self.emit(f"{a.name} * torch.arange({n}, dtype={dt}{dev})", a.exact and not a.is_float and dt != "D_f32")
        else:
            raise _Reject()

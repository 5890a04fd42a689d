"""The fuzzer's generator: a seed's inputs and ops (ops.py), each run eagerly as it is
chosen, so that every program is valid eager code and its values steer the next op."""
from __future__ import annotations

import math
import random
import re

import torch

from .ops import Ops, Value, _Reject
from .programs import DTYPE_KEYS, DTYPES, EPS, FLOAT_KEYS, LOOSENESS, TOLERANCES, InputSpec, Program, _namespace, make_input


class Generator(Ops):
    """Generates one seed's program. With `dtypes` (the GPU campaign's f32, bf16, f16)
    each program draws one of them as its float dtype, which most of its float inputs
    take (the others of `dtypes` appear too, for type promotion), beside integer and
    bool inputs, and no f64 (sums and scans to a wider type go to f32). Without, the
    dtype mix of the CPU campaigns, whose seeds keep their programs."""

    SIZES = [1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 33, 64]

    def __init__(self, seed: int, dtypes: tuple | None = None):
        self.seed = seed
        self.r = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed * 7919 + 17)
        self.inputs: list[InputSpec] = []
        self.input_tensors: list[torch.Tensor] = []
        self.pool: list[Value] = []
        self.lines: list[str] = []
        self.ns = _namespace()
        self.count = 0
        self.allow_zero = self.r.random() < 0.08
        self.big = self.r.random() < 0.03
        self.specials = self.r.random() < 0.35
        self.dtypes = tuple(dtypes) if dtypes else None
        self.main = self.r.choice(self.dtypes) if self.dtypes else None
        # The dtype of sums and scans to a wider float type.
        self.wide = "D_f32" if self.dtypes else "D_f64"

    # -- inputs ----------------------------------------------------------------------
    def random_shape(self, rank=None):
        rank = self.r.choice([0, 1, 1, 2, 2, 2, 3, 3, 4]) if rank is None else rank
        shape = [self.r.choice(self.SIZES) for _ in range(rank)]
        if self.allow_zero and shape and self.r.random() < 0.3:
            shape[self.r.randrange(rank)] = 0
        if self.big and rank >= 2:
            # Large enough for kernels to split rows across threads (about 64k elements
            # per chunk), small enough to stay fast: at most ~1M elements.
            shape = [self.r.choice([1, 2]) for _ in shape[:-2]] + [self.r.choice([64, 129]),
                                                                   self.r.choice([1024, 4099])]
        return shape

    def random_dtype(self):
        if self.dtypes:
            others = [d for d in self.dtypes if d != self.main]
            return self.r.choices([self.main, *others, "i64", "i32", "bool", "i16", "i8", "u8"],
                                  weights=[56, *[6] * len(others), 8, 6, 6, 2, 2, 2])[0]
        return self.r.choices(
            ["f32", "f64", "f16", "bf16", "i64", "i32", "bool", "i16", "i8", "u8"],
            weights=[40, 8, 8, 8, 8, 6, 6, 2, 2, 2])[0]

    def new_input(self, shape, dtype, values=None, index_bound=0) -> Value:
        r = self.r
        rank = len(shape)
        layout, arg = "contiguous", []
        u = r.random()
        if rank >= 2 and u < 0.2:
            perm = list(range(rank))
            while perm == list(range(rank)):
                r.shuffle(perm)
            layout, arg = "permuted", perm
        elif rank >= 1 and u < 0.3 and not self.big:
            layout, arg = "sliced", [r.choice([1, 2, 3]) for _ in range(rank)]
        elif rank >= 1 and u < 0.37 and 1 in shape:
            pass
        elif rank >= 1 and u < 0.42 and not self.big:
            dims = [d for d in range(rank) if r.random() < 0.5]
            if dims:
                layout, arg = "expanded", dims
        elif u < 0.47:
            layout, arg = "offset", [r.choice([1, 3, 5])]
        if values is None:
            if dtype == "bool":
                values = "bools"
            elif dtype in FLOAT_KEYS:
                values = "specials" if self.specials and r.random() < 0.7 else "normal"
            else:
                values = "wide_ints" if r.random() < 0.15 else "ints"
        scale = r.choice([1.0, 1.0, 1.0, 3.0, 0.01, 100.0]) if dtype in FLOAT_KEYS else 1.0
        spec = InputSpec(list(shape), dtype, layout, arg, values, scale, index_bound)
        t = make_input(spec, self.gen)
        self.inputs.append(spec)
        self.input_tensors.append(t)
        v = Value(f"a{len(self.inputs) - 1}", t, True, prec=dtype if dtype in FLOAT_KEYS else "")
        self.pool.append(v)
        return v

    # -- helpers ---------------------------------------------------------------------
    def value(self, name: str) -> Value:
        return next(v for v in self.pool if v.name == name)

    def pick(self, pred=lambda v: True) -> Value:
        cands = [v for v in self.pool if pred(v) and not v.welford]
        if not cands:
            raise _Reject()
        # Prefer recent values, so that ops chain into deeper graphs.
        weights = [1.0 + 3.0 * (i >= len(cands) - 2) for i in range(len(cands))]
        return self.r.choices(cands, weights=weights)[0]

    def emit(self, expr: str, exact: bool, n_out: int = 1, zero_tie: bool = False):
        """Runs `expr` eagerly; on success records it and adds its result(s) to the pool.
        zero_tie: the op is a max/min, whose result's zero sign eager leaves undefined."""
        operands = [v for v in self.pool if re.search(rf"\b{v.name}\b", expr)]
        zsign = all(v.zsign for v in operands) and not zero_tie
        precs = [v.prec for v in operands if v.prec]
        env = dict(self.ns)
        env.update({v.name: v.t for v in self.pool})
        try:
            result = eval(expr, env)
        except Exception:
            raise _Reject()
        outs = list(result) if n_out > 1 else [result]
        if not all(isinstance(o, torch.Tensor) for o in outs):
            raise _Reject()
        if any(o.numel() > 3_000_000 for o in outs):
            raise _Reject()
        names = []
        for o in outs:
            names.append(f"v{self.count}")
            self.count += 1
        if n_out > 1:
            self.lines.append(f"{', '.join(names)} = {expr}")
        else:
            self.lines.append(f"{names[0]} = {expr}")
        vals = []
        for name, o, ex in zip(names, outs, exact if isinstance(exact, (list, tuple)) else [exact] * n_out):
            p = precs + ([DTYPE_KEYS[o.dtype]] if o.dtype.is_floating_point else [])
            vals.append(Value(name, o, ex, zsign, prec=max(p, key=LOOSENESS.index) if p else ""))
            self.pool.append(vals[-1])
        return vals

    def partner(self, a: Value, dtype=None) -> Value:
        """A value that broadcasts with `a`: an existing one, or a new input."""
        r = self.r
        if r.random() < 0.45:
            def fits(v):
                if v is a or (dtype is not None and v.key != dtype):
                    return False
                try:
                    torch.broadcast_shapes(v.shape, a.shape)
                    return True
                except RuntimeError:
                    return False
            try:
                return self.pick(fits)
            except _Reject:
                pass
        shape = list(a.shape)
        u = r.random()
        if u < 0.3 and shape:
            shape = shape[r.randrange(len(shape) + 1):]          # drop leading dims
        elif u < 0.6:
            shape = [1 if r.random() < 0.4 else s for s in shape]  # unit dims broadcast
        elif u < 0.7:
            shape = []
        elif u < 0.8 and 1 in shape:
            shape = [r.choice([3, 5]) if s == 1 and r.random() < 0.5 else s for s in shape]
        return self.new_input(shape, dtype or self.random_dtype())

    def scalar(self, for_value: Value):
        r = self.r
        if for_value.is_float or r.random() < 0.3:
            return r.choice([2.0, -1.5, 0.5, 3.0, 0.0, -0.0, 1e-3, 7.25, math.inf, -math.inf, math.nan, 1e30,
                             0.1, -0.3, 1 / 3])
        return r.choice([2, -1, 3, 0, 7, -5, 1])

    def dim(self, v: Value):
        if v.rank == 0:
            return self.r.choice([0, -1])
        return self.r.randrange(-v.rank, v.rank)

    def dims(self, v: Value):
        if v.rank == 0:
            return []
        k = self.r.randint(1, v.rank)
        return sorted(self.r.sample(range(v.rank), k))

    # -- op proposals ----------------------------------------------------------------

    # Where a function's result is infinitely sensitive to its argument (a pole, a branch
    # point, overflow), as distances from the singular points.
    SINGULAR = {
        "log": [0.0], "log2": [0.0], "log1p": [-1.0], "sqrt": [0.0], "rsqrt": [0.0], "reciprocal": [0.0],
        "pow": [0.0], "tan": [math.pi / 2 + k * math.pi for k in range(-6, 6)],
    }

    def require_regular(self, a: Value, fn: str):
        """Rejects applying fn to an inexact value close to one of fn's singular points:
        there a rounding difference upstream (which any two correct implementations may
        have) becomes an arbitrarily large one, or a sign flip becomes NaN. Exact values
        (inputs, integers) go in as they are: log(0), 1/-0.0, sqrt(-1) are tested."""
        if a.exact or not a.is_float:
            return
        x = a.t.double()
        x = x[x.isfinite()]
        limit = 8 if a.dtype == torch.float16 else 60
        if fn in ("exp", "exp2", "expm1", "sinh", "cosh") and bool((x.abs() > limit).any()):
            raise _Reject()  # overflow to inf on one side of a rounding difference
        # A last-bit difference in x (relative eps) moves sin/cos/tan by |x| eps and exp by
        # a relative |x| eps: beyond the tolerance once |x| is large for the precision.
        if x.numel() and a.prec in EPS:
            rtol, atol = TOLERANCES[DTYPES[a.prec]]
            big = float(x.abs().max()) * EPS[a.prec]
            if (fn in ("sin", "cos", "tan") and big > atol / 2) or (fn.startswith("exp") and big > rtol / 2):
                raise _Reject()
        points = self.SINGULAR.get(fn)
        if not points or x.numel() == 0:
            return
        scale = max(float(x.abs().max()), 1.0)
        for p in points:
            if bool(((x - p).abs() < 1e-3 * scale).any()):
                raise _Reject()

    def require_finite_scaled(self, a: Value, alpha: float):
        """Rejects add(x, a, alpha) where alpha * a overflows the type it is computed in
        (f32 for f16/bf16): eager's CPU vector loop computes fmadd(a, alpha, x), one
        rounding, so 2 * -3.4e38 + inf is inf, while its DEFAULT-capability build and its
        scalar loop may round the product first (-inf + inf is NaN), as ember does (seed
        362435). No answer is defined there; below the bound the product is finite either
        way and both roundings are within tolerance."""
        if not a.is_float or a.t.numel() == 0 or abs(alpha) <= 1:
            return
        acc = torch.float64 if a.dtype == torch.float64 else torch.float32
        x = a.t.double().abs()
        x = x[x.isfinite()]
        if x.numel() and float(x.max()) * abs(alpha) > torch.finfo(acc).max:
            raise _Reject()

    def require_order_free_product(self, a: Value, dim: int):
        """Rejects a float product whose partial products may overflow or underflow in
        some order but not in another: the result (inf or 0, finite or not) then depends
        on the accumulation order, and eager's vector lanes multiply in their own (f16
        and bf16 products accumulate in their own type in eager)."""
        if not a.is_float or a.t.numel() == 0:
            return
        info = torch.finfo(a.dtype)
        x = a.t.double().abs()
        x = torch.where(x.isfinite(), x, torch.ones_like(x))
        d = dim if a.rank else None
        big = torch.where(x > 1, x, torch.ones_like(x))
        small = torch.where((x < 1) & (x > 0), x, torch.ones_like(x))
        big = big.prod(d) if d is not None else big.prod()
        small = small.prod(d) if d is not None else small.prod()
        if bool((big > info.max / 16).any()) or bool((small < info.tiny * 16).any()):
            raise _Reject()

    def require_order_free_sum(self, a: Value, dims):
        """Rejects a float sum over `dims` (None: all) whose partial sums may overflow in
        some order but not in another: ±3e38 values whose total is finite. Each order
        gives its own answer (the total, +-inf, or NaN where one partial sum reached
        +inf and another -inf; eager's vector lanes and ember's loops sum in different
        orders; seed 70314), so none is defined. No partial sum can exceed the sum of the
        magnitudes, which is safe below the accumulator's range (float32's for f16 and
        bf16, whose sums accumulate in float32). Infinities in the input are fine: they
        give the same inf or NaN in every order."""
        if not a.is_float or a.t.numel() == 0:
            return
        acc = a.dtype if a.dtype in (torch.float32, torch.float64) else torch.float32
        x = a.t.double().abs()
        x = torch.where(x.isfinite(), x, torch.zeros_like(x))
        total = x.sum() if dims is None or a.rank == 0 else x.sum(dims)
        if bool((total > torch.finfo(acc).max / 16).any()):
            raise _Reject()
        # Inexact terms, each of which two correct implementations may round an ulp
        # apart, whose sum cancels below those ulps: the result is rounding noise (GPU
        # seed 127358: the sum of a bf16 normalization, exactly 0, was -0.0703 in ember
        # and in eager on the CPU, 0.0 in eager on CUDA).
        if not a.exact and a.prec in EPS:
            rtol, atol = TOLERANCES[DTYPES[a.prec]]
            v = torch.where(a.t.double().isfinite(), a.t.double(), torch.zeros_like(x))
            exact = (v.sum() if dims is None or a.rank == 0 else v.sum(dims)).abs()
            if bool((total * EPS[a.prec] > atol + rtol * exact).any()):
                raise _Reject()

    def require_order_free_scan(self, a: Value, dim: int, fn: str, to_f32: bool):
        """(GPU campaign) Rejects a cumsum/cumprod whose partial results may overflow
        the result's float type in some order. Eager's CUDA scans accumulate in that
        type (an f16 cumprod rounds every partial product to f16) and in an order of
        their own along the innermost dim (a tree); ember accumulates in f32 or wider,
        as eager's CPU kernels do. Where a partial result overflows in eager's order,
        eager has inf (then NaN after a zero) where ember has the finite prefix, which
        is the one closer to the fp64 reference (seeds 4060, 4255, 5063, 6169, 6181,
        7281, 11464, 12854, 13038: 43456.0 where eager has inf). So, as for sums and
        products: no partial sum beyond 1/16 of the type's range, no partial product
        beyond it, and where the slice holds an infinity (inf times an underflowed 0 is
        NaN) none below 16 times its smallest normal. Integers scanned into f32 must be
        ones f32 holds: int64 extremes cancel differently in each order (seed 8407); and
        their partial results too stay in range (seed 43639: the cumprod of int64 values
        of -9 to 9 into f32 reached -inf in eager's order, then NaN after a 0, where
        ember and the fp64 reference have -0.0). And no prefix may cancel far beyond
        what its precision resolves: where the sum of the prefix's magnitudes times the
        type's eps exceeds 100 times the tolerance at the exact prefix sum, each order
        absorbs the small terms differently (seed 132100: int64 extremes, rounded to
        f32 by rsub, cancelled to 169.8 in ember's order, as in fp64; eager's tree got
        -61.6)."""
        if a.t.numel() == 0 or not (a.is_float or to_f32):
            return
        out = torch.float32 if to_f32 else a.dtype
        info = torch.finfo(out)
        x = a.t.double().abs()
        if not a.is_float and bool((x > 2 ** 24).any()):
            raise _Reject()
        finite = x.isfinite()
        if fn == "cumsum":
            magnitudes = torch.where(finite, x, torch.zeros_like(x))
            if bool((magnitudes.sum(dim) > info.max / 16).any()):
                raise _Reject()
            rtol, atol = TOLERANCES[out]
            exact = torch.where(finite, a.t.double(), torch.zeros_like(x)).cumsum(dim).abs()
            if bool((magnitudes.cumsum(dim) * info.eps > 100 * (atol + rtol * exact)).any()):
                raise _Reject()
            return
        x = torch.where(finite, x, torch.ones_like(x))
        big = torch.where(x > 1, x, torch.ones_like(x)).prod(dim)
        small = torch.where((x < 1) & (x > 0), x, torch.ones_like(x)).prod(dim)
        has_inf = (~finite).any(dim)
        if bool((big > info.max / 16).any()) or bool(((small < info.tiny * 16) & has_inf).any()):
            raise _Reject()

    def require_normal_softmax(self, a: Value, dim: int):
        """Rejects a softmax some of whose results are denormal: its exp(x - max) is
        below the smallest normal float, which ember's exp flushes to 0 on purpose (the
        rule of op_unary_float's exp, docs/reliability.md section 4) where eager returns
        the denormal. A later op can make the difference visible: CPU seed 350191
        (`--dynamic`), softmax(rsqrt(x)) * inf, NaN (0 * inf) where eager has inf. Not
        for an f16 result, which rounds such values to 0 in eager too."""
        x = a.t.double()
        if x.numel() == 0:
            return
        lo = (-745.2, -708.0) if a.dtype == torch.float64 else (-104.7, -87.0)
        mx = x.amax(dim, keepdim=True) if a.rank else x
        z = x - mx
        if bool(((z > lo[0]) & (z < lo[1]) & z.isfinite()).any()):
            raise _Reject()

    def require_pow_in_range(self, x: Value, y: Value):
        """Rejects pow(x, y) of tensors, one inexact, where |y ln|x|| is large: as for exp
        near overflow (require_regular), a rounding difference upstream moves the result
        across the end of the float range, inf on one side and finite on the other. Seed
        41723 (GPU): eager's bf16 cumsum rounds its partial sums to bf16 in a tree order
        of its own, an exponent of -81.0 where ember and the exact sum have -80.5; (1/3)
        to the -81 overflows f32, to the -80.5 it is 2.56e38."""
        if x.exact and y.exact:
            return
        bx, by = torch.broadcast_tensors(x.t.double(), y.t.double())
        t = (by * bx.abs().log()).abs()
        t = t[t.isfinite()]
        limit = 8 if torch.float16 in (x.dtype, y.dtype) else 60
        if t.numel() and bool((t > limit).any()):
            raise _Reject()

    def require_conditioned(self, a: Value, dims):
        """Rejects a normalization (or variance) over `dims` whose result is noise: slices
        that are (nearly) constant, where x - mean is rounding error times 1/sqrt(eps) and
        any two correct implementations differ, or whose squares overflow."""
        x = a.t.double()
        if x.numel() == 0 or not dims:
            return
        x = torch.where(x.isfinite(), x, torch.zeros_like(x))
        spread = x.amax(dims) - x.amin(dims)
        scale = x.abs().amax(dims)
        n = math.prod(a.shape[d] for d in dims)
        if n > 1 and bool(((spread <= 1e-3 * scale) & (scale > 0)).any()):
            raise _Reject()
        if bool((scale > 1e15).any()):
            raise _Reject()


    OPS = [
        ("op_unary_float", 10), ("op_activation", 5), ("op_unary_exact", 8), ("op_unary_discrete", 6),
        ("op_binary", 18), ("op_int_arith", 6), ("op_compare", 5), ("op_logical", 3), ("op_where", 6),
        ("op_mask", 3), ("op_cast", 6), ("op_reduce", 14), ("op_normalize", 6), ("op_scan", 4),
        ("op_view", 14), ("op_shape", 8),
    ]

    def generate(self) -> Program:
        r = self.r
        for k in range(r.choice([1, 1, 2, 2, 3])):
            # A program of the GPU campaign starts from an input of its float dtype.
            self.new_input(self.random_shape(), self.main if self.main and k == 0 else self.random_dtype())
        n_ops = r.randint(1, 8)
        names, weights = zip(*self.OPS)
        done = 0
        for _ in range(n_ops * 12):
            if done == n_ops:
                break
            op = r.choices(names, weights=weights)[0]
            try:
                getattr(self, op)()
                done += 1
            except _Reject:
                continue
        computed = [v for v in self.pool if v.name.startswith("v")]
        if not computed:
            a = self.pool[0]
            self.emit(f"torch.add({a.name}, 1)" if not a.is_bool else f"torch.logical_not({a.name})", a.exact)
            computed = [self.pool[-1]]
        # Every value no later op reads is an output (so no op is dead code), and a few others.
        used = set()
        for ln in self.lines:
            used.update(re.findall(r"\b[av]\d+\b", ln.split("=", 1)[1]))
        outs = [v.name for v in computed if v.name not in used or r.random() < 0.15][-5:]
        if computed[-1].name not in outs:
            outs.append(computed[-1].name)
        prog = Program(self.seed, self.inputs, self.lines, outs)
        prog.flags = {v.name: [v.exact, v.zsign, v.welford, v.prec] for v in self.pool}
        prog.dtype = self.main
        return prog


def generate(seed: int, dtypes: tuple | None = None) -> Program:
    return Generator(seed, dtypes).generate()

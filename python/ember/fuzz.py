"""Differential fuzzing: random graphs compiled by ember, compared with eager PyTorch.

    python -m ember.fuzz --seeds 0:20000 --jobs 16 --out fuzz-summary.json
    python -m ember.fuzz --seeds 1234 --show          # one seed: its program and result
    python -m ember.fuzz --seeds 0:500 --dynamic      # through Dynamo, every size symbolic

A seed determines a program: a few inputs (random shapes, dtypes, strides, with NaN,
+-inf and -0.0 mixed in) and a straight-line function of 1 to 8 ops drawn from the op
families ember lowers (pointwise with broadcasting, views, reductions, softmax and
layer norm, scans, masks, casts, cat/pad/gather). Every op is run eagerly while the
program is generated, so each program is valid eager code; its result shapes and
dtypes steer the next op.

Each program goes through the path Dynamo would take, without Dynamo's bytecode
tracing (which would cost more than the rest): torch.fx.symbolic_trace gives the
torch-level graph, and ember's AOTAutograd backend (`make_backend`) decomposes it,
imports it and compiles it, with the eager fallback off so that any ember error is
reported. The outputs are compared with eager:

- values the generator tracks as *exact* (integers, bools, views and selections of
  inputs, max/min, casts) must be equal, NaN where eager has NaN;
- other floats must be close (per-dtype tolerances), or else pass BRIEF.md's rule:
  RMSE(ember, fp64 reference) <= 3 RMSE(eager, fp64 reference) + atol/10, with NaN
  and infinities in the same places. The fp64 reference runs the same program with
  every float dtype replaced by float64.

Ops whose result is discontinuous in their float input (floor, comparisons, casts to
int, argmax, remainder, ...) are applied only to exact values: eager and a correct
compiler may differ in the last bit of a sum, and floor() would turn that into 1.

A failure is minimized (outputs, then ops bypassed one at a time) and written as a
self-contained Python repro. The campaign prints progress and writes a JSON summary.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import re
import sys
import tempfile
import time
import traceback

import torch

from .tools.doctor import cpu_name

DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
    "i64": torch.int64, "i32": torch.int32, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_KEYS = {v: k for k, v in DTYPES.items()}
FLOAT_KEYS = ("f32", "f64", "f16", "bf16")
INT_KEYS = ("i64", "i32", "i16", "i8", "u8")

# Machine epsilon per float dtype.
EPS = {"f64": 2.2e-16, "f32": 1.2e-7, "f16": 9.8e-4, "bf16": 7.8e-3}
# From most to least precise.
LOOSENESS = ["f64", "f32", "f16", "bf16"]
# Tolerances for inexact float outputs: (rtol, atol).
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
}


# ---------------------------------------------------------------------------------------
# Programs


@dataclasses.dataclass
class InputSpec:
    """How to build one input: its logical shape and dtype, its memory layout, its values."""

    shape: list
    dtype: str
    layout: str = "contiguous"  # contiguous | permuted | sliced | expanded | offset
    layout_arg: list = dataclasses.field(default_factory=list)
    values: str = "normal"      # normal | specials | ints | wide_ints | bools | index
    scale: float = 1.0
    index_bound: int = 0        # for values == "index": every element in [0, index_bound)


@dataclasses.dataclass
class Program:
    seed: int
    inputs: list            # [InputSpec]
    lines: list             # python statements, each assigning one or more names
    outputs: list           # names returned

    def source(self) -> str:
        args = ", ".join(f"a{i}" for i in range(len(self.inputs)))
        body = "".join(f"    {ln}\n" for ln in self.lines)
        return f"def f({args}):\n{body}    return ({', '.join(self.outputs)},)\n"

    def to_json(self) -> dict:
        return {"seed": self.seed, "inputs": [dataclasses.asdict(s) for s in self.inputs],
                "lines": self.lines, "outputs": self.outputs}

    @staticmethod
    def from_json(d: dict) -> "Program":
        return Program(d["seed"], [InputSpec(**s) for s in d["inputs"]], list(d["lines"]), list(d["outputs"]))


def _namespace(reference: bool = False) -> dict:
    """Globals the program's source runs with. In the reference namespace every float
    dtype is float64, so the same source computes an fp64 reference."""
    ns = {"torch": torch, "F": torch.nn.functional, "inf": math.inf, "nan": math.nan}
    for key, dt in DTYPES.items():
        ns[f"D_{key}"] = torch.float64 if (reference and dt.is_floating_point) else dt
    return ns


def compile_source(prog: Program, reference: bool = False):
    ns = _namespace(reference)
    exec(compile(prog.source(), f"<fuzz seed {prog.seed}>", "exec"), ns)
    return ns["f"]


def make_input(spec: InputSpec, gen: torch.Generator) -> torch.Tensor:
    dt = DTYPES[spec.dtype]
    shape = list(spec.shape)
    # The storage shape before the layout transformation.
    if spec.layout == "permuted":
        perm = spec.layout_arg
        base_shape = [shape[p] for p in perm]
    elif spec.layout == "sliced":
        base_shape = [s * st + 1 for s, st in zip(shape, spec.layout_arg)]
    elif spec.layout == "expanded":
        base_shape = [1 if d in spec.layout_arg else s for d, s in enumerate(shape)]
    elif spec.layout == "offset":
        base_shape = [max(1, math.prod(shape)) + spec.layout_arg[0]]
    else:
        base_shape = shape
    n = math.prod(base_shape)
    if spec.values == "index":
        flat = torch.randint(0, max(spec.index_bound, 1), (n,), generator=gen)
    elif spec.values == "bools":
        flat = torch.randint(0, 2, (n,), generator=gen).bool()
    elif spec.values == "ints":
        flat = torch.randint(-9, 10, (n,), generator=gen)
    elif spec.values == "wide_ints":
        # Values near the type's limits, so that arithmetic overflows (and wraps).
        info = torch.iinfo(dt) if dt != torch.bool else None
        lo, hi = (info.min, info.max) if info else (0, 1)
        flat = torch.randint(-9, 10, (n,), generator=gen)
        pick = torch.randint(0, 4, (n,), generator=gen)
        flat = torch.where(pick == 0, torch.full_like(flat, hi) - flat.abs(), flat)
        flat = torch.where(pick == 1, torch.full_like(flat, lo) + flat.abs(), flat)
    else:
        flat = torch.randn(n, generator=gen, dtype=torch.float64) * spec.scale
        if spec.values == "specials":
            specials = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0, 1.0, -1.0], dtype=torch.float64)
            pick = torch.randint(0, 3 * len(specials), (n,), generator=gen)
            hit = pick < len(specials)
            flat = torch.where(hit, specials[pick.clamp(max=len(specials) - 1)], flat)
        if not dt.is_floating_point:
            flat = flat.round().clamp(-100, 100)
    base = flat.to(dt).reshape(base_shape) if spec.layout != "offset" else flat.to(dt)
    if spec.layout == "permuted":
        inverse = [spec.layout_arg.index(d) for d in range(len(shape))]
        return base.permute(inverse)
    if spec.layout == "sliced":
        return base[tuple(slice(1, None, st) for st in spec.layout_arg)][tuple(slice(0, s) for s in shape)]
    if spec.layout == "expanded":
        return base.expand(shape)
    if spec.layout == "offset":
        k = spec.layout_arg[0]
        return base[k:k + math.prod(shape)].view(shape)
    return base


def make_inputs(prog: Program) -> list:
    gen = torch.Generator().manual_seed(prog.seed * 7919 + 17)
    return [make_input(s, gen) for s in prog.inputs]


# ---------------------------------------------------------------------------------------
# Generation


@dataclasses.dataclass
class Value:
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


class Generator:
    SIZES = [1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 33, 64]

    def __init__(self, seed: int):
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
                self.emit(f"torch.{fn}({a.name}, {_fmt(s)})", False)
            return
        b = self.partner(a)
        exact = fn in ("maximum", "minimum") and a.exact and b.exact
        if fn == "add_alpha":
            self.emit(f"torch.add({a.name}, {b.name}, alpha={r.choice([2, -1, 0.5])})", False)
        else:
            x, y = (a, b) if r.random() < 0.8 else (b, a)
            if fn in ("div", "true_divide", "pow"):
                self.require_regular(y if fn != "pow" else x, "reciprocal")
            if fn == "pow" and not y.exact and bool((x.t < 0).any()):
                # A negative base to a non-integer power is NaN, to an integer one is not:
                # discontinuous in an inexact exponent (ember's exp flushes results below
                # 1e-38 to 0, so softplus(-100) is 0 where eager has a denormal).
                raise _Reject()
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
            dt = r.choice(["", ", dtype=D_f64", ", dtype=D_f32"]) if r.random() < 0.15 else ""
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
            self.emit(f"torch.{r.choice(['softmax', 'log_softmax'])}({a.name}, {d}{dt})", False)
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

    def op_scan(self):
        r = self.r
        a = self.pick(lambda v: v.rank >= 1)
        fn = r.choice(["cumsum", "cumsum", "cumprod"])
        dt = ", dtype=D_f64" if r.random() < 0.1 else ""
        self.emit(f"torch.{fn}({a.name}, {self.dim(a)}{dt})", a.exact and not a.is_float and not dt)

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
            self.emit(f"{a.name} * torch.arange({n}, dtype={dt})", a.exact and not a.is_float and dt != "D_f32")
        else:
            raise _Reject()

    OPS = [
        ("op_unary_float", 10), ("op_activation", 5), ("op_unary_exact", 8), ("op_unary_discrete", 6),
        ("op_binary", 18), ("op_int_arith", 6), ("op_compare", 5), ("op_logical", 3), ("op_where", 6),
        ("op_mask", 3), ("op_cast", 6), ("op_reduce", 14), ("op_normalize", 6), ("op_scan", 4),
        ("op_view", 14), ("op_shape", 8),
    ]

    def generate(self) -> Program:
        r = self.r
        for _ in range(r.choice([1, 1, 2, 2, 3])):
            self.new_input(self.random_shape(), self.random_dtype())
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
        return prog


def generate(seed: int) -> Program:
    return Generator(seed).generate()


# ---------------------------------------------------------------------------------------
# Checking


@dataclasses.dataclass
class Result:
    status: str   # ok | mismatch | error | eager_error
    detail: str = ""
    kernels: int = 0
    externs: int = 0


def _compile_with_ember(fn, inputs, cache_dir: str):
    import torch.fx

    from .backend import make_backend

    # aot_cache off: every program is compiled (and torch's cache directory stays clean).
    # emulate_precision_casts: values the generator tracks as exact assume eager's rounding
    # of every f16/bf16 result.
    backend = make_backend(None, {"fallback_on_error": False, "cache_dir": cache_dir, "aot_cache": False,
                                  "emulate_precision_casts": True})
    if os.environ.get("EMBER_FUZZ_DYNAMIC") == "1":
        # --dynamic: through Dynamo with every size symbolic, so that ember compiles
        # size expressions (docs/dynamic_shapes.md) and runs them at these sizes.
        torch._dynamo.reset()
        return torch.compile(fn, backend=backend, dynamic=True)
    gm = torch.fx.symbolic_trace(fn)
    return backend(gm, inputs)


def _compare(name, actual, expected, reference, exact, zsign=True, welford=False, prec="") -> str | None:
    """None if `actual` matches `expected`, else what differs."""
    if not isinstance(actual, torch.Tensor):
        return f"{name}: got {type(actual).__name__}, expected a tensor"
    if actual.dtype != expected.dtype:
        return f"{name}: dtype {actual.dtype} != {expected.dtype}"
    if actual.shape != expected.shape:
        return f"{name}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    if actual.numel() == 0:
        return None
    if not expected.dtype.is_floating_point:
        if torch.equal(actual, expected):
            return None
        bad = (actual != expected).nonzero()[0].tolist()
        return f"{name}: {int((actual != expected).sum())} elements differ, first at {bad}: " \
               f"{actual[tuple(bad)].item()} != {expected[tuple(bad)].item()}"
    a, e = actual.double(), expected.double()
    if welford:
        e = torch.where(e.isinf() & a.isnan(), a, e)
    if not torch.equal(a.isnan(), e.isnan()):
        where = (a.isnan() != e.isnan()).nonzero()[0].tolist()
        return f"{name}: NaN positions differ, first at {where}: {a[tuple(where)].item()} vs eager " \
               f"{e[tuple(where)].item()}"
    if exact:
        # Equal values, and equal signs (-0.0 is not 0.0 here; NaN's sign is not compared).
        differ = a.nan_to_num() != e.nan_to_num()
        if zsign:
            differ |= (a.signbit() != e.signbit()) & ~e.isnan()
        if not differ.any():
            return None
        bad = differ.nonzero()[0].tolist()
        return f"{name}: exact value differs at {bad}: {a[tuple(bad)].item()} != {e[tuple(bad)].item()}"
    rtol, atol = TOLERANCES[DTYPES[prec] if prec in FLOAT_KEYS else expected.dtype]
    rtol, atol = max(rtol, TOLERANCES[expected.dtype][0]), max(atol, TOLERANCES[expected.dtype][1])
    finite = e.isfinite()
    if not zsign:
        a, e = torch.where(finite, a, a.abs()), torch.where(finite, e, e.abs())
    if not torch.equal(a[~finite].nan_to_num(), e[~finite].nan_to_num()):
        bad = ((a != e) & ~finite & ~e.isnan()).nonzero()[0].tolist()
        return f"{name}: infinity differs at {bad}: {a[tuple(bad)].item()} vs eager {e[tuple(bad)].item()}"
    close = (a - e).abs() <= atol + rtol * e.abs()
    if bool(close[finite].all()):
        return None
    # BRIEF.md's rule against an fp64 reference.
    if reference is not None and isinstance(reference, torch.Tensor) and reference.shape == e.shape:
        ref = reference.double()
        mask = finite & ref.isfinite()
        if bool(a[mask].isfinite().all()):
            def rmse(x):
                return (x[mask] - ref[mask]).square().mean().sqrt().item() if mask.any() else 0.0
            if rmse(a) <= 3 * rmse(e) + atol / 10:
                return None
    err = ((a - e).abs() - rtol * e.abs()).masked_fill(~finite, 0)
    bad = err.flatten().argmax().item()
    return f"{name}: max error at flat index {bad}: {a.flatten()[bad].item()} vs eager {e.flatten()[bad].item()} " \
           f"(rtol {rtol}, atol {atol})"


def check(prog: Program, cache_dir: str, flags: dict | None = None) -> Result:
    """Compiles `prog` with ember and compares its outputs with eager. flags: per value
    name, [exact, zsign] (see Value); the generator's, unless given."""
    flags = flags if flags is not None else getattr(prog, "flags", None) or {}
    fn = compile_source(prog)
    try:
        expected = fn(*make_inputs(prog))
    except Exception as e:
        return Result("eager_error", f"{type(e).__name__}: {e}")
    from . import backend

    before = len(backend._summaries)
    try:
        compiled = _compile_with_ember(fn, make_inputs(prog), cache_dir)
        actual = compiled(*make_inputs(prog))
    except Exception as e:
        return Result("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}")
    kernels = sum(s["kernels"] for s in backend._summaries[before:])
    reference = None
    for i, (a, e) in enumerate(zip(actual, expected)):
        given = list(flags.get(prog.outputs[i], ()))
        exact_i, zsign_i, welford_i, prec_i = given + [False, True, False, ""][len(given):]
        problem = _compare(f"output {i} ({prog.outputs[i]})", a, e, None, exact_i, zsign_i, welford_i, prec_i)
        if problem and not exact_i and e.dtype.is_floating_point:
            if reference is None:
                try:
                    ref_inputs = [x.double() if x.dtype.is_floating_point else x for x in make_inputs(prog)]
                    # Float results of integer inputs (erf of an int tensor) take the
                    # default dtype: f64 here, or the reference would be f32 (seed 22046).
                    previous = torch.get_default_dtype()
                    torch.set_default_dtype(torch.float64)
                    try:
                        reference = compile_source(prog, reference=True)(*ref_inputs)
                    finally:
                        torch.set_default_dtype(previous)
                except Exception:
                    reference = ()
            r = reference[i] if i < len(reference) else None
            problem = _compare(f"output {i} ({prog.outputs[i]})", a, e, r, exact_i, zsign_i, welford_i, prec_i)
        if problem:
            return Result("mismatch", problem, kernels)
    if len(actual) != len(expected):
        return Result("mismatch", f"{len(actual)} outputs, expected {len(expected)}", kernels)
    return Result("ok", "", kernels)


# ---------------------------------------------------------------------------------------
# Minimization


def _uses(line: str, name: str) -> bool:
    import re

    return re.search(rf"\b{name}\b", line.split("=", 1)[1]) is not None


def _defined(line: str) -> list:
    return [n.strip() for n in line.split("=", 1)[0].split(",")]


def _dead_code(prog: Program) -> Program:
    live = set(prog.outputs)
    kept = []
    for ln in reversed(prog.lines):
        if any(n in live for n in _defined(ln)):
            kept.append(ln)
            rhs = ln.split("=", 1)[1]
            import re

            live.update(re.findall(r"\b[av]\d+\b", rhs))
    used_inputs = sorted({int(n[1:]) for n in live if n.startswith("a")})
    return Program(prog.seed, prog.inputs, list(reversed(kept)), list(prog.outputs))


def minimize(prog: Program, cache_dir: str, still_fails) -> Program:
    """A smaller program for which still_fails(program) holds."""
    import re

    best = _dead_code(prog)
    # One output is enough.
    for out in best.outputs:
        cand = _dead_code(Program(best.seed, best.inputs, best.lines, [out]))
        if still_fails(cand):
            best = cand
            break
    # Bypass ops: replace a value by one of its operands everywhere after it.
    changed = True
    while changed:
        changed = False
        for i, ln in enumerate(best.lines):
            names = _defined(ln)
            operands = re.findall(r"\b[av]\d+\b", ln.split("=", 1)[1])
            for op in dict.fromkeys(operands):
                new_lines = best.lines[:i] + [
                    re.sub(rf"\b{names[0]}\b", op, later) for later in best.lines[i + 1:]]
                outs = [op if o == names[0] else o for o in best.outputs]
                if any(o in names[1:] for o in outs):
                    continue
                cand = _dead_code(Program(best.seed, best.inputs, new_lines, outs))
                if cand.lines and len(cand.lines) < len(best.lines) and still_fails(cand):
                    best = cand
                    changed = True
                    break
            if changed:
                break
    return best


def repro_text(prog: Program, result: Result, flags: dict | None = None) -> str:
    return (
        f"# ember fuzz failure, seed {prog.seed}: {result.status}\n"
        f"# {result.detail.splitlines()[0] if result.detail else ''}\n"
        f"# rerun: python -m ember.fuzz --repro <this file>\n"
        f"PROGRAM = {json.dumps(prog.to_json(), indent=1)}\n"
        f"FLAGS = {json.dumps(flags or {})}\n\n"
        f"{prog.source()}"
    )


# ---------------------------------------------------------------------------------------
# Campaign


def _worker_init(threads: int):
    torch.set_num_threads(threads)
    import warnings

    warnings.filterwarnings("ignore")


def run_seed(seed: int, cache_dir: str, minimize_failures: bool = True) -> dict:
    t0 = time.perf_counter()
    try:
        prog = generate(seed)
    except Exception as e:  # a generator bug, not an ember one
        return {"seed": seed, "status": "generator_error", "detail": f"{type(e).__name__}: {e}",
                "seconds": time.perf_counter() - t0}
    res = check(prog, cache_dir)
    out = {"seed": seed, "status": res.status, "ops": len(prog.lines), "kernels": res.kernels,
           "seconds": time.perf_counter() - t0}
    if res.status in ("mismatch", "error"):
        out["detail"] = res.detail
        out["program"] = prog.to_json()
        out["flags"] = prog.flags
        if minimize_failures:
            flags = prog.flags

            def still_fails(p):
                return check(p, cache_dir, flags).status == res.status

            small = minimize(prog, cache_dir, still_fails)
            small_res = check(small, cache_dir, flags)
            out["minimized"] = small.to_json()
            out["minimized_source"] = small.source()
            out["minimized_detail"] = small_res.detail
    return out


FAILING = ("mismatch", "error", "crash", "timeout", "generator_error")


def _run_worker(seeds, cache_dir: str, threads: int, minimize_failures: bool, results_path: str):
    """Worker process body: one JSON line per seed, appended as each finishes."""
    _worker_init(threads)
    with open(results_path, "a") as f:
        for s in seeds:
            f.write(json.dumps(run_seed(s, cache_dir, minimize_failures)) + "\n")
            f.flush()


def _run_chunk(seeds, cache_dir: str, threads: int, minimize_failures: bool, seconds_per_seed: float) -> list:
    """Runs seeds in a child process, so that a crash (or a hang) in ember costs one seed,
    not the campaign: the seed being run when the child dies is recorded as crash (timeout),
    and a new child takes the rest."""
    import subprocess

    results, remaining = [], list(seeds)
    fd, path = tempfile.mkstemp(prefix="ember-fuzz-", suffix=".jsonl")
    os.close(fd)
    try:
        while remaining:
            cmd = [sys.executable, "-m", "ember.fuzz", "--worker", ",".join(map(str, remaining)),
                   "--cache-dir", cache_dir, "--threads", str(threads), "--worker-out", path]
            if not minimize_failures:
                cmd.append("--no-minimize")
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            status = None
            try:
                _, err = proc.communicate(timeout=60 + seconds_per_seed * len(remaining))
                if proc.returncode != 0:
                    status = ("crash", f"worker exited with status {proc.returncode}: {err[-2000:]}")
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                status = ("timeout", f"no result within {seconds_per_seed:.0f} s per seed")
            with open(path) as f:
                finished = [json.loads(ln) for ln in f if ln.strip()]
            open(path, "w").close()
            results.extend(finished)
            done = {r["seed"] for r in finished}
            remaining = [x for x in remaining if x not in done]
            if status and remaining:
                bad = remaining.pop(0)
                # Not regenerated here: whatever killed the child may kill this process
                # too. `--seeds N --show` reproduces it.
                results.append({"seed": bad, "status": status[0], "detail": status[1]})
            elif status is None and remaining:
                raise RuntimeError(f"fuzz worker returned without results for seeds {remaining[:5]}")
    finally:
        os.unlink(path)
    return results


def parse_seeds(text: str) -> range:
    if ":" in text:
        a, b = text.split(":")
        return range(int(a), int(b))
    return range(int(text), int(text) + 1)


def campaign(seeds, jobs: int = 1, threads: int = 1, cache_dir: str | None = None, out_path: str | None = None,
             minimize_failures: bool = True, progress=True, chunk: int = 50, seconds_per_seed: float = 120) -> dict:
    """Runs every seed in `jobs` child processes; returns (and writes to out_path) a summary."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    own_cache = cache_dir is None
    if own_cache:
        tmp = tempfile.mkdtemp(prefix="ember-fuzz-")
        cache_dir = os.path.join(tmp, "cache")
    seeds = list(seeds)
    chunks = [seeds[i:i + chunk] for i in range(0, len(seeds), chunk)]
    t0 = time.perf_counter()
    counts: dict[str, int] = {}
    failures = []
    done = 0
    ops = kernels = 0
    last_print = 0.0

    def account(results):
        nonlocal done, ops, kernels, last_print
        for r in results:
            done += 1
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            ops += r.get("ops", 0)
            kernels += r.get("kernels", 0)
            if r["status"] in FAILING:
                failures.append(r)
                if progress:
                    text = r.get("minimized_detail") or r.get("detail", "")
                    print(f"FAIL seed {r['seed']}: {r['status']}: {(text.splitlines() or [''])[0]}", flush=True)
        now = time.perf_counter()
        if out_path and now - last_print > 10:  # a partial summary, in case the run is cut short
            with open(out_path, "w") as f:
                json.dump(_summary(seeds, counts, failures, ops, kernels, t0, jobs, threads, done), f, indent=1)
        if progress and (now - last_print > 10 or done == len(seeds)):
            last_print = now
            el = now - t0
            print(f"[{done}/{len(seeds)}] {el:.0f}s {done / max(el, 1e-9):.1f} graphs/s  " +
                  " ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)

    with ThreadPoolExecutor(max(jobs, 1)) as pool:
        futures = [pool.submit(_run_chunk, c, cache_dir, threads, minimize_failures, seconds_per_seed)
                   for c in chunks]
        for fut in as_completed(futures):
            account(fut.result())
    summary = _summary(seeds, counts, failures, ops, kernels, t0, jobs, threads, done)
    if out_path:
        with open(out_path, "w") as f:
            json.dump(summary, f, indent=1)
    if own_cache:
        import shutil

        shutil.rmtree(os.path.dirname(cache_dir), ignore_errors=True)
    return summary


def _summary(seeds, counts, failures, ops, kernels, t0, jobs, threads, done) -> dict:
    elapsed = time.perf_counter() - t0
    return {
        "command": "python -m ember.fuzz " + " ".join(sys.argv[1:]) if sys.argv and "fuzz" in sys.argv[0] else "",
        "seeds": f"{seeds[0]}:{seeds[-1] + 1}" if seeds else "",
        "graphs": len(seeds),
        "counts": counts,
        "mismatches": counts.get("mismatch", 0),
        "failures_total": sum(counts.get(k, 0) for k in FAILING),
        "ops": ops,
        "kernels": kernels,
        "seconds": round(elapsed, 1),
        "jobs": jobs,
        "threads_per_job": threads,
        "machine": f"{os.cpu_count()} CPUs, {cpu_name()}",
        "torch": torch.__version__,
        "failures": sorted(failures, key=lambda r: r["seed"]),
        "finished": done == len(seeds),
        "graphs_done": done,
    }




def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m ember.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0:200", help="a seed or a range a:b (default 0:200)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads per worker")
    p.add_argument("--out", help="write the JSON summary here")
    p.add_argument("--cache-dir", help="kernel cache (default: a fresh temporary directory)")
    p.add_argument("--no-minimize", action="store_true", help="report failures without minimizing them")
    p.add_argument("--show", action="store_true", help="print each seed's program and result")
    p.add_argument("--dynamic", action="store_true",
                   help="compile through Dynamo with dynamic=True (symbolic sizes) instead of symbolic_trace")
    p.add_argument("--rerun", metavar="SUMMARY_JSON",
                   help="rerun the failures recorded in a summary (their minimized programs where there are)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.dynamic:
        os.environ["EMBER_FUZZ_DYNAMIC"] = "1"  # the worker processes inherit it

    if args.worker:
        _run_worker([int(x) for x in args.worker.split(",")], args.cache_dir, args.threads,
                    not args.no_minimize, args.worker_out)
        return 0
    if args.rerun:
        with open(args.rerun) as f:
            failures = json.load(f)["failures"]
        cache = args.cache_dir or os.path.join(tempfile.mkdtemp(prefix="ember-fuzz-"), "cache")
        bad = 0
        for fail in failures:
            prog = Program.from_json(fail.get("minimized") or fail["program"])
            res = check(prog, cache, fail.get("flags"))
            bad += res.status != "ok"
            print(f"seed {fail['seed']}: {res.status} {res.detail.splitlines()[0] if res.detail else ''}")
        return 1 if bad else 0
    if args.show:
        cache = args.cache_dir or os.path.join(tempfile.mkdtemp(prefix="ember-fuzz-"), "cache")
        for s in parse_seeds(args.seeds):
            prog = generate(s)
            print(f"# seed {s}")
            print(prog.source())
            res = check(prog, cache)
            print(f"# -> {res.status} {res.detail}\n")
        return 0
    summary = campaign(parse_seeds(args.seeds), args.jobs, args.threads, args.cache_dir, args.out,
                       not args.no_minimize)
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}, indent=1))
    return 1 if summary["failures_total"] else 0


if __name__ == "__main__":
    sys.exit(main())

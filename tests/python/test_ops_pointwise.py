"""Pointwise ops, end to end: compiled by the backend under test, compared with eager."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing import make_tensor

from helpers import check_compiled

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64]
SHAPE = (7, 13)

# Backends may compute float16/bfloat16 in float32 and round once, where eager rounds after
# every op; these tolerances allow for that (check_compiled adds the fp64-RMSE rule on top).
TOL = {
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}


def tol(dtype):
    return TOL.get(dtype, {})


def rand(shape, dtype, low=-3.0, high=3.0):
    if dtype == torch.bool:
        return make_tensor(shape, dtype=dtype, device="cpu")
    return make_tensor(shape, dtype=dtype, device="cpu", low=low, high=high)


def with_specials(x):
    """x with NaN, +inf and -inf written into its first elements."""
    x = x.clone()
    flat = x.view(-1)
    flat[0], flat[3], flat[5] = float("nan"), float("inf"), float("-inf")
    return x


# (name, fn, low, high): the input range keeps each op inside its domain.
UNARY = [
    ("neg", torch.neg, -3, 3),
    ("abs", torch.abs, -3, 3),
    ("exp", torch.exp, -5, 5),
    ("log", torch.log, 0.05, 10),
    ("log1p", torch.log1p, -0.9, 10),
    ("expm1", torch.expm1, -3, 3),
    ("sqrt", torch.sqrt, 0, 10),
    ("rsqrt", torch.rsqrt, 0.1, 10),
    ("sin", torch.sin, -6, 6),
    ("cos", torch.cos, -6, 6),
    ("tanh", torch.tanh, -4, 4),
    ("erf", torch.erf, -3, 3),
    ("sigmoid", torch.sigmoid, -8, 8),
    ("relu", torch.relu, -3, 3),
    ("gelu", F.gelu, -4, 4),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), -4, 4),
    ("silu", F.silu, -4, 4),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.1), -3, 3),
    ("elu", F.elu, -3, 3),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 1.5), -3, 3),
    ("softplus", F.softplus, -30, 30),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=5.0), -5, 5),
    ("sign", torch.sign, -3, 3),
    ("floor", torch.floor, -5, 5),
    ("ceil", torch.ceil, -5, 5),
    ("round", torch.round, -5, 5),
    ("trunc", torch.trunc, -5, 5),
    ("reciprocal", torch.reciprocal, 0.25, 4),
    ("square", torch.square, -3, 3),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name,fn,low,high", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float(name, fn, low, high, dtype):
    check_compiled(fn, rand(SHAPE, dtype, low, high), **tol(dtype))


def test_round_half_to_even():
    x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997])
    check_compiled(torch.round, x)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name,fn", [
    ("exp", torch.exp), ("log", torch.log), ("sqrt", torch.sqrt), ("tanh", torch.tanh),
    ("sigmoid", torch.sigmoid), ("relu", torch.relu), ("abs", torch.abs), ("floor", torch.floor),
    ("sign", torch.sign), ("reciprocal", torch.reciprocal),
], ids=lambda v: v if isinstance(v, str) else "")
def test_unary_special_values(name, fn, dtype):
    # NaN and infinities must come out where eager puts them.
    check_compiled(fn, with_specials(rand(SHAPE, dtype, 0.1, 3)), **tol(dtype))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_special_values(approximate):
    # NaN and huge magnitudes match eager. Infinities are left out on purpose: eager's
    # vectorized erf turns gelu(+inf) into NaN, while ember returns the limit, +inf.
    x = torch.tensor([float("nan"), -1e30, 1e30, -80.0, 80.0, 0.0, -0.0, 1.0])
    check_compiled(lambda t: F.gelu(t, approximate=approximate), x)


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("fn", [torch.neg, torch.abs, torch.sign, torch.square],
                         ids=lambda f: f.__name__)
def test_unary_int(fn, dtype):
    check_compiled(fn, rand(SHAPE, dtype, -50, 50))


ARITH = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
}


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("op", list(ARITH), ids=str)
def test_arith_tensor_tensor(op, dtype):
    fn = ARITH[op]
    x = rand(SHAPE, dtype, -20, 20)
    y = rand(SHAPE, dtype, 1, 20) * torch.where(torch.rand(SHAPE) < 0.5, -1, 1).to(dtype)
    # Integer true division promotes to the default float dtype.
    check_compiled(fn, x, y, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("scalar", [3, -2.5], ids=["int", "float"])
@pytest.mark.parametrize("op", list(ARITH), ids=str)
def test_arith_tensor_scalar(op, scalar, dtype):
    fn = ARITH[op]
    # A float scalar makes an int tensor's result float; an int scalar keeps the tensor's dtype.
    check_compiled(lambda x: fn(x, scalar), rand(SHAPE, dtype, -20, 20), **tol(dtype))


@pytest.mark.parametrize("op", list(ARITH), ids=str)
def test_arith_scalar_tensor(op):
    fn = ARITH[op]
    check_compiled(lambda x: fn(2.0, x), rand(SHAPE, torch.float32, 0.5, 4))


@pytest.mark.parametrize("rounding_mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64], ids=str)
def test_div_rounding_mode(rounding_mode, dtype):
    x = rand(SHAPE, dtype, -20, 20)
    y = torch.tensor([3, -3, 7, -2, 5, -7, 4], dtype=dtype).view(7, 1).expand(SHAPE).contiguous()
    check_compiled(lambda a, b: torch.div(a, b, rounding_mode=rounding_mode), x, y)


FLOOR_OPS = {
    "floor_divide": torch.floor_divide,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("op", list(FLOOR_OPS), ids=str)
def test_floor_ops_negative_operands(op, dtype):
    fn = FLOOR_OPS[op]
    # Every sign combination, including exact multiples, where floor and trunc disagree.
    a = torch.tensor([7, -7, 7, -7, 6, -6, 6, -6, 0, 1, -1, 13], dtype=dtype)
    b = torch.tensor([3, 3, -3, -3, 3, 3, -3, -3, 5, -5, 5, 4], dtype=dtype)
    check_compiled(fn, a, b)
    check_compiled(lambda x: fn(x, -3), a)
    check_compiled(lambda x: fn(x, 4), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_floor_ops_fractional(dtype):
    a = rand((127,), dtype, -10, 10)
    b = rand((127,), dtype, 0.5, 3) * torch.where(torch.rand(127) < 0.5, -1, 1).to(dtype)
    check_compiled(lambda x, y: (torch.floor_divide(x, y), torch.remainder(x, y), torch.fmod(x, y)), a, b)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name,fn", [
    ("pow2", lambda x: x ** 2),
    ("pow3", lambda x: torch.pow(x, 3)),
    ("pow_half", lambda x: x.abs() ** 0.5),
    ("pow_neg1", lambda x: (x.abs() + 0.5) ** -1),
    ("pow_frac", lambda x: (x.abs() + 0.1) ** 1.7),
    ("scalar_base", lambda x: 2 ** x),
    ("tensor_exp", lambda x: torch.pow(x.abs() + 0.1, x)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_pow(name, fn, dtype):
    check_compiled(fn, rand(SHAPE, dtype, -3, 3), **tol(dtype))


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_pow_int(dtype):
    x = rand(SHAPE, dtype, -6, 6)
    e = rand(SHAPE, dtype, 0, 5)
    check_compiled(lambda a, b: (a ** 2, a ** 3, torch.pow(a, b), 2 ** e), x, e)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name,fn", [
    ("clamp", lambda x: torch.clamp(x, -0.5, 1.25)),
    ("clamp_min", lambda x: torch.clamp_min(x, 0.3)),
    ("clamp_max", lambda x: torch.clamp_max(x, -0.3)),
    ("clamp_min_only", lambda x: x.clamp(min=0)),
    ("clamp_max_only", lambda x: x.clamp(max=1)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_clamp(name, fn, dtype):
    # clamp propagates NaN.
    check_compiled(fn, with_specials(rand(SHAPE, dtype)), **tol(dtype))


def test_clamp_tensor_bounds():
    x, lo = rand(SHAPE, torch.float32), rand((1, 13), torch.float32, -2, 0)
    check_compiled(lambda a, b: torch.clamp(a, min=b, max=b + 1), x, lo)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_clamp_int(dtype):
    check_compiled(lambda x: (x.clamp(-5, 7), x.clamp_min(2), x.clamp_max(-1)), rand(SHAPE, dtype, -20, 20))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_minimum_maximum_nan(dtype):
    x = with_specials(rand(SHAPE, dtype))
    y = rand(SHAPE, dtype)
    y.view(-1)[7] = float("nan")
    check_compiled(lambda a, b: (torch.minimum(a, b), torch.maximum(a, b),
                                 torch.minimum(b, a), torch.maximum(b, a)), x, y)


@pytest.mark.parametrize("dtype", INTS + [torch.bool], ids=str)
def test_minimum_maximum_int(dtype):
    x, y = rand(SHAPE, dtype, -9, 9), rand(SHAPE, dtype, -9, 9)
    check_compiled(lambda a, b: (torch.minimum(a, b), torch.maximum(a, b)), x, y)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_where(dtype):
    x, y = rand(SHAPE, dtype), rand(SHAPE, dtype)
    cond = rand(SHAPE, torch.bool)
    check_compiled(torch.where, cond, x, y)
    check_compiled(lambda c, a: torch.where(c, a, 0), cond, x)
    check_compiled(lambda a: torch.where(a > 0, a, -a * 2), x, **tol(dtype))


def test_where_broadcast_and_promotion():
    cond = rand((7, 1), torch.bool)
    x = rand((1, 13), torch.float16)
    y = rand((13,), torch.float32)
    check_compiled(torch.where, cond, x, y)


COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool], ids=str)
@pytest.mark.parametrize("op", list(COMPARE), ids=str)
def test_compare(op, dtype):
    fn = COMPARE[op]
    # Small integer-valued inputs, so that equal pairs occur.
    x = rand(SHAPE, dtype, -3, 3)
    y = rand(SHAPE, dtype, -3, 3)
    if dtype.is_floating_point:
        x, y = x.round(), y.round()
    check_compiled(fn, x, y)
    if dtype != torch.bool:
        check_compiled(lambda a: fn(a, 1), x)


@pytest.mark.parametrize("op", list(COMPARE), ids=str)
def test_compare_nan(op):
    fn = COMPARE[op]
    x = with_specials(rand(SHAPE, torch.float32).round())
    y = with_specials(rand(SHAPE, torch.float32).round()).flip(0)
    check_compiled(fn, x, y)


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64], ids=str)
def test_logical(dtype):
    x = rand(SHAPE, dtype, -2, 2)
    y = rand(SHAPE, dtype, -2, 2)
    if dtype.is_floating_point:
        x, y = x.round(), y.round()  # zeros must occur
    check_compiled(lambda a, b: (torch.logical_and(a, b), torch.logical_or(a, b),
                                 torch.logical_xor(a, b), torch.logical_not(a)), x, y)


@pytest.mark.parametrize("dtype", INTS + [torch.bool, torch.uint8, torch.int8], ids=str)
def test_bitwise(dtype):
    x = rand(SHAPE, dtype, -100, 100) if dtype.is_signed else rand(SHAPE, dtype, 0, 200)
    y = rand(SHAPE, dtype, -100, 100) if dtype.is_signed else rand(SHAPE, dtype, 0, 200)
    check_compiled(lambda a, b: (a & b, a | b, a ^ b, ~a, torch.bitwise_and(a, 6)), x, y)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_shifts(dtype):
    x = rand(SHAPE, dtype, -1000, 1000)
    s = rand(SHAPE, dtype, 0, 8)
    # Right shift of a negative value is arithmetic.
    check_compiled(lambda a, b: (a << b, a >> b, a >> 2, a << 3), x, s)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_isnan_isinf(dtype):
    x = with_specials(rand(SHAPE, dtype))
    check_compiled(lambda a: (torch.isnan(a), torch.isinf(a), torch.isfinite(a),
                              torch.isposinf(a), torch.isneginf(a)), x)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nan_to_num(dtype):
    check_compiled(lambda a: torch.nan_to_num(a, nan=0.0, posinf=1.0, neginf=-1.0),
                   with_specials(rand(SHAPE, dtype)))


CASTS = [
    # (from, to, low, high)
    (torch.float32, torch.int32, -100, 100),   # truncates toward zero
    (torch.float32, torch.int64, -100, 100),
    (torch.float32, torch.float16, -100, 100),
    (torch.float32, torch.bfloat16, -100, 100),
    (torch.float32, torch.float64, -100, 100),
    (torch.float64, torch.float32, -100, 100),
    (torch.float16, torch.float32, -100, 100),
    (torch.bfloat16, torch.float32, -100, 100),
    (torch.float16, torch.bfloat16, -100, 100),
    (torch.float32, torch.bool, -2, 2),
    (torch.float32, torch.uint8, 0, 255),
    (torch.int64, torch.float32, -1000, 1000),
    (torch.int64, torch.int32, -1000, 1000),
    (torch.int32, torch.int64, -1000, 1000),
    (torch.int32, torch.float16, -1000, 1000),
    (torch.int64, torch.bool, -2, 2),
    (torch.bool, torch.float32, 0, 1),
    (torch.bool, torch.int64, 0, 1),
    (torch.uint8, torch.float32, 0, 255),
]


@pytest.mark.parametrize("src,dst,low,high", CASTS,
                         ids=[f"{str(a)[6:]}-{str(b)[6:]}" for a, b, _, _ in CASTS])
def test_cast(src, dst, low, high):
    x = rand(SHAPE, src, low, high)
    if src.is_floating_point and dst == torch.bool:
        x = x.round()  # zeros must occur
    check_compiled(lambda a: a.to(dst), x)
    # A cast in the middle of a computation, and back. A backend may keep the product in
    # float32 rather than round it to dst, so allow the narrower type's tolerance.
    if src.is_floating_point and dst.is_floating_point:
        narrow = max(src, dst, key=lambda t: tol(t).get("rtol", 0))
        check_compiled(lambda a: (a.to(dst) * 3).to(src) + 1, x, **tol(narrow))


def test_cast_float_to_int_rounding():
    x = torch.tensor([-2.7, -2.5, -1.2, -0.5, -0.0, 0.5, 1.2, 2.5, 2.7, 99.99])
    check_compiled(lambda a: (a.to(torch.int32), a.to(torch.int64), a.to(torch.int8)), x)


def chain(x, y):
    a = torch.sigmoid(x * 2.0 + 1.0)
    b = torch.tanh(y) - a
    c = torch.exp(-b.abs()) * torch.rsqrt(y * y + 1.0)
    d = torch.where(x > 0, c, c.neg() + 0.5)
    return F.gelu(d).clamp(-1.0, 1.0) / (1.0 + x.square())


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_chain(dtype):
    check_compiled(chain, rand(SHAPE, dtype), rand(SHAPE, dtype), **tol(dtype))


def test_chain_mixed_dtypes():
    def fn(x, i, m):
        y = (x * i + 1).relu()            # float * int -> float
        z = y.to(torch.float16) * 0.5     # round through half
        w = torch.where(m, z.float(), -1.0) + i.to(torch.float32) // 3
        return (w.exp() - 1).to(torch.bfloat16), (i * 3 - 7) % 5, m & (i > 0)
    x = rand(SHAPE, torch.float32)
    i = rand(SHAPE, torch.int32, -10, 10)
    m = rand(SHAPE, torch.bool)
    check_compiled(fn, x, i, m, rtol=1.6e-2, atol=1.6e-2)


def test_chain_multiple_outputs():
    def fn(x):
        a = x.sin() * 2
        b = a.cos() + x
        c = (b * a).tanh()
        d = c.sigmoid() - b
        return a, d, d.abs().sqrt() + c
    check_compiled(fn, rand((127,), torch.float32))


# Broadcasting, with sizes 1 and primes.
BROADCAST = [
    ((3, 1, 5), (1, 4, 1)),
    ((5,), (3, 5)),
    ((3, 5), ()),
    ((), (7,)),
    ((1,), (7,)),
    ((13, 1), (1, 1)),
    ((1, 1), (1, 1)),
    ((127,), (127,)),
    ((7, 13), (13,)),
    ((2, 1, 13, 1), (7, 1, 127)),
    ((1, 127), (7, 1)),
]


@pytest.mark.parametrize("xs,ys", BROADCAST, ids=[f"{a}+{b}" for a, b in BROADCAST])
def test_broadcast(xs, ys):
    x, y = rand(xs, torch.float32), rand(ys, torch.float32)
    check_compiled(lambda a, b: (a + b, a * b - b, chain(a, b)), x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_zero_dim_tensors(dtype):
    x = rand((7, 13), dtype)
    s = torch.tensor(3, dtype=dtype)
    check_compiled(lambda a, b: (a + b, a * b, b - a, torch.maximum(a, b), b * 2), x, s)
    check_compiled(lambda a, b: a * b + 1, s, s.clone())


def test_type_promotion():
    def fn(h, f, d0, i, b):
        return (h + f,        # f16 + f32 -> f32
                i + h,        # int + f16 -> f16
                h + d0,       # a 0-d f64 does not promote a f16 tensor
                i + b,        # int + bool -> int
                b + b,        # bool + bool -> bool
                i * 1.5,      # int * float scalar -> default float
                h * 2)        # stays f16
    check_compiled(fn, rand(SHAPE, torch.float16), rand(SHAPE, torch.float32),
                   torch.tensor(0.25, dtype=torch.float64), rand(SHAPE, torch.int32, -5, 5),
                   rand(SHAPE, torch.bool), **tol(torch.float16))

"""One OpInfo conformance case: an op, a dtype and one sample input, run eagerly and
through ember, compared, and classified.

Classes (see docs/conformance.md):
  ember  - matched eager; every ATen op of every graph ran in ember kernels
  aten   - matched eager; some op ran as an ATen call, or a graph ran eagerly
  wrong  - ember's result differs from eager (beyond TorchInductor's OpInfo tolerances)
  crash  - ember raised (or the process died) where eager and aot_eager do not
  skip   - not ember's to judge: eager raises, Dynamo/AOTAutograd fail with the
           reference backend too, or Dynamo captured no graph for ember

Tolerances follow TorchInductor's OpInfo test (check_model): torch.testing's
per-dtype defaults, NaN equal to NaN, exact dtypes, and for float16/bfloat16 a
reference computed in float32 from the same inputs (rounded back). A low-precision
result passes if it matches either that reference or eager in the same dtype, or
else meets TorchInductor's benchmark accuracy rule (RMSE against a float64
reference at most 3x eager's), for results where rounding order decides.
"""
from __future__ import annotations

import math
import os
import time
import traceback

import torch
import torch.utils._pytree as pytree

DTYPES = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i32": torch.int32,
    "i64": torch.int64,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
LOW_PRECISION = (torch.float16, torch.bfloat16)

_EMBER_DIR = os.path.dirname(os.path.abspath(__import__("ember").__file__))


def op_full_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


def find_op(name: str):
    for op in op_db():
        if op_full_name(op) == name:
            return op
    raise KeyError(name)


def supported_dtypes(op) -> list[str]:
    sup = op.supported_dtypes("cpu")
    return [n for n, d in DTYPES.items() if d in sup]


def samples(op, dtype_name: str) -> list:
    """Every sample input the OpInfo yields for CPU and this dtype (no grad)."""
    return list(op.sample_inputs("cpu", DTYPES[dtype_name], requires_grad=False))


# ---------------------------------------------------------------------------
# Running


def _clone(x):
    """A copy with the same strides, also for overlapping (expanded) tensors."""
    if not isinstance(x, torch.Tensor):
        return x
    from torch._prims_common import clone_preserve_strides

    return clone_preserve_strides(x) if x.layout == torch.strided else x.clone()


def _clone_args(args, kwargs):
    return pytree.tree_map(_clone, args), pytree.tree_map(_clone, kwargs)


def _seeded(fn, seed, args, kwargs):
    torch.manual_seed(seed)
    return fn(*args, **kwargs)


class Recording:
    """Collects ember's per-graph records (GraphRecord) while a compiled call runs."""

    def __enter__(self):
        from ember.records import Recording

        self._recording = Recording()
        self.records = self._recording.records
        return self

    def __exit__(self, *exc):
        self._recording.stop()


def _op_placement(records) -> list[tuple[str, str, str]]:
    """(aten op, where it ran, why) for every op of every graph ember received:
    where is "kernel", "extern" (an ATen call inside an ember graph) or "eager"
    (the whole graph ran eagerly)."""
    placed = []
    for r in records:
        ops = getattr(r, "ops", None) or []
        if r.cg is None:
            reason = r.fallback_reason or "not compiled"
            placed += [(o, "eager", reason) for o in ops]
            continue
        externs: dict[str, list[str]] = {}
        for e in r.cg.externs:
            externs.setdefault(e["op"], []).append(e["reason"])
        for o in ops:
            if externs.get(o):
                placed.append((o, "extern", externs[o].pop()))
            else:
                placed.append((o, "kernel", ""))
    return placed


def _compile(fn, backend):
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, fullgraph=False)


def _ember_frames(exc) -> bool:
    tb = traceback.extract_tb(exc.__traceback__)
    return any(f.filename.startswith(_EMBER_DIR) for f in tb)


def _short(exc) -> str:
    inner = getattr(exc, "inner_exception", None)  # BackendCompilerFailed wraps ember's error
    if inner is not None:
        exc = inner
    msg = str(exc).strip().splitlines()
    first = next((ln for ln in msg if ln.strip()), "")
    return f"{type(exc).__name__}: {first[:300]}"


# ---------------------------------------------------------------------------
# Comparing


def _close(actual, expected) -> str | None:
    """None when actual matches expected under TorchInductor's OpInfo rule, else why not."""
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True, check_device=True)
        return None
    except AssertionError as e:
        return " ".join(str(e).split())[:400]
    except Exception as e:  # structures assert_close cannot compare (e.g. nested non-tensors)
        return _short(e)


def _tensors(tree) -> list:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _random_properties_ok(actual, draws, values=True) -> str | None:
    """For ops whose eager result changes with the seed: same structure, shapes and
    dtypes; values from the same finite set when eager's are (bernoulli, dropout
    masks); and means that agree statistically."""
    a_leaves, a_spec = pytree.tree_flatten(actual)
    d_leaves = [pytree.tree_flatten(d)[0] for d in draws]
    if any(len(dl) != len(a_leaves) for dl in d_leaves):
        return "structure differs from eager"
    for i, a in enumerate(a_leaves):
        es = [dl[i] for dl in d_leaves]
        if not isinstance(a, torch.Tensor):
            continue
        e = es[0]
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"output {i}: {a.dtype}{list(a.shape)} vs eager {e.dtype}{list(e.shape)}"
        if not values or a.numel() == 0 or a.is_complex():
            continue
        af, ef = a.double().flatten(), torch.cat([x.double().flatten() for x in es])
        values = torch.unique(ef[torch.isfinite(ef)])
        if torch.isfinite(ef).all() and values.numel() <= 16:
            if not torch.isin(af, values).all() and not _near_any(af, values):
                return f"output {i}: values outside eager's set {values.tolist()[:8]}"
        if af.numel() >= 200 and torch.isfinite(af).all() and torch.isfinite(ef).all():
            sd = ef.std().item()
            if abs(af.mean().item() - ef.mean().item()) > 6 * sd / math.sqrt(af.numel()) + 1e-6:
                return f"output {i}: mean {af.mean().item():.4g} vs eager {ef.mean().item():.4g}"
    return None


def _near_any(values, allowed) -> bool:
    d = (values[:, None] - allowed[None, :]).abs().min(dim=1).values
    return bool((d <= 1e-5 + 1e-3 * values.abs()).all())


# ---------------------------------------------------------------------------
# One case


def run_case(op, dtype_name: str, sample, backend="ember") -> dict:
    """Run one sample eagerly and compiled; return the classified result."""
    dtype = DTYPES[dtype_name]
    func = op.get_op()

    def fn(*args, **kwargs):
        return func(*args, **kwargs)

    args = [sample.input, *sample.args]
    kwargs = dict(sample.kwargs)
    result = {"op": op_full_name(op), "dtype": dtype_name, "class": None, "reason": "", "ops": []}
    t0 = time.perf_counter()

    # Eager, twice with different seeds to tell random ops apart.
    try:
        e_args, e_kwargs = _clone_args(args, kwargs)
        expected = _seeded(fn, 0, e_args, e_kwargs)
        other = _seeded(fn, 1, *_clone_args(args, kwargs))
        again = _seeded(fn, 0, *_clone_args(args, kwargs))
    except Exception as e:
        return {**result, "class": "skip", "reason": f"eager raises: {_short(e)}"}
    # Uninitialized memory (empty*) is only checked for shape and dtype; random
    # ops (the result depends on the seed) by their statistical properties.
    uninitialized = "empty" in op.name
    random_op = uninitialized or _close(expected, again) is not None or _close(expected, other) is not None

    # Compiled.
    c_args, c_kwargs = _clone_args(args, kwargs)
    with Recording() as rec:
        try:
            compiled = _compile(fn, backend)
            actual = _seeded(compiled, 0, c_args, c_kwargs)
        except Exception as e:
            cls, why = _classify_failure(e, fn, args, kwargs)
            result.update({"class": cls, "reason": why, "ops": _op_placement(rec.records)})
            return _timed(result, t0)
    result["ops"] = _op_placement(rec.records)

    if random_op:
        why = _random_properties_ok(actual, [expected, other], values=not uninitialized)
    else:
        why = _close(actual, expected)
        if why is not None and dtype in LOW_PRECISION:
            ref = _float_reference(fn, args, kwargs, dtype)
            if ref is not None and _close(actual, ref) is None:
                why = None
            elif _rmse_rule_ok(actual, expected, _float_reference(fn, args, kwargs, dtype, torch.float64)):
                why = None
    if why is None:  # in-place effects on the inputs must match as well
        why = _close(_tensors(c_args), _tensors(e_args)) if not random_op else None
        why = f"inputs after the call differ: {why}" if why else None
    if why is not None:
        result.update({"class": "wrong", "reason": why})
    elif not rec.records:
        result.update({"class": "skip", "reason": "Dynamo passed no graph to ember"})
    elif all(where == "kernel" for _, where, _ in result["ops"]):
        result["class"] = "ember"
    else:
        result["class"] = "aten"
    if random_op:
        result["random"] = True
    return _timed(result, t0)


def _timed(result, t0):
    result["seconds"] = round(time.perf_counter() - t0, 4)
    return result


def _float_reference(fn, args, kwargs, dtype, ref_dtype=torch.float32):
    """fn on the low-precision inputs upcast to ref_dtype: rounded back to `dtype`
    for float32 (TorchInductor's OpInfo reference), kept as is for float64."""
    def up(x):
        return x.to(ref_dtype) if isinstance(x, torch.Tensor) and x.dtype in LOW_PRECISION else x

    try:
        up_args, up_kwargs = pytree.tree_map(up, _clone_args(args, kwargs))
        ref = _seeded(fn, 0, up_args, up_kwargs)
    except Exception:
        return None
    if ref_dtype == torch.float64:
        return ref

    def down(x):
        return x.to(dtype) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x

    return pytree.tree_map(down, ref)


def _rmse_rule_ok(actual, expected, ref64) -> bool:
    """TorchInductor's accuracy rule from its benchmark harness, for f16/bf16 results
    whose error against the float32 reference is a matter of rounding order (long
    chains such as diff(n=5), or losses): against a float64 reference, ember's RMSE
    is at most 3x eager's plus tol/10, and NaN/inf sit where eager has them."""
    if ref64 is None:
        return False
    a_leaves, e_leaves, r_leaves = (pytree.tree_leaves(t) for t in (actual, expected, ref64))
    if not (len(a_leaves) == len(e_leaves) == len(r_leaves)):
        return False
    for a, e, r in zip(a_leaves, e_leaves, r_leaves):
        if not isinstance(a, torch.Tensor):
            continue
        if not isinstance(e, torch.Tensor) or not isinstance(r, torch.Tensor) or a.shape != e.shape \
                or a.dtype != e.dtype or r.shape != e.shape:
            return False
        if not a.is_floating_point():
            if not torch.equal(a, e):
                return False
            continue
        a64, e64, r64 = a.double(), e.double(), r.double()
        special = ~e64.isfinite()
        if not torch.equal(a64[special].isnan(), e64[special].isnan()) or \
                not torch.equal(a64[special].nan_to_num(), e64[special].nan_to_num()):
            return False
        finite = ~special & r64.isfinite()
        if not a64[finite].isfinite().all():
            return False
        if not finite.any():
            continue
        tol = 1e-3 if a.dtype == torch.float16 else 1.6e-2

        def rmse(x):
            return (x[finite] - r64[finite]).square().mean().sqrt().item()

        if rmse(a64) > 3 * rmse(e64) + tol / 10:
            return False
    return True


def _classify_failure(exc, fn, args, kwargs) -> tuple[str, str]:
    """An exception from the compiled call: ember's (crash) or not (skip)."""
    from torch._dynamo.exc import BackendCompilerFailed

    if isinstance(exc, BackendCompilerFailed) or _ember_frames(exc):
        return "crash", _short(exc)
    # Not raised inside ember: does the reference backend fail the same way?
    try:
        _seeded(_compile(fn, "aot_eager"), 0, *_clone_args(args, kwargs))
    except Exception as e2:
        return "skip", f"fails under aot_eager too: {_short(e2)}"
    return "crash", _short(exc)

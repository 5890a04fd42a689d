"""Judging one program: compiled by ember, compared with eager (and, where they differ
beyond tolerance, both against an fp64 reference)."""
from __future__ import annotations

import dataclasses
import os
import traceback

import torch

from .programs import DTYPES, FLOAT_KEYS, TOLERANCES, Program, compile_source, make_inputs


@dataclasses.dataclass
class Result:
    status: str   # ok | mismatch | error | eager_error | device_error
    detail: str = ""
    kernels: int = 0
    externs: int = 0
    eager_graphs: int = 0  # graphs ember left to eager (an op or dtype its CUDA path refuses)
    eager_reasons: list = dataclasses.field(default_factory=list)  # why, first line of each


# Errors after which a CUDA context is unusable: every later call fails the same way, so
# the worker process reports the seed and exits, and the campaign starts a new one.
STICKY_CUDA_ERRORS = ("illegal memory access", "misaligned address", "unspecified launch failure",
                      "device-side assert", "illegal instruction", "CUDA_ERROR_ILLEGAL_ADDRESS",
                      "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ASSERT", "CUDA_ERROR_MISALIGNED_ADDRESS",
                      "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal", "CUDA error: unknown error")


def device_failure(device: str | None) -> str | None:
    """On CUDA, the sticky error the context is in, if any (after a synchronize)."""
    if device is None or not str(device).startswith("cuda"):
        return None
    try:
        torch.cuda.synchronize()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def is_sticky(detail: str) -> bool:
    return any(s in detail for s in STICKY_CUDA_ERRORS)


def _compile_with_ember(fn, inputs, cache_dir: str):
    import torch.fx

    from ..backend import make_backend

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
    # Inductor's low-precision rule against an fp64 reference (docs/reliability.md).
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


def check(prog: Program, cache_dir: str, flags: dict | None = None, device: str | None = None) -> Result:
    """Compiles `prog` with ember and compares its outputs with eager, both on `device`
    (None: the CPU). flags: per value name, [exact, zsign, welford, prec] (see Value);
    the generator's, unless given. On CUDA an error that leaves the context unusable is
    a device_error (the caller must not run anything else in this process)."""
    try:
        result = _check(prog, cache_dir, flags, device)
    except Exception as e:
        # A CUDA error surfaces at the next call that synchronizes: for an asynchronous
        # kernel fault that may be the comparison of the outputs (fuzz campaign 1's
        # "crash"es were illegal addresses raised in _compare); anything else raised
        # there is a judge bug, reported as an error rather than killing the worker.
        result = Result("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}")
    sticky = device_failure(device)
    if sticky or (result.status in ("error", "eager_error") and is_sticky(result.detail)):
        return Result("device_error", sticky or result.detail, result.kernels)
    return result


def valid_on_the_cpu(prog: Program) -> bool:
    """Whether eager runs `prog` on the CPU. A minimizer's candidate may be invalid (an
    index_select whose indices no longer fit the bypassed operand): the CPU raises an
    error, CUDA a device-side assert that leaves the context unusable, so candidates of
    a CUDA campaign are tried on the CPU first (seeds 8368 and 8369 of campaign 1)."""
    try:
        compile_source(prog)(*make_inputs(prog))
    except Exception:
        return False
    return True


def _check(prog: Program, cache_dir: str, flags: dict | None, device: str | None) -> Result:
    flags = flags if flags is not None else getattr(prog, "flags", None) or {}
    fn = compile_source(prog)
    try:
        expected = fn(*make_inputs(prog, device))
    except Exception as e:
        return Result("eager_error", f"{type(e).__name__}: {e}")
    from .. import records as graph_records

    before = len(graph_records.summaries())
    try:
        with graph_records.recording() as records:
            compiled = _compile_with_ember(fn, make_inputs(prog, device), cache_dir)
            actual = compiled(*make_inputs(prog, device))
    except Exception as e:
        return Result("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}")
    kernels = sum(s["kernels"] for s in graph_records.summaries()[before:])
    reasons = [str(r.fallback_reason).splitlines()[0][:200] for r in records if r.fallback_reason]
    eager_graphs = len(reasons)
    reference = None
    for i, (a, e) in enumerate(zip(actual, expected)):
        given = list(flags.get(prog.outputs[i], ()))
        exact_i, zsign_i, welford_i, prec_i = given + [False, True, False, ""][len(given):]
        problem = _compare(f"output {i} ({prog.outputs[i]})", a, e, None, exact_i, zsign_i, welford_i, prec_i)
        if problem and not exact_i and e.dtype.is_floating_point:
            if reference is None:
                try:
                    ref_inputs = [x.double() if x.dtype.is_floating_point else x for x in make_inputs(prog, device)]
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
            return Result("mismatch", problem, kernels, 0, eager_graphs, reasons)
    if len(actual) != len(expected):
        return Result("mismatch", f"{len(actual)} outputs, expected {len(expected)}", kernels, 0, eager_graphs, reasons)
    return Result("ok", "", kernels, 0, eager_graphs, reasons)


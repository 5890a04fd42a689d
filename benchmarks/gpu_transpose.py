"""Transposing copies on the GPU: eager, Inductor and ember side by side (ember's tiled
transpose shape, csrc/schedule/cuda/transpose_plan.h).

Cases: the 3-channel image [64,3,224,224] bf16 to channels-last (ResNet-50's and ViT's
first kernel), [64,64,56,56] bf16 NCHW -> NHWC and back, and a 4096 x 4096 f32 transpose.
For each: the device time per call (kernels only, from torch.profiler), the time per call
by CUDA events over a loop (includes the host's launch overhead when that is longer), the
bandwidth (bytes read + written over the device time) against a 1 GiB device-to-device
copy (benchmarks/gpu_kernels.py's method), ember's kernel shapes, and an exact comparison
with eager (a copy moves bits) and whether the strides are eager's. Under a minute on an H100.

    python benchmarks/gpu_transpose.py [--iters 50] [--cases image,nhwc64,nchw64,t4096] [--json out.json]
"""
import argparse
import datetime
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_kernels import copy_bandwidth_gbs  # noqa: E402
from gpu_models import EmberRecorder  # noqa: E402


def _to_channels_last(x):
    return x.contiguous(memory_format=torch.channels_last)


def _to_contiguous(x):
    return x.contiguous()


def _t_contiguous(x):
    return x.t().contiguous()


def _cases():
    """name -> (description, fn, input builder)."""
    bf16 = torch.bfloat16
    return {
        "image": ("[64,3,224,224] bf16 NCHW -> NHWC", _to_channels_last,
                  lambda: torch.randn(64, 3, 224, 224, device="cuda", dtype=bf16)),
        "nhwc64": ("[64,64,56,56] bf16 NCHW -> NHWC", _to_channels_last,
                   lambda: torch.randn(64, 64, 56, 56, device="cuda", dtype=bf16)),
        "nchw64": ("[64,64,56,56] bf16 NHWC -> NCHW", _to_contiguous,
                   lambda: _to_channels_last(torch.randn(64, 64, 56, 56, device="cuda", dtype=bf16))),
        "t4096": ("[4096,4096] f32 x.t().contiguous()", _t_contiguous,
                  lambda: torch.randn(4096, 4096, device="cuda")),
    }


def _kernel_us(fn, x, iters) -> float:
    """Device time of the CUDA kernels one call launches (median-free: total / iters)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
    total = 0.0
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0.0)
        name = e.key.lower()
        if "memcpy" in name or "memset" in name:  # none expected; keep the kernels only
            continue
        total += t
    return total / iters


def _event_us(fn, x, iters) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / iters)
    return statistics.median(times)


def _compiled(backend, fn, cache_dir):
    torch._dynamo.reset()
    if backend == "inductor":
        return torch.compile(fn)
    import ember

    ember.config.cache_dir = cache_dir
    return torch.compile(fn, backend="ember")


def run(case_names, iters):
    copy_gbs = copy_bandwidth_gbs()
    cases = _cases()
    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for name in case_names:
            desc, fn, make = cases[name]
            torch.manual_seed(0)
            x = make()
            expected = fn(x)
            nbytes = 2 * x.numel() * x.element_size()
            for backend in ("eager", "inductor", "ember"):
                shapes = None
                if backend == "eager":
                    f = fn
                    got = f(x)
                elif backend == "inductor":
                    f = _compiled(backend, fn, cache_dir)
                    got = f(x)
                else:
                    with EmberRecorder() as rec:
                        f = _compiled(backend, fn, cache_dir)
                        got = f(x)
                    summary = rec.summary()
                    shapes = [k["shape"] for r in rec.records if r.cg is not None for k in r.cg.kernels]
                    if summary["eager_fallbacks"]:
                        shapes = ["EAGER FALLBACK: " + summary["fallbacks"][0]["reason"]]
                for _ in range(3):
                    f(x)
                exact = bool(torch.equal(got, expected))
                kernel_us = _kernel_us(f, x, iters)
                event_us = _event_us(f, x, iters)
                gbs = nbytes / (kernel_us * 1e-6) / 1e9 if kernel_us > 0 else 0.0
                rows.append({"case": name, "what": desc, "backend": backend, "kernel_us": round(kernel_us, 2),
                             "event_us": round(event_us, 2), "bytes": nbytes, "gbs": round(gbs, 1),
                             "copy_pct": round(100 * gbs / copy_gbs, 1), "exact": exact,
                             "same_strides": got.stride() == expected.stride(), "ember_shapes": shapes})
            del x, expected
            torch.cuda.empty_cache()
    return copy_gbs, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(_cases()), help="comma-separated: " + ", ".join(_cases()))
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device")
    names = [c for c in args.cases.split(",") if c]
    copy_gbs, rows = run(names, args.iters)
    print(f"{torch.cuda.get_device_name()}: 1 GiB device-to-device copy {copy_gbs:,.0f} GB/s")
    print(f"{'case':<36}{'backend':<10}{'kernel us':>10}{'event us':>10}{'GB/s':>9}{'copy%':>7}  exact  strides  ember shapes")
    for r in rows:
        shapes = ",".join(r["ember_shapes"]) if r["ember_shapes"] else ""
        print(f"{r['what']:<36}{r['backend']:<10}{r['kernel_us']:>10.1f}{r['event_us']:>10.1f}{r['gbs']:>9,.0f}"
              f"{r['copy_pct']:>7.1f}  {'yes' if r['exact'] else 'NO':<5}  {'same' if r['same_strides'] else 'DIFFER':<7}  {shapes}")
    if args.json:
        out = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "device": torch.cuda.get_device_name(),
               "torch": torch.__version__, "copy_gbs": round(copy_gbs, 1), "iters": args.iters, "rows": rows}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    if not all(r["exact"] for r in rows):
        sys.exit("some result differs from eager")


if __name__ == "__main__":
    main()

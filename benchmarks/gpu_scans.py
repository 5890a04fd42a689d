"""Scans on the GPU (cumsum, cumprod, logcumsumexp): eager, Inductor and ember side by
side, as bandwidth against a 1 GiB device-to-device copy, measured as gpu_rows.py
measures row kernels (device time of back-to-back calls, inputs rotating past the L2,
compulsory bytes: inputs read once, outputs written once; values checked against eager).

The suite's scan_block scans along a middle dim (time of [batch, time, channels]), which
ember runs as the ScanColumns shape (csrc/schedule/cuda/scan_columns.h); a scan along the
last dim keeps the row shapes' loop and is here for comparison.

    python benchmarks/gpu_scans.py [--only middle] [--json out.json]
"""
import argparse
import datetime
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_kernels import copy_bandwidth_gbs  # noqa: E402
from gpu_rows import BACKENDS, Forward, print_row, run, sleep_cycles_per_ms  # noqa: E402


def _cumsum_middle(x):
    return torch.cumsum(x, 1)


def _logcumsumexp_middle(x):
    return torch.logcumsumexp(x, 1)


def _scan_block(x):
    """scan_block's three scans over the chunks of one [batch, time, 3 x channels] buffer
    (a linear layer's output), fused with their epilogue (benchmarks/suite/models_blocks.py)."""
    a, g, l = x.chunk(3, dim=-1)
    total = torch.cumsum(a, dim=1)
    decay = torch.cumprod(torch.sigmoid(g) * 0.01 + 0.99, dim=1)
    lse = torch.logcumsumexp(l.float(), dim=1).to(x.dtype)
    return total * decay + lse


def _cumsum_last(x):
    return torch.cumsum(x, -1)


def _rand(*shape, dtype):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def workloads():
    bf16, f32 = torch.bfloat16, torch.float32
    return [
        Forward("middle cumsum 16x1024x1024 bf16", _cumsum_middle, lambda: (_rand(16, 1024, 1024, dtype=bf16),),
                16 * 1024, 1024, bf16),
        Forward("middle logcumsumexp 16x1024x1024 f32", _logcumsumexp_middle,
                lambda: (_rand(16, 1024, 1024, dtype=f32),), 16 * 1024, 1024, f32),
        Forward("middle scan_block 16x1024x3072 bf16", _scan_block, lambda: (_rand(16, 1024, 3072, dtype=bf16),),
                16 * 1024, 3072, bf16),
        Forward("middle cumsum 64x128x1024 bf16", _cumsum_middle, lambda: (_rand(64, 128, 1024, dtype=bf16),),
                64 * 128, 1024, bf16),
        Forward("last cumsum 16384x1024 bf16", _cumsum_last, lambda: (_rand(16384, 1024, dtype=bf16),),
                16384, 1024, bf16),
    ]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="", help="comma-separated substrings of workload names")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--json", default="")
    a = p.parse_args()
    copy_gbs = copy_bandwidth_gbs()
    cycles_per_ms = sleep_cycles_per_ms()
    print(f"{torch.cuda.get_device_name()}: device-to-device copy {copy_gbs:.0f} GB/s")
    print(f"{'workload':36s} {'MB':>8s}  " + "  ".join(f"{b + ' us':>8s} {'copy':>5s}" for b in BACKENDS))
    wanted = [s for s in a.only.split(",") if s]
    results = []
    for work in workloads():
        if wanted and not any(s in work.name for s in wanted):
            continue
        res = run(work, copy_gbs, a.calls, a.repeats, cycles_per_ms)
        print_row(res)
        results.append(res)
    if a.json:
        Path(a.json).write_text(json.dumps({
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_gbs": round(copy_gbs, 1),
            "command": " ".join(sys.argv), "workloads": results}, indent=1))
    if not all(r[b]["ok"] for r in results for b in BACKENDS):
        sys.exit(1)


if __name__ == "__main__":
    main()

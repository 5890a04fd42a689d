"""python -m ember.fuzz: the command line of the fuzzer (see ember/fuzz/__init__.py)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from . import __doc__ as DOC
from .campaign import GPU_DTYPES, Settings, _run_worker, campaign, merge_summaries, parse_seeds
from .generator import generate
from .judge import check
from .minimize import read_repro


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m ember.fuzz", description=DOC.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(DOC.split("\n\n")[1:2]))
    p.add_argument("--seeds", default="0:200", help="a seed, a range a:b, or a comma-separated list of both "
                                                    "(default 0:200)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads per worker")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda: where inputs live and graphs run")
    p.add_argument("--dtypes", help="comma-separated float dtypes of the generated programs (f32,bf16,f16; "
                                    "default for --device cuda: f32,bf16,f16; default on cpu: the CPU mix)")
    p.add_argument("--out", help="write the JSON summary here")
    p.add_argument("--out-dir", help="write summary.json and failures/seed_N.py (repros) here")
    p.add_argument("--time-limit", type=float, help="seconds after which no seed starts (the summary says how "
                                                     "many ran)")
    p.add_argument("--chunk", type=int, help="seeds per worker process (default 50; 250 with --device cuda, "
                                              "whose processes take longer to start)")
    p.add_argument("--cache-dir", help="kernel cache (default: a fresh temporary directory)")
    p.add_argument("--no-minimize", action="store_true", help="report failures without minimizing them")
    p.add_argument("--minimize-seconds", type=float, default=120.0, help="time to minimize each failure")
    p.add_argument("--show", action="store_true", help="print each seed's program and result")
    p.add_argument("--dynamic", action="store_true",
                   help="compile through Dynamo with dynamic=True (symbolic sizes) instead of symbolic_trace")
    p.add_argument("--rerun", metavar="SUMMARY_JSON",
                   help="rerun the failures recorded in a summary (their minimized programs where there are)")
    p.add_argument("--repro", metavar="FILE", help="rerun one failure written to out-dir/failures/")
    p.add_argument("--nvrtc", action="store_true",
                   help="no GPU needed: compile the CUDA of each seed's graphs with NVRTC (sm_90) and report "
                        "errors; nothing runs")
    p.add_argument("--merge", nargs="+", metavar="SUMMARY_JSON",
                   help="merge the summaries of campaigns run side by side (one a GPU) into --out")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--worker-settings", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.dynamic:
        os.environ["EMBER_FUZZ_DYNAMIC"] = "1"  # the worker processes inherit it

    if args.worker:
        return _run_worker([int(x) for x in args.worker.split(",")], Settings.from_json(args.worker_settings),
                           args.worker_out)
    if args.merge:
        summaries = []
        for path in args.merge:
            with open(path) as f:
                summaries.append(json.load(f))
        merged = merge_summaries(summaries)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(merged, f, indent=1)
        print(json.dumps({k: v for k, v in merged.items() if k != "failures"}, indent=1))
        return 1 if merged["failures_total"] else 0
    device = None if args.device == "cpu" else args.device
    dtypes = tuple(args.dtypes.split(",")) if args.dtypes else (GPU_DTYPES if device or args.nvrtc else None)
    if dtypes and not set(dtypes) <= {"f32", "f16", "bf16", "f64"}:
        p.error(f"--dtypes: float dtypes only (f32, bf16, f16, f64), got {args.dtypes}")
    cache = args.cache_dir or os.path.join(tempfile.mkdtemp(prefix="ember-fuzz-"), "cache")
    if device:
        from .cuda import device_problem

        problem = device_problem(device)
        if problem:
            print(f"ember.fuzz: cannot run on {device}: {problem}", file=sys.stderr)
            return 2
    if args.nvrtc:
        from .cuda import nvrtc_slice

        totals = nvrtc_slice(parse_seeds(args.seeds), cache, dtypes)
        print(json.dumps(totals, indent=1))
        return 1 if totals["errors"] else 0
    if args.repro:
        prog, flags, repro_device = read_repro(args.repro)
        res = check(prog, cache, flags, device or repro_device)
        print(prog.source())
        print(f"# -> {res.status} {res.detail}")
        return 0 if res.status == "ok" else 1
    if args.rerun:
        with open(args.rerun) as f:
            summary = json.load(f)
        failures = summary["failures"]
        rerun_device = device or (None if summary.get("device", "cpu") == "cpu" else "cuda")
        bad = 0
        for fail in failures:
            if "program" not in fail:
                print(f"seed {fail['seed']}: {fail['status']} (no program recorded: rerun it with --seeds)")
                continue
            from .programs import Program

            prog = Program.from_json(fail.get("minimized") or fail["program"])
            res = check(prog, cache, fail.get("flags"), rerun_device)
            bad += res.status != "ok"
            print(f"seed {fail['seed']}: {res.status} {res.detail.splitlines()[0] if res.detail else ''}")
        return 1 if bad else 0
    if args.show:
        for s in parse_seeds(args.seeds):
            prog = generate(s, dtypes)
            print(f"# seed {s}" + (f" ({prog.dtype})" if prog.dtype else ""))
            print(prog.source())
            res = check(prog, cache, device=device)
            print(f"# -> {res.status} {res.detail}" + (f" (ran eagerly: {res.eager_reasons})" if res.eager_graphs
                                                       else "") + "\n")
        return 0
    chunk = args.chunk or (250 if device else 50)
    summary = campaign(parse_seeds(args.seeds), args.jobs, args.threads, args.cache_dir, args.out,
                       not args.no_minimize, chunk=chunk, device=device, dtypes=dtypes, time_limit=args.time_limit,
                       out_dir=args.out_dir, minimize_seconds=args.minimize_seconds)
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}, indent=1))
    return 1 if summary["failures_total"] else 0


if __name__ == "__main__":
    sys.exit(main())

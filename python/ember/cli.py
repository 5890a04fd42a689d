"""The `ember` command line (python -m ember)."""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def _demo(args) -> int:
    import torch

    import ember
    from ember import examples

    names = args.models or ["small_cnn", "ln_gelu", "tiny_gpt2"]
    status = 0
    for name in names:
        try:
            model, inputs = examples.get(name)
        except ImportError as e:
            print(f"{name}: skipped ({e})")
            continue
        with torch.no_grad():
            ref = model(*inputs)
            report = ember.explain(model, *inputs, graph_breaks=False)
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="ember")
            out = compiled(*inputs)
            times = {}
            for label, fn in (("eager", model), ("ember", compiled)):
                for _ in range(3):
                    fn(*inputs)
                ts = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    fn(*inputs)
                    ts.append(time.perf_counter() - t0)
                times[label] = statistics.median(ts) * 1000
        ref_t = ref if torch.is_tensor(ref) else ref[0]
        out_t = out if torch.is_tensor(out) else out[0]
        err = ((out_t - ref_t).abs().max() / ref_t.abs().max()).item()
        ok = err <= 1e-4
        status |= 0 if ok else 1
        print(f"=== {name}: max |ember - eager| / max |eager| = {err:.2e} ({'OK' if ok else 'MISMATCH'}); "
              f"median eager {times['eager']:.3f} ms, ember {times['ember']:.3f} ms")
        print(report)
        print()
    return status


def _doctor(args) -> int:
    from ember.tools import doctor

    return doctor.main(as_json=args.json)


def _explain(args) -> int:
    import json

    import torch

    import ember
    from ember.tools import targets

    target = targets.load(args.target)
    with torch.no_grad():
        report = ember.explain(target.model, *target.inputs, calls=target.more_calls, measure=not args.no_measure,
                               dynamic=args.dynamic or None, mode=args.mode)
    print(f"ember explain {targets.describe(args.target)} (inference, under torch.no_grad()"
          + (", dynamic=True" if args.dynamic else "") + (f", mode={args.mode}" if args.mode else "") + ")\n")
    print(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report.to_dict(), f, indent=2, default=str)
        print(f"\nwrote {args.json}")
    return 0


def _cache(args) -> int:
    import json

    from ember.tools import cache

    if args.action == "info":
        d = cache.info(args.dir)
        print(json.dumps(d, indent=2) if args.json else cache.format_info(d))
        return 0 if d["usable"] is not False else 1
    if args.action in ("export", "import"):
        if not args.file:
            print(f"ember cache {args.action}: name the FILE", file=sys.stderr)
            return 2
        try:
            if args.action == "export":
                d = cache.export(args.file, args.dir)
                print(f"exported {d['entries']} entries ({cache.format_bytes(d['bytes'])}) from {d['dir']} to "
                      f"{args.file}" + (f"; skipped {d['skipped']} that failed verification" if d["skipped"] else ""))
            else:
                d = cache.import_file(args.file, args.dir)
                print(f"imported {d['entries']} entries ({cache.format_bytes(d['bytes'])}) into {d['dir']}")
        except (ValueError, PermissionError, OSError) as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    try:
        before = cache.clear(args.dir)
    except PermissionError as e:
        print(e, file=sys.stderr)
        return 1
    after = cache.info(args.dir)
    print(f"cleared {before['dir']}: removed {before['entries'] - after['entries']} entries, "
          f"{cache.format_bytes(before['bytes'] - after['bytes'])}")
    return 0


def _precompile(args) -> int:
    import contextlib
    import os

    import torch

    import ember
    from ember.caches import precompile
    from ember.tools import targets

    target = targets.load(args.target)
    t0 = time.perf_counter()
    grad = torch.enable_grad() if args.train else torch.no_grad()
    try:
        with grad, contextlib.redirect_stdout(sys.stderr):
            ember.save(target.model, target.inputs, args.output, mode=args.mode, dynamic=args.dynamic or None,
                       kernels="reference" if args.reference else "embed")
    except precompile.PrecompileRefused as e:
        print(f"ember precompile: {e}", file=sys.stderr)
        return 1
    kind = "training (forward + backward)" if args.train else "inference"
    print(f"wrote {args.output} ({os.path.getsize(args.output) / 1024:.1f} KiB, {kind}, kernels "
          f"{'by reference' if args.reference else 'embedded'}) in {time.perf_counter() - t0:.2f} s")
    print(f"load it with: fn = ember.load({args.output!r}, model); fn(*inputs)")
    return 0


def _bench(args) -> int:
    from ember.tools import bench

    backends = [b for spec in args.backend for b in spec.split(",") if b] or list(bench.DEFAULT_BACKENDS)
    return bench.main(args.target, backends, iters=args.iters, rounds=args.rounds, warmup=args.warmup,
                      json_path=args.json, png_path=args.png, timeout=args.timeout,
                      first_call=not args.no_first_call, html_path=args.html)


def _report(args) -> int:
    from ember.tools import report

    return report.main(args.target, args.output, measure=not args.no_measure, json_path=args.json)


def main(argv=None) -> int:
    from ember.tools.targets import TargetError

    parser = argparse.ArgumentParser(prog="ember", description="ember: a C++ torch.compile backend")
    sub = parser.add_subparsers(dest="cmd", required=True)
    target_help = ("a built-in model (mlp, ln_gelu, tiny_gpt2, small_cnn, tiny_llama; gpt2, bert, resnet50, "
                   "vit_small, llama "
                   "when transformers/torchvision/timm are installed) or path/to/file.py:factory, where "
                   "factory() returns (model, inputs) or (model, inputs, more_calls)")

    demo = sub.add_parser("demo", help="compile the built-in example models and report")
    demo.add_argument("models", nargs="*", help="example names (default: small_cnn ln_gelu tiny_gpt2)")

    doctor = sub.add_parser("doctor", help="check this machine: torch, Dynamo, C compiler, CPU, CUDA, cache")
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")

    bench = sub.add_parser("bench", help="eager / Inductor / ember side by side: latency, compile time, "
                           "numerics, kernels, memory")
    bench.add_argument("target", help=target_help)
    bench.add_argument("--backend", action="append", default=[],
                       help="backends, comma-separated or repeated (default: eager,inductor,ember)")
    bench.add_argument("--iters", type=int, default=100, help="timed calls per backend (default 100)")
    bench.add_argument("--rounds", type=int, default=10, help="interleaved rounds the calls are split into")
    bench.add_argument("--warmup", type=int, default=5, help="untimed calls before timing")
    bench.add_argument("--json", metavar="OUT.json", help="write the results as JSON")
    bench.add_argument("--png", metavar="OUT.png", help="draw a chart (needs matplotlib)")
    bench.add_argument("--html", metavar="OUT.html", help="also write ember report's page, with this benchmark")
    bench.add_argument("--timeout", type=float, default=900, help="seconds per measurement process")
    bench.add_argument("--no-first-call", action="store_true",
                       help="skip the cold/warm first-call processes (steady state only)")

    explain = sub.add_parser("explain", help="graph breaks, recompilations, ember's fusion plan per graph, "
                             "estimated and measured speedup")
    explain.add_argument("target", help=target_help)
    explain.add_argument("--json", metavar="OUT.json", help="also write the report as JSON")
    explain.add_argument("--no-measure", action="store_true", help="skip timing and the speedup estimate")
    explain.add_argument("--dynamic", action="store_true",
                         help="compile with symbolic sizes (torch.compile dynamic=True): the report names the "
                              "symbols and any kernel a symbol made more general than static sizes would")
    explain.add_argument("--mode", default=None, choices=["default", "reduce-overhead", "max-autotune"],
                         help="ember's mode; reduce-overhead (CUDA) lists each graph's CUDA graph recordings and "
                              "the memory each took (a size records at its second call)")

    report = sub.add_parser("report", help="one self-contained HTML page: graphs, graph breaks, recompilations, "
                            "fusion plans, highlighted code, per-kernel time and bandwidth, estimated vs measured "
                            "speedup")
    report.add_argument("target", help=target_help)
    report.add_argument("-o", "--output", required=True, metavar="OUT.html", help="the page to write")
    report.add_argument("--no-measure", action="store_true", help="skip the speedup measurement and estimate")
    report.add_argument("--json", metavar="OUT.json", help="also write the page's data as JSON")

    precompile = sub.add_parser("precompile", help="compile a model once into a file that ember.load loads in a "
                                "new process with no tracing (torch's aot_compile)")
    precompile.add_argument("target", help=target_help)
    precompile.add_argument("-o", "--output", required=True, metavar="PATH", help="the artifact to write")
    precompile.add_argument("--reference", action="store_true",
                            help="name the kernels by their cache key instead of carrying them (this machine only)")
    precompile.add_argument("--train", action="store_true", help="forward + backward (default: inference, no_grad)")
    precompile.add_argument("--dynamic", action="store_true", help="symbolic sizes (torch.compile dynamic=True)")
    precompile.add_argument("--mode", default=None, help="ember's mode (default, reduce-overhead, max-autotune)")

    cache = sub.add_parser("cache", help="the on-disk kernel cache: info, clear, export FILE, import FILE")
    cache.add_argument("action", choices=["info", "clear", "export", "import"])
    cache.add_argument("file", nargs="?", help="export: the file to write; import: the file to read")
    cache.add_argument("--dir", help="cache directory (default: ember.config.cache_dir, EMBER_CACHE_DIR or "
                       "~/.cache/ember)")
    cache.add_argument("--json", action="store_true", help="info as JSON")

    args = parser.parse_args(argv)
    commands = {"demo": _demo, "doctor": _doctor, "bench": _bench, "explain": _explain, "cache": _cache,
                "precompile": _precompile, "report": _report}
    try:
        return commands[args.cmd](args)
    except KeyboardInterrupt:
        return 130
    except TargetError as e:
        # A TARGET that does not load: one line, not a traceback through ember.
        print(f"ember {args.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""`ember bench TARGET`: eager, Inductor and ember (and any other backend) side by side.

What is measured, and where:

  first call   cold: a fresh process with empty compile caches (its own
               TORCHINDUCTOR_CACHE_DIR and EMBER_CACHE_DIR); warm: a fresh process on the
               caches the cold one filled. Each also reports the time Dynamo spent inside
               the backend, the compiler's own share, graph and kernel counts (ember: its
               kernels; Inductor: torch._inductor.metrics.generated_kernel_count, cold
               process only, since a cache hit generates nothing), and peak memory.
  peak memory  the process's peak resident set (VmHWM) after the first call and the
               warmup calls, minus its resident set once the model and inputs exist:
               what compiling and running added, the compiler's own memory included
               (Inductor's compile worker processes are not counted). Linux only.
  steady state one process runs every backend: warmup, then `rounds` interleaved rounds
               of `iters / rounds` timed calls each (order rotating), so that a machine
               whose speed drifts affects every backend alike. Median and p10-p90.
  numerics     each backend's output against eager in the same process and against an
               fp64 reference (the model and floating inputs in float64): max |error|,
               RMSE, and the brief's rule: allclose at tol, else RMSE(backend, fp64) <=
               3 x RMSE(eager, fp64) + tol/10.

Everything runs under torch.no_grad() (inference). Measurement processes are this module
run as `python -m ember.tools.bench first_call|steady ...`; each prints one result line.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

DEFAULT_BACKENDS = ("eager", "inductor", "ember")
RESULT_TAG = "EMBER_BENCH_RESULT "
MEMORY_NOTE = ("peak RSS: VmHWM after the first call and warmup minus VmRSS once model and inputs exist, "
               "in the warm first-call process (cold process for eager); the compiler's own memory included")


# ----------------------------------------------------------------------------- measurement processes

def _proc_status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _dynamo_seconds(name: str) -> float | None:
    """A Dynamo compile-time counter summed over graphs: "OutputGraph.call_user_compiler" is the
    time inside the backend (AOTAutograd + compiler); "compile_fx_inner" is Inductor proper."""
    from torch._dynamo.utils import compilation_time_metrics

    times = compilation_time_metrics.get(name, [])
    return float(sum(times)) if times else None


def _compile(model, backend: str):
    import torch

    return model if backend == "eager" else torch.compile(model, backend=backend)


def first_call_process(spec: str, backend: str, warmup: int) -> dict:
    import torch

    from ember.tools import targets

    target = targets.load(spec)
    rss_before = _proc_status_kb("VmRSS")
    fn = _compile(target.model, backend)
    with torch.no_grad():
        t0 = time.perf_counter()
        fn(*target.inputs)
        first_call_s = time.perf_counter() - t0
        for _ in range(warmup):
            fn(*target.inputs)
    peak = _proc_status_kb("VmHWM")
    result = {"backend": backend, "first_call_s": first_call_s, "torch": torch.__version__,
              "threads": torch.get_num_threads(),
              "peak_rss_delta_mb": (peak - rss_before) / 1024 if peak and rss_before else None,
              "backend_s": None, "compiler_s": None, "graphs": None, "kernels": None, "cache": None}
    if backend != "eager":
        from torch._dynamo.utils import counters

        result["backend_s"] = _dynamo_seconds("OutputGraph.call_user_compiler")
        result["graphs"] = counters["stats"]["unique_graphs"]
    if backend == "ember":
        import ember

        stats = ember.last_compile_stats()
        result.update(compiler_s=stats["backend_seconds"], kernels=stats["kernels"], cache=stats["cache"],
                      graphs=stats["graphs"])
    elif backend == "inductor":
        from torch._inductor import metrics

        result["compiler_s"] = _dynamo_seconds("compile_fx_inner")
        result["kernels"] = metrics.generated_kernel_count
    return result


def _float_leaves(out) -> list:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t.detach() for t in tree_leaves(out) if torch.is_tensor(t) and t.is_floating_point()]


def _to_fp64(x):
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.double() if torch.is_tensor(t) and t.is_floating_point() else t, x)


def _errors(out, eager_out, ref64) -> dict:
    import torch

    outs, eagers = _float_leaves(out), _float_leaves(eager_out)
    refs = _float_leaves(ref64) if ref64 is not None else None
    d = {"max_abs_vs_eager": 0.0, "max_rel_vs_eager": 0.0, "max_abs_vs_fp64": None, "rmse_vs_fp64": None,
         "eager_rmse_vs_fp64": None, "nan_mismatch": False, "ok": True}
    if len(outs) != len(eagers):
        return {**d, "ok": False, "note": "outputs differ in structure from eager"}
    tol = 1e-4
    for i, (o, e) in enumerate(zip(outs, eagers)):
        o64, e64 = o.double(), e.double()
        if not torch.equal(o64.isnan(), e64.isnan()):
            d["nan_mismatch"] = True
        finite = ~(o64.isnan() | e64.isnan())
        diff = (o64 - e64)[finite].abs()
        err = diff.max().item() if diff.numel() else 0.0
        scale = e64[finite].abs().max().item() if diff.numel() else 0.0
        d["max_abs_vs_eager"] = max(d["max_abs_vs_eager"], err)
        d["max_rel_vs_eager"] = max(d["max_rel_vs_eager"], err / scale if scale > 0 else err)
        close = torch.allclose(o64, e64, rtol=tol, atol=tol, equal_nan=True)
        if refs is not None:
            r = refs[i]
            rmse = lambda a: (a - r)[finite].pow(2).mean().sqrt().item() if finite.any() else 0.0  # noqa: E731
            rmse_o, rmse_e = rmse(o64), rmse(e64)
            d["max_abs_vs_fp64"] = max(d["max_abs_vs_fp64"] or 0.0, (o64 - r)[finite].abs().max().item()
                                       if finite.any() else 0.0)
            d["rmse_vs_fp64"] = max(d["rmse_vs_fp64"] or 0.0, rmse_o)
            d["eager_rmse_vs_fp64"] = max(d["eager_rmse_vs_fp64"] or 0.0, rmse_e)
            close = close or rmse_o <= 3 * rmse_e + tol / 10
        d["ok"] = d["ok"] and close and not d["nan_mismatch"]
    return d


def _spread(times: list[float]) -> dict:
    ms = sorted(1000 * t for t in times)
    deciles = statistics.quantiles(ms, n=10) if len(ms) >= 2 else [ms[0]] * 9
    return {"median_ms": statistics.median(ms), "min_ms": ms[0], "max_ms": ms[-1], "p10_ms": deciles[0],
            "p90_ms": deciles[-1], "calls": len(ms)}


def steady_process(spec: str, backends: list[str], rounds: int, per_round: int, warmup: int) -> dict:
    import torch

    from ember.tools import targets

    fns, outs, failures = {}, {}, {}
    with torch.no_grad():
        base = targets.load(spec)
        eager_out = base.model(*base.inputs)
        try:
            model64 = base.model.double() if isinstance(base.model, torch.nn.Module) else base.model
            ref64 = model64(*_to_fp64(base.inputs))
        except Exception as e:  # some models do not run in float64; the eager comparison stays
            ref64, fp64_note = None, f"no fp64 reference: {type(e).__name__}: {e}"
        else:
            fp64_note = None
        for backend in backends:
            target = targets.load(spec)  # same seed: identical weights and inputs
            try:
                fn = _compile(target.model, backend)
                outs[backend] = fn(*target.inputs)
                for _ in range(warmup):
                    fn(*target.inputs)
                fns[backend] = (fn, target.inputs)
            except Exception as e:  # one backend failing must not lose the others' results
                failures[backend] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        times = {b: [] for b in fns}
        order = list(fns)
        for r in range(rounds):
            for backend in order[r % len(order):] + order[:r % len(order)] if order else []:
                fn, inputs = fns[backend]
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    fn(*inputs)
                    times[backend].append(time.perf_counter() - t0)
    result = {"threads": torch.get_num_threads(), "torch": torch.__version__, "fp64_note": fp64_note,
              "backends": {}}
    for backend in backends:
        if backend in failures:
            result["backends"][backend] = {"error": failures[backend]}
        else:
            result["backends"][backend] = {**_spread(times[backend]),
                                           "errors": _errors(outs[backend], eager_out, ref64)}
    return result


# ----------------------------------------------------------------------------- orchestration

class Progress:
    """One line on stderr while a measurement process runs: redrawn with the elapsed time
    on a terminal, printed once at start and once at the end otherwise."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()

    def run(self, label: str, fn):
        start = time.perf_counter()
        done = threading.Event()

        def redraw():
            while not done.wait(0.25):
                self.stream.write(f"\r[ember bench] {label} ... {time.perf_counter() - start:5.1f} s")
                self.stream.flush()

        if self.tty:
            ticker = threading.Thread(target=redraw, daemon=True)
            ticker.start()
        else:
            print(f"[ember bench] {label} ...", file=self.stream, flush=True)
        try:
            return fn()
        finally:
            done.set()
            line = f"[ember bench] {label}: {time.perf_counter() - start:.1f} s"
            print("\r" + line + " " * 10 if self.tty else line, file=self.stream, flush=True)


def run_process(args: list[str], env: dict, timeout: float) -> dict:
    """Runs one measurement process in its own session (so that a timeout kills Inductor's
    compile workers too) and returns its result line."""
    cmd = [sys.executable, "-m", "ember.tools.bench"] + args
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"timeout after {timeout:.0f} s"}
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    lines = [ln for ln in (stderr or stdout).strip().splitlines() if ln.strip()]
    return {"error": f"exit {proc.returncode}: {lines[-1] if lines else 'no output'}",
            "stderr_tail": "\n".join(lines[-20:])}


def _env(cache_dir: str) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
               TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"),
               EMBER_CACHE_DIR=os.path.join(cache_dir, "ember"))
    # Warm means this machine's disk cache; never a remote one.
    env.pop("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", None)
    env.pop("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", None)
    return env


def absolute_spec(spec: str) -> str:
    """Measurement processes may run elsewhere: a file TARGET becomes an absolute path."""
    if ":" not in spec:
        return spec
    path, factory = spec.rsplit(":", 1)
    return f"{os.path.abspath(path)}:{factory}"


def run(spec: str, backends: list[str], iters: int = 100, rounds: int = 10, warmup: int = 5,
        timeout: float = 900, first_call: bool = True, progress: Progress | None = None) -> dict:
    from ember.tools.doctor import cpu_name
    from ember.tools.targets import describe

    progress = progress or Progress()
    spec_abs = absolute_spec(spec)
    rounds = max(1, min(rounds, iters))
    per_round = max(1, iters // rounds)
    cache_dir = tempfile.mkdtemp(prefix="ember_bench_")
    results = {b: {"first_call": {}} for b in backends}
    try:
        env = _env(cache_dir)
        if first_call:
            for backend in backends:
                for kind in ("cold",) if backend == "eager" else ("cold", "warm"):
                    what = "first call" if backend == "eager" else f"{kind} first call (compiling)" \
                        if kind == "cold" else f"{kind} first call (cache hit)"
                    results[backend]["first_call"][kind] = progress.run(
                        f"{describe(spec)} / {backend}: {what}",
                        lambda: run_process(["first_call", spec_abs, backend, "--warmup", str(warmup)], env,
                                            timeout))
        steady = progress.run(
            f"{describe(spec)}: steady state, {', '.join(backends)} interleaved "
            f"({rounds} rounds x {per_round} calls)",
            lambda: run_process(["steady", spec_abs, ",".join(backends), "--rounds", str(rounds),
                                 "--per-round", str(per_round), "--warmup", str(warmup)], env, timeout))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)

    for backend in backends:
        results[backend]["steady"] = steady.get("backends", {}).get(backend, {"error": steady.get("error")})
    eager_median = results.get("eager", {}).get("steady", {}).get("median_ms")
    for backend, r in results.items():
        median = r["steady"].get("median_ms")
        r["speedup_vs_eager"] = eager_median / median if eager_median and median else None
    any_first = next((fc for r in results.values() for fc in r["first_call"].values() if "torch" in fc), {})
    return {
        "target": spec,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform()},
        "torch": steady.get("torch") or any_first.get("torch"),
        "threads": steady.get("threads") or any_first.get("threads"),
        "python": platform.python_version(),
        "settings": {"iters": per_round * rounds, "rounds": rounds, "per_round": per_round, "warmup": warmup,
                     "grad": False},
        "memory_note": MEMORY_NOTE,
        "fp64_note": steady.get("fp64_note"),
        "steady_error": steady.get("error"),
        "backends": results,
    }


# ----------------------------------------------------------------------------- output

def _fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


def _peak_mb(r: dict):
    fc = r["first_call"]
    return (fc.get("warm") or fc.get("cold") or {}).get("peak_rss_delta_mb")


NOISY = 1.5  # p90 / p10 of steady-state calls above which timings are flagged


def noise(report: dict) -> float:
    spreads = [r["steady"]["p90_ms"] / r["steady"]["p10_ms"] for r in report["backends"].values()
               if r["steady"].get("p10_ms")]
    return max(spreads, default=1.0)


def format_table(report: dict) -> str:
    s = report["settings"]
    header = (f"ember bench {report['target']}: {report['machine']['cpu']}, {report['threads']} threads, "
              f"torch {report['torch']}; steady state: {s['rounds']} interleaved rounds x {s['per_round']} "
              f"calls per backend after {s['warmup']} warmup calls, under torch.no_grad()")
    cols = ["backend", "median ms", "p10-p90 ms", "speedup", "cold 1st s", "warm 1st s", "in backend s",
            "graphs", "kernels", "max|err| eager", "max|err| fp64", "numerics", "peak RSS MB"]
    rows = []
    errors = []
    for name, r in report["backends"].items():
        st, fc = r["steady"], r["first_call"]
        cold, warm = fc.get("cold", {}), fc.get("warm", {})
        for label, d in (("steady", st), ("cold", cold), ("warm", warm)):
            if d.get("error"):
                errors.append(f"{name} {label}: {d['error']}")
        e = st.get("errors", {})
        if st.get("error"):
            rows.append([name, "error"] + [""] * (len(cols) - 2))
            continue
        rows.append([
            name, f"{st['median_ms']:.3f}", f"{st['p10_ms']:.3f}-{st['p90_ms']:.3f}",
            _fmt(r["speedup_vs_eager"], ".2f") + "x",
            _fmt(cold.get("first_call_s"), ".3f"), _fmt(warm.get("first_call_s"), ".3f"),
            _fmt(cold.get("backend_s"), ".3f"), _fmt(cold.get("graphs"), "d"), _fmt(cold.get("kernels"), "d"),
            _fmt(e.get("max_abs_vs_eager"), ".1e"), _fmt(e.get("max_abs_vs_fp64"), ".1e"),
            "ok" if e.get("ok") else "MISMATCH", _fmt(_peak_mb(r), "+.1f"),
        ])
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    out = [header, "", line(cols), line(["-" * w for w in widths])] + [line(r) for r in rows]
    out += ["", "speedup: eager median / backend median. cold/warm 1st s: first call in a fresh process with "
            "empty / filled compile caches. in backend s: Dynamo's time inside the backend, cold process.",
            "max|err|: largest absolute difference from eager (fp32) and from the fp64 reference. numerics: "
            "allclose(1e-4), else RMSE vs fp64 within 3x eager's. " + MEMORY_NOTE + "."]
    if noise(report) > NOISY:
        out.append(f"warning: noisy timings (p90/p10 up to {noise(report):.1f}x): something else is using this "
                   "machine's cores; medians and speedups are unreliable. Rerun on a quiet machine or with "
                   "more --iters.")
    if report.get("fp64_note"):
        out.append(report["fp64_note"])
    out += [f"error: {e}" for e in errors]
    return "\n".join(out)


COLORS = {"eager": "#8c8c8c", "inductor": "#e6862e", "ember": "#c8102e"}


def _tick_label(report: dict, name: str) -> str:
    cold = report["backends"][name]["first_call"].get("cold", {})
    if cold.get("kernels") is None:
        return name if name != "eager" else "eager\n(no compile)"
    return f"{name}\n{cold['graphs']} graph(s), {cold['kernels']} kernels"


def draw_png(report: dict, path: str) -> None:
    fig = draw_figure(report)
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_figure(report: dict):
    """The chart as a matplotlib figure: steady-state latency, and first calls."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, r in report["backends"].items() if not r["steady"].get("error")]
    colors = [COLORS.get(n, f"C{i}") for i, n in enumerate(names)]
    fig, (lat, comp) = plt.subplots(1, 2, figsize=(12, 5.2), gridspec_kw={"width_ratios": [1, 1.25]})

    medians = [report["backends"][n]["steady"]["median_ms"] for n in names]
    lo = [m - report["backends"][n]["steady"]["p10_ms"] for n, m in zip(names, medians)]
    hi = [report["backends"][n]["steady"]["p90_ms"] - m for n, m in zip(names, medians)]
    bars = lat.bar(names, medians, color=colors, yerr=[lo, hi], capsize=8, error_kw={"elinewidth": 1.5})
    top = max((m + h for m, h in zip(medians, hi)), default=1.0)
    for bar, n, m, h in zip(bars, names, medians, hi):
        speed = report["backends"][n]["speedup_vs_eager"]
        label = f"{m:.3g} ms" + (f"\n{speed:.2f}x vs eager" if speed and n != "eager" else "")
        lat.text(bar.get_x() + bar.get_width() / 2, m + h + 0.02 * top, label, ha="center", va="bottom",
                 fontsize=10)
    lat.set_ylim(0, top * 1.3)
    lat.set_ylabel("milliseconds per call (lower is better)")
    lat.set_title("Steady-state latency: median, whiskers p10-p90")
    lat.grid(axis="y", alpha=0.3)

    kinds = [("cold", "cold first call (empty caches)", 1.0), ("warm", "warm first call (cache hit)", 0.5)]
    width = 0.38
    values = []
    for k, (kind, label, alpha) in enumerate(kinds):
        xs, ys, cs = [], [], []
        for i, n in enumerate(names):
            v = report["backends"][n]["first_call"].get(kind, {}).get("first_call_s")
            if v is not None:
                xs.append(i + (k - 0.5) * width)
                ys.append(v)
                cs.append(COLORS.get(n, f"C{i}"))
        values += ys
        b = comp.bar(xs, ys, width, color=cs, alpha=alpha, edgecolor="black", linewidth=0.6,
                     hatch="" if kind == "cold" else "//", label=label)
        for bar, v in zip(b, ys):
            comp.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.2f} s", ha="center", va="bottom", fontsize=9)
    comp.set_xticks(range(len(names)), [_tick_label(report, n) for n in names])
    if values and max(values) / max(min(values), 1e-6) > 30:
        comp.set_yscale("log")
        comp.set_ylim(min(values) / 2, max(values) * 3)
    elif values:
        comp.set_ylim(0, max(values) * 1.2)
    comp.set_ylabel("seconds, first call incl. compile" + (" (log scale)" if comp.get_yscale() == "log" else ""))
    comp.set_title("Compile time: first call in a fresh process", pad=24)
    from matplotlib.patches import Patch

    # Above the plot, not inside it: inside, it covered the tallest bar's label (Inductor's
    # cold first call read "0.92 s" for 10.92 s).
    comp.legend(handles=[Patch(facecolor="white", edgecolor="black", label=kinds[0][1]),
                         Patch(facecolor="white", edgecolor="black", hatch="//", label=kinds[1][1])],
                loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=9, frameon=False)
    comp.grid(axis="y", alpha=0.3)
    if not values:
        comp.text(0.5, 0.5, "first calls not measured (--no-first-call)", ha="center", transform=comp.transAxes)

    s = report["settings"]
    fig.suptitle(f"ember bench {report['target']} - {report['machine']['cpu']}, {report['threads']} threads, "
                 f"torch {report['torch']}", fontsize=12)
    fig.text(0.5, 0.01, f"steady state: {s['rounds']} interleaved rounds x {s['per_round']} calls per backend "
             f"after {s['warmup']} warmup calls, torch.no_grad(); {report['date']}", ha="center", fontsize=8,
             color="#555555")
    if noise(report) > NOISY:
        lat.text(0.5, 0.97, f"noisy: p90/p10 up to {noise(report):.1f}x (machine busy)", ha="center", va="top",
                 transform=lat.transAxes, color="#b00000", fontsize=9)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    return fig


def main(spec: str, backends: list[str], iters=100, rounds=10, warmup=5, json_path=None, png_path=None,
         timeout=900, first_call=True, html_path=None) -> int:
    from ember.tools import targets

    targets.check(spec)  # a TARGET that cannot load fails here, before any process starts
    report = run(spec, backends, iters=iters, rounds=rounds, warmup=warmup, timeout=timeout,
                 first_call=first_call)
    print(format_table(report))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report, f, indent=2)
        print(f"\nwrote {json_path}")
    if png_path:
        try:
            draw_png(report, png_path)
            print(f"wrote {png_path}")
        except ImportError:
            print("no chart: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
    if html_path:
        from ember.tools import report as html_report

        # ember's graphs, kernels and their times, measured in this process after the benchmark's.
        Progress().run(f"{targets.describe(spec)}: ember report",
                       lambda: html_report.write(spec, html_path, bench=report))
        print(f"wrote {html_path}")
    failed = [n for n, r in report["backends"].items()
              if r["steady"].get("error") or not r["steady"].get("errors", {}).get("ok", False)]
    return 1 if failed else 0


def _process_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ember.tools.bench")
    sub = parser.add_subparsers(dest="kind", required=True)
    fc = sub.add_parser("first_call")
    fc.add_argument("target")
    fc.add_argument("backend")
    fc.add_argument("--warmup", type=int, default=5)
    st = sub.add_parser("steady")
    st.add_argument("target")
    st.add_argument("backends")
    st.add_argument("--rounds", type=int, default=10)
    st.add_argument("--per-round", type=int, default=10)
    st.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    if args.kind == "first_call":
        result = first_call_process(args.target, args.backend, args.warmup)
    else:
        result = steady_process(args.target, args.backends.split(","), args.rounds, args.per_round, args.warmup)
    print(RESULT_TAG + json.dumps(result), flush=True)


if __name__ == "__main__":
    _process_main(sys.argv[1:])

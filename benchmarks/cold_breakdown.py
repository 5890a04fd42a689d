"""Where ember's cold first call goes, per suite model (issue 24, acceptance 4).

    python benchmarks/cold_breakdown.py --models gpt2,t5 [--runs 3] [--cpus 0] [--size small]

Each run is a fresh process on empty cache directories (EMBER_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR
in a new temporary directory), one thread, pinned to --cpus. The child times, in wall and
CPU seconds (CPU: this process's user+sys, all threads; the C compiler's processes are
counted apart, from RUSAGE_CHILDREN and a wrapper that logs each compiler run):

    first_call   torch.compile + the first call, as the suite's runner times it
    trace        ember's front end: Dynamo graph -> ATen graph (aten_trace.trace)
    import       ATen graph -> graph text (import_graph)
    compile      compile_graph less import: the C++ pipeline, starting the C compiler,
                 the runner (the C compiler runs in the background from here)
    cache_save   the graph cache's entry (graph_cache.save)
    run          the first call of the compiled graph: waiting for the C compiler, loading,
                 the kernels' first run
    dynamo       the rest: Dynamo's tracing and guards, eager's share
    cc           each C compiler run, by kind (version, target, flag probe, unit, link,
                 shared object), wall and CPU seconds

The C compiler is wrapped (EMBER_CC, a shell script running /usr/bin/time) so that each run
is logged; the wrapper costs a few milliseconds a run. Rows print as JSON lines; the
medians over --runs as a table.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "COLD_BREAKDOWN "


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class _Timer:
    """Wall and CPU seconds spent inside the wrapped functions (outermost calls only)."""

    def __init__(self):
        self.wall = 0.0
        self.cpu = 0.0
        self.depth = 0
        self.outer = None  # a timer whose calls may contain this one's
        self.nested_wall = 0.0
        self.nested_cpu = 0.0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            self.depth += 1
            w0, c0 = time.perf_counter(), _cpu_self()
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    wall, cpu = time.perf_counter() - w0, _cpu_self() - c0
                    self.wall += wall
                    self.cpu += cpu
                    if self.outer is not None and self.outer.depth > 0:
                        self.nested_wall += wall
                        self.nested_cpu += cpu
        return timed


def child_floor(model_name: str, size: str) -> dict:
    """Dynamo's floor: torch.compile(backend="eager")'s first call."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, os.path.dirname(HERE))
    from benchmarks.suite import registry
    from benchmarks.suite.registry import call, tensors

    model, inputs = registry.get(model_name).build("cpu", torch.float32, size)
    model.eval()
    w0, c0 = time.perf_counter(), _cpu_self()
    fn = torch.compile(model, backend="eager")
    with torch.no_grad():
        tensors(call(fn, inputs))
    return {"model": model_name, "backend": "dynamo", "first_call_s": time.perf_counter() - w0,
            "first_call_cpu_s": _cpu_self() - c0}


def _steady_ms(step, calls: int) -> float | None:
    """The median of `calls` calls, in CPU ms of this thread (the suite's clock at one thread)."""
    if calls <= 0:
        return None
    times = []
    for _ in range(calls):
        t0 = time.thread_time()
        step()
        times.append(1000 * (time.thread_time() - t0))
    return statistics.median(times)


def child(model_name: str, size: str, cc_log: str, steady: int = 0) -> dict:
    t_process = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, os.path.dirname(HERE))
    from benchmarks.suite import registry
    from benchmarks.suite.registry import call, tensors

    entry = registry.get(model_name)
    model, inputs = entry.build("cpu", torch.float32, size)
    model.eval()

    import ember
    from ember import backend, compiler
    from ember.caches import graph_cache
    from ember.frontend import aten_trace

    timers = {k: _Timer() for k in ("trace", "import", "compile_graph", "cache_save", "run")}
    timers["import"].outer = timers["compile_graph"]
    aten_trace.trace = timers["trace"].wrap(aten_trace.trace)
    backend.import_graph = timers["import"].wrap(backend.import_graph)
    compiler.import_graph = timers["import"].wrap(compiler.import_graph)
    backend.compile_graph = timers["compile_graph"].wrap(backend.compile_graph)
    graph_cache.save = timers["cache_save"].wrap(graph_cache.save)
    from ember.runtime import runner as runner_mod
    original_call = runner_mod.GraphRunner.__call__
    runner_mod.GraphRunner.__call__ = timers["run"].wrap(original_call)

    w0, c0, k0 = time.perf_counter(), _cpu_self(), _cpu_children()
    fn = torch.compile(model, backend="ember")
    with torch.no_grad():
        tensors(call(fn, inputs))
    w1, c1, k1 = time.perf_counter(), _cpu_self(), _cpu_children()
    runner_mod.GraphRunner.__call__ = original_call

    st = ember.stats()
    row = {"model": model_name, "backend": "ember", "first_call_s": w1 - w0, "first_call_cpu_s": c1 - c0,
           "cc_children_cpu_s": k1 - k0, "graphs": st["graphs_compiled"], "fallbacks": st["eager_fallbacks"],
           "compile_seconds": st["compile_seconds"]}
    for k, t in timers.items():
        row[k + "_s"], row[k + "_cpu_s"] = t.wall, t.cpu
    # compile_graph imports the graph itself on AOTAutograd's path (nested), ember's front
    # end before calling it.
    row["compile_s"] = row.pop("compile_graph_s") - timers["import"].nested_wall
    row["compile_cpu_s"] = row.pop("compile_graph_cpu_s") - timers["import"].nested_cpu
    row["dynamo_s"] = row["first_call_s"] - sum(row[k + "_s"] for k in ("trace", "import", "compile", "cache_save", "run"))
    row["cc"] = _read_cc_log(cc_log)
    with torch.no_grad():
        for _ in range(3):
            call(fn, inputs)  # warm-up
        row["steady_ms"] = _steady_ms(lambda: call(fn, inputs), steady)
    row["process_s"] = time.perf_counter() - t_process
    return row


def _kind(argv: list[str]) -> str:
    if "--version" in argv:
        return "version"
    if "--help=target" in argv:
        return "target"
    if "/dev/null" in argv:
        return "flag_probe"
    if "-c" in argv:
        return "unit"
    if any(a.endswith(".o") for a in argv):
        return "link"
    if any(a.endswith(".h") for a in argv):
        return "header"
    return "shared_object"


def _read_cc_log(path: str) -> dict:
    runs: dict = {}
    if not os.path.exists(path):
        return runs
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 3)
            if len(parts) < 4 or parts[0] == "Command":  # "Command exited with non-zero status"
                continue
            wall, user, sys_, argv = float(parts[0]), float(parts[1]), float(parts[2]), parts[3].split()
            r = runs.setdefault(_kind(argv), {"n": 0, "wall_s": 0.0, "cpu_s": 0.0})
            r["n"] += 1
            r["wall_s"] += wall
            r["cpu_s"] += user + sys_
    return runs


def _wrapper(directory: str, cc: str, log: str) -> str:
    path = os.path.join(directory, "cc")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec /usr/bin/time -a -o {log} -f "%e %U %S $*" {cc} "$@"\n')
    os.chmod(path, 0o755)
    return path


def run_one(model: str, size: str, cpus: str, python: str, backend: str = "ember", steady: int = 0) -> dict:
    work = tempfile.mkdtemp(prefix="cold-breakdown-")
    try:
        log = os.path.join(work, "cc.log")
        cc = shutil.which(os.environ.get("EMBER_CC") or "cc") or shutil.which("gcc")
        env = {**os.environ, "EMBER_CACHE_DIR": os.path.join(work, "ember"),
               "TORCHINDUCTOR_CACHE_DIR": os.path.join(work, "inductor"), "OMP_NUM_THREADS": "1",
               "EMBER_CC": _wrapper(work, cc, log)}
        cmd = ["taskset", "-c", cpus, python, os.path.abspath(__file__), "--child", model, "--size", size,
               "--cc-log", log, "--backend", backend, "--steady", str(steady)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        for line in out.stdout.splitlines():
            if line.startswith(TAG):
                return json.loads(line[len(TAG):])
        return {"model": model, "error": (out.stderr or out.stdout)[-2000:]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _median_row(rows: list[dict]) -> dict:
    keys = [k for k in rows[0] if isinstance(rows[0][k], (int, float)) and all(r.get(k) is not None for r in rows)]
    med = {k: statistics.median(r[k] for r in rows) for k in keys}
    kinds = sorted({k for r in rows for k in r.get("cc", {})})
    med["cc"] = {k: {f: statistics.median(r.get("cc", {}).get(k, {}).get(f, 0) for r in rows)
                     for f in ("n", "wall_s", "cpu_s")} for k in kinds}
    return med


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt2,t5,bert,qwen2,resnet18,vit")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--size", default="small")
    p.add_argument("--cpus", default="0")
    p.add_argument("--out", default="")
    p.add_argument("--backend", default="ember", choices=("ember", "dynamo"),
                   help="dynamo: torch.compile(backend='eager'), Dynamo's floor (first call only)")
    p.add_argument("--steady", type=int, default=0, help="then time this many calls (median, thread CPU ms)")
    p.add_argument("--child", default="")
    p.add_argument("--cc-log", default="")
    args = p.parse_args(argv)
    if args.child:
        row = (child_floor(args.child, args.size) if args.backend == "dynamo"
               else child(args.child, args.size, args.cc_log, args.steady))
        print(TAG + json.dumps(row), flush=True)
        return
    out = open(args.out, "a") if args.out else None
    print(f"{'model':10} {'first':>6} {'cpu':>5} {'trace':>6} {'import':>6} {'compile':>7} {'save':>5} {'run':>6} "
          f"{'dynamo':>6} {'steady':>7}  cc runs: kind n wall/cpu  (seconds; cpu: this process + the C compiler's; "
          f"the phases' cpu in the JSON rows)")
    for model in args.models.split(","):
        rows = []
        for _ in range(args.runs):
            row = run_one(model, args.size, args.cpus, sys.executable, args.backend, args.steady)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
            if "error" in row:
                print(model, "failed:", row["error"][-500:])
                break
            rows.append(row)
        if not rows:
            continue
        m = _median_row(rows)
        if args.backend == "dynamo":
            print(f"{model:10} first call {m['first_call_s']:6.2f} s, CPU {m['first_call_cpu_s']:6.2f} s", flush=True)
            continue
        cc = "  ".join(f"{k} {v['n']:.0f} {v['wall_s']:.2f}/{v['cpu_s']:.2f}" for k, v in m["cc"].items())
        steady = f"{m['steady_ms']:7.2f}" if m.get("steady_ms") is not None else f"{'-':>7}"
        print(f"{model:10} {m['first_call_s']:6.2f} {m['first_call_cpu_s'] + m['cc_children_cpu_s']:5.2f} "
              f"{m['trace_s']:6.2f} {m['import_s']:6.2f} {m['compile_s']:7.2f} {m['cache_save_s']:5.2f} {m['run_s']:6.2f} "
              f"{m['dynamo_s']:6.2f} {steady}  {cc}", flush=True)

if __name__ == "__main__":
    main()

"""Side-by-side CPU benchmark of eager, TorchInductor and ember on the built-in example models.

Every measurement runs in a fresh process (as the Inductor anchor's were measured):

  cold   new process, empty compile caches (a new TORCHINDUCTOR_CACHE_DIR / EMBER_CACHE_DIR)
  warm   new process, the cache directory the cold process filled

Each process times its first call (compile included), records the time spent inside the
backend, warms up, times steady-state calls under torch.no_grad(), and compares its output with
eager run on the same input in the same process.

Usage:
  python benchmarks/cpu_models.py                                  # tiny_gpt2, small_cnn
  python benchmarks/cpu_models.py --models mlp,ln_gelu --backends eager,ember --iters 50
  python benchmarks/cpu_models.py child MODEL BACKEND --iters N --warmup W   # one process (internal)
"""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODELS = ["tiny_gpt2", "small_cnn"]
DEFAULT_BACKENDS = ["eager", "inductor", "ember"]
RESULT_TAG = "BENCH_RESULT "


# ----------------------------------------------------------------------------- child process

def _use_source_tree_if_not_installed():
    if importlib.util.find_spec("ember") is None:
        sys.path.insert(0, os.path.join(REPO, "python"))


def _load_examples():
    try:
        from ember import examples
        return examples
    except ImportError:
        # The package may not import (e.g. its C++ core is not built); eager and Inductor
        # still only need the model definitions, which have no dependency on it.
        path = os.path.join(REPO, "python", "ember", "examples.py")
        spec = importlib.util.spec_from_file_location("ember_examples", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def _seconds_from_stats(stats):
    """ember.last_compile_stats() is young; accept a number, a mapping or an object."""
    if isinstance(stats, (int, float)):
        return float(stats)
    for key in ("backend_seconds", "total_s", "backend_s", "seconds", "total"):
        value = stats.get(key) if isinstance(stats, dict) else getattr(stats, key, None)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _ember_backend_seconds():
    try:
        import ember
        stats = ember.last_compile_stats()
    except Exception as e:  # not provided (yet), or failed: report, don't crash the run
        return None, f"n/a ({type(e).__name__})"
    try:
        json.dumps(stats)
    except TypeError:
        stats = repr(stats)[:2000]
    return _seconds_from_stats(stats), stats


def _timed_seconds(name):
    """Total of one of Dynamo's compile-time counters over every graph in this process:
    "OutputGraph.call_user_compiler" is the time inside the backend callable (AOTAutograd and
    the compiler), the same measure for every backend; "compile_fx_inner" is Inductor proper."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
        times = compilation_time_metrics.get(name, [])
        return float(sum(times)) if times else None
    except Exception:
        return None


def _max_rel_err(a, b):
    a, b = a.detach().double(), b.detach().double()
    denom = b.abs().max().item()
    err = (a - b).abs().max().item()
    return err / denom if denom > 0 else err


def child(model_name, backend, iters, warmup):
    _use_source_tree_if_not_installed()
    import torch

    if backend == "ember":
        import ember  # noqa: F401  registers the backend when run from a source tree
    examples = _load_examples()
    model, inputs = examples.get(model_name)

    with torch.no_grad():
        reference = model(*inputs)
    fn = model if backend == "eager" else torch.compile(model, backend=backend)

    with torch.no_grad():
        t0 = time.perf_counter()
        first_out = fn(*inputs)
        first_call_s = time.perf_counter() - t0

        for _ in range(warmup):
            fn(*inputs)
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            out = fn(*inputs)
            times.append(time.perf_counter() - t0)

    result = {
        "model": model_name,
        "backend": backend,
        "first_call_s": first_call_s,
        "median_ms": 1000 * statistics.median(times),
        "min_ms": 1000 * min(times),
        "max_ms": 1000 * max(times),
        "iters": iters,
        "warmup": warmup,
        "max_rel_err": max(_max_rel_err(first_out, reference), _max_rel_err(out, reference)),
        "threads": torch.get_num_threads(),
        "dynamo_backend_s": None if backend == "eager" else _timed_seconds("OutputGraph.call_user_compiler"),
    }
    # The compiler's own share, as the compiler reports it.
    if backend == "ember":
        result["backend_s"], result["backend_stats"] = _ember_backend_seconds()
    elif backend == "inductor":
        result["backend_s"] = _timed_seconds("compile_fx_inner")
    else:
        result["backend_s"] = None
    print(RESULT_TAG + json.dumps(result), flush=True)


def steady_child(model_name, backends, rounds, per_round, warmup):
    """Steady state of every backend in one process, in interleaved rounds.

    Machine speed drifts (shared hosts, frequency changes); timing the backends one
    after another in separate processes turns that drift into fake speedups. Here
    each round runs every backend (order rotating), so all see the same conditions.
    """
    _use_source_tree_if_not_installed()
    import torch

    if "ember" in backends:
        import ember  # noqa: F401
    examples = _load_examples()
    fns, refs, errs = {}, {}, {}
    for backend in backends:
        model, inputs = examples.get(model_name)  # same seed: identical weights and inputs
        with torch.no_grad():
            refs[backend] = model(*inputs)
        fns[backend] = (model if backend == "eager" else torch.compile(model, backend=backend), inputs)
    times = {b: [] for b in backends}
    with torch.no_grad():
        for backend, (fn, inputs) in fns.items():
            out = fn(*inputs)
            errs[backend] = _max_rel_err(out, refs[backend])
            for _ in range(warmup):
                fn(*inputs)
        for r in range(rounds):
            order = backends[r % len(backends):] + backends[:r % len(backends)]
            for backend in order:
                fn, inputs = fns[backend]
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    fn(*inputs)
                    times[backend].append(time.perf_counter() - t0)
    result = {b: {"median_ms": 1000 * statistics.median(t), "min_ms": 1000 * min(t), "max_ms": 1000 * max(t),
                  "calls": len(t), "max_rel_err": errs[b]} for b, t in times.items()}
    print(RESULT_TAG + json.dumps({"model": model_name, "steady": result, "rounds": rounds,
                                   "per_round": per_round, "threads": torch.get_num_threads()}), flush=True)


# ----------------------------------------------------------------------------- orchestrator

def run_process(cmd, env, timeout):
    """Runs one measurement process and returns its result line as a dict.

    The process gets a session of its own, so that on timeout the whole group
    (Inductor's compile workers included) can be killed."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return {"error": f"timeout after {timeout} s", "process_wall_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            result = json.loads(line[len(RESULT_TAG):])
            result["process_wall_s"] = wall
            return result
    return {"error": f"exit {proc.returncode}: " + (stderr or stdout)[-1500:], "process_wall_s": wall}


def measure_steady(model, backends, args):
    cache_dir = tempfile.mkdtemp(prefix=f"bench_{model}_steady_")
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
               EMBER_CACHE_DIR=os.path.join(cache_dir, "ember"))
    cmd = [sys.executable, os.path.abspath(__file__), "steady", model, ",".join(backends),
           "--rounds", str(args.rounds), "--iters", str(args.iters), "--warmup", str(args.warmup)]
    try:
        return run_process(cmd, env, args.timeout)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def run_child(model, backend, cache_dir, args):
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
               TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"),
               EMBER_CACHE_DIR=os.path.join(cache_dir, "ember"))
    # The FX graph and AOTAutograd caches live under TORCHINDUCTOR_CACHE_DIR; keep them on
    # (their hits are what a warm start is) but make sure no remote cache answers.
    env.pop("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", None)
    env.pop("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", None)
    cmd = [sys.executable, os.path.abspath(__file__), "child", model, backend,
           "--iters", str(args.iters), "--warmup", str(args.warmup)]
    return run_process(cmd, env, args.timeout)


def measure(model, backend, args):
    cache_dir = tempfile.mkdtemp(prefix=f"bench_{model}_{backend}_")
    try:
        cold = run_child(model, backend, cache_dir, args)
        warm = run_child(model, backend, cache_dir, args)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return {"model": model, "backend": backend, "cold": cold, "warm": warm}


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def table(rows):
    def steady(row):
        return row.get("steady", {}).get("median_ms")

    baseline = {}
    for row in rows:
        if row["backend"] in ("eager", "inductor"):
            baseline[(row["model"], row["backend"])] = steady(row)

    lines = [
        "| model | backend | cold first call s | warm first call s | in backend s | in compiler s "
        "| median ms (min-max) | vs eager | vs inductor | max rel err |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cold, warm = row["cold"], row["warm"]
        errors = [r["error"] for r in (cold, warm) if "error" in r]
        if errors and steady(row) is None:
            first_line = errors[0].strip().splitlines()[-1][:120] if errors[0].strip() else "error"
            lines.append(f"| {row['model']} | {row['backend']} | error: {first_line} | | | | | | | |")
            continue
        median = steady(row)
        src = row["steady"]
        ratios = []
        for base in ("eager", "inductor"):
            b = baseline.get((row["model"], base))
            ratios.append(f"{b / median:.2f}x" if b and median else "n/a")
        err = max([r.get("max_rel_err", 0.0) for r in (cold, warm) if "error" not in r] + [src["max_rel_err"]])
        lines.append(
            f"| {row['model']} | {row['backend']} | {fmt(cold.get('first_call_s'), '.3f')} "
            f"| {fmt(warm.get('first_call_s'), '.3f')} | {fmt(cold.get('dynamo_backend_s'), '.2f')} "
            f"| {fmt(cold.get('backend_s'), '.2f')} "
            f"| {median:.3f} ({src['min_ms']:.3f}-{src['max_ms']:.3f}) "
            f"| {ratios[0]} | {ratios[1]} | {err:.2e} |")
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated names from ember.examples.MODELS")
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS))
    parser.add_argument("--iters", type=int, default=10, help="timed calls per backend per round")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved steady-state rounds")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls before timing")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per child process")
    parser.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "cpu_models.json"))
    args = parser.parse_args(argv)

    models = [m for m in args.models.split(",") if m]
    backends = [b for b in args.backends.split(",") if b]
    rows = []
    for model in models:
        for backend in backends:
            print(f"# {model} / {backend}: cold and warm first call ...", file=sys.stderr, flush=True)
            rows.append(measure(model, backend, args))
        print(f"# {model}: steady state, all backends interleaved ...", file=sys.stderr, flush=True)
        steady = measure_steady(model, backends, args)
        for row in rows:
            if row["model"] == model:
                row["steady"] = steady.get("steady", {}).get(row["backend"], {"error": steady.get("error")})

    import torch
    from ember.tools.doctor import cpu_name

    report = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform()},
        "torch": torch.__version__,
        "python": platform.python_version(),
        "command": " ".join([os.path.relpath(sys.argv[0], REPO)] + argv),
        "iters": args.iters,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "results": rows,
    }
    print(f"{report['machine']['cpu']}, {report['machine']['cores']} cores, torch {report['torch']}, "
          f"steady state: {args.rounds} interleaved rounds x {args.iters} calls per backend, "
          f"after {args.warmup} warmup calls\n")
    print(table(rows))
    print("\nin backend s: Dynamo's time inside the backend (AOTAutograd + compiler), cold process."
          "\nin compiler s: the compiler's own figure (ember.last_compile_stats(), Inductor's"
          " compile_fx_inner), cold process.\nSteady state (median, min-max) and speedups: all backends in one"
          " process, interleaved rounds.")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"\nwrote {args.out}")


def child_main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("backend")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    child(args.model, args.backend, args.iters, args.warmup)


def steady_main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("backends")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    steady_child(args.model, args.backends.split(","), args.rounds, args.iters, args.warmup)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_main(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "steady":
        steady_main(sys.argv[2:])
    else:
        main(sys.argv[1:])

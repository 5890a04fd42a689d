"""Cold and warm first calls, ember against TorchInductor, each in a fresh process.

  cold   a new process with empty caches (a new TORCHINDUCTOR_CACHE_DIR and EMBER_CACHE_DIR)
  warm   a new process with the caches the cold one filled: Inductor's FX graph and
         AOTAutograd caches; ember's graph cache (python/ember/caches/graph_cache.py) or its
         AOTAutogradCache entries (python/ember/caches/aot_cache.py), and its kernel cache

The first call is timed in the process (Dynamo, AOTAutograd or its cache, the compiler or
its cache, and the call itself); for training it is the first forward + backward (train
mode, dropout off, loss = mean of the squared outputs). Backends:
inductor, ember, ember-noaot (ember with aot_cache off: no AOTAutogradCache and no graph
cache, so a warm start traces and imports again, with the kernels from the kernel cache),
and ember-aot (ember with trace_inference off: AOTAutograd traces inference graphs too,
and its cache serves their warm starts, as before ember had its own front end). Warm processes run
round-robin over the backends, `--warm-runs` times, and the median is reported, so that
the load of a shared machine falls on every backend alike. Each process also checks its
result against eager on the same inputs (max relative error of the output; in training, of
the loss, and the relative L2 error of all gradients together).

Usage:
  python benchmarks/warm_start.py [--models gpt2,small_cnn] [--modes inference,training]
                                  [--backends inductor,ember,ember-aot,ember-noaot] [--warm-runs 3]
                                  [--dynamic] [--json out.json]
  python benchmarks/warm_start.py child MODEL MODE BACKEND static|dynamic   # one process (internal)
"""
import argparse
import copy
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_TAG = "WARM_BENCH "


def _rel_err(a, b):
    a, b = a.detach().double(), b.detach().double()
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / (scale if scale > 0 else 1.0)


def _in_backend_seconds():
    """Dynamo's time inside the backend callable (AOTAutograd or its cache + the compiler)."""
    from torch._dynamo.utils import compilation_time_metrics

    return float(sum(compilation_time_metrics.get("OutputGraph.call_user_compiler", [])))


def child(model_name, mode, backend, dynamic="static"):
    import torch

    if backend.startswith("ember"):
        import ember
    from ember import examples

    model, inputs = examples.get(model_name)
    if mode == "training":
        model.train()
        for m in model.modules():  # dropout would make the compiled and eager steps differ
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
    reference = copy.deepcopy(model)
    if backend == "ember-noaot":
        backend_fn = ember.make_backend(None, {"aot_cache": False})
    elif backend == "ember-aot":
        backend_fn = ember.make_backend(None, {"trace_inference": False})
    else:
        backend_fn = backend
    fn = torch.compile(model, backend=backend_fn, dynamic=True if dynamic == "dynamic" else None)

    t0 = time.perf_counter()
    if mode == "inference":
        with torch.no_grad():
            out = fn(*inputs)
    else:
        out = fn(*inputs)
        loss = out.float().square().mean()
        loss.backward()
    first_call_s = time.perf_counter() - t0

    if mode == "inference":
        with torch.no_grad():
            err = _rel_err(out, reference(*inputs))
    else:
        ref_loss = reference(*inputs).float().square().mean()
        ref_loss.backward()
        pairs = [(p.grad, r.grad) for p, r in zip(model.parameters(), reference.parameters()) if r.grad is not None]
        grads = torch.cat([g.flatten() for g, _ in pairs])
        ref_grads = torch.cat([g.flatten() for _, g in pairs])
        # The gradients as one vector (some, like a conv bias before BatchNorm, are ~0 alone).
        err = max(_rel_err(loss, ref_loss), ((grads - ref_grads).norm() / ref_grads.norm()).item())
    result = {"model": model_name, "mode": mode, "backend": backend, "first_call_s": first_call_s,
              "in_backend_s": _in_backend_seconds(), "max_rel_err": err}
    if backend.startswith("ember"):
        s = ember.stats()
        result["ember"] = {k: s[k] for k in ("graphs_compiled", "graphs_loaded", "aot_cache", "graph_cache",
                                             "front_end", "trace_seconds", "c_compiler_runs", "compile_seconds",
                                             "load_seconds")}
    print(RESULT_TAG + json.dumps(result), flush=True)


def run_child(model, mode, backend, cache_dir, timeout, dynamic=False):
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "torch"),
               EMBER_CACHE_DIR=os.path.join(cache_dir, "ember"))
    env.pop("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", None)
    env.pop("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", None)
    cmd = [sys.executable, os.path.abspath(__file__), "child", model, mode, backend,
           "dynamic" if dynamic else "static"]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    for line in reversed(r.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            result = json.loads(line[len(RESULT_TAG):])
            result["process_wall_s"] = time.perf_counter() - t0
            return result
    return {"error": f"exit {r.returncode}: " + (r.stderr or r.stdout)[-1500:]}


def measure(model, mode, backends, warm_runs, timeout, dynamic=False):
    dirs = {b: tempfile.mkdtemp(prefix=f"warm_{model}_{mode}_{b}_") for b in backends}
    rows = {b: {"model": model, "mode": mode, "backend": b, "warm": []} for b in backends}
    try:
        for b in backends:
            print(f"# {model} {mode} {b}: cold", file=sys.stderr, flush=True)
            rows[b]["cold"] = run_child(model, mode, b, dirs[b], timeout, dynamic)
        for i in range(warm_runs):
            for b in backends:
                print(f"# {model} {mode} {b}: warm {i + 1}/{warm_runs}", file=sys.stderr, flush=True)
                rows[b]["warm"].append(run_child(model, mode, b, dirs[b], timeout, dynamic))
    finally:
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)
    for row in rows.values():
        ok = [w["first_call_s"] for w in row["warm"] if "error" not in w]
        row["warm_first_call_s"] = statistics.median(ok) if ok else None
        row["warm_in_backend_s"] = statistics.median([w["in_backend_s"] for w in row["warm"] if "error" not in w]) \
            if ok else None
    return list(rows.values())


def fmt(v, spec=".2f"):
    return "n/a" if v is None else format(v, spec)


def table(rows):
    lines = ["| model | mode | backend | cold first call s | warm first call s (median) | warm in backend s "
             "| warm / Inductor warm | max rel err |", "|---|---|---|---|---|---|---|---|"]
    inductor = {(r["model"], r["mode"]): r["warm_first_call_s"] for r in rows if r["backend"] == "inductor"}
    for r in rows:
        cold = r["cold"]
        errs = [x.get("max_rel_err") for x in [cold] + r["warm"] if "error" not in x]
        base = inductor.get((r["model"], r["mode"]))
        ratio = r["warm_first_call_s"] / base if base and r["warm_first_call_s"] else None
        error = cold.get("error") or next((w["error"] for w in r["warm"] if "error" in w), None)
        if error:
            lines.append(f"| {r['model']} | {r['mode']} | {r['backend']} | error: {error.splitlines()[-1][:100]} "
                         "| | | | |")
            continue
        lines.append(f"| {r['model']} | {r['mode']} | {r['backend']} | {fmt(cold.get('first_call_s'))} "
                     f"| {fmt(r['warm_first_call_s'])} | {fmt(r['warm_in_backend_s'])} | {fmt(ratio)} "
                     f"| {fmt(max(errs), '.1e') if errs else 'n/a'} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,small_cnn")
    parser.add_argument("--modes", default="inference,training")
    parser.add_argument("--backends", default="inductor,ember,ember-noaot")
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--dynamic", action="store_true", help="compile with dynamic=True")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    backends = args.backends.split(",")
    rows = []
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            rows += measure(model, mode, backends, args.warm_runs, args.timeout, args.dynamic)
    import torch

    out = {"date": datetime.date.today().isoformat(), "machine": platform.node(), "cpu_count": os.cpu_count(),
           "torch": torch.__version__, "python": platform.python_version(), "warm_runs": args.warm_runs,
           "dynamic": args.dynamic,
           "rows": rows}
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(*sys.argv[2:6])
    else:
        main()

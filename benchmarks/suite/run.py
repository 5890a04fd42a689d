"""The suite's runner: eager, TorchInductor and ember side by side on the suite's models, one
fresh process per (model, variant, backend, mode, threads), JSON lines out, tables printed.

    python benchmarks/suite/run.py [--device cuda|cpu] [--shard K/N] [--models a,b] [--families f,g]
        [--backends eager,dynamo,inductor,ember] [--modes default,reduce-overhead] [--train | --train-only]
        [--threads 1,2] [--cpus 0,1] [--refs gpt2,resnet50] [--no-ref-cache] [--no-warm] [--budget S]
        [--timeout S] [--out results.jsonl]
    python benchmarks/suite/run.py summary FILES... [--update-refs [--replace-refs]] [--bw-min-mib 4]
    python benchmarks/suite/run.py list [--shard 1/N] [--backends ...] [--modes ...] [--train]
                                        (models, shards and estimated GPU device time)

Per (model, variant, backend, mode, threads): a cold process on empty cache directories
(first call, correctness, steady state, profile; measure.py), then a warm process on the
caches it filled (first call only; --no-warm skips it). Eager has one process and no modes.
So has "dynamo" (torch.compile with backend="eager"), whose first call is Dynamo's floor:
the table prints it beside the warm first calls (issue 27 asks ember's warm first call for
0.6x Inductor's where that floor allows); like eager's and Inductor's, its rows are stored
as reference rows and reused.
reduce-overhead runs one process, on the caches its default mode filled (the same kernels;
its first call is then neither cold nor warm), unless --fresh-mode-caches.

GPU (the default where CUDA is): "full" sizes, bf16 inference, training under bf16
autocast, modes default and reduce-overhead. CPU (--device cpu, issue 24): "small" sizes,
fp32, at 1 and 2 threads (torch.set_num_threads and OMP_NUM_THREADS), with the CPU's model
and capability (ATen's, and lscpu flags) recorded beside every row; --cpus pins the
measuring processes to those CPUs (a process at N threads to the first N of them).

GPU ember rows also carry each kernel's achieved bandwidth against a device-to-device
copy's (bandwidth.py); the summary prints its distribution.

Reference rows: eager and Inductor rows are reused from benchmarks/suite/refs/ (refcache.py)
for this device name and torch version when stored; --refs names models re-measured on every
backend anyway, and the summary prints their ratio to the stored rows. A run's measured
rows are stored by `summary --update-refs` on its JSONL.

Budget: each process gets --timeout seconds (a timeout row records what it measured); with
--budget the run stops starting processes when less than a minute of it is left, and clips
each process's timeout to what is left, so that a shard fits one device call; it ends by
naming the models it did not reach. Where the Python image writes no .pyc files, the
processes share a bytecode cache (--pycache).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(_HERE))
# Run as a script, this folder is sys.path[0]: its modules are imported as the package
# `suite` instead (a module here named like a stdlib one must not shadow it).
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

from suite import measure, refcache, registry, report  # noqa: E402

DEFAULTS = {
    "cuda": {"size": "full", "modes": "default,reduce-overhead", "threads": "", "warmup": 5, "iters": 30,
             "max_steady_s": 15.0, "profile_steps": 3, "timeout": 300.0},
    "cpu": {"size": "small", "modes": "default", "threads": "1,2", "warmup": 3, "iters": 20,
            "max_steady_s": 10.0, "profile_steps": 3, "timeout": 600.0},
}
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
             "amx_bf16", "amx_int8", "asimd", "sve")
NO_MODES = ("eager", "dynamo")  # one process per model, variant and thread count: no modes, no warm process
MIN_START_S = 60.0  # with --budget, no process starts with less than this left
PYCACHE = [""]  # PYTHONPYCACHEPREFIX of the measuring processes ("": Python's default)


# ----------------------------------------------------------------------------- environment

def environment(device: str) -> dict:
    import torch

    env = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "torch": torch.__version__,
           "python": sys.version.split()[0], "cores": os.cpu_count(), "git": _git_commit(),
           "cpu": measure._cpu_name(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "cpu_flags": [f for f in CPU_FLAGS if f in _cpu_flags()]}
    for pkg in ("transformers", "timm", "torchvision"):
        try:
            env[pkg] = __import__(pkg).__version__ if pkg == "transformers" else _dist_version(pkg)
        except Exception:
            env[pkg] = None
    env["c_compiler"] = _c_compiler()
    if device == "cuda":
        env["device_name"] = torch.cuda.get_device_name()
        env["capability"] = "sm_%d%d" % torch.cuda.get_device_capability()
    else:
        env["device_name"] = env["cpu"]
    return env


def pycache_prefix(choice: str) -> str:
    """Where measuring processes keep Python's bytecode. "auto": a directory under the
    temp dir where torch's own .pyc files are missing (an image that does not write them:
    every process would compile torch's sources again, ~1.5 s of each first call and more
    of each import); else Python's default. "off": Python's default."""
    import importlib.util

    import torch

    if choice == "off":
        return ""
    if choice != "auto":
        return choice
    if os.path.exists(importlib.util.cache_from_source(torch.__file__)):
        return ""
    return os.path.join(tempfile.gettempdir(), "suite-pycache")


def _c_compiler() -> str | None:
    """ember's C compiler as its kernels see it: path, version and the flags -march=native
    means here (what a CPU kernel's speed depends on besides the CPU)."""
    try:
        from ember import _core

        r = _core.check_c_compiler()
    except Exception as e:  # noqa: BLE001  a run line without it is still a run line
        return f"unknown ({type(e).__name__})"
    ident = dict(line.split(": ", 1) for line in r["identity"].splitlines() if ": " in line)
    return f"{r['path']}: {ident.get('version', '?')}; {' '.join(r['flags'])}" + ("" if r["ok"] else " (FAILS)")


def _dist_version(pkg: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


# ----------------------------------------------------------------------------- processes

def spawn(spec: dict, cache_dir: str | None, timeout: float, script: str | None = None) -> dict:
    """Runs `script child SPEC` (this file by default) in a fresh process of its own session
    (a timeout kills Inductor's workers too), with the cache directories under `cache_dir`
    and the spec's thread count; returns its stdout, stderr, return code, whether it timed
    out and its wall time."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if PYCACHE[0]:
        env["PYTHONPYCACHEPREFIX"] = PYCACHE[0]
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache_dir:
        env.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"), EMBER_CACHE_DIR=os.path.join(cache_dir, "ember"))
    for k in ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE"):
        env.pop(k, None)
    if spec.get("threads"):
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(spec["threads"])
    cmd = [sys.executable, script or os.path.abspath(__file__), "child", json.dumps(spec)]
    t0 = time.perf_counter()
    # Pinned before the interpreter starts, so that every thread it makes inherits the CPUs.
    pin = (lambda: os.sched_setaffinity(0, spec["cpus"])) if spec.get("cpus") else None
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=pin)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    return {"stdout": stdout, "stderr": stderr, "returncode": proc.returncode, "timed_out": timed_out,
            "wall_s": round(time.perf_counter() - t0, 2)}


def result_rows(stdout: str) -> list[dict]:
    """The rows a measuring process printed (measure.RESULT_TAG lines), in order."""
    return [json.loads(line[len(measure.RESULT_TAG):]) for line in stdout.splitlines()
            if line.startswith(measure.RESULT_TAG)]


def run_process(spec: dict, cache_dir: str | None, timeout: float, budget_clipped: bool = False) -> dict:
    """One measuring process; its last result line, or a timeout / error row holding what
    it printed before. A process stopped because the run's budget ran out
    (`budget_clipped`) is "skipped", not a timeout."""
    p = spawn(spec, cache_dir, timeout)
    stdout, stderr, timed_out = p["stdout"], p["stderr"], p["timed_out"]
    rows = result_rows(stdout)
    row = rows[-1] if rows else None
    if row is None:
        row = {k: spec.get(k) for k in measure.ROW_KEYS}
        row.update(status="error", error=f"exit {p['returncode']}, no result: {(stderr or stdout)[-800:]}")
    if timed_out and budget_clipped:
        row.update(status="skipped", error=f"the run's --budget ran out during the process ({timeout:.0f} s)")
    elif timed_out:
        row.update(status="timeout", error=f"timeout after {timeout:.0f} s (the row holds what was measured before)")
    elif row.get("status") not in ("ok", "skipped", "error"):
        row.update(status="error", error=f"exit {p['returncode']} after '{row.get('status')}': {stderr[-800:]}")
    row["process_wall_s"] = p["wall_s"]
    return row


class Runner:
    def __init__(self, args, env: dict):
        self.args, self.env = args, env
        self.t_start = time.perf_counter()
        self.out = open(args.out, "w") if args.out else None
        self.rows: list[dict] = []
        self.refs = {} if args.no_ref_cache else refcache.load(
            refcache.path_for(env["device_name"], env["torch"], args.ref_dir))
        self.ref_models = {registry.get(m).name for m in args.refs.split(",") if m}  # unknown names fail
        self.caches: dict[tuple, str] = {}
        if self.out:
            self._write({"record": "run", "argv": sys.argv[1:], **env})

    def _write(self, row: dict):
        if self.out:
            self.out.write(json.dumps(row, default=str) + "\n")
            self.out.flush()

    def remaining(self) -> float:
        if not self.args.budget:
            return float("inf")
        return self.args.budget - (time.perf_counter() - self.t_start)

    def add(self, row: dict):
        row.update(record="row", run_git=self.env["git"], run_date=self.env["date"])
        if self.env.get("cpu_capability") and row.get("device") == "cpu":
            row.setdefault("cpu_capability", self.env["cpu_capability"])
            row.setdefault("cpu_flags", self.env["cpu_flags"])
        self.rows.append(row)
        self._write(row)
        print(_progress(row), flush=True)

    def measure(self, spec: dict):
        """The row of one (model, variant, backend, mode, threads): stored, or measured cold
        (and warm)."""
        entry = registry.get(spec["model"])
        base = {**spec, "version": entry.version, "device_name": self.env["device_name"], "torch": self.env["torch"]}
        key = refcache.row_key(base)
        stored = self.refs.get(key) if spec["backend"] in refcache.REF_BACKENDS else None
        if stored and spec["model"] not in self.ref_models:
            self.add({**stored, "source": "cache"})
            return
        if self.remaining() < MIN_START_S:
            self.add({**base, "status": "skipped", "error": "the run's --budget is spent", "source": "measured"})
            return
        cache, shared = self._cache_dir(spec)
        row = run_process({**spec, "phase": "cold"}, cache, *self._timeout())
        if cache:
            row["first_call_cache"] = "default mode's" if shared else "empty"
        warm_ok = row.get("status") == "ok" and cache and not shared and not self.args.no_warm
        if warm_ok and self.remaining() >= MIN_START_S / 2:
            warm = run_process({**spec, "phase": "warm"}, cache, *self._timeout())
            row["warm_first_call_s"] = warm.get("first_call_s")
            row["warm_call_s"] = warm.get("call_s")
            row["warm_status"] = warm.get("status")
            if warm.get("ember"):
                row["warm_ember"] = {k: warm["ember"].get(k) for k in ("graphs_compiled", "graphs_loaded", "front_end")}
            if warm.get("error"):
                row["warm_error"] = warm["error"]
        row.update(source="measured", version=entry.version)
        if stored:
            row["ref_stored"] = {k: stored.get(k) for k in ("median_ms", "first_call_s", "run_date", "run_git")}
        self.add(row)


    def _timeout(self) -> tuple[float, bool]:
        """(a process's timeout, whether the budget's end set it)."""
        left = self.remaining()
        return (left, True) if left < self.args.timeout else (self.args.timeout, False)

    def unmeasured(self) -> list[str]:
        """Models with a row the budget skipped: what a further run must measure."""
        return sorted({r["model"] for r in self.rows if r.get("status") == "skipped" and "budget" in r.get("error", "")})

    def _cache_dir(self, spec: dict) -> tuple[str | None, bool]:
        """(cache directory, whether it is the default mode's). A default-mode process gets
        an empty one; another mode's process (reduce-overhead) gets the one its default mode
        filled in this run, unless --fresh-mode-caches: its compiled kernels are the same, and
        the device time of a second cold compile buys no figure the suite asks for. Kept
        until the model's rows are done (finish_model)."""
        if spec["backend"] in NO_MODES:
            return None, False
        key = (spec["model"], spec["variant"], spec["backend"], spec["threads"])
        if spec["mode"] != "default" and key in self.caches and not self.args.fresh_mode_caches:
            return self.caches[key], True
        path = tempfile.mkdtemp(prefix="suite_")
        if spec["mode"] == "default":
            self.caches[key] = path
        else:
            self.caches[(*key, spec["mode"])] = path
        return path, False

    def finish_model(self):
        for path in self.caches.values():
            shutil.rmtree(path, ignore_errors=True)
        self.caches.clear()


def _progress(row: dict) -> str:
    what = f"{row['model']} {row['variant']} {row['backend']} {row['mode']}" + (
        f" {row['threads']}t" if row.get("threads") else "")
    if row.get("status") != "ok":
        return f"  {what}: {row.get('status')} {row.get('error', '')[:200]}"
    acc = "" if "accurate" not in row else (" correct" if row["accurate"] else " NOT CORRECT")
    warm = f", warm {row['warm_first_call_s']} s" if row.get("warm_first_call_s") is not None else ""
    src = " (stored)" if row.get("source") == "cache" else ""
    return f"  {what}: {row.get('median_ms')} ms, first call {row.get('first_call_s')} s{warm}{acc}{src}"


# ----------------------------------------------------------------------------- commands

def plan(args, refs: dict | None = None) -> list[tuple[registry.Model, dict]]:
    """(entry, spec) for every process group of the run, model by model. With --shard, the
    shard's models; with --shard-by-work too, shards balanced by the estimated seconds of
    the processes left to run once `refs` (the stored rows) serve what they can."""
    models = registry.select(args.models, args.families)
    if args.train_only:
        models = [m for m in models if m.train]
    if not args.shard:
        return _specs(args, models)
    k, n = (int(x) for x in args.shard.split("/"))
    if not getattr(args, "shard_by_work", False):
        return _specs(args, registry.shard(models, k, n))
    work: dict[str, float] = {}
    ref_models = {m for m in getattr(args, "refs", "").split(",") if m}
    for entry, spec in _specs(args, models):
        work[entry.name] = work.get(entry.name, 0.0) + work_s(spec, entry, refs or {}, ref_models, args)
    keep = registry.shard(models, k, n, weight=lambda m: work[m.name])
    return _specs(args, keep)


# Seconds of one CPU process (2 cores of a shared host, 2026-11-27) for a model of weight 1:
# Inductor's cold compile is most of a run (40-78 s); ember's and eager's processes ~10 s.
CPU_PROCESS_S = {"eager": 9.0, "dynamo": 10.0, "inductor": 57.0, "ember": 10.0}


def work_s(spec: dict, entry: registry.Model, refs: dict, ref_models: set, args) -> float:
    """Estimated seconds of one spec's processes in this run: none where a stored row serves
    it (an eager or Inductor row not named by --refs); else the stored row's own process
    time where there is one, or the estimates (CPU_PROCESS_S on the CPU, PROCESS_S else)."""
    stored = None
    if spec["backend"] in refcache.REF_BACKENDS:
        stored = refs.get(refcache.row_key({**spec, "version": entry.version}))
        if stored and entry.name not in ref_models:
            return 0.0
    if stored and stored.get("process_wall_s"):
        return float(stored["process_wall_s"])
    if spec["device"] == "cpu":
        return CPU_PROCESS_S[spec["backend"]] * entry.weight * (TRAIN_FACTOR if spec["variant"] == "train" else 1.0)
    return estimate_s(spec, entry, args.modes.split(","), not args.no_warm)


def _specs(args, models: list) -> list[tuple[registry.Model, dict]]:
    variants = ["train"] if args.train_only else (["infer", "train"] if args.train else ["infer"])
    threads = [int(t) for t in args.threads.split(",") if t] if args.device == "cpu" else [None]
    out = []
    for entry in models:
        for variant in variants:
            if variant == "train" and not entry.train:
                continue
            for t in threads:
                for backend in args.backends.split(","):
                    modes = sorted(args.modes.split(","), key=lambda m: m != "default")  # default first
                    for mode in (["default"] if backend in NO_MODES else modes):
                        out.append((entry, {
                            "model": entry.name, "variant": variant, "backend": backend, "mode": mode,
                            "device": args.device, "size": args.size, "threads": t, "warmup": args.warmup,
                            "iters": args.iters, "max_steady_s": args.max_steady_s,
                            "profile_steps": args.profile_steps, "top": args.top, "check": not args.no_check,
                            "beside": not args.no_beside,
                            "cpus": _cpus_for(args.cpus, t)}))
    return out


def _cpus_for(cpus: str, threads: int | None) -> list[int] | None:
    """The CPUs a process at `threads` threads is pinned to: the first `threads` of
    --cpus (all of them without a thread count), or None (not pinned)."""
    if not cpus:
        return None
    ids = [int(c) for c in cpus.split(",") if c]
    return ids[:threads] if threads else ids


def cmd_run(args):
    env = environment(args.device)
    PYCACHE[0] = env["pycache_prefix"] = pycache_prefix(args.pycache)
    runner = Runner(args, env)
    print(f"suite: {env['device_name']} ({env.get('capability') or env['cpu_capability']}), torch {env['torch']}, "
          f"transformers {env['transformers']}, timm {env['timm']}, torchvision {env['torchvision']}, "
          f"ember {env['git']}; {len(runner.refs)} stored reference rows; C compiler {env['c_compiler']}", flush=True)
    skipped = set()
    current = None
    for entry, spec in plan(args, runner.refs):
        if entry.name != current:
            runner.finish_model()
            current = entry.name
        why = entry.missing()
        if why is None and spec["mode"] == "reduce-overhead" and args.device == "cpu":
            why = "reduce-overhead records CUDA graphs: GPU only"
        if why:
            if (entry.name, why) not in skipped:
                skipped.add((entry.name, why))
                runner.add({**spec, "version": entry.version, "status": "skipped", "error": why,
                            "source": "measured", "device_name": env["device_name"], "torch": env["torch"]})
            continue
        runner.measure(spec)
    runner.finish_model()
    print(f"\n{len(runner.rows)} rows in {time.perf_counter() - runner.t_start:.0f} s"
          + (f", written to {args.out}" if args.out else "") + "\n", flush=True)
    print(report.report(runner.rows), flush=True)
    left = runner.unmeasured()
    if left:
        print(f"\nthe budget ran out before these models were measured: rerun with --models {','.join(left)}", flush=True)


def read_rows(paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def cmd_summary(args):
    rows = read_rows(args.files)
    print(report.report([r for r in rows if r.get("record", "row") == "row"], args.bw_min_mib))
    if args.update_refs:
        for path, n in refcache.update([r for r in rows if r.get("record", "row") == "row"], args.ref_dir,
                                       replace=args.replace_refs).items():
            print(f"{path}: {n} reference rows stored")


# Device seconds of one process on the GPU machine, for planning shards (`list`): a
# process's start (imports, building the model) plus its work, for a model of weight 1.
# Guesses from the anchors (Inductor cold 10-40 s, warm ~3 s; ember cold ~1/3 of
# Inductor's) until the first runs replace them: each row records its process_wall_s.
PROCESS_S = {("eager", "cold"): 12, ("dynamo", "cold"): 14, ("inductor", "cold"): 33, ("inductor", "warm"): 9,
             ("inductor", "shared"): 25, ("ember", "cold"): 18, ("ember", "warm"): 9, ("ember", "shared"): 14}
TRAIN_FACTOR = 1.35  # a training graph pair compiles and runs longer


def estimate_s(spec: dict, entry: registry.Model, modes: list[str], warm: bool = True) -> float:
    """Estimated device seconds of the processes of one spec (see PROCESS_S)."""
    b = spec["backend"]
    if b in NO_MODES:
        phases = ["cold"]
    elif spec["mode"] != "default" and "default" in modes:
        phases = ["shared"]
    else:
        phases = ["cold", "warm"] if warm else ["cold"]
    scale = entry.weight * (TRAIN_FACTOR if spec["variant"] == "train" else 1.0)
    return sum(PROCESS_S[(b, p)] * (scale if p != "warm" else 1.0) for p in phases)


def cmd_list(args):
    models = registry.select(args.models, args.families)
    if args.train_only:
        models = [m for m in models if m.train]
    shards = {}
    n = int(args.shard.split("/")[1]) if args.shard else 1
    for k in range(1, n + 1):
        for m in registry.shard(models, k, n):
            shards[m.name] = k
    args.device = args.device or "cuda"
    for k, v in DEFAULTS[args.device].items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    args.shard = ""
    cost: dict[str, float] = {}
    for entry, spec in plan(args):
        cost[entry.name] = cost.get(entry.name, 0.0) + estimate_s(spec, entry, args.modes.split(","), not args.no_warm)
    for m in models:
        why = m.missing()
        print(f"{m.name:20} {m.family:16} {m.source:12} train={'yes' if m.train else 'no ':3} "
              f"dynamic={'yes' if m.dynamic_inputs else 'no ':3} weight={m.weight:<4} shard={shards[m.name]:<3}"
              f"~{cost.get(m.name, 0):4.0f} s{f'  (skip here: {why})' if why else ''}  {m.note}")
    per_shard = [sum(cost.get(m, 0.0) for m, k in shards.items() if k == i) for i in range(1, n + 1)]
    print(f"{len(models)} models, {sum(m.train for m in models)} with a training variant; estimated GPU device time "
          f"for --backends {args.backends} --modes {args.modes}{' --train' if args.train else ''}"
          f"{' --train-only' if args.train_only else ''}{' --no-warm' if args.no_warm else ''}: "
          f"{sum(per_shard) / 60:.0f} min; per shard (of {n}) "
          + ", ".join(f"{s / 60:.1f}" for s in per_shard) + " min")


def main(argv):
    if argv and argv[0] == "child":
        measure.main(argv[1:])
        return
    if argv and argv[0] == "summary":
        p = argparse.ArgumentParser(prog="run.py summary")
        p.add_argument("files", nargs="+")
        p.add_argument("--update-refs", action="store_true", help="store measured eager/Inductor rows in refs/")
        p.add_argument("--replace-refs", action="store_true", help="with --update-refs: replace stored rows")
        p.add_argument("--ref-dir", default=refcache.REF_DIR, help="where --update-refs writes")
        p.add_argument("--bw-min-mib", type=float, default=report.bandwidth.MIN_MIB,
                       help="bandwidth summary: kernels moving less per call are counted as tiny, not in the figures")
        cmd_summary(p.parse_args(argv[1:]))
        return
    listing = bool(argv) and argv[0] == "list"
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"))
    p.add_argument("--shard", default="", help="K/N: the K-th of N shards balanced by model weight")
    p.add_argument("--shard-by-work", action="store_true",
                   help="balance the shards by the processes left once stored rows serve theirs (every shard "
                        "of the run must see the same stored rows and arguments)")
    p.add_argument("--models", default="", help="comma-separated names (run.py list shows them)")
    p.add_argument("--families", default="", help="decoder, encoder, encoder-decoder, vision, audio, ...")
    p.add_argument("--backends", default="eager,dynamo,inductor,ember",
                   help="dynamo: Dynamo with no compiler (torch.compile(backend='eager')), the first call's floor")
    p.add_argument("--modes", help="default,reduce-overhead on the GPU; default on the CPU")
    p.add_argument("--train", action="store_true", help="also the training variants")
    p.add_argument("--train-only", action="store_true", help="only the training variants")
    p.add_argument("--threads", help="CPU thread counts (default 1,2)")
    p.add_argument("--cpus", default="", help="pin CPU processes: at N threads, to the first N of these CPUs")
    p.add_argument("--size", choices=registry.SIZES, help="full on the GPU, small on the CPU by default")
    p.add_argument("--refs", default="", help="models whose eager/Inductor rows are re-measured, not reused")
    p.add_argument("--no-ref-cache", action="store_true", help="measure every row (reuse no stored row)")
    p.add_argument("--ref-dir", default=refcache.REF_DIR, help="where stored reference rows are read")
    p.add_argument("--no-warm", action="store_true", help="skip the warm first-call processes")
    p.add_argument("--fresh-mode-caches", action="store_true",
                   help="reduce-overhead on empty caches (cold and warm first calls) instead of the default mode's")
    p.add_argument("--no-check", action="store_true", help="skip the correctness check (fp64 reference)")
    p.add_argument("--no-beside", action="store_true",
                   help="CPU: skip timing eager's calls beside a compiled backend's (measure.py's beside)")
    p.add_argument("--pycache", default="auto", help="PYTHONPYCACHEPREFIX of the processes: auto, off or a path")
    p.add_argument("--budget", type=float, default=0.0, help="seconds for the whole run (0: none)")
    p.add_argument("--timeout", type=float, help="seconds per process")
    p.add_argument("--warmup", type=int)
    p.add_argument("--iters", type=int)
    p.add_argument("--max-steady-s", type=float)
    p.add_argument("--profile-steps", type=int, help="profiled steps (0: no profile)")
    p.add_argument("--top", type=int, default=12, help="top kernels kept per profile")
    p.add_argument("--out", default="", help="JSON lines: one run line, then a row per measurement")
    args = p.parse_args(argv[1:] if listing else argv)
    if listing:
        cmd_list(args)
        return
    if args.device is None:
        import torch
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    for k, v in DEFAULTS[args.device].items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    cmd_run(args)


if __name__ == "__main__":
    main(sys.argv[1:])

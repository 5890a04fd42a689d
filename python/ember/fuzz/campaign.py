"""Campaigns: seeds run in worker processes, many per process, so that a crash (or a hang,
or on CUDA an error that leaves the context unusable) costs one seed, not the campaign;
results are counted and written as a JSON summary (and, with an output directory, one
repro file per failure)."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

from ..tools.doctor import cpu_name
from .generator import generate
from .judge import check, valid_on_the_cpu
from .minimize import minimize, repro_text
from .programs import Program

# A seed's outcome that is a finding (not "ok", and not "eager_error": the program was
# invalid, which the generator avoids but cannot always foresee).
FAILING = ("mismatch", "error", "crash", "timeout", "generator_error", "device_error")

# The GPU campaign's float dtypes (python -m ember.fuzz --device cuda).
GPU_DTYPES = ("f32", "bf16", "f16")


@dataclasses.dataclass
class Settings:
    """What every seed of a campaign runs with; workers get it as JSON."""

    cache_dir: str = ""
    device: str | None = None         # None: the CPU; "cuda": tensors on the current GPU
    dtypes: tuple | None = None       # the generator's float dtypes (None: the CPU mix)
    minimize: bool = True
    minimize_seconds: float = 120.0   # per failure
    threads: int = 1                  # torch/OpenMP threads per worker
    deadline: float | None = None     # time.time() after which no new seed starts

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @staticmethod
    def from_json(text: str) -> "Settings":
        d = json.loads(text)
        d["dtypes"] = tuple(d["dtypes"]) if d.get("dtypes") else None
        return Settings(**d)


def run_seed(seed: int, cache_dir: str, minimize_failures: bool = True, settings: Settings | None = None) -> dict:
    """One seed: generate, compile, compare; a failure comes with its program and, if
    asked, a minimized one."""
    s = settings or Settings(cache_dir=cache_dir, minimize=minimize_failures)
    t0 = time.perf_counter()
    try:
        prog = generate(seed, s.dtypes)
    except Exception as e:  # a generator bug, not an ember one
        return {"seed": seed, "status": "generator_error", "detail": f"{type(e).__name__}: {e}",
                "seconds": time.perf_counter() - t0}
    res = check(prog, s.cache_dir, device=s.device)
    out = {"seed": seed, "status": res.status, "ops": len(prog.lines), "kernels": res.kernels,
           "seconds": time.perf_counter() - t0}
    if prog.dtype:
        out["dtype"] = prog.dtype
    if res.eager_graphs:
        out["eager_graphs"] = res.eager_graphs
        out["eager_reasons"] = res.eager_reasons
    if res.status in FAILING:
        out["detail"] = res.detail
        out["program"] = prog.to_json()
        out["flags"] = prog.flags
        # Minimizing recompiles the program many times: not in a broken CUDA context.
        if s.minimize and res.status != "device_error":
            flags = prog.flags
            lost = []  # a candidate's device_error: the context is unusable from then on

            def still_fails(p):
                if lost or (s.device and not valid_on_the_cpu(p)):
                    return False
                r = check(p, s.cache_dir, flags, s.device)
                if r.status == "device_error" and res.status != "device_error":
                    lost.append(r.detail)
                    return False
                return r.status == res.status

            small = minimize(prog, s.cache_dir, still_fails, s.minimize_seconds)
            if lost:
                # The seed keeps its own finding; the worker exits after it (a new one
                # takes the next seed) and the smallest program found before is kept.
                out["context_lost"] = f"minimizing met a device error: {lost[0].splitlines()[0]}"
                out["minimized_detail"] = ""
            else:
                small_res = check(small, s.cache_dir, flags, s.device)
                out["minimized_detail"] = small_res.detail
            out["minimized"] = small.to_json()
            out["minimized_source"] = small.source()
    return out


# A worker that met a device_error exits with this status: the context is unusable.
DEVICE_ERROR_EXIT = 3


def _run_worker(seeds, settings: Settings, results_path: str) -> int:
    """Worker process body: one JSON line per seed, appended as each finishes. Stops
    before a seed once the deadline has passed, and after a device_error."""
    torch.set_num_threads(settings.threads)
    import warnings

    warnings.filterwarnings("ignore")
    with open(results_path, "a") as f:
        for seed in seeds:
            if settings.deadline is not None and time.time() > settings.deadline:
                return 0
            r = run_seed(seed, settings.cache_dir, settings=settings)
            f.write(json.dumps(r) + "\n")
            f.flush()
            if r["status"] == "device_error" or r.get("context_lost"):
                return DEVICE_ERROR_EXIT
    return 0


def _run_chunk(seeds, settings: Settings, seconds_per_seed: float) -> list:
    """Runs seeds in a child process; when it dies, or spends more than seconds_per_seed
    on one seed (after a minute to start), the seed it was on is recorded as crash
    (timeout), and a new child takes the rest. A child that stopped at the deadline, or
    is still busy a minute after it, leaves the rest unrun."""
    results, remaining = [], list(seeds)
    fd, path = tempfile.mkstemp(prefix="ember-fuzz-", suffix=".jsonl")
    os.close(fd)
    err_fd, err_path = tempfile.mkstemp(prefix="ember-fuzz-", suffix=".err")
    try:
        while remaining:
            if settings.deadline is not None and time.time() > settings.deadline:
                break
            cmd = [sys.executable, "-m", "ember.fuzz", "--worker", ",".join(map(str, remaining)),
                   "--worker-settings", settings.to_json(), "--worker-out", path]
            os.ftruncate(err_fd, 0)
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_fd)
            status, stopped = _watch(proc, path, settings, seconds_per_seed)
            with open(path) as f:
                finished = [json.loads(ln) for ln in f if ln.strip()]
            open(path, "w").close()
            results.extend(finished)
            done = {r["seed"] for r in finished}
            remaining = [x for x in remaining if x not in done]
            if stopped:
                break
            if status is None and proc.returncode not in (0, DEVICE_ERROR_EXIT):
                with open(err_path, errors="replace") as f:
                    status = ("crash", f"worker exited with status {proc.returncode}: {f.read()[-2000:]}")
            if status and remaining:
                bad = remaining.pop(0)
                # Not regenerated here: whatever killed the child may kill this process
                # too. `--seeds N --show` reproduces it.
                results.append({"seed": bad, "status": status[0], "detail": status[1]})
            elif status is None and remaining and proc.returncode == 0:
                if settings.deadline is not None and time.time() > settings.deadline:
                    break
                raise RuntimeError(f"fuzz worker returned without results for seeds {remaining[:5]}")
    finally:
        os.close(err_fd)
        os.unlink(err_path)
        os.unlink(path)
    return results


def _watch(proc, results_path: str, settings: Settings, seconds_per_seed: float) -> tuple:
    """Waits for a worker: (status, stopped). status ("timeout", why) when one seed took
    longer than seconds_per_seed (the worker is killed); stopped when the deadline passed
    a minute ago and the worker is still busy (killed; its seed is not a finding)."""
    startup = 60.0
    # Minimizing a failure recompiles it many times, within its own limit.
    per_seed = seconds_per_seed + (settings.minimize_seconds if settings.minimize else 0.0)
    last_progress, lines = time.monotonic() + startup, 0
    while proc.poll() is None:
        time.sleep(0.5)
        with open(results_path) as f:
            now_lines = sum(1 for ln in f if ln.strip())
        if now_lines != lines:
            lines, last_progress = now_lines, time.monotonic()
        stuck = time.monotonic() - last_progress > per_seed
        late = settings.deadline is not None and time.time() > settings.deadline + startup
        if stuck or late:
            proc.kill()
            proc.wait()
            if late and not stuck:
                return None, True
            return ("timeout", f"no result within {per_seed:.0f} s"), False
    return None, False


def parse_seeds(text: str) -> list:
    """Seeds from "N", "a:b" (a to b-1) or a comma-separated list of both (a summary's
    not_run, to continue a campaign that hit its time limit)."""
    seeds = []
    for part in text.split(","):
        if ":" in part:
            a, b = part.split(":")
            seeds.extend(range(int(a), int(b)))
        elif part.strip():
            seeds.append(int(part))
    return seeds


def seed_ranges(seeds) -> str:
    """The inverse of parse_seeds, in ranges: "0:100,250:300"."""
    parts, seeds = [], sorted(seeds)
    i = 0
    while i < len(seeds):
        j = i
        while j + 1 < len(seeds) and seeds[j + 1] == seeds[j] + 1:
            j += 1
        parts.append(f"{seeds[i]}:{seeds[j] + 1}")
        i = j + 1
    return ",".join(parts)


def campaign(seeds, jobs: int = 1, threads: int = 1, cache_dir: str | None = None, out_path: str | None = None,
             minimize_failures: bool = True, progress=True, chunk: int = 50, seconds_per_seed: float = 120,
             device: str | None = None, dtypes: tuple | None = None, time_limit: float | None = None,
             out_dir: str | None = None, minimize_seconds: float = 120.0) -> dict:
    """Runs every seed in `jobs` worker processes (`chunk` seeds each, in order); returns
    (and writes to out_path, and out_dir/summary.json with a repro file per failure) a
    summary. With `time_limit` (seconds) no seed starts after it: the summary then says
    how many ran (finished False)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    own_cache = cache_dir is None
    if own_cache:
        tmp = tempfile.mkdtemp(prefix="ember-fuzz-")
        cache_dir = os.path.join(tmp, "cache")
    settings = Settings(cache_dir=cache_dir, device=device, dtypes=tuple(dtypes) if dtypes else None,
                        minimize=minimize_failures, minimize_seconds=minimize_seconds, threads=threads,
                        deadline=time.time() + time_limit if time_limit else None)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        out_path = out_path or os.path.join(out_dir, "summary.json")
    seeds = list(seeds)
    chunks = [seeds[i:i + chunk] for i in range(0, len(seeds), chunk)]
    tally = _Tally(seeds, settings, jobs, progress)
    last_write = 0.0

    def account(results):
        nonlocal last_write
        tally.add(results)
        now = time.perf_counter()
        if out_path and now - last_write > 10:  # a partial summary, in case the run is cut short
            last_write = now
            _write(out_path, tally.summary())

    with ThreadPoolExecutor(max(jobs, 1)) as pool:
        futures = [pool.submit(_run_chunk, c, settings, seconds_per_seed) for c in chunks]
        for fut in as_completed(futures):
            account(fut.result())
    summary = tally.summary()
    if out_path:
        _write(out_path, summary)
    if out_dir:
        _write_repros(out_dir, summary["failures"], device)
    if own_cache:
        import shutil

        shutil.rmtree(os.path.dirname(cache_dir), ignore_errors=True)
    return summary


class _Tally:
    """Counts of a campaign as its results come in, and its summary."""

    def __init__(self, seeds: list, settings: Settings, jobs: int, progress: bool):
        self.seeds, self.settings, self.jobs, self.progress = seeds, settings, jobs, progress
        self.t0 = time.perf_counter()
        self.counts: dict[str, int] = {}
        self.by_dtype: dict[str, dict[str, int]] = {}
        self.eager_reasons: dict[str, int] = {}
        self.failures: list = []
        self.seen: set = set()
        self.done = self.ops = self.kernels = self.eager_graphs = 0
        self.last_print = 0.0

    def add(self, results: list) -> None:
        for r in results:
            self.done += 1
            self.seen.add(r["seed"])
            self.counts[r["status"]] = self.counts.get(r["status"], 0) + 1
            if "dtype" in r:
                d = self.by_dtype.setdefault(r["dtype"], {})
                d[r["status"]] = d.get(r["status"], 0) + 1
            self.ops += r.get("ops", 0)
            self.kernels += r.get("kernels", 0)
            self.eager_graphs += r.get("eager_graphs", 0)
            for why in r.get("eager_reasons", ()):
                self.eager_reasons[why] = self.eager_reasons.get(why, 0) + 1
            if r["status"] in FAILING:
                self.failures.append(r)
                if self.progress:
                    text = r.get("minimized_detail") or r.get("detail", "")
                    print(f"FAIL seed {r['seed']}: {r['status']}: {(text.splitlines() or [''])[0]}", flush=True)
        now = time.perf_counter()
        if self.progress and (now - self.last_print > 10 or self.done == len(self.seeds)):
            self.last_print = now
            el = now - self.t0
            print(f"[{self.done}/{len(self.seeds)}] {el:.0f}s {self.done / max(el, 1e-9):.1f} graphs/s  " +
                  " ".join(f"{k}={v}" for k, v in sorted(self.counts.items())), flush=True)

    def summary(self) -> dict:
        elapsed = time.perf_counter() - self.t0
        s, seeds, counts = self.settings, self.seeds, self.counts
        return {
            "command": "python -m ember.fuzz " + " ".join(sys.argv[1:]) if sys.argv and "fuzz" in sys.argv[0] else "",
            "seeds": seed_ranges(seeds),
            "graphs": len(seeds),
            "graphs_done": self.done,
            "finished": self.done == len(seeds),
            # What a time limit left: `--seeds <this>` continues the campaign.
            "not_run": seed_ranges(set(seeds) - self.seen),
            "counts": counts,
            "mismatches": counts.get("mismatch", 0),
            "crashes": sum(counts.get(k, 0) for k in ("crash", "timeout", "device_error")),
            "failures_total": sum(counts.get(k, 0) for k in FAILING),
            "by_dtype": self.by_dtype,
            "ops": self.ops,
            "kernels": self.kernels,
            # Graphs ember ran eagerly (compared, but not compiled), by reason.
            "eager_graphs": self.eager_graphs,
            "eager_reasons": dict(sorted(self.eager_reasons.items(), key=lambda kv: -kv[1])[:30]),
            "seconds": round(elapsed, 1),
            "graphs_per_second": round(self.done / max(elapsed, 1e-9), 2),
            "device": _device_name(s.device),
            "dtypes": list(s.dtypes) if s.dtypes else "cpu mix",
            "jobs": self.jobs,
            "threads_per_job": s.threads,
            "machine": f"{os.cpu_count()} CPUs, {cpu_name()}",
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "ember_commit": _commit(),
            "failures": sorted(self.failures, key=lambda r: r["seed"]),
        }


def merge_summaries(parts: list) -> dict:
    """One summary of campaigns run side by side over disjoint seeds (one process a GPU):
    counts and totals added, failures and not_run joined, time the longest part's;
    `parts` keeps what each ran (seeds, jobs, graphs done, seconds, device)."""
    if not parts:
        raise ValueError("no summaries to merge")
    merged = dict(parts[0])
    done = sum(p["graphs_done"] for p in parts)
    seconds = max(p["seconds"] for p in parts)

    def added(key: str) -> dict:
        total: dict = {}
        for p in parts:
            for k, v in p[key].items():
                total[k] = total.get(k, 0) + v
        return total

    by_dtype: dict = {}
    for p in parts:
        for dt, counts in p["by_dtype"].items():
            d = by_dtype.setdefault(dt, {})
            for k, v in counts.items():
                d[k] = d.get(k, 0) + v
    merged.update({
        "command": " & ".join(p["command"] for p in parts if p.get("command")),
        "seeds": ",".join(p["seeds"] for p in parts if p["seeds"]),
        "not_run": ",".join(p["not_run"] for p in parts if p["not_run"]),
        "finished": all(p["finished"] for p in parts),
        "by_dtype": by_dtype,
        "eager_reasons": dict(sorted(added("eager_reasons").items(), key=lambda kv: -kv[1])[:30]),
        "counts": added("counts"),
        "seconds": seconds,
        "graphs_done": done,
        "graphs_per_second": round(done / max(seconds, 1e-9), 2),
        "failures": sorted((f for p in parts for f in p["failures"]), key=lambda r: r["seed"]),
        "parts": [{k: p[k] for k in ("seeds", "jobs", "graphs_done", "seconds", "device")} for p in parts],
    })
    for key in ("graphs", "mismatches", "crashes", "failures_total", "ops", "kernels", "eager_graphs", "jobs"):
        merged[key] = sum(p[key] for p in parts)
    return merged


def _device_name(device: str | None) -> str:
    if device is None or not str(device).startswith("cuda"):
        return "cpu"
    try:
        return torch.cuda.get_device_name(torch.device(device))
    except Exception as e:  # the summary must still be written
        return f"{device} ({type(e).__name__})"


def _commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except Exception:
        return ""


def _write(path: str, summary: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=1)
    os.replace(tmp, path)


def _write_repros(out_dir: str, failures: list, device: str | None) -> None:
    """out_dir/failures/seed_<N>.py: each failure as `python -m ember.fuzz --repro` reads it."""
    from .judge import Result

    folder = os.path.join(out_dir, "failures")
    os.makedirs(folder, exist_ok=True)
    for r in failures:
        if "program" not in r:  # a crash: `--seeds N --show` regenerates it
            continue
        prog = Program.from_json(r.get("minimized") or r["program"])
        detail = r.get("minimized_detail") or r.get("detail", "")
        with open(os.path.join(folder, f"seed_{r['seed']}.py"), "w") as f:
            f.write(repro_text(prog, Result(r["status"], detail), r.get("flags"), device))

"""The OpInfo conformance sweep: every OpInfo, every CPU sample, in each dtype.

    python tests/conformance/sweep.py                      # full sweep, all dtypes
    python tests/conformance/sweep.py --dtypes f32 --jobs 2
    python tests/conformance/sweep.py --ops add,softmax --dtypes f32,bf16

Work is split into units (one op in one dtype) handed to long-lived worker
processes. A worker that dies (a segfault in generated code) or hangs is
replaced; the case it was running is recorded as a crash and the unit goes on
from the next sample. Results stream to a JSONL file; at the end the summary is
written as JSON and as docs/conformance.md (see report.py).
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CASE_TIMEOUT_S = 180
DEADLINE_GRACE_S = 60  # after --deadline, units still running get this long, then are abandoned


# ---------------------------------------------------------------------------
# Worker side: reads units from stdin, writes one JSON line per event.


def worker_main():
    sys.path.insert(0, HERE)
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(int(os.environ.get("EMBER_SWEEP_THREADS", "1")))
    import ember

    ember.config.fallback_on_error = False
    import cases

    out = sys.stdout
    sys.stdout = sys.stderr  # ops that print must not corrupt the protocol

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    for line in sys.stdin:
        unit = json.loads(line)
        op = cases.find_op(unit["op"])
        try:
            inputs = cases.samples(op, unit["dtype"])
        except Exception as e:
            emit({"event": "case", "op": unit["op"], "dtype": unit["dtype"], "sample": -1, "class": "skip",
                  "reason": f"sample_inputs raises: {cases._short(e)}", "ops": []})
            inputs = []
        limit = unit.get("max_samples") or len(inputs)
        for i in range(unit.get("start", 0), min(len(inputs), limit)):
            emit({"event": "begin", "sample": i})
            try:
                r = cases.run_case(op, unit["dtype"], inputs[i])
            except Exception as e:  # the harness itself: report, do not die
                r = {"op": unit["op"], "dtype": unit["dtype"], "class": "crash",
                     "reason": f"harness: {cases._short(e)}", "ops": []}
            r["sample"] = i
            r["event"] = "case"
            emit(r)
        emit({"event": "done", "count": min(len(inputs), limit)})


# ---------------------------------------------------------------------------
# Parent side.


class Worker:
    def __init__(self, env):
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=env, bufsize=1,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # EOF: the process ended

    def send(self, unit):
        self.proc.stdin.write(json.dumps(unit) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:
            pass


def run_unit(worker_box, unit, env, sink, give_up_at=None):
    """Drive one unit to completion on a worker, replacing it if it dies or hangs.
    Past `give_up_at` (a time.time()) the unit is abandoned: returns False."""
    start = unit.get("start", 0)
    while True:
        w = worker_box[0]
        if w is None or w.proc.poll() is not None:
            w = worker_box[0] = Worker(env)
        w.send({**unit, "start": start})
        current = None
        waited = 0.0  # seconds without a line from the worker
        while True:
            if give_up_at is not None and time.time() > give_up_at:
                w.kill()
                worker_box[0] = None
                return False
            try:
                line = w.lines.get(timeout=5)
                waited = 0.0
            except queue.Empty:
                waited += 5
                limit = CASE_TIMEOUT_S if current is not None else CASE_TIMEOUT_S * 4
                if waited < limit:
                    continue
                line = "TIMEOUT"
            if line is None or line == "TIMEOUT":
                w.kill()
                worker_box[0] = None
                if current is None:  # died before any case (import error): give up on the unit
                    sink({"event": "case", "op": unit["op"], "dtype": unit["dtype"], "sample": -1,
                          "class": "crash", "reason": "worker died before running a case", "ops": []})
                    return True
                why = "hang: no result within %d s" % CASE_TIMEOUT_S if line == "TIMEOUT" else \
                    "process died (signal or abort) while running this case"
                sink({"event": "case", "op": unit["op"], "dtype": unit["dtype"], "sample": current,
                      "class": "crash", "reason": why, "ops": []})
                start = current + 1
                break
            msg = json.loads(line)
            if msg["event"] == "begin":
                current = msg["sample"]
            elif msg["event"] == "case":
                sink(msg)
            elif msg["event"] == "done":
                return True


def load_cases(folder):
    """The cases of an earlier run (cases.jsonl, or cases.jsonl.gz as brought back from another machine)."""
    import gzip

    path = os.path.join(folder, "cases.jsonl")
    opener = open if os.path.exists(path) else gzip.open
    path = path if os.path.exists(path) else path + ".gz"
    with opener(path, "rt") as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def list_units(dtypes, ops=None, max_samples=None):
    sys.path.insert(0, HERE)
    import cases

    units = []
    for op in cases.op_db():
        name = cases.op_full_name(op)
        if ops and name not in ops:
            continue
        for d in cases.supported_dtypes(op):
            if d in dtypes:
                units.append({"op": name, "dtype": d, "max_samples": max_samples})
    return units


def sweep(units, jobs, jsonl_path, threads=1, progress=True, deadline_s=None):
    env = dict(os.environ)
    env.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="ember-sweep-cache-"))
    env["EMBER_SWEEP_THREADS"] = str(threads)
    env["EMBER_FALLBACK_ON_ERROR"] = "0"
    env["PYTHONWARNINGS"] = "ignore"
    todo: queue.Queue = queue.Queue()
    for u in units:
        todo.put(u)
    lock = threading.Lock()
    results = []
    t0 = time.time()
    out = open(jsonl_path, "w")

    def sink(msg):
        msg.pop("event", None)
        with lock:
            results.append(msg)
            out.write(json.dumps(msg) + "\n")
            out.flush()
            if progress and len(results) % 50 == 0:
                done = len(units) - todo.qsize()
                print(f"\r[{time.time() - t0:7.0f} s] units {done}/{len(units)}  cases {len(results)}  "
                      f"wrong {sum(r['class'] == 'wrong' for r in results)}  "
                      f"crash {sum(r['class'] == 'crash' for r in results)}   ",
                      end="", file=sys.stderr, flush=True)

    units_done = [0]

    def loop():
        box = [None]
        while deadline_s is None or time.time() - t0 < deadline_s:
            try:
                u = todo.get_nowait()
            except queue.Empty:
                break
            give_up = None if deadline_s is None else t0 + deadline_s + DEADLINE_GRACE_S
            if run_unit(box, u, env, sink, give_up):
                with lock:
                    units_done[0] += 1
        if box[0] is not None:
            box[0].kill()

    threads_ = [threading.Thread(target=loop) for _ in range(jobs)]
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()
    out.close()
    if progress:
        print(file=sys.stderr)
    return results, time.time() - t0, units_done[0]


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker_main()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", default="f32,f64,f16,bf16,i32,i64,bool")
    p.add_argument("--ops", default="", help="comma-separated OpInfo names (default: all)")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    p.add_argument("--max-samples", type=int, default=None, help="per op and dtype (default: all)")
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "conformance", "results"))
    p.add_argument("--md", default=os.path.join(ROOT, "docs", "conformance.md"),
                   help="markdown report to write ('' to skip)")
    p.add_argument("--deadline", type=float, default=None,
                   help="stop starting new units after this many seconds (the report says how many ran)")
    p.add_argument("--merge", default="",
                   help="comma-separated result folders of earlier runs, oldest first: combine them into one "
                        "report (a later run's results replace an earlier run's for the op/dtype units it ran)")
    args = p.parse_args(argv)
    sys.path.insert(0, HERE)
    import report

    os.makedirs(args.out, exist_ok=True)
    jsonl = os.path.join(args.out, "cases.jsonl")
    dtypes = args.dtypes.split(",")
    if args.merge:
        # A later folder's results replace an earlier one's for every (op, dtype)
        # unit it ran: re-checks after a fix supersede the first run.
        results, meta = [], []
        for folder in args.merge.split(","):
            newer = load_cases(folder)
            rerun = {(r["op"], r["dtype"]) for r in newer}
            results = [r for r in results if (r["op"], r["dtype"]) not in rerun] + newer
            run_meta = json.load(open(os.path.join(folder, "summary.json")))["meta"]
            meta += run_meta if isinstance(run_meta, list) else [run_meta]
    else:
        ops = set(filter(None, args.ops.split(",")))
        units = list_units(dtypes, ops, args.max_samples)
        print(f"{len(units)} units (op x dtype), {args.jobs} workers", file=sys.stderr)
        results, seconds, done = sweep(units, args.jobs, jsonl, deadline_s=args.deadline)
        meta = [{
            "command": "python tests/conformance/sweep.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "dtypes": dtypes,
            "seconds": round(seconds, 1),
            "jobs": args.jobs,
            "units": len(units),
            "units_done": done,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": report.machine_line(),
        }]
    summary = report.summarize(results, meta)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    if args.md:
        with open(args.md, "w") as f:
            f.write(report.markdown(summary))
    print(report.short_table(summary))
    return 0 if summary["totals"].get("wrong", 0) == 0 and summary["totals"].get("crash", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

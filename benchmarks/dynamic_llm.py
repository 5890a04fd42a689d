"""Issue 21: dynamic shapes at static speed on the suite's decoder LMs and two encoders.

    python benchmarks/dynamic_llm.py [--device cuda|cpu] [--dtype bf16|fp32|fp16] [--size full|small]
        [--models gpt2,llama,...] [--shapes 4x128,16x7,...] [--variants dynamic,mark,auto,static,ro]
        [--backends ember,inductor] [--threads N] [--budget S] [--timeout S] [--out FILE.json]
    python benchmarks/dynamic_llm.py summary FILE.json

Per model (random weights, the suite's registry: benchmarks/suite/models_hf.py), two fresh
processes on empty cache directories (suite/dynamic_measure.py says what each measures):

    ember     eager's per-shape latency, then ember with dynamic=True (the process's first,
              cold compile), with mark_dynamic on batch and sequence, with automatic dynamic
              (static first shape, dynamic from the second), and static (a compile per shape);
              with --variants ...,ro also dynamic=True under mode="reduce-overhead" (the
              serving pattern: a CUDA graph recorded per shape)
    inductor  Inductor with dynamic=True (cold); with ro asked, also under reduce-overhead
              (its cudagraph trees)

Per (variant, shape): first call, median latency of synchronized calls, correctness (the
suite's rule, measure.py) and bitwise equality with eager (the tell of a graph that ran
eagerly); per variant: compiler counters after the first compile and what later shapes
added (acceptance 2: no new code for shapes the guards admit; batch-1 shapes come last
and are counted apart, since Dynamo specializes size 1 for every compiler), eager-fallback
graphs, ops the dynamic compile leaves to ATen that the static one lowers, ATen results a
call copies because their strides differ from the compiled ones, and kernels that
took a generic path because of a symbol. The table puts each variant's latency over ember
static's (acceptance 1 and 3) and Inductor dynamic's; under ro, each shape's memory: what
the process reserved more over the shape's calls, and ember's recordings' own report
(acceptance 4; `--variants static,ro --backends ember,inductor` measures only that). Host
time per call (`issue_ms`: until the call returns, before the sync); under ro also the part
inside ember's replays, the recordings and replays the timed calls made, and a cProfile of
ten calls (`host_profile`); on CUDA, static and ro at the last shape: the device's time per
call and its top kernels under torch.profiler (`device_profile`).

GPU (the default where CUDA is): full sizes, bf16, shapes 4x128 16x7 2x2048 8x512 3x1000
1x333 (sequences capped where a learned position table is shorter). CPU (--device cpu):
small sizes, fp32, 1 thread, shapes 4x32 16x7 2x200 8x64 3x129 1x48, and the interleaved
timing on the thread's CPU clock (--clock: a shared machine's load is not counted). With --budget no
process starts with less than a minute left, each gets what is left at most, and the run
ends naming the models it did not reach.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

from suite import dynamic_measure, measure, registry, run  # noqa: E402

MODELS = "llama,gpt2,mistral,qwen2,phi,falcon,bloom,mixtral,bert,roberta"
SHAPES = {"full": "4x128,16x7,2x2048,8x512,3x1000,1x333", "small": "4x32,16x7,2x200,8x64,3x129,1x48"}
DEFAULTS = {"cuda": {"size": "full", "dtype": "bf16", "threads": 0, "warmup": 3, "iters": 20, "max_shape_s": 2.0,
                     "timeout": 300.0, "interleaved": 0},
            "cpu": {"size": "small", "dtype": "fp32", "threads": 1, "warmup": 2, "iters": 15, "max_shape_s": 3.0,
                    "timeout": 900.0, "interleaved": 1}}
MIN_START_S = 60.0


def parse_shapes(text: str) -> list[tuple[int, int]]:
    shapes = [tuple(int(x) for x in s.lower().split("x")) for s in text.split(",") if s.strip()]
    if any(len(s) != 2 or min(s) < 1 for s in shapes):
        raise SystemExit(f"--shapes: BATCHxSEQ,... with sizes >= 1, got {text!r}")
    # The first shape is the compile shape: batch and sequence above 1 (Dynamo specializes 1).
    # Batch-1 shapes go last: every compiler makes new graphs for them.
    first = next((s for s in shapes if min(s) > 1), None)
    if first is None:
        raise SystemExit("--shapes: at least one shape needs batch and sequence above 1")
    rest = [s for s in shapes if s != first]
    return [first] + [s for s in rest if s[0] > 1] + [s for s in rest if s[0] == 1]


# ----------------------------------------------------------------------------- runner

def measure_model(args, entry, remaining) -> list[dict]:
    rows = []
    for backend in args.backends.split(","):
        left = remaining()
        if left < MIN_START_S:
            rows.append({"model": entry.name, "backend": backend, "status": "skipped",
                         "error": "the run's --budget is spent"})
            continue
        spec = {"model": entry.name, "backend": backend, "device": args.device, "dtype": args.dtype,
                "size": args.size, "threads": args.threads or None, "shapes": parse_shapes(args.shapes),
                "variants": args.variants.split(","), "warmup": args.warmup, "iters": args.iters,
                "max_shape_s": args.max_shape_s, "paired": not args.no_paired,
                "interleaved": args.interleaved, "clock": args.clock}
        cache = tempfile.mkdtemp(prefix="dynllm_")
        timeout = min(args.timeout, left)
        try:
            p = run.spawn(spec, cache, timeout, script=os.path.abspath(__file__))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        got = {}
        for r in run.result_rows(p["stdout"]):
            got[r["variant"]] = r  # the last row of each variant
        if not got:
            got["-"] = {"model": entry.name, "backend": backend, "variant": "-", "status": "error",
                        "error": f"exit {p['returncode']}, no result: {(p['stderr'] or p['stdout'])[-800:]}"}
        for r in got.values():
            if r.get("status") == "running":
                why = "the run's --budget ran out" if timeout < args.timeout else f"timeout after {timeout:.0f} s"
                r.update(status="timeout" if p["timed_out"] else "error",
                         error=(why if p["timed_out"] else f"exit {p['returncode']}: {p['stderr'][-800:]}")
                         + " (the row holds the shapes measured before)")
            r["process_wall_s"] = p["wall_s"]
            rows.append(r)
            print(progress(r), flush=True)
    return rows


def progress(r: dict) -> str:
    what = f"  {r['model']} {r['backend']} {r.get('variant', '')}"
    if r.get("status") != "ok":
        return f"{what}: {r.get('status')} {str(r.get('error', ''))[:300]}"
    shapes = r.get("shapes", [])
    if r.get("variant") == "interleaved":
        return f"{what}: dynamic over static " + ", ".join(f"{s['batch']}x{s['seq']} {s['dynamic_over_static']:.3f}x"
                                                            for s in shapes)
    bad = [f"{s['batch']}x{s['seq']}" for s in shapes if s.get("accurate") is False]
    return (f"{what}: first call {shapes[0]['first_call_s'] if shapes else '-'} s, "
            + ", ".join(f"{s['batch']}x{s['seq']} {s['median_ms']:.3f} ms" for s in shapes)
            + (f"; NOT CORRECT at {', '.join(bad)}" if bad else ""))


# ----------------------------------------------------------------------------- report

def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _f(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def _by_model(rows):
    out = {}
    for r in rows:
        key = r.get("variant")
        if r.get("backend") == "inductor":
            key = "inductor" if key in ("dynamic", "-", None) else f"inductor-{key}"
        out.setdefault(r["model"], {})[key] = r
    return out


def ratio(a: dict, b: dict) -> float | None:
    """a's time over b's at one shape: over the eager calls timed beside each (measured
    minutes apart on a machine whose load drifts, that is what compares), else raw medians."""
    if a.get("over_eager") and b.get("over_eager"):
        return a["over_eager"] / b["over_eager"]
    if b.get("median_ms") and a.get("median_ms"):
        return a["median_ms"] / b["median_ms"]
    return None


def _per_shape(r):
    return {(s["batch"], s["seq"]): s for s in (r or {}).get("shapes", [])} if r and r.get("shapes") else {}


def aten_left_by_dynamic(dyn: dict, static: dict) -> dict:
    """Ops the graphs of the dynamic compile's first call leave to ATen more often than the
    static compile of the same shape does: {op: (count dynamic, count static, the dynamic
    graph's reason)}."""
    def ops(r):
        graphs = [g for g in (r or {}).get("graphs") or [] if g.get("shape_index", 0) == 0]
        out = {}
        for g in graphs:
            for op, e in (g.get("aten") or {}).items():
                c, why = out.get(op, (0, e["reason"]))
                out[op] = (c + e["count"], why)
        return out

    d, s = ops(dyn), ops(static)
    return {op: (c, s.get(op, (0, ""))[0], why) for op, (c, why) in d.items() if c > s.get(op, (0, ""))[0]}


def table(rows: list[dict]) -> str:
    lines = []
    for model, g in _by_model(rows).items():
        shapes = next((list(_per_shape(r)) for r in g.values() if _per_shape(r)), [])
        if not shapes:
            lines.append(f"{model}: " + "; ".join(f"{k} {r.get('status')} {str(r.get('error', ''))[:200]}"
                                                  for k, r in g.items()))
            continue
        lines.append(f"{model}  (median ms per call; x: over ember static at the shape, each over the eager "
                     "calls timed beside it; first call s: static's is the geomean of its per-shape compiles)")
        lines.append(f"  {'variant':11} {'first s':>8} " + " ".join(f"{f'{b}x{s}':>16}" for b, s in shapes)
                     + "  geo/static  new code  fb  correct  bitwise=eager")
        static = _per_shape(g.get("static"))
        for key in ("eager", "static", "dynamic", "mark", "auto", "inductor", "ro", "inductor-ro"):
            r = g.get(key)
            if r is None:
                continue
            per = _per_shape(r)
            cells, ratios = [], []
            for sh in shapes:
                s = per.get(sh)
                if s is None:
                    cells.append(f"{'-':>16}")
                    continue
                x = ratio(s, static[sh]) if sh in static and key not in ("static", "eager") else None
                if x and sh[0] > 1:
                    ratios.append(x)
                cells.append(f"{s['median_ms']:>9.3f}" + (f" {x:>5.2f}x" if x else " " * 7))
            first = per[shapes[0]]["first_call_s"] if shapes[0] in per else None
            if key == "static":
                first = geomean([s["first_call_s"] for s in per.values()])
            new = r.get("new_after_first_compile") or {}
            new_code = new.get("codegen_runs", new.get("generated_kernels"))
            new_text = "-" if key in ("eager", "static") else f"{new_code}/{new.get('dynamo_graphs')}"
            fb = sum(1 for gr in r.get("graphs") or [] if gr.get("fallback")) if key != "eager" else None
            checked = [s for s in per.values() if "accurate" in s]
            correct = f"{sum(s['accurate'] for s in checked)}/{len(checked)}" if checked else "-"
            bitwise = sum(1 for s in checked if s.get("bitwise_eager"))
            status = "" if r.get("status") == "ok" else f"  {r.get('status')}: {str(r.get('error', ''))[:120]}"
            lines.append(f"  {key:11} {_f(first, '.2f'):>8} " + " ".join(cells)
                         + f"  {_f(geomean(ratios), '.3f'):>10}  {new_text:>8}  {_f(fb, 'd'):>2}  {correct:>7}"
                         f"  {bitwise if checked else '-':>13}{status}")
        inter = g.get("interleaved")
        if inter and inter.get("shapes"):
            per = {(s["batch"], s["seq"]): s for s in inter["shapes"]}
            cells = [f"{per[sh]['dynamic_ms']:>9.3f} {per[sh]['dynamic_over_static']:>5.2f}x" if sh in per else f"{'-':>16}"
                     for sh in shapes]
            geo = geomean([s["dynamic_over_static"] for s in inter["shapes"]])
            geo_min = geomean([s.get("dynamic_over_static_min") for s in inter["shapes"]])
            lines.append(f"  {'dyn, inter':11} {'':>8} " + " ".join(cells) + f"  {_f(geo, '.3f'):>10}"
                         f"  (eager, static, dynamic{' and dynamic-sf' if 'dynamic_sf_ms' in inter['shapes'][0] else ''} timed call by call, "
                         f"{inter['shapes'][0]['rounds']} rounds, "
                         f"{inter.get('clock', 'wall')} clock; "
                         f"fastest calls: {_f(geo_min, '.3f')}x)")
            if all("dynamic_sf_ms" in s for s in inter["shapes"]):
                cells = [f"{per[sh]['dynamic_sf_ms']:>9.3f} {per[sh]['dynamic_sf_over_static']:>5.2f}x" if sh in per
                         else f"{'-':>16}" for sh in shapes]
                geo_sf = geomean([s["dynamic_sf_over_static"] for s in inter["shapes"]])
                lines.append(f"  {'dyn-sf, int':11} {'':>8} " + " ".join(cells) + f"  {_f(geo_sf, '.3f'):>10}"
                             "  (dynamic=True traced with Dynamo's specialize_float: no per-call tensor per float "
                             "attribute)")
        for key in ("ro", "inductor-ro"):
            per = _per_shape(g.get(key))
            if per and g[key].get("device") == "cuda":
                lines.append(f"  {key} memory per shape: " + "; ".join(
                    f"{b}x{q} {_memory_text(s)}" for (b, q), s in per.items()))
        for key in ("static", "ro", "inductor-ro"):
            per = _per_shape(g.get(key))
            if any("issue_ms" in s for s in per.values()):
                lines.append(f"  {key} host per call (issue ms" + (", of it in ember's replay; timed calls' "
                             "recordings/replays" if key == "ro" else "") + "): " + "; ".join(
                    f"{b}x{q} {_host_text(s)}" for (b, q), s in per.items()))
            last = next(reversed(per.items()), None)
            prof = last and last[1].get("device_profile")
            if prof and "device_us" in prof:
                (b, q), _ = last
                lines.append(f"  {key} device at {b}x{q} (torch.profiler): {prof['device_us'] / 1000:.3f} ms a call, "
                             f"{prof['kernels']:.0f} kernels; most: " + "; ".join(
                                 f"{k['name'][:60]} x{k['calls']:g} {k['us']:.0f} us" for k in prof["top"][:5]))
            elif prof:
                lines.append(f"  {key} device profile: {prof.get('error')}")
            first = next(iter(per.values()), {})
            if first.get("host_profile"):
                lines.append(f"  {key} host profile at the first shape (cProfile, us per call of own time): " +
                             "; ".join(f"{e['function']} {e['own_us']:.0f}" for e in first["host_profile"][:8]))
        left = aten_left_by_dynamic(g.get("dynamic"), g.get("static"))
        for op, (c, cs, why) in left.items():
            lines.append(f"  ATen in dynamic only: {op} x{c} (static x{cs}): {why}")
        for key in ("static", "dynamic", "mark", "auto"):
            copies = {sh: s["result_copies_per_call"] for sh, s in _per_shape(g.get(key)).items()
                      if s.get("result_copies_per_call")}
            if copies:
                lines.append(f"  {key}: ATen results copied per call (strides or dtype other than compiled): " +
                             ", ".join(f"{b}x{q} {n}" for (b, q), n in copies.items()))
        for key in ("dynamic", "mark", "auto"):
            r = g.get(key) or {}
            for gr in r.get("graphs") or []:
                if gr.get("fallback"):
                    lines.append(f"  {key}: graph {gr['name']} runs eagerly: {gr['fallback'][:200]}")
                for p in gr.get("generic_paths") or []:
                    lines.append(f"  {key}: graph {gr['name']} generic path: {p.get('kernel') or 'graph'}: "
                                 f"{p.get('what')}")
            if r.get("added_by_batch_1"):
                a = r["added_by_batch_1"]
                lines.append(f"  {key}: batch 1 added {a.get('dynamo_graphs')} Dynamo graph(s), "
                             f"{a.get('codegen_runs', a.get('generated_kernels'))} code generation(s)")
    return "\n".join(lines)


def _mib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:.0f}"


def _host_text(s: dict) -> str:
    """A shape's host time per call: until the call returned (before the sync), and under ro
    the part in ember's replay and what the timed calls recorded and replayed."""
    text = _f(s.get("issue_ms"), ".3f")
    if "replay_host_ms" in s:
        counts = s.get("cuda_graphs_in_timing") or {}
        text += f" ({_f(s['replay_host_ms'], '.3f')}; {counts.get('recordings', '-')}/{counts.get('replays', '-')})"
    return text


def _memory_text(s: dict) -> str:
    """A reduce-overhead shape's memory: what the process reserved more over its calls, and
    for ember what its recordings took (their shared pool's growth, their static inputs)."""
    text = f"+{_mib(s.get('reserved_growth'))} MiB reserved"
    recs = [m for graphs in (s.get("recordings") or {}).values() for m in graphs.values()]
    if recs:
        text += (f" (recordings: pool +{_mib(sum(m['pool_growth'] for m in recs))}, inputs "
                 f"{_mib(sum(m['static_inputs'] for m in recs))})")
    return text


def acceptance(rows: list[dict]) -> str:
    """Geomeans over models and shapes (batch > 1) of dynamic over static and over Inductor
    dynamic; models with new code after the first compile, eager-fallback graphs, wrong
    outputs, ops left to ATen by the dynamic compile only."""
    out = []
    ratios = {"dynamic/static": [], "dynamic/static, interleaved": [], "dynamic/static, interleaved, fastest calls": [],
              "dynamic/static, interleaved, floats specialized": [],
              "dynamic/inductor": [], "dynamic/eager": [], "ro/static": [], "ro/inductor-ro": []}
    worst = {}
    new_code, fallbacks, wrong, aten, generic = [], [], [], [], []
    for model, g in _by_model(rows).items():
        dyn, static, ind, eager = (_per_shape(g.get(k)) for k in ("dynamic", "static", "inductor", "eager"))
        ro, ind_ro = _per_shape(g.get("ro")), _per_shape(g.get("inductor-ro"))
        for sh, s in ro.items():
            for name, other in (("ro/static", static), ("ro/inductor-ro", ind_ro)):
                v = ratio(s, other[sh]) if sh in other and sh[0] > 1 else None
                if v:
                    ratios[name].append(v)
                    if v > worst.get(name, (0, ""))[0]:
                        worst[name] = (v, f"{model} {sh[0]}x{sh[1]}")
        inter = {(s["batch"], s["seq"]): s for s in (g.get("interleaved") or {}).get("shapes", [])}
        for sh, s in inter.items():
            ratios["dynamic/static, interleaved"].append(s["dynamic_over_static"])
            ratios["dynamic/static, interleaved, fastest calls"].append(s.get("dynamic_over_static_min"))
            if "dynamic_sf_over_static" in s:
                ratios["dynamic/static, interleaved, floats specialized"].append(s["dynamic_sf_over_static"])
            if s["dynamic_over_static"] > worst.get("dynamic/static, interleaved", (0, ""))[0]:
                worst["dynamic/static, interleaved"] = (s["dynamic_over_static"], f"{model} {sh[0]}x{sh[1]}")
        for sh, s in dyn.items():
            if sh[0] == 1:
                continue
            for name, other in (("dynamic/static", static), ("dynamic/inductor", ind), ("dynamic/eager", eager)):
                if name == "dynamic/eager" and s.get("over_eager"):
                    other = {sh: {"median_ms": s["eager_paired_ms"]}}  # the eager calls timed beside it
                v = ratio(s, other[sh]) if sh in other else None
                if v:
                    ratios[name].append(v)
                    if v > worst.get(name, (0, ""))[0]:
                        worst[name] = (v, f"{model} {sh[0]}x{sh[1]}")
        for key in ("dynamic", "mark", "auto", "ro"):
            r = g.get(key) or {}
            new = r.get("new_after_first_compile") or {}
            if new.get("codegen_runs") or new.get("dynamo_graphs"):
                new_code.append(f"{model} {key}")
            if any(gr.get("fallback") for gr in r.get("graphs") or []) or (r.get("fallbacks_by_reason") or {}):
                fallbacks.append(f"{model} {key}")
            if any(s.get("accurate") is False for s in _per_shape(r).values()):
                wrong.append(f"{model} {key}")
        if aten_left_by_dynamic(g.get("dynamic"), g.get("static")):
            aten.append(model)
        n = sum(len(gr.get("generic_paths") or []) for gr in (g.get("dynamic") or {}).get("graphs") or []
                if gr.get("shape_index", 0) == 0)
        if n:
            generic.append(f"{model} ({n})")
    for name, vs in ratios.items():
        w = worst.get(name)
        out.append(f"{name}: geomean {_f(geomean(vs), '.3f')}x over {len(vs)} (model, shape) pairs"
                   + (f", worst {w[0]:.2f}x ({w[1]})" if w else ""))
    out.append(f"new code or Dynamo graphs after the first compile (batch > 1): {', '.join(new_code) or 'none'}")
    out.append(f"eager-fallback graphs: {', '.join(fallbacks) or 'none'}; not correct: {', '.join(wrong) or 'none'}")
    out.append(f"ops left to ATen by the dynamic compile only: {', '.join(aten) or 'none'}")
    out.append(f"generic paths in the dynamic=True graphs (the compiler's own comparison with static sizes): "
               f"{', '.join(generic) or 'none'}")
    return "\n".join(out)


def report(rows: list[dict]) -> str:
    return table(rows) + "\n\n" + acceptance(rows)


# ----------------------------------------------------------------------------- commands

def main(argv):
    if argv and argv[0] == "child":
        dynamic_measure.main(json.loads(argv[1]))
        sys.stdout.flush()
        os._exit(0)  # Inductor's compile workers and CUDA teardown can take seconds
    if argv and argv[0] == "summary":
        with open(argv[1]) as f:
            print(report(json.load(f)["rows"]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"))
    p.add_argument("--dtype", choices=tuple(dynamic_measure.DTYPES))
    p.add_argument("--size", choices=registry.SIZES)
    p.add_argument("--models", default=MODELS)
    p.add_argument("--shapes", help="BATCHxSEQ,... (the first with batch and sequence > 1 compiles)")
    p.add_argument("--variants", default="dynamic,mark,auto,static",
                   help="ember's, besides eager (ro: dynamic=True with mode=\"reduce-overhead\", and Inductor's too)")
    p.add_argument("--backends", default="ember,inductor")
    p.add_argument("--threads", type=int, help="CPU threads (torch.set_num_threads, OMP_NUM_THREADS)")
    p.add_argument("--warmup", type=int)
    p.add_argument("--iters", type=int)
    p.add_argument("--max-shape-s", type=float, help="seconds of timed calls per shape at most")
    p.add_argument("--timeout", type=float, help="seconds per process")
    p.add_argument("--budget", type=float, default=0.0, help="seconds for the whole run (0: none)")
    p.add_argument("--no-paired", action="store_true",
                   help="no eager call timed beside each compiled one (halves the timed calls)")
    p.add_argument("--interleaved", type=int, choices=(0, 1),
                   help="1: after the variants, eager, ember static, dynamic and dynamic traced with specialize_float "
                        "timed call by call in rounds "
                        "(default on the CPU, whose load drifts)")
    p.add_argument("--clock", choices=("wall", "cpu"),
                   help="the interleaved timing's clock: cpu times the calling thread's CPU time (time.thread_time; "
                        "with one thread, all of a call's work), steadier on a loaded machine; default: cpu on the "
                        "CPU with one thread, else wall")
    p.add_argument("--out", default="", help="JSON: the run's environment and every row")
    args = p.parse_args(argv)
    if args.device is None:
        import torch
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    for k, v in DEFAULTS[args.device].items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    args.shapes = args.shapes or SHAPES[args.size]
    if args.clock is None:
        args.clock = "cpu" if args.device == "cpu" and args.threads == 1 else "wall"
    if args.clock == "cpu" and (args.device != "cpu" or args.threads != 1):
        raise SystemExit("--clock cpu times the calling thread: use it on the CPU with --threads 1")
    models = registry.select(args.models)
    missing = [m.name for m in models if m.dynamic_inputs is None]
    if missing:
        raise SystemExit(f"no dynamic_inputs for {', '.join(missing)}")
    env = run.environment(args.device)
    run.PYCACHE[0] = env["pycache_prefix"] = run.pycache_prefix("auto")
    print(f"dynamic_llm: {env['device_name']}, torch {env['torch']}, transformers {env['transformers']}, "
          f"ember {env['git']}; {args.size} sizes, {args.dtype}, shapes {args.shapes}"
          + (f", {args.threads} thread(s)" if args.device == "cpu" else ""), flush=True)
    t_start = time.perf_counter()
    remaining = (lambda: args.budget - (time.perf_counter() - t_start)) if args.budget else (lambda: float("inf"))
    rows = []
    for entry in models:
        why = entry.missing()
        if why:
            rows.append({"model": entry.name, "backend": "-", "variant": "-", "status": "skipped", "error": why})
            continue
        print(f"{entry.name}:", flush=True)
        rows += measure_model(args, entry, remaining)
        if args.out:  # after each model: a run cut short keeps what it measured
            write(args.out, env, args, rows)
    print(f"\n{len(rows)} rows in {time.perf_counter() - t_start:.0f} s\n", flush=True)
    print(report(rows), flush=True)
    unreached = sorted({r["model"] for r in rows if r.get("status") == "skipped" and "budget" in r.get("error", "")})
    if unreached:
        print(f"\nthe budget ran out before these models were measured: rerun with --models {','.join(unreached)}")


def write(path: str, env: dict, args, rows: list[dict]):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump({"env": env, "argv": sys.argv[1:], "args": vars(args), "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1:])

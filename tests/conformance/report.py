"""Summaries of a conformance sweep: JSON-able dict, markdown page, short table."""
from __future__ import annotations

import collections
import os
import platform
import re

CLASSES = ["ember", "aten", "wrong", "crash", "skip"]
DTYPE_ORDER = ["f32", "f64", "f16", "bf16", "i32", "i64", "bool"]


def machine_line() -> str:
    import torch
    from ember.tools.doctor import cpu_name

    return f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch {torch.__version__}"


def _packet(op: str) -> str:
    """aten.add.Tensor -> aten.add (the op, whatever overload)."""
    parts = op.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else op


def _reason_key(reason: str) -> str:
    """Group skip reasons that differ only in details (sizes, names in quotes)."""
    r = re.sub(r"\d+", "N", reason)
    return r[:140]


def is_core(name: str) -> bool:
    """Whether PyTorch tags the op (any overload) as part of the core ATen opset."""
    import torch

    ns, _, op = name.partition(".")
    packet = getattr(getattr(torch.ops, ns, None), op, None)
    if packet is None or not hasattr(packet, "overloads"):
        return False
    return any(torch.Tag.core in getattr(packet, o).tags for o in packet.overloads())


def op_coverage(results) -> dict:
    """Per distinct ATen op that reached ember: where it ran, and why not in a kernel."""
    ops: dict[str, dict] = {}
    for r in results:
        for op, where, why in r.get("ops", []):
            e = ops.setdefault(_packet(op), {"kernel": 0, "extern": 0, "eager": 0, "reasons": collections.Counter()})
            e[where] += 1
            if why:
                e["reasons"][f"{where}: {why}"] += 1
    table = {}
    for name, e in sorted(ops.items()):
        if e["kernel"] and not e["extern"]:
            status = "ember"
        elif e["kernel"]:
            status = "ember+aten"
        elif e["extern"]:
            status = "aten"
        else:
            status = "eager-only"
        table[name] = {"status": status, "core": is_core(name), "kernel": e["kernel"], "extern": e["extern"], "eager": e["eager"],
                       "reasons": [k for k, _ in e["reasons"].most_common(3)]}
    return table


def summarize(results, meta) -> dict:
    totals = collections.Counter(r["class"] for r in results)
    by_dtype: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        by_dtype[r["dtype"]][r["class"]] += 1
    failures = [
        {k: r.get(k) for k in ("op", "dtype", "sample", "class", "reason")}
        for r in results if r["class"] in ("wrong", "crash")
    ]
    skips = collections.Counter(_reason_key(r["reason"]) for r in results if r["class"] == "skip")
    coverage = op_coverage(results)
    lowered = sum(1 for v in coverage.values() if v["status"] in ("ember", "ember+aten"))
    core = [v for v in coverage.values() if v["core"]]
    core_lowered = sum(1 for v in core if v["status"] in ("ember", "ember+aten"))
    return {
        "meta": meta,
        "totals": dict(totals),
        "cases": len(results),
        "ops_swept": len({r["op"] for r in results}),
        "by_dtype": {d: dict(c) for d, c in by_dtype.items()},
        "failures": sorted(failures, key=lambda f: (f["class"], f["op"], f["dtype"], f["sample"] or 0)),
        "skip_reasons": skips.most_common(40),
        "aten_ops": coverage,
        "aten_ops_lowered": lowered,
        "aten_ops_total": len(coverage),
        "core_ops_lowered": core_lowered,
        "core_ops_total": len(core),
    }


def short_table(s) -> str:
    lines = [f"{'dtype':<6}" + "".join(f"{c:>8}" for c in CLASSES) + f"{'total':>8}"]
    for d in DTYPE_ORDER:
        c = s["by_dtype"].get(d)
        if c:
            lines.append(f"{d:<6}" + "".join(f"{c.get(k, 0):>8}" for k in CLASSES) + f"{sum(c.values()):>8}")
    t = s["totals"]
    lines.append(f"{'all':<6}" + "".join(f"{t.get(k, 0):>8}" for k in CLASSES) + f"{s['cases']:>8}")
    if s["core_ops_total"]:
        lines.append(f"core ATen ops reached: {s['core_ops_total']}, run by ember kernels: {s['core_ops_lowered']} "
                     f"({100 * s['core_ops_lowered'] / s['core_ops_total']:.1f}%)")
    if s["aten_ops_total"]:
        lines.append(f"ATen ops reached: {s['aten_ops_total']}, run by ember kernels: {s['aten_ops_lowered']} "
                     f"({100 * s['aten_ops_lowered'] / s['aten_ops_total']:.1f}%)")
    return "\n".join(lines)


def markdown(s) -> str:
    m = s["meta"]
    out = ["# OpInfo conformance", ""]
    out += [
        "Every OpInfo in PyTorch's `op_db`, every CPU sample input, in each dtype the OpInfo",
        "supports among f32, f64, f16, bf16, i32, i64 and bool: compiled with `backend=\"ember\"`",
        "(fresh Dynamo state per case, `fullgraph=False`) and compared with eager. The runner is",
        "`tests/conformance/` (`cases.py` runs and classifies one case; `sweep.py` drives worker",
        "processes); CI runs a slice of it (`tests/python/test_conformance.py`). Runs:",
        "",
    ]
    for run in (m if isinstance(m, list) else [m]):
        done = run.get("units_done", run.get("units"))
        partial = "" if done == run.get("units") else f", stopped at its deadline after {done} of {run.get('units')} op x dtype units"
        out += [
            f"- `{run.get('command', '?')}` (dtypes {', '.join(run.get('dtypes', []))}): {run.get('date', '?')};",
            f"  {run.get('machine', '?')}; {run.get('jobs', '?')} worker processes;",
            f"  **{run.get('seconds', 0) / 60:.1f} min**{partial}",
        ]
    out += [
        "",
        f"{s['cases']} cases over {s['ops_swept']} OpInfos in all.",
        "",
        "Classes: **ember** matched eager with every ATen op in ember kernels; **aten** matched eager",
        "with some op run as an ATen call or a graph run eagerly; **wrong** differs from eager;",
        "**crash** ember raised or the process died; **skip** not ember's to judge (eager raises, the",
        "reference backend `aot_eager` fails the same way, or Dynamo gave ember no graph).",
        "Tolerances are TorchInductor's OpInfo rule: torch.testing's per-dtype defaults, NaN equals",
        "NaN, exact dtypes, and for f16/bf16 a float32 reference (a result may match it or eager);",
        "an f16/bf16 result that matches neither may still pass TorchInductor's benchmark accuracy",
        "rule: RMSE against a float64 reference at most 3x eager's (+ tol/10), NaN/inf where eager's.",
        "Runs may come from different machines and torch versions (each run's line says which);",
        "a later run's results replace an earlier run's for the (op, dtype) units it re-ran.",
        "Random ops (their eager result changes with the seed) are checked by shape, dtype, value",
        "set and mean, not values.",
        "",
        "| dtype | " + " | ".join(CLASSES) + " | total |",
        "|---|" + "---:|" * (len(CLASSES) + 1),
    ]
    for d in DTYPE_ORDER:
        c = s["by_dtype"].get(d)
        if c:
            out.append(f"| {d} | " + " | ".join(str(c.get(k, 0)) for k in CLASSES) + f" | {sum(c.values())} |")
    t = s["totals"]
    out.append("| **all** | " + " | ".join(f"**{t.get(k, 0)}**" for k in CLASSES) + f" | **{s['cases']}** |")
    out.append("")
    cov = s["aten_ops"]
    n, low = s["aten_ops_total"], s["aten_ops_lowered"]
    cn, clow = s["core_ops_total"], s["core_ops_lowered"]
    out += [
        "## ATen ops: ember kernels or not",
        "",
        f"**{cn} distinct core ATen ops** (PyTorch's `torch.Tag.core` opset) reached ember after Dynamo,",
        f"AOTAutograd and ember's decompositions; **{clow} of them ({100 * clow / max(cn, 1):.1f}%) run in ember",
        f"kernels**. Counting every op that reached ember, core or not (linear algebra, FFTs, special",
        f"functions, ...): {low} of {n} ({100 * low / max(n, 1):.1f}%).",
        "",
        "An op counts as lowered when it ran in an ember kernel; *ember+aten* ones also ran as ATen",
        "calls in some cases (the reason is listed). *eager-only* ops were only seen in graphs that ran",
        "eagerly because of another op or a dtype ember does not handle (complex, unsigned 64-bit).",
        "The table lists every op not lowered without exception, core ops first.",
        "",
        "| op | core | status | in kernels | ATen calls | in eager graphs | reasons |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for name, v in sorted(cov.items(), key=lambda kv: (not kv[1]["core"], kv[0])):
        if v["status"] == "ember":
            continue
        reasons = "; ".join(x.replace("|", "\\|") for x in v["reasons"])
        out.append(f"| `{name}` | {'yes' if v['core'] else ''} | {v['status']} | {v['kernel']} | {v['extern']} | {v['eager']} | {reasons} |")
    out.append("")
    lowered = sorted(k for k, v in cov.items() if v["status"] == "ember")
    out += ["Lowered without exception: " + ", ".join(f"`{k.replace('aten.', '')}`" for k in lowered), ""]
    out += ["## Wrong results and crashes", ""]
    if not s["failures"]:
        out.append("None.")
    else:
        out += ["| class | op | dtype | sample | reason |", "|---|---|---|---:|---|"]
        for f in s["failures"]:
            reason = (f["reason"] or "").replace("|", "\\|")[:300]
            out.append(f"| {f['class']} | `{f['op']}` | {f['dtype']} | {f['sample']} | {reason} |")
    findings = os.path.join(os.path.dirname(os.path.abspath(__file__)), "findings.md")
    if os.path.exists(findings):  # hand-written: what earlier sweeps found and how it was fixed
        out += ["", open(findings).read().rstrip()]
    out += ["", "## Most common skip reasons", "", "| cases | reason |", "|---:|---|"]
    for reason, count in s["skip_reasons"]:
        out.append(f"| {count} | {reason.replace('|', chr(92) + '|')} |")
    out.append("")
    return "\n".join(out)

"""ember.explain: what ember did with each graph of a function or module.

    report = ember.explain(model, x)
    print(report)              # a readable table
    report.to_dict()           # JSON-able
"""
from __future__ import annotations

import time

import torch

from . import backend as _backend


def _op_name(imported, node_id):
    node = imported.nodes[node_id]
    return str(node.target) if node.op == "call_function" else node.op


def _graph_dict(record) -> dict:
    d = {"name": record.name, "fallback_reason": record.fallback_reason, "kernels": [], "externs": [],
         "times_s": {k: round(v, 6) for k, v in record.times.items()}, "cache": None}
    cg, imported = record.cg, record.imported
    if cg is None:
        if imported is not None:
            d["ops"] = dict(imported.op_counts)
        return d
    for k in cg.kernels:
        ops = [_op_name(imported, o) for o in k["origins"]]
        d["kernels"].append({"name": k["name"], "ops": ops, "rows": k["rows"], "work_per_row": k["work_per_row"]})
    for e in cg.externs:
        d["externs"].append({"op": e["op"], "reason": e["reason"]})
    d["cache"] = cg.cache_status
    d["cache_note"] = cg.cache_note
    d["ops"] = dict(imported.op_counts)
    return d


class Report:
    def __init__(self, graphs: list[dict], first_call_s: float, graph_breaks: dict | None):
        self.graphs = graphs
        self.first_call_s = first_call_s
        self.graph_breaks = graph_breaks

    def to_dict(self) -> dict:
        return {"graphs": self.graphs, "first_call_s": round(self.first_call_s, 6), "graph_breaks": self.graph_breaks}

    @property
    def kernels(self):
        return [k for g in self.graphs for k in g["kernels"]]

    @property
    def externs(self):
        return [e for g in self.graphs for e in g["externs"]]

    def __str__(self) -> str:
        lines = [f"ember.explain: {len(self.graphs)} graph(s), first call {self.first_call_s:.3f} s"]
        if self.graph_breaks:
            lines.append(f"graph breaks: {self.graph_breaks['count']}")
            for r in self.graph_breaks["reasons"]:
                lines.append(f"  - {r}")
        for g in self.graphs:
            lines.append("")
            lines.append(f"graph {g['name']}: cache {g['cache']}")
            if g["fallback_reason"]:
                lines.append(f"  runs eagerly: {g['fallback_reason']}")
                continue
            t = g["times_s"]
            phases = ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in t.items() if k != "total")
            lines.append(f"  compile {1000 * t.get('total', 0):.1f} ms ({phases})")
            lines.append(f"  {len(g['kernels'])} ember kernel(s):")
            for k in g["kernels"]:
                ops = _summarize(k["ops"]) or "layout copy (for an ATen op's preferred layout)"
                lines.append(f"    {k['name']:<12} rows={k['rows']:<8} {ops}")
            lines.append(f"  {len(g['externs'])} ATen call(s):")
            for e in g["externs"]:
                lines.append(f"    {e['op']:<40} {e['reason']}")
        return "\n".join(lines)

    __repr__ = __str__


def _summarize(ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for o in ops:
        short = o.replace("aten.", "").replace(".default", "")
        counts[short] = counts.get(short, 0) + 1
    return ", ".join(f"{k}x{v}" if v > 1 else k for k, v in counts.items())


def explain(fn, *example_inputs, options=None, graph_breaks=True) -> Report:
    """Compile `fn` with ember, run it once on `example_inputs`, and report each graph."""
    torch._dynamo.reset()
    records: list = []
    _backend._recorders.append(records)
    try:
        compiled = torch.compile(fn, backend=_backend.make_backend(None, options))
        t0 = time.perf_counter()
        compiled(*example_inputs)
        first = time.perf_counter() - t0
    finally:
        _backend._recorders.remove(records)
    breaks = None
    if graph_breaks:
        try:
            torch._dynamo.reset()
            ex = torch._dynamo.explain(fn)(*example_inputs)
            breaks = {"count": ex.graph_break_count, "reasons": [str(b.reason) for b in ex.break_reasons]}
        except Exception as e:  # explain is diagnostics; never fail the report for it
            breaks = {"count": None, "reasons": [f"torch._dynamo.explain failed: {e}"]}
        finally:
            torch._dynamo.reset()
    return Report([_graph_dict(r) for r in records], first, breaks)


def last_compile_stats() -> dict:
    """Totals over every graph ember compiled in this process."""
    summaries = _backend._summaries
    return {
        "graphs": len(summaries),
        "backend_seconds": sum(s["times"].get("total", 0.0) for s in summaries),
        "compile_seconds": sum(s["times"].get("compile", 0.0) for s in summaries),
        "cache": [s["cache"] for s in summaries],
        "kernels": sum(s["kernels"] for s in summaries),
        "cache_notes": [s["cache_note"] for s in summaries if s["cache_note"]],
    }

"""`ember report`'s page: one self-contained HTML file (inline CSS and SVG, no script, no
network) built from explain's report with details (ember.explain(..., details=True)) and,
from `ember bench --html`, the side-by-side benchmark.

Sections: summary; speedup (estimated against measured, and the benchmark's backends);
graph breaks and recompilations with their source lines; achieved bandwidth of every
kernel step against the device's copy bandwidth (a roofline-style plot and the slowest
steps); then per graph its source, compile phases, kernels with their ops and time,
ATen calls with reasons, fusion plan and generated code (highlighted).
"""
from __future__ import annotations

import datetime
import html
import platform

from ..explain import format_stats, format_times
from .highlight import highlight_c, highlight_plan
from .svg_plot import bars_svg, roofline_svg

CSS = """
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222; margin: 0;
       background: #f6f6f4; }
header { background: #2b2b2b; color: #fff; padding: 18px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; } header .meta { color: #ccc; font-size: 13px; }
header .flame { color: #ff6a3d; }
nav { padding: 8px 32px; background: #ececea; font-size: 13px; } nav a { margin-right: 14px; color: #8a1020; }
main { padding: 8px 32px 40px; max-width: 1200px; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 12px 20px; margin: 16px 0; }
h2 { font-size: 18px; margin: 4px 0 10px; } h3 { font-size: 15px; margin: 14px 0 6px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 110px; background: #fafafa; }
.card b { display: block; font-size: 20px; } .card span { color: #666; font-size: 12px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 3px 10px 3px 0; text-align: left; vertical-align: top; }
th { color: #555; font-weight: 600; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font: 12.5px/1.4 "SFMono-Regular", Menlo, Consolas, monospace; }
pre { background: #fbfaf7; border: 1px solid #e6e3da; padding: 10px; overflow-x: auto; max-height: 560px; }
.src { color: #1f5fa8; } .reason { color: #555; } .note { color: #666; font-size: 13px; }
.warn { color: #b00020; } .ok { color: #1b7f3b; }
details > summary { cursor: pointer; color: #8a1020; margin: 6px 0; }
.cm { color: #8a8a8a; font-style: italic; } .pp { color: #9a4d00; } .st { color: #2a7a2a; } .nu { color: #1c5db5; }
.kw { color: #8a1020; font-weight: 600; } .ty { color: #6b3fa0; } .em { color: #c8102e; } .fn { color: #0b6e6e; }
svg text.tick, svg text.legend { font-size: 11px; fill: #444; } svg text.axis { font-size: 12px; fill: #333; }
svg text.roof-label { font-size: 12px; fill: #222; font-weight: 600; } svg text.point-label { font-size: 10.5px; fill: #222; }
"""


def _e(value) -> str:
    return html.escape(str(value))


def _short_op(op: str) -> str:
    return op.replace("aten.", "").replace(".default", "")


def _ops_summary(ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for o in ops:
        counts[_short_op(o)] = counts.get(_short_op(o), 0) + 1
    return ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counts.items()) or "layout copy"


def _where(src: dict) -> str:
    if not src or not src.get("file"):
        return ""
    fn = f" in {_e(src['function'])}" if src.get("function") else ""
    code = f": <code>{_e(src['code'])}</code>" if src.get("code") else ""
    return f'<span class="src">{_e(src["file"])}:{_e(src["line"])}</span>{fn}{code}'


def _points(graphs: list[dict]) -> list[dict]:
    """Every measured kernel step: its graph, label, ops, bytes, time and bandwidth."""
    out = []
    for g in graphs:
        ops = {k["name"]: k["ops"] for k in g["kernels"]}
        for s in g.get("kernel_steps", []):
            us, nbytes = s.get("us"), s.get("bytes")
            gbs = nbytes / (us * 1e-6) / 1e9 if us and nbytes else None
            out.append({"graph": g["name"], "label": s["label"], "us": us, "bytes": nbytes, "gbs": gbs,
                        "ops": [o for k in s["kernels"] for o in ops.get(k, [])]})
    return out


def _summary(d: dict, points: list[dict]) -> str:
    graphs = d["graphs"]
    est = d.get("estimate") or {}
    breaks = (d.get("graph_breaks") or {}).get("count")
    cards = [("graphs", len(graphs)), ("ember kernels", sum(len(g["kernels"]) for g in graphs)),
             ("ATen calls", sum(len(g["externs"]) for g in graphs)),
             ("graph breaks", "-" if breaks is None else breaks), ("recompilations", len(d.get("recompiles", []))),
             ("first call", f"{d['first_call_s']:.2f} s")]
    if est:
        cards += [("estimated speedup", f"{est['estimated_speedup']:.2f}x"),
                  ("measured speedup", f"{est['measured_speedup']:.2f}x")]
    measured = sum(p["us"] for p in points if p["us"])
    if measured:
        cards.append(("kernel time per call", f"{measured / 1000:.2f} ms"))
    body = "".join(f'<div class="card"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for k, v in cards)
    stats = f'<p class="note">counters: {_e(format_stats(d["stats"]))}</p>' if d.get("stats") else ""
    return f'<section id="summary"><h2>Summary</h2><div class="cards">{body}</div>{stats}</section>'


def _speedup(d: dict, bench: dict | None) -> str:
    est, parts = d.get("estimate"), []
    if est:
        rows = [("estimated", est["estimated_speedup"], f"{est['estimated_speedup']:.2f}x"),
                ("measured", est["measured_speedup"], f"{est['measured_speedup']:.2f}x")]
        parts.append("<h3>ember over eager: estimated and measured</h3>"
                     + bars_svg(rows, reference=1.0, reference_label="1.0x: as fast as eager")
                     + f'<p class="note">eager {est["eager_ms"]:.3f} ms, ember {est["ember_ms"]:.3f} ms per call '
                     f'(medians, interleaved). The estimate: launch-bound share {est["launch_share"]:.0%}, library '
                     f'share {est["library_share"]:.0%}, fusion potential {est["fusion_potential"]:.0%}, '
                     f'{est.get("graph_breaks") or 0} graph break(s) (python/ember/tools/estimate.py).</p>')
    if bench:
        parts.append(_bench_section(bench))
    if not parts:
        return ""
    return '<section id="speedup"><h2>Speedup</h2>' + "".join(parts) + "</section>"


def _bench_section(bench: dict) -> str:
    rows, table = [], []
    for name, r in bench["backends"].items():
        st, fc = r["steady"], r["first_call"]
        if st.get("error"):
            table.append(f"<tr><td>{_e(name)}</td><td colspan=5 class=warn>{_e(st['error'])}</td></tr>")
            continue
        speed = r.get("speedup_vs_eager")
        rows.append((name, st["median_ms"], f"{st['median_ms']:.3f} ms" + (f" ({speed:.2f}x)" if speed else "")))
        cold, warm = fc.get("cold", {}).get("first_call_s"), fc.get("warm", {}).get("first_call_s")
        ok = st.get("errors", {}).get("ok")
        table.append(f"<tr><td>{_e(name)}</td><td class=num>{st['median_ms']:.3f}</td>"
                     f"<td class=num>{st['p10_ms']:.3f}-{st['p90_ms']:.3f}</td>"
                     f"<td class=num>{'-' if cold is None else f'{cold:.2f}'}</td>"
                     f"<td class=num>{'-' if warm is None else f'{warm:.2f}'}</td>"
                     f"<td class={'ok' if ok else 'warn'}>{'ok' if ok else 'MISMATCH'}</td></tr>")
    s = bench["settings"]
    return ("<h3>Side by side (ember bench)</h3>" + bars_svg(rows, color="#555")
            + "<table><tr><th>backend</th><th class=num>median ms</th><th class=num>p10-p90 ms</th>"
            "<th class=num>cold 1st call s</th><th class=num>warm 1st call s</th><th>numerics</th></tr>"
            + "".join(table) + "</table>"
            + f'<p class="note">{s["rounds"]} interleaved rounds x {s["per_round"]} calls after {s["warmup"]} '
            f'warmup calls, under torch.no_grad(); {_e(bench["machine"]["cpu"])}, {bench["threads"]} threads.</p>')


def _breaks_and_recompiles(d: dict) -> str:
    gb = d.get("graph_breaks")
    items = []
    if gb is None:
        items.append('<p class="note">Graph breaks were not checked.</p>')
    elif not gb.get("breaks") and gb.get("count"):
        items += [f"<li class=reason>{_e(r)}</li>" for r in gb.get("reasons", [])]
    for b in (gb or {}).get("breaks", []):
        reason = "<br>".join(_e(ln) for ln in b["reason"].strip().splitlines()[:3])
        items.append(f"<li>{_where(b)}<div class=reason>{reason}</div></li>")
    breaks = (f"<h3>Graph breaks: {_e((gb or {}).get('count', 0))}</h3><ol>{''.join(items)}</ol>" if gb is not None
              else items[0])
    recs = []
    for r in d.get("recompiles", []):
        fails = "".join(f"<li><code>[{_e(f['entry'])}] {_e(f['guard'])}</code>"
                        + (f" from {_where(f['source'])}" if f.get("source") else "") + "</li>"
                        for f in r["failures"])
        recs.append(f"<li>{_e(r['label'])} compiled again as {_e(r['compile_id'])}, because a guard failed:"
                    f"<ul>{fails}</ul></li>")
    recompiles = f"<h3>Recompilations: {len(recs)}</h3>" + (f"<ol>{''.join(recs)}</ol>" if recs else "")
    return f'<section id="graph-breaks"><h2>Graph breaks and recompilations</h2>{breaks}{recompiles}</section>'


def _num(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _step_row(p: dict, roof: float | None) -> str:
    share = p["gbs"] / roof if p["gbs"] and roof else None
    mb = p["bytes"] / 1e6 if p["bytes"] is not None else None
    return (f"<tr><td>{_e(p['graph'])}</td><td><code class=em>{_e(p['label'])}</code></td>"
            f"<td>{_e(_ops_summary(p['ops']))}</td><td class=num>{_num(p['us'], '.1f')}</td>"
            f"<td class=num>{_num(mb, '.3f')}</td><td class=num>{_num(p['gbs'], '.2f')}</td>"
            f"<td class=num>{_num(share, '.0%')}</td></tr>")


def _bandwidth(d: dict, points: list[dict]) -> str:
    device = d.get("device") or {}
    roof = device.get("copy_gbs")
    plot = roofline_svg(points, roof)
    slow = sorted((p for p in points if p["us"]), key=lambda p: -p["us"])[:15]
    rows = "".join(_step_row(p, roof) for p in slow)
    table = ("<table><tr><th>graph</th><th>kernel step</th><th>ops</th><th class=num>us per call</th>"
             "<th class=num>MB moved</th><th class=num>GB/s</th><th class=num>of copy</th></tr>" + rows + "</table>")
    note = (f'<p class="note">Device: {_e(device.get("name", "?"))}; copy bandwidth {roof:.1f} GB/s (a copy larger '
            "than the caches: bytes read plus written over its median time). A step's time: its profiler range on "
            "the CPU, its kernels' device time on a GPU, the mean over profiled calls. Bytes: every buffer its "
            "kernels take, read or written once; a step whose buffers stay in the caches can pass the copy's rate.</p>"
            if roof else "")
    return (f'<section id="bandwidth"><h2>Achieved bandwidth per kernel step</h2>{plot}{note}'
            f"<h3>Slowest kernel steps</h3>{table}</section>")


def _graph(g: dict, points: list[dict], open_code: bool = False) -> str:
    frame = g.get("frame") or {}
    head = (f'<section id="graph-{_e(g["name"])}"><h2>Graph {_e(g["name"])}: {_e(g["label"])}</h2>'
            f'<p>Dynamo frame {_e(frame.get("compile_id", "-"))}; traced to ATen by {_e(g["front_end"])}'
            + (f"; cache {_e(g['cache'])}" if g.get("cache") else "") + "</p>")
    if g.get("fallback_reason"):
        return head + f'<p class="warn">Runs eagerly: {_e(g["fallback_reason"])}</p></section>'
    verb = "loaded in" if g.get("loaded") else "compiled in"
    parts = [head, f"<p>{verb} {_e(format_times(g))}</p>"]
    us = {p["label"]: p for p in points if p["graph"] == g["name"]}
    step_of = {k: s for s in g.get("kernel_steps", []) for k in s["kernels"]}
    rows = []
    for k in g["kernels"]:
        shape = f"rows {k['rows']}" if "rows" in k else k.get("launch", "")
        shared = f" (code of {k['function']})" if k.get("function", k["name"]) != k["name"] else ""
        step = step_of.get(k["name"])
        timed = us.get(step["label"]) if step else None
        if step and step["kernels"][0] != k["name"]:  # one range times the whole step: shown once
            time_cells = '<td class="num note" colspan=2>in the step above</td>'
        else:
            together = f" (step of {len(step['kernels'])})" if step and len(step["kernels"]) > 1 else ""
            time_cells = (f"<td class=num>{_num(timed and timed['us'], '.1f')}{together}</td>"
                          f"<td class=num>{_num(timed and timed['gbs'], '.2f')}</td>")
        rows.append(f"<tr><td><code class=em>{_e(k['name'])}</code>{_e(shared)}</td><td>{_e(_ops_summary(k['ops']))}"
                    f"</td><td>{_e(shape)}</td>{time_cells}</tr>")
    parts.append(f"<h3>{len(g['kernels'])} ember kernel(s)</h3><table><tr><th>kernel</th><th>ATen ops fused</th>"
                 "<th>shape</th><th class=num>us per call</th><th class=num>GB/s</th></tr>" + "".join(rows)
                 + "</table>")
    externs = "".join(f"<tr><td><code>{_e(e['op'])}</code></td><td class=reason>{_e(e['reason'])}</td></tr>"
                      for e in g["externs"])
    parts.append(f"<h3>{len(g['externs'])} ATen call(s)</h3>"
                 + (f"<table><tr><th>op</th><th>why ATen runs it</th></tr>{externs}</table>" if externs else ""))
    if g.get("fusion_plan"):
        parts.append(f'<h3>Fusion plan</h3><pre class="plan">{highlight_plan(g["fusion_plan"])}</pre>')
    if g.get("code"):
        lines = g["code"].count("\n") + 1
        parts.append(f"<details{' open' if open_code else ''}><summary>Generated {_e(g.get('code_language', 'C'))} ({lines} lines)</summary>"
                     f'<pre class="code">{highlight_c(g["code"])}</pre></details>')
    return "".join(parts) + "</section>"


def render(d: dict, target: str, bench: dict | None = None) -> str:
    """The page for explain's report dict `d` (explain(details=True).to_dict())."""
    import torch

    from .. import __version__

    points = _points(d["graphs"])
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    device = (d.get("device") or {}).get("name", "cpu")
    meta = (f"{_e(now)} &middot; ember {_e(__version__)} &middot; torch {_e(torch.__version__)} &middot; "
            f"{_e(device)} &middot; {_e(platform.processor() or platform.machine())}, {torch.get_num_threads()} threads")
    speedup = _speedup(d, bench)
    nav = ['<a href="#summary">summary</a>'] + (['<a href="#speedup">speedup</a>'] if speedup else [])
    nav += ['<a href="#graph-breaks">graph breaks</a>', '<a href="#bandwidth">bandwidth</a>']
    nav += [f'<a href="#graph-{_e(g["name"])}">{_e(g["name"])}</a>' for g in d["graphs"]]
    body = [_summary(d, points), speedup, _breaks_and_recompiles(d), _bandwidth(d, points)]
    body += [_graph(g, points, open_code=i == 0) for i, g in enumerate(d["graphs"])]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>ember report: {_e(target)}</title><style>{CSS}</style></head><body>"
            f'<header><h1><span class="flame">ember</span> report: {_e(target)}</h1><div class="meta">{meta}</div>'
            f"</header><nav>{''.join(nav)}</nav><main>{''.join(body)}</main></body></html>\n")

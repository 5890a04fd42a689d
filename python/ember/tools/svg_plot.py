"""Inline SVG charts for `ember report`: no script, no network; hovering a point shows its
details (an SVG <title>), and the page prints as it shows.

roofline_svg  each kernel step as a point: bytes it moves (x) against the bandwidth it
              achieves (y), both on log scales, under the device's measured copy
              bandwidth (the memory roof); colored by graph
bars_svg      horizontal bars with a value label each (speedups, latencies)
"""
from __future__ import annotations

import html
import math

PALETTE = ("#c8102e", "#1f77b4", "#2ca02c", "#9467bd", "#e6862e", "#17becf", "#8c564b", "#bcbd22")


def _decades(lo: float, hi: float) -> list[float]:
    return [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def _fmt_bytes(b: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return f"{b / size:g} {unit}"
    return f"{b:g} B"


def _fmt_gbs(v: float) -> str:
    return f"{v:g} GB/s" if v >= 1 else f"{v * 1000:g} MB/s"


def roofline_svg(points: list[dict], roof_gbs: float | None, width: int = 720, height: int = 380,
                 labelled: int = 6) -> str:
    """points: dicts with 'label', 'graph', 'bytes', 'gbs' (and 'us'). The `labelled` points
    that take the most time are named on the plot; every point names itself on hover."""
    pts = [p for p in points if p.get("bytes") and p.get("gbs")]
    if not pts:
        return '<p class="note">No kernel step with a measured time and known size to plot.</p>'
    left, right, top, bottom = 70, 20, 20, 50
    w, h = width - left - right, height - top - bottom
    xs = [p["bytes"] for p in pts]
    ys = [p["gbs"] for p in pts] + ([roof_gbs] if roof_gbs else [])
    x_ticks = _decades(min(xs) / 2, max(xs) * 2)
    y_ticks = _decades(min(ys) / 2, max(ys) * 2)
    x0, x1 = math.log10(x_ticks[0]), math.log10(x_ticks[-1])
    y0, y1 = math.log10(y_ticks[0]), math.log10(y_ticks[-1])
    sx = lambda v: left + (math.log10(v) - x0) / (x1 - x0) * w  # noqa: E731
    sy = lambda v: top + h - (math.log10(v) - y0) / (y1 - y0) * h  # noqa: E731
    out = [f'<svg class="plot" role="img" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" aria-label="achieved bandwidth per kernel step">',
           f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fff" stroke="#999"/>']
    for t in x_ticks:
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + h}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{top + h + 16}" text-anchor="middle" class="tick">{_fmt_bytes(t)}</text>')
    for t in y_ticks:
        y = sy(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_fmt_gbs(t)}</text>')
    out.append(f'<text x="{left + w / 2}" y="{height - 8}" text-anchor="middle" class="axis">bytes moved per call '
               '(every buffer read or written once)</text>')
    out.append(f'<text x="14" y="{top + h / 2}" text-anchor="middle" class="axis" '
               f'transform="rotate(-90 14 {top + h / 2})">achieved bandwidth</text>')
    if roof_gbs:
        y = sy(roof_gbs)
        out.append(f'<line class="roof" x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#333" '
                   'stroke-width="2" stroke-dasharray="6 4"/>')
        out.append(f'<text x="{left + w - 4}" y="{y - 6:.1f}" text-anchor="end" class="roof-label">measured copy '
                   f'bandwidth {roof_gbs:.1f} GB/s</text>')
    graphs = list(dict.fromkeys(p["graph"] for p in pts))
    color = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(graphs)}
    named = {id(p) for p in sorted(pts, key=lambda p: -(p.get("us") or 0))[:labelled]}
    placed: list[tuple[float, float, float, float]] = []  # label boxes drawn so far
    for p in pts:
        x, y = sx(p["bytes"]), sy(p["gbs"])
        share = f", {p['gbs'] / roof_gbs:.0%} of copy" if roof_gbs else ""
        tip = (f"{p['graph']}: {p['label']}\n{_fmt_bytes(p['bytes'])} in {p.get('us', 0):.1f} us = "
               f"{p['gbs']:.2f} GB/s{share}")
        out.append(f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{color[p["graph"]]}" '
                   f'fill-opacity="0.8" stroke="#222" stroke-width="0.5"><title>{html.escape(tip)}</title></circle>')
        if id(p) in named:
            out.append(_point_label(p["label"][:28], x, y, placed, (left, top, left + w, top + h)))
    for i, g in enumerate(graphs[:8]):
        y = top + 14 + 16 * i
        out.append(f'<circle cx="{left + 12}" cy="{y - 4}" r="5" fill="{color[g]}"/>'
                   f'<text x="{left + 22}" y="{y}" class="legend">{html.escape(g)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _point_label(text: str, x: float, y: float, placed: list, area: tuple) -> str:
    """A point's name beside it, where it overlaps no label drawn before (else left out:
    hovering the point still names it)."""
    tw, th = 6.0 * len(text), 11.0
    for dx, dy, anchor in ((7, -6, "start"), (7, 14, "start"), (-7, -6, "end"), (-7, 14, "end")):
        x0 = x + dx if anchor == "start" else x + dx - tw
        box = (x0, y + dy - th, x0 + tw, y + dy)
        inside = area[0] <= box[0] and box[2] <= area[2] and area[1] <= box[1] and box[3] <= area[3]
        if inside and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
            placed.append(box)
            return (f'<text x="{x + dx:.1f}" y="{y + dy:.1f}" text-anchor="{anchor}" class="point-label">'
                    f"{html.escape(text)}</text>")
    return ""


def bars_svg(rows: list[tuple[str, float, str]], width: int = 520, bar_height: int = 22, color: str = "#c8102e",
             reference: float | None = None, reference_label: str = "") -> str:
    """rows: (label, value, text shown after the bar). `reference`: a vertical line (1.0x)."""
    if not rows:
        return ""
    label_w, text_w = 150, 110
    w = width - label_w - text_w
    top_value = max([v for _, v, _ in rows] + [reference or 0]) or 1.0
    height = bar_height * len(rows) + 12
    out = [f'<svg class="bars" role="img" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}">']
    for i, (label, value, text) in enumerate(rows):
        y = 6 + i * bar_height
        bw = max(1.0, value / top_value * w)
        out.append(f'<text x="{label_w - 8}" y="{y + bar_height * 0.65:.1f}" text-anchor="end" class="legend">'
                   f'{html.escape(label)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{bw:.1f}" height="{bar_height - 6}" fill="{color}" '
                   f'fill-opacity="{0.95 - 0.25 * (i % 2):.2f}"/>')
        out.append(f'<text x="{label_w + bw + 6:.1f}" y="{y + bar_height * 0.65:.1f}" class="legend">'
                   f'{html.escape(text)}</text>')
    if reference:
        x = label_w + reference / top_value * w
        out.append(f'<line x1="{x:.1f}" y1="2" x2="{x:.1f}" y2="{height - 2}" stroke="#333" stroke-dasharray="3 3">'
                   f'<title>{html.escape(reference_label)}</title></line>')
    out.append("</svg>")
    return "\n".join(out)

"""`ember report TARGET -o report.html`: what torch.compile and ember did with a model, on
one self-contained HTML page (html_report.py); `ember bench --html` adds the side-by-side
benchmark to it.

The data is explain's (python/ember/explain.py) with details: graph breaks, recompilations,
each graph's kernels, ATen calls, fusion plan and code, each kernel step's time under
torch.profiler and bytes (kernel_times.py), the device's copy bandwidth, and with
`measure` the estimated against the measured speedup.
"""
from __future__ import annotations

import json


def collect(spec: str, measure: bool = True) -> dict:
    """explain's report of TARGET with details, as a dict (inference, under no_grad)."""
    import torch

    import ember
    from ember.tools import targets

    target = targets.load(spec)
    with torch.no_grad():
        report = ember.explain(target.model, *target.inputs, calls=target.more_calls, measure=measure, details=True)
    return report.to_dict()


def write(spec: str, path: str, measure: bool = True, bench: dict | None = None, data: dict | None = None) -> dict:
    """Writes the page for TARGET to `path`; returns the data it shows."""
    from .html_report import render
    from .targets import describe

    data = data if data is not None else collect(spec, measure)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(data, describe(spec), bench))
    return data


def main(spec: str, path: str, measure: bool = True, json_path: str | None = None) -> int:
    from ember.tools import targets

    targets.check(spec)
    data = write(spec, path, measure)
    kernels = sum(len(g["kernels"]) for g in data["graphs"])
    print(f"wrote {path}: {len(data['graphs'])} graph(s), {kernels} ember kernel(s)"
          + (f", measured speedup {data['estimate']['measured_speedup']:.2f}x" if data.get("estimate") else ""))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(data, f, indent=2, default=str)
        print(f"wrote {json_path}")
    return 0

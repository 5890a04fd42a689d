"""Every suite model's generated CUDA, built with NVRTC on a machine with no GPU (issue 23,
acceptance 4): a codegen error in any of them fails CI.

A model (small configuration, bf16 for inference, fp32 weights under bf16 autocast for
training) runs once on the CPU under torch.compile with a capturing backend that takes the
path ember's backend takes for CUDA graphs -- the CUDA-only FX rewrites of masked attention,
ember's own ATen trace for inference graphs, AOTAutograd with ember's decompositions and
partitioner otherwise -- and keeps each graph's text (the text names no device). Each text
then goes through ember's CUDA pipeline and NVRTC (ember.runtime.cuda.compile_cuda with no device).
The autocast policy is the CPU's, which casts a few ops differently from CUDA's.

Models whose package is not installed here (timm and torchvision in CI) are checked from
graph texts captured where it is, stored in benchmarks/suite/graphs/:

    python benchmarks/suite/nvrtc_check.py                          # check every model
    python benchmarks/suite/nvrtc_check.py --capture --sources timm,torchvision
                                  # store their texts (on a machine with timm and torchvision)
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import sys
import time

GRAPH_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "graphs")


def capture(entry, variant: str = "infer") -> list[dict]:
    """[{"kind", "text"}] of every graph ember would compile for the model on a GPU."""
    import torch
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    from ember.frontend import aten_trace
    from ember import backend as ember_backend
    from ember.frontend.decompositions import decomposition_table
    from ember.frontend.attention import drop_no_op_masks, fuse_masked_attention
    from ember.frontend.fx_import import UnsupportedGraph, import_graph

    from .measure import loss_module
    from .registry import call

    graphs: list[dict] = []
    table = decomposition_table()

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs.append({"kind": kind, "text": import_graph(gm, "cpu").text})
            return make_boxed_func(gm)  # the capture runs the graph eagerly
        return compiler

    def backend(gm, example_inputs):
        # ember's backend for a graph of CUDA tensors (python/ember/backend.py, make_backend)
        drop_no_op_masks(gm)
        if not torch.is_grad_enabled():
            fuse_masked_attention(gm)
        if aten_trace.ineligible_reason(gm, example_inputs) is None and not aten_trace.is_symbolic(gm):
            try:
                traced = aten_trace.trace(gm, example_inputs, table)
                graphs.append({"kind": "inference", "text": import_graph(traced.gm, "cpu").text})
                return gm
            except (aten_trace.NotTraced, UnsupportedGraph):
                pass  # AOTAutograd traces it, as in the backend
        return aot_module_simplified(gm, example_inputs, fw_compiler=keep("forward"), bw_compiler=keep("backward"),
                                     inference_compiler=keep("inference"), decompositions=table,
                                     partition_fn=ember_backend._partition)

    train = variant == "train"
    model, inputs = entry.build("cpu", torch.float32 if train else torch.bfloat16, "small")
    model.train(train)
    torch._dynamo.reset()
    fn = torch.compile(loss_module(model) if train else model, backend=backend)
    if train:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, _ = call(fn, inputs)
        loss.backward()
    else:
        with torch.no_grad():
            call(fn, inputs)
    torch._dynamo.reset()
    return graphs


def compile_graphs(graphs: list[dict], arch: str = "sm_90", cache_dir: str | None = None) -> list[dict]:
    """Each graph text through ember's CUDA pipeline and NVRTC: {"kind", "kernels",
    "cubins", "refused"}. A graph the CUDA path refuses (it would run eagerly on the GPU)
    is reported with the reason; any other failure (an NVRTC error) raises."""
    from ember import _core
    from ember.runtime import cuda
    from ember.config import config

    cfg = config.update({"cache_dir": cache_dir}) if cache_dir else config
    out = []
    for g in graphs:
        try:
            cg = cuda.compile_cuda(g["text"], None, cfg, arch=arch)
        except _core.CudaUnsupported as e:
            out.append({"kind": g["kind"], "kernels": 0, "cubins": 0, "refused": str(e)[:300]})
            continue
        bad = [i for i, c in enumerate(cg.cubins) if c[:4] != b"\x7fELF"]
        if bad:
            raise RuntimeError(f"NVRTC returned {len(bad)} programs that are not cubins")
        out.append({"kind": g["kind"], "kernels": len(cg.kernels), "cubins": len(cg.cubins), "refused": None})
    return out


def stored_path(model: str, variant: str, graph_dir: str = GRAPH_DIR) -> str:
    return os.path.join(graph_dir, f"{model}.{variant}.json.gz")


def load_stored(model: str, variant: str, graph_dir: str = GRAPH_DIR) -> list[dict] | None:
    path = stored_path(model, variant, graph_dir)
    if not os.path.exists(path):
        return None
    with gzip.open(path, "rt") as f:
        return json.load(f)["graphs"]


def store(model: str, variant: str, graphs: list[dict], graph_dir: str = GRAPH_DIR) -> str:
    import torch

    os.makedirs(graph_dir, exist_ok=True)
    path = stored_path(model, variant, graph_dir)
    doc = {"model": model, "variant": variant, "torch": torch.__version__, "date": datetime.date.today().isoformat(),
           "graphs": graphs}
    # mtime 0: the same graphs give the same bytes
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(json.dumps(doc, indent=0).encode())
    return path


def graphs_for(entry, variant: str, graph_dir: str = GRAPH_DIR) -> tuple[list[dict] | None, str]:
    """(graphs, where from): captured here, else stored, else (None, why not)."""
    why = entry.missing()
    if why is None:
        return capture(entry, variant), "captured"
    stored = load_stored(entry.name, variant, graph_dir)
    if stored is not None:
        return stored, "stored"
    path = stored_path(entry.name, variant, graph_dir)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    shown = os.path.relpath(path, repo) if os.path.abspath(path).startswith(repo + os.sep) else path
    return None, f"{why} and no stored graphs ({shown})"


def main(argv):
    from . import registry

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--capture", action="store_true", help="store the captured texts (in --graph-dir)")
    p.add_argument("--graph-dir", default=GRAPH_DIR, help="where stored texts are written and read")
    p.add_argument("--sources", default="", help="only models from these sources (timm,torchvision)")
    args = p.parse_args(argv)
    failures = 0
    models = registry.select(args.models)
    if args.sources:
        models = [m for m in models if m.source in args.sources.split(",")]
    for entry in models:
        for variant in ("infer", "train") if entry.train else ("infer",):
            t0 = time.perf_counter()
            if args.capture:
                if entry.missing():
                    print(f"{entry.name} {variant}: cannot capture: {entry.missing()}")
                    continue
                graphs = capture(entry, variant)
                print(f"{entry.name} {variant}: {len(graphs)} graphs -> "
                      f"{store(entry.name, variant, graphs, args.graph_dir)}", flush=True)
                continue
            graphs, source = graphs_for(entry, variant, args.graph_dir)
            if graphs is None:
                print(f"{entry.name} {variant}: skipped: {source}")
                continue
            try:
                results = compile_graphs(graphs, args.arch)
            except Exception as e:
                failures += 1
                print(f"{entry.name} {variant}: FAILED: {type(e).__name__}: {str(e)[:500]}")
                continue
            refused = [r["refused"] for r in results if r["refused"]]
            print(f"{entry.name} {variant} ({source}): {len(results)} graphs, "
                  f"{sum(r['kernels'] for r in results)} kernels, {len(refused)} refused"
                  f"{': ' + refused[0] if refused else ''} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    # As a script: this module again, as part of the package `suite`.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))
    from suite.nvrtc_check import main as _main
    sys.exit(_main(sys.argv[1:]))

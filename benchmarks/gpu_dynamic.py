"""GPU dynamic shapes: transformers GPT-2 124M and BERT-base inference (bf16, random weights)
compiled once with dynamic=True and called at several sequence lengths, eager / Inductor /
ember side by side in one process.

Per backend: the first call (compile included), then per shape the steady-state median
(synchronized calls after a warmup), the max relative error against eager, and for ember
the graphs it compiled and the eager fallbacks after the first call (one artifact must
serve every shape: both stay 0). A second row per model, "static", compiles each shape on
its own (dynamic=False, a fresh Dynamo cache per shape): what a symbolic kernel costs
against kernels specialized to the shape.

    python benchmarks/gpu_dynamic.py [--models gpt2,bert] [--batch 8] [--seqs 128,200,333,512]
                                     [--backends eager,inductor,ember] [--json out.json]
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_models import tensors  # noqa: E402


def build(name):
    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        model, vocab = GPT2LMHeadModel(GPT2Config()), 50257
    else:
        from transformers import BertConfig, BertModel
        model, vocab = BertModel(BertConfig()), 30522
    return model.eval().to("cuda", torch.bfloat16), vocab


def compiled(backend, model, dynamic):
    torch._dynamo.reset()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"{backend}_")
    if backend == "eager":
        return model
    if backend == "inductor":
        return torch.compile(model, dynamic=dynamic)
    import ember
    ember.config.cache_dir = tempfile.mkdtemp(prefix="ember_")
    return torch.compile(model, backend="ember", dynamic=dynamic)


def steady_ms(fn, ids, warmup=3, iters=20):
    with torch.no_grad():
        for _ in range(warmup):
            fn(ids)
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn(ids)
            torch.cuda.synchronize()
            times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def rel_err(a, b):
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def ember_counts():
    import ember
    st = ember.stats()
    return {"graphs_compiled": st["graphs_compiled"], "eager_fallbacks": st["eager_fallbacks"],
            "cuda_graphs": ember._core.cuda_compile_counts()["graphs"]}


def run(name, backends, batch, seqs):
    model, vocab = build(name)
    inputs = {s: torch.randint(0, vocab, (batch, s), device="cuda") for s in seqs}
    with torch.no_grad():
        ref = {s: tensors(model(inputs[s]))[0] for s in seqs}
    rows = []
    for backend in backends:
        for mode in (["dynamic", "static"] if backend != "eager" else ["eager"]):
            row = {"model": name, "backend": backend, "mode": mode, "shapes": {}}
            try:
                fn = compiled(backend, model, True) if mode != "static" else None
                before = ember_counts() if backend == "ember" else None
                for i, s in enumerate(seqs):
                    if mode == "static":
                        fn = compiled(backend, model, False)
                    t0 = time.perf_counter()
                    with torch.no_grad():
                        out = tensors(fn(inputs[s]))[0]
                    torch.cuda.synchronize()
                    first = time.perf_counter() - t0
                    if backend == "ember" and i == 0:
                        after_first = ember_counts()
                    row["shapes"][s] = {"first_call_s": round(first, 3), "median_ms": round(steady_ms(fn, inputs[s]), 3),
                                        "max_rel_err": float(f"{rel_err(out, ref[s]):.3e}")}
                if backend == "ember":
                    end = ember_counts()
                    row["ember_first_call"] = {k: after_first[k] - before[k] for k in end}
                    row["ember_after_first_call"] = {k: end[k] - after_first[k] for k in end}
            except Exception as e:  # a survey: report and go on
                row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
            print("GPU_DYNAMIC_RESULT " + json.dumps(row), flush=True)
            rows.append(row)
    return rows


def table(rows, seqs):
    head = f"{'model':6} {'backend':9} {'mode':8} " + " ".join(f"{'seq ' + str(s) + ' ms':>12}" for s in seqs)
    lines = [head + "   first call s (per shape)"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['model']:6} {r['backend']:9} {r['mode']:8} error: {r['error'][:100]}")
            continue
        cells = " ".join(f"{r['shapes'][s]['median_ms']:>12.3f}" for s in seqs)
        firsts = ", ".join(f"{r['shapes'][s]['first_call_s']:.2f}" for s in seqs)
        extra = f"  ember after the first call: {r['ember_after_first_call']}" if "ember_after_first_call" in r else ""
        lines.append(f"{r['model']:6} {r['backend']:9} {r['mode']:8} {cells}   {firsts}{extra}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt2,bert")
    p.add_argument("--backends", default="eager,inductor,ember")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seqs", default="128,200,333,512")
    p.add_argument("--json", default="")
    a = p.parse_args()
    seqs = [int(s) for s in a.seqs.split(",")]
    import ember
    info = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "nvrtc": ember.runtime.cuda.nvrtc_info()["identity"], "batch": a.batch, "seqs": seqs, "argv": sys.argv[1:]}
    print(json.dumps(info), flush=True)
    rows = []
    for name in a.models.split(","):
        rows += run(name, a.backends.split(","), a.batch, seqs)
    print(table(rows, seqs), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

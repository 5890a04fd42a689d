"""GPU model benchmark (issue 5): eager, TorchInductor (default) and ember (default) side by
side on GPT-2 124M and BERT-base inference, ResNet-50 and ViT-B/16 inference, and GPT-2
forward+backward, bf16, random weights built from configs (no downloads).

Per workload, in one process: eager first (reference, CUDA/cuBLAS/cuDNN warmed), then each
compiled backend after torch._dynamo.reset() with a fresh, empty cache directory
(TORCHINDUCTOR_CACHE_DIR, ember.config.cache_dir). It records

  first_call_s   the first call, compile included ("cold in a warm process": CUDA is up and
                 eager ran; the backend's own imports and worker pools are paid by the first
                 workload that uses it -- see --processes for fresh-process figures)
  median_ms      steady state: warmup, then the median of synchronized calls (as the anchors)
  peak_mib       torch.cuda.max_memory_allocated over the backend's calls
  max_abs/rel    max error against eager (rel: over max |eager|), outputs (and gradients)
  accurate       torch._dynamo.utils.same(eager, backend, fp64 reference, tol) -- Inductor's
                 accuracy rule: allclose at tol, else RMSE(backend) <= k * RMSE(eager) + tol/10
  ember          graphs, eager fallbacks (with reasons) and the ATen ops ember called (by count)

--processes adds fresh-process first calls: per backend, a new process with an empty cache
(cold) and then one more on the cache that process filled (warm). first_call_s runs from
before the backend's imports and torch.compile to the end of the first call; call_s is the
first call alone, as the anchors measured it (their torch.compile ran before the timer).
Floors, one process each: eager (the model's first run: CUDA libraries and kernels
loaded, which every backend's first call includes), dynamo_eager (torch.compile with
backend="eager": Dynamo and no compiler, the floor of every Dynamo backend) and aot_eager
(Dynamo and AOTAutograd, no compiler: the floor of a backend that traces with AOTAutograd).
--no-steady skips the in-process rows.

    python benchmarks/gpu_models.py [--quick] [--models gpt2,bert] [--processes ember,inductor]
                                    [--no-steady] [--json out.json]
    python benchmarks/gpu_models.py child MODEL BACKEND CACHE_DIR [--quick]   (internal)
"""
import argparse
import copy
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

MODELS = ["gpt2", "bert", "resnet50", "vit", "gpt2_train"]  # also: llama (a Llama-style decoder)
BACKENDS = ["eager", "inductor", "ember"]  # also: *_ro (reduce-overhead), *_ma, *_mac (max-autotune, below)
TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-4}
RESULT_TAG = "GPU_MODELS_RESULT "


def build(name: str, quick: bool, dtype=torch.bfloat16, device="cuda"):
    """(model, inputs, train) with seeded random weights; quick shrinks the batch."""
    torch.manual_seed(0)
    train = name.endswith("_train")
    base = name.removesuffix("_train")
    if base == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        # No dropout in the training workload: its outputs and gradients must be comparable.
        cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0) if train else GPT2Config()
        model = GPT2LMHeadModel(cfg)
        batch, seq = (2, 128) if quick else (8, 512)
        inputs = (torch.randint(0, cfg.vocab_size, (batch, seq), device=device),)
    elif base == "bert":
        from transformers import BertConfig, BertModel
        model = BertModel(BertConfig())
        batch, seq = (2, 128) if quick else (16, 512)
        inputs = (torch.randint(0, 30522, (batch, seq), device=device),)
    elif base == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        # TinyLlama-1.1B's widths (GQA 32/4 heads, SwiGLU 5632), 8 of its 22 layers: issue 27's
        # Llama-style decoder, whose warm start was slower than Inductor's.
        cfg = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                          num_attention_heads=32, num_key_value_heads=4, use_cache=False)
        model = LlamaForCausalLM(cfg)
        batch, seq = (2, 128) if quick else (8, 512)
        inputs = (torch.randint(0, cfg.vocab_size, (batch, seq), device=device),)
    elif base == "resnet50":
        import torchvision
        model = torchvision.models.resnet50()
        inputs = (torch.randn(8 if quick else 64, 3, 224, 224, device=device, dtype=dtype),)
    elif base == "vit":
        import timm
        model = timm.create_model("vit_base_patch16_224", pretrained=False)
        inputs = (torch.randn(8 if quick else 64, 3, 224, 224, device=device, dtype=dtype),)
    else:
        raise SystemExit(f"unknown model {name}")
    model = model.to(device=device, dtype=dtype)
    model.train(train)
    return model, inputs, train


def tensors(out):
    """The float tensors of a model output, in a stable order (HF ModelOutputs are dicts)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in tensors(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in tensors(v)]
    return []


def make_step(fn, model, inputs, train):
    """One call: inference under no_grad, or forward + backward (the anchors' loss), returning
    the outputs to check (and the gradients, in parameter order)."""
    if not train:
        def step():
            with torch.no_grad():
                return tensors(fn(*inputs))
        return step

    def step():
        model.zero_grad(set_to_none=True)
        out = tensors(fn(*inputs))[0]
        loss = out.float().square().mean()
        loss.backward()
        return [loss.detach(), out.detach()] + [p.grad for p in model.parameters() if p.grad is not None]
    return step


def steady_ms(step, warmup, iters):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times), min(times)


def errors(ref, res):
    worst_abs = worst_rel = 0.0
    for e, a in zip(ref, res):
        if e.shape != a.shape:
            return float("inf"), float("inf")
        d = (e.double() - a.double()).abs().nan_to_num(float("inf"))
        d = d.max().item() if d.numel() else 0.0
        scale = e.double().abs().nan_to_num(0.0).max().item() if e.numel() else 1.0
        worst_abs, worst_rel = max(worst_abs, d), max(worst_rel, d / max(scale, 1e-30))
    return worst_abs, worst_rel


def fp64_reference(model, inputs, train):
    ref_model = copy.deepcopy(model).double()
    ref_inputs = tuple(x.double() if x.is_floating_point() else x for x in inputs)
    out = make_step(ref_model, ref_model, ref_inputs, train)()
    del ref_model
    return [t.detach() for t in out]


class EmberRecorder:
    """The backend's per-graph records (the mechanism ember.explain uses) over a block."""

    def __enter__(self):
        from ember.records import Recording
        self._recording = Recording()
        self.records = self._recording.records
        return self

    def __exit__(self, *exc):
        self._recording.stop()

    def summary(self) -> dict:
        externs, fallbacks, kernels = {}, [], 0
        for r in self.records:
            if r.fallback_reason:
                fallbacks.append({"graph": r.name, "reason": r.fallback_reason[:300]})
            if r.cg is not None:
                kernels += len(r.cg.kernels)
                for e in r.cg.externs:
                    externs[e["op"]] = externs.get(e["op"], 0) + 1
        seconds = {k: round(sum(r.times.get(k, 0.0) for r in self.records), 3) for k in ("total", "compile", "load")}
        out = {"graphs": len(self.records), "kernels": kernels, "eager_fallbacks": len(fallbacks),
               "backend_s": seconds["total"], "nvrtc_s": seconds["compile"], "load_s": seconds["load"],
               "fallbacks": fallbacks, "aten_ops": dict(sorted(externs.items()))}
        # max-autotune: per kernel function, the launch kept and what timing measured.
        tuned = [d for r in self.records if r.cg is not None for d in getattr(r.cg, "autotune_decisions", [])]
        if tuned:
            timed = [d for d in tuned if d["us"]]
            choices = {}
            for d in tuned:
                c = d["choices"][d["chosen"]]
                choices[c] = choices.get(c, 0) + 1
            out["autotune"] = {"functions": len(tuned), "timed": len(timed),
                               "changed": sum(d["chosen"] != 0 for d in tuned),
                               "default_us": round(sum(d["us"][0] for d in timed), 1),
                               "chosen_us": round(sum(d["us"][d["chosen"]] for d in timed), 1),
                               "choices": choices,
                               "kernels": [{"kernel": d["kernel"], "choices": d["choices"], "us": [round(u, 2) for u in d["us"]],
                                            "chosen": d["chosen"]} for d in timed]}
        return out


FLOOR_BACKENDS = {"dynamo_eager": "eager", "aot_eager": "aot_eager"}  # no compiler: floors of first calls


def compiled(backend, model, cache_dir):
    if backend == "eager":
        return model
    if backend in FLOOR_BACKENDS:
        return torch.compile(model, backend=FLOOR_BACKENDS[backend])
    torch._dynamo.reset()
    # A fresh torch cache for both: ember's graphs also go to torch's AOTAutogradCache, and
    # an entry from an earlier run would make this in-process first call a warm one.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    # "<backend>_ro": mode="reduce-overhead" (CUDA graphs); "_ma": "max-autotune-no-cudagraphs",
    # "_mac": "max-autotune" (ember: tuned launches, and CUDA graphs for "_mac").
    mode = {"_ro": "reduce-overhead", "_ma": "max-autotune-no-cudagraphs", "_mac": "max-autotune"}.get(
        backend[backend.rfind("_"):] if "_" in backend else "", None)
    if backend.startswith("inductor"):
        return torch.compile(model, mode=mode)
    import ember
    ember.config.cache_dir = cache_dir
    return torch.compile(model, backend="ember", mode=mode)


def run_workload(name, backends, quick, warmup, iters):
    model, inputs, train = build(name, quick)
    rows, outs = {}, {}
    fp64 = fp64_reference(model, inputs, train)
    for backend in backends:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        row = {"model": name, "backend": backend}
        recorder = EmberRecorder() if backend.startswith("ember") else None
        try:
            fn = model if backend == "eager" else compiled(backend, model, tempfile.mkdtemp(prefix=f"{backend}_"))
            step = make_step(fn, model, inputs, train)
            if recorder:
                recorder.__enter__()
            try:
                t0 = time.perf_counter()
                out = [t.detach().clone() for t in step()]
                torch.cuda.synchronize()
                row["first_call_s"] = round(time.perf_counter() - t0, 3)
            finally:
                if recorder:
                    recorder.__exit__()
            med, low = steady_ms(step, warmup, iters)
            row.update(median_ms=round(med, 3), min_ms=round(low, 3),
                       peak_mib=round(torch.cuda.max_memory_allocated() / 2**20, 1))
            outs[backend] = out
            if backend != "eager" and "eager" in outs:
                from torch._dynamo.utils import same
                row["max_abs_err"], row["max_rel_err"] = (float(f"{v:.3e}") for v in errors(outs["eager"], out))
                row["accurate"] = bool(same(outs["eager"], out, fp64, tol=TOL[torch.bfloat16], log_error=lambda *a: None))
        except Exception as e:  # a survey: report and go on
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        if recorder:
            row["ember"] = recorder.summary()
        rows[backend] = row
        print(RESULT_TAG + json.dumps(row), flush=True)
    del model, outs
    torch._dynamo.reset()
    return rows


def child(name, backend, cache_dir, quick):
    """A fresh process's first call (the model's build excluded; the backend's imports
    included, as torch.compile makes them), for --processes."""
    model, inputs, train = build(name, quick)
    t0 = time.perf_counter()
    if backend == "ember":
        import ember
    fn = compiled(backend, model, cache_dir)
    step = make_step(fn, model, inputs, train)
    t1 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    row = {"first_call_s": round(t2 - t0, 3), "call_s": round(t2 - t1, 3)}
    # Where the first call went: Dynamo's phases (both backends), and ember's own.
    from torch._dynamo.utils import compilation_time_metrics
    row["dynamo_s"] = {k: round(sum(v), 3) for k, v in compilation_time_metrics.items()
                       if k in ("bytecode_tracing", "build_guards", "OutputGraph.call_user_compiler",
                                "create_aot_dispatcher_function", "inductor_codecache_torch_key")}
    if backend == "ember":  # whether a warm process loaded its graphs instead of compiling them
        st = ember.stats()
        row.update(graphs_compiled=st["graphs_compiled"], graphs_loaded=st["graphs_loaded"], aot_cache=st["aot_cache"],
                   front_end=st["front_end"], trace_s=st["trace_seconds"], compile_s=st["compile_seconds"],
                   load_s=st["load_seconds"])
    print(RESULT_TAG + json.dumps(row), flush=True)


def process_first_calls(name, backends, quick):
    out = {}
    for backend in backends:
        cache = tempfile.mkdtemp(prefix=f"{backend}_proc_")
        # eager and the floors: one process (they keep nothing for a warm one).
        for tag in ("cold",) if backend == "eager" or backend in FLOOR_BACKENDS else ("cold", "warm"):
            cmd = [sys.executable, os.path.abspath(__file__), "child", name, backend, cache] + (["--quick"] if quick else [])
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, PYTHONUNBUFFERED="1", EMBER_CACHE_DIR=cache,
                                        TORCHINDUCTOR_CACHE_DIR=cache))
            line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith(RESULT_TAG)), None)
            row = json.loads(line[len(RESULT_TAG):]) if line else {}
            value = row.get("first_call_s")
            out[f"{backend}_{tag}_s"] = value
            out[f"{backend}_{tag}_call_s"] = row.get("call_s")
            if "graphs_loaded" in row:
                out[f"{backend}_{tag}_graphs"] = {k: row[k] for k in ("graphs_compiled", "graphs_loaded", "aot_cache",
                                                                      "front_end", "trace_s", "compile_s", "load_s")}
            if "dynamo_s" in row:
                out[f"{backend}_{tag}_dynamo_s"] = row["dynamo_s"]
            out[f"{backend}_{tag}_process_s"] = round(time.perf_counter() - t0, 2)
            if value is None:
                out[f"{backend}_{tag}_error"] = p.stderr[-600:]
            print(f"  {name} {backend} {tag} first call: {value} s (the call alone {row.get('call_s')} s)", flush=True)
    return out


def table(results):
    lines = [f"{'workload':12} {'backend':9} {'median ms':>9} {'vs ind':>6} {'first s':>8} {'peak MiB':>9} "
             f"{'max rel err':>11} {'ok':>3} {'fallbk':>6}  ATen ops"]
    for name, rows in results.items():
        for backend, r in rows.items():
            if "error" in r:
                lines.append(f"{name:12} {backend:9} ERROR {r['error'][:160]}")
                continue
            # "vs ind": against Inductor in the same mode (reduce-overhead rows: inductor_ro).
            ind = rows.get("inductor_ro" if backend.endswith("_ro") else "inductor", {}).get("median_ms")
            ratio = f"{ind / r['median_ms']:.2f}" if ind and r.get("median_ms") else ""
            em = r.get("ember", {})
            ops = ",".join(f"{k.removeprefix('aten.')}x{v}" for k, v in em.get("aten_ops", {}).items())
            lines.append(f"{name:12} {backend:9} {r['median_ms']:>9.3f} {ratio:>6} {r['first_call_s']:>8.2f} "
                         f"{r['peak_mib']:>9.0f} {r.get('max_rel_err', 0):>11.2e} "
                         f"{'' if backend == 'eager' else ('yes' if r.get('accurate') else 'NO'):>3} "
                         f"{em.get('eager_fallbacks', ''):>6}  {ops}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--quick", action="store_true", help="small batches, few iterations")
    p.add_argument("--warmup", type=int)
    p.add_argument("--iters", type=int)
    p.add_argument("--processes", default="", help="backends whose first call to time in fresh processes")
    p.add_argument("--no-steady", action="store_true", help="only the --processes first calls")
    p.add_argument("--json", default="")
    a = p.parse_args()
    warmup = a.warmup or (2 if a.quick else 5)
    iters = a.iters or (10 if a.quick else 30)
    backends = a.backends.split(",")
    import ember
    info = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "nvrtc": ember.runtime.cuda.nvrtc_info()["identity"], "quick": a.quick,
            "warmup": warmup, "iters": iters, "argv": sys.argv[1:]}
    print(json.dumps(info), flush=True)
    results, first_calls = {}, {}
    for name in a.models.split(","):
        if not a.no_steady:
            results[name] = run_workload(name, backends, a.quick, warmup, iters)
        if a.processes:
            first_calls[name] = process_first_calls(name, a.processes.split(","), a.quick)
            print(f"{name} fresh-process first calls: {first_calls[name]}", flush=True)
        if a.json:  # after every workload: a run cut short keeps what it measured
            with open(a.json, "w") as f:
                json.dump({"info": info, "results": results, "process_first_calls": first_calls}, f, indent=1)
    print(table(results), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], "--quick" in sys.argv)
    else:
        main()

"""Training benchmark: eager, TorchInductor and ember side by side on a training step.

Models (fp32, CPU, random weights):
  gpt2  transformers' GPT2LMHeadModel, 2 layers, n_embd 256, 4 heads, n_positions 128,
        vocab 1000, dropout 0; batch 8 x 128 tokens; loss from the model (labels=ids)
  cnn   conv-bn-relu, maxpool, conv-bn-relu, global avgpool, linear (BatchNorm in train
        mode); batch 32 x 3 x 64 x 64; cross-entropy

A step is zero_grad + forward + backward + AdamW step. torch.compile covers the loss
function (forward, and through AOTAutograd the backward); the optimizer step stays
uncompiled (torch's default AdamW, the foreach implementation), the same for every backend.

Measured:
  cold compile  a fresh process with empty caches (new TORCHINDUCTOR_CACHE_DIR and
                EMBER_CACHE_DIR): wall time of the first forward+backward (Dynamo,
                AOTAutograd, the compiler, the C compiler, and the step's own run time)
  step time     one process runs every backend on its own copy of the model: warmup, then
                interleaved rounds (the order rotates) of timed steps; median and p10-p90
  numerics      the loss of the first step against eager's, relative

Usage:
  python benchmarks/train_bench.py [--models gpt2,cnn] [--backends eager,inductor,ember]
                                   (also ember-dynamic, inductor-dynamic: dynamic=True;
                                    ember-dynbatch, inductor-dynbatch: mark_dynamic(batch, 0))
                                   [--rounds 10] [--steps 5] [--warmup 3] [--json out.json]
  python benchmarks/train_bench.py cold MODEL BACKEND     # one cold process (internal)
"""
import argparse
import copy
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_TAG = "TRAIN_BENCH "


def build(name):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        vocab = 1000
        config = GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=128, vocab_size=vocab,
                            bos_token_id=vocab - 1, eos_token_id=vocab - 1, use_cache=False,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = GPT2LMHeadModel(config).train()
        # transformers finds no loss type in the class name "GPT2LMHeadModel" and warns
        # (logger.warning_once) on the first loss it computes; Dynamo cannot trace the
        # logger, so the warning broke the compiled function into two graphs (and had
        # Dynamo trace the model three times) for every backend. The loss is the one
        # transformers falls back to.
        model.loss_type = "ForCausalLM"
        ids = torch.randint(0, vocab, (8, 128))

        def loss_of(m):
            return lambda ids: m(input_ids=ids, labels=ids).loss
        return model, (ids,), loss_of

    if name == "cnn":
        class SmallCNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1, self.bn1 = nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
                self.conv2, self.bn2 = nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64)
                self.fc = nn.Linear(64, 10)

            def forward(self, x):
                x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
                x = F.relu(self.bn2(self.conv2(x)))
                return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

        model = SmallCNN().train()
        batch = (torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,)))

        def loss_of(m):
            return lambda x, y: F.cross_entropy(m(x), y)
        return model, batch, loss_of
    raise KeyError(name)


def compile_for(backend, fn):
    import torch

    if backend == "eager":
        return fn
    # "ember-dynamic", "inductor-dynamic": the same with dynamic=True (every size symbolic);
    # "-dynbatch": the batch dim marked dynamic (Trainer marks it).
    name, dynamic = backend.removesuffix("-dynamic").removesuffix("-dynbatch"), backend.endswith("-dynamic")
    if name == "ember":
        import ember  # noqa: F401  (registers the backend from a source tree too)
    return torch.compile(fn, backend=name, dynamic=True if dynamic else None)


class Trainer:
    def __init__(self, model, batch, loss_of, backend):
        import torch

        self.model = model
        if backend.endswith("-dynbatch"):
            batch = tuple(t.clone() for t in batch)
            for t in batch:
                torch._dynamo.mark_dynamic(t, 0)
        self.batch = batch
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.loss = compile_for(backend, loss_of(model))

    def forward_backward(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss(*self.batch)
        loss.backward()
        return loss

    def step(self):
        loss = self.forward_backward()
        self.opt.step()
        return loss


def cold(model_name, backend):
    """One fresh process: first forward+backward with empty caches."""
    import torch

    model, batch, loss_of = build(model_name)
    trainer = Trainer(model, batch, loss_of, backend)
    t0 = time.perf_counter()
    loss = trainer.forward_backward()
    first = time.perf_counter() - t0
    from torch._dynamo.utils import compilation_time_metrics

    # Inside the backend alone (Dynamo's call of the compiler: AOTAutograd and the
    # backend's compile of the forward and backward), and Dynamo's own tracing.
    out = {"first_step_s": first, "loss": loss.item(),
           "backend_s": sum(compilation_time_metrics.get("OutputGraph.call_user_compiler", [])),
           "dynamo_tracing_s": sum(compilation_time_metrics.get("bytecode_tracing", []))}
    if backend == "ember":
        import ember

        s = ember.stats()
        out.update(graphs=s["graphs_compiled"], c_compiler_runs=s["c_compiler_runs"],
                   ember_compile_s=s["compile_seconds"])
    del torch
    print(RESULT_TAG + json.dumps(out), flush=True)


def run_cold(model_name, backend):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, EMBER_CACHE_DIR=os.path.join(tmp, "ember"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"))
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "cold", model_name, backend],
                           env=env, capture_output=True, text=True, timeout=1800)
    for line in r.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    raise RuntimeError(f"cold run of {model_name}/{backend} failed:\n{r.stderr[-3000:]}")


def steady(model_name, backends, rounds, steps, warmup):
    import torch

    base, batch, loss_of = build(model_name)
    trainers = {b: Trainer(copy.deepcopy(base), batch, loss_of, b) for b in backends}
    first_loss = {b: trainers[b].step().item() for b in backends}
    for _ in range(warmup):
        for t in trainers.values():
            t.step()
    times = {b: [] for b in backends}
    for r in range(rounds):
        order = backends[r % len(backends):] + backends[:r % len(backends)]
        for b in order:
            t = trainers[b]
            for _ in range(steps):
                t0 = time.perf_counter()
                t.step()
                times[b].append(time.perf_counter() - t0)
    del torch
    out = {}
    for b in backends:
        ts = sorted(times[b])
        q = statistics.quantiles(ts, n=10) if len(ts) > 1 else [ts[0], ts[0]]  # one step: no spread
        out[b] = {"median_ms": 1000 * statistics.median(ts), "p10_ms": 1000 * q[0], "p90_ms": 1000 * q[-1],
                  "steps": len(ts), "first_loss": first_loss[b],
                  "loss_rel_err": abs(first_loss[b] - first_loss["eager"]) / abs(first_loss["eager"])
                  if "eager" in first_loss else None}
    return out


def machine():
    import torch

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "load_avg_at_start": os.getloadavg()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt2,cnn")
    p.add_argument("--backends", default="eager,inductor,ember")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--steps", type=int, default=5, help="timed steps per backend per round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-cold", action="store_true", help="skip the cold-compile processes")
    p.add_argument("--json", default=os.path.join(REPO, "benchmarks", "results", "train_bench.json"))
    args = p.parse_args()
    models, backends = args.models.split(","), args.backends.split(",")
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "machine": machine(),
              "models": {}}
    for m in models:
        entry = {"steady": None, "cold": {}}
        if not args.no_cold:
            for b in backends:
                if b != "eager":
                    print(f"[{m}] cold compile, {b} ...", file=sys.stderr, flush=True)
                    entry["cold"][b] = run_cold(m, b)
        print(f"[{m}] steady state ...", file=sys.stderr, flush=True)
        entry["steady"] = steady(m, backends, args.rounds, args.steps, args.warmup)
        result["models"][m] = entry
    result["load_avg_at_end"] = os.getloadavg()
    print_table(result, backends)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.json}")


def print_table(result, backends):
    print(f"{'model':<6} {'backend':<9} {'step ms (p10-p90)':<24} {'vs eager':>8} {'vs Inductor':>11} "
          f"{'cold fwd+bwd s':>14} {'of it Dynamo':>12} {'loss rel err':>12}")
    for m, entry in result["models"].items():
        st = entry["steady"]
        for b in backends:
            s = st[b]
            eager = st.get("eager", {}).get("median_ms")
            ind = st.get("inductor", {}).get("median_ms")
            cold = entry["cold"].get(b, {}).get("first_step_s")
            tracing = entry["cold"].get(b, {}).get("dynamo_tracing_s")
            print(f"{m:<6} {b:<9} {s['median_ms']:7.2f} ({s['p10_ms']:.2f}-{s['p90_ms']:.2f}){'':<4} "
                  f"{(eager / s['median_ms']) if eager else float('nan'):7.2f}x "
                  f"{(s['median_ms'] / ind) if ind else float('nan'):10.2f}x "
                  f"{cold if cold is not None else float('nan'):14.2f} "
                  f"{tracing if tracing is not None else float('nan'):12.2f} "
                  f"{s['loss_rel_err'] if s['loss_rel_err'] is not None else float('nan'):12.1e}")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "cold":
        cold(sys.argv[2], sys.argv[3])
    else:
        main()

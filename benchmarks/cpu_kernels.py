"""ember's own CPU kernels against Inductor's and eager's, one process, interleaved (issue 24).

    taskset -c 1 python benchmarks/cpu_kernels.py [--cases gelu,softmax,layernorm,bn_relu,shuffle,rope]
        [--rounds 30] [--calls 20] [--threads 1] [--json out.json]

Cases (fp32, the sizes of the CPU suite's small models):
    gelu       exact GELU (erf) over [64, 3072]        a BERT/ViT MLP's activation
    softmax    softmax(-1) over [24, 128, 128]          attention probabilities kept in ember's kernels
    layernorm  LayerNorm(768) over [2048, 768]
    bn_relu    BatchNorm2d(116) (eval) + ReLU, [2, 116, 32, 32] channels-last
    shuffle    shufflenet_v2's channel shuffle (+ ReLU): cat of two [2, 58, 32, 32] halves, view,
               transpose(1, 2), contiguous, view
    rope       llama's rotary embedding, x * cos + cat(-x2, x1) * sin over [1, 32, 128, 128]: a cat
               along the innermost dim
    embed_ln   BART-small's embeddings: tokens (1000 x 128) * scale + learned positions (1026 x 128,
               offset 2), LayerNorm(128), ids [2, 64]
    add_ln     a post-LayerNorm block's residual add + LayerNorm(128) over [2, 64, 128]

Each round times --calls calls of every backend in a rotating order with the thread's CPU
clock (time.thread_time; one thread only, so time given to other processes is not counted);
printed: the median and the minimum of the per-round means in us a call, and each backend's
max abs error against a float64 reference beside eager's.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def cases():
    def gelu():
        return torch.nn.GELU(), (torch.randn(64, 3072),)

    def softmax():
        class M(torch.nn.Module):
            def forward(self, x):
                return torch.softmax(x, -1)
        return M(), (torch.randn(24, 128, 128) * 4,)

    def layernorm():
        return torch.nn.LayerNorm(768), (torch.randn(2048, 768),)

    def bn_relu():
        bn = torch.nn.BatchNorm2d(116)
        with torch.no_grad():
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.5, 2)
            bn.weight.normal_()
            bn.bias.normal_()
        m = torch.nn.Sequential(bn, torch.nn.ReLU()).eval()
        return m, (torch.randn(2, 116, 32, 32).to(memory_format=torch.channels_last),)

    def shuffle():
        class M(torch.nn.Module):
            def forward(self, a, b):
                x = torch.cat([a, b], 1)
                n, c, h, w = x.shape
                x = x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
                return x.relu()
        return M(), (torch.randn(2, 58, 32, 32), torch.randn(2, 58, 32, 32))

    def rope():
        class M(torch.nn.Module):
            def forward(self, x, cos, sin):
                half = x.shape[-1] // 2
                return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin
        return M(), (torch.randn(1, 32, 128, 128), torch.randn(128, 128), torch.randn(128, 128))

    def embed_ln():
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.tokens = torch.nn.Embedding(1000, 128, padding_idx=1)
                self.positions = torch.nn.Embedding(1024 + 2, 128)
                self.norm = torch.nn.LayerNorm(128)

            def forward(self, ids):
                pos = torch.arange(ids.shape[1]).expand(ids.shape[0], -1) + 2
                return self.norm(self.tokens(ids) * 1.0 + self.positions(pos))
        return M(), (torch.randint(0, 1000, (2, 64)),)

    def add_ln():
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = torch.nn.LayerNorm(128)

            def forward(self, x, y):
                return self.norm(x + y)
        return M(), (torch.randn(2, 64, 128), torch.randn(2, 64, 128))

    return {"gelu": gelu, "softmax": softmax, "layernorm": layernorm, "bn_relu": bn_relu, "shuffle": shuffle,
            "rope": rope, "embed_ln": embed_ln, "add_ln": add_ln}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="gelu,softmax,layernorm,bn_relu,shuffle,rope")
    ap.add_argument("--backends", default="eager,inductor,ember")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    import ember  # noqa: F401  registers the backend

    rows = []
    for name in args.cases.split(","):
        torch.manual_seed(0)
        model, inputs = cases()[name]()
        model.eval()
        with torch.no_grad():
            ref = model.double()(*[x.double() if x.is_floating_point() else x for x in inputs])
            model.float()
            fns = {}
            for b in args.backends.split(","):
                torch._dynamo.reset()
                fns[b] = model if b == "eager" else torch.compile(model, backend=b, dynamic=False)
                out = fns[b](*inputs)
                err = (out.double() - ref).abs().max().item()
                print(f"{name:10s} {b:9s} max abs err vs fp64 {err:.3e}", flush=True)
            per = {b: [] for b in fns}
            order = list(fns)
            for r in range(args.rounds):
                for b in order[r % len(order):] + order[:r % len(order)]:
                    f = fns[b]
                    f(*inputs)
                    t0 = clock()
                    for _ in range(args.calls):
                        f(*inputs)
                    per[b].append((clock() - t0) / args.calls * 1e6)
        row = {"case": name}
        for b, ts in per.items():
            row[b] = {"median_us": statistics.median(ts), "min_us": min(ts)}
        rows.append(row)
        base = row.get("inductor", row.get("eager"))
        line = "  ".join(f"{b} {v['median_us']:8.1f} (min {v['min_us']:7.1f})" for b, v in row.items() if b != "case")
        if "ember" in row and "inductor" in row:
            line += f"  ember/inductor time {row['ember']['median_us'] / row['inductor']['median_us']:.2f}x"
        print(f"{name:10s} us/call median: {line}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

"""One process of tests/python/test_precompile.py: saves or loads a precompiled function.

    python precompile_child.py save|load SCENARIO DIR [--kernels embed|reference]

`save` compiles SCENARIO with torch's aot_compile and ember, writes the artifact and the
outputs (and gradients) of its first call to DIR; `load` loads the artifact in this new
process, calls it on the same inputs and checks the results are the same bits. Each prints
ember.stats() as one JSON line.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn

import ember

if hasattr(torch._dynamo.config, "enable_aot_compile"):
    torch._dynamo.config.enable_aot_compile = True  # off by default before torch 2.13

RESULT_TAG = "PRECOMPILE_STATS "


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))


def inference_fn(m, x):
    # A tensor constant (an attribute of ember's graph) and a softmax.
    return torch.softmax(m(x), -1) + torch.tensor([1.0, -2.0, 0.5, -0.0])


def training_fn(m, x):
    return m(x).square().mean()


def results(scenario, compiled, m, x):
    """The outputs of one call (and the gradients, in training)."""
    if scenario != "training":
        with torch.no_grad():
            return {"out": compiled(m, x)}
    loss = compiled(m, x)
    loss.backward()
    return {"loss": loss.detach(), **{f"grad.{n}": p.grad for n, p in m.named_parameters()}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=["save", "load"])
    parser.add_argument("scenario", choices=["inference", "training", "cuda"])
    parser.add_argument("dir")
    parser.add_argument("--kernels", default="embed")
    args = parser.parse_args()
    fn = training_fn if args.scenario == "training" else inference_fn
    m = mlp() if args.scenario == "training" else mlp().eval()
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    if args.scenario == "cuda":  # bf16 inference on the GPU: cubins in the artifact
        m, x = m.cuda().bfloat16(), x.cuda().bfloat16()
        fn = lambda m, x: torch.softmax(m(x), -1) * 2  # noqa: E731
    path = os.path.join(args.dir, f"{args.scenario}.bin")
    if args.action == "save":
        ember.config.precompile_kernels = args.kernels
        with torch.no_grad() if args.scenario != "training" else torch.enable_grad():
            compiled = torch.compile(fn, fullgraph=True, backend="ember").aot_compile(((m, x), {}))
        torch.save({k: v.cpu() for k, v in results(args.scenario, compiled, m, x).items()}, path + ".expected")
        compiled.save_compiled_function(path)
    else:
        with open(path, "rb") as f:
            compiled = torch.compiler.load_compiled_function(f)
        got, expected = results(args.scenario, compiled, m, x), torch.load(path + ".expected")
        got = {k: v.cpu() for k, v in got.items()}
        assert got.keys() == expected.keys()
        for k in got:
            assert torch.equal(got[k], expected[k]), f"{k} differs from the original compile's"
    stats = ember.stats()
    stats["cuda_compile_counts"] = ember._core.cuda_compile_counts()  # NVRTC runs: the CPU's are in stats
    print(RESULT_TAG + json.dumps(stats))
    sys.stdout.flush()


if __name__ == "__main__":
    main()

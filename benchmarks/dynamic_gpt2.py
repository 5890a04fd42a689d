"""Issue 4, acceptance 2: GPT-2 training with dynamic=True over every batch x sequence.

The model and optimizer of tests/python/test_training.py (transformers GPT-2, 2 layers,
n_embd 256, random weights, AdamW lr 1e-3 eps 1e-6, fp32 on CPU; n_positions 512 so
that sequences of 512 fit) take one AdamW step per (batch, sequence) combination, once
eagerly and once with torch.compile(backend="ember", dynamic=True), from the same
initial weights. After each step it records both losses and ember's counters; at the
end the parameters are compared. Prints a table and writes JSON.

    python benchmarks/dynamic_gpt2.py [--batches 1,3,8,17,64] [--seqs 7,64,129,512] [--out FILE]
"""
from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import platform
import sys
import time

import torch

import ember

VOCAB = 1000
COUNTERS = ("graphs_compiled", "codegen_runs", "c_compiler_runs", "recompiles", "eager_fallbacks")


def build():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=512, vocab_size=VOCAB,
                        bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, use_cache=False,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config).train()


def step(model, opt, fn, ids):
    opt.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    loss = fn(ids)
    loss.backward()
    opt.step()
    return loss.item(), time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,3,8,17,64")
    ap.add_argument("--seqs", default="7,64,129,512")
    ap.add_argument("--out", default="benchmarks/results/dynamic_gpt2.json")
    ap.add_argument("--backend", default="ember", help="ember, or inductor for its figures on the same run")
    args = ap.parse_args()
    batches = [int(x) for x in args.batches.split(",")]
    seqs = [int(x) for x in args.seqs.split(",")]
    # The first step compiles: start at a batch above 1, since Dynamo specializes
    # sizes 0 and 1 (batch 1 gets graphs of its own, for every compiler).
    combos = list(itertools.product(batches, seqs))
    combos.sort(key=lambda c: (c[0] == 1, c))
    first = next(c for c in combos if c[0] != 1)
    combos.remove(first)
    combos.insert(0, first)

    eager_model = build()
    ember_model = copy.deepcopy(eager_model)
    opt_e = torch.optim.AdamW(eager_model.parameters(), lr=1e-3, eps=1e-6)
    opt_c = torch.optim.AdamW(ember_model.parameters(), lr=1e-3, eps=1e-6)
    eager_fn = lambda ids: eager_model(input_ids=ids, labels=ids).loss  # noqa: E731
    compiled = torch.compile(lambda ids: ember_model(input_ids=ids, labels=ids).loss, backend=args.backend, dynamic=True)
    torch._dynamo.reset()
    ember.reset_stats()
    g = torch.Generator().manual_seed(1)
    rows = []
    print(f"backend: {args.backend} (counters are ember's)")
    print(f"{'batch':>5} {'seq':>4} {'eager loss':>11} {'ember loss':>11} {'rel diff':>9} {'eager s':>8} {'ember s':>8}  "
          + " ".join(f"{c:>15}" for c in COUNTERS))
    for b, t in combos:
        ids = torch.randint(0, VOCAB, (b, t), generator=g)
        le, te = step(eager_model, opt_e, eager_fn, ids)
        lc, tc = step(ember_model, opt_c, compiled, ids)
        stats = ember.stats()
        row = {"batch": b, "seq": t, "eager_loss": le, "ember_loss": lc, "rel_diff": abs(le - lc) / abs(le),
               "eager_s": te, "ember_s": tc, **{c: stats[c] for c in COUNTERS},
               "fallback_reasons": stats["eager_fallbacks_by_reason"]}
        rows.append(row)
        print(f"{b:>5} {t:>4} {le:>11.6f} {lc:>11.6f} {row['rel_diff']:>9.2e} {te:>8.2f} {tc:>8.2f}  "
              + " ".join(f"{stats[c]:>15}" for c in COUNTERS), flush=True)
    params = {}
    for (name, pe), pc in zip(eager_model.named_parameters(), ember_model.parameters()):
        params[name] = ((pe - pc).abs().max() / pe.abs().max()).item()
        if name.endswith("attn.c_attn.bias"):
            # The query, key and value biases separately: the key bias has a true
            # gradient of zero (softmax ignores a shift shared by all keys), so its
            # computed gradient is rounding noise that AdamW turns into steps of up
            # to lr * noise / eps, whichever compiler computes it.
            for part, pe_s, pc_s in zip(("q", "k", "v"), pe.detach().chunk(3), pc.detach().chunk(3)):
                params[f"{name}[{part}]"] = ((pe_s - pc_s).abs().max() / pe_s.abs().max()).item()
    worst = max(params, key=params.get)
    key_bias = {n for n in params if n.endswith("[k]") or n.endswith("c_attn.bias")}
    worst_other = max((n for n in params if n not in key_bias), key=params.get)
    after_first = {c: rows[-1][c] - rows[0][c] for c in COUNTERS}
    first_b1 = next((i for i, r in enumerate(rows) if r["batch"] == 1), None)
    print(f"\nworst loss difference: {max(r['rel_diff'] for r in rows):.2e} relative")
    print(f"worst parameter: {worst}, {params[worst]:.2e} (max abs difference / max abs value)")
    print(f"worst parameter other than the key biases: {worst_other}, {params[worst_other]:.2e}")
    print(f"after the first step (all steps): {after_first}")
    if first_b1 is not None:
        before_b1 = rows[first_b1 - 1]
        print("batch > 1 steps after the first: "
              + str({c: before_b1[c] - rows[0][c] for c in COUNTERS}))
        print("added by the first batch-1 step (Dynamo specializes size 1): "
              + str({c: rows[first_b1][c] - before_b1[c] for c in COUNTERS}))
        print("after the first batch-1 step: " + str({c: rows[-1][c] - rows[first_b1][c] for c in COUNTERS}))
    result = {
        "command": "python " + " ".join(sys.argv),
        "backend": args.backend,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "steps": rows, "param_rel_diff": params, "counters_after_first_step": after_first,
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""The `ember` command line (python -m ember)."""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def _demo(args) -> int:
    import torch

    import ember
    from ember import examples

    names = args.models or ["small_cnn", "ln_gelu", "tiny_gpt2"]
    status = 0
    for name in names:
        try:
            model, inputs = examples.get(name)
        except ImportError as e:
            print(f"{name}: skipped ({e})")
            continue
        with torch.no_grad():
            ref = model(*inputs)
            report = ember.explain(model, *inputs, graph_breaks=False)
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="ember")
            out = compiled(*inputs)
            times = {}
            for label, fn in (("eager", model), ("ember", compiled)):
                for _ in range(3):
                    fn(*inputs)
                ts = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    fn(*inputs)
                    ts.append(time.perf_counter() - t0)
                times[label] = statistics.median(ts) * 1000
        ref_t = ref if torch.is_tensor(ref) else ref[0]
        out_t = out if torch.is_tensor(out) else out[0]
        err = ((out_t - ref_t).abs().max() / ref_t.abs().max()).item()
        ok = err <= 1e-4
        status |= 0 if ok else 1
        print(f"=== {name}: max |ember - eager| / max |eager| = {err:.2e} ({'OK' if ok else 'MISMATCH'}); "
              f"median eager {times['eager']:.3f} ms, ember {times['ember']:.3f} ms")
        print(report)
        print()
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ember", description="ember: a C++ torch.compile backend")
    sub = parser.add_subparsers(dest="cmd", required=True)
    demo = sub.add_parser("demo", help="compile the built-in example models and report")
    demo.add_argument("models", nargs="*", help="example names (default: small_cnn ln_gelu tiny_gpt2)")
    args = parser.parse_args(argv)
    if args.cmd == "demo":
        return _demo(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())

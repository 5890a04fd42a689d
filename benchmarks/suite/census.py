"""What ember's CUDA schedule does with a suite model, without a GPU: kernels, copy
kernels (every value a load, a conversion or a rounding: no arithmetic) and the bytes of
the buffers each kernel touches, summed. The graphs are captured on the CPU (small
configuration, bf16 inference, as nvrtc_check.py does) and go through ember's CUDA
pipeline, stopping before NVRTC's output is used. Compare two builds by running it with
each (the captured texts can be kept: --save DIR, then --load DIR).

    python benchmarks/suite/census.py --models swin,deberta_v2,bloom [--save DIR | --load DIR] [--json F]
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4, "i64": 8, "f64": 8, "bool": 1, "u8": 1, "i8": 1}
_VALUE = re.compile(r"\s*const float t\d+ = ")
_ARITH = re.compile(r"=\s*[^;]*?(\s[-+*/]\s|expf|sqrtf|rsqrtf|tanhf|erff|fmaxf|fminf|ember_max|ember_min|logf|\?)")


def count(graphs: list[dict]) -> dict:
    from ember import _core
    from ember.runtime import cuda
    from ember.config import config

    kernels = copies = 0
    mb = 0.0
    for g in graphs:
        try:
            cg = cuda.compile_cuda(g["text"], None, config, arch="sm_90")
        except _core.CudaUnsupported:
            continue
        bufs = {b["id"]: b for b in cg.buffers}
        for k in cg.kernels:
            kernels += 1
            for a in set(k["args"]):
                n = 1
                for s in bufs[a]["sizes"]:
                    n *= s
                mb += n * _BYTES.get(bufs[a]["dtype"], 4) / 1e6
            start = cg.source.find(k.get("function", k["name"]) + "(")
            end = cg.source.find('extern "C"', start)
            body = cg.source[start:end if end > 0 else None]
            values = [ln for ln in body.splitlines() if _VALUE.match(ln)]
            copies += bool(values) and not any(_ARITH.search(ln) for ln in values)
    return {"kernels": kernels, "copies": copies, "kernel_mb": round(mb, 1)}


def main(argv):
    from suite import nvrtc_check, registry

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", required=True)
    p.add_argument("--save", help="keep the captured graph texts here")
    p.add_argument("--load", help="read the graph texts from here instead of capturing")
    p.add_argument("--json", help="write the counts here")
    args = p.parse_args(argv)
    out = {}
    for name in args.models.split(","):
        if args.load:
            with open(os.path.join(args.load, name + ".json")) as f:
                graphs = json.load(f)
        else:
            graphs = nvrtc_check.capture(registry.get(name), "infer")
            if args.save:
                os.makedirs(args.save, exist_ok=True)
                with open(os.path.join(args.save, name + ".json"), "w") as f:
                    json.dump(graphs, f)
        out[name] = count(graphs)
        print(f"{name:18s} kernels {out[name]['kernels']:4d}  copies {out[name]['copies']:4d}  "
              f"kernel MB {out[name]['kernel_mb']:8.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])

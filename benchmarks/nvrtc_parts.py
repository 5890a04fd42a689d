"""NVRTC wall time of a model's graphs by program size (kernels per NVRTC program).

NVRTC's cost is per kernel, and a graph compiles as parts of a few kernels on threads of
their own (csrc/runtime/cuda_compiled_graph.cpp, split_parts). This compiles the graphs
ember makes of each workload (gpu_models.py's build) again, each time into an empty
cache, with 1, 2, 3, 4 and 6 kernels per program, and prints the NVRTC wall time (the
`compile` phase) per workload, with the slowest and the summed program times: a wall
near the slowest program means the threads ran side by side. The graphs are captured
in a child process, so that no cubin is in this process's memory cache.

    python benchmarks/nvrtc_parts.py [--models gpt2,resnet50] [--sizes 1,2,6] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def capture(name: str, path: str) -> None:
    """(child) The graph texts ember compiles for workload `name`, as JSON into `path`."""
    import ember
    from gpu_models import EmberRecorder, build, make_step

    model, inputs, train = build(name, quick=False)
    ember.config.cache_dir = tempfile.mkdtemp(prefix="nvrtc_parts_")
    with EmberRecorder() as rec:
        make_step(torch.compile(model, backend="ember"), model, inputs, train)()
        torch.cuda.synchronize()
    with open(path, "w") as f:
        json.dump([r.imported.text for r in rec.records if r.imported is not None and r.cg is not None], f)


def main():
    from ember import _core
    from ember.runtime import cuda

    p = argparse.ArgumentParser()
    p.add_argument("--models", default="gpt2,bert,resnet50,vit,gpt2_train")
    p.add_argument("--sizes", default="1,2,3,4,6")
    p.add_argument("--json", default="")
    a = p.parse_args()
    sizes = [int(k) for k in a.sizes.split(",")]
    arch = cuda.device_arch(torch.device("cuda"))
    info = {"device": torch.cuda.get_device_name(), "cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
            "nvrtc": cuda.nvrtc_info()["identity"]}
    print(json.dumps(info), flush=True)
    rows = {}
    for name in a.models.split(","):
        path = tempfile.mktemp(suffix=".json")
        subprocess.run([sys.executable, __file__, "capture", name, path], check=True)
        with open(path) as f:
            texts = json.load(f)
        row = {}
        for k in sizes:
            wall, programs = 0.0, []
            for text in texts:
                t0 = time.perf_counter()
                cg = _core.compile_cuda(text, arch=arch, device=-1, cache_dir=tempfile.mkdtemp(prefix="nvrtc_k_"),
                                        nvrtc_dirs=list(cuda.nvrtc_dirs()), kernels_per_part=k)
                wall += time.perf_counter() - t0
                programs += list(cg.nvrtc_seconds)
            row[k] = {"wall_s": round(wall, 3), "programs": len(programs), "slowest_s": round(max(programs), 3),
                      "sum_s": round(sum(programs), 3)}
            print(f"{name:12} graphs {len(texts)} kernels/part {k}: wall {wall:.3f} s, {len(programs)} programs, "
                  f"slowest {max(programs):.3f} s, sum {sum(programs):.3f} s", flush=True)
        rows[name] = row
    print(f"{'workload':12} " + " ".join(f"{k:>6}" for k in sizes) + "   (NVRTC wall seconds by kernels per part)")
    for name, row in rows.items():
        print(f"{name:12} " + " ".join(f"{row[k]['wall_s']:6.2f}" for k in sizes))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"info": info, "seconds": rows}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "capture":
        capture(sys.argv[2], sys.argv[3])
    else:
        main()

"""Host time to issue one GPT-2 124M inference call (8x512, bf16) against its synchronized
time: ember through the AOTAutograd cache path, ember without it, and Inductor. A call whose
issue time is close to its synchronized time is bound by the host launching work.

    python3 benchmarks/gpu_issue_time.py
"""
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_models import build, make_step  # noqa: E402


def issue_and_synced_ms(step, calls=20):
    for _ in range(5):
        step()
    issue, synced = [], []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        issue.append((t1 - t0) * 1e3)
        synced.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(issue), statistics.median(synced)


def main():
    import ember

    model, inputs, train = build("gpt2", quick=False)
    for label, options in (("ember", {}), ("ember, aot_cache=False", {"aot_cache": False}), ("inductor", None)):
        torch._dynamo.reset()
        if options is None:
            fn = torch.compile(model)
        else:
            ember.config.cache_dir = tempfile.mkdtemp()
            fn = torch.compile(model, backend="ember", options=options)
        issue, synced = issue_and_synced_ms(make_step(fn, model, inputs, train))
        print(f"{label}: issue {issue:.2f} ms, synchronized {synced:.2f} ms", flush=True)


if __name__ == "__main__":
    main()

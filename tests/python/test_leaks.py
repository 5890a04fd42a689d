"""Resident memory must not grow with compiles or runs (the lighter form of
benchmarks/leak_check.py, whose full figures are in docs/reliability.md). Runs in a
fresh process so that other tests' allocations do not blur the figures."""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_no_rss_growth_across_compiles_and_runs(tmp_path):
    out = tmp_path / "leak.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "leak_check.py"), "--compiles", "120",
                        "--runs", "3000", "--json", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    core, backend, runs = json.loads(out.read_text())["phases"]
    # ember's C++ alone (lower, generate, compile, dlopen, run, dlclose): no growth
    # beyond allocator noise. A leaked shared object or compiled graph costs far more.
    assert core["growth_kb_per_iteration"] < 4, r.stdout
    # Through AOTAutograd, PyTorch keeps a few KB per graph (FX's generated source).
    assert backend["growth_kb_per_iteration"] < 40, r.stdout
    assert runs["growth_mb"] < 1, r.stdout

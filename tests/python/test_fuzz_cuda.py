"""The fuzzer's GPU campaign (python -m ember.fuzz --device cuda) as far as it runs without
a GPU: its programs (f32, bf16 and f16 graphs), its campaign machinery on the CPU (the dry
path), and the CUDA ember generates for its programs, compiled by NVRTC (no GPU needed):
a CUDA codegen error on a random graph fails CI."""
import importlib
import json
import subprocess
import sys

import pytest
import torch

from ember.runtime import cuda
from ember import fuzz
from ember.fuzz.cuda import nvrtc_slice
from ember.fuzz.judge import is_sticky

GPU = fuzz.GPU_DTYPES


def test_gpu_programs_take_one_float_dtype_each_and_no_f64():
    seen = set()
    for seed in range(60):
        prog = fuzz.generate(seed, GPU)
        assert prog.dtype in GPU
        seen.add(prog.dtype)
        assert "f64" not in prog.source()
        floats = [s.dtype for s in prog.inputs if s.dtype in ("f32", "f64", "f16", "bf16")]
        assert set(floats) <= set(GPU)
        # The first input has the program's dtype; others may differ, for promotion.
        assert prog.inputs[0].dtype == prog.dtype
        again = fuzz.generate(seed, GPU)
        assert again.source() == prog.source() and again.to_json() == prog.to_json()
    assert seen == set(GPU)


def test_cpu_programs_are_not_changed_by_the_gpu_profile():
    # The CPU campaigns' seeds keep their programs (docs/reliability.md names them).
    prog = fuzz.generate(70314)
    assert prog.dtype is None
    assert "v0 = torch.nan_to_num(a2, )" in prog.source()


def test_inputs_are_made_with_their_layout_on_the_device():
    prog = fuzz.generate(80280)
    for spec, x, y in zip(prog.inputs, fuzz.make_inputs(prog), fuzz.make_inputs(prog, "cpu")):
        assert x.stride() == y.stride() and x.storage_offset() == y.storage_offset(), spec
        assert torch.equal(x.nan_to_num(), y.nan_to_num())


def test_dry_run_of_the_gpu_campaign_on_the_cpu(tmp_path):
    """The GPU campaign's programs, judged on the CPU: its generator, judge and summary,
    with an output directory, as `--device cuda` writes them."""
    seeds = range(0, 40)
    summary = fuzz.campaign(seeds, jobs=2, progress=False, dtypes=GPU, out_dir=str(tmp_path), chunk=20)
    problems = [f"seed {f['seed']}: {f['status']}: {f.get('minimized_detail') or f.get('detail', '')}\n"
                f"{f.get('minimized_source', '')}" for f in summary["failures"]]
    assert not problems, "\n".join(problems)
    assert summary["counts"].get("ok", 0) >= 0.95 * len(seeds), summary["counts"]
    assert set(summary["by_dtype"]) == set(GPU)
    assert summary["finished"] and summary["graphs_done"] == len(seeds) and summary["crashes"] == 0
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["counts"] == summary["counts"] and on_disk["dtypes"] == list(GPU)


def test_time_limit_stops_the_campaign_with_a_partial_summary():
    # The worker takes seconds to start (torch, ember); then a few seeds a second at most.
    summary = fuzz.campaign(range(0, 3000), jobs=1, progress=False, dtypes=GPU, chunk=3000, time_limit=30)
    assert 0 < summary["graphs_done"] < 3000 and not summary["finished"]
    assert summary["failures_total"] == 0
    # `--seeds <not_run>` continues it.
    assert len(fuzz.parse_seeds(summary["not_run"])) == 3000 - summary["graphs_done"]


def test_seed_lists_round_trip():
    assert fuzz.parse_seeds("5") == [5] and fuzz.parse_seeds("3:6,10:12,20") == [3, 4, 5, 10, 11, 20]
    assert fuzz.seed_ranges([3, 4, 5, 10, 11, 20]) == "3:6,10:12,20:21"
    assert fuzz.parse_seeds(fuzz.seed_ranges(range(7, 19))) == list(range(7, 19))


def test_summaries_of_campaigns_side_by_side_merge(tmp_path):
    """scripts/gpu-fuzz-campaign runs one campaign a GPU; `--merge` makes one summary."""
    from ember.fuzz.campaign import _Tally, merge_summaries

    def part(seeds, results, seconds):
        tally = _Tally(list(seeds), fuzz.Settings(device=None, dtypes=GPU), 4, False)
        tally.add(results)
        return dict(tally.summary(), seconds=seconds)

    a = part(range(0, 4), [{"seed": 0, "status": "ok", "ops": 3, "kernels": 1, "dtype": "f32"},
                           {"seed": 1, "status": "mismatch", "ops": 2, "kernels": 1, "dtype": "bf16",
                            "detail": "x", "eager_graphs": 1, "eager_reasons": ["why"]}], 10.0)
    b = part(range(4, 7), [{"seed": 4, "status": "ok", "ops": 5, "kernels": 2, "dtype": "f32"},
                           {"seed": 5, "status": "crash", "detail": "y"}], 20.0)
    m = merge_summaries([a, b])
    assert m["graphs"] == 7 and m["graphs_done"] == 4 and not m["finished"]
    assert m["counts"] == {"ok": 2, "mismatch": 1, "crash": 1} and m["by_dtype"]["f32"] == {"ok": 2}
    assert m["mismatches"] == 1 and m["crashes"] == 1 and m["failures_total"] == 2
    assert m["ops"] == 10 and m["kernels"] == 4 and m["eager_graphs"] == 1 and m["eager_reasons"] == {"why": 1}
    assert [f["seed"] for f in m["failures"]] == [1, 5] and m["jobs"] == 8
    assert fuzz.parse_seeds(m["not_run"]) == [2, 3, 6] and m["seconds"] == 20.0 and m["graphs_per_second"] == 0.2
    assert [p["seeds"] for p in m["parts"]] == ["0:4", "4:7"]
    paths = []
    for i, s in enumerate((a, b)):
        paths.append(str(tmp_path / f"gpu{i}.json"))
        with open(paths[-1], "w") as f:
            json.dump(s, f)
    out = tmp_path / "gpu.json"
    r = subprocess.run([sys.executable, "-m", "ember.fuzz", "--merge", *paths, "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and json.loads(out.read_text())["counts"] == m["counts"]  # 1: it has failures


def test_repro_files_round_trip(tmp_path):
    prog = fuzz.generate(1234, GPU)
    path = tmp_path / "seed_1234.py"
    path.write_text(fuzz.repro_text(prog, fuzz.Result("mismatch", "output 0: ..."), prog.flags, "cuda"))
    again, flags, device = fuzz.read_repro(str(path))
    assert again.to_json() == prog.to_json() and flags == json.loads(json.dumps(prog.flags)) and device == "cuda"
    compile(path.read_text(), str(path), "exec")  # the file is Python


def test_sticky_cuda_errors_end_the_worker():
    assert is_sticky("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert is_sticky("ember: cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS")
    assert not is_sticky("RuntimeError: shape mismatch")


def test_cuda_without_a_gpu_is_refused_clearly():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = subprocess.run([sys.executable, "-m", "ember.fuzz", "--device", "cuda", "--seeds", "0:2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "cannot run on cuda" in r.stderr, r.stderr


@pytest.mark.skipif(not cuda.nvrtc_info()["available"], reason="NVRTC is not installed")
def test_nvrtc_compiles_the_cuda_of_fuzz_graphs(tmp_path):
    """CI's compile-only slice: the CUDA ember generates for 60 programs of the GPU
    campaign compiles with NVRTC for sm_90. Graphs the CUDA path refuses would run
    eagerly (counted, not failures); an NVRTC or internal error is a bug."""
    totals = nvrtc_slice(range(0, 60), str(tmp_path), GPU)
    assert not totals["errors"], json.dumps(totals["errors"], indent=1)[:6000]
    assert totals["programs"] == 60 and totals["compiled"] >= 0.8 * totals["graphs"], totals
    assert totals["kernels"] >= totals["compiled"] // 2, totals


# A stand-in for `python -m ember.fuzz --worker ...`: the first seed of its list passes;
# the second crashes the process, hangs, or meets a CUDA error that ends the context.
FAKE_WORKER = r"""
import json, os, signal, sys, time
args = sys.argv[sys.argv.index("--worker") + 1].split(",")
out = sys.argv[sys.argv.index("--worker-out") + 1]
how = os.environ["FAKE_FAILURE"]
for i, seed in enumerate(args):
    if i == 1:
        if how == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if how == "hang":
            time.sleep(3600)
        if how == "device_error":
            with open(out, "a") as f:
                f.write(json.dumps({"seed": int(seed), "status": "device_error", "detail": "illegal memory access"}) + "\n")
            sys.exit(3)
    with open(out, "a") as f:
        f.write(json.dumps({"seed": int(seed), "status": "ok", "ops": 1}) + "\n")
"""


@pytest.mark.parametrize("how,status", [("crash", "crash"), ("hang", "timeout"), ("device_error", "device_error")])
def test_a_worker_that_dies_costs_one_seed(tmp_path, monkeypatch, how, status):
    camp = importlib.import_module("ember.fuzz.campaign")  # the module (the package exports its function)
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    python.chmod(0o755)
    monkeypatch.setattr(camp.sys, "executable", str(python))
    monkeypatch.setenv("FAKE_FAILURE", how)
    settings = camp.Settings(cache_dir=str(tmp_path), minimize=False)
    results = camp._run_chunk([10, 11, 12, 13], settings, seconds_per_seed=2)
    assert [(r["seed"], r["status"]) for r in results] == [(10, "ok"), (11, status), (12, "ok"), (13, status)]


def test_an_error_raised_while_comparing_is_a_finding_not_a_dead_worker(tmp_path, monkeypatch):
    """An asynchronous CUDA fault surfaces at the next call that synchronizes, which may
    be the comparison of the outputs: campaign 1's 137 "crash"es were illegal addresses
    raised in _compare, outside _check's try, which killed the worker. Now it is the
    seed's device_error (the worker reports it and exits); another exception there is
    an error."""
    judge = importlib.import_module("ember.fuzz.judge")
    prog = fuzz.generate(3, GPU)

    def fault(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(judge, "_compare", fault)
    res = judge.check(prog, str(tmp_path))
    assert res.status == "device_error" and "illegal memory access" in res.detail
    monkeypatch.setattr(judge, "_compare", lambda *a, **k: 1 / 0)
    res = judge.check(prog, str(tmp_path))
    assert res.status == "error" and "ZeroDivisionError" in res.detail


def test_minimizing_on_a_device_tries_candidates_on_the_cpu_first(tmp_path, monkeypatch):
    """Seed 8368 of campaign 1: minimizing its mismatch bypassed a transpose before an
    index_select, whose indices then exceeded the operand. The CPU raises an error for
    such a candidate; CUDA trips a device-side assert, which broke the worker's context
    (seed 8369 was then reported as a device_error of its own). Candidates are now tried
    on the CPU first, and a candidate's device error stops minimizing and ends the worker
    after this seed."""
    camp = importlib.import_module("ember.fuzz.campaign")
    from ember.fuzz.judge import valid_on_the_cpu
    from ember.fuzz.programs import Program

    prog = Program.from_json({
        "seed": 8368, "outputs": ["v4"],
        "inputs": [{"shape": [2, 8], "dtype": "f16", "layout": "sliced", "layout_arg": [2, 2], "values": "specials",
                    "scale": 1.0, "index_bound": 0},
                   {"shape": [5], "dtype": "i64", "layout": "contiguous", "layout_arg": [], "values": "index",
                    "scale": 1.0, "index_bound": 8}],
        "lines": ["v0 = a0.transpose(0, 1)", "v1 = torch.clamp(v0, min=0)", "v4 = torch.index_select(v1, 0, a1)"]})
    bypassed = Program(prog.seed, prog.inputs, ["v1 = torch.clamp(a0, min=0)", "v4 = torch.index_select(v1, 0, a1)"],
                       ["v4"])
    assert valid_on_the_cpu(prog) and not valid_on_the_cpu(bypassed)
    prog.dtype, prog.flags = "f16", {}

    # A campaign on "cuda" (faked): the seed is a mismatch; one candidate meets a device error.
    calls = []

    def fake_check(p, cache_dir, flags=None, device=None):
        calls.append(p)
        if len(calls) == 1:
            return fuzz.Result("mismatch", "output 0: -0.0 != 0.0")
        return fuzz.Result("device_error", "AcceleratorError: CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(camp, "generate", lambda seed, dtypes=None: prog)
    monkeypatch.setattr(camp, "check", fake_check)
    settings = camp.Settings(cache_dir=str(tmp_path), device="cuda", minimize_seconds=30)
    out = camp.run_seed(8368, str(tmp_path), settings=settings)
    assert out["status"] == "mismatch" and "illegal memory access" in out["context_lost"]
    assert len(calls) == 2  # nothing ran after the device error
    # and the worker stops after this seed: the next one gets a new process (context)
    results = tmp_path / "results.jsonl"
    monkeypatch.setattr(camp, "run_seed", lambda seed, cache_dir, settings=None: dict(out, seed=seed))
    assert camp._run_worker([8368, 8369], settings, str(results)) == camp.DEVICE_ERROR_EXIT
    assert [json.loads(ln)["seed"] for ln in results.read_text().splitlines()] == [8368]


def test_gpu_programs_leave_out_scans_whose_partial_results_overflow_their_type():
    """Eager's CUDA scans accumulate in the result's type (f16 for f16) and in a tree order
    along the innermost dim: where a partial product or sum may overflow that type, eager
    has inf where ember (f32) has the finite prefix (campaign 1, seed 4060: 43456.0 vs
    inf). The GPU profile's generator does not emit such scans; the CPU's is unchanged."""
    from ember.fuzz.generator import Generator, _Reject
    from ember.fuzz.ops import Value

    g = Generator(0, GPU)

    def value(t):
        return Value("a0", t, True)

    big = torch.tensor([[300.0, 250.0, 2.0, 0.1]], dtype=torch.float16)
    with pytest.raises(_Reject):
        g.require_order_free_scan(value(big), 1, "cumprod", False)
    g.require_order_free_scan(value(big.float()), 1, "cumprod", False)  # f32's range holds it
    with pytest.raises(_Reject):
        g.require_order_free_scan(value(torch.tensor([60000.0, 30000.0, -60000.0], dtype=torch.float16)), 0,
                                  "cumsum", False)
    with pytest.raises(_Reject):  # int64 extremes summed in f32
        g.require_order_free_scan(value(torch.tensor([2 ** 40, -(2 ** 40), 13])), 0, "cumsum", True)
    tiny = torch.tensor([1e-3, 1e-3, float("inf")], dtype=torch.float16)
    with pytest.raises(_Reject):  # an underflowed prefix times inf is NaN
        g.require_order_free_scan(value(tiny), 0, "cumprod", False)
    g.require_order_free_scan(value(tiny[:2]), 0, "cumprod", False)  # no infinity: within tolerance
    for seed in (4060, 6169, 11464, 13038):
        assert "cumprod" not in fuzz.generate(seed, GPU).source()

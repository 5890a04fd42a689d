"""Kernels are named after what they do (csrc/schedule/name_kernels.h): kind, main ATen ops
and index, ember_red_var_mean_rsqrt_add_sub_plus1_0, the same in the generated code, explain,
the logs and a torch.profiler trace; config.descriptive_names = False keeps ember_k0. Kernels
equal but for their names still share one function, and a graph's names (so its cache keys)
are the same in every process."""
import json
import re

import pytest
import torch
import torch.nn as nn

import ember
from ember.runtime import cuda
from ember.config import config
from ember.records import Recording

from test_backend import run_python

DESCRIPTIVE = re.compile(r"^ember_(poi|red|per|scan)_[A-Za-z0-9_]+_(\d+)$")


class Block(nn.Module):
    """LayerNorm, Linear, GELU, then a softmax."""

    def __init__(self, width=32):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, width)

    def forward(self, x):
        return torch.softmax(torch.nn.functional.gelu(self.up(self.norm(x))), -1)


class TwoBlocks(nn.Module):
    """Two blocks of one shape, a Linear between them: their kernels are the same but for
    their buffers (and names)."""

    def __init__(self):
        super().__init__()
        self.a, self.mid, self.b = Block(), nn.Linear(32, 32), Block()

    def forward(self, x):
        return self.b(self.mid(self.a(x)))


def _compile_and_trace(tmp_path, model, x, options=None):
    """(the graph's record, the explain text, the profiler trace's complete events)."""
    from torch.profiler import ProfilerActivity, profile

    records = []
    recording = Recording(records)
    try:
        torch._dynamo.reset()
        with torch.no_grad():
            compiled = torch.compile(model, backend="ember", options=options)
            torch.testing.assert_close(compiled(x), model(x))
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                compiled(x)
            report = ember.explain(model, x, graph_breaks=False) if options is None else None
    finally:
        recording.stop()
        torch._dynamo.reset()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    return records[0], (str(report) if report is not None else ""), events


def _ranges(events):
    return {n for e in events for n in e["name"].split(", ") if n.startswith("ember_")}


def test_names_in_code_explain_and_profiler_trace(tmp_path):
    record, explain_text, events = _compile_and_trace(tmp_path, Block().eval(), torch.randn(8, 32))
    names = [k["name"] for k in record.cg.kernels]
    for i, name in enumerate(names):
        m = DESCRIPTIVE.match(name)
        assert m and int(m.group(2)) == i, names
        assert len(name) <= 80, name
    # The LayerNorm's kernel names its statistics, the softmax's its op; GELU is in one of them.
    assert any("var_mean" in n and n.startswith("ember_red_") for n in names), names
    assert any("softmax" in n or "amax" in n for n in names), names
    assert any("gelu" in n or "erf" in n for n in names), names
    # The same names everywhere: the C functions, the fusion plan, explain, the trace.
    for name in names:
        assert f"void {name}(int64_t begin" in record.cg.source or f"/* {name}: " in record.cg.source
        assert f"kernel {name} outer=" in record.cg.schedule_text
        assert name in explain_text, explain_text
    assert _ranges(events) == set(names), sorted(_ranges(events))
    assert "ember_k" not in record.cg.source and "ember_k" not in explain_text


def test_descriptive_names_off_keeps_the_short_names(tmp_path):
    for options in ({"descriptive_names": False}, {"triton.descriptive_names": False}):
        record, _, events = _compile_and_trace(tmp_path, Block().eval(), torch.randn(8, 32), options)
        names = [k["name"] for k in record.cg.kernels]
        assert names == [f"ember_k{i}" for i in range(len(names))], names
        assert _ranges(events) == set(names)
        assert "void ember_k0(int64_t begin" in record.cg.source


def test_identical_kernels_still_share_one_function(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "cache"))
    record, _, events = _compile_and_trace(tmp_path, TwoBlocks().eval(), torch.randn(8, 32))
    kernels = record.cg.kernels
    functions = [k["function"] for k in kernels]
    assert len(kernels) == 4 and len(set(k["name"] for k in kernels)) == 4
    # The second block's kernels differ from the first's in their buffers and names only.
    assert functions[2:] == functions[:2] == [k["name"] for k in kernels[:2]], functions
    defined = re.findall(r"^void (\w+)\(int64_t begin", record.cg.source, re.M)
    assert sorted(defined) == sorted(set(functions)), defined
    assert f"/* {kernels[2]['name']}: " in record.cg.source and f"runs {functions[2]} */" in record.cg.source
    assert _ranges(events) == {k["name"] for k in kernels}


def test_names_and_cache_keys_are_the_same_in_every_process(tmp_path):
    code = """
        import json, torch, torch.nn as nn, ember
        from ember.records import Recording
        records = []
        recording = Recording(records)
        torch.manual_seed(0)
        m = nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 32), nn.GELU()).eval()
        with torch.no_grad():
            torch.compile(m, backend="ember", options={"descriptive_names": DESCRIPTIVE})(torch.randn(8, 32))
        cg = records[0].cg
        print(json.dumps({"names": [k["name"] for k in cg.kernels], "key": cg.cache_key, "cache": cg.cache_status,
                          "loaded": records[0].loaded, "cc": ember.stats()["c_compiler_runs"]}))
    """
    runs = []
    for descriptive in (True, True, False):
        r = run_python(code.replace("DESCRIPTIVE", str(descriptive)), cache_dir=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    cold, warm, short = runs
    assert cold["names"] == warm["names"] and DESCRIPTIVE.match(cold["names"][0]), runs
    assert cold["key"] == warm["key"] and cold["cache"] == "miss" and cold["cc"] >= 1
    assert warm["cache"] == "disk" and warm["cc"] == 0, runs
    # The graph cache holds the graph, not its code: loaded with the option off, it gets the
    # short names (and kernels of their own in the kernel cache).
    assert short["loaded"] and short["names"] == ["ember_k0", "ember_k1"] and short["key"] != cold["key"], runs


def test_a_precompiled_artifact_keeps_the_names_it_was_built_with(tmp_path):
    """descriptive_names changes the code, so an artifact records it (precompile.py's
    _CODE_OPTIONS): a loader with the option off still finds the embedded kernels."""
    code = """
        import json, torch, torch.nn as nn, ember
        from ember.records import Recording
        records = []
        recording = Recording(records)
        torch.manual_seed(0)
        m = nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 32), nn.GELU()).eval()
        x = torch.randn(8, 32)
        with torch.no_grad():
            if STEP == "save":
                ember.save(m, (x,), PATH)
            else:
                ember.config.descriptive_names = False
                torch.testing.assert_close(ember.load(PATH, m, strict=True)(x), m(x))
        print(json.dumps({"names": [k["name"] for r in records if r.cg is not None for k in r.cg.kernels],
                          "cc": ember.stats()["c_compiler_runs"]}))
    """
    path = str(tmp_path / "block.ember")
    runs = []
    for step in ("save", "load"):  # each with caches of its own
        r = run_python(code.replace("STEP", repr(step)).replace("PATH", repr(path)), cache_dir=tmp_path / step)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    saved, loaded = runs
    assert DESCRIPTIVE.match(saved["names"][0]) and loaded["names"] == saved["names"], runs
    assert loaded["cc"] == 0, runs


@pytest.mark.skipif(not cuda.nvrtc_info()["available"], reason="NVRTC is not installed")
def test_cuda_kernels_carry_the_names_and_compile_with_nvrtc(tmp_path, monkeypatch):
    """The CUDA path names kernels the same way (persistent row reductions: per); the
    names are the functions NVRTC compiles and the runtime looks up."""
    from test_cuda_codegen import compile_all

    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    (cg,) = compile_all(TwoBlocks().eval(), (torch.randn(64, 32),))
    names = [k["name"] for k in cg.kernels]
    assert all(DESCRIPTIVE.match(n) for n in names), names
    assert any("var_mean" in n for n in names), names
    assert cg.cubins and all(c[:4] == b"\x7fELF" for c in cg.cubins)
    for k in cg.kernels:
        if k["function"] == k["name"]:
            assert f" {k['name']}(" in cg.source
            assert k["name"].encode() in b"".join(cg.cubins)  # the symbol the profiler shows
        else:  # the second block runs the first one's functions
            assert f"/* {k['name']}: runs {k['function']} */" in cg.source
    assert [k["function"] for k in cg.kernels][2:] == names[:2]
    monkeypatch.setattr(config, "descriptive_names", False)
    (short,) = compile_all(TwoBlocks().eval(), (torch.randn(64, 32),))
    assert [k["name"] for k in short.kernels] == [f"ember_k{i}" for i in range(len(short.kernels))]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_trace_shows_the_device_kernels_by_their_descriptive_names(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    model = Block(768).cuda().eval()
    x = torch.randn(64, 768, device="cuda")
    records = []
    recording = Recording(records)
    try:
        torch._dynamo.reset()
        with torch.no_grad():
            compiled = torch.compile(model, backend="ember")
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                compiled(x)
                torch.cuda.synchronize()
    finally:
        recording.stop()
        torch._dynamo.reset()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    device = {e["name"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("ember_")}
    names = [k["name"] for k in records[0].cg.kernels]
    assert all(DESCRIPTIVE.match(n) for n in names), names
    assert {k["function"] for k in records[0].cg.kernels} <= device, (names, device)
    assert any(n.startswith("ember_per_var_mean") for n in device), device  # LayerNorm's row in registers
    print("device kernels:", sorted(device))

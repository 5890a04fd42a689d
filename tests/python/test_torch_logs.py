"""ember in torch's logging: TORCH_LOGS names (ember, +ember, ember_output_code, output_code),
EMBER_LOGS beside them, and the TORCH_TRACE artifacts tlparse shows, each checked in a new
process as a user runs it."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

SOFTMAX = """
    import torch
    f = torch.compile(lambda x: torch.softmax(x * 2, -1), backend="ember")
    f(torch.randn(4, 9))
"""


def run_python(code, tmp_path, **env_extra):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "ember"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torch"))
    for name in ("TORCH_LOGS", "TORCH_TRACE", "EMBER_LOGS"):
        env.pop(name, None)
    env.update(env_extra)
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_torch_logs_ember_output_code_prints_the_code_in_torchs_format(tmp_path):
    err = run_python(SOFTMAX, tmp_path, TORCH_LOGS="ember_output_code").stderr
    assert "[__ember_output_code] graph inference_0 <lambda> (" in err and "script.py:3)" in err
    assert "[__ember_output_code] --- fusion plan ---" in err
    assert "[__ember_output_code] void ember_red_softmax_mul_0(int64_t begin, int64_t end, char* const* args)" in err


def test_torch_logs_output_code_carries_embers_code_too(tmp_path):
    err = run_python(SOFTMAX, tmp_path, TORCH_LOGS="output_code").stderr
    assert "[__output_code] --- generated C ---" in err


def test_torch_logs_plus_ember_prints_channels_but_not_the_code(tmp_path):
    err = run_python(SOFTMAX, tmp_path, TORCH_LOGS="+ember").stderr
    assert "ember/compile_events.py" in err and "kernel ember_red_softmax_mul_0 outer=[4]" in err  # the fusion channel
    assert "cache miss" in err  # the cache channel
    assert "--- generated C ---" not in err  # off by default, as Inductor's output_code


def test_ember_logs_keeps_working_and_import_torch_does_not_load_ember(tmp_path):
    err = run_python(SOFTMAX, tmp_path, EMBER_LOGS="output_code").stderr
    assert "[ember.output_code] graph inference_0" in err and "--- generated C ---" in err
    # torch loads ember's names (its entry point) while it imports, but not ember's compiler.
    out = run_python("import sys, torch; print('ember' in sys.modules)", tmp_path,
                     TORCH_LOGS="ember_output_code").stdout
    assert out.strip() == "False"


TRAIN_AND_FALLBACK = """
    import torch, ember
    from ember import _core

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(16)

        def forward(self, x):
            return torch.relu(self.norm(x)) * 2.0

    torch.compile(Block(), backend="ember")(torch.randn(4, 16, requires_grad=True)).sum().backward()

    def refuse(*args, **kwargs):  # a C++ pipeline failure: the graph runs eagerly
        raise RuntimeError("planted failure")

    _core.compile = refuse
    torch.compile(lambda x: x.cos() + 1, backend="ember")(torch.randn(8))
"""


def _trace_records(trace_dir):
    """(metadata, payload) of every structured log record in the TORCH_TRACE directory."""
    (path,) = glob.glob(os.path.join(trace_dir, "*.log"))
    records, current = [], None
    for line in open(path).read().split("\n"):
        if line.startswith("\t"):
            current[1].append(line[1:])
        elif line.strip():
            current = (json.loads(line[line.index("] ") + 2:]), [])
            records.append(current)
    return [(meta, "\n".join(payload)) for meta, payload in records]


def test_torch_trace_holds_embers_artifacts_for_each_graph(tmp_path):
    trace_dir = tmp_path / "trace"
    run_python(TRAIN_AND_FALLBACK, tmp_path, TORCH_TRACE=str(trace_dir), EMBER_FALLBACK_ON_ERROR="1")
    records = _trace_records(trace_dir)
    artifacts = {m["artifact"]["name"]: (m, p) for m, p in records if "artifact" in m}
    dynamo_ids = {(m["frame_id"], m["frame_compile_id"]) for m, _ in records if "dynamo_output_graph" in m}
    for graph in ("forward_0", "backward_1"):
        for what in ("graph", "fusion_plan", "output_code", "compile"):
            meta, payload = artifacts[f"ember_{graph}_{what}"]
            # Under the Dynamo compile that made it (tlparse groups by these), with its payload.
            assert (meta["frame_id"], meta["frame_compile_id"]) in dynamo_ids and meta["attempt"] == 0
            assert payload.strip()
        assert re.search(r"kernel ember_(poi|red)_\w+_0 ", artifacts[f"ember_{graph}_fusion_plan"][1])
        assert re.search(r"void ember_(poi|red)_\w+_0\(", artifacts[f"ember_{graph}_output_code"][1])
        summary = json.loads(artifacts[f"ember_{graph}_compile"][1])
        assert summary["source"]["module"] == "Block" and summary["label"].startswith("Block.forward (") and \
            summary["source"]["line"] == 11
        assert summary["kernels"] and all(k["ops"] for k in summary["kernels"] if k["ops"])
        assert summary["times_s"]["total"] > 0 and summary["cache"] == "miss"
    (fallback,) = [json.loads(p) for n, (m, p) in artifacts.items() if n.endswith("_fallback")]
    assert "planted failure" in fallback["fallback_reason"]


@pytest.mark.skipif(shutil.which("tlparse") is None and not os.path.exists(os.path.join(
    os.path.dirname(sys.executable), "tlparse")), reason="tlparse is not installed (pip install tlparse)")
def test_tlparse_shows_embers_artifacts_beside_dynamos(tmp_path):
    trace_dir, out = tmp_path / "trace", tmp_path / "tl_out"
    run_python(TRAIN_AND_FALLBACK, tmp_path, TORCH_TRACE=str(trace_dir), EMBER_FALLBACK_ON_ERROR="1")
    tlparse = shutil.which("tlparse") or os.path.join(os.path.dirname(sys.executable), "tlparse")
    (log,) = glob.glob(os.path.join(trace_dir, "*.log"))
    r = subprocess.run([tlparse, log, "-o", str(out), "--no-browser", "--strict"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # One directory per compile id: ember's files sit beside Dynamo's output graph.
    dirs = [d for d in glob.glob(str(out / "*")) if glob.glob(os.path.join(d, "dynamo_output_graph*"))]
    ember_files = [os.path.basename(f) for d in dirs for f in glob.glob(os.path.join(d, "ember_*"))]
    for name in ("ember_forward_0_output_code", "ember_backward_1_fusion_plan", "ember_forward_0_compile"):
        assert any(f.startswith(name) for f in ember_files), ember_files
    index = (out / "index.html").read_text()
    assert "ember_forward_0_output_code" in index

"""The `ember` command: doctor, bench, explain, cache, each run as a user runs it (a
subprocess of `python -m ember`), its output parsed and its values checked."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import ember
from ember import cli
from ember.tools import doctor


def ember_cmd(*args, cache_dir=None, env_extra=None, timeout=300):
    env = dict(os.environ)
    env.pop("EMBER_FALLBACK_ON_ERROR", None)  # the commands run with the user's defaults
    if cache_dir is not None:
        env["EMBER_CACHE_DIR"] = str(cache_dir)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "ember", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_help_lists_every_command():
    r = ember_cmd("--help")
    assert r.returncode == 0, r.stderr
    for cmd in ("demo", "doctor", "bench", "explain", "cache", "precompile", "report"):
        assert cmd in r.stdout
    script = shutil.which("ember", path=os.path.dirname(sys.executable))
    if script:  # the console script the package installs
        assert subprocess.run([script, "--help"], capture_output=True, text=True).returncode == 0


def test_doctor_reports_each_check(tmp_path):
    r = ember_cmd("doctor", cache_dir=tmp_path / "cache")
    assert r.returncode == 0, r.stdout + r.stderr
    levels = {name: level for level, name in re.findall(r"^(OK|INFO|WARN|FAIL)\s+(\w[\w ]*?)\s{2,}", r.stdout, re.M)}
    for check in ("torch", "dynamo", "ember core", "backends", "c compiler", "cpu", "threads", "cuda", "cache",
                  "compile"):
        assert check in levels, (check, r.stdout)
    assert levels["c compiler"] == "OK" and levels["compile"] == "OK" and levels["backends"] == "OK"
    assert levels["cuda"] in ("OK", "INFO", "WARN")  # no GPU is not a failure
    assert "-march=" in r.stdout and "ember" in r.stdout
    assert "ember is ready" in r.stdout


def test_doctor_fails_the_compiler_check_with_a_fix(monkeypatch):
    monkeypatch.setenv("EMBER_CC", "/nonexistent/cc")
    check = doctor._c_compiler()
    assert check.level == "FAIL"
    assert "not found" in check.summary and "EMBER_CC" in check.fix


def _fill_cache(cache_dir):
    code = "import torch; f = torch.compile(lambda x: (x.sin() * 2).sum(-1), backend='ember'); f(torch.randn(4, 5))"
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)


def test_cache_info_and_clear(tmp_path):
    cache_dir = tmp_path / "cache"
    _fill_cache(cache_dir)
    (cache_dir / "notes.txt").write_text("not ember's")
    info = json.loads(ember_cmd("cache", "info", "--json", cache_dir=cache_dir).stdout)
    assert info["dir"] == str(cache_dir) and info["usable"] is True and info["mode"] == "0700"
    # The graph's kernels, the graph (graph_cache.py), the C compiler's probe (csrc/runtime/compiler_memo.h).
    assert info["entries"] == 3 and info["bytes"] > 1000

    r = ember_cmd("cache", "clear", cache_dir=cache_dir)
    assert r.returncode == 0, r.stderr
    assert re.search(r"removed 3 entries", r.stdout)
    r = ember_cmd("cache", "info", cache_dir=cache_dir)
    assert re.search(r"^entries:\s+0$", r.stdout, re.M) and "safe" in r.stdout
    assert (cache_dir / "notes.txt").exists()  # only ember's entries are removed


def test_cache_refuses_an_unsafe_directory(tmp_path, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    assert cli.main(["cache", "info", "--dir", str(shared)]) == 1
    assert "UNSAFE" in capsys.readouterr().out
    assert cli.main(["cache", "clear", "--dir", str(shared)]) == 1
    assert "not clearing" in capsys.readouterr().err


def test_bench_table_json_and_png(tmp_path):
    out_json, out_png, out_html = tmp_path / "bench.json", tmp_path / "bench.png", tmp_path / "bench.html"
    r = ember_cmd("bench", "mlp", "--backend", "eager,ember", "--iters", "6", "--rounds", "2", "--warmup", "1",
                  "--json", str(out_json), "--png", str(out_png), "--html", str(out_html), cache_dir=tmp_path / "cache")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[ember bench] mlp / ember: cold first call" in r.stderr  # the progress lines
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line.startswith(("eager ", "ember "))}
    assert set(rows) == {"eager", "ember"} and rows["eager"][3] == "1.00x"

    report = json.loads(out_json.read_text())
    assert set(report["backends"]) == {"eager", "ember"}
    for name, b in report["backends"].items():
        steady = b["steady"]
        assert steady["median_ms"] > 0 and steady["p10_ms"] <= steady["median_ms"] <= steady["p90_ms"]
        assert steady["calls"] == 6
        assert steady["errors"]["ok"] and steady["errors"]["max_rel_vs_eager"] < 1e-4
        assert steady["errors"]["rmse_vs_fp64"] < 1e-4
        assert b["first_call"]["cold"]["first_call_s"] > 0
        assert b["speedup_vs_eager"] > 0
    ember_b = report["backends"]["ember"]
    assert ember_b["first_call"]["cold"]["cache"] == ["miss"]
    assert ember_b["first_call"]["warm"]["cache"] == ["disk"]  # the warm process hits the cold one's cache
    assert ember_b["first_call"]["cold"]["kernels"] >= 1 and ember_b["first_call"]["cold"]["graphs"] == 1
    assert ember_b["first_call"]["warm"]["peak_rss_delta_mb"] is not None

    png = out_png.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000

    # --html: ember report's page with the benchmark's backends side by side.
    page = out_html.read_text()
    assert "Side by side (ember bench)" in page and 'id="bandwidth"' in page and 'id="graph-inference_' in page
    median = report["backends"]["ember"]["steady"]["median_ms"]
    assert f"{median:.3f}" in page


BREAK_AND_RECOMPILE = '''
import torch


def f(x, scale):
    y = torch.relu(x) * scale
    print("halfway")
    return torch.softmax(y, -1) + y.sum()


def factory():
    x = torch.randn(8, 16)
    return f, (x, 2.0), [(x, 3.0)]
'''


def test_explain_names_graph_break_and_recompile_with_source_lines(tmp_path):
    path = tmp_path / "model_with_break.py"
    path.write_text(BREAK_AND_RECOMPILE)
    out_json = tmp_path / "explain.json"
    r = ember_cmd("explain", f"{path}:factory", "--json", str(out_json), cache_dir=tmp_path / "cache")
    assert r.returncode == 0, r.stdout + r.stderr
    text = r.stdout
    assert re.search(r"graph breaks: 1\n\s+1\. \S*model_with_break\.py:7 in f: print\(\"halfway\"\)", text), text
    assert "Dynamo does not know how to trace builtin operator `print`" in text
    assert re.search(r"recompilations: 1\n\s+1\. f \(\S*model_with_break\.py:6\) compiled again as 0/1", text)
    assert "[0/0] scale == 2.0" in text
    assert re.search(r"from \S*model_with_break\.py:6 in f: y = torch.relu\(x\) \* scale", text)
    assert "ember_poi_relu_mul_0" in text  # the kernel, named after its ops
    assert re.search(r"speedup: estimated \d+\.\d\dx, measured \d+\.\d\dx", text)

    d = json.loads(out_json.read_text())
    (brk,) = d["graph_breaks"]["breaks"]
    assert (os.path.basename(brk["file"]), brk["line"], brk["code"]) == ("model_with_break.py", 7, 'print("halfway")')
    (rec,) = d["recompiles"]
    assert rec["compile_id"] == "0/1" and rec["failures"][0]["guard"] == "scale == 2.0"
    assert rec["failures"][0]["source"]["line"] == 6
    assert d["estimate"]["graph_breaks"] == 1 and d["estimate"]["kernels"] >= 2
    frames = [g["frame"]["compile_id"] for g in d["graphs"]]
    assert frames == ["0/0", "1/0", "0/1"]


@pytest.mark.parametrize("cmd", ["explain", "bench", "precompile"])
def test_unknown_target_is_one_line_not_a_traceback(cmd):
    r = ember_cmd(cmd, "no_such_model", *(["-o", "x.ember"] if cmd == "precompile" else []))
    assert r.returncode == 2 and "unknown example model 'no_such_model'" in r.stderr
    assert "Traceback" not in r.stderr


def test_precompile_writes_an_artifact_that_loads_in_a_new_process(tmp_path):
    from ember.caches import precompile

    if precompile.unavailable_reason():
        pytest.skip(precompile.unavailable_reason())
    out = tmp_path / "mlp.ember"
    r = ember_cmd("precompile", "mlp", "-o", str(out), cache_dir=tmp_path / "cache")
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"wrote .*mlp\.ember \([\d.]+ KiB, inference, kernels embedded\)", r.stdout), r.stdout
    check = textwrap.dedent(f"""
        import torch, ember
        from ember import examples
        model, inputs = examples.get("mlp")
        with torch.no_grad():
            out = ember.load({str(out)!r}, model, strict=True)(*inputs)
            torch.testing.assert_close(out, model(*inputs), rtol=1e-4, atol=1e-5)
        s = ember.stats()
        assert s["dynamo_compiles"] == 0 and s["c_compiler_runs"] == 0 and s["precompile"]["loaded"] == 1, s
    """)
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "fresh"))
    r = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_explain_api_takes_more_calls():
    import torch

    def g(x):
        return torch.tanh(x) + 1

    report = ember.explain(g, torch.randn(3, 4), calls=[(torch.randn(3, 4, dtype=torch.float64),)],
                           graph_breaks=False)
    (rec,) = report.recompiles
    assert "dtype" in rec["failures"][0]["guard"].lower() or "float" in rec["failures"][0]["guard"].lower()
    assert "recompilations: 1" in str(report)


def test_explain_names_kernels_that_share_compiled_code():
    import torch

    torch.manual_seed(0)
    w = torch.randn(16, 16)

    def layers(x):
        for _ in range(3):
            x = torch.tanh(x) @ w
        return x

    report = ember.explain(layers, torch.randn(8, 16), graph_breaks=False)
    kernels = [k for g in report.graphs for k in g["kernels"]]
    shared = [k for k in kernels if k["function"] != k["name"]]
    assert len(shared) == 2 and all(k["function"] == kernels[0]["name"] for k in shared), kernels
    assert f"[code of {kernels[0]['name']}]" in str(report)


def test_doctor_flags_a_module_with_its_own_static_libstdcxx(tmp_path):
    """The device-host crash: a module linked with -static-libstdc++ is a FAIL, ours is OK."""
    from ember import _core

    assert doctor.libstdcxx_check(_core.__file__).level == "OK"
    src = tmp_path / "m.cpp"
    src.write_text("#include <sstream>\nextern \"C\" int f() { std::ostringstream s; s << 1; return (int)s.str().size(); }\n")
    so = tmp_path / "m.so"
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    r = subprocess.run([cxx, "-shared", "-fPIC", "-static-libstdc++", "-o", str(so), str(src)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("the toolchain cannot link libstdc++ statically")
    check = doctor.libstdcxx_check(str(so))
    assert check.level == "FAIL" and "static" in check.summary and "CXX=" in check.fix

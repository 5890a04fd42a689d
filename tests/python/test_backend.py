"""The backend around the compiler: registration, ember.compile, explain, logs, the
kernel cache across processes, and the eager fallback on errors."""
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import ember
from ember import compiler
from ember.records import Recording
from helpers import check_compiled, compile_fresh, load_examples


def run_python(code, env_extra=None, cache_dir=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    if cache_dir is not None:
        # Both caches: torch's AOTAutogradCache also holds ember's graphs (an entry another
        # test wrote would skip the compile this one is about).
        env["EMBER_CACHE_DIR"] = str(cache_dir)
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(str(cache_dir), "torch")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=300)


def test_backend_registered_without_importing_ember(tmp_path):
    r = run_python("""
        import sys, torch
        f = torch.compile(lambda x: torch.relu(x) * 2, backend="ember")
        x = torch.randn(5, 7)
        assert torch.equal(f(x), torch.relu(x) * 2)
        print("ember loaded by the entry point:", "ember" in sys.modules)
    """, cache_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ember loaded by the entry point: True" in r.stdout


def test_reduce_overhead_on_the_cpu_compiles_as_the_default():
    """CUDA graphs are a CUDA mode: CPU graphs compile and run as usual, nothing recorded."""
    x = torch.randn(6, 10)
    before = ember.stats()
    f = ember.compile(lambda t: torch.softmax(t, -1) * 2, mode="reduce-overhead")
    for _ in range(3):
        torch.testing.assert_close(f(x), torch.softmax(x, -1) * 2)
    after = ember.stats()
    assert after["graphs_compiled"] > before["graphs_compiled"]
    assert after["cuda_graph_recordings"] == before["cuda_graph_recordings"]
    assert after["cuda_graph_replays"] == before["cuda_graph_replays"]


def test_ember_compile_arguments():
    x = torch.randn(6, 10)
    f = ember.compile(lambda t: torch.softmax(t, -1), mode="max-autotune", options={"fuse": False})
    torch.testing.assert_close(f(x), torch.softmax(x, -1))
    g = ember.compile(lambda t: t.exp(), disable=True)
    torch.testing.assert_close(g(x), x.exp())
    with pytest.raises(ValueError, match="unknown option"):
        ember.compile(lambda t: t, options={"no_such_option": 1})
    with pytest.raises(ValueError, match="unknown mode"):
        ember.compile(lambda t: t, mode="fastest")
    # Inductor's names map onto ember's (force_disable_caches -> no disk cache).
    torch.testing.assert_close(ember.compile(lambda t: t + 1, options={"force_disable_caches": True})(x), x + 1)
    cfg = ember.config.update({"force_disable_caches": True, "trace.enabled": True, "max_autotune": True})
    assert cfg.disk_cache is False and cfg.debug_dir == (ember.config.debug_dir or "ember_debug")
    assert ember.config.update({"trace.debug_dir": "/tmp/x"}).debug_dir == "/tmp/x"


def test_mode_is_a_field_of_the_config():
    from ember.caches.tags import cache_tag
    from ember.config import Config

    assert Config().mode is None and not Config().cuda_graphs and cache_tag(Config()).endswith("-default")
    tuned = Config().with_mode("max-autotune")
    assert tuned.mode == "max-autotune" and tuned.max_autotune and tuned.cuda_graphs
    assert Config().with_mode("max-autotune-no-cudagraphs").max_autotune
    assert not Config().with_mode("max-autotune-no-cudagraphs").cuda_graphs
    replay = Config().with_mode("reduce-overhead")
    assert replay.cuda_graphs and not replay.max_autotune and cache_tag(replay).endswith("-reduce-overhead")
    # Through options= too, checked as mode= is.
    with pytest.raises(ValueError, match="unknown mode"):
        ember.make_backend(options={"mode": "fastest"})


def test_explain_reports_kernels_externs_times_and_cache():
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32)).eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        report = ember.explain(model, x)
    d = report.to_dict()
    json.dumps(d)  # JSON-able
    (g,) = d["graphs"]
    assert g["fallback_reason"] is None
    assert g["cache"] in ("miss", "disk", "memory")
    fused = [op for k in g["kernels"] for op in k["ops"]]
    assert "aten.gelu.default" in fused and "aten.var_mean.correction" in fused
    assert [e["op"] for e in g["externs"]] == ["aten.addmm.default"]
    assert g["externs"][0]["reason"].startswith("matmul")
    for phase in ("import", "lower", "schedule", "codegen", "compile", "load", "total"):
        assert phase in g["times_s"]
    assert d["graph_breaks"]["count"] == 0
    text = str(report)
    assert re.search(r"ember_red_\w*var_mean\w*_0 ", text) and "aten.addmm.default" in text


@pytest.mark.parametrize("name", ["tiny_gpt2", "small_cnn"])
def test_acceptance_models_only_call_aten_for_matmul_conv_attention(name):
    # Issue 2, acceptance 1: every pointwise/reduction op runs in ember kernels.
    examples = load_examples()
    model, inputs = examples.get(name)
    with torch.no_grad():
        ref = model(*inputs)
        report = ember.explain(model, *inputs, graph_breaks=False)
        out = torch.compile(model, backend="ember")(*inputs)
    assert (out - ref).abs().max() / ref.abs().max() <= 1e-4
    allowed = ("matmul:", "convolution:", "attention:")
    for e in report.externs:
        assert e["reason"].startswith(allowed), e
    assert report.kernels, "no ember kernels"


def test_output_code_log_prints_plan_and_c(tmp_path):
    r = run_python("""
        import torch
        f = torch.compile(lambda x: torch.softmax(x * 2, -1), backend="ember")
        f(torch.randn(4, 9))
    """, {"EMBER_LOGS": "output_code"}, cache_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--- fusion plan ---" in r.stderr
    assert "kernel ember_red_softmax_mul_0" in r.stderr
    assert "void ember_red_softmax_mul_0(int64_t begin, int64_t end, char* const* args)" in r.stderr


def test_warm_cache_skips_the_c_compiler(tmp_path):
    code = """
        import json, torch, ember
        f = torch.compile(lambda x: (x.sin() + x.cos()).sum(-1), backend="ember")
        x = torch.randn(8, 33)
        torch.testing.assert_close(f(x), (x.sin() + x.cos()).sum(-1))
        s = ember.last_compile_stats()
        print(json.dumps({"cache": s["cache"], "compile_seconds": s["compile_seconds"]}))
    """
    cold = run_python(code, cache_dir=tmp_path)
    warm = run_python(code, cache_dir=tmp_path)
    assert cold.returncode == 0 and warm.returncode == 0, cold.stderr + warm.stderr
    cold_stats = json.loads(cold.stdout.strip().splitlines()[-1])
    warm_stats = json.loads(warm.stdout.strip().splitlines()[-1])
    assert cold_stats["cache"] == ["miss"] and cold_stats["compile_seconds"] > 0
    assert warm_stats["cache"] == ["disk"] and warm_stats["compile_seconds"] == 0


def test_c_compiler_failure_falls_back_to_eager_with_one_warning(tmp_path):
    r = run_python("""
        import warnings, torch, ember
        x = torch.randn(6, 5)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            f = torch.compile(lambda t: torch.tanh(t) * 3, backend="ember")
            out = f(x)
        torch.testing.assert_close(out, torch.tanh(x) * 3)
        msgs = [str(m.message) for m in w if "ember" in str(m.message)]
        print(len(msgs), msgs[0] if msgs else "")
    """, {"EMBER_CC": "/nonexistent/cc", "EMBER_FALLBACK_ON_ERROR": "1"}, cache_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("1 ") and "running it eagerly" in r.stdout and "not found" in r.stdout


def test_c_compiler_failure_raises_when_asked(tmp_path):
    r = run_python("""
        import torch, ember
        ember.config.fallback_on_error = False
        try:
            torch.compile(lambda t: t * 2 + 1, backend="ember")(torch.randn(3))
        except Exception as e:
            print("raised:", type(e).__name__)
    """, {"EMBER_CC": "/nonexistent/cc"}, cache_dir=tmp_path)
    assert "raised:" in r.stdout, r.stdout + r.stderr


def test_unsafe_cache_dir_is_bypassed_not_used(tmp_path):
    unsafe = tmp_path / "shared"
    unsafe.mkdir()
    os.chmod(unsafe, 0o777)
    r = run_python("""
        import torch, ember
        x = torch.randn(4, 4)
        torch.testing.assert_close(torch.compile(lambda t: t.exp() + 1, backend="ember")(x), x.exp() + 1)
        print("note:", ember.last_compile_stats()["cache_notes"])
    """, cache_dir=unsafe)
    assert r.returncode == 0, r.stderr
    assert "writable by group or others" in r.stdout
    assert not any(p.suffix == ".so" for p in unsafe.rglob("*"))
    assert stat.S_IMODE(os.stat(unsafe).st_mode) == 0o777  # never chmod a directory we did not create


def test_unsupported_dtype_runs_in_aten_and_the_rest_compiles():
    # Values of dtypes ember has no kernels for (u64, complex) are `opaque` in the graph
    # text: the ops that read or make them run in ATen, everything else in ember kernels;
    # before, one such value sent the whole graph to eager.
    def fn(x, y):
        a = (x * 2 + 1).relu()
        v = y.to(torch.uint64).to(torch.int64) + 3
        c = torch.view_as_complex(x.reshape(4, 4, 2)).abs()
        return a.sum(1) + v.float().mean() + c.sum()

    records = []
    recording = Recording(records)
    try:
        check_compiled(fn, torch.randn(4, 8), torch.randint(0, 10, (4, 8)))
    finally:
        recording.stop()
    (record,) = records
    assert record.fallback_reason is None and record.cg.kernels
    opaque = [e for e in record.cg.externs if "does not model" in e["reason"]]
    assert sorted(e["op"] for e in opaque) == ["aten._to_copy.default", "aten._to_copy.default",
                                               "aten.abs.default", "aten.view_as_complex.default"], opaque
    assert ": opaque" in record.imported.text


def test_a_complex_graph_compiles_to_aten_calls():
    check_compiled(lambda t: t * 2 + 1, torch.randn(3, 3, dtype=torch.complex64))


def test_a_graph_that_must_run_eagerly_runs_the_users_ops(monkeypatch):
    # A graph ember refuses (an internal error with the fallback on, here forced) runs as the
    # user's code does: layer_norm stays one ATen call, not its decomposition's ops.
    from ember.frontend.fx_import import UnsupportedGraph

    def refuse(*args, **kwargs):
        raise UnsupportedGraph("refused for the test")

    monkeypatch.setattr(compiler, "build_runner", refuse)
    fn = lambda t: torch.nn.functional.layer_norm(t, (8,)).relu() * 2  # noqa: E731
    for requires_grad in (False, True):
        x = torch.randn(4, 8, requires_grad=requires_grad)
        compiled = compile_fresh(fn)
        torch.testing.assert_close(compiled(x), fn(x))
        with torch.profiler.profile() as prof:
            out = compiled(x)
            if requires_grad:
                out.sum().backward()
        ops = {e.name for e in prof.events()}
        assert "aten::layer_norm" in ops and "aten::var_mean" not in ops, sorted(ops)


def test_dynamic_shapes_run_eagerly_and_stay_correct():
    # Symbolic sizes are not compiled yet: such graphs must run eagerly, never
    # specialize silently to the first shape.
    f = torch.compile(lambda t: torch.softmax(t * 2, -1).sum(0), backend="ember", dynamic=True)
    for n in (3, 5, 9):
        x = torch.randn(n, n + 1)
        torch.testing.assert_close(f(x), torch.softmax(x * 2, -1).sum(0))
    g = torch.compile(lambda t: t.exp() + 1, backend="ember")  # automatic dynamic on the 2nd shape
    for n in (4, 6, 8):
        x = torch.randn(n, 3)
        torch.testing.assert_close(g(x), x.exp() + 1)


# A graph text the C++ parser rejects: an ember bug inside the core, as users would meet it.
_BREAK_THE_CORE = """
        import ember.backend as backend, ember.compiler as compiler
        real_import = compiler.import_graph
        def corrupted(gm, *args):
            imported = real_import(gm, *args)
            imported.text += "\\n  %99 = no_such_syntax(((\\n"
            return imported
        backend.import_graph = compiler.import_graph = corrupted
"""


def test_internal_error_falls_back_to_eager_with_one_warning_and_no_traceback(tmp_path):
    r = run_python(_BREAK_THE_CORE + """
        import torch
        x = torch.randn(6, 5)
        f = torch.compile(lambda t: torch.tanh(t) * 3, backend="ember")
        for _ in range(3):
            torch.testing.assert_close(f(x), torch.tanh(x) * 3)
        print("correct")
    """, {"EMBER_FALLBACK_ON_ERROR": "1"}, cache_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "correct"
    warnings_shown = [ln for ln in r.stderr.splitlines() if "ember: compiling graph" in ln]
    assert len(warnings_shown) == 1, r.stderr
    assert "running it eagerly" in warnings_shown[0] and "inference_0" in warnings_shown[0]
    assert "Traceback" not in r.stderr  # no deep internal traceback by default


def test_debug_dir_has_ir_after_each_pass_source_and_timings(tmp_path):
    debug = tmp_path / "debug"
    r = run_python("""
        import torch
        torch.compile(lambda t: torch.softmax(t * 2, -1), backend="ember")(torch.randn(4, 9))
    """, {"EMBER_DEBUG_DIR": str(debug)}, cache_dir=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    graph_dir = debug / "inference_0"
    names = sorted(p.name for p in graph_dir.iterdir())
    assert names == ["0_parse_graph.txt", "1_lower_graph.txt", "2_eliminate_dead_code.txt", "3_fuse.txt",
                     "4_merge_inner_dims.txt", "5_split_reductions.txt", "6_name_kernels.txt", "7_generate_c.c",
                     "8_plan_arena.txt", "timings.json"]
    assert "kernel ember_k0" in (graph_dir / "3_fuse.txt").read_text()  # fusion's short name
    assert "kernel ember_red_softmax_mul_0" in (graph_dir / "6_name_kernels.txt").read_text()
    assert "void ember_red_softmax_mul_0(" in (graph_dir / "7_generate_c.c").read_text()
    timings = json.loads((graph_dir / "timings.json").read_text())
    assert timings["cache"] == "miss" and timings["times_s"]["compile"] > 0 and timings["kernels"] == 1


def test_failure_warning_names_the_debug_dir_with_traceback_and_source(tmp_path):
    debug = tmp_path / "debug"
    r = run_python("""
        import torch
        x = torch.randn(3, 3)
        torch.testing.assert_close(torch.compile(lambda t: t.exp() - 1, backend="ember")(x), x.exp() - 1)
    """, {"EMBER_CC": "/nonexistent/cc", "EMBER_FALLBACK_ON_ERROR": "1", "EMBER_DEBUG_DIR": str(debug)},
        cache_dir=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    graph_dir = debug / "inference_0"
    assert f"traceback and IR dumps in {graph_dir}" in r.stderr
    assert "Traceback" in (graph_dir / "error.txt").read_text()
    assert (graph_dir / "7_generate_c.c").exists()  # written before the compiler ran


# ---- ember.stats(): counters -------------------------------------------------------------

def test_stats_count_codegen_compiles_cache_hits_and_recompiles(tmp_path):
    torch._dynamo.reset()
    ember.reset_stats()
    f = ember.compile(lambda t: (t.sin() * 3).softmax(-1), dynamic=False, options={"cache_dir": str(tmp_path)})
    x = torch.randn(4, 10)
    torch.testing.assert_close(f(x), (x.sin() * 3).softmax(-1))
    s = ember.stats()
    assert (s["graphs_compiled"], s["codegen_runs"], s["c_compiler_runs"]) == (1, 1, 1)
    assert (s["dynamo_frames"], s["dynamo_compiles"], s["recompiles"]) == (1, 1, 0)
    assert s["graphs_by_kind"] == {"inference": 1} and s["eager_fallbacks"] == 0
    f(x + 1)  # the same shapes: nothing is generated or compiled
    assert ember.stats() == s
    y = torch.randn(6, 7)  # a new shape with dynamic=False: Dynamo recompiles the frame
    torch.testing.assert_close(f(y), (y.sin() * 3).softmax(-1))
    s = ember.stats()
    assert (s["graphs_compiled"], s["codegen_runs"], s["c_compiler_runs"]) == (2, 2, 2)
    assert (s["dynamo_frames"], s["dynamo_compiles"], s["recompiles"]) == (1, 2, 1)
    # The same code again after a Dynamo reset: generated again, compiled by no one (the
    # kernels are still loaded in this process, or else on disk).
    torch._dynamo.reset()
    f = ember.compile(lambda t: (t.sin() * 3).softmax(-1), dynamic=False, options={"cache_dir": str(tmp_path)})
    f(x)
    s = ember.stats()
    assert (s["codegen_runs"], s["c_compiler_runs"]) == (3, 2)
    assert s["memory_cache_hits"] + s["disk_cache_hits"] == 1
    ember.reset_stats()
    assert ember.stats()["codegen_runs"] == 0 and ember.stats()["graphs_compiled"] == 0


def test_stats_count_training_graphs_and_eager_fallbacks():
    torch._dynamo.reset()
    ember.reset_stats()
    w = torch.randn(5, requires_grad=True)
    torch.compile(lambda t: (t * w).tanh().sum(), backend="ember")(torch.randn(3, 5)).backward()
    s = ember.stats()
    assert s["graphs_by_kind"] == {"forward": 1, "backward": 1} and s["codegen_runs"] == 2
    from ember.frontend.fx_import import UnsupportedGraph

    real = compiler.build_runner

    def refuse_tanh(imported, *args, **kwargs):
        if "aten.tanh" in imported.text:
            raise UnsupportedGraph("refused for the test")
        return real(imported, *args, **kwargs)

    compiler.build_runner = refuse_tanh
    try:
        torch.compile(lambda t: t.tanh() * 2 + 1, backend="ember")(torch.randn(3, 3))
    finally:
        compiler.build_runner = real
    s = ember.stats()
    assert s["eager_fallbacks"] == 1 and s["eager_fallbacks_by_reason"] == {"unsupported": 1}


def test_explain_shows_counters():
    report = ember.explain(lambda t: t.exp().sum(-1), torch.randn(3, 4), graph_breaks=False,
                           calls=[(torch.randn(5, 4),)])
    d = report.to_dict()["stats"]
    # The second shape recompiles (automatic dynamic makes the size symbolic: that graph
    # runs eagerly until dynamic shapes are compiled, and is counted as a fallback).
    assert d["dynamo_compiles"] == 2 and d["recompiles"] == 1
    assert d["graphs_compiled"] == 2 and d["codegen_runs"] + d["eager_fallbacks"] == 2
    assert "counters: 2 graph(s) compiled" in str(report) and "1 recompilation(s)" in str(report)


def test_runtime_runs_prims_convert_element_type_as_one_aten_call():
    # The prim is a Python custom op; the runner calls ATen's _to_copy for it instead.
    from ember.runtime.runner import runtime_op

    fast = runtime_op("prims::convert_element_type.default")
    x = torch.randn(3, 4).t()
    for dtype in (torch.float16, torch.float64, torch.int32):
        expected = torch.ops.prims.convert_element_type.default(x, dtype)
        actual = fast(x, dtype)
        assert actual.dtype == dtype and actual.stride() == expected.stride()
        torch.testing.assert_close(actual, expected)
    with torch.profiler.profile() as prof:
        fast(x, torch.float16)
    assert "prims::convert_element_type" not in {e.name for e in prof.events()}

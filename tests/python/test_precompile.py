"""torch's precompile API with ember (python/ember/caches/precompile.py) and ember.save/ember.load
(python/ember/deploy.py): an artifact saved in one process loads in a new one with no
tracing and no compiler, and gives the same bits; a damaged, foreign or misplaced artifact
is refused with a clear error, never loaded."""
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn as nn

import ember
from ember import deploy
from ember.caches import graph_format, precompile

if hasattr(torch._dynamo.config, "enable_aot_compile"):
    torch._dynamo.config.enable_aot_compile = True  # off by default before torch 2.13

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "precompile_child.py")

pytestmark = pytest.mark.skipif(precompile.unavailable_reason() is not None,
                                reason=f"no precompile API: {precompile.unavailable_reason()}")


def run_child(tmp_path, *args, cache="cache"):
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / cache), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch"),
           "EMBER_FALLBACK_ON_ERROR": "0"}
    r = subprocess.run([sys.executable, CHILD, *args, str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("PRECOMPILE_STATS "))
    return json.loads(line.split(" ", 1)[1]), r


@pytest.mark.parametrize("scenario", ["inference", "training"])
def test_artifact_loads_in_a_new_process_on_a_fresh_cache_with_no_compiler(tmp_path, scenario):
    saved, _ = run_child(tmp_path, "save", scenario)
    assert saved["precompile"] == {"saved": 1} and saved["graphs_compiled"] >= 1, saved
    # Another cache directory: the kernels come from the artifact, installed and verified.
    loaded, _ = run_child(tmp_path, "load", scenario, cache="fresh")
    assert loaded["graphs_compiled"] == 0 and loaded["c_compiler_runs"] == 0, loaded
    assert loaded["dynamo_compiles"] == 0 and loaded["front_end"] == {}, loaded  # no tracing at all
    assert loaded["precompile"]["loaded"] == 1 and loaded["precompile"]["kernels_installed"] >= 1, loaded


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_artifact_loads_with_its_cubins_and_no_nvrtc(tmp_path):
    run_child(tmp_path, "save", "cuda")
    loaded, _ = run_child(tmp_path, "load", "cuda", cache="fresh")
    assert loaded["graphs_compiled"] == 0 and loaded["dynamo_compiles"] == 0, loaded
    # The cubins came from the artifact, through the process's memory (and, after the
    # runner was ready, into the kernel cache, on the loading thread).
    assert loaded["precompile"]["loaded"] == 1 and loaded["precompile"]["cubins_seeded"] >= 1, loaded
    assert loaded["cuda_compile_counts"]["nvrtc_runs"] == 0, loaded


def test_artifact_by_reference_uses_the_kernel_cache_or_compiles(tmp_path):
    run_child(tmp_path, "save", "inference", "--kernels", "reference")
    same_cache, _ = run_child(tmp_path, "load", "inference")
    assert same_cache["c_compiler_runs"] == 0 and "kernels_installed" not in same_cache["precompile"], same_cache
    fresh, r = run_child(tmp_path, "load", "inference", cache="fresh")
    assert fresh["c_compiler_runs"] == 1 and fresh["graphs_compiled"] == 0, fresh  # compiled, still right
    assert "kernels were not in the kernel cache" in r.stderr


# ---- refusals, in process -------------------------------------------------------------------

def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(path of an ember.save artifact, ember's part of it, model, input, expected output)."""
    torch._dynamo.reset()
    model, x = _model(), torch.randn(4, 8)
    path = str(tmp_path_factory.mktemp("saved") / "model.ember")
    with torch.no_grad():
        expected = ember.save(model, (x,), path)(x)  # the original compile's output
    # ember's own artifact inside torch's: the bytes serialize_compile_artifacts returns.
    graph = deploy._load(path)._artifacts.compiled_fn
    part = type(graph).serialize_compile_artifacts(graph)
    return path, part, model, x, expected


def test_ember_load_gives_the_same_bits(saved):
    path, _, model, x, expected = saved
    torch._dynamo.reset()
    with torch.no_grad():
        out = ember.load(path, model, strict=True)(x)
    assert torch.equal(out, expected)


def _re_signed(data: bytes, change, tag=None) -> bytes:
    """The artifact with its document changed and signed again, as a forger would: its own
    checks pass, so the loader's version and device checks must catch it."""
    doc, blobs = graph_format.decode(data, None)
    doc.pop("blobs")
    change(doc)
    return graph_format.encode(tag or graph_format.read_tag(data), doc, [bytes(b) for b in blobs])


def _refused(data: bytes, match: str):
    with pytest.raises(precompile.PrecompileRefused, match=match):
        precompile.load_artifact(data)


def test_damaged_artifacts_are_refused(saved):
    part = saved[1]
    _refused(part[: len(part) // 2], "SHA-256|truncated")
    _refused(part[:20], "truncated|too short")
    flipped = bytearray(part)
    flipped[-10] ^= 0x01
    _refused(bytes(flipped), "SHA-256")
    _refused(b"\x80\x04not an ember artifact", "magic|too short")


def test_foreign_artifacts_are_refused(saved):
    part = saved[1]
    _refused(_re_signed(part, lambda d: None, tag="ember-0.0.0-another-build"), "another ember build")
    _refused(_re_signed(part, lambda d: d.update(torch="1.0.0")), "made with torch 1.0.0")
    _refused(_re_signed(part, lambda d: d.update(compiler=d["compiler"].replace("-march=", "-march=other"))),
             "another C compiler or for another CPU")
    _refused(_re_signed(part, lambda d: d.update(what="something else")), "not a precompiled artifact")


def test_an_artifact_naming_kernels_outside_the_cache_is_refused(saved):
    """The kernel list is checked when the artifact is loaded, before the graph's build
    (on a thread) writes anything into the kernel cache."""
    part = saved[1]
    for bad in (["../../x" + "0" * 16, "so", 0], ["0" * 64, "py", 0], ["0" * 64, "so", 99], ["0" * 64, "so"]):
        _refused(_re_signed(part, lambda d: d.update(kernels=[bad])), "malformed kernel list")


@pytest.mark.parametrize("background", [True, False])
def test_a_loaded_graph_builds_on_a_thread_and_its_first_call_waits(saved, monkeypatch, background):
    """config.compile_in_background: the runner is built on a thread while torch rebuilds
    the guards, or inside the load; the same bits either way, and a build that fails
    raises at the first call (every check of the artifact ran before)."""
    from ember import compiler, config

    path, _, model, x, expected = saved
    monkeypatch.setattr(config, "compile_in_background", background)
    torch._dynamo.reset()
    loaded = deploy._load(path)
    assert (loaded._artifacts.compiled_fn._build is not None) == background
    with torch.no_grad():
        assert torch.equal(loaded(model, x), expected)
    if not background:
        return

    def failing(*args, **kwargs):
        raise RuntimeError("forced build failure")

    monkeypatch.setattr(compiler, "build_runner", failing)
    loaded = deploy._load(path)
    for _ in range(2):  # and again at the next call
        with torch.no_grad(), pytest.raises(RuntimeError, match="forced build failure"):
            loaded(model, x)


def test_the_loading_threads_last_work_runs_after_the_runner_is_ready():
    """A CUDA graph's cubins are written to the kernel cache after its runner is ready
    (`then`): the first call does not wait for it, and its failure is only logged."""
    import threading

    done = threading.Event()
    order = []

    def then():
        done.wait(30)
        order.append("then")
        raise OSError("disk full")

    build = precompile._RunnerBuild(lambda: order.append("build") or "compiled", lambda c: c + " runner", then=then)
    assert build.result() == "compiled runner" and order == ["build"]  # result() did not wait for `then`
    done.set()
    for _ in range(300):
        if order == ["build", "then"]:
            break
        threading.Event().wait(0.01)
    assert order == ["build", "then"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_wrong_device_artifact_is_refused(saved):
    _refused(_re_signed(saved[1], lambda d: d.update(device="cuda:0", arch="sm_90")), "no CUDA device")


def test_ember_load_refuses_then_compiles_at_run_time(saved, tmp_path):
    path, _, model, x, expected = saved
    data = open(path, "rb").read()
    bad = tmp_path / "bad.ember"
    bad.write_bytes(data[:-100])
    with pytest.raises(precompile.PrecompileRefused, match="SHA-256|truncated"):
        ember.load(str(bad), model, strict=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = ember.load(str(bad), model)
    assert any("compiling at run time" in str(w.message) for w in caught)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(fn(x), expected)
    other_torch = tmp_path / "other_torch.ember"
    other_torch.write_bytes(_re_signed(data, lambda d: d.update(torch="1.0.0")))
    with pytest.raises(precompile.PrecompileRefused, match="saved with torch 1.0.0"):
        ember.load(str(other_torch), model, strict=True)


def test_a_call_the_artifact_does_not_serve_names_the_failed_guard(saved):
    """ember.save keeps the guards without their user stacks (deploy.portable_guards): the
    artifact holds no frame of the saving process, and a call with another shape still
    fails with torch's guard error naming the input."""
    path, _, model, x, _ = saved
    data = open(path, "rb").read()
    assert b"FrameSummary" not in data  # torch's pickle of a stack holds traceback.FrameSummary objects
    torch._dynamo.reset()
    fn = ember.load(path, model, strict=True)
    with torch.no_grad(), pytest.raises(RuntimeError, match="GuardManager check failed") as failure:
        fn(torch.randn(5, 8))
    assert "args" in str(failure.value), str(failure.value)


@pytest.mark.parametrize("skip_hook_guards", [True, False])
def test_saved_guards_leave_out_the_empty_hook_guards_torch_does_not_check(tmp_path, monkeypatch, skip_hook_guards):
    """The guards that a module's hook dicts are empty are checked by torch only with
    skip_nnmodule_hook_guards off; with it on (torch's default) ember.save leaves them out
    of the artifact, which then loads and serves the model as before."""
    seen, kept = [], []
    original = deploy.portable_guards

    def spy(entries):
        keep = original(entries)
        seen.extend(e.guard_type for e in entries)
        kept.extend(e.guard_type for e, k in zip(entries, keep) if k)
        return keep

    monkeypatch.setattr(deploy, "portable_guards", spy)
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
    x = torch.randn(2, 8)
    path = str(tmp_path / "hooks.ember")
    with torch.no_grad(), torch._dynamo.config.patch(skip_nnmodule_hook_guards=skip_hook_guards):
        ember.save(model, (x,), path)
        expected = model(x)
    assert "EMPTY_NN_MODULE_HOOKS_DICT" in seen and "TENSOR_MATCH" in kept
    assert ("EMPTY_NN_MODULE_HOOKS_DICT" in kept) == (not skip_hook_guards)
    torch._dynamo.reset()
    with torch.no_grad():
        assert torch.equal(ember.load(path, model, strict=True)(x), expected)


def test_a_graph_that_runs_eagerly_cannot_be_saved(tmp_path, monkeypatch):
    from ember import compiler, config

    def failing(*args, **kwargs):
        raise RuntimeError("forced compile failure")

    monkeypatch.setattr(compiler, "build_runner", failing)  # the graph runs eagerly, with a warning
    monkeypatch.setattr(config, "fallback_on_error", True)
    torch._dynamo.reset()
    x = torch.randn(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(precompile.PrecompileRefused, match="cannot be precompiled: it runs eagerly"):
            torch.compile(lambda t: t * 2 + 1, fullgraph=True, backend="ember").aot_compile(((x,), {}))


def test_a_graph_with_no_kernel_of_its_own_is_saved_and_loads(tmp_path):
    torch._dynamo.reset()
    x = torch.randn(3, 3, dtype=torch.complex64)  # complex: every op runs in ATen, no library
    with torch.no_grad():
        compiled = torch.compile(lambda t: t * 2 + 1, fullgraph=True, backend="ember").aot_compile(((x,), {}))
        path = str(tmp_path / "complex.bin")
        compiled.save_compiled_function(path)
        loaded = torch.compiler.load_compiled_function(open(path, "rb"))
        assert torch.equal(loaded(x), compiled(x))


def test_graph_format_round_trips_every_value_kind():
    import sympy

    from ember.frontend.fx_import import Call, Ref, SymValue

    s = sympy.Symbol("s7", positive=True, integer=True)
    from torch.utils._sympy.functions import FloorDiv

    values = [None, True, 3, -2**70, "x", 1.5, -0.0, float("nan"), float("inf"), [1, (2, 3)], {"k": [4.0]},
              Ref(3, 1), SymValue(FloorDiv(2 * s + 1, 4)), SymValue(s / 3, is_float=True),
              Call("aten::add.Tensor", (Ref(1), 2.0), {"alpha": 1}), torch.float16, torch.device("cpu"),
              torch.strided, torch.channels_last, 1 + 2j]
    enc = graph_format._Encoder()
    doc = enc.value(values)
    expanded = torch.arange(3.0).expand(4, 3)  # stride 0: the exact layout must come back
    view = torch.arange(24, dtype=torch.int32).reshape(4, 6)[1:, ::2]
    tensors = [enc.tensor(expanded), enc.tensor(view), enc.tensor(torch.empty(0, 5))]
    data = graph_format.encode("t", {"v": doc, "tensors": tensors}, enc.blobs)
    back, blobs = graph_format.decode(data, "t")
    dec = graph_format._Decoder(blobs)
    got = dec.value(back["v"])
    assert repr(got) == repr(values)  # NaN != NaN; their reprs are equal
    assert str(got[6]) == "-0.0" and isinstance(got[9][1], tuple)
    for t, spec in zip([expanded, view, torch.empty(0, 5)], back["tensors"]):
        u = dec.tensor(spec)
        assert u.stride() == t.stride() and torch.equal(u, t)
    with pytest.raises(graph_format.FormatError, match="no encoding"):
        graph_format._Encoder().value(object())
    with pytest.raises(graph_format.FormatError, match="unknown size function"):
        dec.expr(["__import__", ["I", 1]])
    with pytest.raises(graph_format.FormatError, match="unknown value kind"):
        dec.value({"pickle": "x"})


def test_an_artifacts_compiler_probe_stands_for_running_the_compiler(tmp_path):
    """A loader whose compiler files and CPU have the fingerprint an artifact recorded takes
    the artifact's probe of the compiler instead of running it (a planted answer shows in
    the identity); a probe under another fingerprint changes nothing."""
    def run(code):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache")})
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout

    fingerprint, probe = json.loads(run("import json; from ember import _core; "
                                        "print(json.dumps(_core.c_compiler_probe(disk_cache=False)))"))
    assert "version: " in probe and fingerprint
    planted = probe.replace("version: ", "version: planted ", 1)
    out = run(f"""
from ember import _core
assert not _core.seed_c_compiler({fingerprint + "x"!r}, {planted!r})
assert not _core.seed_c_compiler({fingerprint!r}, "not a probe")
assert _core.seed_c_compiler({fingerprint!r}, {planted!r})
print(_core.c_compiler_identity(disk_cache=False))
""")
    assert "version: planted " in out


def test_seeded_cubins_serve_a_cuda_graph_with_no_nvrtc_run(tmp_path):
    """A CUDA artifact's loader puts its cubins in the process's memory cache
    (_core.seed_cubin): a graph with those parts takes them from there, with no NVRTC run
    and no disk cache (compiled with no GPU: device None)."""
    from ember.runtime import cuda

    if not cuda.nvrtc_info()["available"]:
        pytest.skip("no NVRTC")
    code = """
import json, sys
from ember import _core
from ember.config import Config
from ember.runtime import cuda
text = "graph {\\n  %0 = input(0) : f32[64]{1}\\n  %1 = aten.exp.default(%0) : f32[64]{1}\\n  return (%1)\\n}\\n"
cfg = Config(disk_cache=False)
if sys.argv[1] == "compile":
    cg = cuda.compile_cuda(text, None, cfg, arch="sm_90")
    print(json.dumps([[k, c.hex()] for (k, _), c in zip(cg.cache_entries, cg.cubins)]))
else:
    for key, cubin in json.loads(open(sys.argv[2]).read()):
        _core.seed_cubin(key, bytes.fromhex(cubin))
    cg = cuda.compile_cuda(text, None, cfg, arch="sm_90")
    print(json.dumps([cg.cache_status, _core.cuda_compile_counts()["nvrtc_runs"]]))
"""

    def run(*args):
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache")})
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout.strip().splitlines()[-1]

    parts = tmp_path / "parts.json"
    parts.write_text(run("compile"))
    assert json.loads(parts.read_text()), "a graph with a kernel has a cubin"
    assert json.loads(run("seed", str(parts))) == ["memory", 0]

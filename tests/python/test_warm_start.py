"""Warm starts: through torch's AOTAutogradCache (python/ember/caches/aot_cache.py) for graphs
AOTAutograd traces, through ember's graph cache (python/ember/caches/graph_cache.py) for the
inference graphs ember's front end traces.

Each end-to-end test runs tests/python/warm_start_child.py in fresh processes sharing a
cache: the first compiles (cold), the next finds its entries (warm) and must rebuild every
graph without tracing or the C compiler, with outputs and gradients equal to eager's
(the child checks them). Entries that are truncated, tampered with, from another ember
build or option set, or whose kernel library is gone must never crash a warm process nor
change its results: they are compiled again. Those tests run once per cache: "aot" with
ember's front end off (trace_inference=False), "ember" with it on.
"""
import collections
import copy
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest
import torch

import ember
from ember.caches import aot_cache, graph_format

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_start_child.py")

pytestmark = pytest.mark.skipif(aot_cache.unavailable_reason() is not None,
                                reason=f"AOTAutogradCache unusable: {aot_cache.unavailable_reason()}")


def run_child(caches, scenario, *flags, options=None, env=None):
    env = {**os.environ, "EMBER_CACHE_DIR": str(caches / "ember"), "TORCHINDUCTOR_CACHE_DIR": str(caches / "torch"),
           "EMBER_FALLBACK_ON_ERROR": "0", **(env or {})}
    cmd = [sys.executable, CHILD, scenario, *flags] + (["--options", json.dumps(options)] if options else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("WARM_START_STATS "))
    return json.loads(line.split(" ", 1)[1]), r


def entry_files(caches, front="aot"):
    """The cache entries of one front end's graphs: torch's AOTAutogradCache files, or the
    artifacts of ember's graph cache."""
    root = caches / "torch" / "aotautograd" if front == "aot" else caches / "ember"
    pattern = "*" if front == "aot" else "*.graph"
    return sorted(p for p in root.rglob(pattern) if p.is_file()) if root.exists() else []


def count(stats, outcome):
    """Lookups (hit, miss) or graphs written (saved_graphs), in both caches."""
    return stats["aot_cache"].get(outcome, 0) + stats["graph_cache"].get(outcome, 0)


@pytest.mark.parametrize("scenario", ["inference", "training", "dynamic"])
def test_warm_process_loads_every_graph_and_matches_eager(tmp_path, scenario):
    cold, _ = run_child(tmp_path, scenario)
    assert cold["graphs_compiled"] > 0 and cold["graphs_loaded"] == 0, cold
    uncached = cold["front_end"].get("ember", 0) if scenario == "dynamic" else 0  # symbolic, ember's
    assert count(cold, "saved_graphs") == cold["graphs_compiled"] - uncached, cold
    if scenario == "inference":  # both front ends: a graph with an input mutation is AOTAutograd's
        assert cold["front_end"].get("ember") and cold["front_end"].get("AOTAutograd"), cold
    warm, _ = run_child(tmp_path, scenario)
    # Every graph comes from a cache: no tracing, no import, no C compiler. Except that
    # ember traces a symbolic inference graph again (graph_cache.py does not keep those);
    # its kernels still come from the kernel cache.
    retraced = warm["front_end"].get("ember", 0)
    assert (retraced > 0) == (scenario == "dynamic"), warm
    assert warm["graphs_compiled"] == retraced, warm
    assert warm["graphs_loaded"] + retraced == cold["graphs_compiled"], warm
    assert count(warm, "hit") == count(cold, "miss") and count(warm, "miss") == 0, warm
    assert warm["c_compiler_runs"] == 0 and warm["disk_cache_hits"] == cold["graphs_compiled"], warm


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_warm_process_loads_every_graph(tmp_path):
    cold, _ = run_child(tmp_path, "cuda")
    assert cold["graphs_compiled"] == 5 and count(cold, "saved_graphs") == 5, cold
    warm, _ = run_child(tmp_path, "cuda")
    # No tracing, no import; the cubins come from ember's disk cache (counted by
    # _core.cuda_compile_counts, not in stats' disk_cache_hits, which are the CPU's).
    assert warm["graphs_compiled"] == 0 and warm["graphs_loaded"] == 5, warm
    assert count(warm, "hit") == count(cold, "miss") and count(warm, "miss") == 0, warm


def test_eager_graphs_are_not_cached_and_runtime_fallback_works_after_a_load(tmp_path):
    cold, _ = run_child(tmp_path, "fallbacks")
    warm, _ = run_child(tmp_path, "fallbacks")
    # The refused graph runs eagerly and is compiled (attempted) again; embedding_bag's
    # graph is loaded, and its eager fallback (EagerReplay, no FX graph) gives eager's result.
    assert count(cold, "saved_graphs") == 1, cold
    assert warm["graphs_loaded"] == 1 and warm["graphs_compiled"] == 1, warm
    assert warm["eager_fallbacks_by_reason"] == {"unsupported": 1, "runtime": 1}, warm


FRONTS = {"aot": {"trace_inference": False}, "ember": {}}


@pytest.fixture(scope="module", params=sorted(FRONTS))
def filled(tmp_path_factory, request):
    """(caches that a cold process filled with one graph, the front end that traced it)."""
    front = request.param
    caches = tmp_path_factory.mktemp(f"filled_{front}")
    stats, _ = run_child(caches, "small", options=FRONTS[front])
    assert stats["graphs_compiled"] == 1 and count(stats, "saved_graphs") == 1, stats
    assert len(entry_files(caches, front)) == 1 and len(entry_files(caches, "ember" if front == "aot" else "aot")) == 0
    return caches, front


class Caches(collections.namedtuple("Caches", "path front")):
    """Cache directories, and the front end whose entries they hold."""

    def __truediv__(self, name):
        return self.path / name


@pytest.fixture
def caches(filled, tmp_path):
    """A copy of the filled caches; `small` runs the small scenario with their front end."""
    source, front = filled
    copy = tmp_path / "caches"
    shutil.copytree(source, copy)
    return Caches(copy, front)


def small(caches, *flags, options=None, env=None):
    return run_child(caches.path, "small", *flags, options={**FRONTS[caches.front], **(options or {})}, env=env)


def assert_compiled_again(stats):
    assert stats["graphs_loaded"] == 0 and stats["graphs_compiled"] == 1, stats


def test_filled_cache_is_hit(caches):
    stats, _ = small(caches)
    assert stats["graphs_loaded"] == 1 and stats["graphs_compiled"] == 0, stats


def test_truncated_entry_is_compiled_again(caches):
    for path in entry_files(caches.path, caches.front):
        path.write_bytes(path.read_bytes()[:200])
    assert_compiled_again(small(caches)[0])


def _rewrite_states(caches, change):
    """Applies change(bytes) -> bytes to every ember graph state in the cache's entries. A
    graph cache entry is rewritten with its index, as only its owner could: the disk
    cache's own hash check passes, and the state's own checks must catch the change."""
    for path in entry_files(caches.path, caches.front):
        if caches.front == "aot":
            entry = pickle.loads(path.read_bytes())
            for part in (entry.compiled_fw, entry.compiled_bw):
                if part is not None:
                    part.result._state = change(part.result._state)
            path.write_bytes(pickle.dumps(entry))
            continue
        data = change(path.read_bytes())
        digest = hashlib.sha256(data).hexdigest()
        key = path.name.split("-")[0]
        path.unlink()
        (path.parent / f"{key}-{digest}.graph").write_bytes(data)
        (path.parent / f"{key}.graph.idx").write_text(f"ember-cache-v1\n{digest}\n{len(data)}\n")


def test_tampered_payload_is_compiled_again(caches):
    def flip(state):
        at = state.index(b"softmax")
        return state[:at] + b"softmin" + state[at + 7:]  # still a well-formed document, another graph

    _rewrite_states(caches, flip)
    assert_compiled_again(small(caches)[0])


def test_entry_of_another_build_under_the_same_key_is_compiled_again(caches):
    def retag(state):
        doc, blobs = graph_format.decode(state, None)  # intact, re-signed under another tag
        doc.pop("blobs")
        return graph_format.encode("ember-of-another-build", doc, [bytes(b) for b in blobs])

    _rewrite_states(caches, retag)
    assert_compiled_again(small(caches)[0])


@pytest.mark.parametrize("cut", [0, 7, 40, -1])
def test_truncated_state_is_compiled_again(caches, cut):
    _rewrite_states(caches, lambda state: state[:cut])
    assert_compiled_again(small(caches)[0])


def test_pickle_planted_as_a_graph_cache_entry_is_never_unpickled(caches, tmp_path):
    # A pickle whose loading would write a marker file, where ember's state should be:
    # ember's format reads no pickle, so the marker never appears.
    marker = tmp_path / "unpickled"
    planted = pickle.dumps(_Planted(str(marker)))
    _rewrite_states(caches, lambda state: planted)
    assert_compiled_again(small(caches)[0])
    assert not marker.exists(), "ember unpickled a planted cache entry"


class _Planted:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_another_build_or_options_never_find_the_entry(caches):
    other, _ = small(caches, "--other-build")
    assert_compiled_again(other)
    assert count(other, "miss") == 1, other
    unfused, _ = small(caches, options={"fuse": False})
    assert_compiled_again(unfused)


def test_missing_kernel_library_is_compiled_by_the_c_compiler(caches):
    for path in (caches / "ember").rglob("*"):
        if path.is_file() and (path.suffix == ".so" or path.name.endswith(".so.idx")):
            path.unlink()
    stats, _ = small(caches)
    assert stats["graphs_loaded"] == 1 and stats["graphs_compiled"] == 0, stats
    assert stats["c_compiler_runs"] == 1, stats


@pytest.mark.parametrize("front", sorted(FRONTS))
def test_failing_c_compiler_runs_eagerly_cold_and_warm_then_a_working_one_loads(tmp_path, front):
    # The entry is written while the C compiler still runs (aot_cache.prepare_for_serialization,
    # graph_cache.save). Here that compile fails: the first call runs the graph eagerly. The
    # next process loads the entry, fails to build it the same way, and compiles the graph
    # afresh (eagerly again); with a working compiler the entry loads and its kernels build.
    failing = {"EMBER_CC": "/bin/false", "EMBER_FALLBACK_ON_ERROR": "1"}
    cold, _ = run_child(tmp_path, "small", options=FRONTS[front], env=failing)
    assert cold["eager_fallbacks"] == 1 and cold["graphs_compiled"] == 1, cold
    warm, _ = run_child(tmp_path, "small", options=FRONTS[front], env=failing)
    assert warm["eager_fallbacks"] == 1 and warm["graphs_loaded"] == 0, warm
    fixed, _ = run_child(tmp_path, "small", options=FRONTS[front])
    assert fixed["graphs_loaded"] == 1 and fixed["eager_fallbacks"] == 0 and fixed["c_compiler_runs"] == 1, fixed


def test_aot_cache_off_writes_nothing(tmp_path):
    stats, _ = run_child(tmp_path, "small", options={"aot_cache": False})
    assert stats["aot_cache"] == {} and stats["graph_cache"] == {} and stats["graphs_compiled"] == 1, stats
    assert entry_files(tmp_path, "aot") == [] and entry_files(tmp_path, "ember") == []


def test_explain_in_a_warm_process_reports_loaded_graphs(caches):
    _, r = small(caches, "--explain")
    graphs = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("EXPLAIN "))[8:])
    assert len(graphs) == 1 and graphs[0]["loaded"] and graphs[0]["kernels"], graphs
    where = "AOTAutograd cache" if caches.front == "aot" else "graph cache"
    assert graphs[0]["front_end"] == where and f"loaded from the {where}" in r.stdout


# ---- in process -----------------------------------------------------------------------------

def test_graph_state_checks_format_tag_and_digest():
    data = graph_format.encode("tag-a", {"kind": "inference"}, [b"blob"])
    doc, blobs = graph_format.decode(data, "tag-a")
    assert doc["kind"] == "inference" and [bytes(b) for b in blobs] == [b"blob"]
    with pytest.raises(graph_format.FormatError, match="another ember build"):
        graph_format.decode(data, "tag-b")
    with pytest.raises(graph_format.FormatError, match="SHA-256"):
        graph_format.decode(data.replace(b"inference", b"forwardxx"), "tag-a")
    at = len(graph_format.MAGIC)
    with pytest.raises(graph_format.FormatError, match="format"):
        graph_format.decode(data[:at] + b"\x01\x00\x00\x00" + data[at + 4:], "tag-a")
    with pytest.raises(graph_format.FormatError, match="magic"):
        graph_format.decode(pickle.dumps({"kind": "inference"}), "tag-a")


def test_output_code_pickles_its_state_only():
    from torch._dynamo.backends.common import aot_autograd

    from ember.compiler import compile_graph
    from ember.frontend.decompositions import decomposition_table

    codes = []

    def inference(gm, example_inputs):
        codes.append(aot_cache.EmberOutputCode.of(compile_graph(gm, example_inputs, ember.config, "inference"),
                                                  "inference", "tag"))
        return codes[-1]

    torch._dynamo.reset()
    x = torch.randn(32, 64)
    backend = aot_autograd(fw_compiler=inference, decompositions=decomposition_table())
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(lambda t: t.exp().sum(-1), backend=backend)(x), x.exp().sum(-1))
    blob = pickle.dumps(codes[0])
    assert b"ELF" not in blob and len(blob) < 20000  # the graph's text and metadata, no library
    loaded = pickle.loads(blob)
    assert loaded._runner is None and loaded._state == codes[0]._state
    assert graph_format.decode_state(loaded._state, "tag")["imported"].text == codes[0]._runner.imported.text
    # A graph that runs eagerly has no state: saving it is bypassed, quietly.
    from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

    with pytest.raises(BypassAOTAutogradCache, match="runs eagerly"):
        aot_cache.EmberOutputCode.of(lambda args: args, "inference", "tag").prepare_for_serialization()
    # torch copies the object before preparing it: the reason survives the copy.
    with pytest.raises(BypassAOTAutogradCache, match="runs eagerly"):
        copy.copy(aot_cache.EmberOutputCode.of(lambda args: args, "inference", "tag")).prepare_for_serialization()


def test_op_names_resolve_to_the_same_ops():
    # A loaded graph calls its ATen ops by name (fx_import.Call.op): every kind of op
    # name ember imports must resolve to the same OpOverload in a new process.
    from ember.frontend.fx_import import op_name, resolve_op

    ops = [torch.ops.aten.add.Tensor, torch.ops.aten.sum.dim_IntList, torch.ops.aten.mm.default,
           torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
           torch.ops.prims.convert_element_type.default, torch.ops.ember.sdpa_masked.default]
    for op in ops:
        assert resolve_op(op_name(op)) is op, op

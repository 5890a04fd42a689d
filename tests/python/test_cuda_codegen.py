"""The generated CUDA of test graphs compiles with NVRTC for sm_90 on any machine (no GPU
needed), so a CUDA codegen error fails CI. Graphs are captured on CPU tensors through
ember's own Dynamo/AOTAutograd setup; the graph text carries no device."""
import re

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._functorch.aot_autograd import aot_module_simplified

import ember
from ember import _core
from ember.runtime import cuda
from ember.frontend.decompositions import decomposition_table
from ember.config import config
from ember.frontend.fx_import import import_graph

from cuda_cases import CASES, DYNAMIC, REFUSED, TRAINING, _attention_args, _masked_attention

pytestmark = pytest.mark.skipif(not cuda.nvrtc_info()["available"], reason="NVRTC is not installed")


def compile_all(fn, args, arch="sm_90", train=False, dynamic=None):
    """CudaCompiledGraphs (or the refusal messages) of every graph fn(*args) compiles to;
    with `train`, of the forward and backward graphs of fn(*args).backward()."""
    results = []

    def compiler(gm, example_inputs):
        imported = import_graph(gm)
        try:
            results.append(cuda.compile_cuda(imported.text, None, config, arch=arch))
        except _core.CudaUnsupported as e:
            results.append(str(e))
        return make_boxed_func(gm) if train else gm

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=compiler, bw_compiler=compiler,
                                     decompositions=decomposition_table())

    torch._dynamo.reset()
    if train:
        torch.compile(fn, backend=backend, dynamic=dynamic)(*args).backward()
        return results
    with torch.no_grad():
        torch.compile(fn, backend=backend, dynamic=dynamic)(*args)
    return results


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_symbolic_cuda_compiles(name, tmp_path, monkeypatch):
    """dynamic=True: graphs over symbolic sizes print kernels that read their sizes from
    the `sym` parameter, with grids computed per launch (no hoisting or column splits,
    whose grids are planned from sizes), and compile."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, arg_sets = DYNAMIC[name]("cpu")
    results = compile_all(fn, arg_sets[0], dynamic=True)
    assert results and not [r for r in results if isinstance(r, str)], results
    symbolic = [cg for cg in results if cg.num_symbols > 0]
    assert symbolic, "no graph had symbolic sizes"
    for cg in symbolic:
        assert cg.kernels and "const ember_syms sym)" in cg.source
        for k in cg.kernels:
            assert k["grid_per_block"] > 0 and k["hoisted_values"] == 0 and k["partial_grid"] == 0, k
    if name == "gpt2_2layer_bf16":  # rows of a static width (768) over a symbolic batch x sequence
        assert any(k["row_lanes"] == 8 for cg in symbolic for k in cg.kernels)
    if name.startswith("transpose_"):  # the tiled shape over symbolic sizes, as static sizes take
        assert any(k["shape"] == "transpose" for cg in symbolic for k in cg.kernels), [cg.kernels for cg in symbolic]
        assert not [p for cg in symbolic for p in cg.generic_paths if "transpose" in p["what"]]


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_cuda_compiles(name, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = CASES[name]("cpu")
    results = compile_all(fn, args)
    assert results, "no graph was captured"
    refusals = [r for r in results if isinstance(r, str)]
    if name in REFUSED:
        assert any(REFUSED[name] in r for r in refusals), refusals
        return
    assert not refusals, refusals
    for cg in results:
        if cg.kernels:
            # "memory": the same source was compiled earlier in this process (cuda_cases.py
            # is shared with test_cuda_runtime.py); the cache dir is fresh, so never "disk".
            assert cg.cubins and all(c[:4] == b"\x7fELF" for c in cg.cubins) and cg.cache_status in ("miss", "memory")
            for k in cg.kernels:
                assert k["grid"] >= 0 and 32 <= k["block"] <= 1024
    if name.startswith("transpose_"):  # the tiled shape, not the elementwise one (schedule/cuda/transpose_plan.h)
        assert any(k["shape"] == "transpose" for cg in results for k in cg.kernels), [cg.kernels for cg in results]


@pytest.mark.parametrize("name, vector", [("column_sums_64_bf16", True), ("column_sums_96_f32", True),
                                          ("column_sums_1000_bf16", True), ("column_sums_3_bf16", False)])
def test_column_split_partials_read_vector_words(name, vector, tmp_path, monkeypatch):
    """The column split's partial launch reads a thread's consecutive columns in one 16-byte
    load a row (8 bf16, 4 f32) where the width is a multiple of its lanes, with scalar loads
    of the same columns when the input is not 16-byte aligned at run time; 3 columns read
    no vector words (schedule/cuda/column_split.h)."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = CASES[name]("cpu")
    results = compile_all(fn, args)
    assert results and not [r for r in results if isinstance(r, str)], results
    partials = [re.search(r"_partial\(.*?\n}\n", cg.source, re.S).group(0)
                for cg in results for k in cg.kernels if k["partial_grid"] > 0]
    assert partials or not vector, [cg.kernels for cg in results]  # 3 columns: no split at all here
    for src in partials:
        assert ("= *(const uint4*)(b" in src) == vector, src
        assert ("const bool aligned = " in src) == vector, src


@pytest.mark.parametrize("name", sorted(TRAINING))
def test_training_graphs_compile(name, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = TRAINING[name]("cpu")
    results = compile_all(fn, args, train=True)
    assert len(results) == 2, results  # forward and backward
    for cg in results:
        assert not isinstance(cg, str), cg
        assert cg.cubins and cg.cache_status in ("miss", "memory")


def test_convolution_bias_joins_the_kernel_reading_it(tmp_path, monkeypatch):
    """cuDNN would add a convolution's bias in an elementwise kernel of its own: ATen gets
    None for it, and the LayerNorm's kernel adds it as it reads the convolution."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = CASES["conv_bias_layer_norm_bf16"]("cpu")
    (cg,) = compile_all(fn, args)
    (conv,) = [e for e in cg.externs if e["op"] == "aten.convolution.default"]
    assert len(conv["none_args"]) == 1 and len(conv["tensor_args"]) == 2, conv
    assert len(cg.kernels) <= 3, cg.kernels  # the weight's layout copy, the LayerNorm (and its output's copy)


def _row_kernels(name, train=False):
    fn, args = (TRAINING if train else CASES)[name]("cpu")
    return [(k, cg.source) for cg in compile_all(fn, args, train=train) for k in cg.kernels if k["shape"] != "elementwise"]


def test_row_tiles(tmp_path, monkeypatch):
    """The row tile's decisions on the rows it is for (kRowTileValues, schedule/cuda/row_tile.h)."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    # BERT's LayerNorm(x + r): 8 bf16 a chunk, 3 chunks a thread; x and r read once.
    [(k, _)] = _row_kernels("layer_norm_768_bf16")
    assert (k["shape"], k["row_lanes"], k["row_slots"], k["row_cached"]) == ("row_warp", 8, 3, [0, 1])
    # The backward's row kernel: x and the gradient in registers, the normalized x kept
    # between the stages (so no barrier in the tile).
    k, source = _row_kernels("layer_norm_backward_bf16")[0]
    assert (k["row_lanes"], k["row_slots"], len(k["row_cached"])) == (4, 6, 2)
    tile = source[:source.index("} else {")]
    assert "float kept" in tile and "__syncwarp" not in tile
    # Four rows of 65,536: split across blocks (lower/split_long_reductions.h), partials of
    # 4,096 a block kept in registers, a warp a row combining them. (Rows too long for
    # registers that fill the GPU: tests/cpp cuda_huge_rows_stream_chunks_from_memory.)
    kernels = [k for k, _ in _row_kernels("softmax_65536")]
    assert [(k["shape"], k["grid"], k["row_lanes"], k["row_slots"]) for k in kernels] == \
        [("row_block", 64, 4, 4), ("row_warp", 1, 4, 1)] * 2
    # Not a multiple of a chunk and too long: no registers.
    [(k, _)] = _row_kernels("softmax_50257_bf16")
    assert k["row_lanes"] == 0
    # A training step's backward graph: its LayerNorm rows take the tile.
    backward = [k for k, _ in _row_kernels("layer_norm_train_bf16", train=True) if k["row_lanes"]]
    assert any(k["row_slots"] > 0 and k["row_cached"] for k in backward), backward


def test_values_only_their_kernel_reads_stay_in_registers(tmp_path, monkeypatch):
    """ConvNeXt's stem LayerNorm: the convolution's output plus bias, in f32, is read only
    by the LayerNorm kernel's later stages, from the row tile's registers; it is never
    stored (schedule_cuda: keep_in_registers), so the kernel moves bf16 only, 8 a chunk.
    A misaligned bias takes the same tile element by element, the value still in registers."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    for name, width in (("stem_layer_norm_96_bf16", 96), ("stem_layer_norm_192_misaligned_bf16", 192)):
        fn, args = CASES[name]("cpu")
        (cg,) = compile_all(fn, args)
        [value] = [b for b in cg.buffers if b["kind"] == "computed" and b["sizes"] == [2, 14, 14, width]]
        assert value["dtype"] == "f32" and not value["in_memory"], value
        [k] = [k for k in cg.kernels if k["shape"] == "row_warp"]
        assert value["id"] not in k["args"] and k["row_unstored"] == [value["id"]], k
        assert k["row_lanes"] == 8 and k["row_slots"] == 3, k
        fallback = cg.source[cg.source.index("} else {"):]
        assert f"float kept{value['id']}[" in fallback and not re.search(rf"\bb{value['id']}\b", cg.source)


def _elementwise_kernels(name):
    fn, args = CASES[name]("cpu")
    return [(k, cg.source) for cg in compile_all(fn, args) for k in cg.kernels if k["shape"] == "elementwise"]


def test_hoisting(tmp_path, monkeypatch):
    """Per-channel values out of the grid loop in channels-last BatchNorm kernels
    (kHoistWords, schedule/cuda/vector_plan.h): each BatchNorm's scale, once per thread and lane."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    for name, lanes, grid in (("batch_norm_pair_64_bf16", 8, 1024), ("batch_norm_pair_256_bf16", 8, 1024),
                              ("batch_norm_pair_200_bf16", 8, 1025), ("batch_norm_pair_256_f32", 4, 1024),
                              ("batch_norm_pair_96_f32", 4, 1026)):
        [(k, source)] = [(k, s) for k, s in _elementwise_kernels(name) if k["hoisted_values"]]
        assert (k["hoisted_values"], k["grid"]) == (2, grid), (name, k)
        loop = source[source.index("for (int g = "):]
        loop = loop[:loop.index("return;")]
        assert f"float h1[{lanes}];" in source and "sqrtf(" not in loop and " * h0[u];" in loop, name


def test_stem_pool_recomputes_batch_norm():
    """Convolution, BatchNorm, ReLU, max-pool: after the convolution's operands are made
    channels-last (image and weight), one ember kernel, the pool reading the convolution's
    output through the BatchNorm (no kernel stores the normalized activation for the pool
    to read back). The BatchNorm + ReLU is monotone in the convolution's output, so the
    kernel takes each window's largest and smallest raw values and normalizes only those
    (ir/monotone.h): a min over the window beside the max. Window positions in the
    padding are clamped into the image (a repeated value leaves a max as it is), so no
    lane selects -inf."""
    fn, args = CASES["stem_pool_bf16"]("cpu")
    [cg] = compile_all(fn, args)
    assert len(cg.kernels) == 3, cg.kernels
    pool = cg.kernels[-1]
    assert pool["shape"] == "elementwise", pool
    body = cg.source[cg.source.index(f"void __launch_bounds__({pool['block']}) {pool['function']}("):]
    body = body[:body.index("\n}\n")]
    assert body.count("sqrtf(") >= 1 and body.count("ember_max") >= 9, body
    assert body.count("ember_min") >= 8 and "INFINITY" not in body, body


def test_cubin_cache_hits(tmp_path, monkeypatch):
    """A second compile of the same source is a hit: in memory, then on disk in a new
    process's position (same key: source, ember version, NVRTC identity, arch)."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = CASES["softmax_100"]("cpu")
    first = compile_all(fn, args)[0]
    second = compile_all(fn, args)[0]
    assert first.cache_key == second.cache_key and second.cache_status == "memory"
    other_arch = compile_all(fn, args, arch="sm_80")[0]
    assert other_arch.cache_key != first.cache_key and other_arch.cache_status == "miss"


def test_nvrtc_error_is_reported():
    """NVRTC's log reaches the exception (a codegen bug must be readable)."""
    with pytest.raises(RuntimeError, match="NVRTC failed"):
        _core.compile_cuda("graph {\n  %0 = input(0) : f32[4]{1}\n  %1 = aten.exp.default(%0) : f32[4]{1}\n"
                           "  return (%1)\n}\n",
                           arch="sm_1", disk_cache=False, nvrtc_dirs=list(cuda.nvrtc_dirs()))


def test_cpu_backend_unchanged_for_cpu_inputs():
    """CPU tensors still take the CPU path (graph_device is None)."""
    assert cuda.graph_device([torch.randn(2)]) is None
    assert ember is not None



def test_masked_attention_stays_fused():
    """A masked SDPA call (BERT's, when traced) reaches the CUDA graph as one extern
    (ember::sdpa_masked), not AOTAutograd's math path (bmm, softmax, bmm), and the
    rewritten graph computes what eager does."""
    from ember.frontend.attention import fuse_masked_attention

    q, k, v, keep = _attention_args("cpu")
    graphs, rewritten = [], []

    def compiler(gm, example_inputs):
        imported = import_graph(gm)
        graphs.append((imported, cuda.compile_cuda(imported.text, None, config, arch="sm_90")))
        return gm

    def backend(gm, example_inputs):
        rewritten.append(fuse_masked_attention(gm))
        return aot_module_simplified(gm, example_inputs, fw_compiler=compiler, decompositions=decomposition_table())

    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(_masked_attention, backend=backend)(q, k, v, keep)
    assert rewritten == [1]
    (imported, cg), = graphs
    assert "ember.sdpa_masked.default" in imported.op_counts and "aten.bmm.default" not in imported.op_counts
    assert [e["op"] for e in cg.externs] == ["ember.sdpa_masked.default"] and cg.kernels
    assert torch.equal(got, _masked_attention(q, k, v, keep))


def test_misaligned_matmuls_are_padded(tmp_path, monkeypatch):
    """pad_matmuls runs on CUDA graphs (and says so in each extern's reason); the
    shape_padding option (ember's pad_matmuls) turns it off."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = CASES["padded_matmuls_bf16"]("cpu")
    (cg,) = compile_all(fn, args)
    # Every padded operand is a graph input here: the runtime pads it once (padded_args).
    reasons = sorted(e["reason"].split("; ", 1)[1].split("; per-call copies")[0] for e in cg.externs)
    once = "(a graph input: padded once)"
    assert reasons == [
        f"padded for 16-byte leading dims (M 129->136, N 513->520): copies of a {once}, b {once}; result sliced by a copy",
        f"padded for 16-byte leading dims (N 2053->2056): copies of b {once}, bias {once}; result sliced by a copy",
        f"padded for 16-byte leading dims (N 2053->2056): copies of b {once}; result sliced by a copy",
    ], reasons
    assert all(e["padded_args"] for e in cg.externs)
    monkeypatch.setattr(config, "pad_matmuls", False)
    (plain,) = compile_all(fn, args)
    assert all(e["reason"] == "matmul: ATen (BLAS)" for e in plain.externs)
    assert config.update({"shape_padding": False}).pad_matmuls is False


_GPT2_LOGITS = """graph {
  %0 = input(0) : bf16[8,512,768]{393216,768,1}
  %1 = input(1) : bf16[50257,768]{768,1}
  %2 = aten.view.default(%0, [4096, 768]) : bf16[4096,768]{768,1}
  %3 = aten.permute.default(%1, [1, 0]) : bf16[768,50257]{1,768}
  %4 = aten.mm.default(%2, %3) : bf16[4096,50257]{50257,1}
  %5 = aten.view.default(%4, [8, 512, 50257]) : bf16[8,512,50257]{25731584,50257,1}
  return (%5)
}
"""


def test_gpt2_logits_are_a_view_of_the_padded_lm_head(tmp_path, monkeypatch):
    """GPT-2's LM head at 8x512 on CUDA (pad_matmuls on): with the logits returned to a
    caller that takes any strides, they are a view of the padded ATen result and no kernel
    copies them (wte^T is padded once by the runtime: no kernel at all); a caller that
    needs the declared strides gets the copy kernel (412 MB read and written)."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    cg = cuda.compile_cuda(_GPT2_LOGITS.replace("return (%5)", "return (%5) any_strides(0)"), None, config,
                           arch="sm_90")
    (e,) = cg.externs
    assert "result returned as a strided view" in e["reason"], e["reason"]
    assert [k["name"] for k in cg.kernels] == []
    wide = e["output_buffers"][0]
    assert cg.outputs == [(wide, "bf16", [8, 512, 50257], [512 * 50264, 50264, 1], 0)], cg.outputs
    declared = cuda.compile_cuda(_GPT2_LOGITS, None, config, arch="sm_90")
    assert "result sliced by a copy" in declared.externs[0]["reason"]
    assert [k["name"] for k in declared.kernels] == ["ember_poi_copy_0"], declared.kernels


def test_repeated_layers_compile_each_kernel_once():
    # Three identical blocks: the second and third blocks' kernels run the first block's
    # functions (KernelInfo::function); NVRTC compiles the distinct ones only.
    torch.manual_seed(0)
    blocks = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(),
                                                       torch.nn.LayerNorm(256)) for _ in range(3)]).bfloat16()
    (cg,) = compile_all(blocks, [torch.randn(64, 256, dtype=torch.bfloat16)])
    assert not isinstance(cg, str), cg
    own = [k for k in cg.kernels if k["function"] == k["name"]]
    shared = [k for k in cg.kernels if k["function"] != k["name"]]
    assert len(shared) >= 2 * len(own) - 1, [(k["name"], k["function"]) for k in cg.kernels]
    names = {k["name"] for k in cg.kernels}
    assert all(k["function"] in names for k in shared)
    assert all(f'{k["name"]}(' not in cg.source for k in shared)  # no definition of its own


def test_scans_along_a_middle_dim_run_as_columns(tmp_path, monkeypatch):
    """scan_block's scans (cumsum, cumprod, logcumsumexp over time of [batch, time,
    channels]) are one ScanColumns kernel (schedule/cuda/scan_columns.h): consecutive
    threads on consecutive channels, the time split into segments whose totals carry
    through shared memory; logcumsumexp is ember's own scan, not an ATen call, and the
    epilogue joins the scans' kernel."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = CASES["middle_scans_bf16"]("cpu")
    (cg,) = compile_all(fn, args)
    assert not cg.externs, cg.externs
    [k] = cg.kernels
    assert k["shape"] == "scan_columns" and k["block"] == 512, k  # 16 segments of 19 steps, 32 columns
    assert "__shared__ float carry" in cg.source and "ember_logaddexp_f32" in cg.source
    # A [batch, heads, time, dim] view scanned over time: columns too, and the transposing
    # copy back to [batch, time, width] is the scan's epilogue.
    fn, args = CASES["head_scan_bf16"]("cpu")
    (cg,) = compile_all(fn, args)
    assert [k["shape"] for k in cg.kernels] == ["scan_columns"], cg.kernels


def test_symbolic_row_loops_keep_a_warp_a_row(tmp_path, monkeypatch):
    """dynamic=True: a row kernel with a stage over a symbolic length keeps a warp a row.
    BLOOM's attention softmax (rows over the sequence) is fused with the relayout of the
    same rows' values (16 wide here, 64 at BLOOM's widths); the row tile, planned for the
    static stage alone, gave the kernel 2 threads a row (8 at full widths), and each of the
    softmax's passes walked the sequence on those (schedule/cuda/row_tile.cpp)."""
    transformers = pytest.importorskip("transformers")
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    torch.manual_seed(0)
    cfg = transformers.BloomConfig(use_cache=False, vocab_size=64, hidden_size=64, n_layer=1, n_head=4)
    model = transformers.BloomForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, 64, (2, 24))
    results = compile_all(lambda ids: model(input_ids=ids).logits, (ids,), dynamic=True)
    assert not [r for r in results if isinstance(r, str)], results
    rows = [k for cg in results for k in cg.kernels
            if "softmax" in k["name"] and k["shape"] == "row_warp" and k["grid_per_block"] > 0]
    assert rows, [k["name"] for cg in results for k in cg.kernels]
    assert any(k["row_lanes"] > 0 for k in rows), rows  # the tile of the static stage is kept
    for k in rows:
        assert k["block"] // k["grid_per_block"] == 32, k


@pytest.mark.parametrize("allow_non_fake_inputs", [False, True])
def test_a_runner_built_under_aotautograds_fake_mode_holds_real_constants(tmp_path, monkeypatch,
                                                                           allow_non_fake_inputs):
    """AOTAutograd calls its compilers under its FakeTensorMode. A CUDA graph's CPU constant
    (DeBERTa's sqrt(torch.tensor(d) * s) in a training graph) is moved to the device when the
    runner is built; under that mode the move made a FakeTensor (or raised, as it does when the
    mode refuses real inputs: the graph then ran eagerly), and the first call failed ("Cannot
    access data pointer of Tensor (e.g. FakeTensor, ...)") instead of running. The meta device
    stands in for the GPU (the graph is typed for CUDA, its cubin built by NVRTC)."""
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake
    from torch.fx.experimental.proxy_tensor import make_fx

    from ember import compiler

    monkeypatch.setattr(config, "cache_dir", str(tmp_path))

    def scaled(x):
        return x / torch.sqrt(torch.tensor(x.size(-1), dtype=torch.float) * 2)

    mode = FakeTensorMode(allow_non_fake_inputs=allow_non_fake_inputs)
    with mode:
        gm = make_fx(scaled, decomposition_table=decomposition_table())(torch.empty(4, 64, device="cuda"))
    imported = import_graph(gm, "cuda:0")
    constants = [getattr(gm, name) for name in imported.attr_inputs]
    assert [t.device.type for t in constants] == ["cpu"] and not is_fake(constants[0])
    cg = cuda.compile_cuda(imported.text, None, config, arch="sm_90")
    with mode:  # as AOTAutograd's fw_compiler runs
        _, runner = compiler.build_runner(imported, constants, torch.device("meta"), config, "forward", compiled=cg)
    assert [t.device.type for t in runner.attr_tensors] == ["meta"]
    assert not any(is_fake(t) for t in runner.attr_tensors + runner._plan.extra_inputs), runner.attr_tensors


def _scatter_adds(cg):
    """The kernels of a compiled graph that add with atomics (their functions call
    ember_scatter_add), and its index_add / scatter_add calls left to ATen."""
    functions = {}
    for chunk in cg.source.split('extern "C"')[1:]:
        m = re.search(r"void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\(", chunk)
        if m:
            functions[m.group(1)] = chunk
    adds = [k for k in cg.kernels if "ember_scatter_add(&" in functions.get(k["function"], "")]
    aten = [e["op"] for e in cg.externs if e["op"] in ("aten.index_add.default", "aten.scatter_add.default")]
    return adds, aten


def test_gather_block_training_adds_with_atomics(tmp_path, monkeypatch):
    """gather_block's training step (issue 23): every index_add and scatter_add of the forward
    and backward is ember's scatter-add: a kernel over the values adding into an f32 buffer
    with atomics, which its first launch (<name>_partial) zeroes; no ATen index_add is left
    (ATen's indexFuncLargeIndex ran 4 of them, about 1 ms of a 2.44 ms step on an H200)."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = TRAINING["gather_block_train_f32"]("cpu")
    results = compile_all(fn, args, train=True)
    assert len(results) == 2 and not [r for r in results if isinstance(r, str)], results
    adds = aten = 0
    for cg in results:
        a, e = _scatter_adds(cg)
        adds += len(a)
        aten += len(e)
        for k in a:
            assert k["shape"] == "elementwise" and k["partial_grid"] > 0 and k["partial_block"] == 256, k
            assert "%s_partial(" % k["function"] in cg.source
    assert aten == 0
    assert adds >= 3, adds  # the forward's index_add; index_select's, acc[bucket]'s and gather's gradients


def test_deterministic_algorithms_keep_aten_index_add(tmp_path, monkeypatch):
    """Atomic adds sum in no fixed order: under torch.use_deterministic_algorithms the graph
    keeps ATen's index_add (whose deterministic path sorts), and the forward compiles."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = CASES["index_add_buckets_f32"]("cpu")
    torch.use_deterministic_algorithms(True)
    try:
        (cg,) = compile_all(fn, args)
    finally:
        torch.use_deterministic_algorithms(False)
    adds, aten = _scatter_adds(cg)
    assert not adds and aten == ["aten.index_add.default"], (adds, aten)
    (cg,) = compile_all(fn, args)
    adds, aten = _scatter_adds(cg)
    assert len(adds) == 1 and not aten, (adds, aten)


@pytest.mark.parametrize("name", sorted(n for n in CASES if n.startswith(("index_add", "scatter_add", "index_put"))))
def test_scatter_add_cases_add_with_atomics(name, tmp_path, monkeypatch):
    """index_add, scatter_add and index_put(accumulate=True) (one index: traced as index_add;
    several: as it is) in f32, bf16 and f16: ember's scatter-add, no ATen call."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    fn, args = CASES[name]("cpu")
    (cg,) = compile_all(fn, args)
    adds, aten = _scatter_adds(cg)
    assert len(adds) == 1 and not aten, (adds, aten, [e["op"] for e in cg.externs])
    assert not [e for e in cg.externs if e["op"] == "aten.index_put.default"], cg.externs

"""The bytes each ember kernel must move (CompiledGraphBase.kernel_traffic,
csrc/schedule/kernel_traffic.h) on CUDA schedules made here (no GPU: the CUDA path up to
its source), and the suite's bandwidth figures (benchmarks/suite/bandwidth.py) from fake
launch data: achieved / copy bandwidth per kernel and its weighted distribution."""
import os
import sys
from types import SimpleNamespace

import pytest
import torch
from torch._functorch.aot_autograd import aot_module_simplified

from ember import _core
from ember.frontend.decompositions import decomposition_table
from ember.frontend.fx_import import import_graph

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from suite import bandwidth  # noqa: E402

MiB = 2**20


def cuda_graph(fn, *args):
    """The CudaCompiledGraph (source only, no NVRTC) of the one graph fn(*args) compiles to."""
    graphs = []

    def compiler(gm, example_inputs):
        graphs.append(_core.compile_cuda(import_graph(gm).text, build=False, disk_cache=False))
        return gm

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=lambda gm, ex: aot_module_simplified(
            gm, ex, fw_compiler=compiler, decompositions=decomposition_table()))(*args)
    assert len(graphs) == 1
    return graphs[0]


def traffic(fn, *args):
    return cuda_graph(fn, *args).kernel_traffic()


def only(kernels):
    assert len(kernels) == 1, kernels
    return kernels[0]


def test_pointwise_reads_and_writes_each_element_once():
    k = only(traffic(lambda x: torch.relu(x) * 2 + 1, torch.randn(1024, 512)))
    assert (k["read_bytes"], k["write_bytes"], k["kind"]) == (2 * MiB, 2 * MiB, "pointwise")


def test_broadcast_operand_counts_its_own_size():
    k = only(traffic(lambda x, b: x + b, torch.randn(1024, 512), torch.randn(512)))
    assert (k["read_bytes"], k["write_bytes"]) == (2 * MiB + 512 * 4, 2 * MiB)


def test_a_slice_reads_only_its_part():
    k = only(traffic(lambda x: x[:, :128] * 2, torch.randn(1024, 512)))
    assert (k["read_bytes"], k["write_bytes"]) == (MiB // 2, MiB // 2)


def test_a_row_read_by_two_stages_counts_once():
    k = only(traffic(lambda x: torch.softmax(x, -1), torch.randn(1024, 512)))
    assert k["kind"] == "reduction" and k["read_bytes"] == 2 * MiB
    assert 2 * MiB <= k["write_bytes"] <= 2 * MiB + 2 * 1024 * 4  # the row statistics, when stored


def test_a_roll_reads_its_input_once():
    k = only(traffic(lambda x: torch.roll(x, 3, 0) + x, torch.randn(1024, 512)))
    assert (k["read_bytes"], k["write_bytes"]) == (2 * MiB, 2 * MiB)


def test_scan_along_a_middle_dim():
    k = only(traffic(lambda x: torch.cumsum(x, 1), torch.randn(16, 256, 128)))
    assert (k["read_bytes"], k["write_bytes"], k["kind"]) == (2 * MiB, 2 * MiB, "scan")


def test_bf16_bytes_are_two_per_element():
    k = only(traffic(lambda x: x.float().exp().to(torch.bfloat16), torch.randn(1024, 512, dtype=torch.bfloat16)))
    assert (k["read_bytes"], k["write_bytes"]) == (MiB, MiB)


def fake_record(kernels, symbols=0):
    """A graph record whose compiled graph has these kernels: (name, function, read, write, kind)."""
    cg = SimpleNamespace(num_symbols=symbols,
                         kernels=[{"name": n, "function": f} for n, f, *_ in kernels],
                         kernel_traffic=lambda: [{"name": n, "read_bytes": r, "write_bytes": w, "kind": kind}
                                                 for n, _, r, w, kind in kernels])
    return SimpleNamespace(cg=cg)


def test_per_kernel_bandwidth_from_launch_data():
    copy = {"copy_gbps": 2000.0}
    records = [fake_record([("ember_poi_add_0", "ember_poi_add_0", 4 * MiB, 4 * MiB, "pointwise"),
                            ("ember_poi_add_1", "ember_poi_add_0", 4 * MiB, 4 * MiB, "pointwise"),
                            ("ember_red_sum_2", "ember_red_sum_2", 8 * MiB, 1024, "reduction")]),
               fake_record([("ember_poi_add_0", "ember_poi_add_0", MiB, MiB, "pointwise")])]
    profile = {"ember_poi_add_0": {"us": 30.0, "calls": 3.0},       # 3 launches of 10 us
               "ember_red_sum_2_partial": {"us": 4.0, "calls": 1.0},  # a column split: one call of 4 + 6 us
               "ember_red_sum_2": {"us": 6.0, "calls": 1.0},
               "ember_poi_mystery_9": {"us": 1.0, "calls": 1.0}}
    bw = bandwidth.per_kernel(profile, records, copy)
    by = {k["name"]: k for k in bw["kernels"]}
    assert bw["copy_gbps"] == 2000.0 and set(by) == {"ember_poi_add_0", "ember_red_sum_2", "ember_poi_mystery_9"}
    red = by["ember_red_sum_2"]
    assert (red["calls"], red["us"], red["bytes"]) == (1.0, 10.0, 8 * MiB + 1024)
    assert red["gbps"] == pytest.approx((8 * MiB + 1024) / 10e-6 / 1e9, abs=0.1) and not red.get("approx")
    assert red["of_copy"] == pytest.approx(red["gbps"] / 2000.0, abs=1e-4)
    add = by["ember_poi_add_0"]  # three kernels of the name, one of other bytes: averaged, approximate
    assert add["approx"] and add["bytes"] == round((8 + 8 + 2) * MiB / 3) and add["us"] == 10.0
    assert by["ember_poi_mystery_9"]["bytes"] is None


def test_per_kernel_reads_a_compiled_graphs_bytes():
    """The row's record from a real compiled graph: the profiler's name is the kernel's."""
    cg = cuda_graph(lambda x: torch.softmax(x, -1), torch.randn(1024, 512))
    name = cg.kernels[0]["name"]
    bw = bandwidth.per_kernel({name: {"us": 8.0, "calls": 2.0}}, [SimpleNamespace(cg=cg)], {"copy_gbps": 1000.0})
    k = only(bw["kernels"])
    assert (k["bytes"], k["us"], k["kind"]) == (4 * MiB, 4.0, "reduction") and not k.get("approx")
    assert k["of_copy"] == pytest.approx(4 * MiB / 4e-6 / 1e12, abs=1e-4)


def test_counted_graph_calls_give_exact_bytes(monkeypatch):
    """The graphs' calls counted while profiling (GraphCalls) give each name its launches'
    bytes; a name whose profiled launches differ from the count keeps the records' average."""
    from ember.runtime.cuda import CudaGraphRunner

    cg = cuda_graph(lambda x, b: torch.relu(x + b).sum(-1), torch.randn(1024, 512), torch.randn(512))
    monkeypatch.setattr(CudaGraphRunner, "_call_context", lambda runner, plan: "context")
    counter = bandwidth.GraphCalls()
    with counter:
        for _ in range(4):  # two profiled steps, two calls of the graph each
            assert CudaGraphRunner._call_context(SimpleNamespace(cg=cg), SimpleNamespace(symbols=None)) == "context"
    assert CudaGraphRunner._call_context(None, None) == "context"  # restored
    calls = counter.per_step(2)
    assert [(c[1], c[2]) for c in calls] == [(None, 2.0)]
    name = only(cg.kernels)["name"]
    profile = {name: {"us": 4.0, "calls": 2.0}}
    k = only(bandwidth.per_kernel(profile, [], {"copy_gbps": 1000.0}, calls)["kernels"])
    assert (k["bytes"], k["us"], k.get("approx")) == (2 * MiB + 2048 + 4096, 2.0, None)
    profile[name]["calls"] = 3.0  # not what the graphs launched: no exact bytes, and no record to fall back on
    assert only(bandwidth.per_kernel(profile, [], {"copy_gbps": 1000.0}, calls)["kernels"])["bytes"] is None


def test_summary_distribution_weights_and_worst():
    def row(model, kernels, gbps=1000.0):
        return {"model": model, "backend": "ember", "variant": "infer", "mode": "default", "device_name": "GPU",
                "bandwidth": {"copy_gbps": gbps, "kernels": kernels}}

    # of_copy 0.5: one launch, 90 us a step; 0.9: nine launches of 1 us; 0.7: a scan of 10 us
    slow = {"name": "ember_red_a_0", "kind": "reduction", "calls": 1.0, "us": 90.0, "bytes": 45 * 10**6, "of_copy": 0.5}
    fast = {"name": "ember_poi_b_1", "kind": "pointwise", "calls": 9.0, "us": 1.0, "bytes": 9 * 10**5, "of_copy": 0.9}
    scan = {"name": "ember_scan_cumsum_2", "kind": "scan", "calls": 1.0, "us": 10.0, "bytes": 7 * 10**6,
            "of_copy": 0.7}
    tiny = {"name": "ember_poi_c_3", "kind": "pointwise", "calls": 1.0, "us": 2.0, "bytes": 1000, "of_copy": 0.0005}
    samples = bandwidth.samples_of([row("m", [slow, fast, scan, tiny])])
    assert [round(s["lost_us_step"], 3) for s in samples] == [45.0, 0.9, 3.0, 1.999]
    assert bandwidth._percentiles([(0.5, 1.0), (0.9, 9.0)]) == [0.5, 0.9, 0.9]
    assert bandwidth._percentiles([(0.5, 80.0), (0.9, 20.0)]) == [0.5, 0.5, 0.9]
    text = bandwidth.summary([row("m", [slow, fast, scan, tiny])], min_mib=0.5)
    assert "by launches:      70%   90%   90%" in text  # weights 1, 1, 9 launches
    assert "by device time:   50%   50%   70%" in text  # weights 90, 10, 9 us
    assert "tiny (< 0.5 MiB per call, skipped above): 1 kernels" in text
    assert "scan kernels: 1, p50 by time 70%" in text
    assert "acceptance 3: median >= 80%: by launches met (90%), by device time NOT met (50%); scan kernels >= 70%: met" in text
    worst = text.split("worst by time lost")[1].splitlines()
    assert "ember_red_a_0" in worst[1] and "ember_scan_cumsum_2" in worst[2]

"""mode="reduce-overhead"'s bookkeeping (python/ember/runtime/cudagraphs.py) on the CPU: a fake
runner and a fake torch.cuda stand in for the device, so that which call records, which
replays, the pool and stream the captures share, and the memory reported per recording
are checked without a GPU. The device tests (test_cuda_runtime.py, pytest -m gpu) check
the same on real CUDA graphs and real memory."""
import collections
import contextlib
import logging
import types

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

import ember
from ember.runtime import cudagraphs
from ember.explain import cuda_graphs_lines

MiB = 2**20


class _FakeCuda:
    """What cudagraphs.py uses of torch.cuda. A capture records the function the runner
    ran; a replay runs it again into the same outputs (a CUDA graph reads and writes the
    same addresses every replay). Each capture adds a segment to the pool it captured in,
    as `growth` says, so that memory_snapshot reports a pool that grows."""

    def __init__(self, growth):
        self.growth = list(growth)  # (reserved, allocated) bytes each capture adds to its pool
        self.segments = [{"segment_pool_id": (0, 0), "total_size": 7 * MiB, "allocated_size": MiB}]
        self.captures = []  # (pool, stream) of each capture
        self.capturing = None  # the graph being captured
        self.pools = 0
        self.syncs = 0  # host waits for the device: Stream.synchronize, torch.cuda.synchronize

    def install(self, monkeypatch):
        fake = self

        class Graph:
            def __init__(self):
                self.work = []

            def replay(self):
                # The device's work: not among the host's ATen calls a dispatch mode counts.
                with _disable_current_modes():
                    for fn in self.work:
                        fn()

        class Stream:
            def __init__(self, device=None):
                self.waits = []

            def wait_stream(self, other):
                self.waits.append(other)

            def synchronize(self):
                fake.syncs += 1

        @contextlib.contextmanager
        def graph(g, pool=None, stream=None):
            fake.captures.append((pool, stream))
            fake.capturing = g
            try:
                yield
            finally:
                fake.capturing = None
            reserved, allocated = fake.growth.pop(0)
            fake.segments.append({"segment_pool_id": tuple(pool), "total_size": reserved,
                                  "allocated_size": allocated})

        def graph_pool_handle():
            fake.pools += 1
            return (1, fake.pools)

        current = Stream()
        for name, value in [("CUDAGraph", Graph), ("Stream", Stream), ("graph", graph),
                            ("graph_pool_handle", graph_pool_handle),
                            ("current_stream", lambda device=None: current),
                            ("synchronize", lambda device=None: setattr(fake, "syncs", fake.syncs + 1)),
                            ("memory_snapshot", lambda: [dict(s) for s in fake.segments])]:
            monkeypatch.setattr(torch.cuda, name, value, raising=False)
        return self


class _FakeRunner:
    """A graph y = x * w + 1 with one symbol, x's row count; w is a parameter (read in place)."""

    device = torch.device("cpu")

    def __init__(self, fake_cuda):
        self.cuda = fake_cuda
        self.cg = types.SimpleNamespace(symbols=[("s0", 4)])
        self.eager_runs = 0
        self.dropped = []

    def symbol_values(self, args):
        return (args[0].shape[0],)

    def inputs_read(self):
        return frozenset({0, 1})  # a third argument, if given, is one no step reads

    def plan_of(self, args):
        return ("plan", self.symbol_values(args))

    def drop_workspaces(self, plan):
        self.dropped.append(plan)

    def run(self, args):
        x, w = args[:2]
        out = x * w + 1
        if self.cuda.capturing is not None:
            self.cuda.capturing.work.append(lambda: torch.mul(x, w, out=out).add_(1))
        else:
            self.eager_runs += 1
        return [out]


@pytest.fixture
def replay(monkeypatch):
    fake = _FakeCuda(growth=[(40 * MiB, 8 * MiB), (2 * MiB, 2 * MiB), (2 * MiB, 2 * MiB)]).install(monkeypatch)
    runner = _FakeRunner(fake)
    return cudagraphs.CudaGraphReplay(runner, "inference_0", static_inputs=[1]), runner, fake


def _call(replay, x, w):
    (out,) = replay([x, w])
    torch.testing.assert_close(out, x * w + 1)
    return out


def test_sizes_a_b_a_record_once_each_and_replay_correctly(replay):
    replay, runner, fake = replay
    w = torch.randn(8)
    a, b = (lambda: torch.randn(4, 8)), (lambda: torch.randn(6, 8))
    before = ember.stats()
    for x in (a(), a(), a()):  # the first call runs as usual, the second records, the third replays
        kept = _call(replay, x, w)
    kept_values = kept.clone()
    for x in (b(), b(), b()):
        _call(replay, x, w)
    for x in (a(), a()):  # back to A: its recording replays, with B's recording in between
        _call(replay, x, w)
    assert torch.equal(kept, kept_values)  # the caller's outputs are copies, never the pool's
    assert (runner.eager_runs, replay.recorded, replay.replays) == (2, 2, 6)
    after = ember.stats()
    assert after["cuda_graph_recordings"] - before["cuda_graph_recordings"] == 2
    assert after["cuda_graph_replays"] - before["cuda_graph_replays"] == 6
    # One pool and one capture stream for every recording of the graph: a freed block is
    # reused only by allocations on the stream it was made on.
    pools, streams = zip(*fake.captures)
    assert len(set(pools)) == 1 and len({id(s) for s in streams}) == 1, fake.captures
    assert runner.dropped == [("plan", (4,)), ("plan", (6,))]


def test_each_recording_reports_its_memory(replay):
    replay, runner, fake = replay
    w = torch.randn(8)
    before = ember.stats()["cuda_graph_bytes"]
    for rows in (4, 4, 6, 6, 4):
        _call(replay, torch.randn(rows, 8), w)
    x_bytes = lambda rows: rows * 8 * 4  # noqa: E731  the static buffer of x (w is read in place)
    # Least recently replayed first; the other pool's segment is not counted.
    assert replay.recordings() == [
        {"sizes": {"s0": 6}, "replays": 1, "pool_growth": 2 * MiB, "pool_held": 2 * MiB, "static_inputs": x_bytes(6)},
        {"sizes": {"s0": 4}, "replays": 2, "pool_growth": 40 * MiB, "pool_held": 8 * MiB, "static_inputs": x_bytes(4)},
    ]
    assert replay.pool_usage() == (42 * MiB, 10 * MiB)
    assert ember.stats()["cuda_graph_bytes"] - before == 42 * MiB + x_bytes(4) + x_bytes(6)


def test_an_input_no_step_reads_is_not_copied_per_replay(replay):
    """dynamic=True: Dynamo passes each float attribute as a 0-d CPU tensor made per call,
    which the graph does not read (runner.inputs_read): a replay copies only x."""
    replay, runner, fake = replay
    w = torch.randn(8)
    for _ in range(3):
        x = torch.randn(4, 8)
        (out,) = replay([x, w, torch.tensor(1e-5, dtype=torch.float64)])
        torch.testing.assert_close(out, x * w + 1)
    assert replay.recorded == 1 and replay.replays == 2  # the recording call replays too
    (rec,) = replay._recordings.values()
    assert rec.copied == [0]
    assert replay.recordings()[0]["static_inputs"] == 4 * 8 * 4


def test_a_moved_parameter_records_again_in_the_same_pool(replay):
    replay, runner, fake = replay
    x = torch.randn(4, 8)
    w = torch.randn(8)
    for _ in range(3):
        _call(replay, x, w)
    w2 = torch.randn(8)  # the parameter read in place is another tensor now
    _call(replay, x, w2)
    _call(replay, x, w2)
    assert replay.recorded == 2 and len(replay.recordings()) == 1
    assert len({p for p, _ in fake.captures}) == 1


class _ManyParamsRunner(_FakeRunner):
    """y = x * (p_0 + ... + p_n) * s: as GPT-2's graph, many parameters read in place, one
    activation, and a 0-d CPU scalar the graph reads (a float attribute under dynamic=True)."""

    def inputs_read(self):
        return frozenset(range(self.nargs))

    def run(self, args):
        self.nargs = len(args)
        x, *params, s = args
        out = x * torch.stack(params).sum(0) * s.to(x.device)
        if self.cuda.capturing is not None:
            self.cuda.capturing.work.append(lambda: torch.mul(x * torch.stack(params).sum(0), s, out=out))
        return [out]


class _CountOps(TorchDispatchMode):
    """The ATen ops run while active (but is_pinned, a query), and each copy_'s (source, non_blocking)."""

    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()
        self.copies = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket is not torch.ops.aten.is_pinned:
            self.ops[func.overloadpacket.__name__] += 1
        if func.overloadpacket is torch.ops.aten.copy_:
            self.copies.append((args[1], kwargs.get("non_blocking", args[2] if len(args) > 2 else False)))
        return func(*args, **kwargs)


def test_a_replay_copies_only_the_activations_and_never_waits_for_the_device(monkeypatch):
    """Per replay, counted through the dispatcher: one copy per argument not read in place
    (x, and the CPU scalar, without a stream sync), none per parameter, one copy of the
    output; no sync. A caller passing a static buffer itself gets no copy of it."""
    fake = _FakeCuda(growth=[(MiB, MiB)]).install(monkeypatch)
    runner = _ManyParamsRunner(fake)
    params = [torch.randn(8) for _ in range(40)]
    replay = cudagraphs.CudaGraphReplay(runner, "inference_0", static_inputs=list(range(1, 41)))
    scale = torch.tensor(0.5, dtype=torch.float64)
    for _ in range(2):  # runs as usual, then records
        replay([torch.randn(4, 8), *params, scale])
    syncs = fake.syncs
    x = torch.randn(4, 8)
    with _CountOps() as counted:
        for _ in range(3):
            (out,) = replay([x, *params, scale])
    torch.testing.assert_close(out, x * torch.stack(params).sum(0) * 0.5)
    assert replay.recorded == 1 and replay.replays == 4
    assert fake.syncs == syncs
    assert counted.ops == {"copy_": 6, "clone": 3}, counted.ops
    assert [(src is x or src is scale, blocking) for src, blocking in counted.copies] == [(True, True)] * 6
    # The static buffers themselves as arguments (a caller feeding a replay's input back): no copy.
    (rec,) = replay._recordings.values()
    with _CountOps() as counted:
        replay([rec.static_args[0], *params, rec.static_args[41]])
    assert counted.ops == {"clone": 1}, counted.ops


def test_a_replay_copies_views_of_one_output_storage_once(replay):
    """Outputs that view one storage are copied as one, and stay views of one copy."""
    replay, runner, fake = replay
    w = torch.randn(8)
    run = runner.run
    runner.run = lambda args: (lambda out: [out, out[1:], out.t()])(run(args)[0])
    for _ in range(3):
        x = torch.randn(4, 8)
        with _CountOps() as counted:
            a, b, c = replay([x, w])
    torch.testing.assert_close(a, x * w + 1)
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr() == c.untyped_storage().data_ptr()
    assert (b.storage_offset(), c.stride()) == (8, (1, 8))
    assert counted.ops["clone"] == 1 and counted.ops["copy_"] == 1, counted.ops


def test_sizes_beyond_the_limit_run_as_usual(replay, monkeypatch):
    replay, runner, fake = replay
    monkeypatch.setattr(cudagraphs, "MAX_RECORDINGS", 1)
    w = torch.randn(8)
    for rows in (4, 4, 6, 6, 6, 4):
        _call(replay, torch.randn(rows, 8), w)
    assert (replay.recorded, replay.replays, runner.eager_runs) == (1, 2, 4)


def test_recording_logs_its_memory(replay):
    replay, runner, fake = replay
    w = torch.randn(8)
    # A handler of the test's own: ember's loggers may not propagate to the root logger (and
    # pytest's caplog) once torch's logging has configured them in this process.
    records = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    log = logging.getLogger("ember.cudagraphs")
    old = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        for _ in range(2):
            _call(replay, torch.randn(4, 8), w)
    finally:
        log.removeHandler(handler)
        log.setLevel(old)
    (message,) = [r.getMessage() for r in records]
    assert "graph inference_0: recorded at s0=4" in message and "pool +40.0 MiB" in message, message


def test_explain_lists_the_recordings():
    g = {"cuda_graphs": {"off_reason": None, "pool_reserved": 42 * MiB, "pool_allocated": 10 * MiB, "recordings": [
        {"sizes": {"s0": 4}, "replays": 2, "pool_growth": 40 * MiB, "pool_held": 8 * MiB, "static_inputs": 128},
        {"sizes": {"s0": 6}, "replays": 1, "pool_growth": 2 * MiB, "pool_held": 2 * MiB, "static_inputs": 192}]}}
    lines = cuda_graphs_lines(g)
    assert lines[0].startswith("  2 CUDA graph recording(s) sharing one memory pool: 42.00 MiB reserved"), lines
    assert "s0=6" in lines[2] and "pool +2.00 MiB (2.00 MiB held)" in lines[2], lines
    assert cuda_graphs_lines({"cuda_graphs": None}) == []


def test_explain_takes_a_mode_and_a_cpu_graph_records_nothing():
    """mode="reduce-overhead" on the CPU compiles as the default: explain's graph has no
    CUDA graph report, and its text no line for one."""
    report = ember.explain(lambda x: torch.relu(x) * 2 + 1, torch.randn(4, 8), calls=[(torch.randn(4, 8),)],
                           mode="reduce-overhead", graph_breaks=False)
    assert report.graphs and all(g["cuda_graphs"] is None for g in report.graphs)
    assert "CUDA graph" not in str(report)

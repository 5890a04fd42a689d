"""mode="reduce-overhead" on CUDA: an inference graph recorded once in a CUDA graph, then
replayed, so that a call costs one graph launch instead of a launch per kernel and ATen
call (issue 5).

A compiled inference graph runs as usual on its first call (lazy initialization: cuBLAS
handles, cuDNN plans, the arena). Its second call records it (torch.cuda.graph), and
later calls replay the recording:

- Parameters are read in place (AOTAutograd's static input indices, as Inductor's
  cudagraphs take them; where those are unknown, an input that is the same tensor at
  the same address on the first two calls). The other inputs (the caller's activations)
  are copied into static buffers before each replay. A call where an input read in
  place has moved records again: its old memory may belong to something else by now.
- Outputs live in the recording's pool and the next replay overwrites them: the caller
  gets copies, storage by storage, so outputs that are views of one another stay so.
- A graph with symbols records once per set of symbol values, at most MAX_RECORDINGS;
  calls at further sizes run without a recording (logged once per graph).
- A replay's host work is a few C calls (benchmarks/replay_host_cost.py counts and times
  it): its recording found by the symbol values (a dict lookup), the addresses of the
  arguments read in place compared as one list, one copy per other argument (none where
  the argument is the static buffer itself; a CPU scalar's without a stream sync), the
  launch, and one copy per output storage. Nothing waits for the device.
- Calls are serialized (one set of static buffers), and a replay on another stream than
  the last one waits for it.
- A recording that fails (an op that cannot be captured), or whose outputs alias its
  inputs, leaves the graph running as usual (logged once per graph).

The recordings of one graph share one memory pool, captured on one stream (the caching
allocator hands a freed block only to allocations on the stream it was made on), as
Inductor's cudagraph trees do. Sharing is safe here because nothing a recording reads
before writing it lies in the pool: its static input buffers are allocated outside it,
its parameters are the caller's, and every intermediate is written by the replay before
it is read. What stays allocated in the pool (a recording's outputs) is never given to
another capture; what a capture freed (its arena and ATen's temporaries) may be given to
the next one, so a replay of one size may overwrite another's intermediates or outputs.
That is harmless because replays never overlap (the lock, and stream order) and a
replay's outputs are copied out before the next replay starts. The memory each
recording took (the pool's growth, what it keeps allocated there, its static input
buffers) is logged on the cudagraphs channel, counted in ember.stats() and listed per
graph by ember.explain(mode="reduce-overhead").

Forward and backward graphs of training run without recordings (backend.py): their
outputs include the saved activations, which would be copied on every call.
"""
from __future__ import annotations

import collections
import operator
import threading
import weakref

import torch

from .. import counters as stats, logs

# Recordings a graph with symbols keeps, most recent last.
MAX_RECORDINGS = 8


class _Recording:
    def __init__(self, graph, plan, static_args, copied, in_place, outputs, memory):
        self.graph = graph
        self.plan = plan                # the runner's plan for these sizes: the graph reads its constants
        self.static_args = static_args  # the arguments the recording reads
        self.copied = copied            # argument indices copied into static buffers each call
        self.in_place = in_place        # (index, address) of arguments read in place
        self.outputs = outputs          # the recording's outputs (in the pool)
        self.memory = memory            # what recording took: see CudaGraphReplay.recordings()
        self.replays = 0
        # What a replay does, decided here so that it is a few C calls: the arguments read in
        # place taken in one call and their addresses compared as one list (GPT-2 has ~150);
        # each copied argument with its static buffer and that buffer's address.
        self.place_of = _getter([i for i, _ in in_place])
        self.place_ptrs = [ptr for _, ptr in in_place]
        self.copies = [(i, static_args[i], static_args[i].data_ptr()) for i in copied]
        self.copy_out = _output_copier(outputs)

    def reads_in_place(self, args) -> bool:
        """Whether every argument read in place is at the address the recording read."""
        return list(map(_data_ptr, self.place_of(args))) == self.place_ptrs


_data_ptr = torch.Tensor.data_ptr


def _getter(indices):
    """A function args -> the tuple of args at `indices`, in one C call where it can."""
    if not indices:
        return lambda args: ()
    if len(indices) == 1:
        (i,) = indices
        return lambda args: (args[i],)
    return operator.itemgetter(*indices)


class CudaGraphReplay:
    """Replays `runner` (a CudaGraphRunner) from CUDA graph recordings: see the module."""

    def __init__(self, runner, name: str, static_inputs: list[int] | None = None):
        self._runner = runner
        self._name = name
        self._static_inputs = None if static_inputs is None else set(static_inputs)
        self._first: dict = {}  # symbol values -> (weak reference, address) of each argument of the first call
        self._recordings: collections.OrderedDict = collections.OrderedDict()
        self._off_reason: str | None = None  # set: every call runs without a recording
        self._full_logged = False
        self._lock = threading.Lock()
        self._last_stream = None  # the stream of the last replay
        # Made at the first recording, shared by all: the memory pool and the stream captures run on.
        self._pool = None
        self._capture_stream = None
        self.recorded = 0  # recordings made (tests and logs)
        self.replays = 0

    def __call__(self, args):
        if self._off_reason is not None:
            return self._runner.run(args)
        with self._lock:
            return self._call(args)

    def recordings(self) -> list[dict]:
        """The recordings held now, least recently replayed first: the symbols' values ({} for a static graph),
        replays so far, and the device memory the recording took when it was made, in bytes:
        pool_growth (segments the shared pool added), pool_held (pool memory it keeps
        allocated: its outputs; the rest of what it used there is free for the other
        recordings' captures) and static_inputs (its input buffers, outside the pool)."""
        names = [n for n, _ in self._runner.cg.symbols]
        with self._lock:
            return [{"sizes": dict(zip(names, key)), "replays": rec.replays, **rec.memory}
                    for key, rec in self._recordings.items()]

    def pool_usage(self) -> tuple[int, int]:
        """(bytes reserved, bytes allocated) now in the recordings' shared memory pool."""
        return (0, 0) if self._pool is None else _pool_usage(self._pool)

    def off_reason(self) -> str | None:
        """Why calls run without recordings, or None."""
        return self._off_reason

    def _call(self, args):
        key = self._runner.symbol_values(args)
        rec = self._recordings.get(key)
        if rec is not None and rec.reads_in_place(args):
            self._recordings.move_to_end(key)
            return self._replay(rec, args)
        if key not in self._first:
            self._first[key] = _identities(args)
            return self._runner.run(args)
        if rec is None and len(self._recordings) >= MAX_RECORDINGS:
            if not self._full_logged:
                self._full_logged = True
                logs.logger("fallback").info("graph %s: sizes beyond the first %d run without CUDA graph "
                                             "recordings (reduce-overhead)", self._name, MAX_RECORDINGS)
            return self._runner.run(args)
        return self._record(key, args)

    def _off(self, reason: str):
        self._off_reason = reason
        logs.logger("fallback").info("graph %s runs without CUDA graph recordings (reduce-overhead): %s",
                                     self._name, reason)

    def _record(self, key, args):
        first = self._first[key]
        device = self._runner.device
        in_place, copied, static_args = [], [], list(args)
        static_bytes = 0
        read = self._runner.inputs_read()
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor) or i not in read:  # an input no step reads: no copy per replay
                continue
            if self._static_inputs is not None:
                stays = i in self._static_inputs
            else:  # the same tensor at the same address: a parameter or buffer
                ref, ptr = first[i]
                stays = ref is not None and ref() is a and a.data_ptr() == ptr
            if stays:
                in_place.append((i, a.data_ptr()))
            else:
                # A CPU scalar (host_inputs in cuda.py) gets its static copy on the device:
                # the recording must not copy from the host.
                on = a.device if a.device.type != "cpu" else device
                static_args[i] = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=on).copy_(a)
                static_bytes += static_args[i].untyped_storage().nbytes()
                copied.append(i)
        self._first[key] = _identities(args)
        if self._pool is None:
            self._pool, self._capture_stream = torch.cuda.graph_pool_handle(), torch.cuda.Stream(device)
        # A recording this one replaces (an input read in place moved) stays alive until the
        # capture ends: a pool whose every graph is gone may be released under the capture.
        before = _pool_usage(self._pool)
        graph, stream = torch.cuda.CUDAGraph(), self._capture_stream
        try:
            torch.cuda.current_stream(device).synchronize()
            with torch.cuda.graph(graph, pool=self._pool, stream=stream):
                outputs = self._runner.run(static_args)
        except Exception as e:  # an op that cannot be captured: run as usual from now on
            self._off(f"recording failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
            torch.cuda.synchronize(device)
            return self._runner.run(args)
        # The arena the capture ran in is freed into the pool, where the next capture may
        # take it; the arenas of this size's first calls, which replays do not use, return
        # to the allocator.
        plan = self._runner.plan_of(static_args)
        self._runner.drop_workspaces(plan)
        inputs = {a.untyped_storage().data_ptr() for a in static_args if isinstance(a, torch.Tensor)}
        if any(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in inputs for o in outputs):
            self._off("an output is a view of an input")
            return self._runner.run(args)
        after = _pool_usage(self._pool)
        memory = {"pool_growth": after[0] - before[0], "pool_held": after[1] - before[1],
                  "static_inputs": static_bytes}
        rec = _Recording(graph, plan, static_args, copied, in_place, outputs, memory)
        self._recordings[key] = rec
        self._recordings.move_to_end(key)
        self.recorded += 1
        stats.count_cuda_graph(recorded=True, nbytes=memory["pool_growth"] + static_bytes)
        self._log(key, memory, after[0])
        return self._replay(rec, args)

    def _log(self, key, memory, pool_bytes):
        log = logs.logger("cudagraphs")
        if not log.isEnabledFor(20):  # INFO
            return
        sizes = ", ".join(f"{n}={v}" for (n, _), v in zip(self._runner.cg.symbols, key)) or "static sizes"
        log.info("graph %s: recorded at %s (%d of at most %d): pool +%s (now %s, shared by %d recording(s)), "
                 "%s of it held, %s of static input buffers", self._name, sizes, len(self._recordings),
                 MAX_RECORDINGS, _mib(memory["pool_growth"]), _mib(pool_bytes), len(self._recordings),
                 _mib(memory["pool_held"]), _mib(memory["static_inputs"]))

    def _replay(self, rec: _Recording, args):
        stream = torch.cuda.current_stream(self._runner.device)
        if self._last_stream is not None and self._last_stream != stream:
            stream.wait_stream(self._last_stream)  # the static buffers' and the pool's last users
        self._last_stream = stream
        for i, buffer, ptr in rec.copies:
            a = args[i]
            # An argument that is the static buffer itself (a caller feeding a replay's
            # input back) needs no copy. non_blocking: a CPU scalar's copy from pageable
            # memory is staged by the driver before the call returns, with no stream sync
            # (a blocking copy would wait for the device on every replay); one from pinned
            # memory would be read later, after the caller may have changed it.
            if a.data_ptr() != ptr:
                buffer.copy_(a, non_blocking=a.device.type != "cpu" or not a.is_pinned())
        rec.graph.replay()
        rec.replays += 1
        self.replays += 1
        stats.count_cuda_graph(recorded=False)
        return rec.copy_out()


def _pool_usage(pool) -> tuple[int, int]:
    """(bytes reserved, bytes allocated) in the segments of memory pool `pool` (its id is
    unique in the process, and only this graph's device captures in it)."""
    reserved = allocated = 0
    for seg in torch.cuda.memory_snapshot():
        if tuple(seg.get("segment_pool_id", ())) == tuple(pool):
            reserved += seg["total_size"]
            allocated += seg["allocated_size"]
    return reserved, allocated


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


def _identities(args):
    return [(weakref.ref(a), a.data_ptr()) if isinstance(a, torch.Tensor) else (None, None) for a in args]


def _output_copier(outputs):
    """A function () -> copies of `outputs`, one per storage they view, with their views
    kept (the next replay overwrites the recording's outputs). Decided once per recording:
    an output alone in its storage and covering all of it (GPT-2's logits) is one clone."""
    groups = {}  # storage address -> indices of the outputs viewing it
    for k, o in enumerate(outputs):
        if isinstance(o, torch.Tensor):
            groups.setdefault(o.untyped_storage().data_ptr(), []).append(k)
    whole, shared = [], []
    for ks in groups.values():
        o = outputs[ks[0]]
        nbytes = o.untyped_storage().nbytes()
        if len(ks) == 1 and o.is_contiguous() and o.storage_offset() == 0 and o.numel() * o.element_size() == nbytes:
            whole.append(ks[0])
        else:
            raw = torch.empty(0, dtype=torch.uint8, device=o.device).set_(o.untyped_storage())
            shared.append((raw, [(k, outputs[k].dtype, outputs[k].storage_offset(), outputs[k].size(),
                                  outputs[k].stride()) for k in ks]))
    if not shared and len(whole) == len(outputs):
        return lambda: [o.clone() for o in outputs]

    def copy_out():
        out = list(outputs)  # values that are not tensors pass as they are
        for k in whole:
            out[k] = outputs[k].clone()
        for raw, views in shared:
            st = raw.clone().untyped_storage()
            for k, dtype, offset, size, stride in views:
                out[k] = torch.empty(0, dtype=dtype, device=raw.device).set_(st, offset, size, stride)
        return out

    return copy_out

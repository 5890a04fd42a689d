"""mode="reduce-overhead" on CUDA: an inference graph recorded once in a CUDA graph, then
replayed, so that a call costs one graph launch instead of a launch per kernel and ATen
call (issue 5).

A compiled inference graph runs as usual on its first call (lazy initialization: cuBLAS
handles, cuDNN plans, the arena). Its second call records it (torch.cuda.graph, on a
memory pool and a stream of its own), and later calls replay the recording:

- Parameters are read in place (AOTAutograd's static input indices, as Inductor's
  cudagraphs take them; where those are unknown, an input that is the same tensor at
  the same address on the first two calls). The other inputs (the caller's activations)
  are copied into static buffers before each replay. A call where an input read in
  place has moved records again: its old memory may belong to something else by now.
- Outputs live in the recording's pool and the next replay overwrites them: the caller
  gets copies, storage by storage, so outputs that are views of one another stay so.
- A graph with symbols records once per set of symbol values, at most MAX_RECORDINGS;
  calls at further sizes run without a recording (logged once per graph).
- Calls are serialized (one set of static buffers), and a replay on another stream than
  the last one waits for it.
- A recording that fails (an op that cannot be captured), or whose outputs alias its
  inputs, leaves the graph running as usual (logged once per graph).

Forward and backward graphs of training run without recordings (backend.py): their
outputs include the saved activations, which would be copied on every call.
"""
from __future__ import annotations

import collections
import threading
import weakref

import torch

from . import counters as stats, logs

# Recordings a graph with symbols keeps (each holds its pool's memory), most recent last.
MAX_RECORDINGS = 8


class _Recording:
    def __init__(self, graph, pool, stream, static_args, copied, in_place, outputs, workspaces):
        self.graph = graph
        self.pool = pool
        self.stream = stream
        self.static_args = static_args  # the arguments the recording reads
        self.copied = copied            # argument indices copied into static buffers each call
        self.in_place = in_place        # (index, address) of arguments read in place
        self.outputs = outputs          # the recording's outputs (in its pool)
        self.workspaces = workspaces    # the runner's workspaces made while recording: kept alive


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
        self.recorded = 0  # recordings made (tests and logs)
        self.replays = 0

    def _key(self, args):
        return tuple((int(args[i]) - const) * coef for i, coef, const in self._runner._symbol_args)

    def __call__(self, args):
        if self._off_reason is not None:
            return self._runner.run(args)
        with self._lock:
            return self._call(args)

    def _call(self, args):
        key = self._key(args)
        rec = self._recordings.get(key)
        if rec is not None and all(args[i].data_ptr() == ptr for i, ptr in rec.in_place):
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
        in_place, copied, static_args = [], [], list(args)
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
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
                device = a.device if a.device.type != "cpu" else self._runner.device
                static_args[i] = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=device).copy_(a)
                copied.append(i)
        self._first[key] = _identities(args)
        device = self._runner.device
        graph, pool, stream = torch.cuda.CUDAGraph(), torch.cuda.graph_pool_handle(), torch.cuda.Stream(device)
        plan_workspaces = self._runner.workspaces_of_stream(stream.cuda_stream)
        try:
            torch.cuda.current_stream(device).synchronize()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                outputs = self._runner.run(static_args)
        except Exception as e:  # an op that cannot be captured: run as usual from now on
            self._off(f"recording failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
            torch.cuda.synchronize(device)
            return self._runner.run(args)
        # The workspaces made while recording are the recording's memory: no other call takes them.
        workspaces = list(plan_workspaces())
        inputs = {a.untyped_storage().data_ptr() for a in static_args if isinstance(a, torch.Tensor)}
        if any(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in inputs for o in outputs):
            self._off("an output is a view of an input")
            return self._runner.run(args)
        rec = _Recording(graph, pool, stream, static_args, copied, in_place, outputs, workspaces)
        self._recordings[key] = rec
        self.recorded += 1
        stats.count_cuda_graph(recorded=True)
        return self._replay(rec, args)

    def _replay(self, rec: _Recording, args):
        stream = torch.cuda.current_stream(self._runner.device)
        if self._last_stream is not None and self._last_stream != stream:
            stream.wait_stream(self._last_stream)  # the static buffers' last readers
        self._last_stream = stream
        for i in rec.copied:
            rec.static_args[i].copy_(args[i])
        rec.graph.replay()
        self.replays += 1
        stats.count_cuda_graph(recorded=False)
        return _copy_outputs(rec.outputs)


def _identities(args):
    return [(weakref.ref(a), a.data_ptr()) if isinstance(a, torch.Tensor) else (None, None) for a in args]


def _copy_outputs(outputs):
    """Copies of `outputs`, one per storage they view, with their views kept."""
    storages = {}
    out = []
    for o in outputs:
        if not isinstance(o, torch.Tensor):
            out.append(o)
            continue
        st = o.untyped_storage()
        new = storages.get(st.data_ptr())
        if new is None:
            raw = torch.empty(0, dtype=torch.uint8, device=o.device).set_(st)
            new = storages[st.data_ptr()] = raw.clone().untyped_storage()
        out.append(torch.empty(0, dtype=o.dtype, device=o.device).set_(new, o.storage_offset(), o.size(), o.stride()))
    return out

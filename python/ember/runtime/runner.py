"""Runs a CompiledGraph: allocates buffers, launches kernel groups, calls ATen for externs.

Everything that can be decided once is decided in __init__, so that a call is a
flat loop over precomputed steps: per kernel group one allocation per new buffer
and one call into C++; per extern op one ATen call with prebuilt arguments.
"""
from __future__ import annotations

import collections
import dataclasses
import operator
import threading
import weakref

import torch
import torch.autograd.profiler as _profiler
from torch._C._profiler import _RecordFunctionFast

from . import openmp, plan_code, prepared as _prepared
from .. import counters as _counters
from ..frontend.fx_import import TORCH_DTYPES, Call, ImportedGraph, Ref, SymValue, resolve_op


def _access(fn, source: str):
    """fn (bufs -> value) with the same as a Python expression over bufs, for the plan's
    generated code (plan_code.py)."""
    fn.source = source
    return fn


class _InputView:
    """A view of a graph input that an ATen call takes (a linear layer's transposed
    weight), kept while the input is the same parameter at the same address, so that the
    call does not make it again (~2 us of host each). Only parameters, which the model
    keeps alive anyway: a view of another input would hold its memory until the next
    call. The parameter is held by a weak reference, so a new tensor never matches a dead
    one's entry, and its address is compared (`param.data = ...` moves it)."""

    __slots__ = ("sizes", "strides", "offset", "entry")

    def __init__(self, sizes, strides, offset):
        self.sizes, self.strides, self.offset = sizes, strides, offset
        self.entry = (None, 0, None)  # (weak reference to the input, its data_ptr, the view)

    def __call__(self, base):
        ref, ptr, view = self.entry
        if ref is not None and ref() is base and base.data_ptr() == ptr:
            return view
        view = base.as_strided(self.sizes, self.strides, base.storage_offset() + self.offset)
        if isinstance(base, torch.nn.Parameter):
            self.entry = (weakref.ref(base), base.data_ptr(), view)
        return view


def _view_fn(spec, layout, arena_views, names=None, inputs=()):
    """A function bufs -> tensor for a StridedView spec (identity views cost nothing).

    Views of arena buffers are made once per workspace (arena_views lists them; the
    workspace keeps them after its buffers), so they cost nothing per call either; views
    of the graph's inputs (`inputs`) are kept by an _InputView, bound in `names`.
    """
    b, _dtype, sizes, strides, offset = spec
    sizes, strides = tuple(sizes), tuple(strides)
    if offset == 0 and layout[b] == (sizes, strides):
        return _access(lambda bufs: bufs[b], f"bufs[{b}]")
    if b in arena_views[0]:
        slot = arena_views[1] + len(arena_views[2])
        arena_views[2].append((b, sizes, strides, offset))
        return _access(lambda bufs: bufs[slot], f"bufs[{slot}]")
    if b in inputs and names is not None:
        view = _InputView(sizes, strides, offset)
        return _access(lambda bufs: view(bufs[b]), f"{names.bind(view, 'v')}(bufs[{b}])")
    return _access(lambda bufs: bufs[b].as_strided(sizes, strides, bufs[b].storage_offset() + offset),
                   f"bufs[{b}].as_strided({sizes!r}, {strides!r}, bufs[{b}].storage_offset() + {offset!r})")


def _convert_element_type(a, dtype):
    return torch.ops.aten._to_copy.default(a, dtype=dtype)


# Ops whose ATen call has a faster equivalent: prims are implemented in Python (a
# custom-op dispatch per call, ~0.1 ms on a GPU host), where ATen's _to_copy is one C++
# call. prims.convert_element_type reaches the runner when its operand is an opaque
# value (a CPU scalar in a CUDA graph: dynamic=True makes float module attributes such as
# an RMSNorm's eps 0-d CPU tensors).
_FASTER = {"prims::convert_element_type.default": _convert_element_type}


def runtime_op(name: str):
    """The callable that runs the ATen call `name` at run time."""
    if name in _FASTER:
        return _FASTER[name]
    # OpOverload.__call__ is a Python layer over the C++ op; call the op itself.
    op = resolve_op(name)
    return getattr(op, "_op", op)


def _none(bufs):
    return None


_none.source = "None"


# Plans (and their arenas) a graph with symbols keeps, for the most recent symbol values.
MAX_PLANS = 8


class _ShapeMismatch(Exception):
    pass


def _conform(r, sizes, dtype):
    """An ATen result whose dtype differs from the graph's metadata (some fake
    kernels disagree with the real ones) is converted; one whose shape differs
    cannot be read with the compiled layout, so the graph must run eagerly."""
    if tuple(r.shape) != tuple(sizes):
        raise _ShapeMismatch(f"an ATen call returned shape {tuple(r.shape)} where the graph's metadata says {tuple(sizes)}")
    return r.to(dtype)


def _conform_result(r, expect, dev):
    """An ATen result that the plan's check found to differ from the graph's metadata
    (expect: buffer, sizes, strides, dtype), made what the kernels read: its dtype
    converted, a 0-d value moved to the device, other strides copied into the compiled
    ones; a shape that differs raises _ShapeMismatch."""
    sizes, strides, dtype = expect.sizes, expect.strides, expect.dtype
    given = r
    if r.dtype != dtype or r.shape != sizes:
        r = _conform(r, sizes, dtype)
    if not sizes and r.device != dev:  # a CPU scalar, a device value to ember
        r = r.to(dev, non_blocking=True)
    if r.stride() != strides and r.numel() > 1:
        r = torch.empty_strided(sizes, strides, dtype=dtype, device=dev).copy_(r)
    if r is not given:  # ember.stats()["result_copies"]: a copy or kernel more per call
        _counters.count_result_copy()
    return r


class _Workspace:
    """A call's memory, reused by later calls: the buffer list template (every arena buffer
    a view of one allocation, then the views of arena buffers that extern ops take) and the
    pointers of the arena buffers kernel steps take, which do not move while it lives."""

    __slots__ = ("buffers", "pointers")

    def __init__(self, buffers: list, pointers: list):
        self.buffers = buffers
        self.pointers = pointers


class _SymbolValues(dict):
    """Ref -> function bufs -> tensor, as given; a SymValue (a size input or size
    arithmetic) is evaluated once, at the plan's symbol values."""

    def __init__(self, tensors, symbol_index, values):
        super().__init__(tensors)
        self._subs = {}
        if symbol_index:
            import sympy

            self._subs = {s: sympy.Integer(values[k]) for s, k in symbol_index.items()}

    def value(self, sym: SymValue):
        """The int (SymInt) or float (SymFloat) value of a size expression."""
        if not isinstance(sym, SymValue):
            raise KeyError(sym)
        v = sym.expr.xreplace(self._subs) if self._subs else sym.expr
        return float(v) if sym.is_float else int(v)

    def __missing__(self, sym):
        v = self.value(sym)
        fn = lambda bufs: v  # noqa: E731
        self[sym] = fn
        return fn


def _prepared_call(runner, call: Call, fetch, extern: dict, buffers):
    """The ATen call of an extern whose weight the lowering left for the runner to prepare
    once (prepared.py), or None (then it runs as traced, with the weight as it comes)."""
    args = extern["tensor_args"]
    (w_pos,) = extern["prepared_args"]
    x_view = next((view for nid, idx, view in args if call.args and call.args[0] == Ref(nid, idx)), None)
    w_view = args[w_pos][2]
    if x_view is None:
        return None
    made = _prepared.convolution(call, fetch, buffers[w_view[0]]["input_index"], x_view, w_view,
                                 runner.prepare_weights)
    if made is None:
        return None
    run, weight = made
    runner.prepared.append(weight)
    return run


def _padded_arg(runner, view, sizes, strides, buffers, names):
    """bufs -> the zero-padded copy of a graph input's view that an extern takes
    (ExternCall::padded_args), made once per runner while the input is unchanged (one
    PaddedInput serves every extern that pads the same view alike, and every plan)."""
    b = view[0]
    key = (buffers[b]["input_index"], view[1], tuple(view[2]), tuple(view[3]), view[4], tuple(sizes), tuple(strides))
    pad = runner.padded_inputs.get(key)
    if pad is None:
        pad = _prepared.padded_input(view, sizes, strides, key[0], runner.prepare_weights)
        runner.padded_inputs[key] = pad
        runner.prepared.append(pad)
    return _access(lambda bufs: pad(bufs[b]), f"{names.bind(pad, 'p')}(bufs[{b}])")


class _Plan:
    """Everything a call needs, decided once: per kernel group the buffers to allocate
    and the pointers to pass; per extern op its ATen call with its arguments' expressions;
    all of it one generated function (plan_code.py), `run`. A graph with symbols gets one
    plan per distinct set of symbol values (the layout's sizes)."""

    def __init__(self, runner, layout, symbols):
        imported = runner.imported
        self.device = runner.device
        cg = runner.cg
        self.symbols = list(symbols) if symbols is not None else None
        buffers = layout["buffers"]
        self.num_buffers = len(buffers)
        layout_of = {b["id"]: (tuple(b["sizes"]), tuple(b["strides"])) for b in buffers}
        input_ids = {b["id"] for b in buffers if b["kind"] == "input"}
        # Inputs no step reads are not stored (see GraphRunner.inputs_read).
        read = runner.inputs_read()
        self.inputs = [(b["id"], b["input_index"]) for b in buffers if b["kind"] == "input" and b["input_index"] in read]
        # Intermediates live in an arena planned by C++ and reused across calls;
        # only graph outputs are allocated per call.
        self.arena_bytes = layout["arena_bytes"]
        self.arena_views = [(b["id"], b["arena_offset"], tuple(b["sizes"]), tuple(b["strides"]),
                             TORCH_DTYPES[b["dtype"]]) for b in buffers if b["arena_offset"] >= 0]
        in_arena = {b for b, *_ in self.arena_views}
        alloc = {b["id"]: plan_code.Allocation(b["id"], tuple(b["sizes"]), tuple(b["strides"]),
                                               TORCH_DTYPES[b["dtype"]])
                 for b in buffers if b["kind"] == "computed" and b["in_memory"] and b["id"] not in in_arena}
        self.workspaces = []  # free workspaces: one is taken per concurrent call
        self.stream_workspaces = {}  # a device runner's: CUDA stream -> its free workspaces

        # (arena buffer ids, first extra slot, views of arena buffers made per workspace)
        self._arena_view_specs = (in_arena, self.num_buffers, [])
        # Arena buffers whose pointers kernel steps take: a workspace's `pointers`, in order.
        self.pointer_buffers = []
        pointer_slot = {}
        names = plan_code.Names()
        kernels, externs = cg.kernels, layout["externs"]
        steps, uses = [], []
        allocated = set()
        for si, (kind, payload, args) in enumerate(cg.steps):
            if kind == "kernels":
                new = sorted({b for k in payload for b in kernels[k]["args"] if b in alloc and b not in allocated})
                allocated.update(new)
                for b in args:
                    if b in in_arena and b not in pointer_slot:
                        pointer_slot[b] = len(self.pointer_buffers)
                        self.pointer_buffers.append(b)
                steps.append(plan_code.KernelStep(si, tuple((b, pointer_slot.get(b)) for b in args),
                                                  tuple(alloc[b] for b in new)))
                uses.append(set(args))
            else:
                e = externs[payload]
                tensors = {Ref(nid, idx): _view_fn(view, layout_of, self._arena_view_specs, names, input_ids)
                           for nid, idx, view in e["tensor_args"]}
                # Tensor arguments ember's kernels apply instead (a convolution's bias).
                tensors.update({Ref(nid, idx): _none for nid, idx in e["none_args"]})
                for arg, sizes, strides in e.get("padded_args", ()):
                    nid, idx, view = e["tensor_args"][arg]
                    tensors[Ref(nid, idx)] = _padded_arg(runner, view, sizes, strides, buffers, names)
                fetch = _SymbolValues(tensors, imported.symbol_index, symbols)
                call = imported.calls[e["node"]]
                prepared = _prepared_call(runner, call, fetch, e, buffers) if e.get("prepared_args") else None
                expr = f"{names.bind(prepared, 'f')}(bufs)" if prepared is not None else \
                    plan_code.call_expr(runtime_op(call.op), call.args, call.kwargs, fetch, names)
                # Kernels read extern results with the strides ember compiled for;
                # ATen is checked on every call and its result copied if it differs.
                # An opaque result (a dtype, layout or device ember does not model) is ATen's
                # alone, passed on as it comes.
                expect = tuple(None if b < 0 else
                               plan_code.Expected(b, None, None, None) if buffers[b]["opaque"] else
                               plan_code.Expected(b, *layout_of[b], TORCH_DTYPES[buffers[b]["dtype"]])
                               for b in e["output_buffers"])
                steps.append(plan_code.ExternStep(expr, expect))
                uses.append({view[0] for _, _, view in e["tensor_args"]})
        constants = _SymbolValues({}, imported.symbol_index, symbols)
        # Inputs past the caller's arguments: the graph's attributes, then the SymFloat
        # scalars at these sizes (0-d f64, made once per plan).
        self.extra_inputs = list(runner.attr_tensors) + [
            torch.tensor(constants.value(sym), dtype=torch.float64, device=self.device)
            for sym in imported.scalar_inputs]
        outputs = []
        input_buffer = {index: b for b, index in self.inputs}
        views = {pos: view for pos, *view in imported.output_views}
        for pos, (out, spec) in enumerate(zip(imported.output_args, layout["outputs"])):
            if pos in views and views[pos][0] in input_buffer:
                # eager's view of the input (ImportedGraph.output_views), not ember's copy
                index, sizes, strides, offset = views[pos]
                sizes, strides, offset = (tuple(constants.value(x) if isinstance(x, SymValue) else x for x in v)
                                          for v in (sizes, strides, [offset]))
                outputs.append(f"bufs[{input_buffer[index]}].as_strided({sizes!r}, {strides!r}, {offset[0]!r})")
            elif spec is not None:
                outputs.append(_view_fn(spec, layout_of, (set(), 0, [])).source)
            elif isinstance(out, SymValue):
                outputs.append(plan_code.literal(constants.value(out), names))  # a size the backward needs
            else:
                outputs.append(plan_code.literal(out, names))
        # Drop each buffer after its last use (outputs are kept alive by the caller).
        keep = {spec[0] for spec in layout["outputs"] if spec is not None} | in_arena | \
            {input_buffer[v[0]] for v in views.values() if v[0] in input_buffer}
        last = {}
        for si, used in enumerate(uses):
            for b in used:
                last[b] = si
        release = [[] for _ in steps]
        for b, si in last.items():
            if b not in keep:
                release[si].append(b)
        self.steps = [dataclasses.replace(s, release=tuple(sorted(r))) for s, r in zip(steps, release)]
        self.source = plan_code.generate(self.steps, outputs, names)
        self.run = plan_code.compile_run(self.source, names, runner.profile_name)

    def new_workspace(self) -> _Workspace:
        """A workspace: every arena buffer a view of one allocation, followed by the views of
        arena buffers that extern ops take, and the pointers kernel steps take."""
        template = [None] * self.num_buffers
        arena = torch.empty(self.arena_bytes, dtype=torch.uint8, device=self.device)
        for b, offset, sizes, strides, dtype in self.arena_views:
            template[b] = arena[offset:].view(dtype).as_strided(sizes, strides)
        for b, sizes, strides, offset in self._arena_view_specs[2]:
            base = template[b]
            template.append(base.as_strided(sizes, strides, base.storage_offset() + offset))
        return _Workspace(template, [template[b].data_ptr() for b in self.pointer_buffers])


class GraphRunner:
    """Runs a compiled graph on the CPU. A device runner (cuda.py) changes where buffers
    live, which workspaces a call may reuse, and how kernel groups launch.

    It needs the compiled graph, the imported graph and the values of the graph's
    attributes (constants), not the FX graph: a runner rebuilt from a cache entry
    (python/ember/caches/aot_cache.py) is the same object as a freshly compiled one."""

    device = torch.device("cpu")
    # The profiler range each call runs in (backend.py names it after the graph's source).
    profile_name = "ember graph"

    def __init__(self, cg, imported: ImportedGraph, attr_tensors: list, prepare_weights: bool = True):
        # AOTAutograd passes the arguments as one list. An instance attribute, not a class
        # one: AOTAutograd wraps the backward in torch._dynamo.disable, whose
        # functools.wraps copies the instance __dict__ only.
        self._boxed_call = True
        self.cg = cg
        self.imported = imported
        self._eager = None  # set when this graph must run eagerly from now on
        self._finish_compile = None  # set while the C compiler runs in the background
        self.attr_tensors = list(attr_tensors)
        # Parameters prepared once and reused while unchanged (prepared.py); with
        # prepare_weights False they are prepared on every call.
        self.prepare_weights = prepare_weights
        self.prepared: list[_prepared.PreparedWeight] = []
        self.padded_inputs = {}  # padded matmul operands by view (_padded_arg)
        # A static graph has one plan; a graph with symbols one per set of symbol
        # values, made on its first call (the kernels are the same for all of them).
        self._symbol_args = imported.symbol_args
        self.symbol_values = _symbol_reader(imported.symbol_args)
        self._plans = collections.OrderedDict()  # symbol values -> plan, most recent last
        self._plan = None
        if not self._symbol_args:
            self._plan = _Plan(self, {"buffers": cg.buffers, "externs": cg.externs, "outputs": cg.outputs,
                                      "arena_bytes": cg.arena_bytes}, None)
        if getattr(cg, "kernels_ready", False):
            self._kernels_loaded()

    def wait_for_kernels(self, finish):
        """The kernels are still being built: the first call runs finish(), which waits for
        them and returns None, or a function to run the graph eagerly with (the compile
        failed), or raises (the compile failed and errors are to be raised)."""
        self._finish_lock = threading.Lock()
        self._finish_compile = finish

    def finish_kernels(self) -> None:
        """Waits for a background build of the kernels, if one runs; its outcome is then
        what a first call would see (kernels_failed())."""
        if self._finish_compile is not None:
            self._await_kernels()

    def kernels_failed(self) -> bool:
        """Whether the kernels are known to have failed to build; False while a background
        build runs (the first call waits for it and reports a failure)."""
        return self._finish_compile is None and self._eager is not None

    def _await_kernels(self):
        with self._finish_lock:  # concurrent first calls: one waits, the others see its outcome
            if self._finish_compile is not None:
                self._eager = self._finish_compile()
                self._finish_compile = None
                if self._eager is None:
                    self._kernels_loaded()

    def _kernels_loaded(self):
        # The first CPU kernel library loaded shows which OpenMP runtime the kernels bind to.
        if self.device.type == "cpu" and self.cg.kernels:
            openmp.check_once()

    def inputs_read(self) -> frozenset:
        """The indices of the inputs a call reads: those a kernel step, an ATen call or an
        output takes. Under dynamic=True Dynamo passes every float attribute of the model as
        a 0-d tensor made per call (a decoder's eps, dropout p and attention scale: 65 in a
        12-layer GPT-2), which the traced graph specializes and never reads; a call does not
        store them, and on a GPU does not copy them to the device."""
        read = getattr(self, "_inputs_read", None)
        if read is None:
            cg = self.cg
            ids = {b for kind, _, args in cg.steps if kind == "kernels" for b in args}
            ids.update(view[0] for e in cg.externs for _, _, view in e["tensor_args"])
            ids.update(spec[0] for spec in cg.outputs if spec is not None)
            read = self._inputs_read = frozenset(b["input_index"] for b in cg.buffers
                                                 if b["kind"] == "input" and b["id"] in ids)
        return read

    def _plan_for(self, args):
        key = self.symbol_values(args)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan(self, self.cg.layout(list(key)), key)
            # Each plan keeps its workspaces (arenas): hold a few, for the sizes seen last.
            while len(self._plans) > MAX_PLANS:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(key)
        return plan

    def _call_context(self, plan):
        """(the free workspaces this call may take one from, a function (step, pointers,
        *extra) that runs a kernel group, extra: its arguments after the pointers)."""
        if plan.symbols is None:
            return plan.workspaces, self.cg.run_step, ()
        return plan.workspaces, self.cg.run_step, (plan.symbols,)

    def __call__(self, args):
        # torch.profiler sets this flag while it records (Inductor's compiled graphs read it
        # too): a call with no profiler pays for one attribute read, not a range (~0.8 us).
        if _profiler._is_profiler_enabled:
            return self._profiled_call(args)
        return self.run(args)

    def _profiled_call(self, args):
        """A call inside a range named after the graph, with one range per kernel step named
        after its kernels (ATen's calls have their own), so a trace shows which graph and
        kernel the time went to."""
        with _RecordFunctionFast(self.profile_name):
            return self._run_profiled(args)

    def _run_profiled(self, args):
        return self.run(args, self._step_names())

    def _step_names(self):
        names = getattr(self, "_step_range_names", None)
        if names is None:
            kernels = self.cg.kernels
            names = self._step_range_names = {
                si: ", ".join(kernels[k]["name"] for k in payload)
                for si, (kind, payload, _) in enumerate(self.cg.steps) if kind == "kernels"}
        return names

    def _conform(self, r, expect):
        """The plans' conform(result, expect): _conform_result on this runner's device."""
        return _conform_result(r, expect, self.device)

    def run(self, args, step_names=None):
        """One call: the plan's steps in order. `step_names` (under a profiler): each kernel
        step runs in a range of that name."""
        if self._finish_compile is not None:
            self._await_kernels()
        if self._eager is not None:
            return self._in_own_layout(self._eager(*args))
        try:
            plan = self._plan or self._plan_for(args)
            free, launch, extra = self._call_context(plan)
            if step_names is not None:
                launch = _ranged(launch, step_names)
            workspace = free.pop() if free else plan.new_workspace()
            bufs = list(workspace.buffers)
            attrs = plan.extra_inputs
            nargs = len(args)
            for b, i in plan.inputs:
                bufs[b] = args[i] if i < nargs else attrs[i - nargs]
            out = plan.run(bufs, workspace.pointers, launch, extra, torch.empty_strided, self.device,
                           self._conform)
            free.append(workspace)
            return out
        except _ShapeMismatch as e:
            from .. import counters as stats, logs

            stats.count_fallback("runtime")
            logs.logger("fallback").warning("a compiled graph runs eagerly from now on: %s", e)
            self._eager = EagerReplay(self.imported, self.attr_tensors)
            return self._in_own_layout(self._eager(*args))

    def _in_own_layout(self, outs):
        """An eager run's outputs, those that leave in ember's layout (a forward's saved
        activations, ImportedGraph.own_layout) copied into it: the backward was compiled
        for the strides the forward reported, and reads them as such."""
        if not self.imported.own_layout or self._symbol_args:
            return outs
        outs = list(outs)
        for pos in self.imported.own_layout:
            spec = self.cg.outputs[pos]
            if spec is not None and isinstance(outs[pos], torch.Tensor) and outs[pos].stride() != tuple(spec[3]):
                outs[pos] = torch.empty_strided(tuple(spec[2]), tuple(spec[3]), dtype=outs[pos].dtype,
                                                device=outs[pos].device).copy_(outs[pos])
        return outs


def _symbol_reader(symbol_args):
    """A function args -> the values of the graph's symbols at a call with `args`, in the
    compiled graph's order (() for a static graph): the plans' key, read on every call.
    Where every symbol is a size input as it is (the usual case: Dynamo passes s0 as s0,
    AOTAutograd's backward may pass -s0 + 1), the inputs themselves, taken in one C call."""
    if not symbol_args or any(coef != 1 or const != 0 for _, coef, const in symbol_args):
        return lambda args: tuple((int(args[i]) - const) * coef for i, coef, const in symbol_args)
    indices = [i for i, _, _ in symbol_args]
    if len(indices) == 1:
        (i,) = indices
        return lambda args: (args[i],)
    return operator.itemgetter(*indices)


def _ranged(launch, step_names: dict):
    def run_step(si, ptrs, *extra):
        with _RecordFunctionFast(step_names[si]):
            return launch(si, ptrs, *extra)

    return run_step


class EagerReplay:
    """The imported graph run op by op in ATen: the eager fallback of a runner whose
    kernels cannot serve a call (an ATen result contradicted the graph's metadata)."""

    def __init__(self, imported: ImportedGraph, attr_tensors: list):
        self.imported = imported
        self.attr_tensors = list(attr_tensors)

    def __call__(self, *args):
        g = self.imported
        values = _SymbolValues({}, g.symbol_index,
                               [(int(args[i]) - const) * coef for i, coef, const in g.symbol_args])
        inputs = list(args) + self.attr_tensors + [torch.tensor(values.value(s), dtype=torch.float64)
                                                   for s in g.scalar_inputs]
        for nid, index in g.inputs.items():
            values[Ref(nid)] = inputs[index]

        def arg(v):
            if isinstance(v, Ref):
                return values[v]
            if isinstance(v, SymValue):
                return values.value(v)
            if isinstance(v, (list, tuple)):
                return type(v)(arg(x) for x in v)
            return v

        for nid, call in g.calls.items():
            out = runtime_op(call.op)(*arg(call.args), **{k: arg(v) for k, v in call.kwargs.items()})
            if isinstance(out, (list, tuple)):
                for idx, o in enumerate(out):
                    values[Ref(nid, idx)] = o
            else:
                values[Ref(nid)] = out
        return [arg(o) for o in g.output_args]

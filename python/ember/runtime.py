"""Runs a CompiledGraph: allocates buffers, launches kernel groups, calls ATen for externs.

Everything that can be decided once is decided in __init__, so a call is a flat
loop over precomputed steps.
"""
from __future__ import annotations

import torch
import torch.fx

from .fx_import import TORCH_DTYPES, ImportedGraph


class GraphRunner:
    _boxed_call = True  # AOTAutograd passes the arguments as one list

    def __init__(self, cg, imported: ImportedGraph, gm: torch.fx.GraphModule):
        self.cg = cg
        self.attr_tensors = [getattr(gm, t) for t in imported.attr_inputs]
        buffers = cg.buffers
        self.num_buffers = len(buffers)
        self.inputs = []  # (buffer id, argument index)
        alloc = {}  # buffer id -> (sizes, strides, dtype)
        for b in buffers:
            if b["kind"] == "input":
                self.inputs.append((b["id"], b["input_index"]))
            elif b["kind"] == "computed" and b["in_memory"]:
                alloc[b["id"]] = (tuple(b["sizes"]), tuple(b["strides"]), TORCH_DTYPES[b["dtype"]])
        self.expected_strides = {b["id"]: tuple(b["strides"]) for b in buffers if b["kind"] == "input"}

        externs = cg.externs
        kernels = cg.kernels
        steps = []
        produced_at = {}
        for si, (kind, payload, args) in enumerate(cg.steps):
            if kind == "kernels":
                outs = sorted({b for k in payload for b in kernels[k]["args"] if b in alloc and b not in produced_at})
                for b in outs:
                    produced_at[b] = si
                steps.append(("kernels", si, list(args), [(b,) + alloc[b] for b in outs]))
            else:
                e = externs[payload]
                node = imported.nodes[e["node"]]
                views = []
                for nid, idx, view in e["tensor_args"]:
                    fx = imported.refs.get((nid, idx))
                    views.append((fx, view))
                steps.append(("extern", node, views, list(e["output_buffers"])))
        self.steps = steps
        self.outputs = []
        for fx_out, spec in zip(imported.output_args, cg.outputs):
            if spec is None:
                self.outputs.append(("const", fx_out))
            else:
                self.outputs.append(("view", spec))
        # Release buffers after their last use (outputs are kept).
        last_use = {}
        for si, step in enumerate(steps):
            if step[0] == "kernels":
                for b in step[2]:
                    last_use[b] = si
            else:
                for _, view in step[2]:
                    last_use[view[0]] = si
        keep = {spec[0] for kind, spec in self.outputs if kind == "view"}
        self.release = [[] for _ in steps]
        for b, si in last_use.items():
            if b not in keep:
                self.release[si].append(b)
        self.buffer_layout = {b["id"]: (tuple(b["sizes"]), tuple(b["strides"])) for b in buffers}

    @staticmethod
    def _view(bufs, layout, spec):
        b, _dtype, sizes, strides, offset = spec
        t = bufs[b]
        if offset == 0 and layout[b] == (tuple(sizes), tuple(strides)):
            return t
        return t.as_strided(sizes, strides, t.storage_offset() + offset)

    def __call__(self, args):
        args = list(args) + self.attr_tensors
        bufs = [None] * self.num_buffers
        for b, i in self.inputs:
            bufs[b] = args[i]
        if self.expected_strides and _check_layouts():
            for b, _ in self.inputs:
                if tuple(bufs[b].stride()) != self.expected_strides[b]:
                    raise RuntimeError("ember: an input's strides differ from those the graph was compiled for")
        layout = self.buffer_layout
        run_step = self.cg.run_step
        for si, step in enumerate(self.steps):
            if step[0] == "kernels":
                for b, sizes, strides, dtype in step[3]:
                    bufs[b] = torch.empty_strided(sizes, strides, dtype=dtype)
                run_step(step[1], [bufs[b].data_ptr() for b in step[2]])
            else:
                _, node, views, outs = step
                env = {fx: self._view(bufs, layout, view) for fx, view in views}
                fargs = torch.fx.node.map_arg(node.args, lambda n: env[n])
                fkwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
                result = node.target(*fargs, **fkwargs)
                if len(outs) == 1:
                    if outs[0] >= 0:
                        bufs[outs[0]] = result
                else:
                    for b, r in zip(outs, result):
                        if b >= 0:
                            bufs[b] = r
            for b in self.release[si]:
                bufs[b] = None
        out = []
        for kind, spec in self.outputs:
            out.append(spec if kind == "const" else self._view(bufs, layout, spec))
        return out


def _check_layouts() -> bool:
    from .config import config

    return config.check_input_layouts

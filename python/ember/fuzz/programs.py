"""Programs of the differential fuzzer: a seed's inputs (shape, dtype, layout, values) and
its straight-line source, and how both become tensors and a function."""
from __future__ import annotations

import dataclasses
import math

import torch

DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
    "i64": torch.int64, "i32": torch.int32, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_KEYS = {v: k for k, v in DTYPES.items()}
FLOAT_KEYS = ("f32", "f64", "f16", "bf16")
INT_KEYS = ("i64", "i32", "i16", "i8", "u8")

# Machine epsilon per float dtype.
EPS = {"f64": 2.2e-16, "f32": 1.2e-7, "f16": 9.8e-4, "bf16": 7.8e-3}
# From most to least precise.
LOOSENESS = ["f64", "f32", "f16", "bf16"]
# Tolerances for inexact float outputs: (rtol, atol).
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
}


@dataclasses.dataclass
class InputSpec:
    """How to build one input: its logical shape and dtype, its memory layout, its values."""

    shape: list
    dtype: str
    layout: str = "contiguous"  # contiguous | permuted | sliced | expanded | offset
    layout_arg: list = dataclasses.field(default_factory=list)
    values: str = "normal"      # normal | specials | ints | wide_ints | bools | index
    scale: float = 1.0
    index_bound: int = 0        # for values == "index": every element in [0, index_bound)


@dataclasses.dataclass
class Program:
    seed: int
    inputs: list            # [InputSpec]
    lines: list             # python statements, each assigning one or more names
    outputs: list           # names returned

    def source(self) -> str:
        args = ", ".join(f"a{i}" for i in range(len(self.inputs)))
        body = "".join(f"    {ln}\n" for ln in self.lines)
        return f"def f({args}):\n{body}    return ({', '.join(self.outputs)},)\n"

    def to_json(self) -> dict:
        return {"seed": self.seed, "inputs": [dataclasses.asdict(s) for s in self.inputs],
                "lines": self.lines, "outputs": self.outputs}

    @staticmethod
    def from_json(d: dict) -> "Program":
        return Program(d["seed"], [InputSpec(**s) for s in d["inputs"]], list(d["lines"]), list(d["outputs"]))


def _namespace(reference: bool = False) -> dict:
    """Globals the program's source runs with. In the reference namespace every float
    dtype is float64, so the same source computes an fp64 reference."""
    ns = {"torch": torch, "F": torch.nn.functional, "inf": math.inf, "nan": math.nan}
    for key, dt in DTYPES.items():
        ns[f"D_{key}"] = torch.float64 if (reference and dt.is_floating_point) else dt
    return ns


def compile_source(prog: Program, reference: bool = False):
    ns = _namespace(reference)
    exec(compile(prog.source(), f"<fuzz seed {prog.seed}>", "exec"), ns)
    return ns["f"]


def make_input(spec: InputSpec, gen: torch.Generator, device: str | None = None) -> torch.Tensor:
    """The input `spec` describes. Values come from `gen` on the CPU, so a seed gives the
    same values on every device; the layout (strides, storage offset) is made on `device`."""
    dt = DTYPES[spec.dtype]
    shape = list(spec.shape)
    # The storage shape before the layout transformation.
    if spec.layout == "permuted":
        perm = spec.layout_arg
        base_shape = [shape[p] for p in perm]
    elif spec.layout == "sliced":
        base_shape = [s * st + 1 for s, st in zip(shape, spec.layout_arg)]
    elif spec.layout == "expanded":
        base_shape = [1 if d in spec.layout_arg else s for d, s in enumerate(shape)]
    elif spec.layout == "offset":
        base_shape = [max(1, math.prod(shape)) + spec.layout_arg[0]]
    else:
        base_shape = shape
    n = math.prod(base_shape)
    if spec.values == "index":
        flat = torch.randint(0, max(spec.index_bound, 1), (n,), generator=gen)
    elif spec.values == "bools":
        flat = torch.randint(0, 2, (n,), generator=gen).bool()
    elif spec.values == "ints":
        flat = torch.randint(-9, 10, (n,), generator=gen)
    elif spec.values == "wide_ints":
        # Values near the type's limits, so that arithmetic overflows (and wraps).
        info = torch.iinfo(dt) if dt != torch.bool else None
        lo, hi = (info.min, info.max) if info else (0, 1)
        flat = torch.randint(-9, 10, (n,), generator=gen)
        pick = torch.randint(0, 4, (n,), generator=gen)
        flat = torch.where(pick == 0, torch.full_like(flat, hi) - flat.abs(), flat)
        flat = torch.where(pick == 1, torch.full_like(flat, lo) + flat.abs(), flat)
    else:
        flat = torch.randn(n, generator=gen, dtype=torch.float64) * spec.scale
        if spec.values == "specials":
            specials = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0, 1.0, -1.0], dtype=torch.float64)
            pick = torch.randint(0, 3 * len(specials), (n,), generator=gen)
            hit = pick < len(specials)
            flat = torch.where(hit, specials[pick.clamp(max=len(specials) - 1)], flat)
        if not dt.is_floating_point:
            flat = flat.round().clamp(-100, 100)
    base = flat.to(dt).reshape(base_shape) if spec.layout != "offset" else flat.to(dt)
    if device is not None:
        base = base.to(device)
    if spec.layout == "permuted":
        inverse = [spec.layout_arg.index(d) for d in range(len(shape))]
        return base.permute(inverse)
    if spec.layout == "sliced":
        return base[tuple(slice(1, None, st) for st in spec.layout_arg)][tuple(slice(0, s) for s in shape)]
    if spec.layout == "expanded":
        return base.expand(shape)
    if spec.layout == "offset":
        k = spec.layout_arg[0]
        return base[k:k + math.prod(shape)].view(shape)
    return base


def make_inputs(prog: Program, device: str | None = None) -> list:
    gen = torch.Generator().manual_seed(prog.seed * 7919 + 17)
    return [make_input(s, gen, device) for s in prog.inputs]


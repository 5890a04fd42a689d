"""A plan's call as one straight-line Python function, generated once per plan.

The runner's per-call work is host time on every call of a compiled graph, and on a
small-batch GPU model it is the call's whole time (issue 23: GPT-2 at batch 4 spent
~35 us of host per step). A loop over step records pays, per step, for unpacking the
record, branching on its kind, a closure per argument of an ATen call and a list
comprehension per kernel group; the generated function pays for none of these:

    def run(bufs, P, launch, X, empty, dev, conform):
        launch(0, [bufs[3].data_ptr(), P[0]], *X)                # kernel step 0
        r = op1(bufs[5], bufs[12].as_strided((32, 64), (64, 1), bufs[12].storage_offset() + 0), bufs[6])
        if r.dtype is not d2 or r.shape != (32, 192) or r.stride() != (192, 1):
            r = conform(r, e3)                                   # rare: ATen disagreed
        bufs[101] = r
        bufs[7] = None                                           # its last use
        ...
        return [bufs[120]]

`bufs` is the call's buffer list (the workspace's template, inputs stored); `P` the
workspace's pointers of arena buffers, which do not move while the workspace lives, so
a kernel step gathers only the pointers of inputs, outputs and ATen results. Names such
as op1 and d2 are the plan's constants (ops, dtypes, prebuilt functions), bound in the
function's globals. `source` keeps the text (GraphRunner plan's `.source`), for debugging.
"""
from __future__ import annotations

import dataclasses
import keyword

from ..frontend.fx_import import Ref, SymValue


@dataclasses.dataclass(frozen=True)
class Allocation:
    """A buffer a kernel step writes first: allocated before the step, on every call."""
    buffer: int
    sizes: tuple
    strides: tuple
    dtype: object  # torch.dtype


@dataclasses.dataclass(frozen=True)
class Expected:
    """What the kernels were compiled to read of an ATen result. dtype None: an opaque value
    (a dtype, layout or device ember does not model), passed on unchecked."""
    buffer: int
    sizes: tuple | None
    strides: tuple | None
    dtype: object  # torch.dtype or None


@dataclasses.dataclass(frozen=True)
class KernelStep:
    """A group of kernels, run by one call into C++ (the compiled graph's step `index`)."""
    index: int
    pointers: tuple  # per argument, (buffer, its slot in the workspace's pointers or None)
    allocate: tuple[Allocation, ...] = ()
    release: tuple[int, ...] = ()  # buffers used here last: dropped after it


@dataclasses.dataclass(frozen=True)
class ExternStep:
    """One ATen call: its expression over the buffer list and what each result must be."""
    call: str
    expect: tuple[Expected | None, ...]  # None: a result no buffer holds
    release: tuple[int, ...] = ()


class Names:
    """The generated function's globals: each constant bound once under a fresh name."""

    def __init__(self, **fixed):
        self.values = dict(fixed)

    def bind(self, value, prefix: str = "c") -> str:
        name = f"{prefix}{len(self.values)}"
        self.values[name] = value
        return name


def literal(value, names: Names) -> str:
    """A constant as Python source: ints, bools, None and tuples of ints as literals (exact
    and folded by the compiler), anything else as a bound name."""
    if value is None or type(value) in (bool, int):
        return repr(value)
    if type(value) is tuple and all(type(v) is int for v in value):
        return repr(value)
    return names.bind(value)


def value_expr(value, fetch, names: Names) -> str:
    """The expression of one ATen call argument: graph values (Ref) and sizes (SymValue) by
    the fetch's access (a function bufs -> value, with `.source` when it has an expression),
    lists and tuples holding them element by element, constants as they are."""
    if isinstance(value, SymValue) and hasattr(fetch, "value"):
        return literal(fetch.value(value), names)  # a size: a constant of the plan
    if isinstance(value, (Ref, SymValue)):
        fn = fetch[value]
        source = getattr(fn, "source", None)
        return source if source is not None else f"{names.bind(fn, 'f')}(bufs)"
    if isinstance(value, (list, tuple)) and _holds_values(value):
        parts = [value_expr(v, fetch, names) for v in value]
        if type(value) is list:
            return "[" + ", ".join(parts) + "]"
        if type(value) is tuple:
            return "(" + "".join(p + ", " for p in parts) + ")"
        return f"{names.bind(type(value), 't')}([{', '.join(parts)}])"
    return literal(value, names)


def _holds_values(value) -> bool:
    return any(isinstance(v, (Ref, SymValue)) or (isinstance(v, (list, tuple)) and _holds_values(v)) for v in value)


def call_expr(target, args, kwargs, fetch, names: Names) -> str:
    """`target(args..., key=value...)` with every argument an expression over bufs."""
    parts = [value_expr(a, fetch, names) for a in args]
    odd = []  # keyword arguments that are not Python identifiers (aten's `from`)
    for key, value in kwargs.items():
        expr = value_expr(value, fetch, names)
        if key.isidentifier() and not keyword.iskeyword(key):
            parts.append(f"{key}={expr}")
        else:
            odd.append(f"{key!r}: {expr}")
    if odd:
        parts.append("**{" + ", ".join(odd) + "}")
    return f"{names.bind(target, 'op')}({', '.join(parts)})"


def result_lines(var: str, expect, names: Names) -> list[str]:
    """Lines that check one ATen result against the graph's metadata (a dtype, shape or
    stride that differs goes through conform(); a 0-d result must be on the device) and
    store it in its buffer."""
    sizes, strides, dtype = expect.sizes, expect.strides, expect.dtype
    lines = []
    if dtype is not None:
        cond = (f"{var}.dtype is not {names.bind(dtype, 'd')} or {var}.shape != {literal(sizes, names)} "
                f"or {var}.stride() != {literal(strides, names)}")
        if not sizes:
            cond += f" or {var}.device != dev"
        # Flash attention returns None for outputs its metadata calls tensors.
        cond = f"{var} is not None and ({cond})"
        lines += [f"if {cond}:", f"    {var} = conform({var}, {names.bind(expect, 'e')})"]
    lines.append(f"bufs[{expect.buffer}] = {var}")
    return lines


def generate(steps, outputs, names: Names) -> str:
    """The source of `run` for a plan's steps (KernelStep, ExternStep) and the outputs'
    expressions."""
    body = []
    for step in steps:
        if isinstance(step, KernelStep):
            for a in step.allocate:
                body.append(f"bufs[{a.buffer}] = empty({literal(a.sizes, names)}, {literal(a.strides, names)}, "
                            f"dtype={names.bind(a.dtype, 'd')}, device=dev)")
            ptrs = ", ".join(f"P[{slot}]" if slot is not None else f"bufs[{b}].data_ptr()" for b, slot in step.pointers)
            body.append(f"launch({step.index}, [{ptrs}], *X)")
        else:
            expects = step.expect
            if len(expects) == 1:
                body.append(f"r = {step.call}")
                if expects[0] is not None:
                    body += result_lines("r", expects[0], names)
            else:
                body.append(f"rs = {step.call}")
                for k, e in enumerate(expects):
                    if e is not None:
                        body.append(f"r = rs[{k}]")
                        body += result_lines("r", e, names)
        body += [f"bufs[{b}] = None" for b in step.release]
    body.append("return [" + ", ".join(outputs) + "]")
    return "def run(bufs, P, launch, X, empty, dev, conform):\n" + "".join(f"    {line}\n" for line in body)


def compile_run(source: str, names: Names, label: str):
    """The function `run` defined by `source`, its constants bound from `names`."""
    scope = dict(names.values)
    exec(compile(source, f"<ember plan {label}>", "exec"), scope)
    return scope["run"]

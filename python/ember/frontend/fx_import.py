"""FX (ATen) graph -> ember's graph text (see csrc/ir/graph.h for the format).

Arguments are written positionally, exactly as the op's schema lists them, with
defaults filled in, so the C++ lowering reads them by index. A tensor the IR does not
model (a dtype ember has no kernels for, a sparse layout, a tensor on another device)
is typed `opaque`: the ops that read or produce it run in ATen, the rest of the graph
compiles. What the text cannot express at all (a non-tensor value flowing between
nodes, a call that is not an ATen op) raises UnsupportedGraph, and the backend runs the
graph as the user's code would. Symbolic
sizes are written as size expressions over the graph's symbols
(docs/dynamic_shapes.md).
"""
from __future__ import annotations

import dataclasses
import math
import operator

import torch
import torch.fx

DTYPE_NAMES = {
    torch.bool: "bool",
    torch.uint8: "u8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
}
TORCH_DTYPES = {v: k for k, v in DTYPE_NAMES.items()}


class UnsupportedGraph(Exception):
    """The graph cannot be expressed in ember's IR; run it eagerly."""


@dataclasses.dataclass(frozen=True)
class Ref:
    """A value of the graph text: output `idx` of text node `nid` (`%nid.idx`)."""

    nid: int
    idx: int = 0


@dataclasses.dataclass(frozen=True)
class SymValue:
    """A SymInt (a size) or SymFloat computed from the graph's symbols: a sympy expression
    over the symbols of ImportedGraph.symbol_index, evaluated per set of symbol values."""

    expr: object
    is_float: bool = False


@dataclasses.dataclass(frozen=True)
class Call:
    """One ATen call of the graph: the op's qualified name ("aten::add.Tensor") and its
    arguments as FX had them, with graph values replaced by Ref and SymValue."""

    op: str
    args: tuple
    kwargs: dict


def op_name(op: torch._ops.OpOverload) -> str:
    schema = op._schema
    return f"{schema.name}.{schema.overload_name or 'default'}"


def resolve_op(name: str) -> torch._ops.OpOverload:
    """The OpOverload an op_name() names (ember's own ops once ember is imported)."""
    qualified, overload = name.rsplit(".", 1)
    namespace, op = qualified.split("::", 1)
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


class ImportedGraph:
    """The text plus what the runtime needs to run it: the ATen calls (for ops left to
    ATen) and the outputs, with no reference to FX, so that it can be stored in ember's
    format (graph_format.py) and a graph rebuilt without its GraphModule."""

    def __init__(self):
        self.text = ""
        self.node_ops: list[str] = []  # text node id -> its ATen op, or "input"
        self.calls: dict[int, Call] = {}  # text node id -> its ATen call, in graph order
        self.inputs: dict[int, int] = {}  # text node id of an "input" -> its runtime argument index
        self.num_placeholders = 0
        self.num_symbols = 0  # symbolic sizes (docs/dynamic_shapes.md); 0 for a static graph
        # Per symbol s<k>: (runtime argument i, coef, const) with args[i] == coef * s<k> + const.
        self.symbol_args: list[tuple[int, int, int]] = []
        self.symbol_index: dict = {}  # Dynamo's sympy symbol -> k
        # Per symbol s<k>, for explain: [where Dynamo read the size (its source, such as
        # "L['input_ids'].size()[1]"), the smallest and largest value its guards admit
        # (None: unbounded)].
        self.symbol_info: list = []
        self.attr_inputs: list[str] = []  # get_attr targets, passed after the placeholders
        # SymFloat values used as arguments (BatchNorm's n / (n - 1) with a symbolic n),
        # passed after the attributes as 0-d f64 tensors the runner computes per size.
        self.scalar_inputs: list[SymValue] = []
        self.output_args: list = []  # the graph's outputs: Ref, SymValue or constants
        # Outputs that are views of an input in eager: [output position, placeholder index,
        # sizes, strides, storage offset] (ints or SymValues). AOTAutograd regenerates such an
        # output from the input with the returned tensor's sizes, strides and storage offset
        # when its views take symbols, so ember returns eager's view of the input itself.
        self.output_views: list = []
        self.own_layout: list[int] = []  # output positions that leave in ember's layout (import_graph)
        self.op_counts: dict[str, int] = {}


def _is_tensor(v) -> bool:
    return isinstance(v, torch.Tensor)


class _Symbols:
    """Dynamo's size symbols, renamed s0, s1, ... in the order the graph's SymInt inputs
    bind them, and size expressions over them in the graph text's syntax. Expressions
    go through the ShapeEnv's simplify first, which knows the facts Dynamo's guards
    established (view(-1, 4) arrives as 4, not as a quotient of quotients). Printing a
    symbolic size never calls int() on it: that would specialize the graph."""

    def __init__(self):
        self.index: dict = {}  # sympy Symbol -> k
        self.hints: list[int] = []
        self.info: list = []  # per symbol: ImportedGraph.symbol_info

    def bind(self, value, derived_ok=True):
        """Registers the symbol a SymInt input carries. Returns (k, coef, const) such
        that the input's value is coef * s<k> + const (coef is 1 or -1: AOTAutograd
        passes the backward -s55 where the forward had s55), or None for a constant."""
        expr = value.node.expr
        if expr.is_Integer:
            return None  # a constant: its uses print the number
        free = list(expr.free_symbols)
        if len(free) == 1:
            s = free[0]
            coef, const = expr.coeff(s), expr.subs(s, 0)
            if coef in (1, -1) and const.is_Integer and (coef * s + const - expr) == 0:
                if s not in self.index:
                    self.index[s] = len(self.hints)
                    env = value.node.shape_env
                    hint = env.optimization_hint(s) if hasattr(env, "optimization_hint") else env.size_hint(s)
                    self.hints.append(int(hint))
                    self.info.append(_symbol_info(env, s))
                return self.index[s], int(coef), int(const)
        if not derived_ok or all(f in self.index for f in free):
            return None  # computed from symbols other inputs bind: its uses print the expression
        raise UnsupportedGraph(f"a SymInt input whose symbols no input binds ({expr})")

    def text(self, x) -> str:
        if isinstance(x, int):
            return str(x)
        if not isinstance(x, torch.SymInt):
            raise UnsupportedGraph(f"size of type {type(x).__name__}")
        node = x.node
        expr = node.shape_env.simplify(node.expr) if node.shape_env is not None else node.expr
        return self._print(expr)

    def _print(self, e) -> str:
        from torch.utils._sympy.functions import CeilToInt, FloorDiv, FloorToInt, IntTrueDiv, Max, Min, Mod, PythonMod

        if e.is_Integer:
            return str(int(e))
        if e.is_Symbol:
            if e not in self.index:
                raise UnsupportedGraph(f"size symbol {e} is not bound by a graph input")
            return f"s{self.index[e]}"
        if e.is_Add:
            return "(" + "+".join(self._print(a) for a in e.args) + ")"
        if e.is_Mul:
            return "(" + "*".join(self._print(a) for a in e.args) + ")"
        if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            return "(" + "*".join([self._print(e.base)] * int(e.exp)) + ")"
        if isinstance(e, FloorDiv):
            return f"({self._print(e.args[0])}//{self._print(e.args[1])})"
        if isinstance(e, (CeilToInt, FloorToInt)) and isinstance(e.args[0], IntTrueDiv):
            # ceil(a / b) and floor(a / b) of integers (math.ceil(s / 32); CUDA attention
            # kernels' padded sizes): Python's floor division, exact for any sign.
            a, b = (self._print(x) for x in e.args[0].args)
            return f"({a}//{b})" if isinstance(e, FloorToInt) else f"(0-((0-{a})//{b}))"
        if isinstance(e, (PythonMod, Mod)):
            return f"({self._print(e.args[0])}%{self._print(e.args[1])})"
        if isinstance(e, (Max, Min)):
            name = "max" if isinstance(e, Max) else "min"
            args = [self._print(a) for a in e.args]
            out = args[-1]
            for a in reversed(args[:-1]):
                out = f"{name}({a}, {out})"
            return out
        raise UnsupportedGraph(f"size expression {e} ({type(e).__name__}) is not supported")

    def header(self) -> str:
        if not self.hints:
            return "graph {"
        return "graph(" + ", ".join(f"s{k}={h}" for k, h in enumerate(self.hints)) + ") {"


def _symbol_info(env, s) -> list:
    """[source, min, max] of a Dynamo symbol (ImportedGraph.symbol_info); never raises:
    it only explains."""
    try:
        sources = env.var_to_sources.get(s) or []
        source = sources[0].name if sources else None
        source = source() if callable(source) else source
    except Exception:
        source = None
    bounds = [None, None]
    try:
        vr = env.var_to_range.get(s)
        if vr is not None:
            bounds = [int(b) if getattr(b, "is_Integer", False) else None for b in (vr.lower, vr.upper)]
    except Exception:
        pass
    return [source] + bounds


def opaque_reason(v, device: str = "cpu", host_ok: bool = False) -> str | None:
    """Why ember's IR does not model tensor `v` (the graph text then types it `opaque`,
    and only ATen calls read or produce it), or None. `host_ok`: a CPU tensor in a CUDA
    graph is modelled, the runner moving it to the device (a 0-d input each call, a
    constant once: cuda.py)."""
    if v.dtype not in DTYPE_NAMES:
        return f"dtype {v.dtype}"
    if v.layout != torch.strided:
        return f"layout {v.layout}"
    if host_ok and v.device.type == "cpu" and device != "cpu":
        return None
    if (v.device.type if device == "cpu" else str(v.device)) != device:
        return f"a tensor on {v.device} in a graph compiled for {device}"
    return None


def _is_host_scalar(v) -> bool:
    return _is_tensor(v) and v.dim() == 0 and v.device.type == "cpu"


def _type_text(v, symbols: _Symbols, device: str = "cpu", host_ok: bool = False) -> str:
    if not _is_tensor(v):
        return "none"
    if opaque_reason(v, device, host_ok) is not None:
        return "opaque"
    sizes = ",".join(symbols.text(s) for s in v.shape)
    strides = ",".join(symbols.text(s) for s in v.stride())
    return f"{DTYPE_NAMES[v.dtype]}[{sizes}]{{{strides}}}"


def _float_text(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    r = repr(float(x))
    return r if ("." in r or "e" in r) else r + ".0"


class _Writer:
    def __init__(self, g: ImportedGraph):
        self.g = g
        self.ids: dict[torch.fx.Node, tuple[int, int]] = {}
        self.symbols = _Symbols()
        self.add_input = None  # (fx node, index, type text) -> graph node id; set by import_graph
        self.first_scalar_input = 0

    def value(self, v) -> str:
        if isinstance(v, torch.fx.Node):
            val = v.meta.get("val")
            if isinstance(val, torch.SymInt):
                return self.symbols.text(val)  # a size (input or arithmetic), written as its expression
            if isinstance(val, torch.SymFloat) and v not in self.ids:
                # A float computed from sizes: a runtime scalar input (0-d f64).
                if not val.node.expr.free_symbols:
                    return _float_text(float(val.node.expr))
                index = self.first_scalar_input + len(self.g.scalar_inputs)
                self.g.scalar_inputs.append(SymValue(val.node.expr, is_float=True))
                self.ids[v] = (self.add_input(index, "f64[]{}"), 0)
            if v not in self.ids:
                raise UnsupportedGraph(f"value {v.name} is not a tensor ember can track")
            nid, idx = self.ids[v]
            return f"%{nid}" if idx == 0 else f"%{nid}.{idx}"
        if v is None:
            return "none"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return _float_text(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, torch.dtype):
            # A dtype ember has no kernels for: the node's result is opaque, so ATen runs it
            # with the original argument (ImportedGraph.calls); no lowering reads this one.
            return f'"{DTYPE_NAMES[v]}"' if v in DTYPE_NAMES else '"opaque"'
        if isinstance(v, torch.device):
            return f'"{v.type}"'
        if isinstance(v, (torch.layout, torch.memory_format)):
            return '"' + str(v).replace("torch.", "") + '"'
        if isinstance(v, str):
            if '"' in v:
                raise UnsupportedGraph("string argument with a quote")
            return f'"{v}"'
        if isinstance(v, torch.SymInt):
            return self.symbols.text(v)
        if isinstance(v, (torch.SymFloat, torch.SymBool)):
            raise UnsupportedGraph(f"symbolic {type(v).__name__} arguments are not supported")
        raise UnsupportedGraph(f"argument of type {type(v).__name__} is not supported")

    def portable(self, v):
        """An argument or output with FX nodes replaced by Ref (values of the text) and
        SymValue (sizes and SymFloats), for ImportedGraph.calls and output_args."""
        if isinstance(v, torch.fx.Node):
            if v in self.ids:
                return Ref(*self.ids[v])
            val = v.meta.get("val")
            if isinstance(val, (torch.SymInt, torch.SymFloat)):
                return SymValue(val.node.expr, is_float=isinstance(val, torch.SymFloat))
            raise UnsupportedGraph(f"value {v.name} is not a tensor ember can track")
        if isinstance(v, (list, tuple)):
            return (list if isinstance(v, list) else tuple)(self.portable(x) for x in v)
        if isinstance(v, dict):
            return {k: self.portable(x) for k, x in v.items()}
        return v


def _sizes(val) -> bool:
    """A tuple of sizes (x.size() in a graph ember's front end traced): its elements are
    read by getitem nodes, each a size of its own."""
    return isinstance(val, (tuple, list)) and len(val) > 0 and all(isinstance(v, (int, torch.SymInt)) for v in val) \
        and not isinstance(val, bool)


def _schema_args(node: torch.fx.Node) -> list:
    """The node's arguments in schema order, defaults filled in."""
    target = node.target
    schema = target._schema
    out = []
    for i, a in enumerate(schema.arguments):
        if i < len(node.args) and not a.kwarg_only:
            out.append(node.args[i])
        elif a.name in node.kwargs:
            out.append(node.kwargs[a.name])
        elif a.has_default_value():
            out.append(a.default_value)
        else:
            out.append(None)
    return out


def _source_op(node):
    """The call in the user's program (Dynamo's graph) that `node` is part of, or None."""
    source = node.meta.get("ember_source")  # a graph ember's front end traced (aten_trace.py)
    if source is not None:
        return source
    sources = node.meta.get("from_node")
    if sources:
        return tuple((getattr(s, "name", None), getattr(s, "graph_id", None)) for s in sources)
    # Backward graphs have no Dynamo node: the autograd node and the ATen op that was
    # decomposed stand for the call (a chain of one op within one formula counts as one).
    # seq_nr -1: no autograd node (a graph traced without grad, as a symbolic_trace'd
    # module through AOTAutograd): nothing ties its ops into one call. The ops are compared
    # by name: the traced graph's OpOverload objects need not be torch.ops' own.
    seq_nr, original = node.meta.get("seq_nr"), node.meta.get("original_aten")
    if seq_nr is None or seq_nr < 0 or original is None or str(original) == str(node.target):
        return None
    return ("backward", seq_nr, str(original))


def _inside_one_op(node, graph_outputs) -> bool:
    """Whether `node` is an intermediate of one eager op's decomposition: every reader
    comes from the same user-level call. Eager computes such a value inside one kernel
    and never rounds it to f16/bf16; every other value eager rounds (graph text
    attribute `internal`, csrc/ir/graph.h)."""
    source = _source_op(node)
    if source is None or node in graph_outputs:
        return False
    readers = list(node.users)
    if not readers:
        return False
    for user in readers:
        if user.target is operator.getitem:
            if user in graph_outputs:
                return False
            readers.extend(user.users)
        elif user.op != "call_function" or _source_op(user) != source:
            return False
    return True


def _output_views(outs, placeholders) -> list:
    """ImportedGraph.output_views: the outputs whose value shares an input's storage."""
    from torch.multiprocessing.reductions import StorageWeakRef

    def storage(v):
        if not isinstance(v, torch.Tensor) or v.is_sparse or v.layout != torch.strided:
            return None
        try:
            return StorageWeakRef(v.untyped_storage())
        except Exception:  # a tensor without a storage (a subclass)
            return None

    def portable(x):
        return SymValue(x.node.expr) if isinstance(x, torch.SymInt) else int(x)

    inputs = {}
    for i, n in enumerate(placeholders):
        s = storage(n.meta.get("val"))
        if s is not None:
            inputs.setdefault(s, i)
    views = []
    for pos, o in enumerate(outs):
        val = o.meta.get("val") if isinstance(o, torch.fx.Node) else None
        s = storage(val)
        if s is None or s not in inputs or o.op == "placeholder":
            continue
        views.append([pos, inputs[s], [portable(x) for x in val.shape], [portable(x) for x in val.stride()],
                      portable(val.storage_offset())])
    return views


def import_graph(gm: torch.fx.GraphModule, device: str = "cpu", any_strides=(), own_layout=()) -> ImportedGraph:
    """The graph text of `gm` and what the runner needs with it. `any_strides`: the output
    positions whose caller takes them with any strides ("all": every output), written as
    the return's `any_strides(..)` (csrc/ir/graph.h): ember may return views with other
    strides there (a padded matmul's slice: lower/pad_matmuls.h). `own_layout`: the output
    positions that leave in the layout ember stores them in (`own_layout(..)`: a training
    forward's saved activations, whose strides the caller reports to AOTAutograd)."""
    g = ImportedGraph()
    w = _Writer(g)
    lines = ["graph {"]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    g.num_placeholders = len(placeholders)
    graph_outputs = set()
    for n in gm.graph.nodes:
        if n.op == "output":
            graph_outputs.update(n.all_input_nodes)
    # 0-d CPU values computed inside a CUDA graph (DeBERTa's sqrt(torch.tensor(d) * s),
    # dividing its attention scores) are device values to ember: its kernels compute them
    # and fuse them into their readers. Not when one is returned: the caller must get it on
    # the CPU, so then every such value stays opaque (ATen's).
    device_scalars = device != "cpu" and not any(_is_host_scalar(n.meta.get("val")) for n in graph_outputs)

    def scalar_ok(v) -> bool:
        return device_scalars and _is_host_scalar(v)

    def add_line(op, args_text, type_text):
        nid = len(g.node_ops)
        g.node_ops.append(op)
        lines.append(f"  %{nid} = {op}({args_text}) : {type_text}")
        return nid

    def add_input(index, type_text):
        nid = add_line("input", str(index), type_text)
        g.inputs[nid] = index
        return nid

    # Runtime scalar inputs (SymFloat arguments) come after the attributes.
    w.first_scalar_input = g.num_placeholders + sum(1 for n in gm.graph.nodes if n.op == "get_attr")
    w.add_input = add_input

    # Symbols first: a tensor input may come before the SymInt input binding its size.
    for node in placeholders:
        if isinstance(node.meta.get("val"), torch.SymInt):
            w.symbols.bind(node.meta["val"], derived_ok=False)

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt):
                bound = w.symbols.bind(val)
                if bound is None:  # a constant: its uses print the number
                    continue
                k, coef, const = bound
                if k == len(g.symbol_args):
                    g.symbol_args.append((placeholders.index(node), coef, const))
                if (coef, const) == (1, 0):
                    add_line("sym_input", f"{placeholders.index(node)}, s{k}", "none")
                continue
            if val is not None and not _is_tensor(val):
                raise UnsupportedGraph(f"non-tensor graph input {node.name}")
            # A 0-d CPU tensor input of a CUDA graph (a Python float Dynamo left unspecialized,
            # such as a module's eps under dynamic=True) is moved to the device by the runner.
            w.ids[node] = (add_input(placeholders.index(node), _type_text(val, w.symbols, device, scalar_ok(val))), 0)
        elif node.op == "get_attr":
            val = getattr(gm, node.target)
            if not _is_tensor(val):
                raise UnsupportedGraph(f"non-tensor attribute {node.target}")
            index = g.num_placeholders + len(g.attr_inputs)
            g.attr_inputs.append(node.target)
            # A CPU constant (torch.tensor(...) in the model) of a CUDA graph moves to the device once.
            w.ids[node] = (add_input(index, _type_text(val, w.symbols, device, host_ok=device_scalars)), 0)
        elif node.op in ("call_function", "call_method"):
            val = node.meta.get("val")
            if isinstance(val, (torch.SymInt, torch.SymFloat)) or _sizes(val):
                continue  # size arithmetic: an expression, or a scalar input, where it is used
            if node.op == "call_method":
                raise UnsupportedGraph(f"method call {node.target} is not an ATen op")
            if node.target is operator.getitem:
                base, idx = node.args
                if base not in w.ids or not isinstance(idx, int):
                    raise UnsupportedGraph("getitem on an untracked value")
                nid, _ = w.ids[base]
                w.ids[node] = (nid, idx)
                continue
            if not isinstance(node.target, torch._ops.OpOverload):
                raise UnsupportedGraph(f"call to {node.target} is not an ATen op")
            name = str(node.target)
            g.op_counts[name] = g.op_counts.get(name, 0) + 1
            args_text = ", ".join(w.value(a) for a in _schema_args(node))
            val = node.meta.get("val")
            if isinstance(val, (list, tuple)):
                types = [_type_text(v, w.symbols, device, scalar_ok(v)) for v in val]
                type_text = "(" + ", ".join(types) + ")" if len(types) != 1 else types[0]
                if not types:
                    type_text = "none"
            else:
                type_text = _type_text(val, w.symbols, device, scalar_ok(val))
            if _inside_one_op(node, graph_outputs):
                type_text += " internal"
            nid = add_line(name, args_text, type_text)
            g.calls[nid] = Call(op_name(node.target), w.portable(tuple(node.args)), w.portable(dict(node.kwargs)))
            w.ids[node] = (nid, 0)
        elif node.op == "output":
            outs = node.args[0]
            if not isinstance(outs, (list, tuple)):
                outs = (outs,)
            parts = []
            for o in outs:
                if isinstance(o, torch.fx.Node):
                    parts.append(w.value(o))
                else:
                    parts.append("none")
            g.output_args = [w.portable(o) for o in outs]
            g.output_views = _output_views(outs, placeholders)
            aliases = {view[0] for view in g.output_views}  # returned as eager's views of an input
            own_layout = sorted({k for k in own_layout if 0 <= k < len(outs) and isinstance(outs[k], torch.fx.Node)
                                 and k not in aliases})
            g.own_layout = own_layout
            def positions(word, which):
                which = range(len(outs)) if which == "all" else sorted(set(which))
                which = [k for k in which if 0 <= k < len(outs) and isinstance(outs[k], torch.fx.Node)]
                return f" {word}(" + ", ".join(map(str, which)) + ")" if which else ""

            lines.append("  return (" + ", ".join(parts) + ")" + positions("any_strides", any_strides) +
                         positions("own_layout", own_layout))
        else:
            raise UnsupportedGraph(f"FX node kind {node.op} is not supported")
    lines.append("}")
    lines[0] = w.symbols.header()
    g.num_symbols = len(w.symbols.hints)
    g.symbol_index = dict(w.symbols.index)
    g.symbol_info = list(w.symbols.info)
    g.text = "\n".join(lines) + "\n"
    return g

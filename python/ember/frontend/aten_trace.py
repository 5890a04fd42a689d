"""Inference graphs to ATen without AOTAutograd: ember's own front end.

AOTAutograd traces a Dynamo graph twice under functionalization and fake tensors (once
for its metadata, once for the graph), and its cache key hashes torch's sources: about
1.4 s of a GPT-2 124M's 4.2 s cold first call on the CPU. An inference graph that
mutates no tensor and returns no view of an input needs none of what that buys (an
autograd.Function, input mutations written back, aliased outputs regenerated), so
ember traces it itself.

Each call of the Dynamo graph is traced to ATen on its own (ember's decomposition
table, fake inputs with the call's metadata; all calls in one make_fx session,
trace_session.py) once per distinct call in
the graph -- the same function, constants, and input shapes, strides and dtypes -- and
the ATen template is copied for every repeat: a transformer's layers repeat every call
of its first one, so a deep model costs about what one layer does. Each copied node records
the Dynamo node it came from (`ember_source`): fx_import tells a decomposition's
intermediates by it, as it does by `from_node` in AOTAutograd's graphs.

An in-place op on an intermediate (`nn.ReLU(inplace=True)`, `out += identity`: every
torchvision ResNet) becomes its functional form, whose result every later read sees.

Symbolic sizes (dynamic=True, automatic dynamic) are traced over Dynamo's own symbols:
the inputs keep their symbolic metadata, templates are keyed by size expressions, a size
passed between calls is a template input, and size arithmetic (`x.size(0) * 12`) stays a
node holding its symbolic value, whose expression fx_import writes where it is used.

trace() raises NotTraced, and AOTAutograd traces the graph as before, for a graph
that needs autograd, runs under autocast, takes a tensor subclass or a non-size
non-tensor input, calls a higher-order op or a runtime check, mutates an input or a
view, reads a mutated tensor through a view made before the mutation, or returns a view
of an input or a size.
"""
from __future__ import annotations

import dataclasses
import operator

import torch
import torch.fx
import torch.utils._pytree as pytree

# Calls that return no tensor but read tensors: their value (Dynamo's example value,
# fixed by the input metadata in a graph without symbols) replaces them.
_QUERY_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "stride", "storage_offset",
                            "is_contiguous", "element_size", "get_device", "is_floating_point", "is_complex",
                            "__len__"})
_QUERY_FUNCTIONS = (getattr, len, torch.numel, torch.is_floating_point, torch.is_complex, torch.Size, torch.sym_int,
                    torch.sym_float, torch.sym_max, torch.sym_min)
# Functions of Python values only (size arithmetic): their example value replaces them.
# Anything else that returns no tensor (autocast's enter and exit, say) is left to
# AOTAutograd: it may change how the graph computes.
_PURE_MODULES = ("_operator", "operator", "math", "builtins")
# Calls that change nothing a graph's values depend on: grad mode (nothing needs
# autograd), and the API usage logging some modules call (Hugging Face's masks, through
# torch's functional APIs), which returns None and has no example value.
_DROPPED_CALLS = (torch._C._set_grad_enabled, torch._C._log_api_usage_once)


class NotTraced(Exception):
    """The graph is left to AOTAutograd; the message says why."""


@dataclasses.dataclass
class Traced:
    gm: torch.fx.GraphModule  # ATen ops; placeholders in the Dynamo graph's order
    templates_traced: int  # distinct calls traced with make_fx (the rest were copies)


def static_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """The placeholders Dynamo marks static (parameters and buffers), as AOTAutograd
    reads them for CUDA graphs."""
    return [i for i, node in enumerate(gm.graph.find_nodes(op="placeholder"))
            if node.meta.get("tensor_dict", {}).get("_dynamo_static_input_type")]


def ineligible_reason(gm: torch.fx.GraphModule, example_inputs) -> str | None:
    """Why the graph needs AOTAutograd, or None."""
    grad = torch.is_grad_enabled()
    for node, x in zip(gm.graph.find_nodes(op="placeholder"), example_inputs):
        if not isinstance(x, torch.Tensor):
            if isinstance(node.meta.get("example_value"), torch.SymInt):
                continue  # a size Dynamo made symbolic, passed as an int
            return f"a non-tensor input ({type(x).__name__})"
        if type(x) not in (torch.Tensor, torch.nn.Parameter):
            return f"a tensor subclass input ({type(x).__name__})"
        if x.layout != torch.strided:
            return f"a {x.layout} input"
        if grad and x.requires_grad:
            return "it needs autograd"
    if torch._C._is_any_autocast_enabled():
        return "autocast is on"
    return None


def is_symbolic(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph has symbolic sizes (dynamic=True, or Dynamo's automatic dynamic)."""
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("example_value")
        if isinstance(val, torch.SymInt) or isinstance(val, torch.Tensor) and not _static(val):
            return True
    return False


def trace(gm: torch.fx.GraphModule, example_inputs, decompositions) -> Traced:
    """The ATen graph of an inference Dynamo graph (ineligible_reason() is None)."""
    from torch._guards import TracingContext
    from torch._subclasses.fake_tensor import FakeTensorMode

    context = TracingContext.try_get()
    fake_mode = context.fake_mode if context is not None and context.fake_mode is not None else FakeTensorMode()
    with torch.no_grad():
        return _Tracer(gm, example_inputs, decompositions, fake_mode).run()


def _static(t) -> bool:
    return all(isinstance(s, int) for s in t.shape) and all(isinstance(s, int) for s in t.stride()) and \
        isinstance(t.storage_offset(), int)


def global_state() -> tuple:
    """What else decides an ATen trace: the default dtype (torch.tensor(1.0)), determinism
    (some decompositions), and which attention kernels may run (SDPA picks one)."""
    cuda = torch.backends.cuda
    sdpa = tuple(getattr(cuda, f, lambda: None)() for f in ("flash_sdp_enabled", "mem_efficient_sdp_enabled",
                                                           "math_sdp_enabled", "cudnn_sdp_enabled"))
    return (torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(), sdpa)


def const_key(v):
    """A hashable, exact key for a constant argument, or None for a value ember does not
    key (the call is then traced without sharing)."""
    if v is None or v is Ellipsis or isinstance(v, (bool, int, str)):
        return (type(v).__name__, v)
    if isinstance(v, float):
        return ("float", v.hex())  # tells -0.0 from 0.0 and keeps NaN equal to itself
    if isinstance(v, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(v).__name__, str(v))
    if isinstance(v, torch.Size):
        return ("Size", tuple(v))
    if isinstance(v, slice):
        parts = (const_key(v.start), const_key(v.stop), const_key(v.step))
        return None if None in parts else ("slice", parts)
    if isinstance(v, complex):
        return ("complex", v.real.hex(), v.imag.hex())
    return None


def _size_key(s):
    """An int, or a symbolic value's expression over Dynamo's symbols."""
    return s.node.expr if _symbolic(s) else s


def tensor_key(t) -> tuple:
    return (tuple(_size_key(s) for s in t.shape), tuple(_size_key(s) for s in t.stride()),
            _size_key(t.storage_offset()), t.dtype, t.device)


def _symbolic(v) -> bool:
    return isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _has_tensor_or_symbol(value) -> bool:
    return any(isinstance(x, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))
               for x in pytree.tree_leaves(value))


def _functional(op):
    """The functional form of an in-place ATen op (add_.Tensor -> add.Tensor), or None:
    the op writes its first argument only, and the form without the underscore takes the
    same arguments and writes nothing."""
    schema = op._schema
    arguments = schema.arguments
    writes = [a.alias_info is not None and a.alias_info.is_write for a in arguments]
    if not writes or not writes[0] or any(writes[1:]):
        return None
    namespace, name = schema.name.split("::")
    if not name.endswith("_"):
        return None
    packet = getattr(getattr(torch.ops, namespace), name[:-1], None)
    functional = getattr(packet, schema.overload_name or "default", None) if packet is not None else None
    if functional is None or functional._schema.is_mutable:
        return None
    if [a.name for a in functional._schema.arguments] != [a.name for a in arguments]:
        return None
    return functional


def _pure(fn) -> bool:
    """A function of Python numbers only: operator's, math's, builtins, torch's sym_* (what
    Dynamo puts in a graph for math.sqrt of a symbolic float)."""
    if getattr(fn, "__module__", None) in _PURE_MODULES:
        return True
    name = getattr(fn, "__name__", "")
    return getattr(fn, "__module__", None) == "torch" and (name.startswith("sym_") or name.startswith("_sym_"))


class _Slice(tuple):
    """A slice's (start, stop, step) while its parts are mapped and flattened (pytree
    keeps a slice whole; a symbolic stop is a graph value like any other)."""


pytree.register_pytree_node(_Slice, lambda s: (list(s), None), lambda parts, _: _Slice(parts))


def _slices(v, flat: bool):
    """v with its slice objects as _Slice (flat) or _Slice back as slices, recursively."""
    if flat and isinstance(v, slice):
        return _Slice((_slices(v.start, flat), _slices(v.stop, flat), _slices(v.step, flat)))
    if not flat and isinstance(v, _Slice):
        return slice(*(_slices(x, flat) for x in v))
    if isinstance(v, dict):
        return {k: _slices(x, flat) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        parts = [_slices(x, flat) for x in v]
        return type(v)(*parts) if hasattr(v, "_fields") else type(v)(parts)
    return v


def _specialized(value):
    """The Python number a symbolic scalar holds (Dynamo makes a module's float attributes,
    a LayerNorm's eps, symbolic 0-d inputs read by .item() under dynamic=True). Reading it
    adds a guard on it to Dynamo's ShapeEnv, as AOTAutograd's trace does: another value is
    a recompilation, never a stale constant. A value computed from data raises: such a
    graph is AOTAutograd's."""
    try:
        return float(value) if isinstance(value, torch.SymFloat) else \
            bool(value) if isinstance(value, torch.SymBool) else int(value)
    except Exception as e:
        raise NotTraced(f"a data-dependent scalar ({type(e).__name__})") from e


def _is_view(op) -> bool:
    return any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns)


def _views_its_base(n: torch.fx.Node) -> bool:
    """Whether a traced node's value shares memory with its first argument: a view op, or an
    element of a view op's list (split, unbind); not an element of a multi-output op's fresh
    tensors (topk's values, which Mixtral's router divides in place)."""
    if n.target is operator.getitem:
        base = n.args[0]
        return isinstance(base, torch.fx.Node) and isinstance(base.target, torch._ops.OpOverload) and \
            _is_view(base.target)
    return isinstance(n.target, torch._ops.OpOverload) and _is_view(n.target)


class _Tracer:
    def __init__(self, gm, example_inputs, decompositions, fake_mode):
        self.src = gm
        self.inputs = list(example_inputs)
        self.decompositions = decompositions
        self.fake_mode = fake_mode
        self.graph = torch.fx.Graph()
        self.attrs: dict[str, torch.Tensor] = {}
        self.attr_names: dict[int, str] = {}  # id(tensor) -> its attribute
        self.env: dict[torch.fx.Node, object] = {}  # Dynamo node -> new node(s) or a constant
        # New node -> the placeholder or attribute whose memory it views, or itself.
        self.root: dict[torch.fx.Node, torch.fx.Node] = {}
        self.state = global_state()
        # Templates by call key, for this graph only: a process that compiles many graphs
        # keeps none of them (distinct graphs rarely share calls of the same shapes).
        self.templates: dict = {}
        self.traced = 0
        self.views: dict[torch.fx.Node, list] = {}  # root -> the views of it
        self.latest: dict[torch.fx.Node, torch.fx.Node] = {}  # a value mutated in place -> its new value
        self.mutations: list[tuple[torch.fx.Node, torch.fx.Node]] = []

    def run(self) -> Traced:
        from .trace_session import open_session

        self.session = open_session(self.fake_mode, self.decompositions)
        self.session.run(self._walk)
        self._check_mutations()
        gm = torch.fx.GraphModule(self.attrs, self.graph)
        return Traced(gm, self.traced)

    def _walk(self):
        placeholders = 0
        for node in self.src.graph.nodes:
            if node.op == "placeholder":
                x = self.inputs[placeholders]
                placeholders += 1
                new = self.graph.placeholder(node.name)
                example = node.meta.get("example_value")
                # A symbolic graph's inputs keep Dynamo's symbols (sizes, and size inputs).
                if isinstance(example, torch.SymInt):
                    new.meta["val"] = example
                else:
                    new.meta["val"] = self._fake(example if isinstance(example, torch.Tensor) else x)
                self.env[node] = self.root[new] = new
            elif node.op == "get_attr":
                value = attribute(self.src, node.target)
                if not isinstance(value, torch.Tensor):
                    raise NotTraced(f"attribute {node.target} is a {type(value).__name__}")
                new = self.graph.get_attr(self._add_attr(value))
                new.meta["val"] = self._fake(value)
                self.env[node] = self.root[new] = new
            elif node.op in ("call_function", "call_method"):
                self.env[node] = self._call(node)
            elif node.op == "output":
                self._output(node)
            else:
                raise NotTraced(f"an FX {node.op} node")

    def _fake(self, t):
        """A fake tensor with t's metadata, on memory of its own."""
        sizes, strides, offset = tuple(t.shape), tuple(t.stride()), t.storage_offset()
        with self.fake_mode:
            if offset == 0:
                return torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device)
            extent = 1 + sum((n - 1) * s for n, s in zip(sizes, strides) if n > 0) if all(sizes) else 0
            base = torch.empty(offset + extent, dtype=t.dtype, device=t.device)
            return base.as_strided(sizes, strides, offset)

    def _add_attr(self, value: torch.Tensor) -> str:
        name = self.attr_names.get(id(value))
        if name is None:
            name = self.attr_names[id(value)] = f"_ember_constant{len(self.attrs)}"
            self.attrs[name] = value
        return name

    def _output(self, node):
        def leaf(v):
            if not isinstance(v, torch.fx.Node):
                raise NotTraced(f"a graph output that is not a tensor ({type(v).__name__})")
            if self.root[v].op in ("placeholder", "get_attr"):
                raise NotTraced("an output is an input or a view of one")
            return v

        outs = pytree.tree_map(lambda v: self.env[v] if isinstance(v, torch.fx.Node) else v, node.args[0])
        self.graph.output(pytree.tree_map(lambda v: leaf(self._current(v) if isinstance(v, torch.fx.Node) else v),
                                          outs))

    def _call(self, node):
        target = node.target
        if isinstance(target, torch._ops.HigherOrderOperator):
            raise NotTraced(f"a higher-order op ({target})")
        if node.op == "call_function" and target in _DROPPED_CALLS:
            return None
        args = _slices((node.args, node.kwargs), flat=True)
        args = pytree.tree_map(lambda v: self.env[v] if isinstance(v, torch.fx.Node) else v, args)
        args = pytree.tree_map(lambda v: self._current(v) if isinstance(v, torch.fx.Node) else v, args)
        flat, spec = pytree.tree_flatten(args)
        if target is operator.getitem and isinstance(args[0][0], (list, tuple)):
            return args[0][0][_slices(args[0][1], flat=False)]  # an element of a multi-output call, or of a size
        distinct = list(dict.fromkeys(x for x in flat if isinstance(x, torch.fx.Node)))
        if "example_value" not in node.meta:  # Dynamo records one for every value it computes
            if target is operator.setitem:
                raise NotTraced("it assigns into a tensor in place (x[...] = v), which AOTAutograd functionalizes")
            raise NotTraced(f"{_name(node)} has no example value")
        example = node.meta["example_value"]
        if not any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(example)):
            tensors = [x for x in distinct if isinstance(x.meta.get("val"), torch.Tensor)]
            if node.op == "call_method":
                pure = target in _QUERY_METHODS or not tensors
            else:
                pure = target in _QUERY_FUNCTIONS or (not tensors and _pure(target))
            if node.op == "call_method" and target == "item" and _symbolic(example):
                return _specialized(example)
            if not pure:
                raise NotTraced(f"{_name(node)} returns no tensor")
            if not _has_tensor_or_symbol(example):
                return example
            if not distinct:  # arithmetic on values specialized above: compute it
                call_args, kwargs = _slices(args, flat=False)
                return target(*call_args, **kwargs) if node.op == "call_function" else \
                    getattr(call_args[0], target)(*call_args[1:], **kwargs)
            return self._size_value(node, _slices(args, flat=False), example)
        slot = {n: i for i, n in enumerate(distinct)}
        key = [node.op, target, str(spec), self.state]
        for x in flat:
            if isinstance(x, torch.fx.Node):
                val = x.meta["val"]
                k = ("t", slot[x], tensor_key(val)) if isinstance(val, torch.Tensor) else ("s", slot[x], _size_key(val))
            else:
                k = const_key(x)
            if k is None:
                key = None
                break
            key.append(k)
        key = tuple(key) if key is not None else None
        template = self.templates.get(key) if key is not None else None
        if template is None:
            template = self._trace_call(node, flat, spec, distinct)
            if key is not None:
                self.templates[key] = template
        return self._copy(template, distinct, node.name)

    def _size_value(self, node, args, example):
        """A size (or sizes) computed from symbolic ones: a node of the graph holding the
        value as Dynamo traced it (fx_import writes its expression where it is used), or
        for a tuple of sizes (x.size()) a tuple of such nodes and ints."""
        new = self.graph.create_node(node.op, node.target, *args)
        new.meta["val"] = example
        self.root[new] = new
        if _symbolic(example):
            return new
        if not isinstance(example, (tuple, list)) or not all(isinstance(v, (int, torch.SymInt)) for v in example):
            raise NotTraced(f"{_name(node)} returns {type(example).__name__} of symbolic values")
        parts = []
        for i, v in enumerate(example):
            if isinstance(v, torch.SymInt):
                item = self.graph.call_function(operator.getitem, (new, i))
                item.meta["val"] = v
                self.root[item] = item
                parts.append(item)
            else:
                parts.append(v)
        return tuple(parts)

    def _trace_call(self, node, flat, spec, distinct):
        """One call traced to ATen (trace_session.py) over fake inputs with the metadata of
        its distinct tensor arguments: (graph holder, output spec, output leaves: index of a
        traced output or a constant)."""
        self.traced += 1
        position = {n: i for i, n in enumerate(distinct)}
        target, is_method = node.target, node.op == "call_method"
        out_info = {}

        def call(*tensors):
            leaves = [tensors[position[x]] if isinstance(x, torch.fx.Node) else x for x in flat]
            args, kwargs = _slices(pytree.tree_unflatten(leaves, spec), flat=False)
            out = getattr(args[0], target)(*args[1:], **kwargs) if is_method else target(*args, **kwargs)
            out_flat, out_spec = pytree.tree_flatten(out)
            out_info["spec"] = out_spec
            if any(_symbolic(o) for o in out_flat):
                raise NotTraced(f"{_name(node)} returns a symbolic size")
            out_info["leaves"] = [("t", None) if isinstance(o, torch.Tensor) else ("c", o) for o in out_flat]
            return [o for o in out_flat if isinstance(o, torch.Tensor)]

        fakes = [self._fake(n.meta["val"]) if isinstance(n.meta["val"], torch.Tensor) else n.meta["val"]
                 for n in distinct]
        try:
            tgm = self.session.trace(call, fakes)
        except NotTraced:
            raise
        except Exception as e:  # AOTAutograd may still trace it, or report the error itself
            raise NotTraced(f"tracing {_name(node)} failed ({type(e).__name__}: {e})") from e
        for n in tgm.graph.nodes:
            if n.op != "call_function" or n.target is operator.getitem or _symbolic(n.meta.get("val")):
                continue  # size arithmetic over symbols: fx_import writes its expression
            if not isinstance(n.target, torch._ops.OpOverload):
                raise NotTraced(f"{_name(node)} traces to {n.target}, not an ATen op")
            if n.target._schema.is_mutable and _functional(n.target) is None:
                raise NotTraced(f"{_name(node)} mutates a tensor ({n.target})")
        return tgm, out_info["spec"], out_info["leaves"]

    def _copy(self, template, inputs, source):
        """The template's nodes appended to the graph over `inputs`; the call's value."""
        tgm, out_spec, out_leaves = template
        vmap = {}
        args = iter(inputs)
        outs = []
        for n in tgm.graph.nodes:
            if n.op == "placeholder":
                vmap[n] = next(args)
            elif n.op == "get_attr":
                new = self.graph.get_attr(self._add_attr(attribute(tgm, n.target)))
                new.meta = dict(n.meta)
                vmap[n] = self.root[new] = new
            elif n.op == "output":
                outs = list(n.args[0])
            elif isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable:
                vmap[n] = vmap[n.args[0]] = self._functionalize(n, vmap, source)
            else:
                new = self.graph.node_copy(n, lambda a: vmap[a])
                new.meta["ember_source"] = source
                base = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
                if base is not None and _views_its_base(n):
                    root = self.root[new] = self.root[vmap[base]]
                    self.views.setdefault(root, []).append(new)
                else:
                    self.root[new] = new
                vmap[n] = new
        traced = iter(vmap[o] for o in outs)
        return pytree.tree_unflatten([next(traced) if kind == "t" else c for kind, c in out_leaves], out_spec)

    def _functionalize(self, n, vmap, source):
        """An in-place op (relu_, add_ of `out += identity`) on an intermediate, or on a view
        of one (Falcon's `mlp_output += attention_output`, the view of a linear's result), as
        its functional form: the result replaces the mutated value for every later read.
        That is exact as long as nothing reads the view's base, or another view of it, after
        the mutation (_check_mutations). A mutated input, or a view of one, is AOTAutograd's
        to functionalize (its writes must reach the caller's tensor)."""
        mutated = vmap[n.args[0]]
        root = self.root[mutated]
        if root.op in ("placeholder", "get_attr"):
            raise NotTraced(f"it mutates an input or a view of one ({n.target})")
        op = _functional(n.target)
        args = torch.fx.node.map_arg(n.args, lambda a: vmap[a])
        kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: vmap[a])
        vals = torch.fx.node.map_arg((args, kwargs), lambda a: a.meta["val"])
        with self.fake_mode:
            val = op(*vals[0], **vals[1])
        new = self.graph.call_function(op, args, kwargs)
        new.meta.update(val=val, ember_source=source)
        want = mutated.meta["val"]
        if val.dtype != want.dtype:  # the in-place op kept the mutated tensor's dtype
            new = self.graph.call_function(torch.ops.prims.convert_element_type.default, (new, want.dtype))
            with self.fake_mode:
                new.meta.update(val=torch.ops.prims.convert_element_type.default(val, want.dtype),
                                ember_source=source)
        self.root[new] = new
        self.latest[mutated] = new
        self.mutations.append((mutated, root, new))
        return new

    def _current(self, value):
        """A value as later reads see it: after the in-place ops applied to it so far."""
        while value in self.latest:
            value = self.latest[value]
        return value

    def _check_mutations(self):
        """No read of a mutated value, of its base, or of a view of that base may come after
        the mutation: such a read wants the new value, which the old nodes do not hold."""
        if not self.mutations:
            return
        order = {node: i for i, node in enumerate(self.graph.nodes)}
        for old, root, new in self.mutations:
            for v in dict.fromkeys([old, root] + self.views.get(root, [])):
                if any(order[u] > order[new] for u in v.users):
                    raise NotTraced("a tensor mutated in place is read through its base or a view made before "
                                    "the mutation")


def attribute(module, target: str):
    """The attribute a get_attr node names (a dotted path)."""
    for part in target.split("."):
        module = getattr(module, part)
    return module


def _name(node) -> str:
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    return getattr(node.target, "__name__", str(node.target))

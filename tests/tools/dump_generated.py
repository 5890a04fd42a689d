"""The generated C and CUDA of every test graph, and a comparison: a refactor of the C++
core must leave them byte-identical.

    python tests/tools/dump_generated.py collect CORPUS          graph texts of the test cases
    python tests/tools/dump_generated.py dump CORPUS OUT          C and CUDA for each graph
    python tests/tools/dump_generated.py compare BASE NEW         exit 1 on any difference
    python tests/tools/dump_generated.py check CORPUS BASE        dump to a temporary dir, compare
    python tests/tools/dump_generated.py roundtrip CORPUS         IR texts parse back to the same code

`collect` runs torch (minutes; the op tests compile their kernels): the C++ tests' graphs
(the test binary records them: tests/cpp/record_graph.h), the graphs of
tests/python/cuda_cases.py as the CUDA codegen test captures them (AOTAutograd, forward
and backward), the built-in examples (python/ember/examples.py) and tiny transformers
through ember's CPU backend and through AOTAutograd, and every graph the op, model,
dynamic-shape and fuzz tests compile. Each graph is CORPUS/<name>.graph with the CPU
options it was compiled with in <name>.json.

`roundtrip` checks, for every graph and both targets, that the pipeline's IR passes its
verifier after every pass, and that the program and schedule texts parse back: printing
what was parsed gives the same text, and the passes after it (run_passes) generate the
same source as the pipeline.

`dump` runs no compiler (build=False): per graph, <name>.c (the C source), <name>.cu (the
CUDA source for sm_90, or the refusal), <name>.variants.cu (max-autotune's candidates of
each kernel function), and .info files with what the source does not show (kernels'
arguments and launches, buffers, the arena plan, steps). `dump --short-names` (and `check
--short-names`) names kernels ember_k<N> (descriptive_names off), to compare with a dump
made before kernels had descriptive names.
"""
import argparse
import difflib
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU_OPTIONS = ("fuse", "pad_matmuls", "emulate_precision_casts", "channels_last_activations", "descriptive_names")
CUDA_OPTIONS = ("fuse", "pad_matmuls", "emulate_precision_casts", "descriptive_names")


def _write_graph(corpus: str, name: str, text: str, options: dict) -> None:
    with open(os.path.join(corpus, name + ".graph"), "w") as f:
        f.write(text)
    with open(os.path.join(corpus, name + ".json"), "w") as f:
        json.dump(options, f, sort_keys=True)


def _digest(text: str, options: dict) -> str:
    return hashlib.sha256((text + json.dumps(options, sort_keys=True)).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- collect


def _collect_cpp(corpus: str, binary: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, EMBER_RECORD_GRAPHS=d)
        subprocess.run([binary], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for path in sorted(glob.glob(os.path.join(d, "*.graph"))):
            with open(path) as f:
                text = f.read()
            _write_graph(corpus, "cpp_" + _digest(text, {}), text, {})
    print(f"cpp: {len(glob.glob(os.path.join(corpus, 'cpp_*.graph')))} graphs")


def _aot_capture(fn, args, train=False, dynamic=None):
    """[(kind, graph text)] of the graphs AOTAutograd makes of fn(*args), as
    tests/python/test_cuda_codegen.py captures them."""
    import torch
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    from ember.frontend.decompositions import decomposition_table
    from ember.frontend.fx_import import import_graph

    texts = []

    def compiler(kind):
        def compile_(gm, example_inputs):
            texts.append((kind, import_graph(gm).text))
            return make_boxed_func(gm) if train else gm
        return compile_

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=compiler("forward" if train else "inference"),
                                     bw_compiler=compiler("backward"), decompositions=decomposition_table())

    torch._dynamo.reset()
    if train:
        out = torch.compile(fn, backend=backend, dynamic=dynamic)(*args)
        (out if out.dim() == 0 else out.float().sum()).backward()
    else:
        with torch.no_grad():
            torch.compile(fn, backend=backend, dynamic=dynamic)(*args)
    return texts


def _add_captured(corpus: str, prefix: str, captured) -> None:
    for i, (kind, text) in enumerate(captured):
        _write_graph(corpus, f"{prefix}_{i}", text, {"channels_last_activations": kind == "inference"})


def _collect_cases(corpus: str) -> None:
    import torch

    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    from cuda_cases import CASES, DYNAMIC, TRAINING

    for name in sorted(CASES):
        torch.manual_seed(0)
        fn, args = CASES[name]("cpu")
        _add_captured(corpus, f"case_{name}", _aot_capture(fn, args))
    for name in sorted(TRAINING):
        torch.manual_seed(0)
        fn, args = TRAINING[name]("cpu")
        _add_captured(corpus, f"train_{name}", _aot_capture(fn, args, train=True))
    for name in sorted(DYNAMIC):
        torch.manual_seed(0)
        fn, arg_sets = DYNAMIC[name]("cpu")
        _add_captured(corpus, f"dynamic_{name}", _aot_capture(fn, arg_sets[0], dynamic=True))
    print(f"cuda_cases: {len(glob.glob(os.path.join(corpus, '*_*.graph')))} graphs so far")


def _tiny_bert():
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=64)
    model = BertModel(cfg).eval()

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids).last_hidden_state

    return Hidden(), (torch.randint(0, 512, (2, 32)),)


def _models():
    """(name, model, inputs) of the built-in examples and tiny transformers."""
    from ember import examples

    out = []
    for name, make in sorted(examples.MODELS.items()):
        model, inputs = make()
        out.append((name, model, tuple(inputs)))
    model, inputs = _tiny_bert()
    out.append(("tiny_bert", model, inputs))
    return out


def _collect_models(corpus: str) -> None:
    import torch

    for name, model, inputs in _models():
        _add_captured(corpus, f"model_{name}", _aot_capture(model, inputs))
        floats = all(not isinstance(x, torch.Tensor) or x.is_floating_point() or x.dtype == torch.long for x in inputs)
        if floats:
            model.train()
            _add_captured(corpus, f"model_train_{name}", _aot_capture(model, inputs, train=True))
            model.eval()


class _Recorder:
    """Wraps _core.compile and _core.compile_cuda: each graph text they compile, with its
    options, goes into the corpus (then the real compile runs)."""

    def __init__(self, corpus: str, prefix: str):
        self.corpus, self.prefix = corpus, prefix

    def install(self):
        from ember import _core

        real_cpu, real_cuda = _core.compile, _core.compile_cuda

        def compile_cpu(text, **kwargs):
            options = {k: v for k, v in kwargs.items() if k in CPU_OPTIONS}
            _write_graph(self.corpus, f"{self.prefix}_{_digest(text, options)}", text, options)
            return real_cpu(text, **kwargs)

        def compile_cuda(text, **kwargs):
            options = {k: v for k, v in kwargs.items() if k in CUDA_OPTIONS}
            _write_graph(self.corpus, f"{self.prefix}_{_digest(text, options)}", text, options)
            return real_cuda(text, **kwargs)

        _core.compile, _core.compile_cuda = compile_cpu, compile_cuda


def _collect_backend(corpus: str) -> None:
    """The built-in examples and tiny transformers through ember's CPU backend (its own
    front end for inference, AOTAutograd for training), as users compile them."""
    import torch

    import ember

    _Recorder(corpus, "backend").install()
    for name, model, inputs in _models():
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(model, backend="ember")(*inputs)
    n = len(glob.glob(os.path.join(corpus, "backend_*.graph")))
    print(f"backend: {n} graphs")
    assert ember is not None


class RecordPlugin:
    """A pytest plugin: every graph the tests compile goes into $EMBER_DUMP_CORPUS."""

    def pytest_configure(self, config):
        _Recorder(os.environ["EMBER_DUMP_CORPUS"], "pytest").install()


def _collect_pytest(corpus: str, tests: list[str]) -> None:
    env = dict(os.environ, EMBER_DUMP_CORPUS=corpus, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-c",
           "import sys, pytest, dump_generated; sys.exit(pytest.main(sys.argv[1:], plugins=[dump_generated.RecordPlugin()]))",
           "-q", "-x", "-p", "no:cacheprovider", *tests]
    subprocess.run(cmd, cwd=ROOT, env=env, check=False)
    print(f"pytest: {len(glob.glob(os.path.join(corpus, 'pytest_*.graph')))} graphs")


DEFAULT_TESTS = ["tests/python/test_ops_pointwise.py", "tests/python/test_ops_reduction.py",
                 "tests/python/test_ops_norm.py", "tests/python/test_ops_views.py", "tests/python/test_ops_indexing.py",
                 "tests/python/test_ops_pooling.py", "tests/python/test_models.py", "tests/python/test_dynamic_shapes.py",
                 "tests/python/test_fuzz.py", "tests/python/test_pad_matmuls.py", "tests/python/test_training.py"]


def collect(args) -> None:
    os.makedirs(args.corpus, exist_ok=True)
    parts = args.only.split(",") if args.only else ["cpp", "cases", "models", "backend", "pytest"]
    if "cpp" in parts:
        _collect_cpp(args.corpus, args.cpp_tests)
    if "cases" in parts:
        _collect_cases(args.corpus)
    if "models" in parts:
        _collect_models(args.corpus)
    if "backend" in parts:
        _collect_backend(args.corpus)
    if "pytest" in parts:
        _collect_pytest(args.corpus, args.tests or DEFAULT_TESTS)
    print(f"{len(glob.glob(os.path.join(args.corpus, '*.graph')))} graphs in {args.corpus}")


# ---------------------------------------------------------------- dump


def _info(cg) -> str:
    info = {"kernels": cg.kernels, "steps": [list(map(str, s)) for s in cg.steps], "arena_bytes": cg.arena_bytes,
            "buffers": [(b["id"], b["in_memory"], b["arena_offset"], b["sizes"], b["strides"]) for b in cg.buffers]}
    return json.dumps(info, indent=1, sort_keys=True, default=str) + "\n"


def _generate(text: str, options: dict, short_names: bool = False) -> dict:
    """{file suffix: content} for one graph."""
    from ember import _core

    out = {}
    if short_names and "descriptive_names" in (_core.compile.__doc__ or ""):
        # A core older than descriptive names has only the short ones (and no such option).
        options = dict(options, descriptive_names=False)
    cpu = {k: v for k, v in options.items() if k in CPU_OPTIONS}
    try:
        cg = _core.compile(text, disk_cache=False, build=False, **cpu)
        out[".c"] = cg.source
        out[".c.info"] = _info(cg)
    except Exception as e:  # the error is the output: it must stay the same too
        out[".c"] = f"ERROR {type(e).__name__}: {e}\n"
    cuda = {k: v for k, v in options.items() if k in CUDA_OPTIONS}
    try:
        cg = _core.compile_cuda(text, arch="sm_90", disk_cache=False, build=False, **cuda)
        out[".cu"] = cg.source
        out[".cu.info"] = _info(cg)
        variants = []
        for k, kernel in enumerate(cg.kernels):
            if kernel["function"] != kernel["name"]:
                continue
            for choice, source in cg.variants(k):
                variants.append(f"/* {kernel['name']}: {choice} */\n{source}")
        if variants:
            out[".variants.cu"] = "".join(variants)
    except Exception as e:
        out[".cu"] = f"ERROR {type(e).__name__}: {e}\n"
    return out


def dump(args) -> None:
    os.makedirs(args.out, exist_ok=True)
    graphs = sorted(glob.glob(os.path.join(args.corpus, "*.graph")))
    for path in graphs:
        name = os.path.basename(path)[:-len(".graph")]
        with open(path) as f:
            text = f.read()
        options_path = path[:-len(".graph")] + ".json"
        options = json.load(open(options_path)) if os.path.exists(options_path) else {}
        for suffix, content in _generate(text, options, getattr(args, "short_names", False)).items():
            with open(os.path.join(args.out, name + suffix), "w") as f:
                f.write(content)
    print(f"dumped {len(graphs)} graphs into {args.out}")


# ---------------------------------------------------------------- roundtrip


def _roundtrip_one(text: str, options: dict) -> list[str]:
    """What fails for one graph (empty: nothing)."""
    from ember import _core

    problems = []
    for cuda in (False, True):
        opts = {k: v for k, v in options.items() if k in (CUDA_OPTIONS if cuda else CPU_OPTIONS)}
        # Program and schedule texts carry no graph, whose ops name_kernels reads: short names.
        opts["descriptive_names"] = False
        if cuda:
            opts.setdefault("pad_matmuls", True)
        target = "cuda" if cuda else "c"
        try:
            if cuda:
                source = _core.compile_cuda(text, arch="sm_90", disk_cache=False, build=False, verify=True, **opts).source
            else:
                source = _core.compile(text, disk_cache=False, build=False, verify=True, **opts).source
        except Exception as e:  # a refusal or an error stays what it was: the dump checks that
            if "invalid program" in str(e) or "invalid schedule" in str(e):
                problems.append(f"{target}: {e}")
            continue

        def run(ir, passes):
            return _core.run_passes(ir, passes, cuda=cuda, **opts)

        front = ["lower_graph"] + (["pad_matmuls"] if opts.get("pad_matmuls") else []) + ["eliminate_dead_code"]
        try:
            program = run(text, front)
            symbolic = program.startswith("program(s0=")
            middle = ["fuse", "merge_inner_dims"] + (["merge_symbolic_outer_dims"] if cuda and symbolic else []) + \
                     ([] if cuda else ["split_reductions"])
            state = run(program, middle)
            generate = ["generate_cuda" if cuda else "generate_c"]
            if run(program, []) != program:
                problems.append(f"{target}: the program text does not print back the same")
            if run(state, []) != state:
                problems.append(f"{target}: the schedule text does not print back the same")
            if run(program, middle + generate) != source:
                problems.append(f"{target}: code from the parsed program differs")
            if run(state, generate) != source:
                problems.append(f"{target}: code from the parsed schedule differs")
        except Exception as e:
            problems.append(f"{target}: {type(e).__name__}: {e}")
    return problems


def roundtrip(args) -> int:
    graphs = sorted(glob.glob(os.path.join(args.corpus, "*.graph")))
    failed = 0
    for path in graphs:
        with open(path) as f:
            text = f.read()
        options_path = path[:-len(".graph")] + ".json"
        options = json.load(open(options_path)) if os.path.exists(options_path) else {}
        problems = _roundtrip_one(text, options)
        if problems:
            failed += 1
            if failed <= 10:
                print(os.path.basename(path), *problems, sep="\n  ")
    print(f"roundtrip: {len(graphs) - failed} of {len(graphs)} graphs pass")
    return 1 if failed else 0


# ---------------------------------------------------------------- compare


def compare(base: str, new: str, show: int = 5) -> bool:
    a = {os.path.basename(p) for p in glob.glob(os.path.join(base, "*"))}
    b = {os.path.basename(p) for p in glob.glob(os.path.join(new, "*"))}
    ok = True
    for name in sorted(a - b):
        print(f"missing: {name}")
        ok = False
    for name in sorted(b - a):
        print(f"new: {name}")
        ok = False
    differ = []
    for name in sorted(a & b):
        with open(os.path.join(base, name)) as f, open(os.path.join(new, name)) as g:
            x, y = f.read(), g.read()
        if x != y:
            differ.append((name, x, y))
    for name, x, y in differ[:show]:
        diff = difflib.unified_diff(x.splitlines(), y.splitlines(), "base/" + name, "new/" + name, lineterm="", n=1)
        print("\n".join(list(diff)[:40]))
    for name, _, _ in differ[show:]:
        print(f"differs: {name}")
    kinds = {}
    for name in a & b:
        kind = name.split(".", 1)[1]
        kinds[kind] = kinds.get(kind, 0) + 1
    summary = ", ".join(f"{n} .{k}" for k, n in sorted(kinds.items()))
    if differ or not ok:
        print(f"DIFFERENT: {len(differ)} of {len(a & b)} files differ ({summary})")
        return False
    print(f"identical: {len(a)} files ({summary})")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("corpus")
    c.add_argument("--cpp-tests", default=os.path.join(ROOT, "build", "tests", "ember_cpp_tests"))
    c.add_argument("--only", default="", help="comma-separated: cpp,cases,models,backend,pytest")
    c.add_argument("--tests", nargs="*", help="pytest files for the pytest part")
    d = sub.add_parser("dump")
    d.add_argument("corpus")
    d.add_argument("out")
    d.add_argument("--short-names", action="store_true", help="kernels named ember_k<N>")
    m = sub.add_parser("compare")
    m.add_argument("base")
    m.add_argument("new")
    k = sub.add_parser("check")
    k.add_argument("corpus")
    k.add_argument("base")
    k.add_argument("--short-names", action="store_true", help="kernels named ember_k<N>")
    r = sub.add_parser("roundtrip")
    r.add_argument("corpus")
    args = parser.parse_args()
    if args.cmd == "collect":
        collect(args)
    elif args.cmd == "dump":
        dump(args)
    elif args.cmd == "compare":
        return 0 if compare(args.base, args.new) else 1
    elif args.cmd == "roundtrip":
        return roundtrip(args)
    else:
        with tempfile.TemporaryDirectory(prefix="ember-dump-") as out:
            args.out = out
            dump(args)
            return 0 if compare(args.base, out) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Compare a function compiled by the backend under test with eager PyTorch.

The backend comes from the environment variable EMBER_TEST_BACKEND (default "ember"), so the
same tests can be pointed at "aot_eager" or "inductor" to check the tests themselves.
"""
import copy
import importlib.util
import os

import torch
from torch._dynamo.utils import counters

BACKEND = os.environ.get("EMBER_TEST_BACKEND", "ember")

LOW_PRECISION = (torch.float16, torch.bfloat16)


def load_examples():
    """ember.examples; loaded from its file when the package itself does not import (its C++
    core not built yet), so that the tests can be checked against other backends meanwhile."""
    try:
        from ember import examples
        return examples
    except ImportError:
        if BACKEND == "ember":
            raise
        path = os.path.join(os.path.dirname(__file__), "..", "..", "python", "ember", "examples.py")
        spec = importlib.util.spec_from_file_location("ember_examples", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def compile_fresh(fn, backend=None, fullgraph=True, **kwargs):
    """torch.compile(fn) after clearing Dynamo's caches, so that nothing compiled by an
    earlier test is reused."""
    backend = backend or BACKEND
    if backend == "ember":
        import ember  # noqa: F401  registers the backend when run from a source tree
    torch._dynamo.reset()
    counters.clear()
    return torch.compile(fn, backend=backend, fullgraph=fullgraph, **kwargs)


def check_compiled(fn, *args, backend=None, rtol=None, atol=None, fullgraph=True):
    """Run ``fn(*args)`` eagerly and compiled; assert that every output matches.

    Outputs may be tensors, Python scalars, None, or nested tuples/lists of them. Tensors must
    have the same dtype and shape; integer and bool tensors must match exactly; NaN matches
    NaN. ``rtol``/``atol`` default to torch.testing.assert_close's per-dtype values.
    float16/bfloat16 outputs that miss the tolerance get a second chance under Inductor's
    low-precision rule: RMSE(compiled, fp64 ref) <= 3 * RMSE(eager, fp64 ref) + atol / 10, with NaN
    positions equal. Returns the compiled outputs.
    """
    compiled = compile_fresh(fn, backend=backend, fullgraph=fullgraph)
    actual = check_call(compiled, fn, *args, rtol=rtol, atol=atol)
    # With no op in the graph the backend is never called and the test would prove nothing.
    assert counters["stats"]["calls_captured"] >= 1, "Dynamo captured no op; the test is vacuous"
    return actual


def check_call(compiled, fn, *args, rtol=None, atol=None):
    """``compiled(*args)`` against ``fn(*args)`` by check_compiled's rules, for a compiled
    function made once (one artifact over several shapes). Returns the compiled outputs."""
    expected = fn(*_clone(args))
    actual = compiled(*_clone(args))
    reference = None
    for path, a, e in _zip_outputs(actual, expected):
        try:
            _assert_same(a, e, rtol, atol, path)
        except AssertionError:
            if not (isinstance(e, torch.Tensor) and e.dtype in LOW_PRECISION and a.dtype == e.dtype):
                raise
            if reference is None:
                reference = _fp64_reference(fn, args)
            r = _lookup(reference, path) if reference is not None else None
            if r is None or not _within_rmse_rule(a, e, r, atol):
                raise
    return actual


# ---- the fp64 rule for runs of many steps ----------------------------------------------
#
# A run of many steps (a training loop, an optimizer) amplifies rounding: eager fp32 itself
# drifts from the exact result, by an amount that depends on the CPU's kernels (AVX2,
# AVX-512, AMX sum in other orders) and the thread count. Comparing ember with eager fp32
# then measures the machine, not ember. Such tests compare both with an fp64 run of the
# same steps, by Inductor's accuracy rule (torch._dynamo.utils.same with an fp64
# reference): ember's error may be at most FP64_RULE_K times eager's, plus a floor.
#
#   err(x) = RMSE(x - ref) / RMS(ref)          per tensor, in float64
#   pass   iff err(ember) <= FP64_RULE_K * err(eager) + FP64_RULE_FLOOR
#
# K = 3 is the multiplier the brief and check_compiled use for low precision; the floor,
# 1e-5 relative, is Inductor's tol / 10 at fp32's tol of 1e-4, and covers tensors that eager
# happens to compute exactly. A wrong gradient or a missed update is far outside: its
# error is of the order of the update itself.
FP64_RULE_K = 3.0
FP64_RULE_FLOOR = 1e-5


def pad_every_cpu_compile(monkeypatch, graphs: list | None = None) -> list:
    """Makes every CPU graph compiled from now on run pad_matmuls (a CUDA pass, taken by the
    CPU compile as an internal option); returns the list its extern reasons are added to.
    `graphs`: a list the compiled graphs (their kernels, outputs) are added to."""
    from ember import _core
    reasons = []
    compile_cpu = _core.compile

    def compile_padded(text, **kwargs):
        cg = compile_cpu(text, pad_matmuls=True, **kwargs)
        reasons.extend(e["reason"] for e in cg.externs)
        if graphs is not None:
            graphs.append(cg)
        return cg

    monkeypatch.setattr(_core, "compile", compile_padded)
    return reasons


def rel_rmse(x, ref):
    """RMSE(x - ref) / RMS(ref), in float64 (the absolute RMSE when ref is all zeros)."""
    x, ref = torch.as_tensor(x).detach().double(), torch.as_tensor(ref).detach().double()
    err = (x - ref).square().mean().sqrt().item()
    scale = ref.square().mean().sqrt().item()
    return err / scale if scale > 0 else err


def fp64_rule(actual, eager, ref, what="value"):
    """Asserts the fp64 rule for one tensor (or a list of scalars, such as per-step losses):
    ember's error against the fp64 reference ``ref`` is at most FP64_RULE_K times eager
    fp32's, plus FP64_RULE_FLOOR. NaN and infinities must sit where eager has them; the
    errors are taken over the rest. Returns (ember's error, eager's error)."""
    actual, eager, ref = (torch.as_tensor(t).detach().double() for t in (actual, eager, ref))
    assert actual.shape == ref.shape == eager.shape, (what, actual.shape, eager.shape, ref.shape)
    assert torch.equal(actual.isfinite(), eager.isfinite()), f"{what}: NaN/inf positions differ from eager's"
    finite = eager.isfinite() & ref.isfinite()
    a_err, e_err = rel_rmse(actual[finite], ref[finite]), rel_rmse(eager[finite], ref[finite])
    bound = FP64_RULE_K * e_err + FP64_RULE_FLOOR
    assert a_err <= bound, (f"{what}: error against fp64 {a_err:.3g} > {FP64_RULE_K:g} x eager fp32's "
                            f"{e_err:.3g} + {FP64_RULE_FLOOR:g}")
    return a_err, e_err


def fp64_rule_state(actual, eager, ref):
    """fp64_rule for every floating tensor of three state dicts (parameters, buffers such as
    BatchNorm's running statistics); integer tensors (num_batches_tracked) must be equal."""
    errors = {}
    for name, r in ref.items():
        a, e = actual[name], eager[name]
        if r.is_floating_point():
            errors[name] = fp64_rule(a, e, r, name)
        else:
            assert torch.equal(a, e) and torch.equal(a, r), name
    return errors


def max_rel_err(a, b):
    """max |a - b| / max |b|, in float64."""
    a, b = a.detach().double(), b.detach().double()
    denom = b.abs().max().item()
    err = (a - b).abs().max().item()
    return err / denom if denom > 0 else err


def _clone(args):
    # Compiled and eager runs each get their own copy, so a function that writes to its
    # inputs cannot make the two runs disagree or agree by accident.
    return tuple(a.clone() if isinstance(a, torch.Tensor) and not a._is_view() else a
                 for a in args)


def _zip_outputs(actual, expected, path="out"):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{path}: expected a sequence, got {type(actual)}"
        assert len(actual) == len(expected), f"{path}: {len(actual)} outputs, expected {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            yield from _zip_outputs(a, e, f"{path}[{i}]")
    else:
        yield path, actual, expected


def _assert_same(actual, expected, rtol, atol, path):
    if not isinstance(expected, torch.Tensor):
        assert not isinstance(actual, torch.Tensor), f"{path}: got a tensor, expected {expected!r}"
        if isinstance(expected, float) and expected != expected:
            assert actual != actual, f"{path}: {actual!r} != nan"
        else:
            assert actual == expected, f"{path}: {actual!r} != {expected!r}"
        return
    assert isinstance(actual, torch.Tensor), f"{path}: got {type(actual)}, expected a tensor"
    assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    if expected.dtype.is_floating_point or expected.dtype.is_complex:
        tol = {} if rtol is None and atol is None else {"rtol": rtol or 0.0, "atol": atol or 0.0}
    else:
        tol = {"rtol": 0, "atol": 0}
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}", **tol)


def _fp64_reference(fn, args):
    def up(a):
        return a.double() if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a
    try:
        return fn(*(up(a) for a in _clone(args)))
    except Exception:
        return None


def _lookup(outputs, path):
    node = outputs
    for part in path[len("out"):].split("]")[:-1]:
        node = node[int(part.lstrip("["))]
    return node if isinstance(node, torch.Tensor) else None


def _within_rmse_rule(actual, expected, reference, atol):
    if atol is None:
        atol = 1e-5
    ref, a, e = reference.double(), actual.double(), expected.double()
    # NaN and infinities must sit where eager has them; the RMSE is taken over the rest.
    special = ~e.isfinite()
    if not torch.equal(a[special].nan_to_num(), e[special].nan_to_num()) or \
            not torch.equal(a[special].isnan(), e[special].isnan()):
        return False
    finite = ~special & ref.isfinite()
    if not a[finite].isfinite().all():
        return False

    def rmse(x):
        return (x[finite] - ref[finite]).square().mean().sqrt().item() if finite.any() else 0.0
    return rmse(a) <= 3 * rmse(e) + atol / 10


# ---- the teacher-forced fp64 rule (training through discontinuities) ---------------------
#
# A trajectory through ReLU signs and max-pool choices is chaotic: once one element crosses
# a kink in one run and not in the other, the runs part, and the end parameters after many
# steps measure luck, not the compiler. The teacher-forced rule measures each step instead:
# at every step, from the compiled run's own parameters, optimizer state and batch, the same
# step is taken by eager fp32 and by fp64 (copies loaded with those exact values), and the
# step's results -- loss, gradients, each parameter's update, each buffer's change (BatchNorm
# running statistics) -- follow the fp64 rule. The free trajectories of the three runs are
# compared only over the first few steps, before a kink can have parted them.

def _state(model):
    return {n: t.detach().clone() for n, t in model.state_dict().items()}


def _one_step(model, opt, loss_fn, batch):
    """One training step; returns its loss, gradients and state changes (after - before)."""
    before = _state(model)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(*batch)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    opt.step()
    after = model.state_dict()
    changes = {n: after[n].detach().double() - b.double() if b.is_floating_point() else after[n].clone()
               for n, b in before.items()}
    return {"loss": torch.tensor(loss.item()), **{f"grad {n}": g for n, g in grads.items()},
            **{f"change {n}": c for n, c in changes.items()}}


def _fp64_batch(batch):
    return tuple(t.double() if torch.is_tensor(t) and t.is_floating_point() else t for t in batch)


def teacher_forced_run(model, make_loss, batches, make_optimizer, compile_loss, free_steps=3):
    """Trains ``model`` through ``compile_loss(make_loss(model))`` and, at every step, takes
    the same step eagerly in fp32 and in fp64 from the compiled run's parameters and
    optimizer state. Returns {"steps": per step {quantity: (compiled, eager, fp64)},
    "free": {name: (compiled, eager, fp64)} for the state after ``free_steps`` free steps,
    "free_losses": per free step (compiled, eager, fp64)}; assert_teacher_forced judges it."""
    eager_free, ref_free = copy.deepcopy(model), copy.deepcopy(model).double()
    eager_model, ref_model = copy.deepcopy(model), copy.deepcopy(model).double()
    opt, loss_fn = make_optimizer(model), compile_loss(make_loss(model))
    steps, losses = [], []
    for i, batch in enumerate(batches):
        start, opt_state = _state(model), copy.deepcopy(opt.state_dict())
        forced = []
        for m, b in ((eager_model, batch), (ref_model, _fp64_batch(batch))):
            m.load_state_dict(start)  # copy_ into the model's own dtype
            o = make_optimizer(m)
            o.load_state_dict(copy.deepcopy(opt_state))  # casts the moments to the model's dtype
            forced.append(_one_step(m, o, make_loss(m), b))
        mine = _one_step(model, opt, loss_fn, batch)
        steps.append({q: (mine[q], forced[0][q], forced[1][q]) for q in mine})
        losses.append(mine["loss"])
        if i + 1 == free_steps:
            free_state = _state(model)
    free_losses = []
    for m, bs in ((eager_free, batches[:free_steps]), (ref_free, [_fp64_batch(b) for b in batches[:free_steps]])):
        o, f = make_optimizer(m), make_loss(m)
        free_losses.append([_one_step(m, o, f, b)["loss"] for b in bs])
    eager_state, ref_state = eager_free.state_dict(), ref_free.state_dict()
    return {"steps": steps,
            "free": {n: (free_state[n], eager_state[n], ref_state[n]) for n in ref_state},
            "free_losses": list(zip(losses[:free_steps], *free_losses)),
            "losses": [float(l) for l in losses]}


def assert_teacher_forced(run):
    """The fp64 rule for every step's loss, gradients and changes (teacher-forced), and for
    the free runs' losses and state over the first steps. Returns per step the largest
    ratio of the compiled run's error to the rule's bound (1.0 is the limit)."""
    ratios = []
    for i, step in enumerate(run["steps"]):
        worst = 0.0
        for q, (a, e, r) in step.items():
            if not r.is_floating_point():
                assert torch.equal(a, e) and torch.equal(a, r), f"step {i}: {q}"
                continue
            a_err, e_err = fp64_rule(a, e, r, f"step {i} (teacher-forced): {q}")
            worst = max(worst, a_err / (FP64_RULE_K * e_err + FP64_RULE_FLOOR))
        ratios.append(worst)
    for i, (a, e, r) in enumerate(run["free_losses"]):
        fp64_rule(a, e, r, f"free step {i}: loss")
    for name, (a, e, r) in run["free"].items():
        if r.is_floating_point():
            fp64_rule(a, e, r, f"after {len(run['free_losses'])} free steps: {name}")
        else:
            assert torch.equal(a, e) and torch.equal(a, r), name
    return ratios

"""check_compiled and the fp64 rule must catch a wrong backend: these run them against
deliberately broken ones."""
import copy

import pytest
import torch

from helpers import (assert_teacher_forced, check_compiled, compile_fresh, fp64_rule, fp64_rule_state, max_rel_err,
                     teacher_forced_run)


def output_rewriting_backend(rewrite):
    """A Dynamo backend that runs the graph as captured, then applies rewrite to each output."""
    def backend(gm, example_inputs):
        def run(*args):
            outs = gm(*args)
            if isinstance(outs, (tuple, list)):
                return type(outs)(rewrite(o) for o in outs)
            return rewrite(outs)
        return run
    return backend


def nudge_floats(t):
    return t + 1e-3 if t.is_floating_point() else t


def float64_backend(gm, example_inputs):
    """Computes in float64 and rounds once at the end: more accurate than eager in bf16."""
    def run(*args):
        up = [a.double() if a.is_floating_point() else a for a in args]
        outs = gm(*up)
        return tuple(o.to(a.dtype) for o, a in zip(outs, args))
    return run


def test_catches_small_error():
    with pytest.raises(AssertionError):
        check_compiled(lambda x: x * 2, torch.randn(7, 13), backend=output_rewriting_backend(nudge_floats))


def test_catches_wrong_dtype():
    with pytest.raises(AssertionError, match="dtype"):
        check_compiled(lambda x: x * 2, torch.randn(7), backend=output_rewriting_backend(torch.Tensor.double))


def test_catches_wrong_shape():
    with pytest.raises(AssertionError, match="shape"):
        check_compiled(lambda x: x.sum(-1, keepdim=True), torch.randn(7, 13),
                       backend=output_rewriting_backend(lambda t: t.squeeze(-1)))


def test_integers_must_match_exactly():
    x = torch.randint(0, 1 << 30, (13,), dtype=torch.int64)
    with pytest.raises(AssertionError):
        check_compiled(lambda a: a * 2, x, backend=output_rewriting_backend(lambda t: t + 1), rtol=1e-3, atol=10)


def test_nan_positions_must_match():
    x = torch.tensor([1.0, float("nan"), 3.0])
    with pytest.raises(AssertionError):
        check_compiled(lambda a: a * 2, x, backend=output_rewriting_backend(torch.nan_to_num))


def test_nested_outputs_are_all_checked():
    def rewrite_last(t):
        return t + 1 if t.shape == (3,) else t
    with pytest.raises(AssertionError):
        check_compiled(lambda a: (a * 2, [a + 1, a[:3] * 3]), torch.randn(7),
                       backend=output_rewriting_backend(rewrite_last))


def test_vacuous_function_is_rejected():
    with pytest.raises(AssertionError, match="captured no op"):
        check_compiled(lambda a: a, torch.randn(3), backend="eager")


def test_bfloat16_more_accurate_backend_passes_rmse_rule():
    def chain(x, y):
        for _ in range(6):
            x = torch.sin(x * y + 0.3) * 1.7
        return x
    x, y = torch.randn(127, dtype=torch.bfloat16), torch.randn(127, dtype=torch.bfloat16)
    # Tight tolerance: only the fp64-RMSE rule can let this through.
    check_compiled(chain, x, y, backend=float64_backend, rtol=1e-4, atol=1e-4)


def test_bfloat16_large_error_fails_rmse_rule():
    x = torch.randn(127, dtype=torch.bfloat16)
    with pytest.raises(AssertionError):
        check_compiled(lambda a: a.sin() * 2, x, rtol=1e-4, atol=1e-4,
                       backend=output_rewriting_backend(lambda t: t + 0.05))


def test_max_rel_err():
    b = torch.tensor([1.0, -4.0, 2.0])
    assert max_rel_err(b, b) == 0.0
    assert max_rel_err(b + torch.tensor([0.0, 0.4, 0.0]), b) == pytest.approx(0.1)


# ---- the fp64 rule (runs of many steps) -----------------------------------------------

def _train_three(backend, steps=20):
    """A small MLP trained with AdamW through `backend`, eagerly in fp32 and eagerly in fp64,
    from the same weights on the same batches; returns the three state dicts."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    runs = {"compiled": model, "eager": copy.deepcopy(model), "ref": copy.deepcopy(model).double()}
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)) for _ in range(steps)]
    for name, m in runs.items():
        forward = compile_fresh(m, backend=backend) if name == "compiled" else m
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        for x, y in batches:
            if name == "ref":
                x, y = x.double(), y.double()
            opt.zero_grad()
            (forward(x) - y).square().mean().backward()
            opt.step()
    return (runs["compiled"].state_dict(), runs["eager"].state_dict(), runs["ref"].state_dict())


def test_fp64_rule_passes_a_faithful_backend():
    fp64_rule_state(*_train_three(lambda gm, example_inputs: gm))


def test_fp64_rule_catches_a_small_systematic_error():
    # The model's outputs 1e-3 too large: each step's gradients point slightly elsewhere,
    # and over 20 steps the parameters drift further from fp64 than eager fp32's rounding.
    with pytest.raises(AssertionError, match="error against fp64"):
        fp64_rule_state(*_train_three(output_rewriting_backend(nudge_floats)))


def _teacher_forced_mlp(grad_scale=1.0):
    """A ReLU MLP with BatchNorm trained 8 AdamW steps teacher-forced, the "compiled" run
    eager with its first layer's gradient scaled by grad_scale."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).train()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)) for _ in range(8)]

    def compile_loss(loss_fn):  # called after the eager copies are made: they carry no hook
        model[0].weight.register_hook(lambda grad: grad * grad_scale)
        return loss_fn
    return teacher_forced_run(model, lambda m: lambda x, y: (m(x) - y).square().mean(), batches,
                              lambda m: torch.optim.AdamW(m.parameters(), lr=1e-2), compile_loss)


def test_teacher_forced_rule_passes_a_faithful_backend():
    assert_teacher_forced(_teacher_forced_mlp())


def test_teacher_forced_rule_catches_a_gradient_off_by_1e_3():
    with pytest.raises(AssertionError, match=r"step 0 \(teacher-forced\): grad 0.weight"):
        assert_teacher_forced(_teacher_forced_mlp(grad_scale=1 + 1e-3))


def test_fp64_rule_wants_nonfinite_values_where_eager_has_them():
    ref = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = torch.tensor([1.0, 2.0, 3.0])
    with pytest.raises(AssertionError, match="NaN/inf"):
        fp64_rule(torch.tensor([1.0, float("nan"), 3.0]), eager, ref)

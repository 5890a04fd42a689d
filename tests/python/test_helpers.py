"""check_compiled must catch a wrong backend: these run it against deliberately broken ones."""
import pytest
import torch

from helpers import check_compiled, max_rel_err


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

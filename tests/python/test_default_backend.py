"""torch.compiler.set_default_backend("ember") (torch 2.13): torch.compile with no backend
argument compiles with ember, modes and options included."""
import pytest
import torch

import ember


@pytest.fixture
def ember_by_default():
    if not hasattr(torch.compiler, "set_default_backend"):
        pytest.skip("this torch has no torch.compiler.set_default_backend")
    torch.compiler.set_default_backend("ember")
    torch._dynamo.reset()
    try:
        yield
    finally:
        torch.compiler.set_default_backend(None)
        torch._dynamo.reset()


@pytest.mark.parametrize("kwargs", [{}, {"mode": "max-autotune"}, {"options": {"fuse": False}}],
                         ids=["plain", "mode", "options"])
def test_torch_compile_without_a_backend_uses_ember(ember_by_default, kwargs):
    assert torch.compiler.get_default_backend() == "ember"
    before = ember.stats()["graphs_compiled"]
    x = torch.randn(6, 10)
    f = torch.compile(lambda t: torch.softmax(t * 3, -1), **kwargs)
    torch.testing.assert_close(f(x), torch.softmax(x * 3, -1))
    assert ember.stats()["graphs_compiled"] == before + 1


def test_an_unknown_option_is_embers_error(ember_by_default):
    f = torch.compile(lambda t: t + 1, options={"no_such_option": 1})
    with pytest.raises(Exception, match="ember: unknown option 'no_such_option'"):
        f(torch.randn(3))

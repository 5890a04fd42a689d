"""What `ember bench` and `ember explain` run: a TARGET names a model and its inputs.

    mlp, ln_gelu, tiny_gpt2, small_cnn,       built in (ember.examples), no downloads
    tiny_llama
    gpt2, bert, resnet50, vit_small, llama     larger, random weights; need transformers,
                                               torchvision or timm installed
    path/to/file.py:factory                    factory() returns (model, inputs) or
                                               (model, inputs, more_calls)

`inputs` is a tuple of positional arguments (a single tensor is accepted too);
`more_calls` is a list of such tuples that `ember explain` runs after the first call,
to show recompilations (a new shape, a new Python constant).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os


class TargetError(Exception):
    """A TARGET that does not name a loadable model: unknown name, missing file or factory,
    a package the model needs that is not installed."""


@dataclasses.dataclass
class Target:
    spec: str
    model: object
    inputs: tuple
    more_calls: list


def builtin_names() -> list[str]:
    from ember import examples

    return list(examples.MODELS) + list(examples.LARGER_MODELS)


def load(spec: str) -> Target:
    """Builds the target's model and inputs (seeded: every call gives the same ones)."""
    import torch

    torch.manual_seed(0)
    if ":" in spec:
        made = _call_factory(spec)
    else:
        from ember import examples

        try:
            made = examples.get(spec)
        except KeyError as e:
            raise TargetError(e.args[0]) from None
        except ImportError as e:
            raise TargetError(f"{spec} needs a package that is not installed: {e}") from None
    return _as_target(spec, made)


# The package each model that needs one imports.
_NEEDS = {"tiny_gpt2": "transformers", "tiny_llama": "transformers", "llama": "transformers",
          "gpt2": "transformers", "bert": "transformers",
          "resnet50": "torchvision", "vit_small": "timm"}


def check(spec: str) -> None:
    """Raises TargetError if spec cannot load, without building the model."""
    if ":" in spec:
        path, factory = spec.rsplit(":", 1)
        if not os.path.isfile(path):
            raise TargetError(f"{path}: no such file (TARGET is a model name or path/to/file.py:factory)")
        return
    if spec not in builtin_names():
        raise TargetError(f"unknown example model {spec!r}; known: {', '.join(builtin_names())}")
    if spec in _NEEDS and importlib.util.find_spec(_NEEDS[spec]) is None:
        raise TargetError(f"{spec} needs {_NEEDS[spec]}, which is not installed (pip install {_NEEDS[spec]})")


def _call_factory(spec: str):
    path, factory = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise TargetError(f"{path}: no such file (TARGET is a model name or path/to/file.py:factory)")
    module_name = "ember_target_" + os.path.splitext(os.path.basename(path))[0]
    module_spec = importlib.util.spec_from_file_location(module_name, os.path.abspath(path))
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    fn = getattr(module, factory, None)
    if not callable(fn):
        raise TargetError(f"{path} has no function {factory!r}")
    return fn()


def _as_target(spec: str, made) -> Target:
    import torch

    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise TargetError(f"{spec}: the factory must return (model, inputs) or (model, inputs, more_calls)")
    model, inputs = made[0], made[1]
    more = list(made[2]) if len(made) == 3 else []
    as_args = lambda x: (x,) if torch.is_tensor(x) else tuple(x)  # noqa: E731
    return Target(spec, model, as_args(inputs), [as_args(c) for c in more])


def describe(spec: str) -> str:
    return spec if ":" not in spec else os.path.basename(spec)

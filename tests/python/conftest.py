import importlib.util
import os
import sys
import tempfile

import pytest
import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
# helpers.py sits next to the tests; `ember` comes from the install if there is one, else from
# the source tree.
sys.path.insert(0, _HERE)
if importlib.util.find_spec("ember") is None:
    sys.path.insert(0, os.path.join(_HERE, "..", "..", "python"))


# A test must fail when ember fails: no silent eager fallback under test.
os.environ.setdefault("EMBER_FALLBACK_ON_ERROR", "0")
# ember keeps compiled graphs in torch's AOTAutogradCache (python/ember/aot_cache.py): each
# run starts with empty torch caches, so that no test finds what an earlier run compiled.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ember-tests-torch-cache-"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (CI has none; see docs/gpu.md)")


def pytest_report_header(config):
    from helpers import BACKEND
    return f"backend under test: {BACKEND} (set EMBER_TEST_BACKEND to change)"


@pytest.fixture(autouse=True)
def _seed():
    # Every test draws its inputs from the same seed, whatever ran before it.
    torch.manual_seed(0)
    yield

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
# ember keeps compiled graphs in torch's AOTAutogradCache (python/ember/caches/aot_cache.py): each
# run starts with empty torch caches, so that no test finds what an earlier run compiled.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ember-tests-torch-cache-"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (CI has none; see docs/gpu.md)")


def pytest_report_header(config):
    from helpers import BACKEND
    return f"backend under test: {BACKEND} (set EMBER_TEST_BACKEND to change)"


# torch's own bf16 attention on the CPU cannot run when ATen's kernels are forced down to AVX2
# on a CPU with AMX (`.ci/run`'s second pass): eager raises "pack_vnni2 is only supported when
# avx512 is supported" before ember is involved. Such a test is skipped, saying so; on a CPU
# that truly is AVX2, torch takes another path and the test runs.
_TORCH_FORCED_CAPABILITY_BUG = "pack_vnni2 is only supported when avx512 is supported"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (call.excinfo is not None and report.failed and os.environ.get("ATEN_CPU_CAPABILITY")
            and _TORCH_FORCED_CAPABILITY_BUG in str(call.excinfo.value)):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           "Skipped: torch's bf16 attention cannot run with ATEN_CPU_CAPABILITY="
                           f"{os.environ['ATEN_CPU_CAPABILITY']} on this CPU (torch, not ember)")


@pytest.fixture(autouse=True)
def _seed():
    # Every test draws its inputs from the same seed, whatever ran before it.
    torch.manual_seed(0)
    yield

"""The kernel cache, end to end: a cache entry someone tampered with is never loaded.

Each test fills a cache from one process, replaces the cached shared object by a
*planted* one (a library whose constructor would write a marker file the moment it is
loaded), truncates it, or changes its mode or owner, then compiles the same graph in a
fresh process. That process must not load the planted library (no marker), must compute
the right result, and must report a cache miss (the entry was rebuilt). The C++ side of
each threat is in tests/cpp/test_disk_cache.cpp."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import torch, ember
    x = torch.linspace(-3, 3, 64).reshape(8, 8)
    out = torch.compile(lambda t: torch.softmax(t * 2, -1) + t.tanh(), backend="ember")(x)
    torch.testing.assert_close(out, torch.softmax(x * 2, -1) + x.tanh())
    print("cache:", ember.last_compile_stats()["cache"])
""")

PLANTED = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
  FILE* f = fopen(MARKER, "w");
  if (f) { fputs("loaded", f); fclose(f); }
}
"""


def run_child(cache):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache), EMBER_FALLBACK_ON_ERROR="0")
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.fixture
def filled_cache(tmp_path):
    cache = tmp_path / "cache"
    assert "cache: ['miss']" in run_child(cache)
    assert "cache: ['disk']" in run_child(cache)
    artifacts = [p for p in cache.rglob("*.so") if "tmp" not in p.relative_to(cache).parts]
    assert len(artifacts) == 1, artifacts
    return cache, artifacts[0]


@pytest.fixture
def planted_library(tmp_path):
    cc = shutil.which(os.environ.get("EMBER_CC", "cc")) or shutil.which("gcc")
    marker = tmp_path / "planted-library-was-loaded"
    src = tmp_path / "planted.c"
    src.write_text(PLANTED)
    lib = tmp_path / "planted.so"
    subprocess.run([cc, "-shared", "-fPIC", f'-DMARKER="{marker}"', str(src), "-o", str(lib)], check=True)
    # The marker does appear when the library is loaded, so its absence means something.
    subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(lib)!r})"], check=True)
    assert marker.exists()
    marker.unlink()
    return lib, marker


def assert_rebuilt_not_loaded(cache, marker):
    assert "cache: ['miss']" in run_child(cache)  # the bad entry was discarded and rebuilt
    assert not marker.exists(), "ember loaded a tampered cache entry"
    assert "cache: ['disk']" in run_child(cache)  # and the rebuilt entry is good


def test_replaced_artifact_is_not_loaded(filled_cache, planted_library):
    cache, artifact = filled_cache
    lib, marker = planted_library
    shutil.copyfile(lib, artifact)  # same path and mode, other content (checksum differs)
    os.chmod(artifact, 0o700)
    assert_rebuilt_not_loaded(cache, marker)


def test_flipped_byte_is_not_loaded(filled_cache, planted_library):
    cache, artifact = filled_cache
    _, marker = planted_library
    data = bytearray(artifact.read_bytes())
    data[len(data) // 2] ^= 0x01
    artifact.write_bytes(bytes(data))
    assert_rebuilt_not_loaded(cache, marker)


def test_truncated_artifact_is_not_loaded(filled_cache, planted_library):
    cache, artifact = filled_cache
    _, marker = planted_library
    with open(artifact, "r+b") as f:
        f.truncate(artifact.stat().st_size // 3)
    assert_rebuilt_not_loaded(cache, marker)


def test_symlinked_artifact_is_not_loaded(filled_cache, planted_library):
    cache, artifact = filled_cache
    lib, marker = planted_library
    # Even a link to a library with the right checksum would be refused; this one is not.
    artifact.unlink()
    artifact.symlink_to(lib)
    assert_rebuilt_not_loaded(cache, marker)


def test_group_or_world_writable_artifact_is_not_loaded(filled_cache, planted_library):
    cache, artifact = filled_cache
    _, marker = planted_library
    os.chmod(artifact, 0o777)
    assert_rebuilt_not_loaded(cache, marker)


def test_foreign_owned_artifact_is_not_loaded(filled_cache, planted_library):
    if os.geteuid() != 0:
        pytest.skip("needs chown (root); tests/cpp/test_disk_cache.cpp covers foreign owners without it")
    cache, artifact = filled_cache
    lib, marker = planted_library
    shutil.copyfile(lib, artifact)
    os.chown(artifact, 12345, 12345)
    os.chmod(artifact, 0o700)
    out = run_child(cache)
    assert not marker.exists(), "ember loaded a foreign-owned cache entry"
    assert "cache: ['miss']" in out

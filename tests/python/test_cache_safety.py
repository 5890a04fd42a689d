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


@pytest.fixture(scope="module")
def pristine_cache(tmp_path_factory):
    # Filled once by two processes (a miss, then a disk hit); each test tampers with a copy.
    cache = tmp_path_factory.mktemp("pristine") / "cache"
    assert "cache: ['miss']" in run_child(cache)
    assert "cache: ['disk']" in run_child(cache)
    return cache


@pytest.fixture
def filled_cache(pristine_cache, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(pristine_cache, cache, symlinks=True)  # modes kept: the copy is as private
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


def test_an_untouched_copy_hits(filled_cache):
    # What the tests below see as "discarded and rebuilt" is their damage, not the copy.
    cache, _ = filled_cache
    assert "cache: ['disk']" in run_child(cache)


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


# ---- shipping caches: `ember cache export/import` and torch's Mega-Cache -------------------

def ember_cli(*args, cache):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "ember", "cache", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_exported_cache_imports_into_a_fresh_directory_and_hits(filled_cache, tmp_path):
    cache, _ = filled_cache
    blob = tmp_path / "cache.export"
    r = ember_cli("export", str(blob), cache=cache)
    assert r.returncode == 0 and "exported" in r.stdout, r.stderr
    fresh = tmp_path / "fresh"
    r = ember_cli("import", str(blob), cache=fresh)
    assert r.returncode == 0 and "imported" in r.stdout, r.stderr
    assert "cache: ['disk']" in run_child(fresh)  # the imported kernels load: no C compiler


@pytest.mark.parametrize("damage", ["truncate", "flip", "other_build"])
def test_damaged_or_foreign_export_is_refused_and_installs_nothing(filled_cache, tmp_path, damage):
    from ember.caches import graph_format

    cache, _ = filled_cache
    blob = tmp_path / "cache.export"
    assert ember_cli("export", str(blob), cache=cache).returncode == 0
    data = blob.read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data = data[:-5] + bytes([data[-5] ^ 1]) + data[-4:]
    else:  # intact and signed, by another ember build
        doc, blobs = graph_format.decode(data, None)
        doc.pop("blobs")
        data = graph_format.encode("ember-0.0.0-another-build", doc, [bytes(b) for b in blobs])
    blob.write_bytes(data)
    fresh = tmp_path / "fresh"
    r = ember_cli("import", str(blob), cache=fresh)
    assert r.returncode == 1 and "not importing" in r.stderr, (r.stdout, r.stderr)
    assert not list(fresh.rglob("*.idx")), "a refused export installed entries"


MEGA_CHILD = textwrap.dedent("""
    import sys, torch, ember
    path = sys.argv[2]
    if sys.argv[1] == "save":
        x = torch.linspace(-3, 3, 64).reshape(8, 8)
        with torch.no_grad():
            torch.compile(lambda t: torch.softmax(t * 2, -1) + t.tanh(), backend="ember")(x)
        open(path, "wb").write(torch.compiler.save_cache_artifacts()[0])
    else:
        torch.compiler.load_cache_artifacts(open(path, "rb").read())
    exec(sys.argv[3] if len(sys.argv) > 3 else "")
""")


def test_mega_cache_carries_ember_entries_to_a_fresh_machine(tmp_path):
    from ember.caches import mega_cache

    if mega_cache.unavailable_reason():
        pytest.skip(mega_cache.unavailable_reason())

    def run(cache, *args):
        env = dict(os.environ, EMBER_CACHE_DIR=str(cache), TORCHINDUCTOR_CACHE_DIR=str(cache) + "-torch")
        r = subprocess.run([sys.executable, "-c", MEGA_CHILD, *args], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]

    blob = tmp_path / "mega.bin"
    run(tmp_path / "a", "save", str(blob))
    run(tmp_path / "b", "load", str(blob))  # a fresh machine: nothing compiled, only loaded
    assert "cache: ['disk']" in run_child(tmp_path / "b")


def test_mega_cache_refuses_a_damaged_or_foreign_entry(tmp_path, monkeypatch):
    from ember import config
    from ember.caches import graph_format, mega_cache, tags

    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "cache"))
    good = mega_cache._content("ab" * 32, "so", b"\x7fELF not really")
    assert mega_cache.install(good)
    assert not mega_cache.install(good[:-3])
    doc, blobs = graph_format.decode(good, tags.artifact_tag())
    doc.pop("blobs")
    assert not mega_cache.install(graph_format.encode("ember-0.0.0-another-build", doc, [bytes(blobs[0])]))
    doc["key"] = "../../etc/passwd"
    assert not mega_cache.install(graph_format.encode(tags.artifact_tag(), doc, [bytes(blobs[0])]))

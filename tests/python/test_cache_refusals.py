"""Cache directories ember refuses (python/ember/caches/cache_dirs.py): the user hears about it
once per process, with the fix, and `ember doctor` says the same; a refused torch cache
directory is never read, so an entry planted there is never unpickled.

Every test runs user code in a fresh process, as a user meets these directories."""
import os
import pickle
import re
import subprocess
import sys
import textwrap

WARNING = re.compile(r"RuntimeWarning: ember: refusing (ember's kernel cache|torch's cache directory) (\S+?):")


def run(code, ember_cache, torch_cache, args=None):
    env = dict(os.environ, EMBER_CACHE_DIR=str(ember_cache), TORCHINDUCTOR_CACHE_DIR=str(torch_cache))
    env.pop("EMBER_FALLBACK_ON_ERROR", None)
    cmd = [sys.executable, *(args or ["-c", textwrap.dedent(code)])]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def private_dir(path):
    path.mkdir()
    os.chmod(path, 0o700)
    return path


def shared_dir(path):
    path.mkdir()
    os.chmod(path, 0o777)
    return path


# Graphs of both front ends, forward and backward, some sharing kernels: every compile in
# the process meets the refused directory.
SEVERAL_GRAPHS = """
    import torch, ember
    fns = [lambda t: t.exp() + 1, lambda t: torch.softmax(t * 2, -1), lambda t: (t.sin() * 3).relu().sum(-1)]
    for f in fns:
        x = torch.randn(6, 5)
        torch.testing.assert_close(torch.compile(f, backend="ember")(x), f(x))
        w = torch.randn(6, 5, requires_grad=True)
        torch.compile(f, backend="ember")(w).sum().backward()
    print("graphs:", ember.stats()["graphs_compiled"])
"""


def test_world_writable_cache_dir_warns_once_with_the_fix(tmp_path):
    shared = shared_dir(tmp_path / "shared")
    r = run(SEVERAL_GRAPHS, shared, private_dir(tmp_path / "torch"))
    assert r.returncode == 0, r.stderr[-3000:]
    graphs = int(re.search(r"graphs: (\d+)", r.stdout).group(1))
    assert graphs >= 6, r.stdout  # several graphs compiled, each bypassing the cache
    warnings = WARNING.findall(r.stderr)
    assert warnings == [("ember's kernel cache", str(shared))], r.stderr
    assert "writable by group or others (mode 0777)" in r.stderr
    assert f"Fix: chmod 700 {shared}, or set EMBER_CACHE_DIR to a private directory" in r.stderr
    assert not any(p.suffix == ".so" for p in shared.rglob("*"))  # still refused, as before


def test_safe_cache_dirs_say_nothing(tmp_path):
    r = run(SEVERAL_GRAPHS, private_dir(tmp_path / "cache"), private_dir(tmp_path / "torch"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ember: refusing" not in r.stderr


def test_doctor_shows_a_refused_cache_dir_as_warn_with_the_fix(tmp_path):
    shared = shared_dir(tmp_path / "shared")
    torch_shared = shared_dir(tmp_path / "torch")
    r = run(None, shared, torch_shared, args=["-m", "ember", "doctor"])
    assert r.returncode == 0, r.stdout + r.stderr  # WARN is not a failure
    lines = r.stdout.splitlines()
    for name, setting, directory in (("cache", "EMBER_CACHE_DIR", shared),
                                     ("torch cache", "TORCHINDUCTOR_CACHE_DIR", torch_shared)):
        at = next(i for i, ln in enumerate(lines) if re.match(rf"WARN\s+{name}\s{{2,}}", ln))
        assert str(directory) in lines[at] and "mode 0777" in lines[at], lines[at]
        assert f"fix: chmod 700 {directory}, or set {setting} to a private directory" in lines[at + 1], r.stdout


# A training graph goes through AOTAutograd, whose cache (torch's) keeps ember's graphs.
TRAINING = """
    import torch, ember
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8)
    f = torch.compile(lambda w, x: torch.tanh(x @ w).sum(), backend="ember")
    out = f(w, x)
    out.backward()
    w2 = w.detach().clone().requires_grad_()
    ref = torch.tanh(x @ w2).sum()
    ref.backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(w.grad, w2.grad)
    print("aot:", ember.stats()["aot_cache"])
"""


class _Planted:
    """Unpickling this creates the marker file (pickle calls open(marker, "w"))."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(torch_cache, marker) -> int:
    """Replaces every AOTAutogradCache entry by a planted one; returns how many."""
    entries = [p for p in (torch_cache / "aotautograd").rglob("*") if p.is_file() and not p.name.startswith(".")]
    for p in entries:
        p.write_bytes(pickle.dumps(_Planted(marker)))
    return len(entries)


def test_planted_entry_in_an_unsafe_torch_cache_dir_is_never_unpickled(tmp_path):
    ember_cache = private_dir(tmp_path / "ember")
    torch_cache = private_dir(tmp_path / "torch")
    marker = tmp_path / "planted-entry-was-unpickled"
    r = run(TRAINING, ember_cache, torch_cache)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "'saved_graphs'" in r.stdout, r.stdout  # the entries exist
    assert _plant(torch_cache, marker) >= 1

    # The planted entry does run when torch reads it from a private directory (here we
    # wrote it ourselves, so that is the trust torch's cache has), so the absence of
    # the marker below means something.
    r = run(TRAINING, ember_cache, torch_cache)
    assert r.returncode == 0, r.stderr[-3000:]
    assert marker.exists()
    marker.unlink()

    # Anyone could have written it: ember refuses the directory, never looks there.
    os.chmod(torch_cache, 0o777)
    r = run(TRAINING, ember_cache, torch_cache)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marker.exists(), "an entry planted in a world-writable torch cache directory was unpickled"
    assert WARNING.findall(r.stderr) == [("torch's cache directory", str(torch_cache))], r.stderr
    assert f"Fix: chmod 700 {torch_cache}, or set TORCHINDUCTOR_CACHE_DIR to a private directory" in r.stderr
    assert "aot: {}" in r.stdout  # no lookup, no entry written

    # ember's own caches still work: the kernels come from its (private) disk cache.
    r = run(TRAINING + "    print('disk hits:', ember.stats()['disk_cache_hits'])\n", ember_cache, torch_cache)
    assert r.returncode == 0 and not marker.exists(), r.stderr[-3000:]
    assert "disk hits: 0" not in r.stdout and "disk hits:" in r.stdout, r.stdout


def test_entries_planted_while_the_dir_was_open_are_refused_after_chmod(tmp_path):
    """chmod 700 closes the directory, but an entry another user planted before stays:
    ember refuses a torch cache directory holding entries not owned by us (as root, the
    test makes one; otherwise a symlinked entry stands in for it)."""
    ember_cache = private_dir(tmp_path / "ember")
    torch_cache = private_dir(tmp_path / "torch")
    marker = tmp_path / "planted-entry-was-unpickled"
    assert run(TRAINING, ember_cache, torch_cache).returncode == 0
    entries = [p for p in (torch_cache / "aotautograd").rglob("*") if p.is_file()]
    _plant(torch_cache, marker)
    planted = entries[0]
    if os.geteuid() == 0:
        os.chown(planted, 12345, 12345)
        expected = "owned by uid 12345"
    else:
        target = tmp_path / "elsewhere"
        planted.rename(target)
        planted.symlink_to(target)
        expected = "is a symlink"
    r = run(TRAINING, ember_cache, torch_cache)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marker.exists()
    assert expected in r.stderr and f"rm -r {torch_cache / 'aotautograd'}" in r.stderr, r.stderr

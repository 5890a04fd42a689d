"""The suite's tables: one line per (model, variant, mode, threads) with eager / Inductor /
ember side by side, the geomeans the acceptance criteria ask for, the top kernels of both
backends wherever ember is slower than Inductor, and the re-measured reference rows
against the stored ones."""
from __future__ import annotations

import math
from collections import defaultdict

from . import bandwidth

MODELESS = ("eager", "dynamo")  # backends with one row for every mode
WARM_TARGET = 0.6  # issue 27: ember's warm first call <= 0.6x Inductor's where Dynamo's floor allows


def _group(rows: list[dict]) -> dict:
    """(model, variant, mode, threads) -> backend -> row; eager's and Dynamo's floor's
    default-mode rows serve every mode (they have no modes). A later row of the same key
    replaces an earlier one."""
    groups: dict = defaultdict(dict)
    modeless = {}
    for r in rows:
        if r.get("record", "row") != "row":
            continue
        k = (r["model"], r["variant"], r["mode"], r.get("threads"))
        groups[k][r["backend"]] = r
        if r["backend"] in MODELESS:
            modeless[(r["model"], r["variant"], r.get("threads"), r["backend"])] = r
    for (model, variant, mode, threads), g in groups.items():
        for b in MODELESS:
            if b not in g and (model, variant, threads, b) in modeless:
                g[b] = modeless[(model, variant, threads, b)]
    return {k: g for k, g in groups.items() if not (k[2] != "default" and set(g) <= set(MODELESS))}


def _ms(r):
    return r.get("median_ms") if r and r.get("status") == "ok" else None


def _beside(r) -> dict | None:
    """A CPU row's timing beside eager's calls in its own process (measure._beside_eager)."""
    b = (r or {}).get("beside") if r and r.get("status") == "ok" else None
    return b if b and b.get("speedup") else None


def beside_pair(g: dict, over: str = "inductor", of: str = "ember") -> bool:
    """Whether speedup(g, over, of) comes from timings beside eager (not from two processes' medians)."""
    b_of = _beside(g.get(of))
    if over == "eager":
        return b_of is not None
    b_over = _beside(g.get(over))
    return bool(b_of and b_over and b_of["clock"] == b_over["clock"])


def speedup(g: dict, over: str = "inductor", of: str = "ember") -> float | None:
    """`of`'s speed over `over`'s. Where the rows timed eager's calls beside their own (CPU
    rows, measure._beside_eager): over eager, that speedup; over another backend, the ratio
    of the two speedups, each from its own process, so that what slowed a process slowed
    eager's calls in it too. Otherwise the ratio of the medians of the separate processes."""
    if beside_pair(g, over, of):
        b_of = _beside(g[of])["speedup"]
        return b_of if over == "eager" else b_of / _beside(g[over])["speedup"]
    a, b = _ms(g.get(over)), _ms(g.get(of))
    return a / b if a and b else None


def _marked(g: dict, over: str) -> str:
    """A ratio's text: '~' after one from two processes' medians where the CPU rows could
    have been timed beside eager (a row without `beside`)."""
    s = speedup(g, over)
    cpu = (g.get("ember") or {}).get("device") == "cpu"
    return _f(s, ".2f") + ("~" if s is not None and cpu and not beside_pair(g, over) else "")


def _f(v, spec=".2f", missing=""):
    return missing if v is None else format(v, spec)


def _state(r) -> str:
    if r is None:
        return ""
    if r.get("status") in ("error", "timeout", "skipped"):
        return r["status"][:4].upper()
    return ""


def _correct(r) -> str:
    if r is None or r.get("backend") == "eager":
        return ""
    if "accurate" not in r:
        return _state(r) or "?"
    return "ok" if r["accurate"] else "NO"


def _prof(r, field):
    p = (r or {}).get("profile") or {}
    return p.get(field)


def table(rows: list[dict]) -> str:
    head = (f"{'model':20} {'var':5} {'mode':5} {'thr':>3} {'eager ms':>9} {'ind ms':>9} {'ember ms':>9} "
            f"{'vs ind':>6} {'vs eag':>6} {'ok i/e':>6} {'graphs':>6} {'brk':>3} {'fb':>2} "
            f"{'e kern':>6} {'e aten':>6} {'i kern':>6} {'cold i/e s':>11} {'warm i/e s':>11} {'floor s':>7} "
            f"{'peak i/e MiB':>13}")
    lines = [head]
    for k, g in sorted(_group(rows).items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], kv[0][3] or 0)):
        model, variant, mode, threads = k
        e, i, m = g.get("eager"), g.get("inductor"), g.get("ember")
        em = (m or {}).get("ember", {})
        dyn = (m or i or {}).get("dynamo", {})

        def ms(r):
            return _state(r) or _f(_ms(r), ".3f")

        def pair(field, spec=".1f"):
            def one(r):
                # "*": a first call on the caches the default mode filled (not a cold one)
                shared = field == "first_call_s" and (r or {}).get("first_call_cache") == "default mode's"
                return _f((r or {}).get(field), spec, "-") + ("*" if shared else "")
            return f"{one(i)}/{one(m)}"
        peak = "peak_mib" if (m or i or {}).get("device") == "cuda" else "peak_rss_delta_mib"
        mode_short = {"default": "def", "reduce-overhead": "ro"}.get(mode, mode[:5])
        lines.append(
            f"{model[:20]:20} {variant[:5]:5} {mode_short:5} {threads or '':>3} {ms(e):>9} {ms(i):>9} {ms(m):>9} "
            f"{_marked(g, 'inductor'):>6} {_marked(g, 'eager'):>6} "
            f"{_correct(i) + '/' + _correct(m):>6} {_f(dyn.get('graphs'), 'd'):>6} {_f(dyn.get('graph_breaks'), 'd'):>3} "
            f"{_f(em.get('eager_fallback_graphs'), 'd'):>2} "
            f"{_f(((_prof(m, 'by_kind') or {}).get('ember') or {}).get('kernels_per_step'), '.0f'):>6} "
            f"{_f(_prof(m, 'aten_calls_per_step'), '.0f'):>6} {_f(_prof(i, 'kernels_per_step'), '.0f'):>6} "
            f"{pair('first_call_s'):>11} {pair('warm_first_call_s'):>11} {_f(floor_s(g), '.1f', '-'):>7} "
            f"{pair(peak, '.0f'):>13}")
    return "\n".join(lines)


def floor_s(g: dict) -> float | None:
    """Dynamo's floor: the first call of torch.compile(backend="eager") in a fresh process."""
    r = g.get("dynamo")
    return r.get("first_call_s") if r and r.get("status") == "ok" else None


def warm_check(g: dict) -> tuple[float, str] | None:
    """(ember's warm first call / Inductor's, verdict): "met" (<= WARM_TARGET), "floor"
    (not met, and Dynamo's floor is above WARM_TARGET x Inductor's: the target is out of
    reach for any Dynamo backend), "no floor" (not met, no floor measured) or "NOT MET"."""
    i, m = (g.get("inductor") or {}).get("warm_first_call_s"), (g.get("ember") or {}).get("warm_first_call_s")
    if not i or not m:
        return None
    ratio, floor = m / i, floor_s(g)
    if ratio <= WARM_TARGET:
        return ratio, "met"
    if floor is None:
        return ratio, "no floor"
    return ratio, "floor" if floor > WARM_TARGET * i else "NOT MET"


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def acceptance(rows: list[dict]) -> str:
    """Per (device, threads): ember over Inductor geomean and minimum for inference and
    training (default mode) and for reduce-overhead; ember over eager; cold first call
    ember / Inductor; models correct; models with eager-fallback graphs."""
    out = []
    by_setting: dict = defaultdict(dict)
    for k, g in _group(rows).items():
        any_row = next(iter(g.values()))
        by_setting[(any_row.get("device_name") or any_row.get("device"), k[3])][k] = g
    for (device, threads), groups in sorted(by_setting.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        out.append(f"{device}{f', {threads} threads' if threads else ''}:")
        for label, variant, mode in (("inference", "infer", "default"), ("training", "train", "default"),
                                     ("inference, reduce-overhead", "infer", "reduce-overhead"),
                                     ("training, reduce-overhead", "train", "reduce-overhead")):
            sel = {k: g for k, g in groups.items() if k[1] == variant and k[2] == mode and "ember" in g}
            if not sel:
                continue
            pairs = [(k[0], speedup(g)) for k, g in sel.items() if speedup(g)]
            vs_eager = [(k[0], speedup(g, "eager")) for k, g in sel.items() if speedup(g, "eager")]
            colds = [g["inductor"]["first_call_s"] / g["ember"]["first_call_s"] for g in sel.values()
                     if g.get("inductor", {}).get("first_call_s") and g.get("ember", {}).get("first_call_s")
                     and "default mode's" not in (g["inductor"].get("first_call_cache"), g["ember"].get("first_call_cache"))]
            embers = [g["ember"] for g in sel.values()]
            correct = sum(1 for r in embers if r.get("accurate"))
            checked = sum(1 for r in embers if "accurate" in r)
            fallback = sorted(r["model"] for r in embers if (r.get("ember") or {}).get("eager_fallback_graphs"))
            failed = sorted(r["model"] for r in embers if r.get("status") in ("error", "timeout"))
            lo = min(pairs, key=lambda p: p[1]) if pairs else None
            lo_e = min(vs_eager, key=lambda p: p[1]) if vs_eager else None
            paired = sum(1 for g in sel.values() if speedup(g) and beside_pair(g))
            out.append(
                f"  {label}: ember/Inductor geomean {_f(geomean([p[1] for p in pairs]), '.3f', 'n/a')}x over "
                f"{len(pairs)} models, min {_f(lo and lo[1], '.2f', 'n/a')}x ({lo[0] if lo else '-'}); "
                f"ember/eager geomean {_f(geomean([p[1] for p in vs_eager]), '.3f', 'n/a')}x, "
                f"min {_f(lo_e and lo_e[1], '.2f', 'n/a')}x ({lo_e[0] if lo_e else '-'}); "
                f"cold first call Inductor/ember geomean {_f(geomean(colds), '.2f', 'n/a')}x"
                + (f"; {paired} of {len(pairs)} ember/Inductor ratios from speedups over eager timed beside each"
                   if any(_beside(g.get("ember")) for g in sel.values()) else ""))
            out.append(f"    correct {correct}/{checked} of {len(embers)} ember rows; eager-fallback graphs in "
                       f"{len(fallback)}: {', '.join(fallback) or '-'}; failed: {', '.join(failed) or '-'}")
            warm = {k[0]: warm_check(g) for k, g in sel.items() if warm_check(g)}
            if warm:
                by = defaultdict(list)
                for model, (ratio, verdict) in sorted(warm.items()):
                    by[verdict].append(f"{model} {ratio:.2f}x")
                out.append(f"    warm first call ember/Inductor geomean "
                           f"{_f(geomean([r for r, _ in warm.values()]), '.2f', 'n/a')}x over {len(warm)} models; "
                           f"<= {WARM_TARGET}x: {len(by['met'])}; not met: {', '.join(by['NOT MET']) or '-'}; "
                           f"not met, Dynamo's floor above {WARM_TARGET}x Inductor's: {', '.join(by['floor']) or '-'}"
                           + (f"; not met, no floor row: {', '.join(by['no floor'])}" if by["no floor"] else ""))
    return "\n".join(out)


def slower_profiles(rows: list[dict], top: int = 8) -> str:
    """For each (model, variant, mode, threads) where ember is slower than Inductor, the top
    kernels of both by device time (GPU) or CPU time (CPU)."""
    out = []
    for k, g in sorted(_group(rows).items()):
        s = speedup(g)
        if s is None or s >= 1.0:
            continue
        out.append(f"{k[0]} {k[1]} {k[2]}{f' {k[3]} threads' if k[3] else ''}: ember {s:.2f}x Inductor")
        for backend in ("inductor", "ember"):
            p = g[backend].get("profile")
            if not p:
                out.append(f"  {backend}: no profile ({g[backend].get('profile_error', 'not taken')})")
                continue
            unit = "device" if g[backend].get("device") == "cuda" else "cpu"
            total = p.get("device_us_per_step", p.get("attributed_cpu_us_per_step"))
            kinds = ", ".join(f"{kind} {v['kernels_per_step']:g}x {v['us_per_step']:.0f}us"
                              for kind, v in sorted(p["by_kind"].items(), key=lambda kv: -kv[1]["us_per_step"]))
            out.append(f"  {backend}: {total} us {unit} time per step ({kinds}); "
                       f"ATen calls {p['aten_calls_per_step']}/step")
            for t in p["top"][:top]:
                ops = f"  [{t['ops']}]" if t.get("ops") else ""
                out.append(f"    {t['us_per_step']:>10.1f} us {t['calls_per_step']:>5g}x {t['share']:>6.1%} "
                           f"{t['kind']:<10} {t['name'][:90]}{ops[:80]}")
    return "\n".join(out)


def reference_check(rows: list[dict]) -> str:
    """Re-measured reference rows over the stored ones (median time): near 1.0 when the
    machine matches the one that measured them."""
    out, ratios = [], []
    for r in rows:
        stored = r.get("ref_stored")
        if stored and _ms(r):
            ratio = r["median_ms"] / stored["median_ms"]
            ratios.append(ratio)
            threads = f" {r['threads']} threads" if r.get("threads") else ""
            out.append(f"  {r['model']} {r['variant']} {r['backend']} {r['mode']}{threads}: "
                       f"{r['median_ms']:.3f} ms now / {stored['median_ms']:.3f} ms stored = {ratio:.3f}")
    if not out:
        return ""
    return (f"reference rows re-measured / stored: geomean {geomean(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f})\n" + "\n".join(out))


def fingerprint_mismatches(rows: list[dict]) -> list[str]:
    """Reused reference rows whose model differs from the ember row's (a stale cache)."""
    out = []
    for k, g in _group(rows).items():
        fp = (g.get("ember") or {}).get("fingerprint")
        for b in ("eager", "inductor"):
            r = g.get(b)
            if fp and r and r.get("source") == "cache" and r.get("fingerprint") and r["fingerprint"] != fp:
                out.append(f"{k[0]} {k[1]} {b}: stored row's fingerprint {r['fingerprint']} != ember's {fp}")
    return out


def bandwidth_report(rows: list[dict], min_mib: float = bandwidth.MIN_MIB) -> str:
    """Achieved / copy bandwidth of ember's kernels (bandwidth.py), over the latest ember
    row of each (model, variant, mode, threads)."""
    embers = [g["ember"] for g in _group(rows).values() if (g.get("ember") or {}).get("bandwidth")]
    return bandwidth.summary(embers, min_mib) if embers else ""


def report(rows: list[dict], min_mib: float = bandwidth.MIN_MIB) -> str:
    parts = [table(rows), "(* a first call on the caches the default mode filled, not a cold one; ~ a CPU ratio of two "
                          "processes' medians, not of speedups over eager timed beside each backend)", "",
             acceptance(rows)]
    bw = bandwidth_report(rows, min_mib)
    if bw:
        parts += ["", "ember kernels' achieved bandwidth / the device-to-device copy's (issue 23, acceptance 3):", bw]
    prof = slower_profiles(rows)
    if prof:
        parts += ["", "Where ember is slower than Inductor, the top kernels of both:", prof]
    ref = reference_check(rows)
    if ref:
        parts += ["", ref]
    stale = fingerprint_mismatches(rows)
    if stale:
        parts += ["", "STALE reference rows (rerun them without the cache):"] + stale
    return "\n".join(parts)

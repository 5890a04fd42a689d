"""How ember's tools report times: phases that ran in the background are labelled so and
not summed into the backend's time; the bench chart's legend covers no bar's label."""
import pytest

from ember.explain import format_times


def test_background_phases_are_labelled_and_not_inside_the_total():
    g = {"times_s": {"import": 0.001, "parse": 0.0002, "codegen": 0.0004, "compile": 0.6481, "load": 0.004,
                     "total": 0.0547}, "background_phases": ["compile", "load"]}
    text = format_times(g)
    assert text == ("54.7 ms in the backend (import 1.0 ms, parse 0.2 ms, codegen 0.4 ms); "
                    "in the background: C compiler 648.1 ms, load 4.0 ms")


def test_a_compile_inside_the_backend_is_one_sum():
    g = {"times_s": {"parse": 0.001, "compile": 0.2, "total": 0.21}, "background_phases": []}
    assert format_times(g) == "210.0 ms (parse 1.0 ms, C compiler 200.0 ms)"


def test_explain_says_which_phases_ran_in_the_background(tmp_path):
    import torch

    import ember

    ember.config.cache_dir, before = str(tmp_path), ember.config.cache_dir
    try:
        report = ember.explain(lambda x: torch.softmax(x * 5, -1), torch.randn(4, 31), graph_breaks=False,
                               options={"compile_in_background": True, "cache_dir": str(tmp_path)})
    finally:
        ember.config.cache_dir = before
    (g,) = report.graphs
    assert g["cache"] == "miss" and g["background_phases"] == ["compile", "load"]
    assert "in the background: C compiler" in str(report)


def _report(cold_s: dict) -> dict:
    backends = {}
    for name, cold in cold_s.items():
        backends[name] = {
            "steady": {"median_ms": 3.0, "p10_ms": 2.9, "p90_ms": 3.2},
            "first_call": {"cold": {"first_call_s": cold, "graphs": 1, "kernels": 12},
                           "warm": {"first_call_s": cold / 4, "graphs": 1, "kernels": 12}},
            "speedup_vs_eager": 1.0}
    return {"target": "tiny_gpt2", "machine": {"cpu": "test cpu"}, "threads": 2, "torch": "2.13",
            "date": "2026-11-26", "settings": {"rounds": 10, "per_round": 10, "warmup": 5},
            "backends": backends}


@pytest.mark.parametrize("cold", [{"eager": 0.05, "inductor": 10.92, "ember": 1.2},   # log scale
                                  {"eager": 0.8, "inductor": 10.92, "ember": 4.1}])   # linear
def test_bench_chart_legend_covers_no_bar_label(cold):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from ember.tools.bench import draw_figure

    fig = draw_figure(_report(cold))
    try:
        renderer = fig.canvas.get_renderer()
        comp = fig.axes[1]
        legend = comp.get_legend().get_window_extent(renderer)
        labels = [t for t in comp.texts if t.get_text().endswith(" s")]
        assert "10.92 s" in [t.get_text() for t in labels]
        figure_box = fig.bbox
        for t in labels:
            box = t.get_window_extent(renderer)
            assert not box.overlaps(legend), t.get_text()
            assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1 and box.y1 <= figure_box.y1, t.get_text()
            assert box.y1 <= comp.get_window_extent(renderer).y1 + 1, f"{t.get_text()} sticks out of the plot"
    finally:
        plt.close(fig)

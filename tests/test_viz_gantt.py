"""Gantt charts and bubble-vs-m figures: one box per op, consistent colours, readable labels."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_hex
from matplotlib.text import Text

from parlab.schedules import (
    Costs,
    Op,
    Timeline,
    bubble_curves,
    gpipe,
    interleaved_1f1b,
    one_f_one_b,
    simulate,
    tradeoff,
    zero_bubble_h1,
)
from parlab.viz.figures import natural_size, png_size, render_png
from parlab.viz.gantt import (
    COLORS,
    FONT,
    bubble_figure,
    gantt_figure,
    plot_gantt,
    tradeoff_figure,
)


def texts(fig) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_text()]


@pytest.mark.parametrize("sched", [gpipe(3, 4), one_f_one_b(4, 8), zero_bubble_h1(4, 6),
                                   interleaved_1f1b(2, 4, 3)], ids=lambda s: s.name)
def test_gantt_draws_one_box_per_op_coloured_by_kind(sched):
    tl = simulate(sched)
    fig = gantt_figure(tl)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if p.get_gid()]
    assert len(boxes) == sum(len(ops) for ops in sched.stages)
    assert len(ax.patches) == len(boxes) + sched.p  # plus one idle band per stage
    for s, spans in enumerate(tl.spans):
        for op, t0, t1 in spans:
            box = next(b for b in boxes if b.get_gid() == f"{s}:{op.label(sched.v)}")
            assert (box.get_x(), box.get_width()) == pytest.approx((float(t0), float(t1 - t0)))
            assert to_hex(box.get_facecolor()) == COLORS[op.kind]
            assert box.get_y() < s < box.get_y() + box.get_height()


def test_gantt_labels_every_box_with_its_microbatch_at_9pt_or_more():
    tl = simulate(one_f_one_b(4, 8))
    fig = gantt_figure(tl)
    in_boxes = [t for t in fig.axes[0].texts]
    assert sorted(t.get_text() for t in in_boxes) == sorted(
        str(op.microbatch) for ops in tl.schedule.stages for op in ops)
    assert all(t.get_fontsize() >= FONT >= 9 for t in texts(fig))
    assert "bubble 27.3%" in fig.axes[0].get_title(loc="left")
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["forward", "backward", "idle"]


def test_gantt_skips_labels_that_would_not_fit_rather_than_shrinking_them():
    fig = gantt_figure(simulate(gpipe(2, 64)), width=4)
    ax = fig.axes[0]
    assert len(ax.texts) < 4 * 64 and all(t.get_fontsize() >= 9 for t in texts(fig))


def test_gantt_legend_names_w_and_chunks():
    zb = gantt_figure(simulate(zero_bubble_h1(2, 2))).axes[0].get_legend().get_texts()
    assert [t.get_text() for t in zb] == ["forward", "backward (input grad)", "weight gradient",
                                          "idle"]
    il = gantt_figure(simulate(interleaved_1f1b(2, 2, 2))).axes[0].get_legend().get_texts()
    assert "chunk 1" in [t.get_text() for t in il]


def test_gantt_shows_p2p_gaps_as_idle_time():
    tl = simulate(gpipe(2, 1), Costs(1, 1, 1, p2p=1))
    box = next(b for b in gantt_figure(tl).axes[0].patches if b.get_gid() == "1:F0")
    assert box.get_x() == 2  # stage 0's F0 ends at 1, the send takes 1


def test_a_measured_timeline_draws_the_same_way():
    sched = gpipe(2, 1)
    measured = Timeline(sched, (((Op("F", 0), 0.0, 1.2), (Op("B", 0), 3.5, 5.0)),
                                ((Op("F", 0), 1.3, 2.4), (Op("B", 0), 2.4, 3.4))))
    fig = gantt_figure(measured, title="measured", unit="ms")
    assert [b.get_gid() for b in fig.axes[0].patches if b.get_gid()] == ["0:F0", "0:B0", "1:F0",
                                                                          "1:B0"]
    assert measured.costs is None and measured.makespan == 5.0


def test_zero_costs_draw_an_empty_chart_without_dividing_by_zero():
    tl = simulate(one_f_one_b(2, 2), Costs(0, 0, 0))
    assert tl.makespan == 0 and tl.bubble_fraction == 0
    assert len([b for b in gantt_figure(tl).axes[0].patches if b.get_gid()]) == 8


def test_plot_gantt_draws_on_a_given_axes():
    from parlab.viz.figures import new_figure

    fig = new_figure(5, 2)
    boxes = plot_gantt(fig.add_subplot(), simulate(gpipe(2, 2)), title="mine", unit="ms")
    assert len(boxes) == 8 and fig.axes[0].get_xlabel() == "ms"
    assert fig.axes[0].get_title(loc="left").startswith("mine: p=2, m=2")


def test_bubble_figure_plots_the_simulated_curves():
    fig = bubble_figure(4, range(1, 17), v=2)
    ax = fig.axes[0]
    curves = bubble_curves(4, range(1, 17), v=2)
    assert len(ax.lines) == len(curves) == 4
    for line, points in zip(ax.lines, curves.values(), strict=True):
        assert list(line.get_ydata()) == pytest.approx([100 * float(b) for _, b in points])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "GPipe", "1F1B", "interleaved 1F1B (v=2)", "ZB-H1"]
    assert all(t.get_fontsize() >= 9 for t in texts(fig))


def test_tradeoff_figure_draws_the_computed_table():
    rows = tradeoff(4, 8)
    fig = tradeoff_figure(rows, "p=4, m=8")
    assert len(fig.axes) == 4
    widths = [[bar.get_width() for bar in ax.patches] for ax in fig.axes]
    assert widths == [[float(r.activations) for r in rows], [r.weight_versions for r in rows],
                      [r.staleness for r in rows],
                      pytest.approx([100 * float(r.bubble_fraction) for r in rows])]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [r.name for r in rows]
    assert all(t.get_fontsize() >= 9 for t in texts(fig))


def test_figures_render_crisp_pngs_at_natural_width(tmp_path):
    figs = {"1f1b": gantt_figure(simulate(one_f_one_b(4, 8))),
            "zb_h1": gantt_figure(simulate(zero_bubble_h1(4, 8))),
            "interleaved": gantt_figure(simulate(interleaved_1f1b(4, 8, 2))),
            "bubble": bubble_figure(4, range(1, 33)), "tradeoff": tradeoff_figure(tradeoff(4, 8))}
    for name, fig in figs.items():
        png = render_png(fig)
        w, h = natural_size(fig)
        assert png_size(png) == (2 * w, 2 * h) and 600 <= w <= 960
        (tmp_path / f"{name}.png").write_bytes(png)

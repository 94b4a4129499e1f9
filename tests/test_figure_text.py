"""Every label of a figure can be read (issue 20 item 12): no text outside the canvas, no two
labels over each other, no text spilling out of the box it is written on. The rule
(``parlab.viz.text_layout``) is shown to catch each fault, then held over every dashboard's
figure at its defaults and the chapters' figures that need no live run (the measured ones drawn
from a fixed timeline of the same shape)."""

from __future__ import annotations

import pytest

from parlab.viz.figures import new_figure
from parlab.viz.text_layout import layout_problems


# -- the rule catches what it is for -------------------------------------------------------------
def test_a_clean_figure_has_no_problems():
    fig = new_figure(5, 3, bottom=0.2)
    ax = fig.add_subplot()
    ax.plot([1, 2], [3, 4], label="a line")
    ax.set_xlabel("x (s)")
    ax.set_title("a title")
    ax.legend(loc="upper left")
    assert layout_problems(fig) == []


def test_a_title_over_a_legend_is_caught():  # chapter 03's DDP timeline had this
    fig = new_figure(5, 2.5, top=0.8)
    ax = fig.add_subplot()
    ax.plot([1, 2], [3, 4], label="forward")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 1.2), ncol=4, frameon=False)
    ax.set_title("one DDP step of TinyGPT on 4 CPU ranks", pad=18)
    assert any("title" in p and "overlaps" in p and "legend" in p for p in layout_problems(fig))


def test_a_label_outside_the_canvas_is_caught():  # chapter 10's validation figure had this
    fig = new_figure(5, 2, bottom=0.02)
    fig.add_subplot().set_xlabel("model (Megatron-LM 2021, Table 1)")
    assert any("x label" in p and "outside" in p for p in layout_problems(fig))


def test_a_text_spilling_out_of_its_box_is_caught():  # chapter 10's stack figure had this
    from matplotlib.patches import Rectangle

    fig = new_figure(3, 2)
    ax = fig.add_subplot()
    ax.add_patch(Rectangle((0.4, 0.4), 0.2, 0.2))
    ax.text(0.5, 0.5, "parlab.comm.launch / torchrun", ha="center", va="center")
    assert any("spills" in p for p in layout_problems(fig))


# -- the figures of the course ---------------------------------------------------------------------
def chapter_figures():
    """(name, a function drawing the figure) for the chapters' figures that need no live run."""
    from parlab.costmodel import get_model
    from parlab.costmodel.answers.scenarios import comm_time_vs_bandwidth, zero3_vs_3d
    from parlab.costmodel.answers.validation import megatron_table1, megatron_zero3
    from parlab.costmodel.search.advisor import SCENARIOS, guide_scenarios
    from parlab.schedules import make_schedule, simulate
    from parlab.viz import advisor, comm, gantt, grid, tensor, zero
    from parlab.viz import costmodel as cv
    from parlab.viz.data_parallel import timeline_figure

    def on_axes(draw, *size, **margins):
        def make():
            fig = new_figure(*size, **margins)
            draw(fig.add_subplot())
            return fig
        return make

    gbits = [10, 25, 64, 100, 200, 400, 800]
    step = [("forward", 0, 0.01), ("backward", 0.01, 0.03), (("comm", 0), 0.02, 0.035), ("optimizer", 0.035, 0.04)]
    held = {"parameters": 4e4, "optimizer states": 8e4}
    history = [(label, {**held, "gathered": g, "gradients": d}) for label, g, d in
               [("forward start", 2e4, 0), (("gather", 0), 3e4, 0), ("backward end", 1e4, 4e4), ("updated", 0, 1e4)]]
    yield "ring (02)", lambda: comm.ring_figure(4)
    yield "DDP timeline, 2 and 4 ranks (03)", lambda: timeline_figure([step] * 2, title="one DDP step on 2 ranks")
    yield "DDP timeline, 4 ranks (03)", lambda: timeline_figure([step] * 4, title="one DDP step of TinyGPT on 4 CPU ranks")
    for name, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)):
        yield f"{name} Gantt (04)", lambda name=name, v=v: gantt.gantt_figure(simulate(make_schedule(name, 4, 8, v)))
    yield "bubble vs m (04)", lambda: gantt.bubble_figure(4, [4, 8, 12, 16, 24, 32])
    yield "TP splits (05)", lambda: tensor.split_figure(2)
    yield "TP modes scaling (05)", lambda: tensor.scaling_figure(get_model("gpt3-175b"), 16,
                                                                [4, 8, 16, 27, 32, 64, 128, 256, 512], depth=2)
    yield "ZeRO shards (07)", lambda: zero.shard_figure(4)
    yield "ZeRO timeline (07)", lambda: zero.timeline_figure({0: history, 3: history[::2]})
    yield "ZeRO-3 vs PTD-P (07)", lambda: zero.megatron_zero3_figure(
        [r for r in megatron_zero3() if r.params_b == 174.6])
    yield "3D grid (08)", lambda: grid.grid_figure(gpus_per_node=8)
    yield "MT-NLG grid (08)", lambda: grid.mt_nlg_figure(8)
    yield "validation (10)", on_axes(lambda ax: cv.plot_validation(ax, megatron_table1()), 6.5, 2.8,
                                     left=0.1, bottom=0.2)
    yield "comm vs bandwidth (10)", on_axes(lambda ax: cv.plot_comm_vs_bandwidth(
        ax, gbits, comm_time_vs_bandwidth(2 * get_model("llama-65b").num_params(), 16, gbits),
        "LLaMA-65B bf16 gradients, 16 nodes"), 4.5, 2.6, left=0.16, bottom=0.2)
    yield "ZeRO-3 vs 3D (10)", on_axes(lambda ax: cv.plot_zero3_vs_3d(
        ax, zero3_vs_3d(get_model("gpt3-175b"), [256, 2048], 2048)), 5.5, 2.8,
        left=0.12, bottom=0.18)
    yield "decision tree (10)", lambda: advisor.decision_figure(guide_scenarios(SCENARIOS[:4]))  # 4 leaves
    yield "stacks (10)", lambda: advisor.stack_figure()


@pytest.mark.parametrize("name, make", list(chapter_figures()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_chapter_figure_reads(name, make):
    assert layout_problems(make()) == []


def test_every_dashboard_figure_reads_at_its_defaults(monkeypatch):
    import parlab.widgets.base as base
    from parlab.bench.widgets import dashboards
    from parlab.widgets import DrillDashboard

    drawn = []
    monkeypatch.setattr(base, "render_png", lambda fig, scale=2: drawn.append(fig) or b"")
    problems = []
    for name, factory in [(d[0], d[1]) for d in dashboards()] + [("DrillDashboard", DrillDashboard)]:
        drawn.clear()
        factory()
        problems += [f"{name}: {p}" for fig in drawn for p in layout_problems(fig)]
    assert not problems, "\n".join(problems)


def test_every_cover_that_is_not_a_dashboard_reads():
    """The chapters' covers (``parlab.course.cover``); a dashboard's cover is its figure, tested above."""
    from parlab.course.cover import COVERS

    for name, (_, draw) in COVERS.items():
        if draw.__name__ != "draw":  # parlab.course.cover._dashboard's closures
            assert layout_problems(draw()) == [], name

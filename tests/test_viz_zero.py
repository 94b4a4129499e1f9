"""Chapter 07's pictures: the shard map says what ZeRO's Figure 1 says, and every figure renders."""

from __future__ import annotations

import pytest

from parlab.costmodel import Plan, estimate, make_cluster
from parlab.viz.figures import natural_size, png_size, render_png
from parlab.viz.zero import (
    EMPTY,
    TERMS,
    memory_figure,
    shard_figure,
    sharded,
    stages_figure,
    state_bytes,
)


def test_each_stage_shards_one_more_term_and_keeps_the_papers_bytes_per_param():
    # Rajbhandari et al. 2020, Figure 1: (2 + 2 + 12), 4 + 12/N, 2 + 14/N, 16/N bytes per parameter
    n = 4
    assert [sum(state_bytes(s, n).values()) for s in range(4)] == [16, 4 + 12 / n, 2 + 14 / n, 16 / n]
    assert [[t for t in TERMS if sharded(s, n)[t]] for s in range(4)] == [
        [], ["optimizer states"], ["gradients", "optimizer states"], list(TERMS)]
    assert not any(sharded(3, 1).values())  # one rank: nothing to shard


def _filled(ax) -> int:
    from matplotlib.colors import to_hex

    return sum(1 for p in ax.patches if to_hex(p.get_facecolor()) != EMPTY)


def test_the_shard_map_fills_what_each_rank_holds_and_renders_at_2x():
    n = 4
    fig = shard_figure(n)
    per_panel = [_filled(ax) for ax in fig.axes]
    # every rank holds all n shards of a whole term and its own shard of a sharded one
    assert per_panel == [n * sum(n if not sharded(s, n)[t] else 1 for t in TERMS) for s in range(4)]
    png = render_png(fig)
    assert png_size(png)[0] == 2 * natural_size(fig)[0]
    with pytest.raises(ValueError, match="2..8 ranks"):
        shard_figure(9)
    with pytest.raises(ValueError, match="ZeRO stage must be one of"):
        shard_figure(4, stages=(4,))


def test_memory_and_stage_figures_render_with_invalid_stages_marked():
    modelled = {s: state_bytes(s, 4, 1e6) for s in range(4)}
    fig = memory_figure(modelled, modelled, {s: (2e7, 2.1e7) for s in range(4)}, title="t")
    assert len(fig.axes[0].get_xticklabels()) == 4
    assert render_png(fig, 1).startswith(b"\x89PNG")
    cluster = make_cluster("dgx-a100", 64)
    ests = {0: "offload needs ZeRO >= 1", 3: estimate("llama-65b", cluster, Plan(dp=64, zero=3, offload="optimizer"))}
    fig = stages_figure(ests, 3)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count(" not valid") == 2
    assert [t.get_fontweight() for t in fig.axes[0].get_yticklabels()] == ["normal", "bold"]


def test_zero3s_gathered_units_are_drawn_on_top_of_its_states():
    from matplotlib.colors import to_hex

    from parlab.viz.zero import COLORS, GATHERED

    modelled = {3: {**state_bytes(3, 4, 1e6), GATHERED: 5e5}}
    ax = memory_figure(modelled).axes[0]
    tops = {to_hex(p.get_facecolor()): p.get_y() + p.get_height() for p in ax.patches}
    assert tops[COLORS[GATHERED]] * 2**20 == pytest.approx(sum(modelled[3].values()))


def test_the_timeline_stacks_what_a_rank_held_at_each_sample_and_marks_the_phases():
    from parlab.viz.zero import timeline_figure

    held = {"parameters": 1024, "gathered": 0, "gradients": 0, "optimizer states": 2048, "host": 4096}
    history = [("forward start", held), (("forward", 1), {**held, "gathered": 3072}),
               (("backward", 1), {**held, "gathered": 3072, "gradients": 1024}), ("updated", held)]
    ax = timeline_figure({3: history}).axes[0]
    tops = [0.0] * len(history)
    for p in ax.patches:
        tops[round(p.get_x())] = max(tops[round(p.get_x())], p.get_y() + p.get_height())
    assert tops == [3, 6, 7, 3]  # KiB on the device; the host's bytes are not drawn
    assert [t.get_text() for t in ax.texts] == ["forward", "backward", "update"]

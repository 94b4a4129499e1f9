"""Pictures of the rank grid: one cell per rank, one colour per group (the layout's groups, not a
redrawing of them), nodes outlined, MT-NLG drawn node by node; all at most 900 px wide."""

import pytest
from matplotlib.patches import Rectangle

from parlab.layout import Grid
from parlab.viz.figures import natural_size
from parlab.viz.grid import GUIDE_1_9, grid_figure, mt_nlg_figure, mt_nlg_grid, node_edges


def _cells(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def test_guide_1_9_figure_colours_each_group_of_the_layout_alike():
    fig = grid_figure(GUIDE_1_9, gpus_per_node=8)
    assert natural_size(fig)[0] <= 900
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == [
        "8 TP groups of 4 ranks,\ninside a node", "16 DP groups of 2 ranks,\ninside a node",
        "8 PP groups of 4 ranks,\nover 4 nodes"]
    for ax, dim in zip(axes, ("tp", "dp", "pp"), strict=True):
        cells = _cells(ax)
        assert len(cells) == 32
        at = {tuple(round(v - 0.05, 6) for v in c.get_xy()): c.get_facecolor() for c in cells}
        label = {int(t.get_text()): t.get_position() for t in ax.texts}
        color = {rank: at[round(x - 0.5, 6), round(y - 0.5, 6)] for rank, (x, y) in label.items()}
        assert sorted(color) == list(range(32))  # every rank labelled on its own cell
        groups = GUIDE_1_9.groups(dim)
        assert all(len({color[r] for r in g}) == 1 for g in groups)  # one colour inside a group
        if len(groups) <= 16:  # and a different one for each group (the colour maps hold 20)
            assert len({color[g[0]] for g in groups}) == len(groups)


def test_node_outlines_close_around_each_node():
    grid = Grid(dp=2, tp=2, pp=2)
    edges = node_edges(grid, gpus_per_node=4)  # node 0: ranks 0-3 = stage 0 of both replicas
    # 4 boxes of 1 x 2 cells (a node's part of one replica block): 6 unit edges each, the 2
    # between stage 0 and stage 1 of a replica shared by two boxes
    assert len(edges) == 4 * 6 - 2 * 2
    assert node_edges(grid, gpus_per_node=8) != edges


def test_mt_nlg_is_drawn_one_box_per_node():
    fig = mt_nlg_figure(dp=8)
    (ax,) = fig.axes
    assert len(_cells(ax)) == 8 * 35
    assert "2,240 GPUs = 8 replicas x 35 stages x 8-way TP" in ax.get_title()
    assert "one replica = 280 GPUs" in ax.get_title()
    assert mt_nlg_grid(8).world == 2240
    assert natural_size(fig)[0] <= 900
    with pytest.raises(ValueError, match="one node per TP group"):
        mt_nlg_figure(dp=2, gpus_per_node=4)


def test_bad_arguments_name_the_rule():
    with pytest.raises(ValueError, match="at least one group kind"):
        grid_figure(GUIDE_1_9, dims=())
    with pytest.raises(ValueError, match="unknown group 'ep'"):
        grid_figure(GUIDE_1_9, dims=("ep",))

"""The rank grid (parlab.layout): for any dp x tp x pp, coordinates and groups partition the world
the way Megatron-LM lays it out (tp fastest, then dp, then pp), and bad grids name their rule."""

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import parlab.costmodel as cm
from parlab.costmodel.specs.cluster import Cluster
from parlab.layout import ORDER, Coords, Grid, group_span, make_grid, rank_of

degree = st.integers(1, 6)
grids = st.builds(Grid, dp=degree, tp=degree, pp=degree)


# -- properties over many grids -----------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(grids)
def test_coords_and_rank_are_inverse_bijections(grid):
    seen = {grid.coords(r) for r in range(grid.world)}
    assert len(seen) == grid.world
    assert all(grid.rank(**grid.coords(r)._asdict()) == r for r in range(grid.world))


@settings(max_examples=60, deadline=None)
@given(grids, st.sampled_from(ORDER))
def test_the_groups_of_a_dimension_partition_the_world(grid, dim):
    groups = grid.groups(dim)
    assert len(groups) == grid.world // grid.size(dim)
    assert sorted(r for g in groups for r in g) == list(range(grid.world))
    for g in groups:
        assert len(g) == grid.size(dim)
        for i, r in enumerate(g):  # member i sits at coordinate i along dim; the others agree
            c = grid.coords(r)._asdict()
            assert c[dim] == i
            assert grid.group(dim, r) == g
            first = grid.coords(g[0])._asdict()
            assert {k: v for k, v in c.items() if k != dim} == {k: v for k, v in first.items() if k != dim}


@settings(max_examples=50, deadline=None)
@given(grids)
def test_tp_is_fastest_then_dp_then_pp(grid):
    for r in range(grid.world):
        c = grid.coords(r)
        assert r == c.tp + grid.tp * (c.dp + grid.dp * c.pp)
        assert grid.group("tp", r) == tuple(range(r - c.tp, r - c.tp + grid.tp))  # consecutive
        dp = grid.group("dp", r)
        pp = grid.group("pp", r)
        assert all(b - a == grid.tp for a, b in zip(dp, dp[1:], strict=False))
        assert all(b - a == grid.tp * grid.dp for a, b in zip(pp, pp[1:], strict=False))


@settings(max_examples=50, deadline=None)
@given(grids, st.sampled_from([1, 2, 4, 8]))
def test_span_counts_the_nodes_each_group_touches(grid, gpus_per_node):
    for dim in ORDER:
        span = grid.span(dim, gpus_per_node)
        per_group = [{r // gpus_per_node for r in g} for g in grid.groups(dim)]
        assert span.nodes == max(len(nodes) for nodes in per_group)
        fewest = min(min(sum(1 for r in g if r // gpus_per_node == n) for n in nodes)
                     for g, nodes in zip(grid.groups(dim), per_group, strict=True))
        assert span.per_node == fewest


@settings(max_examples=50, deadline=None)
@given(grids)
def test_pipeline_neighbours_are_the_adjacent_members_of_the_pp_group(grid):
    for r in range(grid.world):
        stages = grid.group("pp", r)
        i = grid.coords(r).pp
        assert grid.pipeline_neighbours(r) == (stages[i - 1] if i else None,
                                               stages[i + 1] if i + 1 < grid.pp else None)


# -- the guide's figures ------------------------------------------------------------------------
def test_guide_1_9_figure_32_workers_4_tp_by_4_pp_by_2_dp():
    grid = make_grid(32, dp=2, tp=4, pp=4, gpus_per_node=8, tp_inside_node=True)
    assert grid.coords(13) == Coords(tp=1, dp=1, pp=1)
    assert grid.group("tp", 13) == (12, 13, 14, 15)
    assert grid.group("dp", 13) == (9, 13)
    assert grid.group("pp", 13) == (5, 13, 21, 29)
    assert grid.groups("pp")[:2] == [(0, 8, 16, 24), (1, 9, 17, 25)]


def test_mt_nlg_530b_keeps_tp_in_a_dgx_node_and_pipelines_across_35_nodes():
    grid = Grid(dp=8, tp=8, pp=35)  # Smith et al. 2022 (MT-NLG), Sec. 3.2: 280 GPUs per replica
    assert grid.world == 2240 and grid.tp * grid.pp == 280
    assert not grid.span("tp", 8).crosses_nodes
    assert grid.span("pp", 8).nodes == 35 and grid.span("dp", 8).nodes == 8


def test_the_cost_model_uses_this_layout():
    assert cm.rank_of is rank_of and cm.group_span is group_span and cm.GroupSpan is not None
    assert not hasattr(sys.modules["parlab.costmodel.specs.cluster"], "rank_of")
    assert Cluster.__module__ == "parlab.costmodel.specs.cluster"


def test_the_layout_is_pure_python():
    import subprocess
    code = "import sys, parlab.layout; print(sorted({'torch', 'matplotlib', 'numpy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- bad input ----------------------------------------------------------------------------------
def test_dp_tp_pp_must_equal_the_world_size():
    with pytest.raises(ValueError, match=r"dp x tp x pp must equal the world size: .* = 8, world size 4"):
        Grid(dp=2, tp=2, pp=2).check(world=4)
    with pytest.raises(ValueError, match="dp x tp x pp must equal the world size"):
        make_grid(8, dp=3, tp=2, pp=1)
    with pytest.raises(ValueError, match="tp x pp must divide the world size"):
        Grid.of(6, tp=4)


def test_a_tp_group_split_across_nodes_is_refused_when_asked():
    with pytest.raises(ValueError, match="a TP group must stay inside a node: tp=3 on nodes of 8 GPUs"):
        make_grid(24, tp=3, gpus_per_node=8, tp_inside_node=True)
    with pytest.raises(ValueError, match="a TP group must stay inside a node: tp=16"):
        make_grid(32, tp=16, gpus_per_node=8, tp_inside_node=True)
    assert make_grid(24, tp=3, gpus_per_node=8).tp == 3  # allowed when not asked
    with pytest.raises(ValueError, match="needs gpus_per_node"):
        Grid(tp=2).check(tp_inside_node=True)


@pytest.mark.parametrize("call, rule", [
    (lambda: Grid(dp=0), "positive integer: dp=0"),
    (lambda: Grid(tp=2.0), "positive integer: tp=2.0"),
    (lambda: Grid(dp=2).coords(2), r"integer in 0..1: got 2"),
    (lambda: Grid(dp=2).rank(dp=2), r"dp coordinate .* in 0..1"),
    (lambda: Grid().group("ep", 0), "unknown group 'ep'"),
    (lambda: Grid().span("tp", 0), "positive integer: gpus_per_node=0"),
])
def test_bad_arguments_name_the_rule(call, rule):
    with pytest.raises(ValueError, match=rule):
        call()

"""The 5D rank grid (parlab.layout with cp and ep): the groups are Megatron-Core's, built by its own
rule (``generate_masked_orthogonal_rank_groups`` in megatron/core/parallel_state.py, re-derived here
as "the ranks that share every other coordinate"), with the dense order tp-cp-dp-pp and the expert
order tp-ep-edp-pp; cp = ep = 1 is the 3D grid it always was."""

import math
from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.layout import DIMS, EXPERT_DIMS, Grid, group_span, make_grid


def megatron_groups(sizes: dict[str, int], token: str) -> list[tuple[int, ...]]:
    """Megatron-Core's ``RankGenerator.get_ranks(token)`` for ``sizes`` in order, fastest first: the
    ranks whose coordinates outside ``token`` agree, ascending, the groups by their lowest rank."""
    names, world = list(sizes), math.prod(sizes.values())
    masked = token.split("-")
    groups: dict[tuple[int, ...], list[int]] = {}
    for r in range(world):
        idx, rest = {}, r
        for n in names:
            idx[n], rest = rest % sizes[n], rest // sizes[n]
        groups.setdefault(tuple(idx[n] for n in names if n not in masked), []).append(r)
    return sorted(tuple(g) for g in groups.values())


def _grid(dp: int, tp: int, pp: int, cp: int, k: int) -> Grid:
    """A grid whose ep is the k-th divisor of dp x cp (EP lives inside the dp x cp ranks)."""
    divisors = [e for e in range(1, dp * cp + 1) if dp * cp % e == 0]
    return Grid(dp=dp, tp=tp, pp=pp, cp=cp, ep=divisors[k % len(divisors)])


def grids_5d():
    d = st.integers(1, 3)
    return st.builds(_grid, d, d, d, st.integers(1, 4), st.integers(0, 5))


@settings(max_examples=60, deadline=None)
@given(grids_5d())
def test_dense_groups_are_megatron_cores_tp_cp_dp_pp(grid):
    sizes = {"tp": grid.tp, "cp": grid.cp, "dp": grid.dp, "pp": grid.pp}
    for token in (*DIMS, "dp-cp"):
        assert grid.groups(token) == megatron_groups(sizes, token), token


@settings(max_examples=60, deadline=None)
@given(grids_5d())
def test_expert_groups_are_megatron_cores_tp_ep_edp_pp(grid):
    sizes = {"tp": grid.tp, "ep": grid.ep, "edp": grid.dp * grid.cp // grid.ep, "pp": grid.pp}
    for token in EXPERT_DIMS:
        assert grid.groups(token) == megatron_groups(sizes, token), token
    # Megatron-Core asserts the two generators agree on the pipeline groups (parallel_state.py)
    assert megatron_groups(sizes, "pp") == grid.groups("pp")


@settings(max_examples=40, deadline=None)
@given(grids_5d())
def test_coordinates_name_a_rank_once_and_groups_agree_with_them(grid):
    seen = {(grid.coord("tp", r), grid.coord("cp", r), grid.coord("dp", r), grid.coord("pp", r))
            for r in range(grid.world)}
    assert len(seen) == grid.world
    for r in range(grid.world):
        c = grid.coords(r)
        assert grid.rank(tp=c.tp, dp=c.dp, pp=c.pp, cp=grid.coord("cp", r)) == r
        for dim in EXPERT_DIMS:
            assert grid.expert_group(dim, r)[grid.coord(dim, r)] == r
        # EP and expert-DP together are the dp x cp ranks of this TP/PP position
        assert sorted(a for e in grid.expert_group("edp", r) for a in grid.expert_group("ep", e)) == \
            sorted(grid.group("dp-cp", r))


@pytest.mark.parametrize("dims", list(product((1, 2), (1, 2, 4), (1, 2))))
def test_cp_and_ep_of_one_leave_the_3d_grid_as_it_was(dims):
    dp, tp, pp = dims
    g3, g5 = Grid(dp=dp, tp=tp, pp=pp), Grid(dp=dp, tp=tp, pp=pp, cp=1, ep=1)
    assert g3 == g5
    for r in range(g3.world):
        assert g5.coords(r) == g3.coords(r) and g5.group("dp-cp", r) == g3.group("dp", r)
        assert g5.expert_group("ep", r) == (r,) and g5.expert_group("edp", r) == g3.group("dp", r)


def test_a_5d_grid_on_dgx_nodes():
    g = make_grid(64, tp=4, cp=2, pp=2, ep=8, gpus_per_node=8, tp_inside_node=True)
    assert (g.dp, g.edp, str(g)) == (4, 1, "dp=4 x tp=4 x pp=2 x cp=2 (ep=8)")
    assert g.group("cp", 5) == (1, 5) and g.group("dp-cp", 1) == (1, 5, 9, 13, 17, 21, 25, 29)
    assert g.expert_group("ep", 1) == (1, 5, 9, 13, 17, 21, 25, 29)
    assert not g.span("cp", 8).crosses_nodes  # tp x cp = 8: a CP ring stays in a node
    assert g.span("ep", 8).nodes == 4 and g.span("ep", 8).per_node == 2
    assert group_span("edp", 4, 4, 2, 8, cp=2, ep=8).size == 1


@pytest.mark.parametrize("call, rule", [
    (lambda: Grid(dp=3, cp=1, ep=2), r"ep must divide dp x cp .*ep=2 does not divide dp=3 x cp=1 = 3"),
    (lambda: Grid(cp=0), "positive integer: cp=0"),
    (lambda: Grid.of(12, tp=2, cp=4), r"tp x pp x cp must divide the world size: .* = 8 does not divide world=12"),
    (lambda: Grid(dp=2, cp=2).check(world=8), r"dp x tp x pp x cp must equal the world size: .* = 4, world size 8"),
    (lambda: Grid(ep=1).group("ep", 0), r"unknown group 'ep'.*expert group: Grid.expert_group"),
    (lambda: Grid().expert_group("cp", 0), "unknown expert group 'cp'"),
])
def test_bad_5d_arguments_name_the_rule(call, rule):
    with pytest.raises(ValueError, match=rule):
        call()

"""Checker for exercise 08 (the rank grid): the learner's ``rank_groups(rank, dp, tp, pp)`` must
return the TP, DP and PP groups of ``rank`` exactly as ``parlab.layout`` lays them out (Megatron-LM's
order: tp fastest, then dp, then pp; rank = tp_rank + tp * (dp_rank + dp * pp_rank)), for every
rank of many grids. A valid layout in another order (picotron's dp-pp-tp view, or dp fastest) is
named as such, so the learner knows the groups partition the world but are not Megatron's.

The answers come from the same ``parlab.layout.Grid`` the cost model and the runtime use.
"""

from __future__ import annotations

from itertools import product

from parlab.layout import ORDER, Grid
from parlab.tables import plural

from .stub import refuse_stubs

#: the grids checked: every dp, tp, pp in 1..4, the guide's 1.9 figure and an MT-NLG-shaped one
GRIDS = [Grid(dp=d, tp=t, pp=p) for d, t, p in product((1, 2, 3, 4), repeat=3)]
GRIDS += [Grid(dp=2, tp=4, pp=4), Grid(dp=2, tp=8, pp=35)]


def _other_orders(grid: Grid, rank: int) -> dict[str, dict[str, tuple[int, ...]]]:
    """The groups of ``rank`` in the other common orders, fastest dimension first."""
    out = {}
    for order in (("tp", "pp", "dp"), ("dp", "tp", "pp"), ("pp", "dp", "tp")):
        sizes = [grid.size(d) for d in order]
        strides = [1, sizes[0], sizes[0] * sizes[1]]
        coord = [(rank // s) % n for s, n in zip(strides, sizes, strict=True)]
        groups = {}
        for k, dim in enumerate(order):
            base = rank - coord[k] * strides[k]
            groups[dim] = tuple(base + i * strides[k] for i in range(sizes[k]))
        out["-".join(order)] = groups
    return out


def as_groups(result: object, rank: int, grid: Grid) -> dict[str, tuple[int, ...]]:
    """The learner's return value as {'tp': (...), 'dp': (...), 'pp': (...)}."""
    call = f"rank_groups({rank}, dp={grid.dp}, tp={grid.tp}, pp={grid.pp})"
    if not isinstance(result, dict) or set(result) != set(ORDER):
        raise AssertionError(f"{call} must return a dict with keys 'tp', 'dp', 'pp', got {result!r}")
    out = {}
    for dim in ORDER:
        ranks = result[dim]
        if not isinstance(ranks, (list, tuple)) or not all(isinstance(r, int) for r in ranks):
            raise AssertionError(f"{call}[{dim!r}] must be a list of integer ranks, got {ranks!r}")
        out[dim] = tuple(ranks)
    return out


def check_case(fn, grid: Grid, rank: int) -> None:
    """AssertionError (one line) unless ``fn(rank, dp, tp, pp)`` gives ``grid``'s groups."""
    call = f"rank_groups({rank}, dp={grid.dp}, tp={grid.tp}, pp={grid.pp})"
    got = as_groups(fn(rank, grid.dp, grid.tp, grid.pp), rank, grid)
    want = {dim: grid.group(dim, rank) for dim in ORDER}
    if got == want:
        return
    for dim in ORDER:
        if len(got[dim]) != grid.size(dim):
            raise AssertionError(f"{call}: the {dim} group has {plural(len(got[dim]), 'rank')}; a {dim} "
                                 f"group has {dim}={grid.size(dim)}")
        if rank not in got[dim]:
            raise AssertionError(f"{call}: the {dim} group {list(got[dim])} does not contain rank {rank} "
                                 f"itself")
    for name, groups in _other_orders(grid, rank).items():
        if got == groups:
            raise AssertionError(f"{call}: these are the groups of the {name} order (first varies "
                                 f"fastest); parlab and Megatron-LM use tp-dp-pp: rank = tp_rank + tp * "
                                 f"(dp_rank + dp * pp_rank): a DP group strides by tp, a PP group by tp * dp")
    dim = next(d for d in ORDER if got[d] != want[d])
    if sorted(got[dim]) == sorted(want[dim]):
        raise AssertionError(f"{call}: the {dim} group {list(got[dim])} has the right ranks in the wrong "
                             f"order; list them by {dim} coordinate: {list(want[dim])}")
    raise AssertionError(f"{call}: the {dim} group is {list(got[dim])}, expected {list(want[dim])} "
                         f"(rank {rank} is tp_rank={grid.coords(rank).tp}, dp_rank={grid.coords(rank).dp}, "
                         f"pp_rank={grid.coords(rank).pp})")


def check_rank_groups(fn) -> None:
    """Run ``fn(rank, dp, tp, pp)`` for every rank of every grid of ``GRIDS``; AssertionError
    naming the first failing case; the stub fails at once (``StillAStub``)."""
    refuse_stubs(fn)
    n = 0
    for grid in GRIDS:
        for rank in range(grid.world):
            check_case(fn, grid, rank)
            n += 1
    g, r = Grid(dp=2, tp=4, pp=4), 13
    print(f"rank_groups correct for all {n:,} ranks of {len(GRIDS)} grids.\n"
          f"Guide 1.9's grid ({g}), rank {r}: TP {list(g.group('tp', r))}, DP {list(g.group('dp', r))}, "
          f"PP {list(g.group('pp', r))}.")

"""The 3D process groups (parlab.parallel.grid) on live ranks, both backends: each rank's TP, DP
and PP sub-communicators hold exactly the ranks parlab.layout names, in coordinate order, and the
pipeline neighbours talk."""

import numpy as np

from parlab.layout import ORDER, Grid
from parlab.parallel.grid import ProcessGrid

#: every dp x tp x pp of 4 ranks with at least two dimensions > 1, and the pure ones
GRIDS = [(2, 2, 1), (1, 2, 2), (2, 1, 2), (4, 1, 1), (1, 4, 1), (1, 1, 4)]


def _groups_seen(comm, grids):
    """Per grid: this rank's coords, the global ranks each group all-gathers, its rank in each
    group, and what its next pipeline stage sent it."""
    out = []
    for dp, tp, pp in grids:
        pg = ProcessGrid.build(comm, Grid(dp=dp, tp=tp, pp=pp))
        me = np.array([comm.rank], np.int64)
        seen = {d: pg.group_comm(d).all_gather(me).tolist() for d in ORDER}
        ranks = {d: pg.group_comm(d).rank for d in ORDER}
        got = None
        if pg.next_stage is not None:  # ship my global rank down the pipeline, receive from above
            pg.pp_comm.send(me, pg.next_stage)
        if pg.prev_stage is not None:
            got = int(pg.pp_comm.recv(pg.prev_stage)[0])
        out.append((tuple(pg.coords), seen, ranks, got, pg.pipeline_neighbours))
    return out


def _refused(comm):
    msgs = []
    for grid, nodes in ((Grid(dp=2, tp=2, pp=2), {}), (Grid(tp=4), {"gpus_per_node": 2, "tp_inside_node": True})):
        try:
            ProcessGrid.build(comm, grid, **nodes)
        except ValueError as err:
            msgs.append(str(err))
    return msgs


def test_each_rank_gets_the_groups_the_layout_names(world4):
    per_rank = world4.run(_groups_seen, GRIDS)
    for k, (dp, tp, pp) in enumerate(GRIDS):
        grid = Grid(dp=dp, tp=tp, pp=pp)
        for rank, results in enumerate(per_rank):
            coords, seen, ranks, got, neighbours = results[k]
            assert coords == tuple(grid.coords(rank)), (grid, rank)
            for dim in ORDER:
                assert tuple(seen[dim]) == grid.group(dim, rank), (grid, rank, dim)
                assert ranks[dim] == getattr(grid.coords(rank), dim)
            assert neighbours == grid.pipeline_neighbours(rank)
            assert got == neighbours[0]  # the previous stage's global rank arrived over pp_comm


def test_a_wrong_size_or_a_tp_group_across_nodes_is_refused_on_every_rank(world4):
    for size, split in world4.run(_refused):
        assert "dp x tp x pp must equal the world size" in size and "world size 4" in size
        assert "a TP group must stay inside a node: tp=4 on nodes of 2 GPUs" in split

"""The 3D process groups of one rank: its TP, PP and DP sub-communicators, built from the one rank
layout of ``parlab.layout`` (the same the cost model prices), as Megatron-LM's
``initialize_model_parallel`` builds its process groups.

    def work(comm):
        pg = ProcessGrid.build(comm, Grid(dp=2, tp=2, pp=1))
        pg.tp_comm.all_reduce(x)          # among the ranks that share a layer's shards
        pg.dp_comm.all_reduce(grads)      # among the replicas of the same shard
        pg.pp_comm.send(act, pg.next_stage)

Every rank of ``comm`` calls ``build`` (sub-groups are made collectively, in the same order on
every rank: all TP groups, then all DP groups, then all PP groups), on either backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.comm import Communicator
from parlab.layout import ORDER, Coords, Grid


@dataclass(frozen=True)
class ProcessGrid:
    """This rank's place in a ``Grid`` and the communicators of its three groups. Inside
    ``tp_comm`` / ``dp_comm`` / ``pp_comm`` this rank's rank is its tp / dp / pp coordinate."""

    comm: Communicator
    grid: Grid
    coords: Coords
    tp_comm: Communicator
    dp_comm: Communicator
    pp_comm: Communicator

    @classmethod
    def build(cls, comm: Communicator, grid: Grid, *, gpus_per_node: int | None = None,
              tp_inside_node: bool = False) -> ProcessGrid:
        """Make every group of ``grid`` over ``comm`` (whose size must be ``grid.world``) and keep
        this rank's; ValueError naming the rule when dp x tp x pp is not the world size, or (with
        ``tp_inside_node``) when a TP group would span two nodes of ``gpus_per_node`` ranks."""
        grid.check(world=comm.world_size, gpus_per_node=gpus_per_node, tp_inside_node=tp_inside_node)
        mine: dict[str, Communicator] = {}
        for dim in ORDER:  # the same calls in the same order on every rank
            for ranks in grid.groups(dim):
                group = comm.new_group(list(ranks))
                if comm.rank in ranks:
                    mine[dim] = group
        return cls(comm, grid, grid.coords(comm.rank), mine["tp"], mine["dp"], mine["pp"])

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def tp_rank(self) -> int:
        return self.coords.tp

    @property
    def dp_rank(self) -> int:
        return self.coords.dp

    @property
    def pp_rank(self) -> int:
        return self.coords.pp

    def group_comm(self, dim: str) -> Communicator:
        """The communicator of this rank's ``dim`` group ('tp', 'dp' or 'pp')."""
        if dim not in ORDER:
            raise ValueError(f"unknown group {dim!r}; allowed: {', '.join(ORDER)}")
        return getattr(self, f"{dim}_comm")

    @property
    def is_first_stage(self) -> bool:
        return self.coords.pp == 0

    @property
    def is_last_stage(self) -> bool:
        return self.coords.pp == self.grid.pp - 1

    @property
    def prev_stage(self) -> int | None:
        """The previous pipeline stage as a rank of ``pp_comm`` (None on the first stage)."""
        return None if self.is_first_stage else self.coords.pp - 1

    @property
    def next_stage(self) -> int | None:
        """The next pipeline stage as a rank of ``pp_comm`` (None on the last stage)."""
        return None if self.is_last_stage else self.coords.pp + 1

    @property
    def pipeline_neighbours(self) -> tuple[int | None, int | None]:
        """Global ranks (in ``comm``) of the previous and next stage (None at the ends)."""
        return self.grid.pipeline_neighbours(self.comm.rank)

    def traffic(self) -> dict[str, dict]:
        """Bytes and messages this rank moved in each group since the last reset, by group:
        {'tp': {op: Traffic}, 'dp': ..., 'pp': ...}."""
        return {dim: self.group_comm(dim).traffic() for dim in ORDER}

    def reset_traffic(self) -> None:
        """Start the counts of all three groups anew."""
        for dim in ORDER:
            self.group_comm(dim).reset_traffic()

"""Which rank owns which slice of a flat parameter vector under ZeRO (pure Python, no torch).

ZeRO (Rajbhandari et al. 2020, Section 5) partitions the flattened parameters, gradients and
optimizer states of the model into Nd equal contiguous slices, one per data-parallel rank. A
count that does not divide by Nd is padded at the end with zeros, as DeepSpeed's
``stage_1_and_2.py`` pads each flat group to a multiple of the DP size and PyTorch FSDP pads each
FlatParameter (``FlatParamHandle``, ``_get_shard``), so that every collective moves equal blocks.

    plan = shard_plan(10, 4)     # 10 elements, 4 ranks -> padded to 12, 3 per rank
    plan.bounds(3)               # (9, 10): rank 3 owns element 9 and 2 padding zeros
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShardPlan:
    """``numel`` real elements split over ``world`` ranks into blocks of ``shard`` elements
    (``padded`` = world * shard >= numel; the last ``padded - numel`` elements are padding)."""

    numel: int
    world: int
    shard: int

    @property
    def padded(self) -> int:
        return self.world * self.shard

    @property
    def padding(self) -> int:
        return self.padded - self.numel

    def start(self, rank: int) -> int:
        """First element (in the padded vector) of rank ``rank``'s block."""
        return rank * self.shard

    def bounds(self, rank: int) -> tuple[int, int]:
        """[lo, hi) of the *real* elements rank ``rank`` owns (hi - lo < shard on the ranks that
        hold padding; lo == hi if all of its block is padding)."""
        if not 0 <= rank < self.world:
            raise ValueError(f"rank must be in 0..world-1 = 0..{self.world - 1}, got {rank!r}")
        lo = min(rank * self.shard, self.numel)
        return lo, min(lo + self.shard, self.numel)


def shard_plan(numel: int, world: int) -> ShardPlan:
    """The ZeRO partition of ``numel`` elements over ``world`` ranks: ceil(numel / world) per rank."""
    if isinstance(numel, bool) or not isinstance(numel, int) or numel < 0:
        raise ValueError(f"numel must be an integer >= 0 (elements to shard), got {numel!r}")
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world must be an integer >= 1 (the data-parallel ranks), got {world!r}")
    return ShardPlan(numel, world, -(-numel // world))

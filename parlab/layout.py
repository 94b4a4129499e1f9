"""The rank grid of a DP x TP x PP run: each rank's coordinates and its TP, PP and DP groups, and
how those groups sit on nodes. Plain Python: the cost model (which link a group's collectives use)
and the runtime (``parlab.parallel.grid``: one sub-communicator per group) share this one layout.

The order is Megatron-LM's default (``initialize_model_parallel``, "tp-dp-pp" with pp outermost):
the TP coordinate varies fastest, then DP, then PP, so

    rank = tp_rank + tp * (dp_rank + dp * pp_rank)

A TP group is ``tp`` consecutive ranks (inside a node when ``tp`` divides the GPUs of a node), a
DP group strides by ``tp``, and a pipeline's stages are ``tp * dp`` ranks apart (across nodes).

    grid = Grid(dp=2, tp=4, pp=4)          # the guide's 1.9 figure: 32 workers
    grid.coords(13)                        # Coords(tp=1, dp=1, pp=1)
    grid.group("tp", 13)                   # (12, 13, 14, 15)
    grid.groups("pp")                      # [(0, 8, 16, 24), (1, 9, 17, 25), ...]
    grid.check(world=32, gpus_per_node=8, tp_inside_node=True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

#: Megatron-LM's order (initialize_model_parallel): tp varies fastest, then dp, then pp, so a TP
#: group is consecutive GPUs (inside a node) and a pipeline's stages are tp*dp GPUs apart.
ORDER = ("tp", "dp", "pp")


@dataclass(frozen=True)
class GroupSpan:
    """Where one communication group sits: ``size`` ranks, at most ``per_node`` of them on one
    node, over ``nodes`` nodes (1 means the group never leaves a node)."""

    dim: str
    size: int
    per_node: int
    nodes: int

    @property
    def crosses_nodes(self) -> bool:
        return self.nodes > 1


def rank_of(tp_rank: int, dp_rank: int, pp_rank: int, tp: int, dp: int) -> int:
    """Global rank of a (tp, dp, pp) coordinate: rank = tp_rank + tp * (dp_rank + dp * pp_rank)."""
    return tp_rank + tp * (dp_rank + dp * pp_rank)


def coords(rank: int, tp: int, dp: int) -> tuple[int, int, int]:
    """(tp_rank, dp_rank, pp_rank) of a global rank: the inverse of ``rank_of``."""
    return rank % tp, (rank // tp) % dp, rank // (tp * dp)


def group_ranks(dim: str, rank: int, tp: int, dp: int, pp: int) -> list[int]:
    """All ranks in ``rank``'s ``dim`` group ('tp', 'dp' or 'pp'), in group-rank order."""
    t, d, p = coords(rank, tp, dp)
    if dim == "tp":
        return [rank_of(i, d, p, tp, dp) for i in range(tp)]
    if dim == "dp":
        return [rank_of(t, i, p, tp, dp) for i in range(dp)]
    if dim == "pp":
        return [rank_of(t, d, i, tp, dp) for i in range(pp)]
    raise ValueError(f"unknown group {dim!r}; allowed: {', '.join(ORDER)}")


def group_span(dim: str, tp: int, dp: int, pp: int, gpus_per_node: int) -> GroupSpan:
    """How the ``dim`` groups of a tp x dp x pp layout sit on nodes of ``gpus_per_node`` GPUs
    (the worst group: the one with the fewest ranks per node, i.e. the most network traffic)."""
    if dim not in ORDER:
        raise ValueError(f"unknown group {dim!r}; allowed: {', '.join(ORDER)}")
    size, stride = {"tp": (tp, 1), "dp": (dp, tp), "pp": (pp, tp * dp)}[dim]
    per_node, nodes = _span(size, stride, tp * dp * pp, gpus_per_node)
    return GroupSpan(dim, size, per_node, nodes)


@lru_cache(maxsize=4096)
def _span(size: int, stride: int, world: int, g: int) -> tuple[int, int]:
    """(fewest members on one node, most nodes) over all groups {r0 + i*stride, i < size}."""
    if size == 1:
        return 1, 1
    block = size * stride  # a group lives in a contiguous block of this many ranks
    if block <= g and g % block == 0:
        return size, 1
    if stride % g == 0:
        return 1, size
    if g % stride == 0 and block % g == 0:
        k = g // stride
        return k, size // k
    # misaligned layouts (e.g. tp=3 on 8-GPU nodes): a group {a + i*stride} sits on nodes as any
    # other group whose first rank a has the same remainder mod g does (one node further on), so
    # the distinct groups are the few remainders of a, each counted exactly by _progression
    starts = min(world // block, g // math.gcd(block, g))  # the start's remainder repeats after that
    firsts = {(k * block + o) % g for k in range(starts) for o in range(min(stride, g))}
    spans = [_progression(a, stride, size, g) for a in sorted(firsts)]
    return min(k for k, _ in spans), max(n for _, n in spans)


def _progression(a: int, stride: int, size: int, g: int) -> tuple[int, int]:
    """(fewest members on one node it touches, nodes touched) of the ranks a + i*stride, i < size,
    on nodes of g ranks, in O(g): with stride < g the group touches every node from its first to
    its last; the nodes between are filled alike every stride / gcd(g, stride) nodes, so those
    and the last node are all that need counting."""
    if stride >= g:  # consecutive members are a node or more apart: one member per node
        return 1, size
    first, last = a // g, (a + (size - 1) * stride) // g

    def members(node: int) -> int:  # i with node*g <= a + i*stride < (node+1)*g
        lo = max(0, -(-(node * g - a) // stride))
        hi = min(size - 1, ((node + 1) * g - 1 - a) // stride)
        return hi - lo + 1

    period = stride // math.gcd(g, stride)
    looked = range(first, min(last, first + period + 1) + 1)
    return min(min(map(members, looked)), members(last)), last - first + 1


class Coords(NamedTuple):
    """A rank's place in the grid: its rank inside its TP, DP and PP groups."""

    tp: int
    dp: int
    pp: int


def _degree(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"a parallel degree is a positive integer: {name}={value!r}")
    return value


@dataclass(frozen=True)
class Grid:
    """A dp x tp x pp grid of ``world = dp * tp * pp`` ranks in Megatron-LM's order (``ORDER``:
    tp fastest, then dp, then pp)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        for name in ORDER:
            _degree(name, getattr(self, name))

    @classmethod
    def of(cls, world: int, *, tp: int = 1, pp: int = 1) -> Grid:
        """The grid of ``world`` ranks with the given tp and pp; dp = world / (tp * pp)."""
        _degree("world", world)
        _degree("tp", tp)
        _degree("pp", pp)
        if world % (tp * pp):
            raise ValueError(f"tp x pp must divide the world size: tp={tp} x pp={pp} = {tp * pp} does "
                             f"not divide world={world}")
        return cls(dp=world // (tp * pp), tp=tp, pp=pp)

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp

    def size(self, dim: str) -> int:
        """The degree of ``dim`` ('tp', 'dp' or 'pp')."""
        return getattr(self, _dim(dim))

    def _rank_in_range(self, rank: object) -> int:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.world:
            raise ValueError(f"a rank of a {self} grid is an integer in 0..{self.world - 1}: got {rank!r}")
        return rank

    def coords(self, rank: int) -> Coords:
        """(tp, dp, pp) coordinates of a global rank."""
        return Coords(*coords(self._rank_in_range(rank), self.tp, self.dp))

    def rank(self, *, tp: int = 0, dp: int = 0, pp: int = 0) -> int:
        """The global rank at a coordinate: tp + self.tp * (dp + self.dp * pp)."""
        for name, value in (("tp", tp), ("dp", dp), ("pp", pp)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.size(name):
                raise ValueError(f"a {name} coordinate of a {self} grid is in 0..{self.size(name) - 1}: "
                                 f"got {name}={value!r}")
        return rank_of(tp, dp, pp, self.tp, self.dp)

    def group(self, dim: str, rank: int) -> tuple[int, ...]:
        """The global ranks of ``rank``'s ``dim`` group, in group-rank order (member i has
        coordinate i along ``dim``)."""
        return tuple(group_ranks(_dim(dim), self._rank_in_range(rank), self.tp, self.dp, self.pp))

    def groups(self, dim: str) -> list[tuple[int, ...]]:
        """Every ``dim`` group of the grid (world / size(dim) of them), by their lowest rank."""
        dim = _dim(dim)
        return [self.group(dim, r) for r in range(self.world) if getattr(self.coords(r), dim) == 0]

    def span(self, dim: str, gpus_per_node: int) -> GroupSpan:
        """How the ``dim`` groups sit on nodes of ``gpus_per_node`` GPUs (the worst group)."""
        return group_span(_dim(dim), self.tp, self.dp, self.pp, _degree("gpus_per_node", gpus_per_node))

    def pipeline_neighbours(self, rank: int) -> tuple[int | None, int | None]:
        """Global ranks of the previous and next pipeline stage of ``rank`` (None at the ends)."""
        c = self.coords(rank)
        prev = self.rank(tp=c.tp, dp=c.dp, pp=c.pp - 1) if c.pp > 0 else None
        nxt = self.rank(tp=c.tp, dp=c.dp, pp=c.pp + 1) if c.pp < self.pp - 1 else None
        return prev, nxt

    def check(self, *, world: int | None = None, gpus_per_node: int | None = None,
              tp_inside_node: bool = False) -> Grid:
        """This grid, or ValueError naming the rule: dp x tp x pp must equal ``world``; with
        ``tp_inside_node``, no TP group may span two nodes of ``gpus_per_node`` GPUs."""
        if world is not None and self.world != world:
            raise ValueError(f"dp x tp x pp must equal the world size: dp={self.dp} x tp={self.tp} x "
                             f"pp={self.pp} = {self.world}, world size {world}")
        if tp_inside_node:
            if gpus_per_node is None:
                raise ValueError("tp_inside_node=True needs gpus_per_node (how many GPUs a node has)")
            span = self.span("tp", gpus_per_node)
            if span.crosses_nodes:
                raise ValueError(f"a TP group must stay inside a node: tp={self.tp} on nodes of "
                                 f"{gpus_per_node} GPUs puts a TP group over {span.nodes} nodes "
                                 f"(tp must divide gpus_per_node)")
        return self

    def __str__(self) -> str:
        return f"dp={self.dp} x tp={self.tp} x pp={self.pp}"


def _dim(dim: object) -> str:
    if dim not in ORDER:
        raise ValueError(f"unknown group {dim!r}; allowed: {', '.join(ORDER)}")
    return dim  # type: ignore[return-value]


def make_grid(world: int, *, dp: int | None = None, tp: int = 1, pp: int = 1,
              gpus_per_node: int | None = None, tp_inside_node: bool = False) -> Grid:
    """The grid of ``world`` ranks, checked: dp defaults to world / (tp * pp); a given dp must
    make dp x tp x pp equal ``world``; ``tp_inside_node`` also checks TP groups stay in a node."""
    grid = Grid.of(world, tp=tp, pp=pp) if dp is None else Grid(dp=dp, tp=tp, pp=pp)
    return grid.check(world=world, gpus_per_node=gpus_per_node, tp_inside_node=tp_inside_node)

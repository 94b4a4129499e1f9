"""The rank grid of a DP x TP x PP (x CP x EP) run: each rank's coordinates and its TP, CP, DP and
PP groups, its expert groups (EP and expert-DP), and how those groups sit on nodes. Plain Python:
the cost model (which link a group's collectives use) and the runtime (``parlab.parallel.grid``:
one sub-communicator per group) share this one layout.

The order is Megatron-Core's (``parallel_state.initialize_model_parallel``, order
"tp-cp-ep-dp-pp", pp outermost): the TP coordinate varies fastest, then CP, then DP, then PP, so

    rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))

With cp = 1 (the default) this is Megatron-LM's 3D order "tp-dp-pp", and every 3D layout is the
one it always was. A TP group is ``tp`` consecutive ranks (inside a node when ``tp`` divides the
GPUs of a node), a CP group strides by ``tp``, a DP group by ``tp * cp``, and a pipeline's stages
are ``tp * cp * dp`` ranks apart (across nodes). The dense layers' gradients are reduced over the
DP and CP ranks together (Megatron-Core's "dp-cp" group: CP ranks hold the same weights and see
different tokens).

Expert parallelism lives inside that data-parallel domain. Megatron-Core builds a second rank
generator for the MoE layers, order "tp-ep-dp-pp" over the same world (``RankGenerator(tp=etp,
ep=ep, dp=world / (etp * ep * pp), pp=pp, cp=1)``, with the expert TP size etp = tp by default):

    rank = tp_rank + tp * (ep_rank + ep * (edp_rank + edp * pp_rank)),   edp = dp * cp / ep

so an EP group is ``ep`` ranks strided by ``tp`` (the first ``ep`` of the dp x cp ranks), the
expert-DP group (``edp``: replicas of the same experts, whose gradients are reduced together)
strides by ``tp * ep``, and the pipeline groups are the same as the dense grid's. EP must divide
dp x cp.

    grid = Grid(dp=2, tp=4, pp=4)          # the guide's 1.9 figure: 32 workers
    grid.coords(13)                        # Coords(tp=1, dp=1, pp=1)
    grid.group("tp", 13)                   # (12, 13, 14, 15)
    grid.groups("pp")                      # [(0, 8, 16, 24), (1, 9, 17, 25), ...]
    grid.check(world=32, gpus_per_node=8, tp_inside_node=True)

    g5 = Grid(dp=2, tp=2, pp=2, cp=2, ep=4)  # 16 ranks; experts over 4 of the dp x cp = 4 ranks
    g5.group("cp", 5)                      # (5, 7)
    g5.group("dp-cp", 5)                   # (1, 3, 5, 7): the dense gradients' all-reduce
    g5.expert_group("ep", 5)               # (1, 3, 5, 7): the all-to-all of the MoE layers
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

#: Megatron-LM's 3D order (initialize_model_parallel): tp varies fastest, then dp, then pp, so a TP
#: group is consecutive GPUs (inside a node) and a pipeline's stages are tp*dp GPUs apart. The
#: three groups every 3D run builds (``parlab.parallel.grid``).
ORDER = ("tp", "dp", "pp")
#: Megatron-Core's order string (``initialize_model_parallel(order="tp-cp-ep-dp-pp")``): the dense
#: grid is it without ep (tp-cp-dp-pp), the expert grid it without cp (tp-ep-dp-pp, ``EXPERT_DIMS``).
MEGATRON_CORE_ORDER = "tp-cp-ep-dp-pp"
#: The dense grid's dimensions, fastest first, and its combined "dp-cp" group.
DIMS = ("tp", "cp", "dp", "pp")
GROUPS = (*DIMS, "dp-cp")
#: The expert grid's own groups: expert parallel and expert data parallel (its tp and pp groups
#: are the dense grid's).
EXPERT_DIMS = ("ep", "edp")


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


def rank_of(tp_rank: int, dp_rank: int, pp_rank: int, tp: int, dp: int, cp_rank: int = 0, cp: int = 1) -> int:
    """Global rank of a (tp, cp, dp, pp) coordinate:
    rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))."""
    return tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))


def coords(rank: int, tp: int, dp: int, cp: int = 1) -> tuple[int, int, int]:
    """(tp_rank, dp_rank, pp_rank) of a global rank: the inverse of ``rank_of`` (with cp > 1 the
    cp_rank is ``(rank // tp) % cp``, ``Grid.coord('cp', rank)``)."""
    return rank % tp, (rank // (tp * cp)) % dp, rank // (tp * cp * dp)


#: (size, stride) of each group of a layout: the group of rank r is r0 + i * stride, i < size
def _size_stride(dim: str, tp: int, dp: int, pp: int, cp: int = 1, ep: int = 1) -> tuple[int, int]:
    table = {"tp": (tp, 1), "cp": (cp, tp), "dp": (dp, tp * cp), "pp": (pp, tp * cp * dp),
             "dp-cp": (dp * cp, tp), "ep": (ep, tp), "edp": (dp * cp // ep, tp * ep)}
    if dim not in table:
        raise ValueError(f"unknown group {dim!r}; allowed: {', '.join(table)}")
    return table[dim]


def group_ranks(dim: str, rank: int, tp: int, dp: int, pp: int, cp: int = 1, ep: int = 1) -> list[int]:
    """All ranks in ``rank``'s ``dim`` group, in group-rank order: 'tp', 'cp', 'dp', 'pp' and
    'dp-cp' of the dense grid, 'ep' and 'edp' of the expert grid (Megatron-Core's two
    ``RankGenerator``s; see the module docstring)."""
    size, stride = _size_stride(dim, tp, dp, pp, cp, ep)
    block = size * stride  # each group sits in an aligned block of this many ranks
    first = rank - rank % block + rank % stride
    return [first + i * stride for i in range(size)]


def group_span(dim: str, tp: int, dp: int, pp: int, gpus_per_node: int, cp: int = 1, ep: int = 1) -> GroupSpan:
    """How the ``dim`` groups of a tp x cp x dp x pp layout (experts over ``ep`` of the dp x cp
    ranks) sit on nodes of ``gpus_per_node`` GPUs (the worst group: the one with the fewest ranks
    per node, i.e. the most network traffic)."""
    size, stride = _size_stride(dim, tp, dp, pp, cp, ep)
    per_node, nodes = _span(size, stride, tp * cp * dp * pp, gpus_per_node)
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
    """A rank's place in the 3D grid: its rank inside its TP, DP and PP groups (with cp > 1 its
    place along CP is ``Grid.coord('cp', rank)``; along EP, ``Grid.coord('ep', rank)``)."""

    tp: int
    dp: int
    pp: int


def _degree(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"a parallel degree is a positive integer: {name}={value!r}")
    return value


@dataclass(frozen=True)
class Grid:
    """A dp x tp x pp x cp grid of ``world = dp * tp * pp * cp`` ranks in Megatron-Core's order
    (tp fastest, then cp, then dp, then pp; with cp = 1 Megatron-LM's ``ORDER``), and its expert
    grid: experts split over ``ep`` ranks inside the dp x cp ranks of each TP/PP position (the
    module docstring). ``ep`` must divide dp x cp."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "cp", "ep"):
            _degree(name, getattr(self, name))
        if (self.dp * self.cp) % self.ep:
            raise ValueError(f"ep must divide dp x cp (expert parallelism lives inside the data-parallel "
                             f"ranks, Megatron-Core's expert RankGenerator): ep={self.ep} does not divide "
                             f"dp={self.dp} x cp={self.cp} = {self.dp * self.cp}")

    @classmethod
    def of(cls, world: int, *, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1) -> Grid:
        """The grid of ``world`` ranks with the given tp, pp and cp; dp = world / (tp * pp * cp)."""
        _degree("world", world)
        for name, value in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep)):
            _degree(name, value)
        if world % (tp * pp * cp):
            what = "tp x pp" if cp == 1 else "tp x pp x cp"
            raise ValueError(f"{what} must divide the world size: tp={tp} x pp={pp}" + (f" x cp={cp}" if cp > 1 else "")
                             + f" = {tp * pp * cp} does not divide world={world}")
        return cls(dp=world // (tp * pp * cp), tp=tp, pp=pp, cp=cp, ep=ep)

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def edp(self) -> int:
        """The expert data-parallel degree: dp x cp / ep replicas of each expert."""
        return self.dp * self.cp // self.ep

    def size(self, dim: str) -> int:
        """The degree of ``dim`` ('tp', 'cp', 'dp', 'pp', 'dp-cp', 'ep' or 'edp')."""
        if dim == "dp-cp":
            return self.dp * self.cp
        if dim in EXPERT_DIMS:
            return getattr(self, dim)
        return getattr(self, _dim(dim))

    def _rank_in_range(self, rank: object) -> int:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.world:
            raise ValueError(f"a rank of a {self} grid is an integer in 0..{self.world - 1}: got {rank!r}")
        return rank

    def coords(self, rank: int) -> Coords:
        """(tp, dp, pp) coordinates of a global rank."""
        return Coords(*coords(self._rank_in_range(rank), self.tp, self.dp, self.cp))

    def coord(self, dim: str, rank: int) -> int:
        """``rank``'s coordinate along any group ('tp', 'cp', 'dp', 'pp', 'dp-cp', 'ep', 'edp'): its
        rank inside that group."""
        size, stride = self._size_stride(dim)
        return (self._rank_in_range(rank) // stride) % size

    def rank(self, *, tp: int = 0, dp: int = 0, pp: int = 0, cp: int = 0) -> int:
        """The global rank at a coordinate: tp + self.tp * (cp + self.cp * (dp + self.dp * pp))."""
        for name, value in (("tp", tp), ("dp", dp), ("pp", pp), ("cp", cp)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.size(name):
                raise ValueError(f"a {name} coordinate of a {self} grid is in 0..{self.size(name) - 1}: "
                                 f"got {name}={value!r}")
        return rank_of(tp, dp, pp, self.tp, self.dp, cp, self.cp)

    def _size_stride(self, dim: str) -> tuple[int, int]:
        if dim not in EXPERT_DIMS:
            _dim(dim)
        return _size_stride(dim, self.tp, self.dp, self.pp, self.cp, self.ep)

    def group(self, dim: str, rank: int) -> tuple[int, ...]:
        """The global ranks of ``rank``'s ``dim`` group of the dense grid ('tp', 'cp', 'dp', 'pp'
        or 'dp-cp'), in group-rank order (member i has coordinate i along ``dim``)."""
        return tuple(group_ranks(_dim(dim), self._rank_in_range(rank), self.tp, self.dp, self.pp, self.cp,
                                 self.ep))

    def expert_group(self, dim: str, rank: int) -> tuple[int, ...]:
        """The global ranks of ``rank``'s group of the expert grid: 'ep' (the ranks that split the
        experts: the all-to-all of a MoE layer) or 'edp' (the replicas of the same experts, whose
        gradients are reduced together), in group-rank order."""
        return tuple(group_ranks(_expert_dim(dim), self._rank_in_range(rank), self.tp, self.dp, self.pp,
                                 self.cp, self.ep))

    def groups(self, dim: str) -> list[tuple[int, ...]]:
        """Every ``dim`` group of the grid (world / size(dim) of them), by their lowest rank; the
        expert grid's 'ep' and 'edp' groups too."""
        member = self.expert_group if dim in EXPERT_DIMS else self.group
        return [member(dim, r) for r in range(self.world) if self.coord(dim, r) == 0]

    def span(self, dim: str, gpus_per_node: int) -> GroupSpan:
        """How the ``dim`` groups (any of ``GROUPS`` or ``EXPERT_DIMS``) sit on nodes of
        ``gpus_per_node`` GPUs (the worst group)."""
        if dim not in EXPERT_DIMS:
            _dim(dim)
        return group_span(dim, self.tp, self.dp, self.pp, _degree("gpus_per_node", gpus_per_node), self.cp,
                          self.ep)

    def pipeline_neighbours(self, rank: int) -> tuple[int | None, int | None]:
        """Global ranks of the previous and next pipeline stage of ``rank`` (None at the ends)."""
        stages = self.group("pp", rank)
        i = self.coord("pp", rank)
        return (stages[i - 1] if i > 0 else None), (stages[i + 1] if i < self.pp - 1 else None)

    def check(self, *, world: int | None = None, gpus_per_node: int | None = None,
              tp_inside_node: bool = False) -> Grid:
        """This grid, or ValueError naming the rule: dp x tp x pp (x cp) must equal ``world``; with
        ``tp_inside_node``, no TP group may span two nodes of ``gpus_per_node`` GPUs."""
        if world is not None and self.world != world:
            cp = f" x cp={self.cp}" if self.cp > 1 else ""
            raise ValueError(f"dp x tp x pp{' x cp' if cp else ''} must equal the world size: dp={self.dp} x "
                             f"tp={self.tp} x pp={self.pp}{cp} = {self.world}, world size {world}")
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
        extra = (f" x cp={self.cp}" if self.cp > 1 else "") + (f" (ep={self.ep})" if self.ep > 1 else "")
        return f"dp={self.dp} x tp={self.tp} x pp={self.pp}{extra}"


def _dim(dim: object) -> str:
    if dim not in GROUPS:
        hint = " (an expert group: Grid.expert_group)" if dim in EXPERT_DIMS else ""
        raise ValueError(f"unknown group {dim!r}; allowed: {', '.join(GROUPS)}{hint}")
    return dim  # type: ignore[return-value]


def _expert_dim(dim: object) -> str:
    if dim not in EXPERT_DIMS:
        raise ValueError(f"unknown expert group {dim!r}; allowed: {', '.join(EXPERT_DIMS)} (the dense "
                         f"grid's groups: Grid.group)")
    return dim  # type: ignore[return-value]


def make_grid(world: int, *, dp: int | None = None, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1,
              gpus_per_node: int | None = None, tp_inside_node: bool = False) -> Grid:
    """The grid of ``world`` ranks, checked: dp defaults to world / (tp * pp * cp); a given dp must
    make dp x tp x pp x cp equal ``world``; ``tp_inside_node`` also checks TP groups stay in a node."""
    grid = Grid.of(world, tp=tp, pp=pp, cp=cp, ep=ep) if dp is None else Grid(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep)
    return grid.check(world=world, gpus_per_node=gpus_per_node, tp_inside_node=tp_inside_node)


def check_layout(*, dp: int, tp: int, pp: int, batch_size: int, m: int, v: int, schedule: str,
                 n_layer: int, n_head: int, hidden: int, ffn: int | None = None,
                 vocab_size: int | None = None, dropout: float = 0.0) -> None:
    """The rules of a 3D run (Megatron-LM: TP splits heads, hidden, the MLP and the vocabulary;
    DP splits the global batch into equal blocks, each into the schedule's m micro-batches;
    every one of the pp x v virtual stages holds a layer). ``ffn`` or ``vocab_size`` None: not
    checked."""
    if batch_size % dp:
        raise ValueError(f"batch_size={batch_size} must be divisible by dp={dp}: "
                         f"each data-parallel replica takes an equal block of the global batch")
    if (batch_size // dp) % m:
        raise ValueError(f"each replica's batch batch_size / dp = {batch_size // dp} "
                         f"must be divisible by the {m} micro-batches of schedule "
                         f"{schedule!r} (equal micro-batches)")
    if n_layer < pp * v:
        raise ValueError(f"more pipeline pieces than layers: pp x v = {pp} x {v} for "
                         f"n_layer={n_layer} (each virtual stage needs a layer)")
    sizes = {"n_head": n_head, "hidden": hidden, "ffn": ffn, "vocab_size": vocab_size}
    for name, size in sizes.items():
        if size is not None and size % tp:
            raise ValueError(f"the tensor-parallel degree tp={tp} must divide "
                             f"{name}={size}: each TP rank holds {name}/tp of it")
    if dropout:
        raise ValueError(f"the 3D trainer needs GPTConfig.dropout=0, got {dropout}: "
                         f"dropout masks consistent across TP ranks need Megatron's RNG tracker")

"""How long a message or a collective takes: the alpha-beta (latency-bandwidth) model.

Sending m bytes point to point costs ``alpha + m * beta`` (Hockney 1994): alpha is the fixed
cost of one message (software, synchronisation, wire latency), beta = 1 / bandwidth the cost
per byte. A collective is a sequence of such steps; the formulas below count, for each
algorithm, the steps on its critical path (latency term) and the most bytes one rank must
send or receive in sequence (bandwidth term; links are full duplex), plus ``gamma`` per byte
reduced where there is arithmetic. For p ranks and n bytes:

    ring all-reduce              2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma
    double binary tree (NCCL)    2 log2(p) alpha + 2 n beta + n gamma      (pipelined)
    recursive doubling           log2(p) (alpha + n beta + n gamma)   (+2 steps if p is not 2^k)
    naive (reduce + broadcast at one root)  2(p-1)(alpha + n beta) + (p-1) n gamma
    shm_direct (one host)        2 alpha + 2(p-1)/p n beta + (p-1)/p n gamma
    ring broadcast (a chain)     (p-1) alpha + n beta                      (pipelined)
    binomial-tree broadcast      log2(p) (alpha + n beta)
    shm_direct broadcast         alpha + n beta                            (pipelined)

Sources. Ring, recursive doubling, binomial trees, naive: Thakur, Rabenseifner & Gropp,
"Optimization of Collective Communication Operations in MPICH" (IJHPCA 2005), section 4 and its
cost expressions; the ring's bandwidth optimality: Patarasuk & Yuan (JPDC 2009). Double binary
tree: Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and
scan" (Parallel Computing 2009), as NCCL 2.4 runs it (``parlab.costmodel.pricing.trees``). *Pipelined*
algorithms cut the buffer into chunks that stream down the chain or tree one after another;
they are costed as NCCL's tuning model costs them (src/graph/tuning.cc): the latency of the
path once plus the buffer at link speed, the chunks' own latency hidden by the pipeline.

shm_direct is the all-reduce of shared-memory transports inside one host: every rank reads its
block straight from every peer's buffer (reduce-scatter), then every peer's reduced block
(all-gather), with a barrier after each phase: the ring's bytes in 2 synchronisations instead of
2(p-1) steps (Graham & Shipman, "MPI Support for Multi-core Architectures: Optimized Shared
Memory Collectives", EuroPVM/MPI 2008; Open MPI's coll/sm and MPICH's shared-memory
collectives; NCCL's intra-node P2P/SHM transports read peers' buffers likewise). Costed per
buffer: alpha is then one barrier, beta the host's copy rate. Its broadcast has the root write
each chunk once into its window and every peer copy it out at the same time: one
synchronisation, the buffer once per reader, the root's write of a chunk overlapping the
peers' reads of the one before.

``bus_bandwidth`` converts a measured time into NCCL's bus bandwidth (nccl-tests,
doc/PERFORMANCE.md): algbw = S / t times 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
reduce-scatter and all-to-all, 1 for broadcast and reduce, where S is the full buffer (the
output of an all-gather, the input of a reduce-scatter). Pure Python: no numpy, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing import trees
from parlab.costmodel.specs._check import non_negative, number, positive

# The algorithms of each collective: the one table that the runtime (parlab.comm.algorithms
# runs every one of them), its argument check, and the dashboards' menus all read.
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "p2p": ("direct",),
    "broadcast": ("ring", "binomial_tree", "naive", "shm_direct"),
    "reduce": ("ring", "binomial_tree", "naive"),
    "all_reduce": ("ring", "double_binary_tree", "recursive_doubling", "naive", "shm_direct"),
    "all_gather": ("ring", "binomial_tree", "naive"),
    "reduce_scatter": ("ring", "naive"),
    "gather": ("naive", "binomial_tree"),
    "scatter": ("naive",),
    "all_to_all": ("pairwise",),
    "barrier": ("dissemination",),
}
# Algorithms that need every rank's memory in one shared arena (one host): never "the fastest"
# between hosts, whatever their modelled time.
ONE_HOST_ONLY = frozenset({"shm_direct"})
# What each name means, for tables and legends.
DESCRIPTIONS: dict[str, str] = {
    "direct": "one message",
    "ring": "ring (pipelined chain for broadcast and reduce)",
    "double_binary_tree": "double binary tree, pipelined (NCCL's tree)",
    "recursive_doubling": "recursive doubling (pairwise exchanges)",
    "binomial_tree": "binomial tree",
    "naive": "naive (everything through one root)",
    "shm_direct": "direct reads of the peers' shared buffers (one host)",
    "pairwise": "pairwise exchange",
    "dissemination": "dissemination",
}


def algorithms_of(op: str) -> tuple[str, ...]:
    """The algorithms of collective ``op`` (ValueError naming the allowed collectives)."""
    if op not in ALGORITHMS:
        raise ValueError(f"unknown collective {op!r}; allowed: {', '.join(ALGORITHMS)}")
    return ALGORITHMS[op]
BUS_FACTOR_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "p2p")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``op`` on ``n`` ranks (doc/PERFORMANCE.md): all-reduce
    2(n-1)/n; all-gather, reduce-scatter and all-to-all (n-1)/n; broadcast, reduce and
    point-to-point 1. busbw = S/t x factor is comparable to the link speed whatever n is."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "p2p"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}; allowed: {', '.join(BUS_FACTOR_OPS)}")


@dataclass(frozen=True)
class CommTime:
    """One modelled operation: ``steps`` messages on the critical path, ``volume`` bytes the
    busiest rank sends (or receives) one after another, ``reduced`` bytes it combines; seconds
    by term: latency = steps x alpha, transfer = volume x beta, compute = reduced x gamma."""

    op: str
    algorithm: str
    ranks: int
    nbytes: float
    steps: float
    volume: float
    reduced: float
    latency: float  # steps * alpha
    transfer: float  # volume * beta
    compute: float  # reduced * gamma

    @property
    def seconds(self) -> float:
        return self.latency + self.transfer + self.compute

    @property
    def bound(self) -> str:
        """'latency' or 'bandwidth': the larger of the two terms."""
        return "latency" if self.latency >= self.transfer else "bandwidth"

    def explain(self) -> str:
        """The three terms, one a line: alpha (seconds per message), beta (seconds per byte on
        the link, 1 / bandwidth) and gamma (seconds per byte reduced)."""
        return (f"{self.op} ({self.algorithm}, {self.ranks} ranks, {self.nbytes:,.0f} B):\n"
                f"  {self.steps:g} steps x alpha = {self.latency * 1e6:,.1f} µs latency\n"
                f"+ {self.volume:,.0f} B x beta = {self.transfer * 1e6:,.1f} µs transfer\n"
                f"+ {self.reduced:,.0f} B x gamma = {self.compute * 1e6:,.1f} µs compute\n"
                f"= {self.seconds * 1e6:,.1f} µs ({self.bound}-bound)")


def _log2(p: int) -> int:
    """ceil(log2 p), exactly (integer arithmetic: a float log2 rounds 2^60 + 1 down)."""
    return (int(p) - 1).bit_length() if p > 1 else 0


def _double_binary_tree(p: int, n: float) -> tuple[float, float, float]:
    """Pipelined double binary tree (Sanders et al. 2009; NCCL 2.4): up both trees (reduce) and
    down again (broadcast), each tree carrying half the buffer, so 2 x depth steps on the path
    and about 2n bytes through the busiest rank's link each way (exactly, from the trees' closed
    forms ``trees.depth_of`` and ``trees.busiest``: O(1) for any p)."""
    volume, reduced = trees.busiest(p)
    return 2 * trees.depth_of(p), volume * n, reduced * n


def shape(op: str, algorithm: str, p: int, n: float) -> tuple[float, float, float]:
    """(steps on the critical path, bytes the busiest rank sends or receives in sequence, bytes
    it reduces) for ``n`` bytes: the full buffer (input of an all-reduce, broadcast, reduce,
    reduce-scatter, scatter and all-to-all; output of an all-gather and gather)."""
    if algorithm not in algorithms_of(op):
        raise ValueError(f"no model for {op} with algorithm {algorithm!r}; "
                         f"allowed: {', '.join(ALGORITHMS[op])}")
    if p == 1 or op == "p2p":
        return (1.0, n, 0.0) if op == "p2p" else (0.0, 0.0, 0.0)
    steps, volume, reduced = _SHAPES[(op, algorithm)](p, n, _log2(p), (p - 1) / p)
    return float(steps), float(volume), float(reduced)


def _recursive_doubling(p: int, n: float) -> tuple[float, float, float]:
    pow2 = p & (p - 1) == 0
    doubling = _log2(p) if pow2 else (int(p).bit_length() - 1) + 2  # +2: the fold in and out
    return doubling, doubling * n, (doubling - (not pow2)) * n


# (op, algorithm) -> (p, n, lg = ceil(log2 p), q = (p-1)/p) -> (steps, volume, reduced): only the
# asked-for entry is computed
_SHAPES = {
    ("all_reduce", "ring"): lambda p, n, lg, q: (2 * (p - 1), 2 * q * n, q * n),
    ("all_reduce", "double_binary_tree"): lambda p, n, lg, q: _double_binary_tree(p, n),
    ("all_reduce", "recursive_doubling"): lambda p, n, lg, q: _recursive_doubling(p, n),
    ("all_reduce", "naive"): lambda p, n, lg, q: (2 * (p - 1), 2 * (p - 1) * n, (p - 1) * n),
    ("all_reduce", "shm_direct"): lambda p, n, lg, q: (2, 2 * q * n, q * n),
    ("reduce_scatter", "ring"): lambda p, n, lg, q: (p - 1, q * n, q * n),
    ("reduce_scatter", "naive"): lambda p, n, lg, q: (2 * (p - 1), (p - 1) * n + q * n, (p - 1) * n),
    ("all_gather", "ring"): lambda p, n, lg, q: (p - 1, q * n, 0.0),
    ("all_gather", "binomial_tree"): lambda p, n, lg, q: (2 * lg, q * n + lg * n, 0.0),
    ("all_gather", "naive"): lambda p, n, lg, q: (2 * (p - 1), q * n + (p - 1) * n, 0.0),
    ("broadcast", "ring"): lambda p, n, lg, q: (p - 1, n, 0.0),
    ("broadcast", "binomial_tree"): lambda p, n, lg, q: (lg, lg * n, 0.0),
    ("broadcast", "naive"): lambda p, n, lg, q: (p - 1, (p - 1) * n, 0.0),
    ("broadcast", "shm_direct"): lambda p, n, lg, q: (1, n, 0.0),
    ("reduce", "ring"): lambda p, n, lg, q: (p - 1, n, n),
    ("reduce", "binomial_tree"): lambda p, n, lg, q: (lg, lg * n, lg * n),
    ("reduce", "naive"): lambda p, n, lg, q: (p - 1, (p - 1) * n, (p - 1) * n),
    ("gather", "naive"): lambda p, n, lg, q: (p - 1, q * n, 0.0),
    ("gather", "binomial_tree"): lambda p, n, lg, q: (lg, q * n, 0.0),
    ("scatter", "naive"): lambda p, n, lg, q: (p - 1, q * n, 0.0),
    ("all_to_all", "pairwise"): lambda p, n, lg, q: (p - 1, q * n, 0.0),
    ("barrier", "dissemination"): lambda p, n, lg, q: (lg, 0.0, 0.0),
}


def time(op: str, algorithm: str, ranks: int, nbytes: float, alpha: float, bandwidth: float,
         gamma: float = 0.0) -> CommTime:
    """Modelled time of one operation. ``alpha`` in seconds per message, ``bandwidth`` in
    bytes per second per link, ``gamma`` in seconds per byte reduced."""
    ranks = positive("ranks", ranks, integer=True)
    for name, value in (("nbytes", nbytes), ("alpha", alpha), ("gamma", gamma)):
        non_negative(name, value)
    if not number("bandwidth", bandwidth) > 0:
        raise ValueError(f"bandwidth must be a positive number of bytes/s, got {bandwidth!r}")
    steps, volume, reduced = shape(op, algorithm, ranks, nbytes)
    return CommTime(op, algorithm, ranks, nbytes, steps, volume, reduced,
                    steps * alpha, volume / bandwidth, reduced * gamma)


def compare(op: str, ranks: int, nbytes: float, alpha: float, bandwidth: float,
            gamma: float = 0.0, one_host: bool = False) -> list[CommTime]:
    """Every algorithm of ``op``, fastest first; the shared-memory ones (ONE_HOST_ONLY) only
    when the ranks are on ``one_host``."""
    names = [a for a in ALGORITHMS[op] if one_host or a not in ONE_HOST_ONLY]
    return sorted((time(op, a, ranks, nbytes, alpha, bandwidth, gamma) for a in names),
                  key=lambda t: t.seconds)


def crossover(op: str, fast_small: str, fast_large: str, ranks: int, alpha: float,
              bandwidth: float) -> float | None:
    """The message size (bytes) above which ``fast_large`` beats ``fast_small`` (None if never):
    where the latency saved by one equals the bandwidth saved by the other."""
    s1, v1, _ = shape(op, fast_small, ranks, 1.0)
    s2, v2, _ = shape(op, fast_large, ranks, 1.0)
    if v1 <= v2:  # the small-message winner also moves no more bytes: it always wins
        return None
    return max(0.0, (s2 - s1) * alpha * bandwidth / (v1 - v2))


def bus_bandwidth(op: str, ranks: int, nbytes: float, seconds: float) -> float:
    """nccl-tests' bus bandwidth (bytes/s) of one measured operation on ``nbytes`` (full buffer)."""
    return nbytes / seconds * bus_factor(op, ranks)


def traffic(op: str, algorithm: str, ranks: int, nbytes: float, rank: int = 0,
            root: int = 0) -> tuple[float, float]:
    """(bytes sent, bytes received) by rank ``rank`` in ``algorithm`` as parlab.comm.algorithms
    runs it, for ``nbytes`` (the full buffer, as in ``shape``) split into blocks of exactly
    n/p bytes (and halves of n/2 for the double binary tree): what a run on the local backend
    counts, byte for byte, when the sizes divide evenly. The torch backend reports it as the
    nominal traffic of its native collectives, whose own traffic torch does not expose."""
    p, n = ranks, float(nbytes)
    algorithms_of(op)
    if algorithm not in ALGORITHMS[op]:
        raise ValueError(f"no traffic model for {op} with algorithm {algorithm!r}; "
                         f"allowed: {', '.join(ALGORITHMS[op])}")
    if not 0 <= rank < p or not 0 <= root < p:
        raise ValueError(f"rank and root must be in 0..{p - 1}, got rank {rank}, root {root}")
    if op == "p2p":
        return n, 0.0
    if p == 1 or op == "barrier":
        return 0.0, 0.0
    q, me = (p - 1) / p, (rank - root) % p
    if algorithm == "shm_direct" and op == "broadcast":  # the root is read by every peer
        return (0.0, n) if me else ((p - 1) * n, 0.0)
    if algorithm == "shm_direct":  # read from the peers, and read by them, 2(p-1)/p n each
        return 2 * q * n, 2 * q * n
    if algorithm in ("ring", "pairwise") and op in ("all_reduce", "all_gather", "reduce_scatter",
                                                     "all_to_all"):
        factor = 2 * q if op == "all_reduce" else q
        return factor * n, factor * n
    if algorithm == "ring":  # a chain root -> root+1 -> ... -> root-1 (broadcast), or into the root
        first, last = (me > 0) * n, (me < p - 1) * n
        return (last, first) if op == "broadcast" else (first, float(me != 1) * n)
    if algorithm == "double_binary_tree":
        sent, recvd, _ = trees.rank_traffic(p, rank, n)
        return sent, recvd
    if algorithm == "recursive_doubling":
        p2 = 1 << (p.bit_length() - 1)
        extra, rounds = p - p2, (p2.bit_length() - 1) * n
        if rank < 2 * extra:  # folded pair: the even rank hands over, the odd one works for both
            return (n, n) if rank % 2 == 0 else (rounds + n, rounds + n)
        return rounds, rounds
    if op in ("broadcast", "reduce") and algorithm == "binomial_tree":
        down = (len(_binomial_children(me, p)) * n, float(me > 0) * n)
        return down if op == "broadcast" else down[::-1]
    if op == "gather" and algorithm == "binomial_tree":
        return _binomial_gather(me, p, n / p)
    if op == "all_gather" and algorithm in ("binomial_tree", "naive"):
        g = traffic("gather", algorithm, p, n, rank, 0)
        b = traffic("broadcast", algorithm, p, n, rank, 0)
        return g[0] + b[0], g[1] + b[1]
    if op == "all_reduce" and algorithm == "naive":
        r = traffic("reduce", "naive", p, n, rank, 0)
        b = traffic("broadcast", "naive", p, n, rank, 0)
        return r[0] + b[0], r[1] + b[1]
    if op == "reduce_scatter" and algorithm == "naive":
        r = traffic("reduce", "naive", p, n, rank, 0)
        s = traffic("scatter", "naive", p, n, rank, 0)
        return r[0] + s[0], r[1] + s[1]
    at_root = {"broadcast": ((p - 1) * n, 0.0), "reduce": (0.0, (p - 1) * n),
               "gather": (0.0, q * n), "scatter": (q * n, 0.0)}[op]
    elsewhere = {"broadcast": (0.0, n), "reduce": (n, 0.0), "gather": (n / p, 0.0),
                 "scatter": (0.0, n / p)}[op]
    return at_root if me == 0 else elsewhere  # naive: everything through the root


def _binomial_children(me: int, p: int) -> list[int]:
    """Children of relative rank ``me`` in the binomial tree rooted at 0 (Thakur et al. 4.1):
    me + 2^k for every 2^k below me's lowest set bit (below p for the root)."""
    low = me & -me if me else 1 << _log2(p)
    return [me + (1 << k) for k in range(_log2(p)) if (1 << k) < low and me + (1 << k) < p]


def _binomial_gather(me: int, p: int, block: float) -> tuple[float, float]:
    """A binomial gather: a rank receives its subtree's blocks, then sends them with its own."""
    low = me & -me if me else 1 << _log2(p)
    subtree = min(me + low, p) - me  # blocks me, me+1, ..., me+low-1 that exist
    return (float(me > 0) * subtree * block, (subtree - 1) * block)

"""How long a message or a collective takes: the alpha-beta (latency-bandwidth) model.

Sending m bytes point to point costs ``alpha + m * beta`` (Hockney 1994): alpha is the fixed
cost of one message (software, synchronisation, wire latency), beta = 1 / bandwidth the cost
per byte. A collective is a sequence of such steps; the formulas below count, for each
algorithm, the steps on its critical path (latency term) and the bytes the busiest rank
sends in sequence (bandwidth term), plus ``gamma`` per byte reduced where there is arithmetic.
They are the ones of Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
Operations in MPICH" (IJHPCA 2005), section 4 and its cost expressions, for p ranks and n bytes:

    ring all-reduce            2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma
    recursive doubling (tree)  log2(p) (alpha + n beta + n gamma)   (+2 steps if p is not 2^k)
    naive (reduce + broadcast at one root)  2(p-1)(alpha + n beta) + (p-1) n gamma

``bus_bandwidth`` converts a measured time into NCCL's bus bandwidth (nccl-tests,
doc/PERFORMANCE.md): algbw = S / t times 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
reduce-scatter and all-to-all, 1 for broadcast and reduce, where S is the full buffer (the
output of an all-gather, the input of a reduce-scatter). Pure Python: no numpy, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# the algorithms of each collective, as in parlab.comm.algorithms
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "p2p": ("direct",),
    "broadcast": ("tree", "naive"),
    "reduce": ("tree", "naive"),
    "all_reduce": ("ring", "tree", "naive"),
    "all_gather": ("ring", "tree", "naive"),
    "reduce_scatter": ("ring", "naive"),
    "gather": ("naive", "tree"),
    "scatter": ("naive",),
    "all_to_all": ("pairwise",),
    "barrier": ("dissemination",),
}
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
    busiest rank sends one after another, ``reduced`` bytes it combines; seconds by term."""

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
        return (f"{self.op} ({self.algorithm}, {self.ranks} ranks, {self.nbytes:,.0f} B): "
                f"{self.steps:g} steps x alpha = {self.latency * 1e6:,.1f} us latency + "
                f"{self.volume:,.0f} B x beta = {self.transfer * 1e6:,.1f} us transfer + "
                f"{self.reduced:,.0f} B x gamma = {self.compute * 1e6:,.1f} us compute "
                f"= {self.seconds * 1e6:,.1f} us ({self.bound}-bound)")


def _log2(p: int) -> int:
    return math.ceil(math.log2(p)) if p > 1 else 0


def shape(op: str, algorithm: str, p: int, n: float) -> tuple[float, float, float]:
    """(steps, bytes sent in sequence by the busiest rank, bytes it reduces) for ``n`` bytes:
    the full buffer (input of an all-reduce, broadcast, reduce, reduce-scatter, scatter and
    all-to-all; output of an all-gather and gather)."""
    if p == 1 or op == "p2p":
        return (1.0, n, 0.0) if op == "p2p" else (0.0, 0.0, 0.0)
    lg, q = _log2(p), (p - 1) / p
    pow2 = p & (p - 1) == 0
    table = {
        ("all_reduce", "ring"): (2 * (p - 1), 2 * q * n, q * n),
        ("all_reduce", "tree"): (lg if pow2 else math.floor(math.log2(p)) + 2,
                                 (lg if pow2 else math.floor(math.log2(p)) + 2) * n,
                                 (lg if pow2 else math.floor(math.log2(p)) + 1) * n),
        ("all_reduce", "naive"): (2 * (p - 1), 2 * (p - 1) * n, (p - 1) * n),
        ("reduce_scatter", "ring"): (p - 1, q * n, q * n),
        ("reduce_scatter", "naive"): (2 * (p - 1), (p - 1) * n + q * n, (p - 1) * n),
        ("all_gather", "ring"): (p - 1, q * n, 0.0),
        ("all_gather", "tree"): (2 * lg, q * n + lg * n, 0.0),
        ("all_gather", "naive"): (2 * (p - 1), q * n + (p - 1) * n, 0.0),
        ("broadcast", "tree"): (lg, lg * n, 0.0),
        ("broadcast", "naive"): (p - 1, (p - 1) * n, 0.0),
        ("reduce", "tree"): (lg, lg * n, lg * n),
        ("reduce", "naive"): (p - 1, (p - 1) * n, (p - 1) * n),
        ("gather", "naive"): (p - 1, q * n, 0.0),
        ("gather", "tree"): (lg, q * n, 0.0),
        ("scatter", "naive"): (p - 1, q * n, 0.0),
        ("all_to_all", "pairwise"): (p - 1, q * n, 0.0),
        ("barrier", "dissemination"): (lg, 0.0, 0.0),
    }
    key = (op, algorithm)
    if key not in table:
        allowed = ", ".join(ALGORITHMS.get(op, ())) or "none"
        raise ValueError(f"no model for {op} with algorithm {algorithm!r}; allowed: {allowed}")
    return tuple(float(v) for v in table[key])


def time(op: str, algorithm: str, ranks: int, nbytes: float, alpha: float, bandwidth: float,
         gamma: float = 0.0) -> CommTime:
    """Modelled time of one operation. ``alpha`` in seconds per message, ``bandwidth`` in
    bytes per second per link, ``gamma`` in seconds per byte reduced."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"ranks must be a positive integer, got {ranks!r}")
    if nbytes < 0 or alpha < 0 or gamma < 0:
        raise ValueError(f"nbytes, alpha and gamma must be >= 0, got {nbytes!r}, {alpha!r}, {gamma!r}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be a positive number of bytes/s, got {bandwidth!r}")
    steps, volume, reduced = shape(op, algorithm, ranks, nbytes)
    return CommTime(op, algorithm, ranks, nbytes, steps, volume, reduced,
                    steps * alpha, volume / bandwidth, reduced * gamma)


def compare(op: str, ranks: int, nbytes: float, alpha: float, bandwidth: float,
            gamma: float = 0.0) -> list[CommTime]:
    """Every algorithm of ``op``, fastest first."""
    return sorted((time(op, a, ranks, nbytes, alpha, bandwidth, gamma) for a in ALGORITHMS[op]),
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
    """(bytes sent, bytes received) by one rank in the ideal algorithm (blocks of exactly
    n/p bytes). The torch backend reports this for its native collectives, whose own traffic
    torch does not expose: ring for all-reduce/all-gather/reduce-scatter, binomial tree for
    broadcast/reduce, direct sends for gather/scatter/all-to-all."""
    p, n = ranks, float(nbytes)
    if p == 1:
        return 0.0, 0.0
    q = (p - 1) / p
    if op == "all_reduce" and algorithm == "ring":
        return 2 * q * n, 2 * q * n
    if op in ("all_gather", "reduce_scatter", "all_to_all") and algorithm in ("ring", "pairwise"):
        return q * n, q * n
    if op in ("broadcast", "reduce") and algorithm == "tree":
        me = (rank - root) % p
        low = me & -me if me else 1 << _log2(p)  # a rank sends to children below its lowest bit
        children = sum(1 for k in range(_log2(p)) if (1 << k) < low and me + (1 << k) < p)
        parent = 0 if me == 0 else 1
        down = (children * n, parent * n)
        return down if op == "broadcast" else down[::-1]
    if op in ("gather", "scatter") and algorithm == "naive":
        at_root = (0.0, q * n) if op == "gather" else (q * n, 0.0)
        elsewhere = (n / p, 0.0) if op == "gather" else (0.0, n / p)
        return at_root if rank == root else elsewhere
    raise ValueError(f"no traffic model for {op} with algorithm {algorithm!r}")

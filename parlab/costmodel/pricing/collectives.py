"""The cluster-level cost of a group's collectives: ring and NCCL's tree on the group's link.

A message of S bytes over a link of latency alpha and bandwidth B costs alpha + S/B (Hockney's
model). The step and byte counts of each algorithm live in ``alphabeta.shape`` (Thakur,
Rabenseifner & Gropp 2005 for the ring; Sanders, Speck & Träff 2009 for the double binary tree);
this module prices them on a group's link:

    ring all-reduce           2(n-1) alpha + 2(n-1)/n * S/B
    ring all-gather           (n-1) alpha  + (n-1)/n  * S/B     (S = the gathered output)
    ring reduce-scatter       (n-1) alpha  + (n-1)/n  * S/B     (S = the full input)
    ring broadcast            (n-1) alpha  + S/B                (a pipelined chain)
    pairwise all-to-all       (n-1) alpha  + (n-1)/n  * S/B     (S = one rank's buffer; Thakur et al. Sec. 4.6)
    double binary tree AR     2 ceil(log2 n) alpha + 2 S/B      (NCCL's "Tree", pipelined)

The factors 2(n-1)/n and (n-1)/n are nccl-tests' "bus bandwidth" factors (``alphabeta.bus_factor``).
NCCL picks between its Ring and Tree algorithms by size and rank count; 'auto' takes the faster
of the two, as NCCL's tuner does (src/graph/tuning.cc).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from parlab.costmodel.pricing import alphabeta
from parlab.costmodel.pricing.alphabeta import bus_factor  # noqa: F401 - re-exported as parlab.costmodel.bus_factor
from parlab.costmodel.specs.cluster import Cluster
from parlab.layout import GroupSpan
from parlab.tables import plural

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "p2p", "all_to_all")
ALGORITHMS = ("ring", "double_binary_tree", "auto")


def _priced(op: str, algorithm: str, nbytes: float, n: int, bandwidth: float, latency: float) -> float:
    """steps x alpha + volume / B of ``alphabeta.time`` (which checks the numbers by name)."""
    return alphabeta.time(op, algorithm, n, nbytes, latency, bandwidth).seconds


def ring_time(op: str, nbytes: float, n: int, bandwidth: float, latency: float) -> float:
    """Seconds for a ring collective (Thakur et al. 2005): steps x alpha + factor x S / B (an
    all-to-all: the pairwise exchange, n - 1 steps of one block each)."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; allowed: {', '.join(OPS)}")
    if n <= 1 or nbytes <= 0:
        return 0.0
    algorithm = {"p2p": "direct", "all_to_all": "pairwise"}.get(op, "ring")
    return _priced(op, algorithm, nbytes, n, bandwidth, latency)


def tree_time(op: str, nbytes: float, n: int, bandwidth: float, latency: float) -> float:
    """Seconds for NCCL's Tree algorithm, the pipelined double binary tree all-reduce (Sanders
    et al. 2009; NCCL 2.4): 2 x depth steps (up both trees, down again), and each rank sends
    and receives about the whole buffer twice, so 2 S / B."""
    if op != "all_reduce":
        raise ValueError(f"no tree algorithm for {op!r}: NCCL's double binary tree serves all_reduce")
    if n <= 1 or nbytes <= 0:
        return 0.0
    return _priced(op, "double_binary_tree", nbytes, n, bandwidth, latency)


def collective_time(op: str, nbytes: float, n: int, bandwidth: float, latency: float,
                    algorithm: str = "auto") -> float:
    """Seconds for ``op`` on ``nbytes`` among ``n`` ranks; 'auto' takes the faster of ring and
    double binary tree where a tree exists (all-reduce; NCCL picks by message size the same way)."""
    if algorithm == "ring" or (algorithm == "auto" and op != "all_reduce"):
        return ring_time(op, nbytes, n, bandwidth, latency)
    if algorithm == "double_binary_tree":
        return tree_time(op, nbytes, n, bandwidth, latency)
    if algorithm == "auto":
        return min(ring_time(op, nbytes, n, bandwidth, latency), tree_time(op, nbytes, n, bandwidth, latency))
    raise ValueError(f"unknown algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")


_collective_time = lru_cache(maxsize=8192)(collective_time)


@dataclass(frozen=True)
class GroupLink:
    """The bandwidth (bytes/s, achievable, one direction) and latency a group's collectives get."""

    bandwidth: float
    latency: float
    where: str

    def time(self, op: str, nbytes: float, n: int, algorithm: str = "auto") -> float:
        """``collective_time`` on this link (memoised: a search prices the same few messages on the
        same few links for thousands of plans)."""
        return _collective_time(op, nbytes, n, self.bandwidth, self.latency, algorithm)


def group_link(cluster: Cluster, span: GroupSpan) -> GroupLink:
    """The link a group's ring runs on, from where its ranks sit.

    Inside one node: the intra-node link. Across nodes, with k ranks of the group per node: the
    ring leaves each node once, and the node's ports are shared by all groups that talk at the
    same time, so the group gets k x (the node's network share per GPU), and never more than
    the intra-node link carries between its k local ranks (hierarchical bandwidth of NCCL's rings).
    """
    if not span.crosses_nodes:
        return GroupLink(cluster.intra.achievable, cluster.intra.latency, f"intra-node {cluster.intra.name}")
    bandwidth = span.per_node * cluster.net_share_per_gpu
    if span.per_node > 1:
        bandwidth = min(bandwidth, cluster.intra.achievable)
    return GroupLink(bandwidth, cluster.inter.latency,
                     f"inter-node {cluster.inter.name}, {plural(span.per_node, 'rank')} per node")

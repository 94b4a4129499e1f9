"""Alpha-beta cost of collectives (ring and tree) and the link a group's collective runs on.

A message of S bytes over a link of latency alpha and bandwidth B costs alpha + S/B (Hockney's
model). A collective is a sequence of such steps; Thakur, Rabenseifner & Gropp 2005
("Optimization of Collective Communication Operations in MPICH", Table 1) give the step counts:

    ring all-reduce           2(n-1) alpha + 2(n-1)/n * S/B
    ring all-gather           (n-1) alpha  + (n-1)/n  * S/B     (S = the gathered output)
    ring reduce-scatter       (n-1) alpha  + (n-1)/n  * S/B     (S = the full input)
    tree all-reduce           2 ceil(log2 n) alpha + 2 S/B      (reduce + broadcast, pipelined)

The factors 2(n-1)/n and (n-1)/n are nccl-tests' "bus bandwidth" factors (``alphabeta.bus_factor``).
``alphabeta`` models each algorithm the local backend runs, step by step; this module is the
cluster-level view the estimate uses: ring and NCCL-style pipelined trees on a group's link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .alphabeta import bus_factor
from .cluster import Cluster, GroupSpan

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "p2p")
ALGORITHMS = ("ring", "tree", "auto")


def ring_time(op: str, nbytes: float, n: int, bandwidth: float, latency: float) -> float:
    """Seconds for a ring collective (Thakur et al. 2005): steps x alpha + factor x S / B."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    steps = {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1,
             "broadcast": n - 1, "p2p": 1}[op]
    return steps * latency + bus_factor(op, n) * nbytes / bandwidth


def tree_time(op: str, nbytes: float, n: int, bandwidth: float, latency: float) -> float:
    """Seconds for a pipelined binary-tree all-reduce or broadcast: fewer steps (log2 n), each
    byte crossing a tree edge on the way up and again on the way down."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    depth = math.ceil(math.log2(n))
    if op == "all_reduce":
        return 2 * depth * latency + 2 * nbytes / bandwidth
    if op == "broadcast":
        return depth * latency + nbytes / bandwidth
    raise ValueError(f"no tree algorithm for {op!r}: trees serve all_reduce and broadcast")


def collective_time(op: str, nbytes: float, n: int, bandwidth: float, latency: float,
                    algorithm: str = "auto") -> float:
    """Seconds for ``op`` on ``nbytes`` among ``n`` ranks; 'auto' takes the faster of ring and
    tree where a tree exists (NCCL picks by message size the same way)."""
    if algorithm == "ring" or (algorithm == "auto" and op not in ("all_reduce", "broadcast")):
        return ring_time(op, nbytes, n, bandwidth, latency)
    if algorithm == "tree":
        return tree_time(op, nbytes, n, bandwidth, latency)
    if algorithm == "auto":
        return min(ring_time(op, nbytes, n, bandwidth, latency), tree_time(op, nbytes, n, bandwidth, latency))
    raise ValueError(f"unknown algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")


@dataclass(frozen=True)
class GroupLink:
    """The bandwidth (bytes/s, achievable, one direction) and latency a group's collectives get."""

    bandwidth: float
    latency: float
    where: str

    def time(self, op: str, nbytes: float, n: int, algorithm: str = "auto") -> float:
        return collective_time(op, nbytes, n, self.bandwidth, self.latency, algorithm)


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
                     f"inter-node {cluster.inter.name}, {span.per_node} rank(s)/node")

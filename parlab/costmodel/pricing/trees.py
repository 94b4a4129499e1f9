"""NCCL's double binary tree: which rank is whose parent, for the runtime and the cost model alike.

A single binary tree cannot use the full bandwidth: its leaves (half the ranks) only send, its
inner nodes send twice. The double binary tree of Sanders, Speck & Träff ("Two-tree algorithms
for full bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009) runs two
trees at once, each on half of the data, built so that the leaves of one are the inner nodes of
the other; every rank then sends and receives about the whole buffer once each way, in
2 x depth = 2 log2(p) latency steps. NCCL adopted it in 2.4 (S. Jeaugey, "Massively Scale Your
Deep Learning Training with NCCL 2.4", NVIDIA developer blog, Feb 2019); the construction below
is NCCL's (src/graph/trees.cc: ``ncclGetBtree``, ``ncclGetDtree``). Pure Python.
"""

from __future__ import annotations

Node = tuple[int, tuple[int, ...]]  # (parent or -1, children)


def binary_tree(p: int, rank: int) -> Node:
    """(parent, children) of ``rank`` in NCCL's in-order binary tree over ranks 0..p-1.

    A rank whose lowest set bit is b has children rank - b/2 and rank + b/2 (the latter, when
    past the end, the nearest rank + b/4, b/8, ... that exists); its parent is the rank that
    flips bit b and sets bit 2b (or, past the end, only flips b). Rank 0 is the root, with one
    child: the largest power of two below p. Odd ranks are the leaves.
    """
    if not 0 <= rank < p:
        raise ValueError(f"rank must be in 0..{p - 1}, got {rank}")
    if p == 1:
        return -1, ()
    if rank == 0:
        return -1, (1 << ((p - 1).bit_length() - 1),)
    bit = rank & -rank
    parent = (rank ^ bit) | (bit << 1)
    if parent >= p:
        parent = rank ^ bit
    low = bit >> 1
    if not low:
        return parent, ()
    right = low
    while right and rank + right >= p:
        right >>= 1
    return parent, (rank - low,) + ((rank + right,) if right else ())


def double_binary_tree(p: int) -> tuple[list[Node], list[Node]]:
    """The two trees, as [(parent, children) of rank r for r in 0..p-1] each. The second is
    the first mirrored (rank r plays rank p-1-r) when p is even, shifted by one (rank r plays
    rank r-1) when p is odd (``ncclGetDtree``). O(p): for one rank, use ``nodes``."""
    return [binary_tree(p, r) for r in range(p)], [_second(p, r) for r in range(p)]


def nodes(p: int, rank: int) -> tuple[Node, Node]:
    """(parent, children) of ``rank`` in each of the two trees, in O(log p) (no tree is built)."""
    return binary_tree(p, rank), _second(p, rank)


def _second(p: int, r: int) -> Node:
    """``rank`` r's node in the second tree: the first tree's node of the rank it plays, relabelled."""
    if p % 2:
        to, back = (lambda x: (x + 1) % p), (lambda x: (x - 1) % p)
    else:
        to = back = (lambda x: p - 1 - x)
    parent, children = binary_tree(p, back(r))
    return (to(parent) if parent >= 0 else -1), tuple(to(c) for c in children)


def depth(tree: list[Node]) -> int:
    """Edges on the longest path from the root down to a leaf."""
    root = next(r for r, (parent, _) in enumerate(tree) if parent < 0)
    level, frontier = 0, [root]
    while True:
        frontier = [c for r in frontier for c in tree[r][1]]
        if not frontier:
            return level
        level += 1


def all_reduce_traffic(p: int, nbytes: float) -> list[tuple[float, float, float]]:
    """(bytes sent, bytes received, bytes reduced) of each rank in a double-binary-tree
    all-reduce of ``nbytes`` (``rank_traffic`` of every rank: O(p))."""
    return [rank_traffic(p, r, nbytes) for r in range(p)]


def rank_traffic(p: int, rank: int, nbytes: float) -> tuple[float, float, float]:
    """(bytes sent, bytes received, bytes reduced) of ``rank`` in a double-binary-tree all-reduce
    of ``nbytes``: each tree carries half; up the tree a rank receives one half from each child
    (and reduces it) and sends one half to its parent, down the tree the reverse."""
    half = nbytes / 2
    sent = red = 0.0
    for parent, children in nodes(p, rank):
        sent += (parent >= 0) * half + len(children) * half
        red += len(children) * half
    return sent, sent, red  # up and down mirror each other: as much received as sent


def depth_of(p: int) -> int:
    """Depth of either tree over p ranks, in closed form: ceil(log2 p) (0 for one rank).

    The path 0 -> 2^(k-1) -> 2^(k-2) -> ... -> 1 (k = ceil(log2 p)) exists, and every edge below
    the root goes from a rank whose lowest set bit is b to one whose lowest set bit is below b,
    so no path is longer. The second tree is the first relabelled: the same depth."""
    return (p - 1).bit_length()


def busiest(p: int) -> tuple[float, float]:
    """(bytes the busiest rank sends, bytes the busiest rank reduces) per byte of the buffer, in
    closed form (what ``max`` over ``all_reduce_traffic(p, 1.0)`` gives, without building it).

    In the first tree odd ranks are leaves, an even rank r > 0 has two children when r <= p - 2
    (else one) and the root one; the second tree gives those roles to the other parity (p even:
    mirrored; p odd: shifted by one). So from p = 4 on (p = 5 when p is odd) some rank is inner
    in one tree with two children and a non-root leaf in the other: 4 halves sent, 2 reduced.
    Smaller worlds: p = 2 sends 2 halves (1 reduced), p = 3 sends 3 (2 reduced)."""
    if p < 2:
        return 0.0, 0.0
    sent = {2: 2, 3: 3}.get(p, 4)
    reduced = 1 if p == 2 else 2
    return sent / 2, reduced / 2

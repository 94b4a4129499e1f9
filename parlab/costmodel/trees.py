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
    rank r-1) when p is odd (``ncclGetDtree``)."""
    first = [binary_tree(p, r) for r in range(p)]
    if p % 2:
        to, back = (lambda r: (r + 1) % p), (lambda r: (r - 1) % p)
    else:
        to = back = (lambda r: p - 1 - r)

    def moved(r: int) -> Node:
        parent, children = first[back(r)]
        return (to(parent) if parent >= 0 else -1), tuple(to(c) for c in children)

    return first, [moved(r) for r in range(p)]


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
    all-reduce of ``nbytes``: each tree carries half; up the tree a rank receives one half from
    each child (and reduces it) and sends one half to its parent, down the tree the reverse."""
    half, both = nbytes / 2, double_binary_tree(p)
    out = []
    for r in range(p):
        sent = recv = red = 0.0
        for tree in both:
            parent, children = tree[r]
            up = half if parent >= 0 else 0.0
            sent += up + len(children) * half
            recv += len(children) * half + up
            red += len(children) * half
        out.append((sent, recv, red))
    return out

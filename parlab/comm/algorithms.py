"""Collectives built from point-to-point steps, written once for any backend.

Each function takes a communicator and uses only ``comm.rank``, ``comm.world_size``,
``comm.send``, ``comm.recv`` and the fused receive-and-combine calls (``recv_reduce``,
``recv_reduce_send``, ``recv_copy_send``), so the same code runs on the local backend, on
torch.distributed, and is what a learner writes in exercise 02. The names are the field's:

    ring                 reduce-scatter + all-gather round the ring (all-reduce, all-gather,
                         reduce-scatter); for broadcast and reduce a pipelined chain along it
    double_binary_tree   NCCL's tree all-reduce: two binary trees, half the data each, pipelined
    recursive_doubling   log2(p) rounds of whole-buffer exchanges with rank XOR 2^k
    binomial_tree        log2(p) rounds, the set of ranks holding the data doubling each round
    naive                everything through one root, one message per rank
    shm_direct           all-reduce and broadcast by direct reads of the peers' shared windows
                         (one host)
    pairwise, dissemination   all-to-all and barrier

Sources. Ring reduce-scatter/all-gather/all-reduce: Patarasuk & Yuan, "Bandwidth optimal
all-reduce algorithms for clusters of workstations", JPDC 2009 (per rank 2(n-1)/n of the data,
the lower bound). Recursive doubling, binomial trees, and the fold for a non-power-of-two
rank count: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations
in MPICH", IJHPCA 2005, sections 4.1-4.4. Double binary tree: Sanders, Speck & Träff, "Two-tree
algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing 2009, with
NCCL 2.4's trees (``parlab.costmodel.pricing.trees``). Dissemination barrier: Hensgen, Finkel & Manber,
"Two algorithms for barrier synchronization", 1988. Pipelining over cache-sized chunks is what
NCCL does (src/device/all_reduce.h, runRing / runTreeUpDown: the loop over ``chunkSize``
slices; src/device/broadcast.h for the chain). Their costs: ``parlab.costmodel.pricing.alphabeta``.

Replicas are bit-identical after every all-reduce: each element is combined in one place (the
ring's owner of a block, a tree's root, the naive root) and copied, or, in recursive doubling,
both partners combine (lower ranks' partial, higher ranks' partial) in that one order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from parlab.costmodel import alphabeta, trees

from . import arrays as A

# Bytes of one chunk: a ring all-reduce sends slices of n * CHUNK_BYTES of the buffer round the
# ring one after the other, so a block is still in cache when it is reduced and forwarded; the
# chain and the trees stream chunks of CHUNK_BYTES, each forwarded as soon as it has arrived.
CHUNK_BYTES = 1 << 20
# Below this many bytes all-reduce, broadcast and reduce are latency-bound: the log2(p)-step
# algorithms (recursive doubling, binomial tree) beat the ring's p-1 or 2(p-1) steps; see
# parlab.costmodel.pricing.alphabeta.crossover.
SMALL_MAX_BYTES = 64 << 10


# ---------------------------------------------------------------------------- helpers
def block_bounds(n_elems: int, n: int) -> list[tuple[int, int]]:
    """[lo, hi) of n nearly equal blocks of n_elems elements (sizes differ by at most one)."""
    return [(i * n_elems // n, (i + 1) * n_elems // n) for i in range(n)]


def slices(n_elems: int, size: int) -> Iterator[tuple[int, int]]:
    """[lo, hi) slices of at most ``size`` elements covering n_elems (one empty slice if 0)."""
    yield from ((lo, min(lo + size, n_elems)) for lo in range(0, max(n_elems, 1), size))


def chunk_elems(x: A.Array) -> int:
    return max(1, CHUNK_BYTES // A.itemsize(A.dtype_name(x)))


def neighbours(comm) -> tuple[int, int]:
    """(left, right) on the ring 0 -> 1 -> ... -> n-1 -> 0."""
    return (comm.rank - 1) % comm.world_size, (comm.rank + 1) % comm.world_size


# ---------------------------------------------------------------------------- the ring's schedule
def ring_schedule(n: int) -> list[tuple[str, list[tuple[int, int, int]]]]:
    """The ring all-reduce as data: 2(n-1) steps, each a phase name and its (src, dst, block)
    transfers; every rank sends to its right neighbour in every step. The one schedule that the
    runtime runs (``ring_steps``), exercise 02's checker checks and chapter 02's figure draws.

    Reduce-scatter, step s = 0..n-2: rank r sends its partial block (r-s-1) mod n to rank r+1,
    which adds its own copy; after the last step rank r holds block r summed over every rank
    (the block reduce_scatter gives it). All-gather, step s: rank r forwards the finished block
    (r-s) mod n, which rank r+1 keeps."""
    steps = [("reduce-scatter", [(r, (r + 1) % n, (r - s - 1) % n) for r in range(n)])
             for s in range(n - 1)]
    steps += [("all-gather", [(r, (r + 1) % n, (r - s) % n) for r in range(n)]) for s in range(n - 1)]
    return steps


def ring_steps(n: int, rank: int) -> list[tuple[str, int, int]]:
    """Rank ``rank``'s part of ``ring_schedule(n)``: (phase, block it sends, block it receives)
    for each step. The block received in a step is the one sent in the next step of its phase."""
    out = []
    for phase, moves in ring_schedule(n):
        sent = next(b for src, _, b in moves if src == rank)
        got = next(b for _, dst, b in moves if dst == rank)
        out.append((phase, sent, got))
    return out


# ---------------------------------------------------------------------------- ring
def ring_reduce_scatter_steps(comm, blocks: list, op: str, into: A.Array | None = None) -> None:
    """The reduce-scatter steps of ``ring_schedule``: rank r starts its block r-1 on its way
    round the ring; each rank the block passes adds its own copy and forwards the sum in one
    pass (recv_reduce_send); after n-1 hops block r has met every rank and stops at rank r,
    which adds its own last. Afterwards ``into`` (default blocks[r]; else a copy of blocks[r]
    made by the caller) holds block r reduced over all ranks. The other blocks are only read."""
    n, r = comm.world_size, comm.rank
    into = blocks[r] if into is None else into
    if n == 1:
        return
    left, right = neighbours(comm)
    steps = [(sent, got) for phase, sent, got in ring_steps(n, r) if phase == "reduce-scatter"]
    comm.send(blocks[steps[0][0]], right)
    for _, got in steps[:-1]:  # a partial sum comes in, add mine, pass it on (the next step's send)
        comm.recv_reduce_send(left, blocks[got], right, op)
    comm.recv_reduce(left, into, op)  # steps[-1][1] == r: the last contribution is mine


def ring_all_gather_steps(comm, blocks: list) -> None:
    """The all-gather steps of ``ring_schedule``: rank r sends its finished block r to the
    right; each rank keeps a copy of what arrives and passes it on (recv_copy_send), so every
    block visits every rank once."""
    n, r = comm.world_size, comm.rank
    if n == 1:
        return
    left, right = neighbours(comm)
    steps = [(sent, got) for phase, sent, got in ring_steps(n, r) if phase == "all-gather"]
    comm.send(blocks[steps[0][0]], right)
    for _, got in steps[:-1]:  # a finished block arrives: keep it, pass it on
        comm.recv_copy_send(left, blocks[got], right)
    comm.recv(left, out=blocks[steps[-1][1]])  # the last one needs to go no further


def ring_all_reduce(comm, x: A.Array, op: str) -> A.Array:
    """Reduce-scatter then all-gather round the ring, in place. Per rank: 2(n-1) steps of
    1/n of the data each, so 2(n-1)/n of the data sent and received whatever n is."""
    flat, n = A.flat(x), comm.world_size
    for lo, hi in slices(len(flat), n * chunk_elems(x)):
        part = flat[lo:hi]
        blocks = [part[a:b] for a, b in block_bounds(hi - lo, n)]
        ring_reduce_scatter_steps(comm, blocks, op)
        ring_all_gather_steps(comm, blocks)
    return x


def ring_all_gather(comm, x: A.Array, out: A.Array | None = None) -> A.Array:
    """Every rank's x stacked on dim 0: n-1 steps, each forwarding one rank's block."""
    n, r, m = comm.world_size, comm.rank, x.reshape(-1).shape[0]
    out = _stacked(x, n) if out is None else out
    flat = A.flat(out)
    flat[r * m:(r + 1) * m] = A.flat(x)
    for lo, hi in slices(m, chunk_elems(x)):
        ring_all_gather_steps(comm, [flat[i * m + lo:i * m + hi] for i in range(n)])
    return out


def ring_reduce_scatter(comm, x: A.Array, op: str, out: A.Array | None = None) -> A.Array:
    """op over every rank's x, block ``rank`` of dim 0: n-1 steps of 1/n of the data each."""
    n, r = comm.world_size, comm.rank
    flat = A.flat(x)
    m = len(flat) // n
    out = A.empty(A.kind_of(x), A.dtype_name(x), (x.shape[0] // n, *x.shape[1:])) if out is None else out
    mine = A.flat(out)
    mine[...] = flat[r * m:(r + 1) * m]
    for lo, hi in slices(m, chunk_elems(x)):
        ring_reduce_scatter_steps(comm, [flat[i * m + lo:i * m + hi] for i in range(n)], op,
                                  into=mine[lo:hi])
    return out


def _stacked(x: A.Array, n: int) -> A.Array:
    """An empty array for n copies of x stacked on dim 0."""
    return A.empty(A.kind_of(x), A.dtype_name(x), A.concat_shape(tuple(x.shape), n))


def ring_broadcast(comm, x: A.Array, root: int) -> A.Array:
    """A pipelined chain along the ring, NCCL's ring broadcast (src/device/broadcast.h): the root
    sends chunk after chunk to root+1, every rank forwards each chunk as it arrives
    (recv_copy_send), and root-1 only receives. Every link carries the buffer once, all at
    the same time: (p-1) alpha + n beta when the chunks are small. In place."""
    n, r = comm.world_size, comm.rank
    if n == 1:
        return x
    me, (left, right) = (r - root) % n, neighbours(comm)
    flat = A.flat(x)
    for lo, hi in slices(len(flat), chunk_elems(x)):
        if me == 0:
            comm.send(flat[lo:hi], right)
        elif me == n - 1:
            comm.recv(left, out=flat[lo:hi])
        else:
            comm.recv_copy_send(left, flat[lo:hi], right)
    return x


def ring_reduce(comm, x: A.Array, root: int, op: str) -> A.Array:
    """The chain the other way, NCCL's ring reduce: root+1 sends its chunks to the right, every
    rank adds its own and forwards the sum (recv_reduce_send), the root adds its own last.
    ``x`` is a working copy; on the root it ends as the result."""
    n, r = comm.world_size, comm.rank
    if n == 1:
        return x
    me, (left, right) = (r - root) % n, neighbours(comm)
    flat = A.flat(x)
    for lo, hi in slices(len(flat), chunk_elems(x)):
        if me == 1:
            comm.send(flat[lo:hi], right)
        elif me == 0:
            comm.recv_reduce(left, flat[lo:hi], op)
        else:
            comm.recv_reduce_send(left, flat[lo:hi], right, op)
    return x


# ---------------------------------------------------------------------------- double binary tree
def double_binary_tree_all_reduce(comm, x: A.Array, op: str) -> A.Array:
    """NCCL's tree all-reduce (Sanders et al. 2009; NCCL 2.4): two binary trees
    (``parlab.costmodel.pricing.trees.double_binary_tree``), each reducing half of the buffer up to its
    root and broadcasting the sum back down, chunk by chunk so that every level works at once.
    2 x depth = 2 log2(p) steps on the path instead of the ring's 2(p-1), for about 2n bytes
    per rank each way (the ring: 2(p-1)/p n). In place; each element is summed once, at its
    tree's root, so every rank gets the same bits."""
    n, r = comm.world_size, comm.rank
    if n == 1:
        return x
    flat, size = A.flat(x), chunk_elems(x)
    halves = [flat[lo:hi] for lo, hi in block_bounds(len(flat), 2)]
    cuts = [[h[lo:hi] for lo, hi in slices(len(h), size)] for h in halves]
    mine = [tree[r] for tree in trees.double_binary_tree(n)]
    order = [(t, cuts[t][c]) for c in range(max(map(len, cuts))) for t in (0, 1) if c < len(cuts[t])]
    for t, piece in order:  # up: children's partial sums into mine, the sum to my parent
        parent, children = mine[t]
        for i, child in enumerate(children):
            if parent >= 0 and i == len(children) - 1:
                comm.recv_reduce_send(child, piece, parent, op)
            else:
                comm.recv_reduce(child, piece, op)
        if parent >= 0 and not children:
            comm.send(piece, parent)
    for t, piece in order:  # down: the root's sum to everyone
        parent, children = mine[t]
        if parent >= 0 and children:
            comm.recv_copy_send(parent, piece, children[0])
        elif parent >= 0:
            comm.recv(parent, out=piece)
        for child in children[1:] if parent >= 0 else children:
            comm.send(piece, child)
    return x


# ---------------------------------------------------------------------------- binomial tree
def binomial_tree_broadcast(comm, x: A.Array, root: int) -> A.Array:
    """Binomial tree: in round k every rank that has the data sends it 2^k ranks further, so
    log2(n) rounds reach everyone (Thakur et al. 2005, section 4.1). In place."""
    n, r = comm.world_size, comm.rank
    me = (r - root) % n  # rank relative to the root
    mask = 1
    while mask < n:  # receive once, from the rank that clears my lowest set bit
        if me & mask:
            comm.recv((r - mask) % n, out=x)
            break
        mask <<= 1
    mask >>= 1
    while mask:  # then pass it on down the tree
        if me + mask < n:
            comm.send(x, (r + mask) % n)
        mask >>= 1
    return x


def binomial_tree_reduce(comm, x: A.Array, root: int, op: str) -> A.Array:
    """The binomial broadcast run backwards: partial results climb log2(n) rounds to the root.
    ``x`` is a working copy (op must be commutative, as all of ours are)."""
    n, r = comm.world_size, comm.rank
    me, mask = (r - root) % n, 1
    while mask < n:
        if me & mask:
            comm.send(x, (r - mask) % n)
            break
        if me + mask < n:
            comm.recv_reduce((r + mask) % n, x, op)
        mask <<= 1
    return x


# ---------------------------------------------------------------------------- recursive doubling
def recursive_doubling_all_reduce(comm, x: A.Array, op: str) -> A.Array:
    """Recursive doubling: in round k rank r swaps its whole partial result with rank r XOR 2^k,
    log2(n) rounds (Thakur et al. 2005, 4.4). For n not a power of two the first 2*extra ranks
    pair up first (the even one hands its data to the odd one and waits for the answer).

    Both partners of a round combine the same two partials, so they must combine them in the
    same order to get the same bits (complex products and the sign of a zero from max/min
    depend on the order): always op(partial of the lower ranks, partial of the higher ranks)."""
    n, r = comm.world_size, comm.rank
    p2 = 1 << (n.bit_length() - 1)  # largest power of two <= n
    extra = n - p2
    if r < 2 * extra and r % 2 == 0:  # folded out: give my data, get the result at the end
        comm.send(x, r + 1)
        return comm.recv(r + 1, out=x)
    if r < 2 * extra:
        comm.recv_reduce(r - 1, x, op)
    me = r // 2 if r < 2 * extra else r - extra  # rank among the p2 that stay
    mask = 1
    while mask < p2:
        partner = me ^ mask
        peer = 2 * partner + 1 if partner < extra else partner + extra
        comm.send(x, peer)
        theirs = comm.recv(peer)  # both sides combine with the same kernel, in the same order:
        lower, higher = (x, theirs) if partner > me else (theirs, x)
        A.reduce_arrays(lower, higher, op, out=x)
        mask <<= 1
    if r < 2 * extra:
        comm.send(x, r - 1)
    return x


# ---------------------------------------------------------------------------- naive (flat)
def shm_direct_all_reduce(comm, x: A.Array, op: str) -> A.Array:
    """Reduce-scatter then all-gather by *direct* exchange (no forwarding): rank r combines
    block r of every rank's buffer in rank order, then every rank takes block j from rank j.
    On the local backend's world communicator the blocks are read straight out of the peers'
    shared windows (``parlab.comm.direct``: 2 barriers per chunk); elsewhere (torch, sub-groups,
    non-x86) each block is a message. Per rank 2(n-1)/n of the data either way."""
    n, me = comm.world_size, comm.rank
    if n == 1:
        return x
    direct = comm._direct() if hasattr(comm, "_direct") else None
    if direct is not None:
        return direct.all_reduce(comm, x, op)
    flat = A.flat(x)
    bounds = block_bounds(len(flat), n)
    for r in range(n):
        if r != me:
            a, b = bounds[r]
            comm.send(flat[a:b], r)
    a, b = bounds[me]
    own = A.copy_of(flat[a:b])
    mine = flat[a:b]
    if me != 0:
        comm.recv(0, out=mine)
    for r in range(1, n):  # ((x0 op x1) op x2) ...: the same order whoever owns the block
        if r == me:
            A.reduce_arrays(mine, own, op)
        else:
            comm.recv_reduce(r, mine, op)
    for r in range(n):
        if r != me:
            comm.send(mine, r)
    for r in range(n):
        if r != me:
            ra, rb = bounds[r]
            comm.recv(r, out=flat[ra:rb])
    return x


def shm_direct_broadcast(comm, x: A.Array, root: int) -> A.Array:
    """The root's buffer read by every peer at once: on the local backend's world communicator
    straight out of the root's shared window (``parlab.comm.direct``: the root writes each
    chunk once, the p-1 peers copy it out in parallel, 1 synchronisation per chunk); elsewhere
    the root sends the whole buffer to each peer. The root is read (p-1) n, each peer reads n,
    either way. In place."""
    if comm.world_size == 1:
        return x
    direct = comm._direct() if hasattr(comm, "_direct") else None
    if direct is not None:
        return direct.broadcast(comm, x, root)
    return naive_broadcast(comm, x, root)


def naive_broadcast(comm, x: A.Array, root: int) -> A.Array:
    """The root sends the whole array to every other rank in turn: n-1 messages on its link."""
    if comm.rank == root:
        for peer in range(comm.world_size):
            if peer != root:
                comm.send(x, peer)
    else:
        comm.recv(root, out=x)
    return x


def naive_reduce(comm, x: A.Array, root: int, op: str) -> A.Array:
    """Everyone sends its whole array to the root, which reduces them one after another."""
    if comm.rank == root:
        for peer in range(comm.world_size):
            if peer != root:
                comm.recv_reduce(peer, x, op)
    else:
        comm.send(x, root)
    return x


def naive_all_reduce(comm, x: A.Array, op: str) -> A.Array:
    """Reduce to rank 0, then broadcast from it: the root's link carries 2(n-1) copies."""
    return naive_broadcast(comm, naive_reduce(comm, x, 0, op), 0)


def naive_gather(comm, x: A.Array, root: int) -> A.Array | None:
    """Everyone sends its array to the root, which stacks them in rank order."""
    n, r = comm.world_size, comm.rank
    if r != root:
        comm.send(x, root)
        return None
    out = _stacked(x, n)
    blocks = _blocks(out, n)
    for peer in range(n):
        if peer == r:
            blocks[peer][...] = A.flat(x)
        else:
            comm.recv(peer, out=blocks[peer])
    return out


def naive_scatter(comm, x: A.Array, root: int) -> A.Array:
    """The root sends block i (along dim 0) of its array to rank i."""
    n, r = comm.world_size, comm.rank
    shape = (x.shape[0] // n, *x.shape[1:])
    if r != root:
        return comm.recv(root, out=A.empty(A.kind_of(x), A.dtype_name(x), shape))
    blocks = _blocks(x, n)
    for peer in range(n):
        if peer != r:
            comm.send(blocks[peer], peer)
    return A.copy_of(blocks[r]).reshape(shape)


def naive_all_gather(comm, x: A.Array, out: A.Array | None = None) -> A.Array:
    """Gather to rank 0, then broadcast the stacked array from it."""
    return _into(naive_broadcast(comm, _or_empty(naive_gather(comm, x, 0), x, comm.world_size), 0), out)


def naive_reduce_scatter(comm, x: A.Array, op: str, out: A.Array | None = None) -> A.Array:
    """Reduce the whole array to rank 0, then scatter its blocks."""
    return _into(naive_scatter(comm, naive_reduce(comm, A.copy_of(x), 0, op), 0), out)


def _or_empty(out: A.Array | None, x: A.Array, n: int) -> A.Array:
    return _stacked(x, n) if out is None else out


def _into(result: A.Array, out: A.Array | None) -> A.Array:
    """``result``, copied into ``out`` when the caller gave a buffer."""
    if out is None:
        return result
    A.flat(out)[...] = A.flat(result)
    return out


def binomial_tree_gather(comm, x: A.Array, root: int) -> A.Array | None:
    """Binomial tree gather (Thakur et al. 2005, 4.3): a rank whose lowest set bit (relative to
    the root) is 2^k first collects the blocks of the 2^k ranks after it, then sends them up as
    one message; log2(n) rounds, and the root receives n-1 blocks in log2(n) messages."""
    n, r, m = comm.world_size, comm.rank, x.reshape(-1).shape[0]
    me = (r - root) % n
    rel = A.flat(_stacked(x, n))
    rel[me * m:(me + 1) * m] = A.flat(x)  # blocks in order of rank relative to the root
    mask = 1
    while mask < n:
        if me & mask:
            comm.send(rel[me * m:min(me + mask, n) * m], (r - mask) % n)
            return None
        if me + mask < n:
            comm.recv((r + mask) % n, out=rel[(me + mask) * m:min(me + 2 * mask, n) * m])
        mask <<= 1
    out = _stacked(x, n)
    flat = A.flat(out)  # rotate relative order back to rank order
    flat[root * m:] = rel[:(n - root) * m]
    flat[:root * m] = rel[(n - root) * m:]
    return out


def binomial_tree_all_gather(comm, x: A.Array, out: A.Array | None = None) -> A.Array:
    """Binomial gather to rank 0, then binomial broadcast: 2 log2(n) rounds."""
    stacked = _or_empty(binomial_tree_gather(comm, x, 0), x, comm.world_size)
    return _into(binomial_tree_broadcast(comm, stacked, 0), out)


# ---------------------------------------------------------------------------- others
def pairwise_all_to_all(comm, x: A.Array) -> A.Array:
    """n-1 steps; at step s rank r sends its block r+s to rank r+s and receives block r from
    rank r-s (Thakur et al. 2005, 4.6: pairwise exchange)."""
    n, r = comm.world_size, comm.rank
    out = A.empty(A.kind_of(x), A.dtype_name(x), tuple(x.shape))
    src, dst = _blocks(x, n), _blocks(out, n)
    dst[r][...] = src[r]
    for step in range(1, n):
        comm.send(src[(r + step) % n], (r + step) % n)
        comm.recv((r - step) % n, out=dst[(r - step) % n])
    return out


def dissemination_barrier(comm, token: A.Array) -> None:
    """ceil(log2 n) rounds; in round k rank r signals rank r+2^k and waits for rank r-2^k.
    After the last round every rank has (transitively) heard from every other."""
    n, r, k = comm.world_size, comm.rank, 1
    while k < n:
        comm.send(token, (r + k) % n)
        comm.recv((r - k) % n)
        k <<= 1


def _blocks(x: A.Array, n: int) -> list:
    """n equal flat views along dim 0 of a contiguous array."""
    flat = A.flat(x)
    m = len(flat) // n
    return [flat[i * m:(i + 1) * m] for i in range(n)]


# ---------------------------------------------------------------------------- table
TABLE: dict[str, dict[str, Callable]] = {
    "barrier": {"dissemination": dissemination_barrier},
    "broadcast": {"ring": ring_broadcast, "binomial_tree": binomial_tree_broadcast,
                  "naive": naive_broadcast, "shm_direct": shm_direct_broadcast},
    "reduce": {"ring": ring_reduce, "binomial_tree": binomial_tree_reduce, "naive": naive_reduce},
    "all_reduce": {"ring": ring_all_reduce, "double_binary_tree": double_binary_tree_all_reduce,
                   "recursive_doubling": recursive_doubling_all_reduce, "naive": naive_all_reduce,
                   "shm_direct": shm_direct_all_reduce},
    "all_gather": {"ring": ring_all_gather, "binomial_tree": binomial_tree_all_gather,
                   "naive": naive_all_gather},
    "reduce_scatter": {"ring": ring_reduce_scatter, "naive": naive_reduce_scatter},
    "gather": {"naive": naive_gather, "binomial_tree": binomial_tree_gather},
    "scatter": {"naive": naive_scatter},
    "all_to_all": {"pairwise": pairwise_all_to_all},
}
# The names, in the cost model's order: the one table of algorithms (alphabeta.ALGORITHMS),
# which has a model for every algorithm here and nothing the runtime does not run.
CHOICES: dict[str, tuple[str, ...]] = {op: alphabeta.ALGORITHMS[op] for op in TABLE}


def get(op: str, algorithm: str) -> Callable:
    return TABLE[op][algorithm]


def default(op: str, nbytes: int, world_size: int) -> str:
    """The algorithm used when the caller names none: latency-optimal below SMALL_MAX_BYTES
    (recursive doubling, binomial tree), bandwidth-optimal above (the ring), as MPICH and NCCL
    switch by size; the first of CHOICES for the other collectives."""
    if op in ("all_reduce", "broadcast", "reduce") and nbytes < SMALL_MAX_BYTES:
        return "recursive_doubling" if op == "all_reduce" else "binomial_tree"
    return "ring" if op in ("all_reduce", "broadcast", "reduce") else CHOICES[op][0]

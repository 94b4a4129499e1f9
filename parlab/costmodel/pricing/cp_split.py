"""What context parallelism splits, and the rules of a CP layout: the heads (Ulysses), the chunks
of the sequence each rank holds (the naive split, or the load-balanced causal one: rank r holds
chunks r and 2 cp - 1 - r of 2 cp, Megatron-Core's context parallelism and Dubey et al. 2024, "The
Llama 3 Herd of Models", Section 3.3.2), one rank's K, V block, and the attention work each rank
does under a causal mask. The floor below ``context_parallel``'s byte formulas, which re-exports
every name here; the runtime (``parlab.parallel.context_parallel``) takes its split from here too.
Pure Python: no numpy, no torch."""

from __future__ import annotations

from parlab.costmodel.specs._check import boolean, non_negative, positive


def _heads(n_head: int, n_kv_head: int | None) -> tuple[int, int]:
    a = positive("n_head", n_head, integer=True)
    a_kv = a if n_kv_head is None else positive("n_kv_head", n_kv_head, integer=True)
    if a % a_kv:
        raise ValueError(f"n_kv_head={a_kv} must divide n_head={a} (each key/value head serves "
                         f"n_head/n_kv_head query heads)")
    return a, a_kv


def _shape(b: int, s: int, h: int, d: int, dtype_bytes: float) -> None:
    for name, v in (("micro_batch", b), ("seq_len", s), ("hidden", h), ("degree", d)):
        positive(name, v, integer=True)
    positive("dtype_bytes", dtype_bytes)


def check_ulysses(n_head: int, cp: int, n_kv_head: int | None = None) -> None:
    """DeepSpeed-Ulysses gives each of the cp ranks whole heads: cp must divide the heads (and the
    key/value heads). A ValueError naming the rule and the values otherwise."""
    a, a_kv = _heads(n_head, n_kv_head)
    positive("cp", cp, integer=True)
    for name, n in (("n_head", a), ("n_kv_head", a_kv)):
        if n % cp:
            raise ValueError(f"DeepSpeed-Ulysses needs {name} % cp == 0 (each rank attends with "
                             f"whole heads after the all-to-all): {name}={n}, cp={cp}")


def check_ring(seq_len: int, cp: int, balanced: bool = True, who: str = "ring attention") -> None:
    """Ring attention (and all-gather attention: ``who``) splits s into cp blocks (2 cp chunks when
    ``balanced``): they must divide it."""
    positive("seq_len", seq_len, integer=True)
    positive("cp", cp, integer=True)
    chunks = 2 * cp if balanced else cp
    if seq_len % chunks:
        raise ValueError(f"{who} needs seq_len % {'2*cp' if balanced else 'cp'} == 0 (the "
                         f"sequence is cut into {chunks} equal chunks): seq_len={seq_len}, cp={cp}")


def kv_block_bytes(micro_batch: int, seq_len: int, hidden: int, cp: int, n_head: int = 1,
                   n_kv_head: int | None = None, dtype_bytes: float = 2) -> float:
    """K and V of one rank's block of the sequence: 2 b (s/cp) h_kv B, h_kv = h a_kv / a."""
    _shape(micro_batch, seq_len, hidden, cp, dtype_bytes)
    a, a_kv = _heads(n_head, n_kv_head)
    return 2 * micro_batch * seq_len / cp * hidden * a_kv / a * dtype_bytes


def gathered_kv_bytes(micro_batch: int, seq_len: int, hidden: int, n_head: int = 1,
                      n_kv_head: int | None = None, dtype_bytes: float = 2) -> float:
    """The K, V of the whole sequence that all-gather attention holds on each rank while a layer
    attends, 2 b s h_kv B (and the dK, dV of the whole sequence beside them in its backward,
    before their reduce-scatter): a layer's working buffer, or kept until the backward when the
    gathered K, V are not gathered again (``allgather_bytes(regather=False)``)."""
    return kv_block_bytes(micro_batch, seq_len, hidden, 1, n_head, n_kv_head, dtype_bytes)


def rank_chunks(rank: int, cp: int, balanced: bool = True) -> tuple[int, ...]:
    """The sequence chunks rank ``rank`` holds: (rank,) of cp chunks (naive), or (rank,
    2 cp - 1 - rank) of 2 cp chunks (balanced: Megatron-Core, Llama 3 Section 3.3.2)."""
    positive("cp", cp, integer=True)
    boolean("balanced", balanced)
    if not 0 <= non_negative("rank", rank, integer=True) < cp:
        raise ValueError(f"rank must be in 0..{cp - 1} (cp={cp}), got {rank}")
    return (rank, 2 * cp - 1 - rank) if balanced else (rank,)


def rank_positions(seq_len: int, rank: int, cp: int, balanced: bool = True) -> list[int]:
    """The token positions rank ``rank`` holds, in order (its chunks side by side)."""
    check_ring(seq_len, cp, balanced)
    c = seq_len // (2 * cp if balanced else cp)
    return [k * c + t for k in rank_chunks(rank, cp, balanced) for t in range(c)]


def causal_pairs(q_chunks: tuple[int, ...], k_chunks: tuple[int, ...]) -> list[tuple[int, int, bool]]:
    """(i, j, diagonal) for each query chunk i and key chunk j a causal mask does not blank out
    entirely (chunk j <= chunk i), with ``diagonal`` where the mask cuts through the block: the
    blocks ring attention computes, in the order of ``q_chunks`` then ``k_chunks``."""
    return [(qi, kj, q == k) for qi, q in enumerate(q_chunks) for kj, k in enumerate(k_chunks) if k <= q]


def causal_work(seq_len: int, cp: int, balanced: bool = True) -> tuple[int, ...]:
    """Per rank, the attention scores (query, key pairs) it computes under a causal mask over the
    whole ring: each block (``causal_pairs``) of c x c scores, c = s / (number of chunks), the
    fully masked ones skipped. Naive: rank i computes (i+1) (s/cp)^2; balanced: (2 cp + 1) c^2
    on every rank."""
    check_ring(seq_len, cp, balanced)
    c = seq_len // (2 * cp if balanced else cp)
    mine = [rank_chunks(r, cp, balanced) for r in range(cp)]
    return tuple(sum(len(causal_pairs(mine[r], mine[j])) for j in range(cp)) * c * c
                 for r in range(cp))


def imbalance(work: tuple[float, ...]) -> float:
    """max / mean of the per-rank work (1.0: balanced): the slowest rank sets the step."""
    return max(work) / (sum(work) / len(work)) if sum(work) else 1.0

"""Checker for exercise 13 (ring attention): part 1, the online-softmax merge of two attention
blocks, against torch's own softmax attention (``scaled_dot_product_attention``), also where the
scores are large enough that exp() without the running max overflows; part 2, the forward of
causal ring attention on 2, 3 and 4 ranks (naive split: rank r holds the r-th block of the
sequence), against torch's causal attention at each rank's positions, sending exactly the K, V
bytes of ``parlab.costmodel.pricing.context_parallel.ring_attention_bytes`` (cp - 1 blocks per rank) by
point-to-point messages only.

The learner's functions: ``merge_blocks(m1, l1, acc1, m2, l2, acc2) -> (m, l, acc)`` on the
running max m and sum l per query row (b, a, n) and the accumulator acc (b, a, n, d) of two key
blocks; ``ring_attention_forward(q, k, v, comm)`` on this rank's q, k, v (b, a, s / cp, d).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from parlab.costmodel.pricing.context_parallel import ring_attention_bytes
from parlab.parallel.context_parallel import block_state, shard_sequence

from .ranks import launch_learner_code
from .stub import refuse_stubs

TOL = 1e-10  # float64: the merge and the ring reorder sums only
CPS = (2, 3, 4)
SHAPE = (2, 4, 12, 8)  # (b, a, s, d): s divisible by every cp in CPS
DTYPE_BYTES = 8  # float64


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=gen, dtype=torch.float64)


def _merged(merge_blocks, states) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, lsum, acc = states[0].max, states[0].sum, states[0].acc
    for s in states[1:]:
        out = merge_blocks(m, lsum, acc, s.max, s.sum, s.acc)
        if not (isinstance(out, tuple) and len(out) == 3):
            raise AssertionError(f"merge_blocks must return a tuple (m, l, acc), got {type(out).__name__}")
        m, lsum, acc = out
    return m, lsum, acc


def check_merge(merge_blocks, seed: int = 0) -> None:
    """Merge the states of 2 and of 3 key blocks (``block_state``: m, l, acc of each), left to right
    and in another order, and compare acc / l with softmax attention over all keys, and m + log l
    with the rows' log-sum-exp; with scores in the hundreds too (exp overflows without the max)."""
    refuse_stubs(merge_blocks=merge_blocks)
    cases = [(2, (5,), 1.0), (3, (2, 7), 1.0), (2, (3,), 300.0)]
    largest = 0.0  # the largest |score| checked
    for i, (blocks, cuts, scale) in enumerate(cases):
        gen = torch.Generator().manual_seed(seed + i)
        q = _randn(gen, 2, 3, 4, 8) * scale  # (b, a, n, d): 4 query rows
        k, v = _randn(gen, 2, 3, 10, 8), _randn(gen, 2, 3, 10, 8)  # (b, a, 10, d): 10 keys
        bounds = [0, *cuts, 10]
        states = [block_state(q, k[..., a:b, :], v[..., a:b, :], diagonal=False)
                  for a, b in zip(bounds, bounds[1:], strict=False)]
        want = F.scaled_dot_product_attention(q, k, v)  # (b, a, n, d): torch's own
        scores = q @ k.transpose(-2, -1) / 8**0.5  # (b, a, n, 10)
        lse = torch.logsumexp(scores, dim=-1)  # (b, a, n)
        largest = max(largest, float(scores.abs().max()))
        for order in (list(range(blocks)), list(range(blocks))[::-1]):
            m, lsum, acc = _merged(merge_blocks, [states[j] for j in order])
            label = f"{blocks} key blocks cut at {cuts}, merged in order {order}" + (
                f", scores up to {float(scores.abs().max()):.0f}" if scale > 1 else "")
            for name, got, shape in (("m", m, want.shape[:-1]), ("l", lsum, want.shape[:-1]),
                                     ("acc", acc, want.shape)):
                if tuple(got.shape) != tuple(shape):
                    raise AssertionError(f"{label}: {name} has shape {tuple(got.shape)}, expected {tuple(shape)}")
            out = acc / lsum.unsqueeze(-1)
            if not torch.isfinite(out).all():
                raise AssertionError(f"{label}: acc / l is not finite: rescale both blocks to the larger "
                                     f"max, m = max(m1, m2), before adding (exp(m_i - m) <= 1)")
            err = float((out - want).abs().max())
            if err > TOL:
                raise AssertionError(f"{label}: acc / l differs from softmax attention by {err:.1e} "
                                     f"(tolerance {TOL:.0e})")
            err = float((m + torch.log(lsum) - lse).abs().max())
            if err > TOL:
                raise AssertionError(f"{label}: m + log(l) differs from the rows' log-sum-exp by {err:.1e}")
    print("merge_blocks equals softmax attention over all the keys (2 and 3 blocks, any order,\n"
          f"scores up to {largest:.0f}), within {TOL:.0e}.")


def _run(comm, ring_attention_forward, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (_randn(gen, *SHAPE) for _ in range(3))  # (b, a, s, d), the same on every rank
    r, cp = comm.rank, comm.world_size
    mine = [shard_sequence(t, r, cp, balanced=False) for t in (q, k, v)]  # (b, a, s/cp, d)
    comm.reset_traffic()
    out = ring_attention_forward(*mine, comm)
    traffic = comm.traffic()
    want = shard_sequence(F.scaled_dot_product_attention(q, k, v, is_causal=True), r, cp, balanced=False)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(want.shape):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return {"problem": f"returned {got}, expected a tensor of shape {tuple(want.shape)}"}
    return {"error": float((out - want).abs().max()), "ops": sorted(set(traffic) - {"p2p"}),
            "sent": traffic["p2p"].bytes_sent if "p2p" in traffic else 0}


def check_ring(ring_attention_forward, seed: int = 0) -> None:
    """Run ``ring_attention_forward(q, k, v, comm)`` on 2, 3 and 4 ranks: each rank's output must
    equal causal softmax attention at its positions, and each rank must send exactly cp - 1 K, V
    blocks (the cost model's forward bytes) by send/recv only."""
    refuse_stubs(ring_attention_forward=ring_attention_forward)
    b, a, s, d = SHAPE
    for cp in CPS:
        per_rank = launch_learner_code(
            _run, cp, ring_attention_forward, seed, stub="ring_attention_forward is still a stub",
            hint="does every rank send to r+1 and receive from r-1 the same number of times?",
            timeout=60)
        want = ring_attention_bytes(b, s, a * d, cp, a, dtype_bytes=DTYPE_BYTES).forward
        for rank, res in enumerate(per_rank):
            case = f"{cp} ranks, rank {rank}"
            if "problem" in res:
                raise AssertionError(f"{case}: {res['problem']}")
            if res["error"] > TOL:
                raise AssertionError(f"{case}: the output differs from causal attention by "
                                     f"{res['error']:.1e} (tolerance {TOL:.0e})")
            if res["ops"]:
                raise AssertionError(f"{case}: use only send/recv, not the communicator's {', '.join(res['ops'])}")
            if res["sent"] != want:
                raise AssertionError(f"{case}: sent {res['sent']:,} bytes; ring attention sends cp - 1 = "
                                     f"{cp - 1} K, V blocks of {want // (cp - 1):,.0f} bytes = {want:,.0f}")
    print(f"ring attention equals causal attention on {', '.join(map(str, CPS))} ranks, within "
          f"{TOL:.0e};\nevery rank sent cp - 1 K, V blocks, as the cost model counts.")

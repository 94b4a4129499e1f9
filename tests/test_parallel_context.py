"""Context parallelism (``parlab.parallel.context_parallel``): ring attention, all-gather attention
(load-balanced and naive causal splits; all-gather with grouped-query K, V too) and
DeepSpeed-Ulysses equal serial causal attention, outputs and gradients, on 2 and 4 ranks of both
backends; every rank sends exactly the bytes
``parlab.costmodel.pricing.context_parallel`` predicts, and does the attention work it predicts."""

import math
import sys

import cloudpickle
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.comm import launch
from parlab.costmodel import get_model
from parlab.costmodel.pricing.context_parallel import (
    activation_bytes_per_gpu,
    allgather_bytes,
    allgather_cost,
    causal_pairs,
    causal_work,
    check_ulysses,
    comparison_rows,
    gathered_kv_bytes,
    imbalance,
    megatron_sp_bytes,
    rank_chunks,
    rank_positions,
    ring_attention_bytes,
    ring_overlap,
    ulysses_bytes,
)
from parlab.costmodel.pricing.memory import activation_bytes_per_layer
from parlab.parallel.context_parallel import (
    CPResult,
    CPSetting,
    GatherWork,
    allgather_attention,
    block_state,
    cp_worker,
    merge,
    repeat_kv,
    shard_sequence,
    unshard_sequence,
)
from parlab.parallel.model import causal_attention

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TOL = 1e-5  # float32: |parallel - serial| of outputs and gradients (measured: <= 1e-6)


# -- the pure model ------------------------------------------------------------------------------
@pytest.mark.parametrize("cp", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("balanced", [False, True])
def test_every_position_is_held_by_exactly_one_rank(cp, balanced):
    s = 4 * cp
    held = sorted(p for r in range(cp) for p in rank_positions(s, r, cp, balanced))
    assert held == list(range(s))
    assert rank_chunks(0, cp, balanced) == ((0, 2 * cp - 1) if balanced else (0,))


@pytest.mark.parametrize("cp", [2, 3, 4, 8])
def test_the_balanced_split_gives_every_rank_the_same_causal_work(cp):
    s = 4 * cp
    naive, balanced = causal_work(s, cp, False), causal_work(s, cp, True)
    assert naive == tuple((r + 1) * (s // cp) ** 2 for r in range(cp))  # rank r: r + 1 blocks
    assert balanced == (((2 * cp + 1) * (s // (2 * cp)) ** 2),) * cp
    assert imbalance(balanced) == 1.0 and imbalance(naive) == pytest.approx(2 * cp / (cp + 1))
    # every unmasked (query, key) pair is computed exactly once over the ranks
    for bal in (False, True):
        c = s // (2 * cp if bal else cp)
        pairs = [(q, k) for r in range(cp) for j in range(cp)
                 for q, k, _ in causal_pairs(rank_chunks(r, cp, bal), rank_chunks(j, cp, bal))]
        diag = sum(1 for r in range(cp) for j in range(cp)
                   for _, _, d in causal_pairs(rank_chunks(r, cp, bal), rank_chunks(j, cp, bal)) if d)
        useful = len(pairs) * c * c - diag * c * (c - 1) // 2
        assert useful == s * (s + 1) // 2


def test_the_byte_formulas_by_hand():
    b, s, h, a, cp, B = 2, 1024, 512, 8, 4, 2
    kv = 2 * b * (s // cp) * h * B
    ring = ring_attention_bytes(b, s, h, cp, a, dtype_bytes=B)
    assert (ring.forward, ring.backward) == (3 * kv, 3 * kv + 4 * kv)
    uly = ulysses_bytes(b, s, h, cp, a, dtype_bytes=B)
    assert uly.forward == uly.backward == 4 * b * s * h * B * (cp - 1) / cp**2  # Jacobs et al.: 4Nh/P
    sp = megatron_sp_bytes(b, s, h, cp, B)
    assert sp.forward == sp.backward == 4 * (cp - 1) / cp * b * s * h * B
    gqa = ring_attention_bytes(b, s, h, cp, a, n_kv_head=2, dtype_bytes=B)
    assert gqa.forward == ring.forward / 4
    # all-gather (Llama 3 Sec. 3.3.2, TransformerEngine's AttnFuncWithCPAndKVAllGather): the
    # forward gathers (cp-1)/cp of the whole sequence's K, V; the backward gathers them again and
    # reduce-scatters dK, dV of the same size; kept K, V (regather=False) save the second gather
    whole = 2 * b * s * h * B
    ag = allgather_bytes(b, s, h, cp, a, dtype_bytes=B)
    assert (ag.forward, ag.backward) == ((cp - 1) / cp * whole, 2 * (cp - 1) / cp * whole)
    assert (ag.messages_forward, ag.messages_backward) == (cp - 1, 2 * (cp - 1))
    kept = allgather_bytes(b, s, h, cp, a, dtype_bytes=B, regather=False)
    assert (kept.backward, kept.messages_backward) == (ag.forward, cp - 1)
    assert allgather_bytes(b, s, h, cp, a, n_kv_head=2, dtype_bytes=B).total == ag.total / 4  # GQA: a_kv / a
    assert gathered_kv_bytes(b, s, h, a, 2, B) == whole / 4
    assert allgather_bytes(b, s, h, 1, a).total == 0


def test_ulysses_needs_cp_to_divide_the_heads_in_one_line():
    with pytest.raises(ValueError, match=r"n_head % cp == 0 .*n_head=6, cp=4"):
        check_ulysses(6, 4)
    with pytest.raises(ValueError, match="n_head=6, cp=4"):
        CPSetting("ulysses", cp=4, heads=6)
    with pytest.raises(ValueError, match=r"seq_len % 2\*cp == 0"):
        CPSetting("ring", cp=4, seq_len=12)
    rows, _ = comparison_rows(get_model("llama-7b"), 1, 64)
    assert "n_head % cp == 0" in rows[1][3]  # Ulysses at cp 64 > 32 heads: says why
    assert rows[3][0].startswith("all-gather") and float(rows[3][3]) > 0  # all-gather runs at any cp


def test_ring_attention_refuses_mismatched_or_unsplittable_blocks_before_communicating():
    from parlab.parallel.context_parallel import ring_attention

    x = torch.zeros(1, 2, 4, 3)
    with pytest.raises(ValueError, match=r"share one shape .*\(1, 2, 4, 3\), \(1, 2, 2, 3\)"):
        ring_attention(x, x[..., :2, :], x, comm=None)
    with pytest.raises(ValueError, match="n = s / cp must be even, got n=3"):
        ring_attention(x[..., :3, :], x[..., :3, :], x[..., :3, :], comm=None, balanced=True)


@pytest.mark.parametrize(("q", "match"), [
    (torch.zeros(1, 2, 4, 3, dtype=torch.int64), r"one floating-point dtype .*torch.int64"),
    (torch.zeros(1, 2, 0, 3), r"non-empty: .*\(1, 2, 0, 3\)"),
])
def test_attention_refuses_integer_or_empty_blocks_in_one_line(q, match):
    from parlab.parallel.context_parallel import ring_attention, ulysses_attention

    for attention in (ring_attention, ulysses_attention):
        with pytest.raises((TypeError, ValueError), match=match):
            attention(q, q, q, comm=None)


def test_unshard_refuses_unequal_or_missing_parts_naming_the_shapes():
    with pytest.raises(ValueError, match=r"share one shape; got \(1, 2, 1\), \(1, 4, 1\)"):
        unshard_sequence([torch.zeros(1, 2, 1), torch.zeros(1, 4, 1)])
    with pytest.raises(ValueError, match="one tensor per rank"):
        unshard_sequence([])


def test_allgather_attention_refuses_heads_that_do_not_group_before_communicating():
    q, kv = torch.zeros(1, 4, 4, 3), torch.zeros(1, 3, 4, 3)
    with pytest.raises(ValueError, match=r"key/value heads must divide the query heads .*a=4, a_kv=3"):
        allgather_attention(q, kv, kv, comm=None)
    with pytest.raises(ValueError, match=r"\(b, a_kv, n, d\), a_kv dividing a\), got \(1, 4, 4, 3\), \(1, 2, 2, 3\)"):
        allgather_attention(q, kv[:, :2, :2], kv[:, :2, :2], comm=None)
    with pytest.raises(ValueError, match="n = s / cp must be even, got n=3"):
        allgather_attention(q[..., :3, :], q[..., :3, :], q[..., :3, :], comm=None)
    with pytest.raises(ValueError, match=r"share one shape .*\(1, 4, 4, 3\), \(1, 2, 4, 3\)"):
        from parlab.parallel.context_parallel import ring_attention

        ring_attention(q, kv[:, :2], kv[:, :2], comm=None)  # the ring takes K, V of every head
    with pytest.raises(ValueError, match="run with method 'all-gather' here; ring takes K, V of every head"):
        CPSetting("ring", kv_heads=2)


def _allgather_variants(comm) -> dict[str, object]:
    """All-gather attention on 2 ranks: ranks that disagree on the layout raise
    CollectiveMismatch naming it; kept K, V (regather=False) give serial attention and the
    predicted bytes."""
    from parlab.comm import CollectiveMismatch

    one = comm.rank == 1
    raised = {}
    for field, (kv_heads, balanced) in {"balanced": (2, not one), "K/V heads": (1 if one else 2, True)}.items():
        q, kv = torch.randn(1, 4, 4, 3), torch.randn(1, kv_heads, 4, 3)
        try:
            allgather_attention(q, kv, kv, comm, balanced=balanced)
            raised[field] = "nothing"
        except CollectiveMismatch as err:
            raised[field] = str(err)
    setting = CPSetting("all-gather", cp=2, kv_heads=2, seed=5)
    q, k, v, dout = setting.inputs()
    full = [t.clone().requires_grad_(True) for t in (q, k, v)]
    causal_attention(full[0], repeat_kv(full[1], 2), repeat_kv(full[2], 2)).backward(dout)
    mine = [shard_sequence(t, comm.rank, 2).requires_grad_(True) for t in (q, k, v)]
    work = GatherWork()
    out = allgather_attention(*mine, comm, regather=False, work=work)
    out.backward(shard_sequence(dout, comm.rank, 2))
    raised["error"] = max((p.grad - shard_sequence(w.grad, comm.rank, 2)).abs().max().item()
                          for p, w in zip(mine, full, strict=True))
    raised["sent"] = (work.forward, work.backward)
    return raised


def test_allgather_attention_checks_the_layout_and_may_keep_the_gathered_kv():
    want = allgather_bytes(2, 16, 16, 2, 4, 2, dtype_bytes=4, regather=False)
    for rank in launch(_allgather_variants, 2):
        assert rank["balanced"].startswith("allgather_attention: the ranks disagree on balanced (rank 0 True, "
                                           "rank 1 False)"), rank["balanced"]
        assert "K/V heads (rank 0 2, rank 1 1)" in rank["K/V heads"]
        assert rank["error"] <= TOL
        assert rank["sent"] == ((want.forward, want.messages_forward), (want.backward, want.messages_backward))


def _disagreeing(comm) -> dict[str, str]:
    """Ring attention on 2 ranks, each call with one field different on rank 1: the error each
    rank raised (every rank must raise, and the run goes on: the check is a whole collective)."""
    from parlab.comm import CollectiveMismatch
    from parlab.parallel.context_parallel import ring_attention

    one = comm.rank == 1
    cases = {  # field -> (q shape, dtype, balanced) on this rank
        "balanced": ((1, 2, 4, 3), torch.float32, not one),
        "positions per rank": ((1, 2, 6 if one else 4, 3), torch.float32, True),
        "heads": ((1, 3 if one else 2, 4, 3), torch.float32, True),
        "head dim": ((1, 2, 4, 5 if one else 3), torch.float32, True),
        "dtype": ((1, 2, 4, 3), torch.float64 if one else torch.float32, True),
    }
    raised = {}
    for field, (shape, dtype, balanced) in cases.items():
        q = torch.randn(shape, dtype=dtype)
        try:
            ring_attention(q, q, q, comm, balanced=balanced)
            raised[field] = "nothing"
        except CollectiveMismatch as err:
            raised[field] = str(err)
    q = torch.randn(1, 2, 4, 3)
    raised["agreeing"] = tuple(ring_attention(q, q, q, comm).shape)  # the same ranks work on
    return raised


def test_ring_attention_ranks_that_disagree_on_the_layout_are_named_not_wrong():
    """F4/F5: a rank with another balanced, seq len, heads, head dim or dtype raises
    CollectiveMismatch naming the field and each rank's value, on every rank, as Ulysses does."""
    for rank in launch(_disagreeing, 2):
        assert rank.pop("agreeing") == (1, 2, 4, 3)
        assert rank["balanced"].startswith("ring_attention: the ranks disagree on balanced (rank 0 "
                                           "True, rank 1 False)"), rank["balanced"]
        assert "positions per rank (rank 0 4, rank 1 6)" in rank["positions per rank"]
        assert "heads (rank 0 2, rank 1 3)" in rank["heads"]
        assert "head dim (rank 0 3, rank 1 5)" in rank["head dim"]
        assert "dtype (rank 0 float32, rank 1 float64)" in rank["dtype"]


def test_activation_memory_is_divided_by_the_degree_for_all_three():
    m = get_model("llama-7b")
    whole = activation_bytes_per_layer(m, 1)
    for method in ("ring", "ulysses", "megatron-sp", "all-gather"):
        assert activation_bytes_per_gpu(method, m, 1, 8) == pytest.approx(whole / 8)
    # all-gather attention that keeps the gathered K, V holds the other 7 ranks' too
    held = activation_bytes_per_gpu("all-gather", m, 1, 8, regather=False) - whole / 8
    assert held == pytest.approx(7 / 8 * gathered_kv_bytes(1, m.seq_len, m.hidden, m.heads))


def test_the_all_gather_is_exposed_and_small_beside_long_attention():
    """Llama 3 (Sec. 3.3.2): the gather grows as s, the attention as s^2, and GQA shrinks K, V;
    the model leaves the gather exposed (TransformerEngine: "KV all-gather ... is exposed")."""
    link = dict(flops_per_s=400e12, alpha=5e-6, bandwidth=50e9)
    long = allgather_cost(1, 131072, 16384, 16, **link, n_head=128, n_kv_head=8)  # Llama 3 405B's, 128K
    short = allgather_cost(1, 8192, 16384, 16, **link, n_head=128, n_kv_head=8)
    assert long.exposed_s == long.comm_s > 0
    assert long.share < 0.15 < 0.5 < short.share
    mha = allgather_cost(1, 131072, 16384, 16, **link, n_head=128)
    assert mha.comm_s > 15 * long.comm_s and mha.compute_s == long.compute_s


def test_ring_overlap_hides_the_transfer_only_for_large_blocks():
    fast = dict(flops_per_s=400e12, alpha=5e-6, bandwidth=50e9)  # one GPU, one link
    assert not ring_overlap(1, 8192, 4096, 8, **fast).hidden  # 1k-token blocks: exposed
    assert ring_overlap(1, 131072, 4096, 8, **fast).hidden  # 16k-token blocks: hidden


# -- blockwise attention, one process ------------------------------------------------------------
def test_merging_block_states_equals_softmax_attention_over_all_keys():
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, 8, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    ref = causal_attention(q, k, v)[..., 4:, :]  # rows 4..7 against keys 0..7
    first = block_state(q[..., 4:, :], k[..., :4, :], v[..., :4, :], diagonal=False)
    second = block_state(q[..., 4:, :], k[..., 4:, :], v[..., 4:, :], diagonal=True)
    for state in (merge(first, second), merge(second, first), merge(None, merge(first, second))):
        assert (state.output() - ref).abs().max() < 1e-12
    lse = torch.logsumexp((q[..., 4:, :] @ k.transpose(-2, -1) / math.sqrt(4)).masked_fill(
        torch.ones(4, 8, dtype=torch.bool).triu(5), float("-inf")), dim=-1)
    assert (merge(first, second).lse() - lse).abs().max() < 1e-12


@settings(max_examples=20)
@given(cuts=st.lists(st.integers(1, 11), min_size=1, max_size=4, unique=True), seed=st.integers(0, 99),
       reverse=st.booleans())
def test_any_split_of_the_keys_merged_in_any_order_is_softmax_attention(cuts, seed, reverse):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 2, 3, 4, generator=gen, dtype=torch.float64) * 10  # (b, a, n, d)
    k, v = (torch.randn(1, 2, 12, 4, generator=gen, dtype=torch.float64) for _ in range(2))
    bounds = [0, *sorted(cuts), 12]
    states = [block_state(q, k[..., a:b, :], v[..., a:b, :], diagonal=False)
              for a, b in zip(bounds, bounds[1:], strict=False)]
    state = None
    for s in states[::-1] if reverse else states:
        state = merge(state, s)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v)  # torch's own
    assert (state.output() - want).abs().max() < 1e-12


@pytest.mark.parametrize("balanced", [False, True])
def test_shard_and_unshard_are_inverse(balanced):
    x = torch.arange(2 * 16 * 3).view(2, 16, 3).transpose(0, 1)  # (16, 2, 3): sequence on dim 0
    parts = [shard_sequence(x, r, 4, balanced, dim=0) for r in range(4)]
    assert torch.equal(unshard_sequence(parts, balanced, dim=0), x)


# -- live runs -----------------------------------------------------------------------------------
SETTINGS = [("ring", True, None), ("ring", False, None), ("ulysses", False, None), ("all-gather", True, None),
            ("all-gather", False, None), ("all-gather", True, 2), ("all-gather", False, 1)]  # kv_heads: GQA, MQA


@pytest.mark.parametrize("backend", ["local", "torch"])
@pytest.mark.parametrize("cp", [2, 4])
def test_context_parallel_attention_equals_serial_and_sends_the_predicted_bytes(backend, cp):
    for method, balanced, kv_heads in SETTINGS:
        setting = CPSetting(method, cp=cp, balanced=balanced, kv_heads=kv_heads)
        result = CPResult(setting, backend, launch(cp_worker, cp, setting, backend=backend))
        assert result.max_error <= TOL, (method, balanced, [r.errors for r in result.ranks])
        p = result.predicted
        counted = backend == "local" or method == "ring"  # torch's native collectives: nominal, 1 call
        for r in result.ranks:
            assert r.sent["forward"][0] == p.forward and r.sent["backward"][0] == p.backward, (method, r.rank)
            if counted:
                assert (r.sent["forward"][1], r.sent["backward"][1]) == (p.messages_forward,
                                                                        p.messages_backward)
        if method != "ulysses":
            assert result.work() == result.predicted_work() == causal_work(16, cp, balanced)
        if method == "ring":
            rows, _ = result.work_rows()
            assert [row[1] for row in rows] == [row[2] for row in rows] == list(result.work())

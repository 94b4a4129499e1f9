"""The alpha-beta model: the shapes of its formulas, not just their values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parlab.costmodel import alphabeta as ab

ALPHA, BW = 5e-6, 25e9  # 5 us per message, 25 GB/s


def test_a_point_to_point_message_costs_alpha_plus_n_beta():
    t = ab.time("p2p", "direct", 2, 1e6, ALPHA, BW)
    assert t.seconds == pytest.approx(ALPHA + 1e6 / BW)


@given(p=st.integers(2, 1024))
@settings(max_examples=30, deadline=None)
def test_ring_all_reduce_moves_less_than_twice_the_data_whatever_the_rank_count(p):
    t = ab.time("all_reduce", "ring", p, 1e9, ALPHA, BW)
    assert t.volume == pytest.approx(2 * (p - 1) / p * 1e9) and t.volume < 2e9
    assert t.steps == 2 * (p - 1)  # but its latency grows linearly


@given(k=st.integers(1, 10))
@settings(max_examples=10, deadline=None)
def test_recursive_doubling_takes_log2_p_steps_of_the_whole_message(k):
    p = 2**k
    t = ab.time("all_reduce", "recursive_doubling", p, 1e6, ALPHA, BW)
    assert t.steps == k and t.volume == k * 1e6


def test_doubling_wins_small_messages_ring_wins_large_ones_and_the_crossover_is_where_they_tie():
    p = 16
    algos = ("ring", "recursive_doubling", "naive")
    small = [t for t in ab.compare("all_reduce", p, 1e3, ALPHA, BW) if t.algorithm in algos]
    large = [t for t in ab.compare("all_reduce", p, 1e9, ALPHA, BW) if t.algorithm in algos]
    assert small[0].algorithm == "recursive_doubling" and small[0].bound == "latency"
    assert large[0].algorithm == "ring" and large[0].bound == "bandwidth"
    x = ab.crossover("all_reduce", "recursive_doubling", "ring", p, ALPHA, BW)
    rd, ring = (ab.time("all_reduce", a, p, x, ALPHA, BW) for a in ("recursive_doubling", "ring"))
    assert rd.seconds == pytest.approx(ring.seconds)


@given(k=st.integers(2, 12))
@settings(max_examples=11, deadline=None)
def test_ring_vs_tree_latency_grows_like_p_against_log_p_for_the_same_bandwidth(k):
    """The interview answer: NCCL's double binary tree takes 2 log2(p) steps where the ring
    takes 2(p-1), while both move about 2n bytes per rank (Sanders et al. 2009)."""
    p, n = 2**k, 1e9
    tree, ring = (ab.time("all_reduce", a, p, n, ALPHA, BW) for a in ("double_binary_tree", "ring"))
    assert tree.steps == 2 * k and ring.steps == 2 * (p - 1)
    assert tree.volume == pytest.approx(2 * n) and ring.volume == pytest.approx(2 * (p - 1) / p * n)
    x = ab.crossover("all_reduce", "double_binary_tree", "ring", p, ALPHA, BW)
    assert x == pytest.approx((2 * (p - 1) - 2 * k) * ALPHA * BW / (2 - 2 * (p - 1) / p))


@pytest.mark.parametrize("p", [2, 3, 5, 8, 64])
def test_a_ring_broadcast_is_a_pipelined_chain_that_moves_the_buffer_once_per_link(p):
    chain = ab.time("broadcast", "ring", p, 4 * 2**30, ALPHA, BW)
    assert chain.steps == p - 1 and chain.volume == 4 * 2**30
    binomial = ab.time("broadcast", "binomial_tree", p, 4 * 2**30, ALPHA, BW)
    assert binomial.volume == math.ceil(math.log2(p)) * 4 * 2**30  # the root sends it log2 p times
    assert ab.compare("broadcast", p, 4 * 2**30, ALPHA, BW)[0].algorithm == "ring"


def test_naive_all_reduce_is_never_better_than_the_ring_for_large_messages():
    for p in (2, 4, 8, 64):
        naive = ab.time("all_reduce", "naive", p, 1e9, ALPHA, BW)
        ring = ab.time("all_reduce", "ring", p, 1e9, ALPHA, BW)
        assert naive.seconds >= ring.seconds
        assert naive.volume / ring.volume == pytest.approx(p)  # the root's link carries p times more


def test_non_power_of_two_recursive_doubling_pays_two_extra_steps():
    assert ab.shape("all_reduce", "recursive_doubling", 6, 1.0)[0] == math.floor(math.log2(6)) + 2


def test_bus_bandwidth_follows_nccl_tests():
    assert ab.bus_bandwidth("all_reduce", 4, 1e9, 1.0) == pytest.approx(1.5e9)
    assert ab.bus_bandwidth("all_gather", 4, 1e9, 1.0) == pytest.approx(0.75e9)
    assert ab.bus_bandwidth("broadcast", 4, 1e9, 1.0) == pytest.approx(1e9)


def test_explain_names_every_term():
    text = ab.time("all_reduce", "ring", 4, 64e6, 30e-6, 5e9).explain()
    assert "6 steps x alpha" in text and "96,000,000 B x beta" in text and "bandwidth-bound" in text
    assert "µs" in text and " us " not in text


@pytest.mark.parametrize("call, message", [
    (lambda: ab.time("all_reduce", "butterfly", 4, 1, ALPHA, BW),
     r"no model for all_reduce with algorithm 'butterfly'; allowed: ring, double_binary_tree, "
     r"recursive_doubling, naive"),
    (lambda: ab.time("reduce_scatter", "binomial_tree", 4, 1, ALPHA, BW),
     r"no model for reduce_scatter with algorithm 'binomial_tree'; allowed: ring, naive"),
    (lambda: ab.time("scan", "ring", 4, 1, ALPHA, BW), r"unknown collective 'scan'; allowed: p2p"),
    (lambda: ab.time("all_reduce", "ring", 0, 1, ALPHA, BW), r"ranks must be a positive integer, got 0"),
    (lambda: ab.time("all_reduce", "ring", 4, 1, ALPHA, 0), r"bandwidth must be a positive number of bytes/s, got 0"),
    (lambda: ab.bus_bandwidth("scan", 4, 1, 1), r"unknown collective 'scan'; allowed: all_reduce"),
])
def test_bad_input_names_the_rule(call, message):
    with pytest.raises(ValueError, match=message):
        call()

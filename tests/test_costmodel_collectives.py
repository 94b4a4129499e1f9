"""The alpha-beta costs of collectives: ring and tree step counts (Thakur et al. 2005) and the
nccl-tests bus-bandwidth factors."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parlab.costmodel import bus_factor, collective_time, ring_time, tree_time


@pytest.mark.parametrize("op, n, factor", [
    ("all_reduce", 8, 2 * 7 / 8), ("all_gather", 8, 7 / 8), ("reduce_scatter", 4, 3 / 4),
    ("broadcast", 8, 1.0), ("p2p", 2, 1.0),
])
def test_nccl_tests_bus_bandwidth_factors(op, n, factor):
    assert bus_factor(op, n) == factor


def test_ring_all_reduce_is_2_n_minus_1_steps_and_2_n_minus_1_over_n_of_the_bytes():
    S, B, a, n = 1e9, 100e9, 5e-6, 8
    assert ring_time("all_reduce", S, n, B, a) == pytest.approx(2 * 7 * a + 2 * 7 / 8 * S / B)
    assert ring_time("all_gather", S, n, B, a) == pytest.approx(7 * a + 7 / 8 * S / B)


def test_all_reduce_costs_a_reduce_scatter_plus_an_all_gather():
    args = (1e9, 16, 50e9, 3e-6)
    assert ring_time("all_reduce", *args) == pytest.approx(
        ring_time("reduce_scatter", *args) + ring_time("all_gather", *args))


def test_tree_wins_small_messages_ring_wins_large_ones():
    n, B, a = 8, 25e9, 5e-6
    small, large = 1e3, 1e10
    assert tree_time("all_reduce", small, n, B, a) < ring_time("all_reduce", small, n, B, a)
    assert ring_time("all_reduce", large, n, B, a) < tree_time("all_reduce", large, n, B, a)
    for S in (small, large):
        assert collective_time("all_reduce", S, n, B, a) == min(
            tree_time("all_reduce", S, n, B, a), ring_time("all_reduce", S, n, B, a))


def test_one_rank_or_no_bytes_costs_nothing():
    assert ring_time("all_reduce", 1e9, 1, 1e9, 1e-6) == 0
    assert ring_time("all_gather", 0, 8, 1e9, 1e-6) == 0


def test_unknown_collective_or_algorithm_is_named():
    with pytest.raises(ValueError, match="unknown collective 'gossip'"):
        bus_factor("gossip", 4)
    with pytest.raises(ValueError, match="unknown algorithm 'butterfly'"):
        collective_time("all_reduce", 1, 4, 1, 1, "butterfly")
    with pytest.raises(ValueError, match="no tree algorithm for 'all_gather'"):
        tree_time("all_gather", 1, 4, 1, 1)


@given(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]), st.integers(2, 4096),
       st.floats(1, 1e12), st.floats(1.01, 10))
def test_more_bytes_never_take_less_time(op, n, nbytes, more):
    B, a = 25e9, 5e-6
    assert collective_time(op, nbytes * more, n, B, a) >= collective_time(op, nbytes, n, B, a)


@given(st.integers(2, 4096), st.floats(1e3, 1e12))
def test_ring_bus_bandwidth_never_exceeds_the_link(n, nbytes):
    B = 25e9
    t = ring_time("all_reduce", nbytes, n, B, 0.0)
    assert nbytes / t * bus_factor("all_reduce", n) == pytest.approx(B)

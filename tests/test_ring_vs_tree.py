"""Ring vs double binary tree (issue 19 item 6): the crossover is computed once, it is where the two
alpha-beta times meet, and a tree below the ring's bandwidth moves it from ~p^2 to ~p."""

import pytest

from parlab.costmodel import alphabeta, get_link
from parlab.costmodel.pricing.ring_vs_tree import MEASURED_TREE_SHARE, ring_tree_crossover


@pytest.mark.parametrize("ranks", [8, 64, 256, 1024])
@pytest.mark.parametrize("share", [1.0, MEASURED_TREE_SHARE])
def test_the_two_times_meet_at_the_crossover(ranks, share):
    c = ring_tree_crossover(ranks, "ib-hdr", share)
    ring, tree = c.times(c.bytes)
    assert ring == pytest.approx(tree, rel=1e-9)
    below, above = c.times(0.5 * c.bytes), c.times(2 * c.bytes)
    assert below[1] < below[0] and above[1] > above[0]


def test_the_ideal_tree_is_alphabeta_s_crossover_and_grows_like_p_squared():
    hdr = get_link("ib-hdr")
    for p in (8, 256, 1024):
        assert ring_tree_crossover(p).bytes == pytest.approx(
            alphabeta.crossover("all_reduce", "double_binary_tree", "ring", p, hdr.latency, hdr.bandwidth))
    ideal = [ring_tree_crossover(p).bytes for p in (256, 1024)]
    assert 12 < ideal[1] / ideal[0] < 20  # ~ (1024/256)^2 = 16
    assert ideal[0] > 2**30  # gigabytes at a few hundred ranks: chapter 02's point


def test_a_slower_tree_crosses_orders_of_magnitude_earlier():
    assert 0.7 < MEASURED_TREE_SHARE < 0.9  # NVIDIA/nccl#1368: 150 / 190 GB/s
    for p in (256, 1024):
        slow, ideal = ring_tree_crossover(p, tree_share=MEASURED_TREE_SHARE), ring_tree_crossover(p)
        assert slow.bytes < ideal.bytes / 50
    ratio = ring_tree_crossover(1024, tree_share=MEASURED_TREE_SHARE).bytes / \
        ring_tree_crossover(256, tree_share=MEASURED_TREE_SHARE).bytes
    assert 3 < ratio < 5  # ~ p


def test_bad_share_names_the_rule():
    with pytest.raises(ValueError, match="tree_share is the tree's bandwidth"):
        ring_tree_crossover(8, tree_share=1.5)

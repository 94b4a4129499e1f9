"""The cost model at any size: closed forms instead of per-rank loops, one stated bound on the GPU
count (``MAX_GPUS``) with one clear error above it, and the search at a million GPUs in seconds."""

import time

import pytest

from parlab import layout
from parlab.cli import main
from parlab.costmodel import (
    MAX_GPUS,
    Plan,
    alphabeta,
    estimate,
    factorizations,
    make_cluster,
    search,
    trees,
)


def test_the_trees_closed_forms_are_what_the_built_trees_give():
    for p in [*range(1, 130), 255, 256, 257]:
        both = trees.double_binary_tree(p)
        per_rank = trees.all_reduce_traffic(p, 1.0)
        assert trees.depth_of(p) == max(trees.depth(t) for t in both), p
        assert trees.busiest(p) == (max(max(s, r) for s, r, _ in per_rank), max(red for *_, red in per_rank)), p
        assert [trees.nodes(p, r) for r in range(p)] == list(zip(*both, strict=True)), p


def _span_by_counting(size, stride, world, g):
    """Every group, every member counted: the reference for layout's closed form."""
    worst_k, worst_nodes = size, 1
    for start in range(0, world, size * stride):
        for offset in range(stride):
            nodes = {}
            for i in range(size):
                node = (start + offset + i * stride) // g
                nodes[node] = nodes.get(node, 0) + 1
            worst_k, worst_nodes = min(worst_k, min(nodes.values())), max(worst_nodes, len(nodes))
    return worst_k, worst_nodes


@pytest.mark.parametrize("g", [3, 5, 6, 8, 12])
def test_misaligned_groups_sit_on_nodes_as_counting_every_rank_says(g):
    for tp in range(1, 10):
        for dp in range(1, 10):
            for pp in (1, 2, 3):
                for size, stride in ((tp, 1), (dp, tp), (pp, tp * dp)):
                    world = tp * dp * pp
                    want = (1, 1) if size == 1 else _span_by_counting(size, stride, world, g)
                    assert layout._span.__wrapped__(size, stride, world, g) == want, (size, stride, world, g)


def test_huge_worlds_use_exact_integer_logarithms():
    p = (1 << 60) + 1  # a float log2 rounds this down to 60
    assert alphabeta.shape("all_reduce", "double_binary_tree", p, 1.0) == (122.0, 2.0, 1.0)
    assert alphabeta.shape("broadcast", "binomial_tree", p, 1.0)[0] == 61.0
    assert alphabeta.traffic("all_reduce", "double_binary_tree", p, 1.0, rank=2) == (2.0, 2.0)  # O(log p)
    assert alphabeta.traffic("all_reduce", "double_binary_tree", p, 1.0, rank=p - 1) == (1.5, 1.5)


def test_an_estimate_over_eight_million_gpus_is_instant():
    t0 = time.process_time()
    est = estimate("llama-7b", make_cluster("dgx-a100", 8_000_000), Plan(dp=8_000_000))
    assert est.step_time > 0
    assert time.process_time() - t0 < 2.0  # per-rank trees took over 100 s


def test_the_search_over_a_million_gpus_takes_seconds():
    t0 = time.process_time()
    result = search("llama-7b", make_cluster("dgx-a100", 1 << 20), 1 << 20)
    assert result.fitting > 5000 and result.best().plan.n_gpus == 1 << 20
    assert time.process_time() - t0 < 15.0  # about 2 s of CPU; the per-rank trees took about a minute


def test_more_gpus_than_the_stated_bound_is_one_clear_error(capsys):
    too_many = MAX_GPUS + 8
    for make in (lambda: make_cluster("dgx-a100", too_many), lambda: next(factorizations(too_many))):
        with pytest.raises(ValueError, match=f"n_gpus must be at most {MAX_GPUS:,}.*got {too_many:,}"):
            make()
    assert make_cluster("dgx-a100", MAX_GPUS).n_gpus == MAX_GPUS
    for argv in (["search", "--model", "7B", "--gpus", str(8 * 10**20)],
                 ["estimate", "--gpus", str(8 * 10**20), "--dp", str(8 * 10**20)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"at most {MAX_GPUS:,}" in err

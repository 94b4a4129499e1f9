"""Chapter 02's dashboard and pictures, without a kernel: set a knob, read the output."""

from __future__ import annotations

import re

import pytest

from parlab.comm.algorithms import block_bounds, ring_schedule
from parlab.costmodel import alphabeta
from parlab.widgets.comm import CommTimeDashboard, comm_times


def text(dash) -> str:
    return re.sub(r"<[^>]+>", " ", dash.output.value)


def test_small_messages_are_latency_bound_and_large_ones_bandwidth_bound():
    dash = CommTimeDashboard()
    dash.controls["size"].value = 2**10
    assert "Fastest here:  tree" in text(dash) and "latency-bound" in text(dash)
    dash.controls["size"].value = 2**30
    assert "Fastest here:  ring" in text(dash) and "bandwidth-bound" in text(dash)
    assert dash.image.value  # the figure was drawn


def test_sliders_update_once_on_release():
    dash = CommTimeDashboard()
    assert all(getattr(c, "continuous_update", False) is False for c in dash.controls.values())


def test_an_algorithm_the_collective_lacks_is_a_message_not_a_traceback():
    dash = CommTimeDashboard(op="broadcast")
    dash.controls["algorithm"].value = "ring"
    assert dash.last_error == "no model for broadcast with algorithm 'ring'; allowed: tree, naive"
    assert "allowed: tree, naive" in dash.error.value  # shown in the dashboard
    dash.controls["algorithm"].value = "tree"
    assert dash.error.value == "" and dash.last_error is None


def test_the_dashboard_shows_the_models_numbers():
    r = comm_times("all_reduce", 2**20, 8, 25, 5, "ring")
    assert r.chosen.seconds == pytest.approx(alphabeta.time("all_reduce", "ring", 8, 2**20, 5e-6, 25e9).seconds)
    assert r.crossover == pytest.approx(alphabeta.crossover("all_reduce", "tree", "ring", 8, 5e-6, 25e9))


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_the_ring_schedule_moves_every_block_once_per_phase_and_ends_complete(n):
    from parlab.viz.comm import ring_states

    steps = ring_schedule(n)
    assert len(steps) == 2 * (n - 1)
    for _, moves in steps:  # every rank sends one block to its right neighbour in every step
        assert sorted(src for src, _, _ in moves) == list(range(n))
        assert all(dst == (src + 1) % n for src, dst, _ in moves)
    final = ring_states(n)[-1][1]
    assert all(cell == frozenset(range(n)) for row in final for cell in row)
    assert block_bounds(10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]

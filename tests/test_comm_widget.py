"""Chapter 02's dashboard and pictures, without a kernel: set a knob, read the output."""

from __future__ import annotations

import re

import pytest

from parlab.comm.algorithms import block_bounds, ring_schedule
from parlab.costmodel import alphabeta
from parlab.widgets.comm import OPS, CommTimeDashboard, algorithm_options, comm_times


def text(dash) -> str:
    return re.sub(r"<[^>]+>", " ", dash.output.value)


def test_small_messages_are_latency_bound_and_large_ones_bandwidth_bound():
    dash = CommTimeDashboard()
    dash.controls["size"].value = 2**10
    assert "Fastest here:  recursive_doubling" in text(dash) and "latency-bound" in text(dash)
    dash.controls["size"].value = 2**30
    assert "Fastest here:  ring" in text(dash) and "bandwidth-bound" in text(dash)
    assert dash.image.value  # the figure was drawn


def test_at_scale_the_double_binary_tree_beats_the_ring_for_mid_sized_messages():
    dash = CommTimeDashboard(ranks=512, size=2**24)
    assert "Fastest here:  double_binary_tree" in text(dash)


def test_a_4_gib_broadcast_moves_the_buffer_once_with_the_ring():
    """Issue 7 item 11: with only a binomial tree the dashboard said 6x the buffer."""
    r = comm_times("broadcast", 4 * 2**30, 64, 25, 5, "best")
    assert r.chosen.algorithm == "ring" and r.chosen.volume == 4 * 2**30


def test_sliders_update_once_on_release():
    dash = CommTimeDashboard()
    assert all(getattr(c, "continuous_update", False) is False for c in dash.controls.values())


@pytest.mark.parametrize("op", OPS)
def test_the_algorithm_menu_offers_what_the_collective_has(op):
    """Issue 7 item 10: reduce_scatter offered 'tree' and answered 'no model for ...'."""
    dash = CommTimeDashboard()
    dash.controls["algorithm"].value = "naive"
    dash.controls["op"].value = op
    options = dash.controls["algorithm"].options
    assert tuple(options) == ("best", *alphabeta.ALGORITHMS[op]) == algorithm_options(op)
    for algorithm in options:
        dash.controls["algorithm"].value = algorithm
        assert dash.last_error is None and dash.error.value == "", (op, algorithm)
    assert dash.controls["algorithm"].value == options[-1]


def test_the_menu_keeps_the_chosen_algorithm_when_the_next_collective_has_it_too():
    dash = CommTimeDashboard()
    dash.controls["algorithm"].value = "ring"
    dash.controls["op"].value = "reduce_scatter"
    assert dash.controls["algorithm"].value == "ring" and dash.result.chosen.algorithm == "ring"
    dash.controls["algorithm"].value = "naive"
    dash.controls["op"].value = "broadcast"
    assert dash.controls["algorithm"].value == "naive" and dash.last_error is None


def test_a_collective_and_algorithm_the_model_lacks_is_a_message_naming_the_allowed_ones():
    with pytest.raises(ValueError, match="no model for reduce_scatter with algorithm 'binomial_tree'; "
                                         "allowed: ring, naive"):
        comm_times("reduce_scatter", 2**20, 8, 25, 5, "binomial_tree")


def test_the_dashboard_shows_the_models_numbers():
    r = comm_times("all_reduce", 2**20, 8, 25, 5, "ring")
    assert r.chosen.seconds == pytest.approx(alphabeta.time("all_reduce", "ring", 8, 2**20, 5e-6, 25e9).seconds)
    assert r.crossovers["recursive_doubling"] == pytest.approx(
        alphabeta.crossover("all_reduce", "recursive_doubling", "ring", 8, 5e-6, 25e9))
    assert set(r.crossovers) == {"recursive_doubling", "double_binary_tree"}  # fewer steps than the ring


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


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_the_ring_figure_is_readable_and_drawn_from_the_schedule(n):
    from parlab.viz.comm import ring_figure

    fig = ring_figure(n)
    texts = [t for ax in fig.axes for t in ax.texts] + [fig._suptitle]
    assert min(t.get_fontsize() for t in texts) >= 9  # issue 7 item 6: labels were ~4 px
    arrows = [p for ax in fig.axes for p in ax.patches if type(p).__name__ == "FancyArrowPatch"]
    assert len(arrows) == n * len(ring_schedule(n))  # one arrow per transfer of the schedule
    labels = [t.get_text() for ax in fig.axes[1:len(ring_schedule(n)) + 1] for t in ax.texts
              if t.get_text().startswith("b")]
    assert labels == [f"b{b}" for _, moves in ring_schedule(n) for _, _, b in moves]


def test_the_dashboard_figure_fits_a_900_pixel_screen_with_its_controls():
    dash = CommTimeDashboard()
    width, height = dash.figure_size
    assert width <= 600 and height <= 300

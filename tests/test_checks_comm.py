"""Exercise 02's checker: it accepts the ring of ``ring_schedule`` (the runtime's and chapter
02's), names the step where another schedule departs from it, and turns a stub's error into
one line."""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest

from parlab.checks.comm import check_ring_all_reduce, explain_failure, scheduled_sends
from parlab.comm import launch
from parlab.comm.algorithms import ring_steps

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def ring_all_reduce(comm, x):
    """The exercise's solution: the schedule as the exercise states it."""
    n, r = comm.world_size, comm.rank
    flat = x.reshape(-1)
    blocks = [flat[i * flat.size // n:(i + 1) * flat.size // n] for i in range(n)]
    right, left = (r + 1) % n, (r - 1) % n
    for step in range(n - 1):
        comm.send(blocks[(r - step - 1) % n], right)
        blocks[(r - step - 2) % n] += comm.recv(left)
    for step in range(n - 1):
        comm.send(blocks[(r - step) % n], right)
        blocks[(r - step - 1) % n][...] = comm.recv(left)
    return x


def shifted_ring(comm, x):
    """A correct ring whose reduce-scatter leaves rank r with block r+1 (ex02's old text)."""
    n, r = comm.world_size, comm.rank
    flat = x.reshape(-1)
    blocks = [flat[i * flat.size // n:(i + 1) * flat.size // n] for i in range(n)]
    right, left = (r + 1) % n, (r - 1) % n
    for step in range(n - 1):
        comm.send(blocks[(r - step) % n], right)
        blocks[(r - step - 1) % n] += comm.recv(left)
    for step in range(n - 1):
        comm.send(blocks[(r + 1 - step) % n], right)
        blocks[(r - step) % n][...] = comm.recv(left)
    return x


def stub(comm, x):
    raise NotImplementedError("write ring_all_reduce")


def test_the_exercise_text_is_the_runtimes_schedule():
    for n in (2, 3, 4, 5):
        for r in range(n):
            text = [(r - s - 1) % n for s in range(n - 1)] + [(r - s) % n for s in range(n - 1)]
            assert [sent for _, sent, _ in ring_steps(n, r)] == text
            assert [b for _, _, b, _ in scheduled_sends(n, r, 10, 8)] == text


@pytest.mark.timeout(180)
def test_a_ring_that_follows_the_schedule_passes(capsys):
    check_ring_all_reduce(ring_all_reduce)
    assert "block by block in the ring's schedule" in capsys.readouterr().out


@pytest.mark.timeout(180)
def test_a_correct_ring_on_another_schedule_is_told_where_it_departs():
    x = np.arange(10.0)
    for got in launch(shifted_ring, 4, x):
        np.testing.assert_array_equal(got, 4 * x)  # it does sum...
    with pytest.raises(AssertionError, match=r"step 1 \(reduce-scatter\) sent .*ring_schedule"):
        check_ring_all_reduce(shifted_ring)  # ...but not in the schedule chapter 02 draws


@pytest.mark.timeout(60)
def test_a_stub_in_the_try_it_cell_prints_one_line(capsys):
    with explain_failure():
        launch(stub, 2, np.ones(3))
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "ring_all_reduce is not written yet" in out
    with pytest.raises(NotImplementedError, match="still a stub"):
        check_ring_all_reduce(stub)

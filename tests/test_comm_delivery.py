"""Every message is delivered, whenever its sender returns (issue 8 item 1), on both backends.

On the torch backend a rank used to report and exit as soon as its function returned, taking
its gloo connections down: a message it had just sent on a sub-group, still on its way, was
lost ("Connection closed by peer" on the receiver), and so was the last step of parlab's ring
all-reduce inside a sub-group. Now every rank stays until all have returned, and a rank waits
until what it sent, on any group, has been received.
"""

from __future__ import annotations

import sys
import time

import cloudpickle
import numpy as np
import pytest

from conftest import live_children
from parlab.comm import launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])
BACKENDS = ["local", "torch"]
ROUNDS = 4


def senders_that_return_at_once(comm, rounds: int) -> list:
    """Each round, in fresh sub-groups: rank 0 sends and its part of the round ends there (on
    the last round its function returns); rank 1 receives only a while later. Rank 3, in no
    group, returns at once. Then a ring all-reduce in a sub-group of three ends the function."""
    got = []
    for k in range(rounds):
        pair = comm.new_group([0, 1])
        if pair is not None and pair.rank == 0:
            for i in range(3):
                pair.send(np.full(1000 + i, 10 * k + i, np.int64), 1)
        elif pair is not None:
            time.sleep(0.2)  # the sender is done with this round by now (returned, at the end)
            got.append([int(pair.recv(0)[-1]) for _ in range(3)])
    trio = comm.new_group([0, 1, 2])
    if trio is not None:
        total = trio.all_reduce(np.full(30_000, comm.rank, np.float64), algorithm="ring")
        got.append(float(total[-1]))
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_messages_sent_just_before_the_sender_returns_arrive(backend):
    per_rank = launch(senders_that_return_at_once, 4, ROUNDS, backend=backend, timeout=60)
    assert per_rank[1][:ROUNDS] == [[10 * k, 10 * k + 1, 10 * k + 2] for k in range(ROUNDS)]
    assert [r[-1] for r in per_rank[:3]] == [3.0, 3.0, 3.0]
    assert per_rank[3] == []
    assert live_children() == []

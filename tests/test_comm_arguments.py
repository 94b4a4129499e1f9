"""Arguments are checked at the door: a wrong one is a ValueError or TypeError naming the
argument, the value and the rule, raised in the caller (launch) or at the call in the rank
(communicator calls), never an error from deep inside (a missing argument of an algorithm,
a gloo message, an OverflowError in the ranks).

numpy scalars (``np.float32(1.5)``, what ``x.sum()`` returns) are accepted wherever an array is
read, as 0-d arrays; where a call writes into its argument (``out=``, ``into=``,
``inplace=True``) a scalar is refused, since it cannot be written to.
"""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest

from parlab.comm import launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])
BACKENDS = ["local", "torch"]


def nothing(comm):
    return comm.rank


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kwargs, error, message", [
    ({"timeout": float("inf")}, ValueError, r"timeout must be a positive number of seconds, got inf \(finite"),
    ({"timeout": float("nan")}, ValueError, r"timeout must be a positive number of seconds, got nan"),
    ({"timeout": 1e12}, ValueError, r"timeout must be .* got 1000000000000.0 \(finite, at most 604800 s\)"),
    ({"timeout": -1}, ValueError, r"timeout must be a positive number of seconds, got -1"),
    ({"timeout": "5"}, TypeError, r"timeout must be a number of seconds, got '5' \(str\)"),
    ({"timeout": True}, TypeError, r"timeout must be a number of seconds, got True \(bool\)"),
    ({"capacity": "4MB"}, TypeError, r"capacity must be an integer number of bytes, got '4MB' \(str\)"),
    ({"capacity": 65536.0}, TypeError, r"capacity must be an integer number of bytes, got 65536.0"),
    ({"capacity": 1 << 31}, ValueError, r"capacity must be a multiple of 64 .* \(at most 1024 MiB\)"),
    ({"world_size": "2"}, TypeError, r"world_size must be an integer in 1\.\.256, got '2' \(str\)"),
    ({"world_size": 2.0}, TypeError, r"world_size must be an integer in 1\.\.256, got 2.0 \(float\)"),
    ({"world_size": True}, TypeError, r"world_size must be an integer in 1\.\.256, got True"),
    ({"world_size": 257}, ValueError, r"world_size must be an integer in 1\.\.256, got 257"),
    ({"stream": "yes"}, TypeError, r"stream must be True or False, got 'yes'"),
    ({"fn": "nothing"}, TypeError, r"fn must be a function fn\(comm, \*args\), got str"),
])
def test_bad_launch_arguments_are_refused_in_the_caller(backend, kwargs, error, message):
    args = {"fn": nothing, "world_size": 2, "backend": backend, **kwargs}
    with pytest.raises(error, match=message):
        launch(args.pop("fn"), args.pop("world_size"), **args)


def test_numpy_integers_are_integers():
    assert launch(nothing, np.int64(2), capacity=np.int64(1 << 16), timeout=np.float32(30)) == [0, 1]


def bad_calls(comm) -> dict[str, str]:
    """Every wrong call, each answered on the spot: 'ExcType: message'."""
    x = np.ones(4)
    calls = {
        "op=None": lambda: comm.all_reduce(x, op=None),
        "reduce op=None": lambda: comm.reduce(x, op=None),
        "reduce_scatter op=5": lambda: comm.reduce_scatter(x, op=5),
        "recv_reduce op=None": lambda: comm.recv_reduce(1 - comm.rank, x, op=None),
        "new_group floats": lambda: comm.new_group([0.5, 1.7]),
        "new_group strings": lambda: comm.new_group(["0", "1"]),
        "new_group bools": lambda: comm.new_group([True, False]),
        "new_group None": lambda: comm.new_group(None),
        "new_group a string": lambda: comm.new_group("01"),
        "split float color": lambda: comm.split(0.5),
        "send to itself": lambda: comm.send(x, comm.rank),
        "recv from itself": lambda: comm.recv(comm.rank),
        "relay from itself": lambda: comm.recv_copy_send(comm.rank, x, 1 - comm.rank),
        "a Python float": lambda: comm.all_reduce(1.5),
        "a list": lambda: comm.broadcast([1, 2]),
        "inplace scalar": lambda: comm.all_reduce(np.float32(1), inplace=True),
        "recv into a scalar": lambda: comm.recv(1 - comm.rank, out=np.float32(0)),
        "out a list": lambda: comm.all_gather(x, out=[0.0] * 8),
    }
    out = {}
    for name, call in calls.items():
        try:
            call()
            out[name] = "accepted"
        except Exception as err:  # noqa: BLE001 - the test looks at every answer
            out[name] = f"{type(err).__name__}: {err}"
    comm.barrier()  # nothing above left a message or a half-made group behind
    return out


EXPECTED = {
    "op=None": r"TypeError: op must be the name of a reduce op \(sum, prod, max, min, avg\), got None",
    "reduce op=None": r"TypeError: op must be the name of a reduce op .* got None",
    "reduce_scatter op=5": r"TypeError: op must be the name of a reduce op .* got 5",
    "recv_reduce op=None": r"TypeError: op must be the name of a reduce op .* got None",
    "new_group floats": r"TypeError: new_group\(ranks\) needs integer ranks: .* got 0.5 \(float\), in \[0.5, 1.7\]",
    "new_group strings": r"TypeError: new_group\(ranks\) needs integer ranks: .* got '0' \(str\)",
    "new_group bools": r"TypeError: new_group\(ranks\) needs integer ranks: .* got True \(bool\)",
    "new_group None": r"TypeError: new_group\(ranks\) needs a list of ranks \(integers\), got None",
    "new_group a string": r"TypeError: new_group\(ranks\) needs a list of ranks \(integers\), got '01'",
    "split float color": r"TypeError: color must be an integer, got 0.5 \(float\)",
    "send to itself": r"ValueError: dst must be another rank than this one, got dst=(\d) on rank \1: "
                      r"a rank cannot send to or receive from itself",
    "recv from itself": r"ValueError: src must be another rank than this one, got src=(\d) on rank \1",
    "relay from itself": r"ValueError: src must be another rank than this one",
    "a Python float": r"TypeError: communicators move numpy arrays or torch tensors, got float for x "
                      r"\(wrap numbers and lists in np.asarray",
    "a list": r"TypeError: communicators move numpy arrays or torch tensors, got list for x",
    "inplace scalar": r"TypeError: x must be an array this call can write into, got a numpy scalar "
                      r"\(float32\), which is immutable",
    "recv into a scalar": r"TypeError: out must be an array this call can write into, got a numpy scalar",
    "out a list": r"TypeError: communicators move numpy arrays or torch tensors, got list for out",
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_calls_in_a_rank_raise_at_the_call_naming_the_argument(backend):
    import re

    for got in launch(bad_calls, 2, backend=backend, timeout=10):
        assert got.keys() == EXPECTED.keys()
        wrong = {k: v for k, v in got.items() if not re.match(EXPECTED[k], v)}
        assert wrong == {}


def numpy_scalars(comm):
    """A numpy scalar travels as a 0-d array, in every call that only reads it."""
    s = np.float32(comm.rank + 1.5)
    out = {"all_reduce": comm.all_reduce(s), "broadcast": comm.broadcast(s, src=1),
           "all_gather": comm.all_gather(s), "reduce": comm.reduce(np.int64(comm.rank), dst=0),
           "ring": comm.all_reduce(s, algorithm="ring")}
    if comm.rank == 0:
        comm.send(np.float64(7.25), 1)
    else:
        out["recv"] = comm.recv(0)
    return {k: (None if v is None else (type(v).__name__, v.shape, v.dtype.name, v.tolist()))
            for k, v in out.items()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_scalars_are_taken_as_0d_arrays(backend):
    r0, r1 = launch(numpy_scalars, 2, backend=backend)
    for r in (r0, r1):
        assert r["all_reduce"] == r["ring"] == ("ndarray", (), "float32", 4.0)
        assert r["broadcast"] == ("ndarray", (), "float32", 2.5)
        assert r["all_gather"] == ("ndarray", (2,), "float32", [1.5, 2.5])
    assert r0["reduce"] == ("ndarray", (), "int64", 1) and r1["reduce"] is None
    assert r1["recv"] == ("ndarray", (), "float64", 7.25)

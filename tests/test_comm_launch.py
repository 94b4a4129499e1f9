"""launch: functions travel by value, workers stay light, output comes back in order."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from parlab.comm import launch
from parlab.comm.torchrun import run_torchrun

cloudpickle.register_pickle_by_value(sys.modules[__name__])
ROOT = Path(__file__).resolve().parent.parent


def run_script(tmp_path: Path, body: str, *cmd: str, timeout: int = 120, **env: str) -> str:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    done = subprocess.run([*(cmd or [sys.executable]), str(script)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_function_of_a_script_without_a_main_guard_runs(tmp_path):
    # multiprocessing's spawn would re-run this file in every worker and launch again
    out = run_script(tmp_path, """
        import numpy as np
        from parlab.comm import launch

        def double(comm, k):
            return comm.all_reduce(np.array([comm.rank * k])).tolist()

        print(launch(double, 3, 2))
    """)
    assert out.strip() == "[[6], [6], [6]]"


def imports(comm, use_torch):
    if use_torch:
        import torch

        return "torch" in sys.modules, float(comm.all_reduce(torch.ones(2))[0])
    return "torch" in sys.modules, float(comm.all_reduce(np.ones(2))[0])


def test_fresh_workers_import_torch_only_when_the_function_uses_it(monkeypatch):
    monkeypatch.setenv("PARLAB_ZYGOTE", "0")  # each rank a fresh interpreter
    assert launch(imports, 2, False) == [(False, 2.0)] * 2
    assert launch(imports, 2, True) == [(True, 2.0)] * 2


def test_forked_workers_find_torch_imported_by_their_zygote():
    assert launch(imports, 2, False) == [(True, 2.0)] * 2  # paid once, by the zygote


def talks(comm):
    print(f"hello from {comm.rank}")
    print(f"warning on {comm.rank}", file=sys.stderr)
    return lambda rank=comm.rank: rank  # results travel with cloudpickle too


def test_output_comes_back_rank_by_rank_after_the_launch(capfd):
    results = launch(talks, 3)
    assert [f() for f in results] == [0, 1, 2]
    out, err = capfd.readouterr()
    assert out == "".join(f"[rank {r}] hello from {r}\n" for r in range(3))
    assert err == "".join(f"[rank {r}] warning on {r}\n" for r in range(3))


def alone(comm):
    x = np.arange(4.0)
    return (comm.rank, comm.world_size, comm.all_reduce(x).tolist(), comm.all_gather(x).tolist(),
            comm.broadcast(x).tolist(), comm.reduce_scatter(x).tolist())


@pytest.mark.parametrize("backend", ["local", "torch"])
def test_one_rank_is_a_valid_world(backend):
    x = list(np.arange(4.0))
    assert launch(alone, 1, backend=backend) == [(0, 1, x, x, x, x)]


def no_future_warnings(comm):
    import warnings

    import torch

    warnings.simplefilter("error", FutureWarning)
    warnings.simplefilter("error", DeprecationWarning)
    x = torch.ones(4 * comm.world_size)
    comm.all_reduce(x), comm.all_gather(x), comm.reduce_scatter(x), comm.all_to_all(x)
    comm.broadcast(x), comm.reduce(x), comm.gather(x), comm.scatter(x), comm.barrier()
    comm.all_reduce(x, algorithm="ring")
    g = comm.new_group([0, 1])
    if g is not None:
        g.all_reduce(x)
    return True


def test_the_torch_backend_uses_no_deprecated_torch_distributed_names():
    assert launch(no_future_warnings, 3, backend="torch") == [True] * 3


def test_torchrun_builds_the_same_communicator_from_its_environment(tmp_path):
    tmp = tmp_path / "tmp"  # torchrun's default log dir would be a torchelastic_* in here
    tmp.mkdir()
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import torch
        from parlab.comm import from_torchrun

        comm = from_torchrun()
        x = torch.full((5,), float(comm.rank + 1))
        ring = comm.all_reduce(x, algorithm="ring")
        native = comm.all_reduce(x)
        if comm.rank == 0:
            print(comm.world_size, ring.tolist(), native.tolist(), flush=True)
    """))
    done = run_torchrun([str(script)], 2, env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp)),
                        cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 [3.0, 3.0, 3.0, 3.0, 3.0] [3.0, 3.0, 3.0, 3.0, 3.0]" in done.stdout
    assert list(tmp.iterdir()) == []  # its log dir and temp files went with it


@pytest.mark.parametrize("kwargs, message", [
    ({"world_size": 0}, r"world_size must be an integer in 1\.\.256, got 0"),
    ({"backend": "mpi"}, r"unknown backend 'mpi'; allowed: local, torch"),
    ({"timeout": 0}, r"timeout must be a positive number of seconds, got 0"),
    ({"capacity": 1000}, r"capacity must be a multiple of 64 bytes and at least 64 KiB, got 1000"),
])
def test_bad_launch_arguments_name_the_rule(kwargs, message):
    args = {"world_size": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        launch(alone, args.pop("world_size"), **args)


def test_an_argument_that_cannot_travel_is_refused_before_any_process_starts():
    with pytest.raises(TypeError, match="launch could not serialise the function or its arguments"):
        launch(alone, 2, threading.Lock())


def test_stream_prints_each_line_as_it_comes(capfd):
    launch(talks, 2, stream=True)
    out, _ = capfd.readouterr()
    assert sorted(out.splitlines()) == ["[rank 0] hello from 0", "[rank 1] hello from 1"]

"""The comm runtime's PARLAB_* tuning variables are checked in the caller, before any rank starts
(attack review F2): a wrong value is one ValueError naming the variable, the value and the rule."""

from __future__ import annotations

import numpy as np
import pytest

from parlab.comm import launch, tuning, zygote

BAD = [("PARLAB_DIRECT_CHUNK", "0"), ("PARLAB_DIRECT_CHUNK", "-8"), ("PARLAB_DIRECT_CHUNK", "1"),
       ("PARLAB_DIRECT_CHUNK", "3"), ("PARLAB_DIRECT_CHUNK", "abc"), ("PARLAB_DIRECT_CHUNK", "4100"),
       ("PARLAB_DIRECT_SLOTS", "abc"), ("PARLAB_DIRECT_SLOTS", "0"), ("PARLAB_DIRECT_SLOTS", "3"),
       ("PARLAB_DIRECT_SLOTS", "1000"), ("PARLAB_SPIN", "abc"), ("PARLAB_SPIN", "-1"),
       ("PARLAB_SPIN", "nan"), ("PARLAB_SPIN", "inf"), ("PARLAB_SINGLE_COPY", "yes"),
       ("PARLAB_SHARED_POSITIONS", "2"), ("PARLAB_ZYGOTE", "off")]


@pytest.mark.parametrize("name, value", BAD)
def test_a_wrong_tuning_variable_is_one_line_in_the_caller_before_any_rank_starts(monkeypatch, name, value):
    monkeypatch.setenv(name, value)

    def no_rank(*args, **kwargs):
        raise AssertionError("a rank was started")

    monkeypatch.setattr(zygote, "spawn", no_rank)
    with pytest.raises(ValueError) as err:
        launch(lambda comm: None, 2)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{name}={value!r} is not valid: it must be ")


def test_the_defaults_and_good_values_are_read():
    assert tuning.read({}) == tuning.Tuning()
    t = tuning.read({"PARLAB_DIRECT_CHUNK": "4096", "PARLAB_DIRECT_SLOTS": "4", "PARLAB_SPIN": "0",
                     "PARLAB_SINGLE_COPY": "0", "PARLAB_ZYGOTE": "1"})
    assert (t.direct_chunk, t.direct_slots, t.spin_s, t.single_copy, t.zygote) == (4096, 4, 0.0, False, True)


def smallest_chunks(comm):
    x = np.arange(3 * 1000, dtype=np.complex128) + comm.rank  # 16-byte elements, 3 ranks
    return comm.all_reduce(x, algorithm="shm_direct").tobytes()


def test_the_smallest_chunk_allowed_still_reduces_correctly(monkeypatch):
    monkeypatch.setenv("PARLAB_DIRECT_CHUNK", str(tuning.MIN_CHUNK))
    monkeypatch.setenv("PARLAB_DIRECT_SLOTS", "4")
    got = launch(smallest_chunks, 3)
    want = sum(np.arange(3 * 1000, dtype=np.complex128) + r for r in range(3)).tobytes()
    assert got == [want] * 3


FSIZE_SCRIPT = """
import resource, signal, sys
from parlab.comm import launch
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # a file grown past the limit would kill us
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))  # ulimit -f 8
try:
    launch(lambda comm: comm.rank, 2)
except OSError as err:
    print(type(err).__name__, err)
"""


def test_a_file_size_limit_below_the_arena_is_one_line_naming_it():
    """``ulimit -f 8`` (attack review F13): refused before the arena grows, not a raw EFBIG (or a
    SIGXFSZ death, where the signal is not ignored)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root, "PARLAB_ZYGOTE": "0"}
    done = subprocess.run([sys.executable, "-c", FSIZE_SCRIPT], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("OSError [Errno 27] the launch's shared-memory arena needs")
    assert "RLIMIT_FSIZE, `ulimit -f`" in lines[0] and "raise the limit" in lines[0]

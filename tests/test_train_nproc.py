"""``torchrun --nproc_per_node=N -m parlab.train`` with N that is not dp x tp x pp (issue 20
item 8): one line, said once by rank 0, naming both numbers and the --nproc_per_node that fits.
The check runs inside torchrun's processes, so torchrun's own report of the failed processes
follows it (the limit the line and the trainer's docstring state); rank 0 is its root cause."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from parlab.comm.torchrun import run_torchrun
from parlab.layout import Grid
from parlab.train.checks import check_torchrun_world

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("env, message", [
    ({"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"},
     "= 4, world size 2: torchrun started 2 processes (1 node x --nproc_per_node=2); start it with "
     "--nproc_per_node=4 (torchrun's report of its failed processes follows this line)"),
    ({"WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "2"}, "(3 nodes x --nproc_per_node=2); dp x tp x pp must "
                                                   "be a multiple of its 3 nodes"),
    ({"WORLD_SIZE": "2"}, "(1 node x --nproc_per_node=2); start it with --nproc_per_node=4"),
])
def test_the_line_names_both_numbers_and_the_nproc_that_fits(env, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_torchrun_world(Grid(dp=2, tp=2, pp=1), env)
    check_torchrun_world(Grid(dp=int(env["WORLD_SIZE"]) // 2, tp=2, pp=1), env)  # that size passes


@pytest.mark.timeout(120)
def test_under_torchrun_a_wrong_nproc_is_one_line_by_rank_0_before_torchruns_report():
    done = run_torchrun(["-m", "parlab.train", "--dp", "2", "--tp", "2", "--steps", "1"], 2,
                        timeout=100, cwd=ROOT)
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("parlab.train:")]
    assert len(starts) == 1, done.stderr  # said once, folded at 100 columns
    folded = [lines[starts[0]]]
    for line in lines[starts[0] + 1:]:
        if not line.startswith("  ") or len(line) > 100:
            break
        folded.append(line)
    ours = [" ".join(line.strip() for line in folded)]
    assert "start it with --nproc_per_node=4" in ours[0], done.stderr
    cause = done.stderr.split("Root Cause", 1)[-1]
    assert re.search(r"rank\s*: 0 \(local_rank: 0\)\s+exitcode\s*: 2\b", cause), done.stderr
    assert done.stderr.index(folded[0]) < done.stderr.index("ChildFailedError")

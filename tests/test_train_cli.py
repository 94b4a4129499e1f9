"""``python -m parlab.train``, the real engine: under ``torchrun`` (gloo) it gives the loss of the
same run on the local backend; killed mid-training (one rank SIGKILLs itself while a checkpoint
is being written) and resumed, it gives the uninterrupted loss curve exactly, from the last
complete checkpoint (the one being written is never taken); bad input exits with status 2 and a
message naming the rule.

Layout 1 x 2 x 2 (TP and PP; 4 ranks: the 8-rank 2 x 2 x 2 run is tests/test_parallel_train.py's,
and torchrun's 8 processes take ~2x as long on 2 cores). Tolerance: torchrun vs local, <= 1e-5
per step (gloo sums in another order; measured ~1e-7); resumed vs uninterrupted: equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parlab.comm import launch
from parlab.parallel.checkpoint import PARTIAL, complete_steps
from parlab.parallel.model import GPTConfig
from parlab.parallel.train import TrainPlan, train_3d
from parlab.train import main

ROOT = Path(__file__).resolve().parents[1]
CFG = GPTConfig(n_layer=2, hidden=32, n_head=4, seq_len=16)
PLAN = TrainPlan(dp=1, tp=2, pp=2, batch_size=8, micro_batches=2)
ARGS = ["--dp", "1", "--tp", "2", "--pp", "2", "--layers", "2", "--hidden", "32", "--heads", "4",
        "--seq-len", "16", "--batch-size", "8", "--micro-batches", "2"]
STEPS = 6
TOL = 1e-5


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted run on the local backend: the loss of every step."""
    return launch(train_3d, PLAN.world, CFG, PLAN, STEPS)[0].losses


def run(cmd: list[str], tmp_path: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # torchrun's log directory goes there too
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(k, None)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def losses(path: Path) -> dict[int, float]:
    return {row["step"]: row["loss"] for row in map(json.loads, path.read_text().splitlines())}


def test_torchrun_gives_the_local_backend_loss(reference, tmp_path):
    log = tmp_path / "torchrun.jsonl"
    out = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4",
               "-m", "parlab.train", *ARGS, "--steps", "3", "--log-json", str(log)], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    got = losses(log)
    assert sorted(got) == [1, 2, 3]
    assert max(abs(got[s] - reference[s - 1]) for s in got) <= TOL
    assert "step 3 loss" in out.stdout and "tok/s" in out.stdout  # the step lines
    assert "measured / predicted" in out.stdout  # the per-rank table


def test_killed_mid_training_resumes_the_same_loss_curve(reference, tmp_path):
    ckpt, first, second = tmp_path / "ckpt", tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    common = [sys.executable, "-m", "parlab.train", *ARGS, "--steps", str(STEPS),
              "--checkpoint-dir", str(ckpt), "--save-every", "2"]
    # rank 1 is SIGKILLed while it writes the step-4 checkpoint (after its own shard)
    killed = run([*common, "--log-json", str(first), "--kill-at", "4:1:save"], tmp_path)
    assert killed.returncode == 1, killed.stderr[-3000:]
    assert "rank 1" in killed.stderr and "SIGKILL" in killed.stderr
    assert complete_steps(ckpt) == [2]
    assert (ckpt / f"step-00000004{PARTIAL}").is_dir()  # never taken for a complete one
    assert losses(first) == {s: reference[s - 1] for s in (1, 2, 3)}
    resumed = run([*common, "--log-json", str(second), "--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed at step 2" in resumed.stdout
    assert losses(second) == {s: reference[s - 1] for s in range(3, STEPS + 1)}  # exactly
    assert complete_steps(ckpt) == [2, 4, 6]


@pytest.mark.parametrize("argv, message", [
    (["--tp", "3", "--steps", "1"], "tensor-parallel degree tp=3 must divide n_head=4"),
    (["--steps", "1", "--resume"], "--resume and --save-every need --checkpoint-dir"),
    (["--steps", "1", "--device", "cuda"], "--device cuda runs under torchrun"),
    (["--steps", "1", "--schedule", "pipedream"], "schedule must be one of"),
    (["--steps", "1", "--kill-at", "x"], "--kill-at must be STEP"),
    (["--steps", "1", "--tp", "4", "--gpus-per-node", "2", "--tp-inside-node"],
     "a TP group must stay inside a node: tp=4 on nodes of 2 GPUs"),
])
def test_bad_input_exits_2_naming_the_rule(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_grid_that_is_not_the_torchrun_world_size_is_refused(monkeypatch, capsys):
    env = {"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["--dp", "2", "--tp", "2", "--pp", "2", "--steps", "1"]) == 2
    assert "dp x tp x pp must equal the world size: dp=2 x tp=2 x pp=2 = 8, world size 4" in capsys.readouterr().err


def test_resume_from_an_empty_directory_is_an_error(tmp_path, capsys):
    argv = ["--steps", "1", "--checkpoint-dir", str(tmp_path), "--resume", "--quiet"]
    assert main(argv) == 2  # before any process starts
    assert "no complete checkpoint" in capsys.readouterr().err

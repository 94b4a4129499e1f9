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
from parlab.comm.torchrun import run_torchrun
from parlab.parallel.model import GPTConfig
from parlab.parallel.trainer import TrainPlan, train_3d
from parlab.parallel.trainer.checkpoint.sharded import PARTIAL, complete_steps
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
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(k, None)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def message_of(err: str) -> str:
    """stderr's one message, unfolded: 'parlab.train: ...' folded at 100 columns, each
    continuation line indented two spaces (a line of its own, or wider, fails)."""
    first, *rest = err.rstrip("\n").split("\n")
    assert err.endswith("\n") and first.startswith("parlab.train: "), err
    assert all(line.startswith("  ") and not line.startswith("   ") for line in rest), err
    assert max(map(len, [first, *rest])) <= 100, err
    return " ".join([first, *(line.strip() for line in rest)])


def losses(path: Path) -> dict[int, float]:
    return {row["step"]: row["loss"] for row in map(json.loads, path.read_text().splitlines())}


def test_torchrun_gives_the_local_backend_loss(reference, tmp_path):
    log, tmp = tmp_path / "torchrun.jsonl", tmp_path / "tmp"
    tmp.mkdir()
    out = run_torchrun(["-m", "parlab.train", *ARGS, "--steps", "3", "--log-json", str(log)], 4,
                       env={**os.environ, "TMPDIR": str(tmp)}, cwd=ROOT, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    got = losses(log)
    assert sorted(got) == [1, 2, 3]
    assert max(abs(got[s] - reference[s - 1]) for s in got) <= TOL
    assert "step 3/3 loss" in out.stdout and "tok/s" in out.stdout  # the step lines
    assert "measured: all as the cost model predicts" in out.stdout  # the per-rank table
    assert max(map(len, out.stdout.splitlines())) <= 100, out.stdout  # '[rank 0] ' included
    assert list(tmp.iterdir()) == []  # no torchelastic_* log dir left behind


def test_killed_mid_training_resumes_the_same_loss_curve(reference, tmp_path, monkeypatch, capsys):
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
    lines = resumed.stdout.splitlines()  # rank 0's own output, without launch's '[rank 0] '
    assert lines[0].startswith("step 3/6 loss ") and max(map(len, lines)) <= 100, resumed.stdout
    assert losses(second) == {s: reference[s - 1] for s in range(3, STEPS + 1)}  # exactly
    assert complete_steps(ckpt) == [2, 4, 6]
    # nothing left to resume: one line, exit 0, no rank started (not a table of zeros)
    import parlab.comm

    def started(*args, **kwargs):
        raise AssertionError("a rank was started")

    monkeypatch.setattr(parlab.comm, "launch", started)
    capsys.readouterr()
    assert main([*ARGS, "--steps", str(STEPS), "--checkpoint-dir", str(ckpt), "--resume"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("nothing to do: the checkpoint in "), out
    assert f"is at step {STEPS} and --steps is {STEPS}" in out


@pytest.mark.parametrize("argv, message", [
    (["--tp", "3", "--steps", "1"], "tensor-parallel degree tp=3 must divide n_head=4"),
    (["--steps", "1", "--resume"], "--resume and --save-every need --checkpoint-dir"),
    (["--steps", "1", "--schedule", "pipedream"], "schedule must be one of"),
    (["--steps", "1", "--kill-at", "x"], "--kill-at must be STEP"),
    (["--steps", "1", "--tp", "4", "--gpus-per-node", "2", "--tp-inside-node"],
     "a TP group must stay inside a node: tp=4 on nodes of 2 GPUs"),
])
def test_bad_input_exits_2_naming_the_rule(argv, message, capsys):
    assert main(argv) == 2
    assert message in message_of(capsys.readouterr().err)


def test_a_long_message_folds_at_100_columns_and_wide_keeps_one_line(capsys):
    argv = ["--steps", "1", "--batch-size", "8", "--pp", "2", "--micro-batches", "3"]
    assert main(argv) == 2
    folded = capsys.readouterr().err
    assert main([*argv, "--wide"]) == 2
    wide = capsys.readouterr().err
    assert folded.count("\n") > 1 and wide.count("\n") == 1 and len(wide) > 101
    assert message_of(folded) == wide.rstrip("\n")


def test_a_grid_that_is_not_the_torchrun_world_size_is_refused(monkeypatch, capsys):
    env = {"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["--dp", "2", "--tp", "2", "--pp", "2", "--steps", "1"]) == 2
    assert "dp x tp x pp must equal the world size: dp=2 x tp=2 x pp=2 = 8, world size 4" in message_of(capsys.readouterr().err)


def test_resume_from_an_empty_directory_is_an_error(tmp_path, capsys):
    argv = ["--steps", "1", "--checkpoint-dir", str(tmp_path), "--resume", "--quiet"]
    assert main(argv) == 2  # before any process starts
    assert "no complete checkpoint" in message_of(capsys.readouterr().err)


# ------------------------------------------------------------------ refused before any rank starts
TORCHRUN_ENV = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999",
                "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}


@pytest.fixture
def no_ranks(monkeypatch):
    """main may not start a rank (launch) nor join torchrun's group (from_torchrun)."""
    import parlab.comm

    def started(*args, **kwargs):
        raise AssertionError("a rank was started")

    monkeypatch.setattr(parlab.comm, "launch", started)
    monkeypatch.setattr(parlab.comm, "from_torchrun", started)


@pytest.mark.parametrize("argv, message", [
    (["--steps", "0"], "--steps must be a positive integer, got 0"),
    (["--steps", "-1"], "--steps must be a positive integer, got -1"),
    (["--steps", "1", "--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["--steps", "1", "--checkpoint-dir", "ck", "--save-every", "-1"],
     "--save-every must be an integer >= 0, got -1"),
    (["--steps", "1", "--checkpoint-dir", "", "--save-every", "1"],
     "--checkpoint-dir must be a directory path, got ''"),
    (["--steps", "1", "--gpus-per-node", "0"], "--gpus-per-node must be a positive integer, got 0"),
    (["--steps", "1", "--timeout", "nan"], "--timeout must be a positive finite number, got nan"),
    (["--steps", "1", "--lr", "inf"], "--lr must be a positive finite number, got inf"),
    (["--steps", "1", "--log-json", "."], "--log-json must be a file path, got '.' (a directory)"),
    (["--steps", "1", "--log-json", "no/such/dir/log.jsonl"],
     "--log-json no/such/dir/log.jsonl: its directory no/such/dir does not exist"),
    (["--steps", "1", "--layers", "1000000"], "GiB is available: refusing to start"),
])
def test_bad_arguments_exit_2_with_one_line_before_any_rank_starts(argv, message, no_ranks, capsys,
                                                                   tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in message_of(err), err


@pytest.mark.parametrize("env, argv, message", [
    ({"LOCAL_WORLD_SIZE": "abc"}, [], "environment variable LOCAL_WORLD_SIZE must be an integer, got 'abc'"),
    ({}, ["--timeout", "nan"], "--timeout must be a positive finite number, got nan"),
    ({}, ["--device", "cuda"], "sees no CUDA device on this machine"),
])
def test_bad_torchrun_input_exits_2_before_joining_the_group(env, argv, message, no_ranks, capsys,
                                                             monkeypatch):
    import torch

    if "--device" in argv and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for k, v in {**TORCHRUN_ENV, **env}.items():
        monkeypatch.setenv(k, v)
    assert main(["--steps", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert message in message_of(err), err


def test_an_argparse_error_is_one_usage_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--steps"])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("usage: python -m parlab.train --steps N")
    assert "expected one argument" in lines[1]


def test_arguments_are_checked_before_torch_is_imported():
    code = ("import sys; from parlab.train import main; rc = main(['--steps', '0']); "
            "print(rc, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["2", "False"], done.stderr


FLAG_MISTAKES = [  # issue 20: each answered only after torch had loaded (2.7 s idle, 13 s loaded)
    (["--tp", "3"], "the tensor-parallel degree tp=3 must divide n_head=4"),
    (["--dp", "0"], "--dp must be a positive integer, got 0"),
    (["--schedule", "onef1b"], "--schedule must be one of naive, gpipe, 1f1b, interleaved, zb-h1, "
                               "got 'onef1b'; did you mean '1f1b'?"),
    (["--batch-size", "3"], "each replica's batch batch_size / dp = 3 must be divisible by the 2 "
                            "micro-batches"),
    (["--hidden", "30"], "--hidden 30 must be divisible by --heads 4"),
    (["--layers", "1", "--pp", "2"], "more pipeline pieces than layers"),
    (["--resume", "--checkpoint-dir", "{empty}"], "--resume: no complete checkpoint in"),
    (["--resume", "--checkpoint-dir", "{missing}"], "--resume: no checkpoint to resume"),
]


def test_flag_mistakes_are_one_line_before_torch_is_imported(tmp_path):
    (tmp_path / "empty").mkdir()
    cases = [([a.format(empty=tmp_path / "empty", missing=tmp_path / "missing") for a in argv], m)
             for argv, m in FLAG_MISTAKES]
    code = ("import contextlib, io, json, sys; from parlab.train import main\n"
            "out = []\n"
            f"for argv in {[argv for argv, _ in cases]!r}:\n"
            "    err = io.StringIO()\n"
            "    with contextlib.redirect_stderr(err):\n"
            "        rc = main(['--steps', '1', *argv])\n"
            "    out.append([rc, err.getvalue()])\n"
            "print(json.dumps([out, 'torch' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    results, torch_loaded = json.loads(done.stdout)
    for (argv, message), (rc, err) in zip(cases, results, strict=True):
        assert rc == 2 and message in message_of(err), (argv, err)
    assert not torch_loaded


def test_under_torchrun_a_flag_mistake_is_said_once_by_rank_0(monkeypatch, capsys):
    argv = ["--dp", "2", "--tp", "2", "--pp", "2", "--steps", "1"]  # 8 ranks, nproc_per_node=4
    env = {"WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999",
           "LOCAL_WORLD_SIZE": "4"}
    for rank in range(4):
        for k, v in {**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}.items():
            monkeypatch.setenv(k, v)
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert "dp x tp x pp must equal the world size" in message_of(err), err


def test_a_fresh_run_over_old_checkpoints_exits_2(tmp_path, no_ranks, capsys):
    (tmp_path / "step-00000002").mkdir()
    assert main(["--steps", "1", "--checkpoint-dir", str(tmp_path), "--save-every", "1"]) == 2
    assert "already holds checkpoints (latest: step 2)" in message_of(capsys.readouterr().err)


def test_resume_on_a_file_path_says_it_is_a_file(tmp_path, no_ranks, capsys):
    f = tmp_path / "ckpt"
    f.write_text("")
    assert main(["--steps", "1", "--checkpoint-dir", str(f), "--resume"]) == 2
    assert f"--checkpoint-dir {f} is a file, not a directory" in message_of(capsys.readouterr().err)


def test_a_directory_held_by_another_run_exits_2(tmp_path, no_ranks, capsys):
    from parlab.parallel.trainer.checkpoint import DirectoryLock

    with DirectoryLock(tmp_path):
        assert main(["--steps", "1", "--checkpoint-dir", str(tmp_path), "--save-every", "1"]) == 2
    assert f"checkpoint directory {tmp_path} is in use by another run (pid {os.getpid()}" in \
        message_of(capsys.readouterr().err)


def test_two_trainers_on_one_directory_one_wins_and_owns_every_file(tmp_path):
    from parlab.parallel.trainer.checkpoint import read_checkpoint, step_dir, verify_checkpoint

    ckpt = tmp_path / "ckpt"
    cmd = [sys.executable, "-m", "parlab.train", "--steps", "2", "--save-every", "1", "--quiet",
           "--layers", "1", "--hidden", "32", "--seq-len", "16", "--checkpoint-dir", str(ckpt)]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                          "MASTER_PORT", "LOCAL_RANK")}
    procs = [subprocess.Popen([*cmd, "--lr", lr], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for lr in ("0.001", "0.002")]
    outs = [p.communicate(timeout=240) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(c == 0 for c in codes) == [False, True], outs
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    said = " ".join(outs[loser][1].split())  # the rank's error, with its traceback, folded
    assert "in use by another run" in said or "already holds checkpoints" in said, outs
    assert complete_steps(ckpt) == [1, 2]
    runs = set()
    for step in (1, 2):
        manifest = verify_checkpoint(step_dir(ckpt, step))  # every file, every hash
        _, shards = read_checkpoint(step_dir(ckpt, step))
        runs |= {manifest["run"]} | {shard["run"] for _, shard in shards}
        assert manifest["plan"]["lr"] == (0.001, 0.002)[winner]
    assert len(runs) == 1  # one run wrote everything


def test_the_memory_estimate_counts_every_local_rank_and_names_the_numbers():
    from parlab.parallel.model import TinyGPT
    from parlab.train.checks import check_fits

    n_params = sum(p.numel() for p in TinyGPT(CFG).parameters())
    need = check_fits(CFG, PLAN, PLAN.world, available=1 << 40)
    assert need >= 16 * n_params  # fp32 weights, gradients and AdamW's two moments, at least
    with pytest.raises(ValueError, match=r"needs about 0\.0 GiB for its 4 ranks on this machine .* "
                                         r"only 0\.0 GiB is available: refusing to start"):
        check_fits(CFG, PLAN, PLAN.world, available=int(need) - 1)

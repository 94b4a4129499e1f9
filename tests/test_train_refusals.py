"""``python -m parlab.train`` refuses at once, in one line, said once (issue 31): torchrun's
environment (a rank outside its world, a master that cannot be found: they used to hang 35-38 s
before a traceback), ``--kill-at`` that would never fire, a ``--log-json`` FIFO or device, and,
under torchrun, every refusal by rank 0 alone (``--tp-inside-node``, ``--device cuda`` were said
by every rank). The check functions are tested directly; ``main`` where the rank matters, with
no rank started."""

from __future__ import annotations

import os
import re
import signal

import pytest
from test_train_cli import TORCHRUN_ENV, message_of, no_ranks  # noqa: F401 - a fixture

from parlab.train import main
from parlab.train.checks import check_env, check_fault, check_log_target, env_rank
from parlab.train.stop import wait_for_torchrun_stop


@pytest.mark.parametrize("env, message", [
    ({"RANK": "1", "WORLD_SIZE": "1"}, "RANK=1 must be < WORLD_SIZE=1 (the ranks are 0..WORLD_SIZE - 1)"),
    ({"LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK=2 must be < LOCAL_WORLD_SIZE=2"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT must be a port in 1..65535, got 70000"),
    ({"MASTER_PORT": "0"}, "MASTER_PORT must be >= 1, got 0"),
    ({"MASTER_ADDR": "no-such-host.invalid"}, "MASTER_ADDR='no-such-host.invalid' does not resolve ("),
    ({"MASTER_ADDR": ""}, "MASTER_ADDR='' does not resolve ("),
])
def test_torchrun_environment_is_checked_at_once(env, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_env({**TORCHRUN_ENV, **env}, torchrun=True)
    check_env(TORCHRUN_ENV, torchrun=True)  # the rest is fine


@pytest.mark.parametrize("env, rank", [
    ({"RANK": "00", "WORLD_SIZE": "2"}, 0), ({"RANK": "1", "WORLD_SIZE": "2"}, 1),
    ({"RANK": "2", "WORLD_SIZE": "2"}, None), ({"RANK": "x"}, None), ({}, None)])
def test_env_rank_is_a_number_in_the_world(env, rank):
    assert env_rank(env) == rank


@pytest.mark.parametrize("text, message", [
    ("0", "--kill-at's step must be in 1..--steps=4, got 0 (it would never fire)"),
    ("1:99", "--kill-at's rank must be in 0..7 (dp x tp x pp = 8 ranks), got 99"),
    ("5", "--kill-at's step must be in 1..--steps=4, got 5"),
    ("1:0:save:x", "--kill-at must be STEP[:RANK[:save]], got '1:0:save:x'"),
    ("1:0:load", "--kill-at's third field must be 'save' (or absent), got 'load'"),
])
def test_kill_at_must_be_able_to_fire(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_fault(text, 4, 8)
    assert check_fault("4:7:save", 4, 8) == (4, 7, "save")
    with pytest.raises(ValueError, match=re.escape("--kill-at's step must be in 3..--steps=4 (the "
                                                   "checkpoint resumed is at step 2), got 2")):
        check_fault("2", 4, 8, done=2)


def test_the_log_target_is_a_regular_file_or_a_new_one(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=re.escape(f"--log-json {fifo} is a FIFO: it must be a "
                                                   f"regular file (or a new one)")):
        check_log_target(str(fifo))
    if os.path.exists("/dev/full"):
        with pytest.raises(ValueError, match="--log-json /dev/full is a device"):
            check_log_target("/dev/full")
    (tmp_path / "old.jsonl").write_text("")
    check_log_target(str(tmp_path / "old.jsonl"))
    check_log_target(str(tmp_path / "new.jsonl"))


def test_a_refused_timeout_does_not_break_the_wait_for_torchrun(monkeypatch):
    waited = []
    monkeypatch.setattr(signal, "pthread_sigmask", lambda how, mask: set())
    monkeypatch.setattr(signal, "sigtimedwait", lambda sigs, limit: waited.append(limit))
    for timeout in (float("nan"), -1.0, float("inf"), 0.0, 5.0):
        wait_for_torchrun_stop(timeout)
    assert waited == [60.0, 60.0, 60.0, 60.0, 5.0]


@pytest.mark.parametrize("argv, message", [
    (["--tp", "4", "--heads", "4", "--gpus-per-node", "2", "--tp-inside-node"],
     "a TP group must stay inside a node: tp=4 on nodes of 2 GPUs"),
    (["--timeout", "-1"], "--timeout must be a positive finite number, got -1.0"),
])
def test_under_torchrun_every_refusal_is_said_once_by_rank_0(argv, message, monkeypatch, capsys,
                                                              no_ranks):  # noqa: F811
    waits = []
    monkeypatch.setattr("parlab.train.cli.wait_for_torchrun_stop", waits.append)
    for rank in range(4):
        env = {**TORCHRUN_ENV, "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "RANK": f"{rank:02d}",
               "LOCAL_RANK": str(rank), "TORCHELASTIC_RUN_ID": "x"}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert main(["--tp", "4", "--steps", "1", *argv]) == 2
    assert message in message_of(capsys.readouterr().err)  # one message: rank 0's ('00')
    assert len(waits) == 3  # the others wait for torchrun to stop them


def test_a_process_whose_rank_is_outside_its_world_says_so_itself(monkeypatch, capsys,
                                                                  no_ranks):  # noqa: F811
    for k, v in {**TORCHRUN_ENV, "RANK": "1"}.items():
        monkeypatch.setenv(k, v)
    assert main(["--steps", "1"]) == 2
    assert "environment variable RANK=1 must be < WORLD_SIZE=1" in message_of(capsys.readouterr().err)


def test_the_readme_recipes_pass_the_checks_and_resumes_keep_saving():
    """The README's multi-node line (tp=8 needs --heads 8) and its resume lines (each names
    --save-every, as a resume without it keeps the checkpoint's)."""
    from pathlib import Path

    from parlab.train.checks import check_args
    from parlab.train.cli import parser

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text().replace("\\\n", " ")
    multi = re.search(r"--rdzv_id=job42 -m parlab.train ([^\n#]*)", readme).group(1).split()
    env = {**TORCHRUN_ENV, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}
    check_args(parser().parse_args(multi), env, torchrun=True)
    resumes = [line for line in readme.splitlines() if "parlab.train" in line and "--resume" in line]
    assert resumes and all("--save-every" in line for line in resumes), resumes

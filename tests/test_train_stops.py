"""How ``python -m parlab.train`` ends early (issue 31): a torchrun worker dies with its agent
(``kill -9`` of torchrun leaves no rank training on its own); Ctrl-C and a run that stops itself
(a loss that is no longer finite, a step log that cannot be written) end in one line naming the
last complete checkpoint and the command that resumes it; a resume without --save-every says
that it will save nothing. Tests run one rank where one is enough (1 x 1 x 1), and two under
torchrun."""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_train_cli import message_of

from conftest import has_ended
from parlab.comm.torchrun import RENDEZVOUS
from parlab.parallel.trainer import StepLog, TrainingStopped
from parlab.train import main
from parlab.train.output import Progress

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--layers", "1", "--hidden", "32", "--seq-len", "16", "--quiet"]  # 1 rank


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen | None = None, limit: float = 180):
    """Until ``path`` holds ``n`` lines (a run's --log-json: it has trained ``n`` steps), or
    ``limit`` seconds (a failure), or ``proc`` ended."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} never reached {n} lines")


def children(pid: int) -> list[int]:
    """The live children of process ``pid``."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


@pytest.mark.timeout(300)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_kill_9_of_torchrun_ends_its_workers(tmp_path):
    log = tmp_path / "log.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in RENDEZVOUS}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "--log-dir", str(tmp_path / "logs"), "-m", "parlab.train", "--dp", "2", *TINY,
           "--steps", "1000000", "--log-json", str(log)]
    with open(tmp_path / "out", "w") as out:
        agent = subprocess.Popen(cmd, cwd=ROOT, env={**env, "TMPDIR": str(tmp_path)}, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    workers = []
    try:
        wait_for_lines(log, 1, agent)  # both workers train
        workers = children(agent.pid)
        assert len(workers) == 2, workers
        agent.kill()
        agent.wait()
        assert all(has_ended(pid, 60.0) for pid in workers), (tmp_path / "out").read_text()[-3000:]
    finally:  # whatever happened: the agent and its workers (sessions of their own) go
        if agent.poll() is None:
            workers += children(agent.pid)
        for pid in [agent.pid, *workers]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        agent.wait()


def test_ctrl_c_is_one_line_naming_the_checkpoint_and_a_resume_keeps_saving(
        tmp_path, ctrl_c_delivered, capsys):
    ckpt, log = tmp_path / "ckpt", tmp_path / "log.jsonl"
    argv = [*TINY, "--steps", "100000", "--checkpoint-dir", str(ckpt), "--save-every", "1",
            "--log-json", str(log)]
    watcher = threading.Thread(target=lambda: (wait_for_lines(log, 2), _thread.interrupt_main()))
    watcher.start()
    try:
        assert main(argv) == 130
    finally:
        watcher.join()
    said = message_of(capsys.readouterr().err)
    from parlab.train.stop import last_checkpoint

    step = last_checkpoint(str(ckpt))
    assert step is not None and step >= 1
    assert said.startswith(f"parlab.train: interrupted; the last complete checkpoint is step {step} "
                           f"in {ckpt}; resume with: python")
    assert said.endswith(f"-m parlab.train {' '.join(argv)} --resume"), said
    # a resume without --save-every keeps the run's (its manifest records it): it saves on
    from parlab.parallel.trainer.checkpoint import complete_steps

    resume = [*TINY, "--steps", str(step + 1), "--checkpoint-dir", str(ckpt), "--resume"]
    assert main(resume) == 0
    assert "--save-every" not in capsys.readouterr().err
    assert complete_steps(ckpt)[-1] == step + 1


def test_a_non_finite_loss_stops_the_run_keeping_the_last_good_checkpoint(tmp_path, capsys):
    from parlab.parallel.trainer.checkpoint import complete_steps

    ckpt = tmp_path / "ckpt"
    assert main([*TINY, "--steps", "5", "--lr", "1e30", "--checkpoint-dir", str(ckpt),
                 "--save-every", "1"]) == 1
    said = message_of(capsys.readouterr().err)
    assert "the loss of step 2 is nan (not finite): the run diverged and stopped" in said, said
    assert f"the last complete checkpoint is step 1 in {ckpt}" in said
    assert complete_steps(ckpt) == [1]  # the diverged step is never saved


def test_a_log_that_cannot_be_written_stops_the_run_in_one_line(tmp_path):
    progress = Progress(3, quiet=True, json_path=str(tmp_path / "gone" / "log.jsonl"))
    with pytest.raises(TrainingStopped, match=r"--log-json .*log\.jsonl: writing step 1 failed "
                                              r"\(No such file or directory\); the run stopped"):
        progress(StepLog(1, 3.0, 0.1, 1000.0, {}))


def test_saved_every_reads_the_manifest_and_is_none_where_it_cannot(tmp_path):
    """A resume without --save-every keeps the checkpoint's (``runs.saved_every``); with no
    checkpoint, an old manifest without the field, or a bad value, there is nothing to keep."""
    import json

    from parlab.parallel.trainer.checkpoint import saved_every, step_dir

    assert saved_every(tmp_path) is None
    step = step_dir(tmp_path, 3)
    step.mkdir()
    for manifest, kept in [({"save_every": 5}, 5), ({}, None), ({"save_every": -1}, None),
                           ({"save_every": "5"}, None), ({"save_every": True}, None)]:
        (step / "COMPLETE.json").write_text(json.dumps(manifest))
        assert saved_every(tmp_path) == kept, manifest
    (step / "COMPLETE.json").write_bytes(b"\x80")
    assert saved_every(tmp_path) is None

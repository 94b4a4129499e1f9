"""Sharded checkpoints of the 3D trainer (``parlab.parallel.checkpoint``): a run saved at step 2
and resumed gives the uninterrupted loss curve exactly on the same layout and within float
rounding on another dp x tp x pp (re-sharding: interleaved 1F1B with ZeRO-1 saved, ZB-H1 with TP
and GPipe with pure DP resumed); a partial checkpoint is never loaded; a corrupt file, a missing
manifest, another model shape and a fresh run over old checkpoints raise errors naming the file
or the rule. The kill-and-resume test of the command line is in tests/test_train_cli.py.

Tolerance on another layout: |loss - uninterrupted| <= 1e-5 (measured: 1.2e-7), and the
uninterrupted run equals serial training within the same bound. All runs on one warm 4-rank
World (local backend; the save and load code is backend-independent: DCP without a process group).
"""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from parlab.comm import RankError, World
from parlab.parallel.checkpoint import (
    MANIFEST,
    PARTIAL,
    CheckpointError,
    check_compatible,
    complete_steps,
    load_latest,
    read_checkpoint,
    refuse_overwrite,
    step_dir,
)
from parlab.parallel.model import GPTConfig
from parlab.parallel.train import Checkpointing, TrainPlan, serial_losses, train_3d, with_layout

CFG = GPTConfig(n_layer=4, hidden=32, n_head=4, seq_len=16)
# saved: 2 x 1 x 2, interleaved 1F1B (2 chunks per rank), ZeRO-1 over DP
PLAN = TrainPlan(dp=2, tp=1, pp=2, batch_size=8, micro_batches=2, schedule="interleaved",
                 chunks=2, zero1=True)
STEPS, SAVED = 4, 2
TOL = 1e-5


@pytest.fixture(scope="module")
def world4():
    """A warm 4-rank World on the local backend only (the save/load code is backend-independent)."""
    with World(4, backend="local", timeout=60) as world:
        yield world


@pytest.fixture(scope="module")
def runs(world4, tmp_path_factory):
    """The uninterrupted run, and a directory holding its checkpoint at step SAVED."""
    d = tmp_path_factory.mktemp("ckpt")
    full = world4.run(train_3d, CFG, PLAN, STEPS)[0]
    saved = world4.run(train_3d, CFG, PLAN, SAVED, Checkpointing(str(d), SAVED))[0]
    return full, saved, d


def resume(world4, d, plan, steps=STEPS):
    return world4.run(train_3d, CFG, plan, steps, Checkpointing(str(d), 0, resume=True))[0]


def test_uninterrupted_run_matches_serial_training_and_the_cost_model(runs):
    full, saved, d = runs
    serial = serial_losses(CFG, PLAN, STEPS)
    assert max(abs(a - b) for a, b in zip(full.losses, serial, strict=True)) <= TOL
    assert saved.losses == full.losses[:SAVED] and saved.saved == [SAVED]
    # ZeRO-1: reduce-scatter + all-gather over DP as modelled; 1/dp of AdamW's moments (padded)
    assert full.measured["traffic"] == full.predicted["traffic"]
    assert set(full.measured["traffic"]["dp"]) == {"reduce_scatter", "all_gather"}
    states = full.measured["memory"]["optimizer states"], full.predicted["memory"]["optimizer states"]
    assert 0 <= states[0] - states[1] < 8 * PLAN.dp  # padding to a multiple of dp
    assert complete_steps(d) == [SAVED]
    rank_dirs = sorted(p.name for p in step_dir(d, SAVED).iterdir() if p.is_dir())
    assert rank_dirs == [f"rank-{r:05d}" for r in range(4)]  # each rank wrote its own shard


def test_resume_on_the_same_layout_is_exact(runs, world4):
    full, _, d = runs
    again = resume(world4, d, PLAN)
    assert again.start_step == SAVED
    assert again.losses == full.losses[SAVED:]  # bit for bit


@pytest.mark.parametrize("layout, schedule, zero1", [
    ((1, 2, 2), "zb-h1", False),   # TP inside each stage, split backward
    ((4, 1, 1), "gpipe", True),    # pure DP, ZeRO-1 over 4
])
def test_resume_on_another_layout_reshards(runs, world4, layout, schedule, zero1):
    full, _, d = runs
    plan = replace(with_layout(PLAN, *layout), schedule=schedule, zero1=zero1)
    again = resume(world4, d, plan)
    assert again.start_step == SAVED
    assert max(abs(a - b) for a, b in zip(again.losses, full.losses[SAVED:], strict=True)) <= TOL


def test_a_partial_checkpoint_is_never_loaded(runs, world4, tmp_path):
    full, _, d = runs
    work = tmp_path / "ck"
    shutil.copytree(d, work)
    # a later checkpoint whose writing was cut short: its shards are there, it was never renamed
    shutil.copytree(step_dir(d, SAVED), work / f"step-00000003{PARTIAL}")
    assert complete_steps(work) == [SAVED]
    again = resume(world4, work, PLAN)
    assert again.start_step == SAVED and again.losses == full.losses[SAVED:]


def test_resume_with_only_partial_checkpoints_refuses_to_start_from_scratch(tmp_path):
    (tmp_path / f"step-00000004{PARTIAL}").mkdir()
    with pytest.raises(FileNotFoundError, match="no complete checkpoint.*step-00000004.partial"):
        load_latest(None, tmp_path)


def test_a_missing_manifest_is_an_error_naming_the_file(runs, tmp_path):
    _, _, d = runs
    work = tmp_path / "ck"
    shutil.copytree(d, work)
    (step_dir(work, SAVED) / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match=f"{step_dir(work, SAVED) / MANIFEST} is missing"):
        load_latest(None, work)


def test_a_checkpoint_of_another_model_shape_is_a_value_error(runs):
    _, _, d = runs
    path = step_dir(d, SAVED)
    manifest, _ = read_checkpoint(path)
    with pytest.raises(ValueError, match="hidden=32 but this run builds hidden=64: a checkpoint "
                                         "resumes only the model shape"):
        check_compatible(path, manifest, replace(CFG, hidden=64), PLAN)
    with pytest.raises(ValueError, match="batch_size=8 but this run has batch_size=16"):
        check_compatible(path, manifest, CFG, replace(PLAN, batch_size=16))
    check_compatible(path, manifest, CFG, with_layout(PLAN, 1, 2, 2))  # another layout is fine


def test_a_fresh_run_does_not_overwrite_old_checkpoints(runs):
    _, _, d = runs
    with pytest.raises(ValueError, match="already holds checkpoints .latest: step 2.: pass resume"):
        refuse_overwrite(d)


# last: a run that fails replaces the World's ranks, and nothing runs after this one
def test_a_corrupt_shard_is_an_error_naming_the_file(runs, world4, tmp_path):
    _, _, d = runs
    work = tmp_path / "ck"
    shutil.copytree(d, work)
    shard = next((step_dir(work, SAVED) / "rank-00000").glob("*.distcp"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(RankError, match=f"{shard}.*is corrupt"):
        resume(world4, work, PLAN)

"""Sharded checkpoints of the 3D trainer (``parlab.parallel.trainer.checkpoint``): a run saved at step 2
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

import errno
import json
import os
import pickle
import re
import shutil
import sys
from dataclasses import replace
from types import SimpleNamespace

import cloudpickle
import pytest
import test_checkpoint_lock
from test_checkpoint_lock import Planted, ReadOnly

from parlab.comm import RankError, World, launch
from parlab.parallel.model import GPTConfig
from parlab.parallel.trainer import Checkpointing, TrainPlan, serial_losses, train_3d, with_layout
from parlab.parallel.trainer.checkpoint.files import DATA, seal, sha256
from parlab.parallel.trainer.checkpoint.owner import (
    DirectoryLock,
    _fresh_partial,
    check_directory,
    write_error,
)
from parlab.parallel.trainer.checkpoint.runs import claim, owning
from parlab.parallel.trainer.checkpoint.sharded import (
    MANIFEST,
    PARTIAL,
    SHARD,
    CheckpointError,
    check_compatible,
    complete_steps,
    load_latest,
    optimizer_settings,
    read_checkpoint,
    refuse_overwrite,
    step_dir,
    verify_checkpoint,
)
from parlab.parallel.trainer.checkpoint.shards import shard_entries

CFG = GPTConfig(n_layer=4, hidden=32, n_head=4, seq_len=16)
# saved: 2 x 1 x 2, interleaved 1F1B (2 chunks per rank), ZeRO-1 over DP
PLAN = TrainPlan(dp=2, tp=1, pp=2, batch_size=8, micro_batches=2, schedule="interleaved",
                 chunks=2, zero1=True)
STEPS, SAVED = 4, 2
TOL = 1e-5
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # full_disk runs on the ranks
cloudpickle.register_pickle_by_value(test_checkpoint_lock)  # ReadOnly too


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


# ------------------------------------------------------------------ tampering: refused, file named
def copy(d, tmp_path):
    shutil.copytree(d, tmp_path / "ck")
    return step_dir(tmp_path / "ck", SAVED)


def edit_json(path, change):
    obj = json.loads(path.read_text())
    path.write_text(json.dumps(change(obj)))


def reseal(path):
    """What a careful forger does: every SHARD.json hash and the manifest's checksum recomputed."""
    def fix(m):
        for entry in m["ranks"]:
            f = path / entry["dir"] / SHARD
            if f.is_file():
                entry["bytes"], entry["sha256"] = f.stat().st_size, sha256(f)
        return seal(m)
    edit_json(path / MANIFEST, fix)


def flip(f):
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))


def outside(path):
    other = path.parent.parent / "other"
    shutil.copytree(path, other / path.name)
    edit_json(path / MANIFEST, lambda m: {**m, "ranks": [
        {**m["ranks"][0], "dir": f"../../other/{path.name}/rank-00000"}, *m["ranks"][1:]]})
    reseal(path)


def linked(path):
    other = path.parent.parent / "elsewhere"
    shutil.move(path / "rank-00001", other)
    (path / "rank-00001").symlink_to(other)


def swapped_keys(path):
    def swap(s):
        s["pieces"][0]["key"], s["pieces"][1]["key"] = s["pieces"][1]["key"], s["pieces"][0]["key"]
        return s
    edit_json(path / "rank-00000" / SHARD, swap)


def emptied_files(path, sealed=False):
    edit_json(path / "rank-00000" / SHARD, lambda s: {**s, "files": {}})
    flip(path / "rank-00000" / DATA)
    if sealed:
        reseal(path)


def another_run(path):
    edit_json(path / "rank-00002" / SHARD, lambda s: {**s, "run": "f" * 32})
    reseal(path)


RNG_ONLY = "rank-00001"  # DP rank 1 of stage 0: only its RNG state


@pytest.mark.parametrize("tamper, message", [
    (outside, r"ranks\[0\] must be \{'dir': 'rank-00000'"),
    (linked, "rank-00001 is a symbolic link or lies outside"),
    (swapped_keys, "rank-00000/SHARD.json is corrupt or was edited"),
    (emptied_files, "rank-00000/SHARD.json is corrupt or was edited"),
    (lambda p: emptied_files(p, sealed=True), "rank-00000/SHARD.json lists the files \\[\\]: a rank's shard"),
    (lambda p: (edit_json(p / "rank-00000" / SHARD, lambda s: {k: v for k, v in s.items() if k != "files"}),
                reseal(p)), "rank-00000/SHARD.json: field 'files' must be a table"),
    (lambda p: (edit_json(p / MANIFEST, lambda m: {**m, "step": 3}), reseal(p)),
     "COMPLETE.json says step 3 but its directory is 'step-00000002'"),
    (lambda p: edit_json(p / MANIFEST, lambda m: {**m, "plan": {**m["plan"], "lr": 1.0}}),
     "COMPLETE.json was changed after it was written"),
    (lambda p: edit_json(p / MANIFEST, lambda m: {**m, "step": "four"}),
     "COMPLETE.json: field 'step' must be an integer >= 0, got 'four'"),
    (lambda p: edit_json(p / MANIFEST, lambda m: {k: v for k, v in m.items() if k != "layout"}),
     "COMPLETE.json: field 'layout' must be an object"),
    (lambda p: (p / MANIFEST).write_text("[1, 2]"), "COMPLETE.json holds a JSON list, expected an object"),
    (another_run, "rank-00002/SHARD.json was written by run ffff"),
    (lambda p: (p / "rank-00000" / "extra.distcp").write_bytes(b"x"),
     "rank-00000 holds files its SHARD.json does not list: extra.distcp"),
    (lambda p: flip(p / RNG_ONLY / DATA), f"{RNG_ONLY}/{DATA} is corrupt"),
    (lambda p: (p / RNG_ONLY / DATA).write_bytes(b"PK"), f"{RNG_ONLY}/{DATA} is 2 bytes"),
    (lambda p: (p / RNG_ONLY / DATA).unlink(), f"{RNG_ONLY} holds no file {DATA} that its SHARD.json lists"),
])
def test_a_tampered_checkpoint_is_refused_naming_the_file(runs, tmp_path, tamper, message):
    path = copy(runs[2], tmp_path)
    verify_checkpoint(path)  # the untouched copy is fine
    tamper(path)
    with pytest.raises(CheckpointError, match=message):
        verify_checkpoint(path)


# ------------------------------------------------------------------ forged and resealed: no code runs
def plant(path, rel, marker):
    """A pickle as the checkpoint's file ``rel``, every hash that vouches for it recomputed."""
    f = path / rel
    f.write_bytes(pickle.dumps(Planted(marker)))
    if rel == MANIFEST:
        return
    if f.name != SHARD:  # a data file: listed in its rank's table
        edit_json(f.parent / SHARD, lambda s: {**s, "files": {**s["files"], f.name: {
            "bytes": f.stat().st_size, "sha256": sha256(f)}}})
    reseal(path)


def split(path):
    """An equivalent forgery: rank 0's first 2-D model piece stored as two pieces (its halves
    along dim 0), resealed; returns the two pieces' keys."""
    keys = []

    def halve(s):
        a = next(p for p in s["pieces"] if p["kind"] == "model" and len(p["sizes"]) == 2)
        e, half = s["tensors"][a["key"]], a["sizes"][0] // 2
        sizes, b = [half, a["sizes"][1]], {**a, "key": a["key"] + "/b"}
        s["tensors"][a["key"]] = {**e, "shape": sizes, "bytes": e["bytes"] // 2}
        s["tensors"][b["key"]] = {**e, "shape": sizes, "at": e["at"] + e["bytes"] // 2,
                                  "bytes": e["bytes"] // 2}
        a["sizes"], b["sizes"] = sizes, sizes
        b["offsets"] = [a["offsets"][0] + half, a["offsets"][1]]
        s["pieces"].append(b)
        keys.extend([a["key"], b["key"]])
        return s
    edit_json(path / "rank-00000" / SHARD, halve)
    reseal(path)
    return keys


def moved(path, change):
    """``split``, then ``change(pieces by key, a's key, b's key)`` on rank 0's SHARD.json, resealed."""
    a, b = split(path)

    def edit(s):
        change({p["key"]: p for p in s["pieces"]}, a, b)
        return s
    edit_json(path / "rank-00000" / SHARD, edit)
    reseal(path)


def copied_offsets(pieces, a, b):  # attack F11: one piece given another's offsets
    pieces[b]["offsets"] = list(pieces[a]["offsets"])


def grown(pieces, a, b):  # the tensor one row taller than its pieces: a gap
    for key in (a, b):
        pieces[key]["shape"] = [pieces[key]["shape"][0] + 1, *pieces[key]["shape"][1:]]


def beyond(pieces, a, b):
    pieces[b]["offsets"] = [pieces[b]["offsets"][0] + 1, pieces[b]["offsets"][1]]


@pytest.mark.parametrize("forge, message", [
    (lambda p, m: plant(p, "rank-00000/.metadata", m), r"lists the files \['.metadata', 'tensors.bin'\]"),
    (lambda p, m: plant(p, f"rank-00000/{DATA}", m), f"its tensors fill [0-9]+ bytes of {DATA}, which is"),
    (lambda p, m: plant(p, f"rank-00000/{SHARD}", m), f"rank-00000/{SHARD} is corrupt .not valid JSON"),
    (lambda p, m: plant(p, MANIFEST, m), f"{MANIFEST} is corrupt .not valid JSON"),
    (lambda p, m: moved(p, copied_offsets), r"pieces of model .* in rank-00000 overlap .position "
                                            r"\[0, 0\] is stored 2 times"),
    (lambda p, m: moved(p, grown), r"the pieces of model .* hold [0-9]+ of its [0-9]+ elements: a gap"),
    (lambda p, m: moved(p, beyond), r"reaches outside its tensor's shape"),
    (lambda p, m: (edit_json(p / MANIFEST, lambda x: {**x, "format": "parlab-3d-checkpoint/2"}),
                   reseal(p)), "its shards are torch.distributed.checkpoint pickles"),
])
def test_a_forged_checkpoint_runs_no_code_and_is_refused_before_any_rank_starts(
        runs, tmp_path, monkeypatch, capsys, forge, message):
    import parlab.comm
    from parlab.train import main

    path, marker = copy(runs[2], tmp_path), tmp_path / "marker"
    forge(path, marker)
    monkeypatch.setattr(parlab.comm, "launch", lambda *a, **k: pytest.fail("a rank was started"))
    argv = ["--dp", "2", "--pp", "2", "--layers", "4", "--hidden", "32", "--seq-len", "16",
            "--schedule", "interleaved", "--zero1", "--steps", str(STEPS), "--wide",
            "--checkpoint-dir", str(tmp_path / "ck"), "--resume"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err
    assert not marker.exists()  # nothing was unpickled
    with pytest.raises(CheckpointError, match=message):
        verify_checkpoint(path)


def test_an_equivalent_forgery_resumes_and_a_planted_pickle_is_read_as_bytes(runs, tmp_path):
    from parlab.parallel.trainer.checkpoint.tensors import read_tensors

    path = copy(runs[2], tmp_path)
    split(path)
    verify_checkpoint(path)  # two pieces that tile the tensor: a valid checkpoint
    f, marker = tmp_path / "planted.bin", tmp_path / "marker"
    f.write_bytes(pickle.dumps(Planted(marker)))
    index = {"k": {"dtype": "uint8", "shape": [f.stat().st_size], "at": 0, "bytes": f.stat().st_size}}
    assert bytes(read_tensors(f, index, ["k"])["k"].tolist()) == f.read_bytes()
    assert not marker.exists()


def test_a_resume_with_another_learning_rate_is_refused(runs):
    path = step_dir(runs[2], SAVED)
    manifest, _ = read_checkpoint(path)
    assert manifest["plan"]["lr"] == PLAN.lr and manifest["plan"]["schedule"] == "interleaved"
    with pytest.raises(ValueError, match="saved with lr=0.003 but this run has lr=0.001"):
        check_compatible(path, manifest, CFG, replace(PLAN, lr=1e-3), optimizer_settings())
    with pytest.raises(ValueError, match=r"eps=1e-08 but this run has eps=1e-06"):
        check_compatible(path, manifest, CFG, PLAN, {**optimizer_settings(), "eps": 1e-6})


def read_only_resume(comm, d, save_every):
    """Resume at SAVED with ``d`` read-only on this rank (``ReadOnly``): the losses, or the refusal."""
    with ReadOnly(d):
        try:
            return train_3d(comm, CFG, PLAN, STEPS, Checkpointing(d, save_every, resume=True)).losses
        except CheckpointError as err:
            return str(err)


def test_a_read_only_checkpoint_resumes_without_saving_and_a_saving_resume_is_refused(
        runs, world4, tmp_path):
    full, _, d = runs
    work = tmp_path / "ck"
    shutil.copytree(d, work)
    files = {f: (f.stat().st_size, f.stat().st_mtime_ns) for f in work.rglob("*")}
    assert world4.run(read_only_resume, str(work), 0) == [full.losses[SAVED:]] * 4  # attack R1
    said = world4.run(read_only_resume, str(work), 1)
    assert all("cannot be written (Read-only file system): this run saves" in m for m in said), said
    assert {f: (f.stat().st_size, f.stat().st_mtime_ns) for f in work.rglob("*")} == files


# ------------------------------------------------------------------ one directory, one run
ONE = SimpleNamespace(rank=0, world_size=1)  # claim's communicator on one rank


def test_a_directory_is_owned_by_one_run_for_its_life(runs, tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(runs[2], d)
    run = read_checkpoint(step_dir(d, SAVED))[0]["run"]
    with owning(ONE, Checkpointing(str(d), 1, resume=True)) as mine:
        assert mine == run  # a resume continues the run it resumes
        with pytest.raises(CheckpointError, match=f"{d} is in use by another run .pid {os.getpid()}"):
            DirectoryLock(d).acquire()
    with owning(ONE, Checkpointing(str(tmp_path / "new"), 1)) as fresh:
        assert fresh != run and len(fresh) == 32
    DirectoryLock(d).acquire().release()  # released when the run ends
    with pytest.raises(CheckpointError, match="already holds checkpoints"):
        claim(ONE, d, resume=False)


def test_a_save_refuses_a_shard_another_run_wrote(runs, tmp_path):
    path = copy(runs[2], tmp_path)
    run = read_checkpoint(path)[0]["run"]
    assert [e["dir"] for e in shard_entries(path, 4, run)] == [f"rank-{r:05d}" for r in range(4)]
    with pytest.raises(CheckpointError, match="rank-00000/SHARD.json was written by run .* but "
                                              "checkpoint .* belongs to run 0000"):
        shard_entries(path, 4, "0" * 32)


def test_a_symlinked_partial_checkpoint_is_refused_not_followed(tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep").write_text("x")
    partial = tmp_path / "ck" / f"step-00000004{PARTIAL}"
    partial.parent.mkdir()
    partial.symlink_to(target)
    with pytest.raises(CheckpointError, match=f"{partial} is a symbolic link"):
        check_directory(partial.parent)
    with pytest.raises(CheckpointError, match=f"{partial} is a symbolic link or a file"):
        _fresh_partial(partial)
    assert (target / "keep").exists()


def test_a_full_disk_is_named_and_torch_hidden_enospc_is_recognised(runs, monkeypatch, tmp_path):
    where = tmp_path / "step-00000004.partial"
    err = write_error(OSError(errno.ENOSPC, "No space left on device"), where, runs[2])
    assert "no space left on device (ENOSPC)" in str(err) and "step-00000002 is intact" in str(err)
    torch_err = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 512 vs 0")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: SimpleNamespace(total=1, used=1, free=0))
    assert "(ENOSPC)" in str(write_error(torch_err, where, runs[2]))


def full_disk(comm, d):
    """Resume at SAVED and train on; every write of the next checkpoint's tensors finds the disk
    full (``open`` of the module that writes them, shadowed on this rank)."""
    from parlab.parallel.trainer.checkpoint import tensors

    def no_space(path, mode="r", *args, **kwargs):
        if "r" not in mode:
            raise OSError(errno.ENOSPC, "No space left on device")
        return open(path, mode, *args, **kwargs)

    tensors.open = no_space
    try:
        train_3d(comm, CFG, PLAN, STEPS, Checkpointing(d, SAVED, resume=True))
    except CheckpointError as err:
        return str(err)
    finally:
        del tensors.open
    return "saved"


def test_a_full_disk_while_saving_leaves_the_earlier_checkpoint_intact(runs, world4, tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(runs[2], d)
    messages = world4.run(full_disk, str(d))
    assert all("no space left on device (ENOSPC)" in m and "step-00000002 is intact" in m
               for m in messages), messages
    assert complete_steps(d) == [SAVED]
    verify_checkpoint(step_dir(d, SAVED))
    DirectoryLock(d).acquire().release()  # the failed run let go of the directory


def claims(comm, fresh, taken):
    """What every rank learns from rank 0's claims: a fresh directory's run id, and the refusal
    of a directory that holds checkpoints."""
    lock, run = claim(comm, fresh, resume=False)
    if lock is not None:
        lock.release()
    try:
        claim(comm, taken, resume=False)
    except CheckpointError as err:
        return run, str(err)


def test_on_the_torch_backend_every_rank_learns_the_run_id_and_the_refusal(tmp_path):
    (tmp_path / "taken" / "step-00000001").mkdir(parents=True)
    got = launch(claims, 2, str(tmp_path / "fresh"), str(tmp_path / "taken"), backend="torch",
                 timeout=60)
    assert got[0] == got[1] and len(got[0][0]) == 32
    assert "already holds checkpoints (latest: step 1)" in got[0][1]


# last: a run that fails replaces the World's ranks, and nothing runs after this one
def test_a_corrupt_shard_is_an_error_naming_the_file(runs, world4, tmp_path):
    _, _, d = runs
    work = tmp_path / "ck"
    shutil.copytree(d, work)
    # DP rank 1's shard holds only its RNG state: read by that rank alone, verified all the same
    shard = step_dir(work, SAVED) / RNG_ONLY / DATA
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(RankError, match=f"{shard}.*is corrupt"):
        resume(world4, work, PLAN)

"""``python -m parlab.train``: the tiny GPT trained with dp x tp x pp, here or under torchrun.

    python -m parlab.train --dp 2 --tp 2 --pp 2 --steps 20                  # 8 local processes
    python -m parlab.train --dp 2 --tp 1 --pp 2 --steps 20 --backend torch  # the same over gloo
    torchrun --standalone --nproc_per_node=8 -m parlab.train --dp 2 --tp 2 --pp 2 --steps 20
    python -m parlab.train ... --checkpoint-dir ckpt --save-every 5          # sharded checkpoints
    python -m parlab.train ... --checkpoint-dir ckpt --resume                # from the latest one

Without torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) it starts
dp x tp x pp processes itself (``parlab.comm.launch``, backend 'local' or 'torch'); under
torchrun each process joins torchrun's process group (``parlab.comm.from_torchrun``: gloo on
CPU, NCCL with ``--device cuda``) and runs the same worker. Rank 0 prints one
log line per step (loss, tokens/s, time by phase; ``--wide``: with a progress bar and the phases'
full names), and at the end every rank's bytes held and
sent beside the cost model's prediction. ``--log-json FILE`` writes one JSON line per step.
``--kill-at STEP[:RANK[:save]]`` is fault injection for tests: that rank SIGKILLs itself at the
start of that step (or while saving that step's checkpoint).

Before any rank starts, the arguments are checked (``checks``: one line and exit status 2
for each broken rule, before torch is imported), the run's memory is estimated with the cost
model and refused if it cannot fit this machine, and the checkpoint directory is checked (not
held by another run, a resume's checkpoint complete and compatible, no old checkpoints under a
fresh run). Under torchrun that is before a rank joins torchrun's group: torchrun has started
its processes already, so a wrong ``--nproc_per_node`` is told in one line by rank 0 (with the
``--nproc_per_node`` that fits) and torchrun then adds its own report of the failed processes
(its ChildFailedError traceback; nothing its processes do can stop that report). From Python, ``parlab.comm.torchrun.run_torchrun(["-m", "parlab.train", ...], n)``
starts it under torchrun with torchrun's log directory in a temporary directory of its own.
Every refusal is said once, by rank 0 (``refuse_once``).

A run that ends early ends in one line (``stop``): Ctrl-C (status 130), a loss that is no
longer finite or a ``--log-json`` that can no longer be written (status 1), each naming the last
complete checkpoint and the command that resumes it. A torchrun worker dies with its agent.
"""

from __future__ import annotations

import argparse
import os
import sys

from parlab.train.checks import env_rank
from parlab.train.output import Progress, RankZeroPlain
from parlab.train.stop import (
    INTERRUPTED,
    die_with_parent,
    signals_as_interrupt,
    stop_line,
    wait_for_torchrun_stop,
)

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
USAGE = "python -m parlab.train --steps N [--dp N --tp N --pp N ...] (--help: every option)"


class Parser(argparse.ArgumentParser):
    """argparse with a one-line usage on error (not every option)."""

    def error(self, message: str):
        self.exit(2, f"usage: {USAGE}\n{self.prog}: error: {message}\n")


def under_torchrun() -> bool:
    """Whether this process was started by torchrun (its rendezvous variables are set)."""
    return all(k in os.environ for k in TORCHRUN_VARS)


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="python -m parlab.train", description=__doc__.split("\n")[0], usage=USAGE)
    grid = ap.add_argument_group("parallelism")
    grid.add_argument("--dp", type=int, default=1, help="data-parallel degree")
    grid.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (innermost)")
    grid.add_argument("--pp", type=int, default=1, help="pipeline stages")
    grid.add_argument("--schedule", default="1f1b", help="naive, gpipe, 1f1b, interleaved, zb-h1")
    grid.add_argument("--micro-batches", type=int, default=2, help="micro-batches per step (m)")
    grid.add_argument("--chunks", type=int, default=2, help="model chunks per rank (interleaved)")
    grid.add_argument("--zero1", action="store_true", help="ZeRO-1 over the DP group")
    grid.add_argument("--gpus-per-node", type=int, default=None,
                      help="processes per node (default: torchrun's LOCAL_WORLD_SIZE, else all)")
    grid.add_argument("--tp-inside-node", action="store_true",
                      help="refuse a layout whose TP groups span two nodes")
    run = ap.add_argument_group("training")
    run.add_argument("--steps", type=int, required=True, help="train until this many steps are done")
    run.add_argument("--batch-size", type=int, default=8, help="global batch, sequences per step")
    run.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
    run.add_argument("--seed", type=int, default=0, help="the data stream's seed")
    model = ap.add_argument_group("model (TinyGPT)")
    model.add_argument("--layers", type=int, default=2)
    model.add_argument("--hidden", type=int, default=64)
    model.add_argument("--heads", type=int, default=4)
    model.add_argument("--seq-len", type=int, default=32)
    eng = ap.add_argument_group("engine")
    eng.add_argument("--backend", choices=("local", "torch"), default="local",
                     help="communicator of the processes started here (torchrun: always torch)")
    eng.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                     help="cuda: NCCL, one GPU per process (torchrun only)")
    eng.add_argument("--timeout", type=float, default=120.0, help="seconds a rank may wait in one call")
    ck = ap.add_argument_group("checkpoints")
    ck.add_argument("--checkpoint-dir", default=None)
    ck.add_argument("--save-every", type=int, default=None,
                    help="save every K steps (default 0: never)")
    ck.add_argument("--resume", action="store_true", help="start from the latest complete checkpoint")
    out = ap.add_argument_group("output")
    out.add_argument("--log-json", default=None, help="append one JSON line per step to FILE")
    out.add_argument("--quiet", action="store_true", help="no progress bar or step lines")
    out.add_argument("--wide", action="store_true",
                     help="step lines with every phase by its full name (default: under 100 columns)")
    out.add_argument("--kill-at", default=None, help=argparse.SUPPRESS)
    return ap


def parse_fault(text: str | None, steps: int, world: int, done: int = 0):
    """'STEP[:RANK[:save]]' -> a train.Fault (None for None), by ``checks.check_fault``."""
    from parlab.parallel.trainer import Fault
    from parlab.train.checks import check_fault

    fault = check_fault(text, steps, world, done)
    return None if fault is None else Fault(*fault)


def cli_worker(comm, config, plan, steps, checkpoint, progress, fault, device="cpu"):
    """What every rank runs: train, then the per-rank table on rank 0."""
    from parlab.parallel.trainer import gather_summary, summary_table, train_3d

    report = train_3d(comm, config, plan, steps, checkpoint=checkpoint, on_step=progress,
                      fault=fault, device=device)
    rows = gather_summary(comm, report, device)
    if comm.rank == 0 and not progress.quiet:
        start = f" (resumed at step {report.start_step})" if report.start_step else ""
        print(f"done: {steps} steps{start}, final loss {report.losses[-1]:.6f}" if report.losses
              else f"nothing to do: the checkpoint is already at step {report.start_step}")
        print(summary_table(rows, comm.backend, wide=progress.wide))
    return report


def preflight(checkpoint, config, plan, probe_lock: bool) -> int | None:
    """The checkpoint directory, before any rank starts: not held by another run, and writable if
    the run saves (``probe_lock``: only one process of a job probes), a resume has a complete,
    compatible checkpoint whose pieces tile every tensor (its step is returned), a fresh run
    finds no old one (None)."""
    from parlab.parallel.trainer.checkpoint import (
        check_compatible,
        check_directory,
        latest_step,
        optimizer_settings,
        probe,
        read_checkpoint,
        refuse_overwrite,
        saves,
        step_dir,
    )

    check_directory(checkpoint.directory)
    if probe_lock:
        probe(checkpoint.directory, write=saves(checkpoint))
    if checkpoint.resume:
        path = step_dir(checkpoint.directory, latest_step(checkpoint.directory))
        manifest, _ = read_checkpoint(path)
        check_compatible(path, manifest, config, plan, optimizer_settings())
        return int(manifest["step"])
    refuse_overwrite(checkpoint.directory)
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    torchrun = under_torchrun()
    try:
        return run(args, argv, torchrun)
    except KeyboardInterrupt:  # Ctrl-C (torchrun: or its SIGTERM): one line, not a traceback per rank
        if speaks(torchrun):
            refuse(stop_line("interrupted", args.checkpoint_dir, argv, torchrun), args.wide)
        return INTERRUPTED


def speaks(torchrun: bool) -> bool:
    """Whether this process says what is wrong: outside torchrun always; under torchrun rank 0,
    or a process whose RANK is not a rank of its WORLD_SIZE (an error of its own)."""
    return not torchrun or env_rank(os.environ) in (None, 0)


def refuse_once(err, args, torchrun: bool) -> int:
    """A refusal, the same on every rank of a torchrun job: said once, by rank 0 (another rank
    waits for torchrun to stop it, so that rank 0 is the failure torchrun names). Status 2."""
    if speaks(torchrun):
        refuse(err, args.wide)
    elif "TORCHELASTIC_RUN_ID" in os.environ:
        wait_for_torchrun_stop(args.timeout)
    return 2


def run(args, argv: list[str], torchrun: bool) -> int:
    """``main`` once parsed: check, then train here (``launch``) or as one torchrun rank."""
    try:  # plain checks first: no torch imported yet
        from parlab.train.checks import check_args

        check_args(args, os.environ, torchrun)
    except ValueError as err:
        return refuse_once(err, args, torchrun)
    from parlab.parallel.model import GPTConfig
    from parlab.parallel.trainer import Checkpointing, TrainingStopped, TrainPlan
    from parlab.train.checks import check_fits

    try:
        config = GPTConfig(n_layer=args.layers, hidden=args.hidden, n_head=args.heads,
                           seq_len=args.seq_len)
        plan = TrainPlan(dp=args.dp, tp=args.tp, pp=args.pp, batch_size=args.batch_size,
                         micro_batches=args.micro_batches, schedule=args.schedule,
                         chunks=args.chunks, lr=args.lr, zero1=args.zero1, data_seed=args.seed)
        plan.check(config)
        local = int(os.environ.get("LOCAL_WORLD_SIZE", plan.world)) if torchrun else plan.world
        check_fits(config, plan, local)
        checkpoint, done = None, None
        if args.checkpoint_dir is not None:
            save_every = args.save_every
            if args.resume and save_every is None:  # keep saving as the run did (its manifest)
                from parlab.parallel.trainer.checkpoint import saved_every

                save_every = saved_every(args.checkpoint_dir)
            checkpoint = Checkpointing(args.checkpoint_dir, save_every or 0, args.resume)
            done = preflight(checkpoint, config, plan, probe_lock=speaks(torchrun))
            if args.resume and save_every is None and speaks(torchrun):  # checked, then said
                refuse("note: --resume without --save-every saves no further checkpoint (this "
                       "checkpoint does not record the run's --save-every); add --save-every K "
                       "to keep saving", args.wide)
            if done is not None and done >= args.steps:
                if speaks(torchrun):
                    print(f"nothing to do: the checkpoint in {args.checkpoint_dir} is at step {done} "
                          f"and --steps is {args.steps} (raise --steps to train further)")
                return 0
        fault = parse_fault(args.kill_at, args.steps, plan.world, done or 0)
        progress = Progress(args.steps, args.quiet, args.log_json, args.wide)
        if args.tp_inside_node:
            per_node = args.gpus_per_node or int(os.environ.get("LOCAL_WORLD_SIZE", plan.world))
            plan.grid.check(gpus_per_node=per_node, tp_inside_node=True)
        if args.device == "cuda":
            check_cuda(torchrun)
        if torchrun:
            plan.grid.check(world=int(os.environ["WORLD_SIZE"]))  # before joining the group
    except (ValueError, FileNotFoundError) as err:
        return refuse_once(err, args, torchrun)
    if torchrun:
        return torchrun_rank(args, argv, config, plan, checkpoint, progress, fault)
    from parlab.comm import CommError, launch

    try:
        with RankZeroPlain():
            launch(cli_worker, plan.world, config, plan, args.steps, checkpoint, progress,
                   fault, backend=args.backend, timeout=args.timeout, stream=True)
    except CommError as err:
        if isinstance(err.__cause__, TrainingStopped):  # the run stopped itself: its own line
            refuse(stop_line(str(err.__cause__), args.checkpoint_dir, argv, False), args.wide)
        else:
            refuse(f"the run failed: {err}", args.wide)
        return 1
    return 0


def torchrun_rank(args, argv, config, plan, checkpoint, progress, fault) -> int:
    """One rank of a torchrun job: dies with its agent, joins the group, trains. Ctrl-C (and
    the agent's SIGTERM after it) and a run that stops itself are one line, by rank 0."""
    from parlab.comm import from_torchrun
    from parlab.comm.errors import connection_lost
    from parlab.parallel.trainer import TrainingStopped

    die_with_parent()  # kill -9 of torchrun must not leave this rank training on its own
    with signals_as_interrupt() as signals:
        comm = from_torchrun("nccl" if args.device == "cuda" else "gloo", args.timeout)
        try:
            cli_worker(comm, config, plan, args.steps, checkpoint, progress, fault, args.device)
        except TrainingStopped as err:
            if speaks(True):
                refuse(stop_line(str(err), args.checkpoint_dir, argv, True), args.wide)
            return 1
        except Exception as err:  # noqa: BLE001 - what a stop signal became (DCP wraps it) or
            # a peer it ended first: this rank's share of the stop; anything else is raised
            if signals.fired or (connection_lost(str(err)) and signals.wait(5.0)):
                raise KeyboardInterrupt from None
            raise
    return 0


def refuse(err, wide: bool) -> None:
    """One message on stderr: 'parlab.train: ' and the error, folded at 100 columns (its
    continuation lines indented two spaces) unless ``--wide``."""
    from parlab.cli.fit import fit

    print(fit(f"parlab.train: {err}", wide=wide), file=sys.stderr, flush=True)


def check_cuda(torchrun: bool) -> None:
    """--device cuda: a GPU torch can see, and torchrun's one process per GPU."""
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"--device cuda: torch {torch.__version__} sees no CUDA device on this "
                         f"machine; use --device cpu")
    if not torchrun:
        raise ValueError("--device cuda runs under torchrun (NCCL, one GPU per process); "
                         "the processes started here use the CPU")


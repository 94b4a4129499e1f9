"""What ``python -m parlab.train`` checks before any rank starts: its arguments, the layout
rules of a 3D run and torchrun's environment (``check_args``: plain Python, before torch is
imported), and whether the run fits this machine's memory (``check_fits``: the cost model's
estimate against what is available). Each failure is one ValueError naming the flag or
variable, its value and the rule. The rules of a 3D layout live once in
``parlab.layout.check_layout``, which ``parlab.parallel.trainer.TrainPlan.check`` calls too.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import socket
import stat
from pathlib import Path

from parlab.layout import check_layout

TORCHRUN_INTS = {"RANK": 0, "WORLD_SIZE": 1, "LOCAL_RANK": 0, "LOCAL_WORLD_SIZE": 1, "MASTER_PORT": 1}


def _at_least(flag: str, value, low: int) -> None:
    if value is not None and value < low:
        rule = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise ValueError(f"{flag} must be {rule}, got {value}")


def _positive_number(flag: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{flag} must be a positive finite number, got {value}")


def env_rank(environ) -> int | None:
    """This process's RANK as a number ('00' is rank 0), or None where it is absent, not an
    integer or not below WORLD_SIZE (then the process itself must say what is wrong)."""
    try:
        rank, world = int(environ["RANK"]), int(environ.get("WORLD_SIZE", "1"))
    except (KeyError, ValueError):
        return None
    return rank if 0 <= rank < world else None


def check_env(environ, torchrun: bool) -> None:
    """torchrun's variables are integers in range (LOCAL_WORLD_SIZE is read also outside it),
    RANK < WORLD_SIZE and LOCAL_RANK < LOCAL_WORLD_SIZE, MASTER_PORT a port and MASTER_ADDR a
    name that resolves (else the group's rendezvous waits ~35 s and fails with a traceback)."""
    names = TORCHRUN_INTS if torchrun else {"LOCAL_WORLD_SIZE": 1}
    got = {}
    for name, low in names.items():
        if name not in environ:
            continue
        text = environ[name]
        try:
            got[name] = int(text)
        except ValueError:
            raise ValueError(f"environment variable {name} must be an integer, got {text!r}") from None
        if got[name] < low:
            raise ValueError(f"environment variable {name} must be >= {low}, got {got[name]}")
    if not torchrun:
        return
    for rank, size in (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE")):
        if rank in got and size in got and got[rank] >= got[size]:
            raise ValueError(f"environment variable {rank}={got[rank]} must be < {size}={got[size]} "
                             f"(the ranks are 0..{size} - 1)")
    if got["MASTER_PORT"] > 65535:
        raise ValueError(f"environment variable MASTER_PORT must be a port in 1..65535, "
                         f"got {got['MASTER_PORT']}")
    addr = environ["MASTER_ADDR"]
    try:
        socket.getaddrinfo(addr, got["MASTER_PORT"], type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:  # socket.gaierror; an IDNA-invalid name
        why = getattr(err, "strerror", None) or err
        raise ValueError(f"environment variable MASTER_ADDR={addr!r} does not resolve ({why}): "
                         f"the processes of the group could never meet there") from None


def check_path_flags(args) -> None:
    """--checkpoint-dir is a directory path (not '', not a file); --log-json a file that can
    be written (``check_log_target``)."""
    ck = args.checkpoint_dir
    if ck is not None:
        if ck.strip() == "":
            raise ValueError("--checkpoint-dir must be a directory path, got '' (checkpoints would "
                             "land in the current directory)")
        if Path(ck).exists() and not Path(ck).is_dir():
            raise ValueError(f"--checkpoint-dir {ck} is a file, not a directory")
    elif args.resume or args.save_every:
        raise ValueError("--resume and --save-every need --checkpoint-dir")
    if args.log_json is not None:
        check_log_target(args.log_json)


def check_log_target(log: str) -> None:
    """--log-json names a regular file that can be written, or a new file in a writable
    directory: a FIFO would block the run forever and a device (/dev/full) fail mid-run."""
    path = Path(log)
    if log.strip() == "" or path.is_dir():
        raise ValueError(f"--log-json must be a file path, got {log!r}"
                         + (" (a directory)" if log.strip() else ""))
    if path.exists():
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
                    stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
            raise ValueError(f"--log-json {log} is {kind}: it must be a regular file (or a new one)")
        if not os.access(path, os.W_OK):
            raise ValueError(f"--log-json {log}: the file is not writable")
    elif not path.parent.is_dir():
        raise ValueError(f"--log-json {log}: its directory {path.parent} does not exist")
    elif not os.access(path.parent, os.W_OK | os.X_OK):
        raise ValueError(f"--log-json {log}: its directory {path.parent} is not writable")


def check_fault(text: str | None, steps: int, world: int,
                done: int = 0) -> tuple[int, int, str] | None:
    """--kill-at STEP[:RANK[:save]] (fault injection): (step, rank, 'step' or 'save'), with
    ``done`` < STEP <= --steps (``done``: the step a resume starts from) and
    0 <= RANK < dp x tp x pp (another one would never fire)."""
    if text is None:
        return None
    parts = text.split(":")
    try:
        if len(parts) > 3:
            raise ValueError
        step, rank = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ValueError(f"--kill-at must be STEP[:RANK[:save]], got {text!r}") from None
    during = parts[2] if len(parts) > 2 else "step"
    if during not in ("step", "save"):
        raise ValueError(f"--kill-at's third field must be 'save' (or absent), got {during!r}")
    if not done < step <= steps:
        after = f" (the checkpoint resumed is at step {done})" if done else ""
        raise ValueError(f"--kill-at's step must be in {done + 1}..--steps={steps}{after}, got "
                         f"{step} (it would never fire)")
    if not 0 <= rank < world:
        raise ValueError(f"--kill-at's rank must be in 0..{world - 1} (dp x tp x pp = {world} "
                         f"ranks), got {rank} (it would never fire)")
    return step, rank, during


def check_schedule(args) -> str:
    """--schedule names one of ``parlab.schedules.SCHEDULES`` (any case, _ for -): the key."""
    from parlab.schedules import SCHEDULES

    key = str(args.schedule).lower().replace("_", "-")
    if key not in SCHEDULES:
        close = difflib.get_close_matches(key, SCHEDULES, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"--schedule must be one of {', '.join(SCHEDULES)}, got "
                         f"{args.schedule!r}{hint}")
    return key


def check_plan_flags(args, environ, torchrun: bool) -> None:
    """The layout of the flags (``check_layout``) and, under torchrun, dp x tp x pp against
    its WORLD_SIZE, before torch is imported (the vocabulary's size is checked later)."""
    from parlab.layout import Grid
    from parlab.schedules import make_schedule

    key = check_schedule(args)
    if args.hidden % args.heads:
        raise ValueError(f"--hidden {args.hidden} must be divisible by --heads {args.heads} "
                         f"(each head gets hidden / heads dims)")
    schedule = make_schedule(key, args.pp, args.micro_batches, args.chunks)
    check_layout(dp=args.dp, tp=args.tp, pp=args.pp, batch_size=args.batch_size, m=schedule.m,
                 v=schedule.v, schedule=key, n_layer=args.layers, n_head=args.heads,
                 hidden=args.hidden)  # the MLP's width is a multiple of hidden: tp | hidden is enough
    if torchrun:
        check_torchrun_world(Grid(dp=args.dp, tp=args.tp, pp=args.pp), environ)


def check_torchrun_world(grid, environ) -> None:
    """dp x tp x pp against the processes torchrun started (WORLD_SIZE = nodes x
    --nproc_per_node), with the --nproc_per_node that fits. The check runs inside torchrun's
    processes (nothing of ours runs before torchrun starts them), so torchrun reports the failed
    processes after this line: the line says so, and that it is the cause."""
    world, local = int(environ["WORLD_SIZE"]), int(environ.get("LOCAL_WORLD_SIZE", environ["WORLD_SIZE"]))
    try:
        grid.check(world=world)
    except ValueError as err:
        nodes = max(world // local, 1)
        fix = (f"start it with --nproc_per_node={grid.world // nodes}" if grid.world % nodes == 0
               else f"dp x tp x pp must be a multiple of its {nodes} nodes")
        raise ValueError(f"{err}: torchrun started {world} processes ({nodes} node{'s' * (nodes > 1)} x "
                         f"--nproc_per_node={local}); {fix} (torchrun's report of its failed "
                         f"processes follows this line)") from None


def check_resume(args) -> None:
    """--resume needs a checkpoint to resume: a quick look for any ``step-N`` directory (the
    checkpoint code checks it is complete, after torch is imported)."""
    if not args.resume or args.checkpoint_dir is None:
        return
    d = Path(args.checkpoint_dir)
    if not d.is_dir():
        raise ValueError(f"--resume: no checkpoint to resume: {args.checkpoint_dir} does not exist; "
                         f"start without --resume")
    if not any(re.fullmatch(r"step-\d+", p.name) and p.is_dir() for p in d.iterdir()):
        raise ValueError(f"--resume: no complete checkpoint in {args.checkpoint_dir}; refusing to "
                         f"start from scratch (start without --resume)")


def check_args(args, environ=os.environ, torchrun: bool = False) -> None:
    """Every argument of ``parlab.train.parser()``, before torch is imported."""
    for flag in ("steps", "dp", "tp", "pp", "micro_batches", "chunks", "batch_size", "layers",
                 "hidden", "heads", "seq_len", "gpus_per_node"):
        _at_least("--" + flag.replace("_", "-"), getattr(args, flag), 1)
    _at_least("--seed", args.seed, 0)
    _at_least("--save-every", args.save_every, 0)
    _positive_number("--lr", args.lr)
    _positive_number("--timeout", args.timeout)
    check_path_flags(args)
    check_env(environ, torchrun)
    check_plan_flags(args, environ, torchrun)
    check_fault(args.kill_at, args.steps, args.dp * args.tp * args.pp)
    check_resume(args)


# ---------------------------------------------------------------------------- memory
def available_memory() -> int | None:
    """Bytes this process may still allocate: the least of /proc/meminfo's MemAvailable and the
    cgroup's limit less its use (containers); None where neither is known."""
    found = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit, used in (("memory.max", "memory.current"),
                        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):
        try:
            cap = Path("/sys/fs/cgroup", limit).read_text().strip()
            if cap != "max" and int(cap) < 1 << 60:
                found.append(int(cap) - int(Path("/sys/fs/cgroup", used).read_text()))
        except (OSError, ValueError):
            continue
    return min(found) if found else None


def check_fits(config, plan, local_ranks: int, available: int | None = None) -> float:
    """Refuse a run whose ``local_ranks`` ranks on this machine need more memory than is
    available (``parlab.parallel.trainer.predict.run_memory``: model states + activations). Returns the bytes."""
    from parlab.parallel.trainer.predict import run_memory

    need = run_memory(config, plan, local_ranks)
    have = available_memory() if available is None else available
    if have is not None and need > have:
        ranks = f"{local_ranks} rank{'s' if local_ranks != 1 else ''}"
        raise ValueError(f"this run needs about {need / 2**30:,.1f} GiB for its {ranks} on this "
                         f"machine (cost model: weights, gradients, AdamW states, activations) but "
                         f"only {have / 2**30:,.1f} GiB is available: refusing to start; use fewer "
                         f"--layers, a smaller --hidden, or more nodes under torchrun")
    return need

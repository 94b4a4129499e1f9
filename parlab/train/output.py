"""What ``python -m parlab.train`` prints while it trains: rank 0's step line (short, or
``--wide`` with a progress bar), the JSON line per step of ``--log-json``, and rank 0's output
without the '[rank 0] ' that ``launch`` puts before each line it relays."""

from __future__ import annotations

import json
import sys

BAR_WIDTH = 20


SHORT_PHASES = {"pipeline": "pp", "tied embedding": "tied", "dp all-reduce": "dp",
                "optimizer": "opt", "checkpoint": "ckpt"}  # the step line's names (--wide: full)


def short_line(log) -> str:
    """A step in a short line (it fits 100 columns even with launch's '[rank 0] ' before it):
    the loss, tokens/s and the milliseconds of each phase that took one, by short name."""
    ms = " ".join(f"{SHORT_PHASES.get(k, k)} {v * 1e3:.0f}" for k, v in log.phases.items()
                  if round(v * 1e3))
    return f"loss {log.loss:.4f} | {log.tokens_per_s:,.0f} tok/s" + (f" | ms: {ms}" if ms else "")


class Progress:
    """Rank 0's per-step output: the step's line ('step 3/20 loss ...', short; ``wide``: a
    progress bar and every phase by its full name), and a JSON line per step."""

    def __init__(self, total: int, quiet: bool = False, json_path: str | None = None,
                 wide: bool = False):
        self.total, self.quiet, self.json_path, self.wide = total, quiet, json_path, wide

    def __call__(self, log) -> None:
        if not self.quiet and self.wide:
            done = round(BAR_WIDTH * log.step / self.total)
            bar = "#" * done + "." * (BAR_WIDTH - done)
            print(f"[{bar}] {log.step}/{self.total} {log.line()}", flush=True)
        elif not self.quiet:
            print(f"step {log.step}/{self.total} {short_line(log)}", flush=True)
        if self.json_path:
            row = {"step": log.step, "loss": log.loss, "seconds": log.seconds,
                   "tokens_per_s": log.tokens_per_s, "phases": log.phases}
            try:
                with open(self.json_path, "a") as f:
                    f.write(json.dumps(row) + "\n")
            except OSError as err:  # a full disk, a removed directory: the run stops, in one line
                from parlab.parallel.trainer import TrainingStopped

                raise TrainingStopped(f"--log-json {self.json_path}: writing step {log.step} "
                                      f"failed ({err.strerror or err}); the run stopped") from None


class RankZeroPlain:
    """``sys.stdout`` while the local ranks run: rank 0's lines (the step lines and the table,
    the trainer's own output) without the '[rank 0] ' that ``launch`` puts before each line it
    relays; another rank's output keeps its prefix, and stderr is untouched."""

    PREFIX = "[rank 0] "

    def __enter__(self):
        self.out = sys.stdout
        sys.stdout = self
        return self

    def __exit__(self, *exc) -> None:
        sys.stdout = self.out

    def write(self, text: str) -> int:
        lines = text.split("\n")
        self.out.write("\n".join(x.removeprefix(self.PREFIX) for x in lines))
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def __getattr__(self, name: str):  # fileno, isatty, encoding, ...: the real stdout's
        return getattr(self.out, name)

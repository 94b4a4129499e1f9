"""``parlab bench NAME``: run one benchmark, or ``all`` of them in turn.

A bench reports its figures with the machine's load; it exits 1 for a missed target only
with ``--check`` (for a suite or CI), 0 otherwise, so ``make bench`` on a busy laptop reports
instead of failing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import sys

from parlab.bench import BENCHES, conditions, load_average
from parlab.cli.fit import WIDE_HELP, fit, wrap_line

HELP = "run a benchmark: " + ", ".join(BENCHES) + " or all"
CHECK_HELP = "exit 1 when a stated target is missed (default: report only, exit 0)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", required=True, metavar="NAME")
    for name, module_name in BENCHES.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.add_argument("--check", action="store_true", help=CHECK_HELP)
        p.add_argument("--wide", action="store_true", help=WIDE_HELP)
        p.set_defaults(_bench=module, _parser=p)
    p = sub.add_parser("all", help="every benchmark with its defaults")
    p.add_argument("--check", action="store_true", help=CHECK_HELP)
    p.add_argument("--wide", action="store_true", help=WIDE_HELP)
    p.set_defaults(_bench=None, _parser=p)


def run(args: argparse.Namespace) -> int:
    if args._bench is not None:
        missed = _report(args._bench, args, args.wide)
    else:
        missed = 0
        for name, module_name in BENCHES.items():
            module = importlib.import_module(module_name)
            print(f"== parlab bench {name} ==", flush=True)
            p = argparse.ArgumentParser()
            module.add_arguments(p)
            missed |= _report(module, p.parse_args([]), args.wide)
    if missed:
        print("a target was missed" + ("" if args.check else
              " (a report, not a failure: `--check` makes it exit 1)"), flush=True)
    return 1 if missed and args.check else 0


def _report(module, args: argparse.Namespace, wide: bool = False) -> int:
    """Run one bench, then name the machine's load before and after it (one line, printed only
    once the bench has run: a bad option stays a one-line error); 1 if it missed a target.
    Its prose lines are wrapped to 100 columns as they come (``FittedLines``; ``wide``: not)."""
    before = conditions()
    with contextlib.nullcontext() if wide else FittedLines():
        missed = int(module.run(args) or 0)
    span = " (1, 5, 15 min)"
    after = load_average().removeprefix("load average ").removesuffix(span)
    tail = span if before.endswith(span) else ""  # no load average where /proc/loadavg is missing
    before = before.removesuffix(span).replace("load average ", "load average: ")
    line = f"machine: {before} before, {after} after{tail}"
    for part in [line] if wide else wrap_line(line):  # one line up to 3-digit loads on 999 cores
        print(part, flush=True)
    return missed


class FittedLines(io.TextIOBase):
    """``sys.stdout`` while a bench runs: each whole line passes on at once, a prose line wider
    than 100 columns wrapped (``fit``); a table row (columns two spaces apart) is left whole."""

    _ROW = re.compile(r"\S {2,}\S")

    def __enter__(self):
        self.out, self.pending = sys.stdout, ""
        sys.stdout = self
        return self

    def __exit__(self, *exc) -> None:
        if self.pending:
            self._emit(self.pending)
        sys.stdout = self.out

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self._emit(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def _emit(self, line: str) -> None:
        body = line.rstrip("\n")
        self.out.write((body if self._ROW.search(body.strip()) else fit(body)) + line[len(body):])

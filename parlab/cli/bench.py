"""``parlab bench NAME``: run one benchmark, or ``all`` of them in turn.

A bench reports its figures with the machine's load; it exits 1 for a missed target only
with ``--check`` (for a suite or CI), 0 otherwise, so ``make bench`` on a busy laptop reports
instead of failing.
"""

from __future__ import annotations

import argparse
import importlib

from parlab.bench import BENCHES, conditions, load_average

HELP = "run a benchmark: " + ", ".join(BENCHES) + " or all"
CHECK_HELP = "exit 1 when a stated target is missed (default: report only, exit 0)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", required=True, metavar="NAME")
    for name, module_name in BENCHES.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.add_argument("--check", action="store_true", help=CHECK_HELP)
        p.set_defaults(_bench=module)
    p = sub.add_parser("all", help="every benchmark with its defaults")
    p.add_argument("--check", action="store_true", help=CHECK_HELP)
    p.set_defaults(_bench=None)


def run(args: argparse.Namespace) -> int:
    if args._bench is not None:
        missed = _report(args._bench, args)
    else:
        missed = 0
        for name, module_name in BENCHES.items():
            module = importlib.import_module(module_name)
            print(f"== parlab bench {name} ==", flush=True)
            p = argparse.ArgumentParser()
            module.add_arguments(p)
            missed |= _report(module, p.parse_args([]))
    if missed:
        print("a target was missed" + ("" if args.check else
              " (a report, not a failure: `--check` makes it exit 1)"), flush=True)
    return 1 if missed and args.check else 0


def _report(module, args: argparse.Namespace) -> int:
    """Run one bench, then name the machine's load before and after it (one line, printed only
    once the bench has run: a bad option stays a one-line error); 1 if it missed a target."""
    before = conditions()
    missed = int(module.run(args) or 0)
    print(f"machine: {before} before the run; {load_average()} after", flush=True)
    return missed

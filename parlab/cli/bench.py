"""``parlab bench NAME``: run one benchmark, or ``all`` of them in turn."""

from __future__ import annotations

import argparse
import importlib

from parlab.bench import BENCHES

HELP = "run a benchmark: " + ", ".join(BENCHES) + " or all"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", required=True, metavar="NAME")
    for name, module_name in BENCHES.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_bench=module)
    sub.add_parser("all", help="every benchmark with its defaults").set_defaults(_bench=None)


def run(args: argparse.Namespace) -> int:
    if args._bench is not None:
        return args._bench.run(args)
    status = 0
    for name, module_name in BENCHES.items():
        module = importlib.import_module(module_name)
        print(f"== parlab bench {name} ==", flush=True)
        p = argparse.ArgumentParser()
        module.add_arguments(p)
        status |= int(module.run(p.parse_args([])) or 0)
    return status

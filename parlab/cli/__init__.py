"""The ``parlab`` command: one subcommand per module, imported only when it is used.

Each module named in ``COMMANDS`` defines ``HELP`` (one line; or ``HELPS`` by command name when
one module serves several), ``add_arguments(parser)`` and ``run(args) -> int`` (``args._name``
is the command). Modules import heavy dependencies inside ``run`` so that the CLI starts fast.
Bad input (an unknown preset, a non-positive size, ...) prints the library's ValueError as one
line on stderr and exits with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, str] = {
    "models": "parlab.cli.specs",
    "gpus": "parlab.cli.specs",
    "memory": "parlab.cli.memory",
    "bench": "parlab.cli.bench",
    "estimate": "parlab.cli.estimate",
    "search": "parlab.cli.search",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parlab", description="parlab: distributed LLM training, modelled and run on CPU.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        help_ = getattr(module, "HELPS", {}).get(name) or module.HELP
        p = sub.add_parser(name, help=help_, description=help_)
        module.add_arguments(p)
        p.set_defaults(_module=module, _name=name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._module.run(args) or 0)
    except ValueError as err:
        print(f"parlab {args._name}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `parlab models | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())

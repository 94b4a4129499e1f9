"""The ``parlab`` command: one subcommand per module, imported only when it is used.

Each module named in ``COMMANDS`` defines ``HELP`` (one line; or ``HELPS`` by command name when
one module serves several), ``add_arguments(parser)`` and ``run(args) -> int`` (``args._name``
is the command). Modules import heavy dependencies inside ``run`` so that the CLI starts fast.
Bad input (an unknown preset, a non-positive size, ...) prints one line on stderr naming the flag,
the value and the rule, and exits with status 2, never a traceback: option types
(``parlab.cli.options``) reject a bad value while parsing, and a ValueError or TypeError of the
library (a plan that breaks a rule) is printed the same way.
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


class UsageError(Exception):
    """A bad command line: reported as one line on stderr, status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the command and the flag, not the usage
    text and a second line (``main`` prints it and returns 2)."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message}")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("parlab")
    except Exception:  # not installed (a bare checkout on sys.path): the package's own number
        import parlab

        return parlab.__version__


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="parlab", description="parlab: distributed LLM training, modelled and run on CPU.")
    parser.add_argument("--version", action="version", version=f"parlab {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        help_ = getattr(module, "HELPS", {}).get(name) or module.HELP
        p = sub.add_parser(name, help=help_, description=help_)
        module.add_arguments(p)
        p.set_defaults(_module=module, _name=name, _parser=p)
    return parser


def _edits(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and swaps of
    two neighbours ('--gpsu' is one swap from '--gpus')."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def closest_flag(word: str, flags: list[str]) -> str | None:
    """The flag nearest ``word`` in edits (ties: the one of its length), if near enough."""
    word = word.split("=")[0]
    scored = sorted((_edits(word, f), abs(len(f) - len(word)), f) for f in flags)
    if scored and scored[0][0] <= max(2, len(word) // 3):
        return scored[0][2]
    return None


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """One line naming the (sub)command, the arguments it does not take and, for a flag, the
    closest one it does: 'parlab estimate: error: unrecognized argument --gpsu 1024 (did you
    mean --gpus?)'."""
    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    groups: list[list[str]] = []
    for extra in extras:  # a flag with the values after it
        if groups and groups[-1][0].startswith("-") and not extra.startswith("-"):
            groups[-1].append(extra)
        else:
            groups.append([extra])
    words = []
    for group in groups:
        close = closest_flag(group[0], flags) if group[0].startswith("-") else None
        words.append(" ".join(group) + (f" (did you mean {close}?)" if close else ""))
    plural = "s" if len(groups) > 1 else ""
    return (f"{parser.prog}: error: unrecognized argument{plural} {', '.join(words)}; "
            f"`{parser.prog} --help` lists its options")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    try:
        args, extras = build_parser().parse_known_args(argv)
        if extras:
            raise UsageError(unrecognized(getattr(args, "_parser", None) or build_parser(), extras))
    except UsageError as err:
        print(_one_line(err), file=sys.stderr)
        return 2
    except SystemExit as done:  # --help, --version
        return int(done.code or 0) if not isinstance(done.code, str) else 2
    try:
        return int(args._module.run(args) or 0)
    except ValueError as err:  # the library's rules (a TypeError would be a bug here: types are parsed)
        command = " ".join(str(c) for c in ("parlab", args._name, getattr(args, "bench", None)) if c)
        print(f"{command}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `parlab models | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())

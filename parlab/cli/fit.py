"""Output that fits a terminal: every ``parlab`` command prints at most ``WIDTH`` columns by
default, and ``--wide`` prints its full lines and every column.

``fit(text)`` wraps a text that does not fit: each term line of ``Estimate.explain()``
("  name   value   = formula ...") keeps its name and value and puts the formula below,
indented as the source lines under it; any other long line continues under its own indent
plus two. ``fit_table(rows, headers, ...)`` leaves out the columns named droppable, in turn,
until the table fits (the command says which, and that ``--wide`` shows them).
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Sequence

WIDTH = 100
WIDE_HELP = f"print full lines and every column (default: fit {WIDTH} columns)"
_TERM = re.compile(r"^(\s+\S.*?\s{2,}=\s)")  # '  parameters      5.6 GB   = '
SOURCE_INDENT = 6


def add_wide(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wide", action="store_true", help=WIDE_HELP)


def wrap_line(line: str, width: int = WIDTH) -> list[str]:
    """One line as lines of at most ``width`` columns (a word longer than that stays whole); a
    term line is split before its formula, a deep continuation (the source column) moved left."""
    lead = len(line) - len(line.lstrip())
    if lead >= width // 3:  # explain()'s source column: under the term's name
        line, lead = " " * SOURCE_INDENT + line.lstrip(), SOURCE_INDENT
    term = _TERM.match(line)
    if term:  # '  name   value' on its line, the formula below it
        head, formula = term.group(1)[:-2].rstrip(), line[len(term.group(1)) - 2:]
        return [head, *_wrap(" " * SOURCE_INDENT + formula, width, SOURCE_INDENT + 2)]
    return _wrap(line, width, lead + 2) if len(line) > width else [line]


def _wrap(line: str, width: int, indent: int) -> list[str]:
    return textwrap.wrap(line, width, subsequent_indent=" " * indent, break_long_words=False,
                         break_on_hyphens=False) or [line]


def fit(text: str, wide: bool = False, width: int = WIDTH) -> str:
    """``text`` with every line wrapped to ``width`` columns (unchanged when ``wide`` or when
    it fits already); the term lines of a text that does not fit are all laid out alike."""
    lines = text.split("\n")
    if wide or max(map(len, lines)) <= width:
        return text
    return "\n".join(part for line in lines for part in wrap_line(line, width))


def fit_table(rows: Sequence[Sequence[object]], headers: Sequence[str], align: str,
              droppable: Sequence[str] = (), wide: bool = False,
              width: int = WIDTH) -> tuple[str, list[str]]:
    """``parlab.tables.table`` of the rows, less the last ``droppable`` columns (in that order)
    while it is wider than ``width``: (the table, the headers dropped)."""
    from parlab.tables import table

    keep = list(range(len(headers)))
    dropped: list[str] = []
    while True:
        text = table([[row[i] for i in keep] for row in rows], [headers[i] for i in keep],
                     "".join(align[i] for i in keep))
        if wide or max(map(len, text.splitlines()), default=0) <= width:
            return text, dropped
        left = [h for h in droppable if h not in dropped]
        if not left:
            return text, dropped
        dropped.append(left[0])
        keep.remove(list(headers).index(left[0]))


def dropped_note(dropped: Sequence[str], width: int = WIDTH) -> str:
    """The line under a table ``fit_table`` narrowed ('' when nothing was left out)."""
    return f"({', '.join(dropped)} left out to fit {width} columns: --wide shows them)" if dropped else ""

"""Tables and "check yourself" answers as notebooks show them: HTML, with a plain-text twin.

A notebook shows a table as rendered HTML (text left, numbers right, one number format per
column, units in the header, values never wrapped); the same table's plain-text form is the
``text/plain`` of the output, which nbval compares and a terminal prints, deterministic and at
most ``TEXT_WIDTH`` characters wide. The CLI keeps ``parlab.tables.table``.

    show_table([["weights", 2, 350e9]], ["term", "bytes / param", "memory (B)"],
               formats={"memory (B)": ".3e"})
    check_yourself([("How many bytes per parameter does Adam keep?", "12 (fp32 m, v, master)")])

Alignment follows the Python type of each value, never its text: ``int``/``float`` (and numpy
numbers; not ``bool``) are right-aligned and formatted, anything else is ``str()``-ed and
left-aligned ("1F1B", "2 x 8" and "349 ms" stay left). Format numbers in the table, not before:
pass numbers and a ``formats`` entry, so the column shares one format.
"""

from __future__ import annotations

import html as html_lib
import math
import numbers
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TEXT_WIDTH = 110  # no line of a stored text output may be longer (it wraps at 1400 px in the lab)
CHECK_MARKER = "parlab-check-yourself"  # CSS class of every check_yourself output (tests look for it)
ANSWER_CLASS = "parlab-answer"  # CSS class of each collapsed <details> answer
WRAP_AFTER = 40  # a cell of at most this many characters never wraps in HTML; longer text may
#: a table at most this wide fits a notebook's output column at 1400x900 with the file browser
#: open (JupyterLab gives a table 948 px there); a wider one lets shorter text wrap (``wrap_limit``)
COLUMN_PX = 940
CHAR_PX = 7  # JupyterLab's 13 px table font, per character on average (chapter 10's guide table
#              measured 1,311 px wide in Chromium where ``min_width_px`` estimated 1,307)
CELL_PAD_PX = 20  # 10 px of padding either side of a cell
MIN_WRAP = 8  # text of at most this many characters never wraps, however wide the table

Format = str | Callable[[Any], str] | None
Formats = Sequence[Format] | Mapping[str | int, Format] | None


def is_number(v: Any) -> bool:
    """True for ints and floats (numpy's too), False for bool and everything else."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _default_format(values: list[Any]) -> str:
    """One format spec for a column's numbers: ',d' for integers; for floats, the fixed number
    of decimals that gives the largest value 4 significant digits (at most 6 decimals)."""
    nums = [v for v in values if is_number(v)]
    if all(isinstance(v, numbers.Integral) for v in nums):
        return ",d"
    finite = [abs(float(v)) for v in nums if math.isfinite(v) and v != 0]
    if not finite:
        return ",.0f"
    digits = math.floor(math.log10(max(finite))) + 1
    return f",.{min(6, max(0, 4 - digits))}f"


def _column_formats(rows: Sequence[Sequence[Any]], headers: Sequence[str], formats: Formats) -> list:
    n = len(headers)
    if formats is None:
        given: list[Format] = [None] * n
    elif isinstance(formats, Mapping):
        unknown = [k for k in formats if k not in headers and not (isinstance(k, int) and 0 <= k < n)]
        if unknown:
            raise ValueError(f"formats names no column {unknown[0]!r}; columns: {', '.join(headers)}")
        given = [formats.get(h, formats.get(i)) for i, h in enumerate(headers)]
    else:
        given = list(formats)
        if len(given) != n:
            raise ValueError(f"formats has {len(given)} entries for {n} columns")
    out = []
    for i, fmt in enumerate(given):
        out.append(fmt if fmt is not None else _default_format([r[i] for r in rows]))
    return out


def _render(v: Any, fmt: Format) -> str:
    if v is None:
        return ""
    if not is_number(v):
        return str(v)
    if callable(fmt):
        return fmt(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if fmt is not None and fmt.endswith("d") and not isinstance(v, numbers.Integral):
        fmt = fmt[:-1] + ".0f"
    return format(v, fmt)


def _check_shape(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    for i, row in enumerate(rows):
        if len(row) != len(headers):
            raise ValueError(f"row {i} has {len(row)} values for {len(headers)} headers: {list(row)!r}")


def _cells(rows, headers, formats) -> tuple[list[list[str]], list[list[bool]], list[bool]]:
    """(text of each cell, whether each cell is a number, whether each column is all numbers)."""
    _check_shape(rows, headers)
    fmts = _column_formats(rows, headers, formats)
    text = [[_render(v, f) for v, f in zip(row, fmts, strict=True)] for row in rows]
    num = [[is_number(v) for v in row] for row in rows]
    cols = [bool(rows) and all(num[r][c] or rows[r][c] is None for r in range(len(rows)))
            for c in range(len(headers))]
    return text, num, cols


def _min_width(grid: list[list[str]], limit: int) -> int:
    """Estimated px of the narrowest layout of ``grid`` (header row first) when text of at most
    ``limit`` characters never wraps and longer text wraps at spaces: per column its widest
    unbreakable piece, at ``CHAR_PX`` a character, plus ``CELL_PAD_PX``."""
    def piece(v: str) -> int:
        return len(v) if len(v) <= limit else max((len(w) for w in v.split()), default=0)

    return sum(CHAR_PX * max(piece(row[c]) for row in grid) + CELL_PAD_PX for c in range(len(grid[0])))


def wrap_limit(grid: list[list[str]]) -> int:
    """The longest text (in characters) that keeps to one line in ``html_table``: ``WRAP_AFTER``
    when the table then fits ``COLUMN_PX``, else the largest limit down to ``MIN_WRAP`` that fits
    (``MIN_WRAP`` when none does; the output area scrolls)."""
    return next((n for n in range(WRAP_AFTER, MIN_WRAP, -1) if _min_width(grid, n) <= COLUMN_PX), MIN_WRAP)


def min_width_px(rows: Sequence[Sequence[Any]], headers: Sequence[str], formats: Formats = None) -> int:
    """How wide ``html_table`` draws this table at the least, in px (estimated: ``CHAR_PX`` per
    character), with the wrapping it chooses: at most ``COLUMN_PX`` unless words alone are wider."""
    text, _, _ = _cells(rows, headers, formats)
    grid = [[str(h) for h in headers]] + text
    return _min_width(grid, wrap_limit(grid))


def html_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], formats: Formats = None, *,
               highlight_last: bool = False, caption: str | None = None) -> str:
    """An HTML ``<table>`` of ``rows`` under ``headers``.

    ``formats``: one entry per column (a list) or by header / column index (a dict); each is a
    format spec for ``format(value, spec)`` (",.1f", ".0%", ",d") or a callable value -> str;
    None or a missing entry picks one spec for the column's numbers (``_default_format``).
    Formats apply to numbers only. Numbers are right-aligned, other values left-aligned, by
    Python type; a header is right-aligned over an all-number column. No value of up to
    ``WRAP_AFTER`` characters wraps (``white-space: nowrap``), so "349 ms" never breaks; longer
    text (a sentence of description) may wrap. A table that would then be wider than
    ``COLUMN_PX`` lets shorter text wrap too, down to ``MIN_WRAP`` characters (``wrap_limit``),
    so it fits the notebook's column at 1400x900 instead of scrolling. Put units in the headers
    ("memory (GB)"). ``highlight_last`` sets the last row in bold under a rule (a total);
    ``caption`` is a line above the table. Every value is HTML-escaped.
    """
    text, num, cols = _cells(rows, headers, formats)
    limit = wrap_limit([[str(h) for h in headers]] + text)

    def cell(tag: str, value: str, right: bool, extra: str = "") -> str:
        align = "right" if right else "left"
        wrap = "" if len(value) > limit else ";white-space:nowrap"
        return (f'<{tag} style="text-align:{align};padding:2px 10px{wrap}{extra}">'
                f"{html_lib.escape(value)}</{tag}>")

    head = "".join(cell("th", str(h), cols[i], ";border-bottom:1px solid #888")
                   for i, h in enumerate(headers))
    body = []
    for r, row in enumerate(text):
        last = highlight_last and r == len(text) - 1
        style = ' style="font-weight:bold;border-top:1px solid #888"' if last else ""
        body.append(f"<tr{style}>" + "".join(cell("td", v, num[r][c]) for c, v in enumerate(row))
                    + "</tr>")
    cap = (f'<caption style="text-align:left;caption-side:top">{html_lib.escape(caption)}</caption>'
           if caption else "")
    return (f'<table class="parlab-table" style="border-collapse:collapse;margin:4px 0">{cap}'
            f'<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')


def text_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], formats: Formats = None, *,
               caption: str | None = None, width: int = TEXT_WIDTH) -> str:
    """The plain-text twin of ``html_table`` (same cells, same alignment), for ``text/plain``.

    Columns are padded and separated by two spaces under a rule of dashes. If that is wider
    than ``width`` characters, each row is printed as a record instead ("header: value; ..."),
    wrapped at ``width``, so no line is ever longer than ``width``. Deterministic.
    """
    text, num, cols = _cells(rows, headers, formats)
    grid = [[str(h) for h in headers]] + text
    widths = [max(len(r[c]) for r in grid) for c in range(len(headers))]
    lines = [caption] if caption else []
    table_lines = []
    for n, row in enumerate(grid):
        right = cols if n == 0 else num[n - 1]
        parts = [v.rjust(w) if right[c] else v.ljust(w) for c, (v, w) in enumerate(zip(row, widths, strict=True))]
        table_lines.append("  ".join(parts).rstrip())
        if n == 0:
            table_lines.append("  ".join("-" * w for w in widths))
    if max(len(line) for line in table_lines) <= width:
        return "\n".join(lines + table_lines)
    for row in text:
        record = "; ".join(f"{h}: {v}" for h, v in zip(headers, row, strict=True))
        lines += textwrap.wrap(record, width, subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines)


_GLUE = "\x00"  # a space wrap_text may not break at (restored after wrapping)


def wrap_text(text: str, width: int = TEXT_WIDTH, fields: bool = False) -> str:
    """``text`` with every line longer than ``width`` wrapped, continuation lines indented two
    spaces past the line's own indentation; shorter lines are kept as they are. For printing a
    library's multi-line text (an ``explain()``) in a notebook, whose stored lines must fit.
    ``fields``: never break before a number, so a 'name 12ms' field of a log line stays whole."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        body = re.sub(r" (?=[\d-])", _GLUE, line) if fields else line
        out += [part.replace(_GLUE, " ") for part in textwrap.wrap(
            body, width, initial_indent="", subsequent_indent=indent + "  ", break_on_hyphens=False,
            drop_whitespace=True)] or [line]
    return "\n".join(out)


@dataclass(frozen=True)
class Table:
    """A table a notebook displays as HTML, with ``text_table`` as its ``text/plain``."""

    rows: Sequence[Sequence[Any]]
    headers: Sequence[str]
    formats: Formats = None
    highlight_last: bool = False
    caption: str | None = None

    def _repr_html_(self) -> str:
        return html_table(self.rows, self.headers, self.formats, highlight_last=self.highlight_last,
                          caption=self.caption)

    def __repr__(self) -> str:
        return text_table(self.rows, self.headers, self.formats, caption=self.caption)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def show_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], formats: Formats = None, *,
               highlight_last: bool = False, caption: str | None = None) -> None:
    """Display a table in the notebook: ``html_table`` as ``text/html`` and ``text_table`` (at
    most ``TEXT_WIDTH`` characters a line) as the ``text/plain`` nbval compares. Arguments as
    for ``html_table``."""
    from IPython.display import display

    display(Table(rows, headers, formats, highlight_last, caption))


def _html_of(v: Any) -> str:
    if hasattr(v, "_repr_html_"):
        return v._repr_html_()
    return html_lib.escape(str(v)).replace("\n", "<br>")


@dataclass(frozen=True)
class CheckYourself:
    """Questions shown with each answer collapsed in a ``<details>`` block (see check_yourself)."""

    items: Sequence[tuple[str, Any]]
    title: str = "Check yourself"
    hint: str = field(default="")

    def _repr_html_(self) -> str:
        lis = []
        for question, answer in self.items:
            lis.append(f"<li>{_html_of(question)}"
                       f'<details class="{ANSWER_CLASS}"><summary>answer</summary>'
                       f'<div style="margin:4px 0 8px 16px">{_html_of(answer)}</div></details></li>')
        hint = f"<p>{html_lib.escape(self.hint)}</p>" if self.hint else ""
        return (f'<div class="{CHECK_MARKER}"><b>{html_lib.escape(self.title)}</b>{hint}'
                f'<ol>{"".join(lis)}</ol></div>')

    def __repr__(self) -> str:
        n = len(self.items)
        lines = [f"{self.title}: {n} question{'' if n == 1 else 's'}, "
                 "each answer hidden until its 'answer' is clicked"]
        for i, (question, _) in enumerate(self.items, 1):
            lines += textwrap.wrap(f"{i}. {question}", TEXT_WIDTH, subsequent_indent="   ")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def check_yourself(items: Sequence[tuple[str, Any]], title: str = "Check yourself",
                   hint: str = "") -> None:
    """Display numbered questions, each answer hidden in a collapsed ``<details>`` block.

    ``items`` is a sequence of (question, answer) pairs. Questions are plain text. An answer is
    plain text (newlines kept) or any object with ``_repr_html_`` (e.g. a ``Table``); compute
    it with the library and pass it in, never type a number. Nothing of an answer is visible
    until its "answer" summary is clicked; the ``text/plain`` form lists the questions only.
    The output's HTML is a ``<div class="parlab-check-yourself">`` (``CHECK_MARKER``) whose
    answers are ``<details class="parlab-answer">`` blocks: tests/test_notebook_style.py finds
    them by these names. ``hint`` is an optional line under the title (e.g. the exercise).
    """
    from IPython.display import display

    for i, item in enumerate(items):
        if not (isinstance(item, tuple) and len(item) == 2):
            raise ValueError(f"check_yourself item {i} must be a (question, answer) pair, got {item!r}")
    display(CheckYourself(list(items), title, hint))

"""Render the 中文口述版: ``answers.SPOKEN`` templates filled with ``numbers.values``.

``spoken("1.17")`` is the plain text; ``show_spoken("1.12", "1.13")`` displays the collapsed
``<details><summary>中文口述版 …</summary>`` block a chapter puts under its "guide X.Y" heading
(its ``text/plain`` is the same text, wrapped, so nbval notices when a number changes).
"""

from __future__ import annotations

import html as html_lib
import re
import textwrap
from dataclasses import dataclass

from parlab.drill.titles import title

from . import glossary
from .answers import SPOKEN
from .numbers import values

TERM = re.compile(r"\[\[([^\]]+)\]\]")
SPOKEN_CLASS = "parlab-zh-spoken"  # CSS class of the <details> block (tests/test_browser_zh.py)
WIDTH = 50  # characters per stored text line: a CJK character is two columns wide


def points(section: str) -> list[str]:
    """The spoken points of ``section``, numbers filled in, glossary markup kept."""
    if section not in SPOKEN:
        raise ValueError(f"no 中文口述版 for guide section {section!r}; known: {', '.join(SPOKEN)}")
    vals = values(section)
    return [p.format(**vals) for p in SPOKEN[section]]


def _plain(point: str) -> str:
    return TERM.sub(lambda m: m.group(1).split(" / ")[0], point)


def _html(point: str) -> str:
    out, last = [], 0
    for m in TERM.finditer(point):
        out.append(html_lib.escape(point[last:m.start()]))
        term = glossary.get(m.group(1))
        out.append(f'<abbr title="{html_lib.escape(term.en)}">{html_lib.escape(m.group(1).split(" / ")[0])}</abbr>')
        last = m.end()
    out.append(html_lib.escape(point[last:]))
    return "".join(out)


def spoken(section: str) -> str:
    """The spoken answer of guide ``section`` as plain text, one numbered point a line."""
    return "\n".join(f"{i}. {_plain(p)}" for i, p in enumerate(points(section), 1))


@dataclass(frozen=True)
class Spoken:
    """The collapsed 中文口述版 of one or more guide sections (what a chapter cell displays)."""

    sections: tuple[str, ...]

    def _repr_html_(self) -> str:
        blocks = []
        for s in self.sections:
            items = "".join(f"<li>{_html(p)}</li>" for p in points(s))
            blocks.append(f'<details class="{SPOKEN_CLASS}" lang="zh-CN"><summary>中文口述版 · '
                          f"{html_lib.escape(title(s))}</summary>"
                          f'<ol style="margin:4px 0 8px 0">{items}</ol></details>')
        return "".join(blocks)

    def __repr__(self) -> str:
        lines = []
        for s in self.sections:
            lines.append(f"中文口述版 · {title(s)}")
            for i, p in enumerate(points(s), 1):
                lines += textwrap.wrap(f"{i}. {_plain(p)}", WIDTH, subsequent_indent="   ")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def show_spoken(*sections: str) -> None:
    """Display the collapsed 中文口述版 of ``sections`` (under a chapter's "guide X.Y" heading)."""
    from IPython.display import display

    for s in sections:
        points(s)  # unknown sections fail here, before anything is shown
    display(Spoken(tuple(sections)))

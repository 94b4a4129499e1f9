"""The glossary as chapter 00 shows it: a search box over ``glossary.GLOSSARY`` and the table."""

from __future__ import annotations

import html as html_lib
from dataclasses import dataclass

from .glossary import GLOSSARY, Term, find, link

GLOSSARY_CLASS = "parlab-zh-glossary"


def rows_html(terms: list[Term] | tuple[Term, ...]) -> str:
    """An HTML table of ``terms``: 中文, English, 释义, definition, the section (a link)."""
    def a(t: Term) -> str:
        href = link(t)
        label = html_lib.escape(t.where)
        return f'<a href="{html_lib.escape(href)}">{label}</a>' if href else label

    body = "".join(f"<tr><td lang='zh-CN'>{html_lib.escape(t.zh)}</td><td>{html_lib.escape(t.en)}</td>"
                   f"<td lang='zh-CN'>{html_lib.escape(t.zh_def)}</td><td>{html_lib.escape(t.en_def)}</td>"
                   f"<td>{a(t)}</td></tr>" for t in terms)
    head = "".join(f'<th style="text-align:left">{h}</th>' for h in ("中文", "English", "释义", "definition", "where"))
    return f'<table class="{GLOSSARY_CLASS}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


@dataclass(frozen=True)
class GlossaryTable:
    """The whole glossary, collapsed: ``text/html`` a <details> with the table, ``text/plain`` a count."""

    terms: tuple[Term, ...] = GLOSSARY

    def _repr_html_(self) -> str:
        return (f"<details><summary>术语表 / Glossary: {len(self.terms)} terms (click to open)</summary>"
                f"{rows_html(self.terms)}</details>")

    def __repr__(self) -> str:
        return f"术语表 / Glossary: {len(self.terms)} terms, each with its chapter section"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def browser():
    """A search box and the matching rows (ipywidgets): type Chinese or English."""
    import ipywidgets as widgets

    class GlossaryBrowser(widgets.VBox):
        def __repr__(self) -> str:  # the text/plain a stored notebook shows before it runs
            return "术语表搜索 / glossary search (run the notebook, then type a term)"

    box = widgets.Text(placeholder="搜索 / search: 气泡, ZeRO, all-gather ...", description="术语")
    out = widgets.HTML()

    def update(_=None) -> None:
        hits = find(box.value)
        out.value = (f"<p>{len(hits)} / {len(GLOSSARY)}</p>" + rows_html(hits[:40])) if box.value.strip() else ""

    box.observe(update, names="value")
    view = GlossaryBrowser([box, out])
    view.add_class(GLOSSARY_CLASS)
    view.box, view.out = box, out  # type: ignore[attr-defined]
    return view


def show_glossary() -> None:
    """Display the search box, then the whole table (collapsed)."""
    from IPython.display import display

    display(browser())
    display(GlossaryTable())

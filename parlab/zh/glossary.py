"""术语表: the course's terms in Chinese and English, one source (``glossary_data.TERMS``).

``GLOSSARY`` holds ``Term`` records; ``names(term)`` the Chinese spellings of one entry (two where
both usages are common: "重计算 / 激活重计算"); ``find(text)`` searches both languages;
``where_link(term)`` resolves its section to a chapter heading (a link chapter 00 can follow).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from parlab.course import (
    CHAPTERS,
    COURSE_DIR,
    Where,
    anchor,
    chapters_for,
    heading_text,
    notebook_headings,
    where,
)

from .glossary_data import TERMS


@dataclass(frozen=True)
class Term:
    zh: str  # "重计算 / 激活重计算": the first spelling is the one the spoken answers use
    en: str
    zh_def: str
    en_def: str
    where: str  # "guide 1.21" or "09:Underflow, and the loss scaler"

    @property
    def names(self) -> tuple[str, ...]:
        """Every spelling: the whole entry and each alternative ('重计算 / 激活重计算', '重计算', '激活重计算')."""
        parts = tuple(p.strip() for p in self.zh.split(" / "))
        return (self.zh, *parts) if len(parts) > 1 else (self.zh,)


GLOSSARY: tuple[Term, ...] = tuple(Term(*t) for t in TERMS)
_BY_NAME: dict[str, Term] = {n: t for t in GLOSSARY for n in t.names}


def get(name: str) -> Term:
    """The entry spelled ``name`` (any of its spellings); ValueError naming it if none."""
    if name not in _BY_NAME:
        raise ValueError(f"{name!r} is not in the glossary (parlab.zh.glossary_data.TERMS)")
    return _BY_NAME[name]


def known(name: str) -> bool:
    return name in _BY_NAME


def find(text: str) -> list[Term]:
    """Entries whose Chinese, English or definitions contain ``text`` (case-insensitive); all when empty."""
    q = text.strip().lower()
    return [t for t in GLOSSARY if not q or any(q in f.lower() for f in (t.zh, t.en, t.zh_def, t.en_def))]


_SECTION = re.compile(r"^guide (\d\.\d+)$")
_CHAPTER = re.compile(r"^(\d\d):(.+)$")


def where_link(term: Term) -> Where | None:
    """The heading that explains ``term`` (None when its ``where`` names no existing heading)."""
    m = _SECTION.match(term.where)
    if m:
        for chapter in chapters_for(m.group(1)):
            w = where(m.group(1), chapter)
            if w.heading is not None:
                return w
        return None
    m = _CHAPTER.match(term.where)
    if not m:
        return None
    chapter = next((c for c in CHAPTERS if c.number == int(m.group(1))), None)
    if chapter is None:
        return None
    for level, text in notebook_headings(COURSE_DIR / chapter.file):
        if level in (2, 3) and heading_text(text).startswith(m.group(2)):
            return Where(chapter, "", text)
    return None


def link(term: Term) -> str | None:
    """'09_memory_optimizations.ipynb#...' for ``term``'s heading (None if it does not resolve)."""
    w = where_link(term)
    return f"{w.chapter.file}#{anchor(w.heading)}" if w is not None else None

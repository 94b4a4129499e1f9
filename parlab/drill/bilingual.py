"""One drill question in English and in Chinese, side by side (chapter 12's 中文 cell)."""

from __future__ import annotations

from dataclasses import dataclass

from .questions import Card
from .quiz import Quiz
from .zh.translate import ZhCard


@dataclass(frozen=True)
class BothLanguages:
    """One card in English and in Chinese, one above the other (chapter 12)."""

    english: Card
    chinese: ZhCard

    def __repr__(self) -> str:
        return f"English:\n{self.english.text()}\n\n中文:\n{self.chinese.text()}"

    def _repr_html_(self) -> str:
        import html

        def block(lang: str, card: Card) -> str:
            return (f'<div lang="{lang}" class="parlab-card" style="margin:4px 0 10px 0">'
                    f'<pre style="white-space:pre-wrap;font-family:inherit">{html.escape(card.text())}</pre></div>')
        return block("en", self.english) + block("zh-CN", self.chinese)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def both_languages(section: str, seed: int = 0) -> BothLanguages:
    """The first question of ``section``'s quiz (seeded), in English and in Chinese."""
    en, zh = Quiz(sections=section, seed=seed), Quiz(sections=section, seed=seed, lang="zh")
    return BothLanguages(en.next(), zh.next())

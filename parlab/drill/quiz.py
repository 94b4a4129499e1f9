"""A quiz session: draw questions at random (seeded) from a filtered bank, take answers, keep score.

Pure Python state, no widgets: a dashboard shows ``quiz.card`` and calls ``quiz.answer(text)``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from .bank import BANK, select
from .parse import typed
from .questions import Card, Question, Result
from .zh.translate import translate

LANGS = ("en", "zh")  # the languages a quiz can ask in


@dataclass
class Score:
    """Answers counted so far (the first readable answer to each card) and how many were right,
    in total and per guide section."""

    answered: int = 0
    correct: int = 0
    by_section: dict[str, list[int]] = field(default_factory=dict)  # section -> [correct, answered]

    @property
    def fraction(self) -> float:
        return self.correct / self.answered if self.answered else 0.0

    def add(self, section: str, correct: bool) -> None:
        self.answered += 1
        self.correct += correct
        row = self.by_section.setdefault(section, [0, 0])
        row[0] += correct
        row[1] += 1

    def text(self) -> str:
        """'7 / 10 correct (70%)'."""
        return f"{self.correct} / {self.answered} correct ({self.fraction:.0%})"


class Quiz:
    """Questions drawn from ``bank`` filtered by ``sections`` / ``topics`` / ``kinds`` (see
    ``bank.select``), in a shuffled order that repeats only when all have been asked; each card
    is posed with a seed from the quiz's RNG, so a generated question gets new parameters each
    time and the whole session is reproducible from ``seed``.

        quiz = Quiz(sections=["1.6", "1.7"], seed=1)
        card = quiz.next()          # a Card: card.text(), card.options, card.how_to_answer()
        result = quiz.answer("B")   # a Result: .correct, .readable, .message, .expected, .explanation
        quiz.score.text()           # '1 / 1 correct (100%)'

    An unreadable answer is not counted and leaves the card open; the first readable answer
    is scored, later ones get feedback only. ``lang="zh"`` poses the same cards in Chinese
    (``parlab.drill.zh.translate``); English is the default.
    """

    def __init__(self, sections: str | Iterable[str] | None = None, topics: str | Iterable[str] | None = None,
                 kinds: str | Iterable[str] | None = None, seed: int = 0,
                 bank: Iterable[Question] = BANK, lang: str = "en") -> None:
        if lang not in LANGS:
            raise ValueError(f"lang must be one of {', '.join(LANGS)}, got {lang!r}")
        self.lang = lang
        self.questions: list[Question] = select(sections, topics, kinds, bank)
        if not self.questions:
            raise ValueError(f"no drill question matches sections={sections!r}, topics={topics!r}, "
                             f"kinds={kinds!r}")
        self.seed = seed
        self._rng = random.Random(seed)
        self._deck: list[Question] = []
        self.card: Card | None = None
        self.score = Score()
        self.history: list[tuple[Card, Result]] = []
        self._scored = False

    def __len__(self) -> int:
        return len(self.questions)

    def next(self) -> Card:
        """Pose the next question (random, seeded) and make it the current card."""
        if not self._deck:
            self._deck = list(self.questions)
            self._rng.shuffle(self._deck)
        question = self._deck.pop()
        seed = self._rng.randrange(2**31)
        if self.lang == "zh":
            self.card = translate(question, seed)
        else:
            self.card = question.pose(seed)
        self._scored = False
        return self.card

    def answer(self, text: object) -> Result:
        """Check ``text`` against the current card, and score it if it is the card's first
        readable answer. Without a current card, the result says so (nothing raises)."""
        if self.card is None:
            message = "还没有题目：先调用 next()。" if self.lang == "zh" else "No question yet: call next() first."
            return Result(False, False, typed(text), "", message, "")
        result = self.card.check(text)
        if result.readable and not self._scored:
            self.score.add(self.card.section, result.correct)
            self.history.append((self.card, result))
            self._scored = True
        return result

    @property
    def answered(self) -> bool:
        """Whether the current card already has a scored answer."""
        return self._scored

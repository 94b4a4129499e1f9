"""Question types of the drill: multiple choice, a name among options, and a number with a unit.

A ``Question`` is an entry of the bank; ``pose(seed)`` turns it into a ``Card`` (``card``), the
question as the learner sees it (options in a seeded order; a generated number question with its
random parameters drawn from the seed and its answer computed by parlab). ``Card.check(text)``
reads the learner's typed answer and returns a ``Result``: never an exception, whatever was typed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from parlab.course import beyond_chapter, chapters_for

from .card import LETTERS, Card, Result, show_number, wrap
from .parse import DIMENSIONS, normalize_name, unit_factor
from .titles import TITLES, title

__all__ = ["BEYOND_TOPICS", "KINDS", "LETTERS", "TOPICS", "Card", "MultipleChoice", "Named", "Numeric", "Posed",
           "Question", "Result", "citation", "show_number", "title", "wrap"]

#: the topics a question may carry (a dashboard's "topic" filter lists these)
TOPICS = ("memory", "compute", "communication", "data parallel", "pipeline", "tensor parallel",
          "zero", "3d parallel", "memory optimizations", "frameworks", "strategy", "inference",
          "network", "launching")
#: the topics of the cards beyond the guide (``beyond_3d.BEYOND``), besides ``TOPICS``
BEYOND_TOPICS = ("context parallel", "expert parallel")
KINDS = ("choice", "name", "number")


def citation(section: str, beyond: bool = False) -> str:
    """'guide 1.7 (1.7 什么是张量并行...); parlab chapter 05 Tensor parallelism: ...'; for a card
    beyond the guide, its nearest guide question and the chapter beyond the guide (``course.BEYOND``)."""
    if beyond:
        c = beyond_chapter()
        return (f"Beyond the guide (nearest: guide {section}, {title(section)}); see parlab chapter "
                f"{c.number:02d} {c.title}.")
    chapters = chapters_for(section)
    where = "; ".join(f"chapter {c.number:02d} {c.title}" for c in chapters)
    return f"See guide {section} ({title(section)}) and parlab {where}."


# -- bank entries --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Posed:
    """What a question's maker returns: the prompt, the answer, the worked numbers, the parameters."""

    prompt: str
    answer: object
    working: str = ""
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    """A bank entry: ``key`` (unique), guide ``section``, ``topic``, and ``why`` (the explanation
    shown after answering). Subclasses say how to ``pose`` it."""

    key: str
    section: str
    topic: str

    kind = ""
    generated = False  # True: random parameters, the answer computed by parlab for each seed
    beyond = False  # True: a card beyond the guide (chapter 13), ``section`` its nearest question

    def __post_init__(self) -> None:
        if self.section not in TITLES:
            raise ValueError(f"question {self.key!r}: unknown guide section {self.section!r}")
        if self.topic not in TOPICS + BEYOND_TOPICS:
            raise ValueError(f"question {self.key!r}: topic {self.topic!r} is not one of "
                             f"{', '.join(TOPICS + BEYOND_TOPICS)}")

    def pose(self, seed: int = 0) -> Card:
        raise NotImplementedError  # pragma: no cover - every subclass defines it

    def _explain(self, why: str, working: str = "") -> str:
        return " ".join(p for p in (why.strip(), working.strip()) if p) + "\n" + citation(self.section, self.beyond)


@dataclass(frozen=True)
class MultipleChoice(Question):
    """One correct option and distractors (each a real misconception), shown in a seeded order."""

    prompt: str = ""
    correct: str = ""
    wrong: tuple[str, ...] = ()
    why: str = ""
    kind = "choice"

    def __post_init__(self) -> None:
        super().__post_init__()
        options = (self.correct, *self.wrong)
        if not 2 <= len(options) <= len(LETTERS) or len(set(map(normalize_name, options))) != len(options):
            raise ValueError(f"question {self.key!r}: needs 2-{len(LETTERS)} distinct options")

    def pose(self, seed: int = 0) -> Card:
        options = [self.correct, *self.wrong]
        random.Random(f"{self.key}:{seed}").shuffle(options)
        return Card(self.key, self.section, self.topic, "choice", self.prompt, tuple(options),
                    options.index(self.correct), self._explain(self.why))


@dataclass(frozen=True)
class Named(Question):
    """Answer with one of ``options`` by name. ``make`` (optional) computes the prompt and the
    answer from a seeded RNG by calling parlab; otherwise ``prompt`` and ``answer`` are fixed."""

    prompt: str = ""
    options: tuple[str, ...] = ()
    answer: str = ""
    why: str = ""
    aliases: tuple[str, ...] = ()
    make: Callable[[random.Random], Posed] | None = None
    kind = "name"

    @property
    def generated(self) -> bool:  # type: ignore[override]
        return self.make is not None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.make is None and self.answer not in self.options:
            raise ValueError(f"question {self.key!r}: answer {self.answer!r} is not among its options")

    def pose(self, seed: int = 0) -> Card:
        posed = (self.make(random.Random(f"{self.key}:{seed}")) if self.make
                 else Posed(self.prompt, self.answer))
        if posed.answer not in self.options:
            raise ValueError(f"question {self.key!r}: computed answer {posed.answer!r} is not an option")
        return Card(self.key, self.section, self.topic, "name", posed.prompt, self.options, posed.answer,
                    self._explain(self.why, posed.working), params=dict(posed.params),
                    aliases=self.aliases if posed.answer == self.answer else ())


@dataclass(frozen=True)
class Numeric(Question):
    """A number in ``dimension`` (see ``parse.DIMENSIONS``), asked in ``unit``, right within
    ``rtol``. ``make`` computes prompt and answer by calling parlab; ``generated`` says whether
    it draws random parameters from its RNG (False: the same question for every seed)."""

    make: Callable[[random.Random], Posed] | None = None
    dimension: str = "count"
    unit: str = ""
    rtol: float = 0.02
    why: str = ""
    random_parameters: bool = True
    beyond: bool = False
    kind = "number"

    @property
    def generated(self) -> bool:  # type: ignore[override]
        return self.random_parameters

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.make is None:
            raise ValueError(f"question {self.key!r}: a Numeric question needs make(rng) -> Posed")
        if self.dimension not in DIMENSIONS:
            raise ValueError(f"question {self.key!r}: unknown dimension {self.dimension!r}")
        unit_factor(self.dimension, self.unit)  # the unit must be one of the dimension's

    def pose(self, seed: int = 0) -> Card:
        posed = self.make(random.Random(f"{self.key}:{seed}"))
        return Card(self.key, self.section, self.topic, "number", posed.prompt, (), posed.answer,
                    self._explain(self.why, posed.working), self.unit, self.dimension, self.rtol,
                    dict(posed.params))

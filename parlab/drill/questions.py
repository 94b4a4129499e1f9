"""Question types of the drill: multiple choice, a name among options, and a number with a unit.

A ``Question`` is an entry of the bank; ``pose(seed)`` turns it into a ``Card``, the question as
the learner sees it (options in a seeded order; a generated number question with its random
parameters drawn from the seed and its answer computed by parlab). ``Card.check(text)`` reads
the learner's typed answer and returns a ``Result``: never an exception, whatever was typed.
"""

from __future__ import annotations

import math
import random
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from parlab.course import beyond_chapter, chapters_for

from .parse import DIMENSIONS, Unreadable, example_for, normalize_name, read_number, unit_factor
from .titles import TITLES, title

#: the topics a question may carry (a dashboard's "topic" filter lists these)
TOPICS = ("memory", "compute", "communication", "data parallel", "pipeline", "tensor parallel",
          "zero", "3d parallel", "memory optimizations", "frameworks", "strategy", "inference",
          "network", "launching")
#: the topics of the cards beyond the guide (``beyond_3d.BEYOND``), besides ``TOPICS``
BEYOND_TOPICS = ("context parallel", "expert parallel")
KINDS = ("choice", "name", "number")
LETTERS = "ABCDEFGH"


@dataclass(frozen=True)
class Result:
    """What ``Card.check`` says about one answer.

    ``readable`` False means the input could not be read (``message`` says why and what to type);
    it is then not ``correct`` and a quiz does not count it. ``expected`` is the right answer as
    text; ``explanation`` the worked answer with the guide section and the parlab chapter."""

    correct: bool
    readable: bool
    given: str
    expected: str
    message: str
    explanation: str

    def text(self, width: int = 100) -> str:
        """The feedback and the explanation as plain text, lines wrapped at ``width``."""
        return wrap(f"{self.message}\n{self.explanation}".strip(), width)


def wrap(text: str, width: int = 100) -> str:
    """Each line of ``text`` wrapped at ``width`` (continuations indented like the line), so
    stored notebook outputs stay narrow."""
    out = []
    for line in text.splitlines():
        indent = " " * (len(line) - len(line.lstrip()))
        out += textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_long_words=False,
                             break_on_hyphens=False) or [""]
    return "\n".join(out)


@dataclass(frozen=True)
class Card:
    """One question as posed: what a face shows and what ``check`` compares against.

    ``kind``: 'choice' (answer with a letter, a number or the option's text), 'name' (one of
    ``options`` by name), 'number' (a value in ``dimension``; ``unit`` is the unit the prompt asks
    for and the one assumed when none is typed). ``params`` holds a generated question's random
    parameters, so a test can recompute its answer with parlab."""

    key: str
    section: str
    topic: str
    kind: str
    prompt: str
    options: tuple[str, ...]
    answer: object  # choice: index into options; name: the option; number: float (or Fraction)
    explanation: str
    unit: str = ""
    dimension: str = ""
    rtol: float = 0.0
    params: dict = field(default_factory=dict)
    aliases: tuple[str, ...] = ()  # name: other accepted spellings of the answer

    @property
    def title_zh(self) -> str:
        """The guide's heading of this card's section (Chinese), e.g. '1.7 什么是张量并行（intra-layer）？'."""
        return title(self.section)

    @property
    def expected(self) -> str:
        """The right answer as text."""
        if self.kind == "choice":
            return f"{LETTERS[self.answer]}) {self.options[self.answer]}"
        if self.kind == "name":
            return str(self.answer)
        return show_number(self.answer, self.dimension, self.unit)

    def how_to_answer(self) -> str:
        """One line telling the learner what to type."""
        if self.kind == "choice":
            return f"Answer with a letter A-{LETTERS[len(self.options) - 1]}."
        if self.kind == "name":
            return "Answer with one of: " + ", ".join(self.options) + "."
        tol = f" (within {self.rtol:.0%})" if self.rtol else ""
        unit = f" in {self.unit}" if self.unit else ""
        return f"Answer with a number{unit}{tol}; e.g. {example_for(self.dimension, self.answer, self.rtol)}."

    def text(self, width: int = 100) -> str:
        """The card as plain text, lines wrapped at ``width``: section and title, prompt,
        options, how to answer."""
        lines = [f"[guide {self.section} | {self.topic}] {self.title_zh}", self.prompt]
        if self.kind == "choice":
            lines += [f"  {LETTERS[i]}) {o}" for i, o in enumerate(self.options)]
        lines.append(self.how_to_answer())
        return wrap("\n".join(lines), width)

    def check(self, answer: object) -> Result:
        """Read ``answer`` (what the learner typed) and say whether it is right."""
        given = "" if answer is None else str(answer).strip()
        try:
            ok = {"choice": self._check_choice, "name": self._check_name,
                  "number": self._check_number}[self.kind](answer)
        except Unreadable as e:
            return Result(False, False, given, self.expected, f"Could not read your answer: {e}",
                          self.explanation)
        verdict = "Correct." if ok else f"Not quite: the answer is {self.expected}."
        return Result(ok, True, given, self.expected, verdict, self.explanation)

    def _check_choice(self, answer: object) -> bool:
        text = _text(answer, "a letter such as A")
        m = re.fullmatch(r"\(?\s*([a-h]|\d)\s*[).:]?", text.strip(), re.IGNORECASE)
        if m:
            token = m.group(1).upper()
            index = int(token) - 1 if token.isdigit() else LETTERS.index(token)
            if not 0 <= index < len(self.options):
                raise Unreadable(f"{text.strip()!r} is not one of the options "
                                 f"A-{LETTERS[len(self.options) - 1]}")
            return index == self.answer
        wanted = normalize_name(text)
        for i, option in enumerate(self.options):
            if normalize_name(option) == wanted:
                return i == self.answer
        raise Unreadable(f"{text.strip()!r} is neither a letter A-{LETTERS[len(self.options) - 1]} "
                         "nor the text of an option")

    def _check_name(self, answer: object) -> bool:
        text = _text(answer, f"one of {', '.join(self.options)}")
        wanted = _stem(text)
        if wanted.isdigit() and 1 <= int(wanted) <= len(self.options):
            return self.options[int(wanted) - 1] == self.answer
        if wanted in {_stem(a) for a in (self.answer, *self.aliases)}:
            return True
        if wanted in {_stem(o) for o in self.options}:
            return False
        raise Unreadable(f"{text.strip()!r} is not one of: {', '.join(self.options)}")

    def _check_number(self, answer: object) -> bool:
        value = read_number(answer, self.dimension, self.unit,
                            example_for(self.dimension, self.answer, self.rtol))
        expected = float(self.answer)
        if expected == 0:
            return abs(value) <= 1e-12
        return math.isfinite(value) and abs(value - expected) <= self.rtol * abs(expected) * (1 + 1e-9)


def _stem(name: str) -> str:
    """A name without case, spaces, hyphens or a trailing 'bound' / 'parallel(ism)':
    'Pipeline Parallelism' = 'pipeline parallel', 'latency-bound' = 'latency'."""
    key = normalize_name(name)
    for suffix in ("parallelism", "parallel", "bound"):
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)]
    return key


def _text(answer: object, example: str) -> str:
    if not isinstance(answer, str | int) or isinstance(answer, bool) or not str(answer).strip():
        raise Unreadable(f"type {example}, got {answer!r}")
    return str(answer)


def show_number(value: float | Fraction, dimension: str, unit: str) -> str:
    """A value in the card's unit, four significant digits: '112 GB', '70.07 ms', '3/11 (0.2727)'."""
    if isinstance(value, Fraction) and value.denominator != 1:
        return f"{value.numerator}/{value.denominator} ({float(value):.4g})"
    v = float(value) / unit_factor(dimension, unit)
    if dimension == "count" and not unit and abs(v) < 1e15:
        if v == int(v) and abs(v) < 1e7:
            return f"{int(v):,}"
        for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
            if abs(v) >= scale:
                return f"{v / scale:.4g}{suffix} ({v:.4g})"
    if dimension == "fraction":
        return f"{v:.4g} ({v:.1%})"
    if abs(v) >= 1e6 or (v and abs(v) < 1e-3):
        return f"{v:.4g} {unit}".strip()
    return f"{v:,.4g} {unit}".strip()


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

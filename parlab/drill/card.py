"""A question as posed (``Card``) and what its check says (``Result``): reading the learner's
typed answer (``parse``) and comparing it with the card's answer, never an exception whatever was
typed; plus the plain-text helpers a face shows them with (``wrap``, ``show_number``).
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass, field
from fractions import Fraction

from .parse import (
    Unreadable,
    example_for,
    limit_length,
    normalize_name,
    read_number,
    shown,
    typed,
    unit_factor,
)
from .titles import title

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
        given = typed(answer)
        try:
            limit_length(answer)
            ok = {"choice": self._check_choice, "name": self._check_name,
                  "number": self._check_number}[self.kind](answer)
        except Unreadable as e:
            return Result(False, False, given, self.expected, self.unreadable(e), self.explanation)
        verdict = "Correct." if ok else f"Not quite: the answer is {self.expected}."
        return Result(ok, True, given, self.expected, verdict, self.explanation)

    def unreadable(self, error: Unreadable) -> str:
        """The feedback on an answer that was not read (a Chinese card says it in Chinese)."""
        return f"Could not read your answer: {error}"

    def _check_choice(self, answer: object) -> bool:
        text = _text(answer, "a letter such as A")
        m = re.fullmatch(r"\(?\s*([a-h]|\d)\s*[).:]?", text.strip(), re.IGNORECASE)
        if m:
            token = m.group(1).upper()
            index = int(token) - 1 if token.isdigit() else LETTERS.index(token)
            if not 0 <= index < len(self.options):
                raise Unreadable(f"{shown(text.strip())} is not one of the options "
                                 f"A-{LETTERS[len(self.options) - 1]}")
            return index == self.answer
        wanted = normalize_name(text)
        for i, option in enumerate(self.options):
            if normalize_name(option) == wanted:
                return i == self.answer
        raise Unreadable(f"{shown(text.strip())} is neither a letter A-{LETTERS[len(self.options) - 1]} "
                         "nor the text of an option")

    def _check_name(self, answer: object) -> bool:
        text = _text(answer, f"one of {', '.join(self.options)}")
        wanted = _stem(text)
        if wanted.isdecimal() and 1 <= int(wanted) <= len(self.options):  # not '²': isdigit, not int
            return self.options[int(wanted) - 1] == self.answer
        if wanted in {_stem(a) for a in (self.answer, *self.aliases)}:
            return True
        if wanted in {_stem(o) for o in self.options}:
            return False
        raise Unreadable(f"{shown(text.strip())} is not one of: {', '.join(self.options)}")

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
        raise Unreadable(f"type {example}, got {shown(answer)}")
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

"""The question bank: every question of the drill modules, and filters by section, topic, kind."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from . import generated, modern, practice, problems, strategy, theory_basics, theory_scale
from .questions import BEYOND_TOPICS, KINDS, TOPICS, Question
from .titles import TITLES

#: every question, in guide order within each module
BANK: tuple[Question, ...] = tuple(
    q for module in (theory_basics, theory_scale, practice, strategy, problems, generated, modern)
    for q in module.QUESTIONS)

_BY_KEY = {q.key: q for q in BANK}
if len(_BY_KEY) != len(BANK):  # pragma: no cover - a duplicate key is a bug in a module
    dupes = [k for k, n in Counter(q.key for q in BANK).items() if n > 1]
    raise RuntimeError(f"duplicate drill question keys: {dupes}")

SECTIONS: tuple[str, ...] = tuple(TITLES)


def get(key: str) -> Question:
    """The question with ``key`` (ValueError naming the key if there is none)."""
    if key not in _BY_KEY:
        raise ValueError(f"no drill question with key {key!r}")
    return _BY_KEY[key]


def _as_tuple(name: str, value: str | Iterable[str] | None, allowed: tuple[str, ...]) -> tuple[str, ...] | None:
    if value is None:
        return None
    values = (value,) if isinstance(value, str) else tuple(value)
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(f"{name}: {', '.join(map(repr, bad))} not known; allowed: {', '.join(allowed)}")
    return values


def part_sections(part: str) -> list[str]:
    """The guide sections of ``part`` ('1' -> ['1.1', ..., '1.22']), in guide order."""
    return [s for s in SECTIONS if s.split(".")[0] == part]


def select(sections: str | Iterable[str] | None = None, topics: str | Iterable[str] | None = None,
           kinds: str | Iterable[str] | None = None, bank: Iterable[Question] = BANK) -> list[Question]:
    """The questions of ``bank`` in any of ``sections`` (e.g. '1.7', or a part: '1' or '4'), of any
    of ``topics`` and ``kinds``; None means no filter. Unknown values raise ValueError."""
    if isinstance(sections, str):
        sections = (sections,)
    wanted: set[str] | None = None
    if sections is not None:
        wanted = set()
        for s in sections:
            part = part_sections(s)
            if s not in SECTIONS and not part:
                raise ValueError(f"sections: {s!r} is neither a guide section (1.1 ... 4.5) nor a part "
                                 "(1, 2, 3, 4)")
            wanted.update(part or (s,))
    topics_ = _as_tuple("topics", topics, TOPICS + BEYOND_TOPICS)
    kinds_ = _as_tuple("kinds", kinds, KINDS)
    return [q for q in bank
            if (wanted is None or q.section in wanted) and (topics_ is None or q.topic in topics_)
            and (kinds_ is None or q.kind in kinds_)]


def count_by_section(bank: Iterable[Question] = BANK) -> dict[str, int]:
    """Questions per guide section, in guide order (0 where a section has none)."""
    counts = Counter(q.section for q in bank)
    return {s: counts.get(s, 0) for s in SECTIONS}


def count_by_topic(bank: Iterable[Question] = BANK) -> dict[str, int]:
    counts = Counter(q.topic for q in bank)
    return {t: counts.get(t, 0) for t in TOPICS}

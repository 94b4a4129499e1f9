"""The numbers of the Chinese spoken answers, computed by parlab (one function per guide section).

``values(section)`` returns the placeholders of ``answers.SPOKEN[section]`` already formatted as
strings. Each function calls the same parlab functions as the English chapter answering the
section (its imports are those of the chapter), so both languages change together when the model
changes. Everything here is cheap (no launch, no search): a chapter renders its answer instantly.
"""

from __future__ import annotations

from collections.abc import Callable

from .numbers_part1 import (
    s_1_1,
    s_1_2,
    s_1_3,
    s_1_4,
    s_1_5,
    s_1_6,
    s_1_7,
    s_1_8,
    s_1_9,
    s_1_10,
    s_1_11,
    s_1_12,
    s_1_13,
    s_1_14,
)
from .numbers_part2 import (
    _none,
    s_1_15,
    s_1_16,
    s_1_17,
    s_1_18,
    s_1_19,
    s_1_20,
    s_1_21,
    s_1_22,
    s_2_1,
    s_2_2,
    s_2_3,
    s_3_2,
    s_3_3,
    s_3_4,
    s_3_5,
    s_4_1,
    s_4_2,
    s_4_4,
)

VALUES: dict[str, Callable[[], dict[str, str]]] = {
    "1.1": s_1_1, "1.2": s_1_2, "1.3": s_1_3, "1.4": s_1_4, "1.5": s_1_5, "1.6": s_1_6, "1.7": s_1_7,
    "1.8": s_1_8, "1.9": s_1_9, "1.10": s_1_10, "1.11": s_1_11, "1.12": s_1_12, "1.13": s_1_13,
    "1.14": s_1_14, "1.15": s_1_15, "1.16": s_1_16, "1.17": s_1_17, "1.18": s_1_18, "1.19": s_1_19,
    "1.20": s_1_20, "1.21": s_1_21, "1.22": s_1_22, "2.1": s_2_1, "2.2": s_2_2, "2.3": s_2_3,
    "3.1": _none, "3.2": s_3_2, "3.3": s_3_3, "3.4": s_3_4, "3.5": s_3_5,
    "4.1": s_4_1, "4.2": s_4_2, "4.3": _none, "4.4": s_4_4, "4.5": _none,
}


def values(section: str) -> dict[str, str]:
    """The formatted numbers of guide ``section``'s spoken answer."""
    if section not in VALUES:
        raise ValueError(f"no Chinese spoken answer for guide section {section!r}; known: {', '.join(VALUES)}")
    return VALUES[section]()

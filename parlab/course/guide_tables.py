"""The interview guide's measured tables, held as data (``parlab/data``), and the guide's own
summary of them, so chapter 11 sets the cost model beside them without typing a number.

Guide 4.1: ChatGLM-6B answer times on one A800 and one V100 (``chatglm_inference``), and the rule
of thumb the guide draws from them (``GUIDE_4_1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from parlab.data import read_csv, source

CHATGLM_CSV = "chatglm_inference"

#: Guide 4.1's summary of its tables: seconds per 100 answer characters on each GPU (answers of up
#: to 500 characters) and how much longer the V100 takes (its "about 40%").
GUIDE_4_1 = {"a800_s_per_100_chars": 1.0, "v100_s_per_100_chars": 1.4, "v100_slower_by": 0.40}


@dataclass(frozen=True)
class InferenceRow:
    """One row of guide 4.1: the mean of ``runs`` answers to one prompt on one GPU."""

    gpu: str
    company: str
    requested_chars: int
    runs: int
    answer_chars: float
    seconds: float


def chatglm_inference(gpu: str | None = None) -> list[InferenceRow]:
    """Guide 4.1's rows (both GPUs, or only ``gpu``: 'a800' or 'v100'), in the guide's order."""
    rows = [InferenceRow(r["gpu"], r["company"], int(r["requested_chars"]), int(r["runs"]),
                         float(r["answer_chars"]), float(r["seconds"])) for r in read_csv(CHATGLM_CSV)]
    if gpu is None:
        return rows
    picked = [r for r in rows if r.gpu == gpu]
    if not picked:
        raise ValueError(f"guide 4.1 has no table for GPU {gpu!r}; it has: a800, v100")
    return picked


def chatglm_source() -> str:
    """Where the rows come from (the CSV's header)."""
    return source(CHATGLM_CSV)


@dataclass(frozen=True)
class LineFit:
    """seconds = intercept + slope x characters, least squares over one GPU's rows."""

    gpu: str
    intercept: float
    slope: float  # seconds per character

    @property
    def per_100_chars(self) -> float:
        return 100 * self.slope


def line_fit(gpu: str) -> LineFit:
    """The straight line through guide 4.1's rows for ``gpu`` (numpy least squares, degree 1)."""
    rows = chatglm_inference(gpu)
    slope, intercept = np.polyfit([r.answer_chars for r in rows], [r.seconds for r in rows], 1)
    return LineFit(gpu, float(intercept), float(slope))


def measured_pairs(gpu: str | None = None) -> list[tuple[str, float, float]]:
    """(gpu, answer characters, seconds) per row: the input of ``costmodel.inference.fit_decode``."""
    return [(r.gpu, r.answer_chars, r.seconds) for r in chatglm_inference(gpu)]

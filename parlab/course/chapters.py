"""The course map: chapters, exercises, and every question of the interview guide with the
chapter section (a link to its heading) and the exercise answering it.

The guide (``shared/guide/interview_guide_zh.txt``, Chinese) is cited by section number; the
question texts here are our own short English paraphrases. Chapter 00 shows this map
(``course_map``) and tests check it against the guide's headings and the notebooks on disk.

The convention every chapter follows: it answers guide section X.Y under a markdown heading
(``##`` or ``###``) whose text contains "guide X.Y" ("## 2. What one GPU holds (guide 1.14, second
part)"; a list or range after one "guide" counts too: "guide 1.9, 1.10", "guide 3.3-3.5"). The
map links to that heading by the id JupyterLab gives it (``anchor``).
"""

from __future__ import annotations

import html as html_lib
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT_DIR = Path(__file__).resolve().parents[2]
COURSE_DIR = ROOT_DIR / "course"
EXERCISES_DIR = ROOT_DIR / "exercises"


@dataclass(frozen=True)
class Chapter:
    number: int
    slug: str
    title: str
    sections: tuple[str, ...]  # guide sections it answers

    @property
    def file(self) -> str:
        return f"{self.number:02d}_{self.slug}.ipynb"

    @property
    def ready(self) -> bool:
        return (COURSE_DIR / self.file).exists()


CHAPTERS: tuple[Chapter, ...] = (
    Chapter(0, "start_here", "Start here", ()),
    Chapter(1, "why_distributed", "Why distribute: the memory and compute walls", ("1.1", "1.10", "1.14")),
    Chapter(2, "communication", "Communication: point-to-point and collectives", ("1.2", "1.3")),
    Chapter(3, "data_parallel", "Data parallelism: DDP, buckets, overlap, no_sync", ("1.4", "1.5", "1.11")),
    Chapter(4, "pipeline_parallel", "Pipeline parallelism: GPipe, 1F1B, interleaved", ("1.6", "1.12", "1.13")),
    Chapter(5, "tensor_parallel", "Tensor parallelism: row/column splits, f and g", ("1.7", "1.13", "1.15")),
    Chapter(6, "comparing", "DP vs TP vs PP, measured", ("1.8",)),
    Chapter(7, "zero_fsdp", "ZeRO and FSDP", ("1.16", "1.17", "1.19")),
    Chapter(8, "3d_parallelism", "3D parallelism", ("1.9", "1.14", "2.1", "2.2")),
    Chapter(9, "memory_optimizations", "Memory optimisations: recompute, offload, mixed precision", ("1.10", "1.21")),
    Chapter(10, "choosing_a_strategy", "Choosing a strategy: the cost model as an advisor",
            ("1.18", "1.20", "1.22", "2.3", "3.1", "3.2", "3.3", "3.4", "3.5")),
    Chapter(11, "practice", "Practice: inference speed, multi-node bandwidth, launching runs",
            ("4.1", "4.2", "4.3", "4.4", "4.5")),
    Chapter(12, "interview_drill", "Interview drill", ()),
    Chapter(13, "beyond_3d", "Long context and mixture of experts: the 4th and 5th dimensions", ()),
    Chapter(14, "derivations", "Derivations: activations, FLOPs, MFU, ZeRO, TP bytes, three inequalities", ()),
    Chapter(15, "how_true_the_numbers_are", "How true the numbers are: the cost model against published runs", ()),
)

#: the chapter beyond the guide (context and expert parallelism, DualPipe): it answers no guide
#: question of its own; its drill cards (``parlab.drill.BEYOND``) cite it
BEYOND = "beyond_3d"


def beyond_chapter() -> Chapter:
    """The chapter beyond the guide (``BEYOND``)."""
    return next(c for c in CHAPTERS if c.slug == BEYOND)

#: guide section -> the question, paraphrased in English
GUIDE_QUESTIONS: dict[str, str] = {
    "1.1": "What problems does training a large language model run into?",
    "1.2": "What is point-to-point communication?",
    "1.3": "What is collective communication?",
    "1.4": "What is data parallelism?",
    "1.5": "How is data parallelism made faster (buckets, overlap, skipping synchronisation)?",
    "1.6": "What is pipeline parallelism?",
    "1.7": "What is tensor (intra-layer) parallelism: row- and column-parallel matmuls?",
    "1.8": "How do data, tensor and pipeline parallelism compare?",
    "1.9": "What is 3D parallelism?",
    "1.10": "To train on a single GPU, what must the card have?",
    "1.11": "With N GPUs that each hold the whole model, how do you train faster?",
    "1.12": "What if one GPU cannot hold the whole model?",
    "1.13": "Pipeline inference runs one stage at a time; what else can you do?",
    "1.14": "Can DP, TP and PP be combined, and how big a model does one 80 GB card hold?",
    "1.15": "What are Colossal-AI's 1D/2D/2.5D/3D tensor parallelism?",
    "1.16": "Besides 3D parallelism, how else can you train at scale?",
    "1.17": "With ZeRO available, why is 3D parallelism still needed?",
    "1.18": "Is 3D parallelism for teams without NVLink clusters?",
    "1.19": "Is multi-node ZeRO-3 over 10 GbE practical?",
    "1.20": "What distributed and memory-saving techniques exist, and how do they differ?",
    "1.21": "What memory optimisations exist (recompute, offload, mixed precision)?",
    "1.22": "What are the common distributed training frameworks?",
    "2.1": "With many 8-GPU DGX A100 nodes, how do you lay out 3D parallelism?",
    "2.2": "Which frameworks do you build a large parallel training system from?",
    "2.3": "How do you choose DP/TP/PP sizes (BLOOM's experiments)?",
    "3.1": "How do you choose a distributed training framework?",
    "3.2": "How do you choose a technology stack?",
    "3.3": "One GPU: what to do?",
    "3.4": "One node with several GPUs: what to do?",
    "3.5": "Several nodes: what to do?",
    "4.1": "Checking inference speed (ChatGLM on V100 vs A800)",
    "4.2": "Speeding up parallel training (DeepSpeed ZeRO stage 2 vs 3)",
    "4.3": "DeepSpeed reports that it cannot find a host",
    "4.4": "Why can multi-node training be slower than one node?",
    "4.5": "Multi-node NCCL cannot connect (DeepSpeed settings)",
}


#: guide sections that ask two things, answered in different chapters: section -> {chapter: part}
PARTS: dict[str, dict[int, str]] = {
    "1.14": {1: "how big a model one 80 GB card holds", 8: "combining DP, TP and PP"},
}


def part(section: str, chapter: int) -> str:
    """The part of guide ``section`` that ``chapter`` answers ('' when it answers all of it)."""
    return PARTS.get(section, {}).get(chapter, "")


def chapters_for(section: str) -> list[Chapter]:
    """The chapters answering a guide section (chapters 00 and 12 cover everything implicitly)."""
    return [c for c in CHAPTERS if section in c.sections]


def question_map() -> list[tuple[str, str, str]]:
    """(section, question, 'NN title [(planned)] [: part]; ...') for every guide question; a
    section answered in parts (``PARTS``) names the part each chapter answers."""
    rows = []
    for section, question in GUIDE_QUESTIONS.items():
        where = "; ".join(f"{c.number:02d} {'' if c.ready else '(planned) '}{c.title.split(':')[0]}"
                          + (f": {part(section, c.number)}" if part(section, c.number) else "")
                          for c in chapters_for(section))
        rows.append((section, question, where))
    return rows


# -- anchors: where a chapter answers a section ---------------------------------------------------
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_REF = r"\d\.\d+(?:\s*[-\u2013]\s*\d\.\d+)?"
_REFS = re.compile(rf"\bguide\s+({_REF}(?:(?:\s*,\s*|\s+and\s+|\s*/\s*){_REF})*)", re.IGNORECASE)
#: characters a browser percent-encodes in a link's fragment (WHATWG URL: the fragment
#: percent-encode set), which JupyterLab then fails to match against a heading id
_UNLINKABLE = re.compile(r'[^\x21-\x7e]|["<>`%]')


def heading_text(markdown: str) -> str:
    """The visible text of a markdown heading's source, as the browser's ``textContent`` of the
    rendered heading reads: code spans, emphasis markers, link targets and HTML tags dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)  # [text](url) -> text
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__|\*)(.+?)\1", r"\2", text)
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!])", r"\1", text)  # backslash escapes
    return html_lib.unescape(text).strip()


def anchor(heading: str) -> str:
    """The id JupyterLab gives a rendered markdown heading: its text content with every space
    replaced by "-" (``createHeaderId`` in @jupyterlab/rendermime 4.x: ``textContent.replace(/ /g,
    '-')``; nbconvert's ``add_anchor`` does the same and then URL-quotes). A link to another
    notebook's heading is ``NN_slug.ipynb#<anchor>``."""
    return heading_text(heading).replace(" ", "-")


def unlinkable(anchor_id: str) -> str:
    """Why a link to ``anchor_id`` would not scroll to its heading in JupyterLab ('' if it would):
    the browser percent-encodes non-ASCII characters, spaces, quotes, backticks and angle brackets
    of a fragment, and JupyterLab compares the encoded fragment with the raw heading id."""
    bad = sorted(set(_UNLINKABLE.findall(anchor_id)))
    return f"its id has characters a link cannot carry: {' '.join(map(repr, bad))}" if bad else ""


def sections_named(text: str) -> list[str]:
    """The guide sections a heading names after the word "guide", ranges expanded in guide order:
    'Pipeline bubbles (guide 1.9, 1.10)' -> ['1.9', '1.10']; 'guide 3.3-3.5' -> ['3.3', '3.4', '3.5']."""
    order = list(GUIDE_QUESTIONS)
    out: list[str] = []
    for refs in _REFS.findall(text):
        for ref in re.split(r"\s*,\s*|\s+and\s+|\s*/\s*", refs):
            ends = re.split(r"\s*[-\u2013]\s*", ref)
            if len(ends) == 2 and ends[0] in order and ends[1] in order:
                out += order[order.index(ends[0]):order.index(ends[1]) + 1]
            else:
                out.append(ends[0])
    return list(dict.fromkeys(out))


def notebook_headings(path: Path) -> list[tuple[int, str]]:
    """(level, source text) of every markdown heading of a notebook, in order (none if it is missing)."""
    return list(_headings(path, path.stat().st_mtime_ns if path.exists() else 0))


@lru_cache(maxsize=64)
def _headings(path: Path, _mtime: int) -> tuple[tuple[int, str], ...]:
    if not path.exists():
        return ()
    import nbformat

    nb = nbformat.read(path, as_version=4)
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = _FENCE.sub("", cell.source)
            out += [(len(h), t) for h, t in _HEADING.findall(source)]
    return tuple(out)


@dataclass(frozen=True)
class Where:
    """Where a chapter answers a guide section: the heading (None: the chapter has none naming the
    section, or the chapter does not exist yet) and the relative link from chapter 00 to it."""

    chapter: Chapter
    section: str
    heading: str | None

    @property
    def anchor(self) -> str | None:
        return anchor(self.heading) if self.heading is not None else None

    @property
    def link(self) -> str | None:
        """'03_data_parallel.ipynb#4.-The-numbers:-guide-1.5's-three-effects-on-a-real-model'."""
        return f"{self.chapter.file}#{self.anchor}" if self.heading is not None else None

    @property
    def label(self) -> str:
        """'03 · 4. The numbers: guide 1.5's three effects on a real model'."""
        head = heading_text(self.heading) if self.heading is not None else self.chapter.title
        return f"{self.chapter.number:02d} \u00b7 {head}"

    def problem(self) -> str:
        """Why this link does not resolve ('' when it does)."""
        c = self.chapter
        if not c.ready:
            return f"guide {self.section}: chapter {c.file} does not exist"
        if self.heading is None:
            return (f"guide {self.section}: {c.file} has no ## or ### heading containing "
                    f"'guide {self.section}'")
        why = unlinkable(self.anchor)
        return f"guide {self.section}: heading {self.heading!r} of {c.file}: {why}" if why else ""


def where(section: str, chapter: Chapter) -> Where:
    """The first ``##``/``###`` heading of ``chapter`` naming guide ``section``."""
    for level, text in notebook_headings(COURSE_DIR / chapter.file):
        if level in (2, 3) and section in sections_named(heading_text(text)):
            return Where(chapter, section, text)
    return Where(chapter, section, None)


# -- exercises ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Exercise:
    """An exercise notebook, ``exercises/exNN_*.ipynb`` (its solution in ``solutions/``), and the
    guide sections it practises."""

    number: int
    title: str
    sections: tuple[str, ...]

    @property
    def path(self) -> Path | None:
        """The exercise notebook on disk (None when it is not written yet)."""
        found = sorted(EXERCISES_DIR.glob(f"ex{self.number:02d}_*.ipynb"))
        return found[0] if found else None

    @property
    def link(self) -> str | None:
        """The link from a chapter in course/: '../exercises/ex01_memory_estimator.ipynb'."""
        return f"../exercises/{self.path.name}" if self.path else None

    @property
    def label(self) -> str:
        return f"ex{self.number:02d} {self.title}"


EXERCISES: tuple[Exercise, ...] = (
    Exercise(1, "memory estimator", ("1.1", "1.10", "1.14")),
    Exercise(2, "ring all-reduce", ("1.2", "1.3")),
    Exercise(3, "bucketed DDP", ("1.4", "1.5", "1.11")),
    Exercise(4, "1F1B schedule", ("1.6", "1.12", "1.13")),
    Exercise(5, "TP linear layers", ("1.7",)),
    Exercise(7, "ZeRO-2 step", ("1.16", "4.2")),
    Exercise(8, "rank grid", ("1.9", "1.14", "2.1")),
    Exercise(12, "interview drill", ("1.1", "1.3", "1.6", "1.9", "1.16")),
    Exercise(13, "ring attention", ()),  # beyond the guide, as chapter 13
)


def exercises_for(section: str) -> list[Exercise]:
    """The exercises practising a guide section."""
    return [e for e in EXERCISES if section in e.sections]


# -- the map chapter 00 shows ----------------------------------------------------------------------
@dataclass(frozen=True)
class MapRow:
    """One guide question: where it is answered (a link per chapter) and which exercises practise it."""

    section: str
    question: str
    answers: tuple[Where, ...]
    exercises: tuple[Exercise, ...]


def section_map() -> list[MapRow]:
    """Every guide question with its chapter sections and exercises, in guide order."""
    return [MapRow(s, q, tuple(where(s, c) for c in chapters_for(s)), tuple(exercises_for(s)))
            for s, q in GUIDE_QUESTIONS.items()]


def map_problems() -> list[str]:
    """Every broken entry of the map: a section with no chapter, a chapter or heading that is
    missing, a heading id a link cannot reach, an exercise not on disk ([] when all resolve)."""
    out = []
    for row in section_map():
        if not row.answers:
            out.append(f"guide {row.section}: no chapter answers it (parlab.course.CHAPTERS)")
        out += [p for w in row.answers if (p := w.problem())]
    out += [f"ex{e.number:02d} ({e.title}): no exercises/ex{e.number:02d}_*.ipynb" for e in EXERCISES
            if e.path is None]
    return out


def _a(href: str | None, label: str) -> str:
    text = html_lib.escape(label)
    return f'<a href="{html_lib.escape(href)}">{text}</a>' if href else f'<span style="color:#b00020">{text}</span>'


@dataclass(frozen=True)
class CourseMap:
    """The map as a notebook shows it: an HTML table whose cells link to each chapter section and
    exercise, and a plain-text twin (what nbval compares: section, chapter numbers and headings)."""

    rows: tuple[MapRow, ...]

    def html(self) -> str:
        cell = 'style="text-align:left;padding:2px 10px;vertical-align:top"'
        head = "".join(f'<th {cell[:-1]};border-bottom:1px solid #888">{h}</th>'
                       for h in ("guide", "question", "answered in", "exercise"))
        body = []
        for r in self.rows:
            answers = "<br>".join(_a(w.link, w.label + (f" ({part(r.section, w.chapter.number)})"
                                                         if part(r.section, w.chapter.number) else ""))
                                  for w in r.answers)
            exercises = "<br>".join(_a(e.link, e.label) for e in r.exercises)
            body.append(f"<tr><td {cell}>{r.section}</td><td {cell}>{html_lib.escape(r.question)}</td>"
                        f"<td {cell}>{answers}</td><td {cell}>{exercises}</td></tr>")
        return (f'<table class="parlab-table parlab-course-map" style="border-collapse:collapse;margin:4px 0">'
                f'<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')

    def text(self, width: int = 110) -> str:
        lines = []
        for r in self.rows:
            where_ = "; ".join(w.label for w in r.answers)
            ex = ", ".join(f"ex{e.number:02d}" for e in r.exercises)
            lines += textwrap.wrap(f"{r.section:<5} {where_}" + (f" [{ex}]" if ex else ""), width,
                                   subsequent_indent=" " * 6)
        return "\n".join(lines)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": self.html(), "text/plain": self.text()}


def course_map() -> CourseMap:
    """The map chapter 00 shows (``display(course_map())``)."""
    return CourseMap(tuple(section_map()))


# -- the README's chapter table --------------------------------------------------------------------
def compact_sections(sections: tuple[str, ...]) -> str:
    """Sections as the README writes them: runs of three or more consecutive sections of one part of
    the guide as a range ('1.18-1.20, 1.22, 2.3, 3.1-3.5'); none at all is 'all'."""
    if not sections:
        return "all"
    order = list(GUIDE_QUESTIONS)
    runs: list[list[str]] = []
    for s in sections:
        last = runs[-1][-1] if runs else ""
        if (s in order and last in order and order.index(s) == order.index(last) + 1
                and s.split(".")[0] == last.split(".")[0]):
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) >= 3 else ", ".join(r) for r in runs)


def readme_table() -> str:
    """The README's chapter table (markdown), generated from ``CHAPTERS``; a test keeps the README
    equal to it."""
    lines = ["| # | chapter | guide sections | notebook |", "|---|---|---|---|"]
    lines += [f"| {c.number:02d} | {c.title} | {'beyond the guide' if c.slug == BEYOND else compact_sections(c.sections)} "
              f"| `course/{c.file}` |" for c in CHAPTERS]
    return "\n".join(lines)

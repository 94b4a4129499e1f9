"""Put the Chinese cells into the chapters: each 中文口述版 under its "guide X.Y" heading, the
glossary in chapter 00, the drill in both languages in chapter 12.

    python -m parlab.zh.insert course/07_zero_fsdp.ipynb course/10_choosing_a_strategy.ipynb ...

Idempotent: a cell carries the tag ``zh`` plus its own key tag (``zh-spoken-1.17``, ``zh-glossary``,
``zh-drill``); a notebook that already has a key is left alone for that key. The cells' sources are
hidden (``jupyter.source_hidden``), as chapter 01's answer cells; their outputs come from the
next execution of the notebook (``python -m parlab.course.nbtools execute ...``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from parlab.course import CHAPTERS, heading_text, sections_named

#: guide section -> the chapters whose "guide X.Y" heading carries its 中文口述版 (each chapter
#: answering the section: a section answered in two chapters shows its answer in both)
HOME: dict[str, tuple[int, ...]] = {
    "1.1": (1,), "1.10": (1, 9), "1.2": (2,), "1.3": (2,), "1.4": (3,), "1.5": (3,), "1.11": (3,), "1.6": (4,),
    "1.12": (4,), "1.13": (4, 5), "1.20": (4, 10), "1.7": (5,), "1.15": (5,), "1.8": (6,), "1.16": (7,),
    "1.17": (7,), "1.19": (7,), "1.9": (8,), "1.14": (1, 8), "2.1": (8,), "2.2": (8,), "1.21": (9,),
    "1.18": (10,), "1.22": (10,), "2.3": (10,), "3.1": (10,), "3.2": (10,), "3.3": (10,), "3.4": (10,),
    "3.5": (10,), "4.1": (11,), "4.2": (11,), "4.3": (11,), "4.4": (11,), "4.5": (11,),
}

GLOSSARY_MD = """## 术语表 / Glossary

The terms of the course as Chinese LLM-infrastructure engineers say them (Megatron-LM, DeepSpeed and
Colossal-AI's Chinese documentation, and the guide's own wording), each with its English twin, a
one-line definition in both languages and a link to the chapter section that explains it. Type in the
box to search either language. Every chapter's "guide X.Y" heading has a collapsed **中文口述版**: the
answer to say out loud in a Chinese interview, its numbers computed by `parlab` like the English."""

GLOSSARY_CODE = "from parlab.zh.widget import show_glossary\nshow_glossary()"

DRILL_MD = """### 中文练习 / The drill in Chinese

`Quiz(lang="zh")` asks the same cards in Chinese (prompts, options, answers and explanations; a
generated card's numbers come from the same parlab computation); the dashboard's 语言 switch does the
same. One card in both languages:"""

DRILL_CODE = """from parlab.drill.bilingual import both_languages
both_languages("1.19", seed=2)"""


def _cell_key(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _code(source: str, key: str):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["zh", key]
    cell.metadata["jupyter"] = {"source_hidden": True}
    return cell


def _markdown(source: str, key: str):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata["tags"] = ["zh", key]
    return cell


def _chapter_number(path: Path) -> int:
    name = path.name
    for c in CHAPTERS:
        if c.file == name:
            return c.number
    raise ValueError(f"{path}: not a chapter of parlab.course.CHAPTERS")


def _heading_sections(cell) -> list[str]:
    found: list[str] = []
    for line in cell.source.splitlines():
        if line.startswith("## ") or line.startswith("### "):
            found += sections_named(heading_text(line.lstrip("#").strip()))
    return found


def _markdown_index(nb, text: str, chapter: int) -> int:
    """The index of the first markdown cell containing ``text`` (ValueError naming it if none)."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and text in cell.source:
            return i
    raise ValueError(f"chapter {chapter:02d} has no markdown cell with {text!r}: where its Chinese cells go")


def plan(nb, chapter: int) -> list[tuple[int, object]]:
    """(index to insert after, cell) for every Chinese cell ``nb`` lacks."""
    present = set().union(*(_cell_key(c) for c in nb.cells)) if nb.cells else set()
    todo: list[tuple[int, object]] = []
    placed: set[str] = set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        mine = [s for s in _heading_sections(cell) if chapter in HOME.get(s, ()) and s not in placed]
        if mine:
            placed.update(mine)
            key = "zh-spoken-" + "-".join(mine)
            if not any(k.startswith("zh-spoken-") and set(k[10:].split("-")) & set(mine) for k in present):
                args = ", ".join(f'"{s}"' for s in mine)
                todo.append((i, _code(f"from parlab.zh import show_spoken\nshow_spoken({args})", key)))
    missing = [s for s, chapters in HOME.items() if chapter in chapters and s not in placed]
    if missing:
        raise ValueError(f"chapter {chapter:02d} has no heading naming guide {', '.join(missing)}")
    if chapter == 0 and "zh-glossary" not in present:
        at = _markdown_index(nb, "## Every guide question", chapter)
        todo.append((at - 1, _markdown(GLOSSARY_MD, "zh-glossary")))
        todo.append((at - 1, _code(GLOSSARY_CODE, "zh-glossary-table")))
    if chapter == 12 and "zh-drill" not in present:
        at = _markdown_index(nb, "## 3. A sample round", chapter)
        todo.append((at - 1, _markdown(DRILL_MD, "zh-drill")))
        todo.append((at - 1, _code(DRILL_CODE, "zh-drill-both")))
    return todo


def insert(path: str | Path) -> int:
    """Insert the missing Chinese cells into the notebook at ``path``; the number inserted."""
    path = Path(path)
    chapter = _chapter_number(path)
    nb = nbformat.read(path, as_version=4)
    todo = plan(nb, chapter)
    # insert from the end so earlier indices stay valid; cells after the same index keep their order
    for _, (i, cell) in sorted(enumerate(todo), key=lambda t: (-t[1][0], -t[0])):
        nb.cells.insert(i + 1, cell)
    if todo:
        nbformat.write(nb, path)
    return len(todo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+")
    args = parser.parse_args(argv)
    for p in args.notebooks:
        try:
            print(f"{p}: {insert(p)} cell(s) inserted")
        except ValueError as e:
            print(f"{p}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Chapter 12's quiz mode: a random drill question, your answer, the feedback, a running score.

The filters (guide section, part or chapter; topic; kind) are the dashboard's controls: changing
one starts a new ``parlab.drill.Quiz`` on the filtered bank (the running score carries over).
Below the card sits an answer control chosen by the card's kind (radio buttons for multiple
choice, a text box for a name or a number), a "check" button and a "new question" button. Every
answer is read and judged by the card's own ``check`` (no formula or answer lives here): a right
or wrong answer shows the explanation and counts once; an unreadable one shows the parser's
message only (nothing counted, nothing revealed).

    dash = DrillDashboard(seed=0)
    dash.answer_with("B"); dash.check_button.click()     # in a plain pytest, no kernel
    dash.new_button.click()
    dash.controls["section"].value = "1.7"               # a new quiz on one guide section
    dash.controls["language"].value = "zh"               # the same drill in Chinese (parlab.drill.zh.translate)
"""

from __future__ import annotations

import html as html_lib
from typing import Any

import ipywidgets as widgets

from parlab.course import CHAPTERS
from parlab.drill import KINDS, SECTIONS, TOPICS, Quiz, Score, count_by_section, title
from parlab.drill.bank import part_sections
from parlab.drill.questions import LETTERS, Result
from parlab.viz.drill import drill_figure

from .base import CSS_PREFIX, Dashboard

#: the guide's four parts (1. 理论篇 ... 4. 问题篇), by their English names
GUIDE_PARTS = {"1": "theory", "2": "practice at scale", "3": "choosing a strategy", "4": "problems from the field"}
KIND_NAMES = {"choice": "multiple choice", "name": "a name", "number": "a number"}
ALL = "all"
LANGUAGES = [("English", "en"), ("中文", "zh")]
#: the card's chrome in Chinese (the card's own text comes translated from parlab.drill.zh.translate)
KIND_NAMES_ZH = {"choice": "选择题", "name": "填名称", "number": "填数字"}


def part_label(part: str) -> str:
    """'part 1: theory (1.1-1.22)'."""
    sections = part_sections(part)
    return f"part {part}: {GUIDE_PARTS[part]} ({sections[0]}-{sections[-1]})"


def section_options() -> list[tuple[str, str]]:
    """(label, value) of the "questions from" control: everything, each guide part, each chapter
    that answers guide sections, then each section under the guide's own (Chinese) heading."""
    options = [("all sections", ALL)]
    options += [(part_label(p), f"part {p}") for p in GUIDE_PARTS]
    options += [(f"chapter {c.number:02d}: {c.title.split(':')[0]}", f"chapter {c.number}")
                for c in CHAPTERS if c.sections]
    options += [(title(s), s) for s in SECTIONS]
    return options


def sections_for(value: str) -> tuple[str, ...] | None:
    """The guide sections one value of the "questions from" control stands for (None: all)."""
    if value == ALL:
        return None
    if value.startswith("part "):
        return tuple(part_sections(value.removeprefix("part ")))
    if value.startswith("chapter "):
        number = int(value.removeprefix("chapter "))
        return next(c.sections for c in CHAPTERS if c.number == number)
    return (value,)


def by_part(score: Score) -> str:
    """'part 1: 2/3, part 4: 1/1' from a score's per-section counts."""
    parts: dict[str, list[int]] = {}
    for section, (right, answered) in score.by_section.items():
        row = parts.setdefault(section.split(".")[0], [0, 0])
        row[0] += right
        row[1] += answered
    return ", ".join(f"part {p}: {r}/{n}" for p, (r, n) in sorted(parts.items()))


def _lines(text: str) -> str:
    return html_lib.escape(text).replace("\n", "<br>")


class DrillDashboard(Dashboard):
    """Quiz mode of the interview drill (see the module docstring). ``seed`` makes a session
    reproducible: the same filters and clicks give the same cards."""

    title = "Interview drill: a random question, your answer, feedback and a running score"
    control_columns = 3
    control_width = 300

    def __init__(self, seed: int = 0, **initial: Any) -> None:
        self.seed = seed
        self.score = Score()  # shared by every quiz this dashboard starts: the running score
        self.quiz: Quiz | None = None
        self._filters: tuple | None = None
        self._shown = None  # the card the answer control was built for
        self.last_answer: Result | None = None
        self.answer = widgets.HTML()  # replaced by a RadioButtons or a Text for each card
        self.answer_box = widgets.Box([self.answer]).add_class(CSS_PREFIX + "answer")
        self.check_button = widgets.Button(description="check", button_style="primary",
                                           tooltip="check your answer").add_class(CSS_PREFIX + "check")
        self.new_button = widgets.Button(description="new question",
                                         tooltip="draw another question").add_class(CSS_PREFIX + "new-question")
        self.feedback = widgets.HTML().add_class(CSS_PREFIX + "feedback")
        self.check_button.on_click(lambda _: self.check())
        self.new_button.on_click(lambda _: self.new_question())
        self.buttons = widgets.HBox([self.check_button, self.new_button])
        super().__init__(**initial)
        head, controls, error, _ = self.children
        self.children = (head, controls, error, self.output, self.answer_box, self.buttons, self.feedback,
                         self.image)
        self._sync_answer()

    # -- the Dashboard pieces ------------------------------------------------------------------
    def make_controls(self):
        return {
            "section": widgets.Dropdown(options=section_options(), value=ALL, description="questions from"),
            "topic": widgets.Dropdown(options=[ALL, *TOPICS], value=ALL, description="topic"),
            "kind": widgets.Dropdown(options=[(ALL, ALL)] + [(KIND_NAMES[k], k) for k in KINDS],
                                     value=ALL, description="answer with"),
            "language": widgets.Dropdown(options=LANGUAGES, value="en", description="语言 language"),
        }

    def compute(self, section: str, topic: str, kind: str, language: str = "en") -> Quiz:
        """The quiz for these filters: kept while they stay the same, else a new one (seeded),
        sharing the running score, with its first card drawn. ValueError when nothing matches."""
        filters = (section, topic, kind, language)
        if self.quiz is not None and filters == self._filters:
            return self.quiz
        try:
            quiz = Quiz(sections=sections_for(section), topics=None if topic == ALL else topic,
                        kinds=None if kind == ALL else kind, seed=self.seed, lang=language)
        except ValueError:
            label = dict((v, k) for k, v in section_options())[section]
            raise ValueError(f"no drill question matches questions from = {label!r}, topic = {topic!r}, "
                             f"answer with = {kind!r}: set one of them to 'all'") from None
        quiz.score = self.score
        quiz.next()
        self.quiz, self._filters, self.last_answer = quiz, filters, None
        self.feedback.value = ""
        return quiz

    def html(self, quiz: Quiz) -> str:
        card = quiz.card
        if quiz.lang == "zh":
            head = f"guide {card.section} · {KIND_NAMES_ZH[card.kind]} · 题库共 {len(quiz)} 题"
            how = card.how_to_answer() if card.kind != "choice" else "选一个选项，然后按 check。"
        else:
            head = (f"guide {card.section} · {html_lib.escape(card.topic)} · answer with "
                    f"{KIND_NAMES[card.kind]} · {len(quiz)} question{'' if len(quiz) == 1 else 's'} in the pool")
            how = card.how_to_answer() if card.kind != "choice" else "Pick one option, then press check."
        score = (f"score: {html_lib.escape(self.score.text())}" if self.score.answered
                 else "score: no answers yet")
        if self.score.by_section:
            score += f" ({html_lib.escape(by_part(self.score))})"
        lang = "zh-CN" if quiz.lang == "zh" else "en"
        return (f'<div class="parlab-card" lang="{lang}" style="max-width:880px">'
                f'<div style="color:#555;font-size:90%">{head}</div>'
                f'<div style="font-weight:bold;margin:2px 0">{html_lib.escape(card.title_zh)}</div>'
                f'<div style="margin:4px 0">{_lines(card.prompt)}</div>'
                f'<div style="color:#555;font-size:90%">{html_lib.escape(how)}</div></div>'
                f'<p class="parlab-score" style="margin:4px 0"><b>{score}</b></p>')

    def figure(self, quiz: Quiz):
        return drill_figure(count_by_section(quiz.questions), self.score.by_section)

    def summary(self, quiz: Quiz) -> str:
        card = quiz.card
        score = self.score.text() if self.score.answered else "no answers yet"
        return f"{len(quiz)} questions in the pool; this one: guide {card.section} ({card.key}); {score}"

    # -- quiz mode -----------------------------------------------------------------------------
    def update(self) -> None:
        super().update()
        if hasattr(self, "buttons"):  # the base's first update runs before the layout exists
            self._sync_answer()

    def _sync_answer(self) -> None:
        """Show an answer control fitting the current card (a new one for each new card); hide
        the answer area when a filter matches nothing."""
        ok = self.quiz is not None and self.result is not None
        for w in (self.answer_box, self.buttons, self.feedback):
            w.layout.display = None if ok else "none"
        if not ok or self.quiz.card is self._shown:
            return
        card = self.quiz.card
        if card.kind == "choice":
            control = widgets.RadioButtons(options=[f"{LETTERS[i]}) {o}" for i, o in enumerate(card.options)],
                                           value=None, layout=widgets.Layout(width="880px"))
            control.add_class(CSS_PREFIX + "answer-choice")
        else:
            how = card.how_to_answer().replace("例如 ", "e.g. ")  # a Chinese card says 例如
            example = how.split("e.g. ")[-1].rstrip(".。") if card.kind == "number" else ""
            control = widgets.Text(value="", description="answer", placeholder=example or card.options[0],
                                   layout=widgets.Layout(width="420px"))
            control.add_class(CSS_PREFIX + "answer-text")
        self.answer = control
        self.answer_box.children = (control,)
        self._shown = card

    def answer_with(self, text: str) -> None:
        """Put ``text`` in the answer control (a letter 'A'.. picks a radio button), as a learner would."""
        if isinstance(self.answer, widgets.RadioButtons):
            letter = text.strip().upper()
            index = LETTERS.find(letter) if len(letter) == 1 else -1
            self.answer.index = index if 0 <= index < len(self.answer.options) else None
        else:
            self.answer.value = text

    def typed(self) -> str:
        """What the answer control holds, as text for ``check`` ('' when nothing is picked)."""
        if isinstance(self.answer, widgets.RadioButtons):
            return "" if self.answer.index is None else LETTERS[self.answer.index]
        return str(self.answer.value)

    def check(self) -> Result | None:
        """Judge the current answer with the card's own ``check``, show the feedback, update the
        score (the card's first readable answer counts)."""
        if self.quiz is None or self.result is None:
            return None
        counted_before = self.quiz.answered
        result = self.quiz.answer(self.typed())
        self.last_answer = result
        if not result.readable:  # the parser's message only: nothing counted, nothing revealed
            self.feedback.value = (f'<div style="color:#8a5a00;border:1px solid #e0a030;padding:4px">'
                                   f"{_lines(result.message)}</div>")
            return result
        colour = "#1e7b34" if result.correct else "#b00020"
        note = " (this card was already scored: this answer is not counted)" if counted_before else ""
        self.feedback.value = (f'<div style="border-left:4px solid {colour};padding:2px 8px;max-width:880px">'
                               f'<b style="color:{colour}">{_lines(result.message)}</b>{note}'
                               f'<div style="margin-top:2px">{_lines(result.explanation)}</div></div>')
        self.update()  # the score line and the figure
        return result

    def new_question(self) -> None:
        """Draw the next card of the quiz and clear the feedback."""
        if self.quiz is None or self.result is None:
            return
        self.quiz.next()
        self.last_answer = None
        self.feedback.value = ""
        self.update()

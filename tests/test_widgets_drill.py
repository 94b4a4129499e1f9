"""The drill dashboard without a kernel: a new question changes the card, a right answer counts,
a wrong one does not, filters restrict the pool, bad input shows the parser's message."""

import html

import ipywidgets as widgets
import pytest
from test_drill import right_answer as right
from test_drill import wrong_answer as wrong

from parlab.course import CHAPTERS
from parlab.viz.html import TEXT_WIDTH
from parlab.widgets.base import Dashboard
from parlab.widgets.drill import DrillDashboard, part_sections, section_options, sections_for

PNG = b"\x89PNG"


def test_it_is_a_dashboard_with_a_card_a_score_and_a_figure():
    d = DrillDashboard()
    assert isinstance(d, Dashboard) and "parlab-dashboard" in d._dom_classes
    card = d.quiz.card
    assert html.escape(card.title_zh) in d.output.value and card.section in d.output.value
    assert "no answers yet" in d.output.value
    assert bytes(d.image.value).startswith(PNG)
    assert d.answer_box in d.children and d.feedback in d.children


def test_new_question_changes_the_card_and_clears_the_feedback():
    d = DrillDashboard(seed=1)
    first, html_before = d.quiz.card, d.output.value
    d.answer_with(wrong(first))
    d.check_button.click()
    assert d.feedback.value
    d.new_button.click()
    assert d.quiz.card is not first and d.output.value != html_before
    assert d.feedback.value == "" and d.last_answer is None
    assert d.typed() == ""  # a fresh answer control


def test_the_answer_control_follows_the_card_kind():
    d = DrillDashboard(kind="choice")
    assert isinstance(d.answer, widgets.RadioButtons)
    assert len(d.answer.options) == len(d.quiz.card.options) and d.answer.index is None
    d.controls["kind"].value = "number"
    assert isinstance(d.answer, widgets.Text) and d.quiz.card.kind == "number"
    d.controls["kind"].value = "name"
    assert isinstance(d.answer, widgets.Text) and d.quiz.card.kind == "name"


@pytest.mark.parametrize("kind", ["choice", "name", "number"])
def test_a_right_answer_increments_the_score(kind):
    d = DrillDashboard(kind=kind)
    png = bytes(d.image.value)
    card = d.quiz.card
    d.answer_with(right(card))
    result = d.check()
    assert result.correct and (d.score.answered, d.score.correct) == (1, 1)
    assert d.score.by_section == {card.section: [1, 1]}
    assert "1 / 1 correct" in d.output.value and "Correct." in d.feedback.value
    assert html.escape(result.explanation.splitlines()[0]) in d.feedback.value
    assert bytes(d.image.value) != png  # the figure shows the answer


def test_a_wrong_answer_is_counted_but_not_scored_right_and_shows_the_explanation():
    d = DrillDashboard(seed=3)
    card = d.quiz.card
    d.answer_with(wrong(card))
    d.check_button.click()
    assert not d.last_answer.correct and d.last_answer.readable
    assert (d.score.answered, d.score.correct) == (1, 0)
    assert "Not quite" in html.unescape(d.feedback.value) and "0 / 1 correct" in d.output.value


def test_only_the_first_readable_answer_of_a_card_counts():
    d = DrillDashboard(seed=4)
    card = d.quiz.card
    d.answer_with(wrong(card))
    d.check()
    d.answer_with(right(card))
    assert d.check().correct
    assert (d.score.answered, d.score.correct) == (1, 0)
    assert "not counted" in d.feedback.value


@pytest.mark.parametrize("kind,typed", [("number", "forty-two"), ("number", "12 parsecs"),
                                        ("name", "no such thing"), ("choice", "")])
def test_bad_input_shows_the_parsers_message_and_counts_nothing(kind, typed):
    d = DrillDashboard(kind=kind)
    card = d.quiz.card
    d.answer_with(typed)
    result = d.check()  # never raises
    assert not result.readable
    shown = html.unescape(d.feedback.value)
    assert result.message in shown and "Could not read your answer" in shown
    assert card.explanation.splitlines()[0] not in shown  # the answer is not given away
    assert d.score.answered == 0 and not d.quiz.answered
    d.answer_with(right(card))
    assert d.check().correct and d.score.correct == 1  # the card is still open


def test_section_part_and_chapter_filters_restrict_the_pool():
    d = DrillDashboard()
    d.controls["section"].value = "1.7"
    for _ in range(6):
        assert d.quiz.card.section == "1.7"
        d.new_question()
    assert {q.section for q in d.quiz.questions} == {"1.7"}
    d.controls["section"].value = "part 4"
    assert {q.section for q in d.quiz.questions} <= set(part_sections("4"))
    pipeline = next(c for c in CHAPTERS if c.number == 4)
    d.controls["section"].value = "chapter 4"
    assert {q.section for q in d.quiz.questions} == set(pipeline.sections)
    assert "in the pool" in d.output.value and str(len(d.quiz)) in d.output.value


def test_topic_and_kind_filters_restrict_the_pool():
    d = DrillDashboard(topic="launching", kind="name")
    assert d.quiz.questions and all(q.topic == "launching" and q.kind == "name" for q in d.quiz.questions)


def test_the_running_score_carries_over_a_filter_change():
    d = DrillDashboard()
    d.answer_with(right(d.quiz.card))
    d.check()
    d.controls["section"].value = "part 3"
    assert d.score.correct == 1 and "1 / 1 correct" in d.output.value


def test_a_filter_matching_nothing_is_a_message_and_hides_the_answer_area():
    d = DrillDashboard()
    d.controls["section"].value = "1.2"
    d.controls["topic"].value = "pipeline"
    assert "no drill question matches" in html.unescape(d.error.value)
    assert "topic = 'pipeline'" in d.last_error
    assert d.answer_box.layout.display == "none" and d.check() is None
    assert "parlab-no-result" in d.output.value  # the old card is cleared
    d.controls["topic"].value = "all"
    assert d.error.value == "" and d.quiz.card.section == "1.2" and d.answer_box.layout.display is None


def test_the_same_seed_gives_the_same_session():
    a, b = DrillDashboard(seed=7), DrillDashboard(seed=7)
    for _ in range(3):
        assert a.quiz.card.key == b.quiz.card.key and a.quiz.card.prompt == b.quiz.card.prompt
        a.new_question()
        b.new_question()


def test_moving_the_first_dropdown_changes_output_and_figure_as_the_browser_test_does():
    d = DrillDashboard()
    first = next(c for c in d.controls.values() if isinstance(c, widgets.Dropdown))
    text, png = d.output.value, bytes(d.image.value)
    first.index = (first.index + 1) % len(first.options)
    assert d.last_error is None and d.output.value != text and bytes(d.image.value) != png


def test_the_static_face_is_a_crisp_picture_and_a_short_text():
    d = DrillDashboard()
    data, metadata = d._repr_mimebundle_()
    assert data["image/png"].startswith(PNG)
    assert metadata["image/png"]["width"] == d.figure_size[0]
    lines = data["text/plain"].splitlines()
    assert all(len(line) <= TEXT_WIDTH for line in lines) and "questions in the pool" in lines[-1]


def test_every_section_option_names_real_sections():
    for label, value in section_options():
        sections = sections_for(value)
        assert sections is None or sections, label

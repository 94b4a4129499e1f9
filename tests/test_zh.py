"""Studying in Chinese (parlab.zh): the glossary, the 中文口述版 of every guide section, the drill in
Chinese. As specifications:

- the glossary holds at least 150 terms, each with both languages and a section that resolves to a
  real chapter heading;
- every guide section has its spoken Chinese answer (3-5 points), rendered from a template whose
  numbers are all computed by parlab: a template types no number (the rule: ``tokens.stray_digits``,
  outside its slots, guide references "guide X.Y" and the names of ``answers.NAMES``);
- every glossary term a spoken answer marks exists in the glossary;
- every drill card has its Chinese twin, takes every number of its English prompt, choices and
  working from the English card, and ``Quiz(lang="zh")`` poses and scores every card;
- the chapters that carry Chinese cells carry all of theirs, executed, and the inserter is idempotent.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from parlab.course import CHAPTERS, COURSE_DIR, GUIDE_QUESTIONS, unlinkable, where
from parlab.drill import BANK, Quiz
from parlab.drill.bilingual import both_languages
from parlab.drill.questions import LETTERS
from parlab.drill.zh import tokens
from parlab.drill.zh.translate import NAME_ZH, ZH, ZhCard, translate
from parlab.zh import answers, glossary, insert, numbers, spoken
from parlab.zh.spoken import SPOKEN_CLASS, TERM, Spoken

GUIDE_REF = re.compile(r"guide [1-4]\.\d+")


# -- the rule for numbers --------------------------------------------------------------------------
def test_number_tokens_are_numbers_and_not_names():
    assert tokens.numbers("a 175B model on 1.4T tokens, 1,024 GPUs at 50%: 2.27x (-13%), stages 1-3") == [
        "175B", "1.4T", "1,024", "50%", "2.27x", "-13%", "1-3"]
    assert tokens.numbers("ZeRO-3 fp16 gpt3-175b a100-80gb 1F1B 16-bit 2.5D (p-1)/p t0 10.0.0.2 2ND") == []


def test_a_typed_number_is_stray_and_a_slot_or_a_name_is_not():
    assert tokens.stray_digits("约 25 MB 的桶") == ["25"]
    assert tokens.stray_digits("第 {}-3 阶段") == ["-3"]
    assert tokens.stray_digits("约 {n} MB，{} 张 A100，ZeRO-3，fp16", answers.NAMES) == []


def test_fill_takes_the_english_numbers_in_order_or_by_index():
    assert tokens.fill("{} 张卡，{2} 秒，{model}", "on 8 GPUs of 80 GB in 3.5 s", {"model": "llama-7b"}) == \
        "8 张卡，3.5 秒，llama-7b"
    with pytest.raises(ValueError, match="has 1 numbers"):
        tokens.fill("{} {}", "only 1 number")


# -- glossary ---------------------------------------------------------------------------------------
def test_the_glossary_holds_at_least_150_terms_with_both_languages():
    assert len(glossary.GLOSSARY) >= 150
    for t in glossary.GLOSSARY:
        assert t.zh and t.en and t.zh_def and t.en_def, t
        assert re.search(r"[\u4e00-\u9fff]", t.zh_def), f"{t.zh}: its Chinese definition has no Chinese"
    names = [n for t in glossary.GLOSSARY for n in t.names]
    assert len(names) == len(set(names)), "a Chinese spelling names two entries"


def test_the_issue_s_core_terms_are_in_the_glossary():
    for name in ("张量并行", "流水线并行", "数据并行", "气泡", "气泡率", "显存", "通信量", "梯度累积", "重计算",
                 "激活重计算", "卸载", "混合精度", "主权重", "规约", "全规约", "全收集", "规约散射", "微批次", "万兆网",
                 "算子切分", "序列并行", "专家并行"):
        assert glossary.known(name), name


@pytest.mark.parametrize("term", glossary.GLOSSARY, ids=lambda t: t.zh)
def test_every_term_links_to_a_real_chapter_heading(term):
    w = glossary.where_link(term)
    assert w is not None, f"{term.zh}: {term.where!r} names no ## or ### heading of a chapter"
    assert (COURSE_DIR / w.chapter.file).exists()
    assert not unlinkable(glossary.link(term).split("#", 1)[1])


def test_glossary_definitions_type_no_number():
    for t in glossary.GLOSSARY:
        assert tokens.stray_digits(t.zh_def, answers.NAMES) == [], t.zh


def test_search_finds_both_languages():
    assert [t.zh for t in glossary.find("bubble fraction")] == ["气泡率"]
    assert any(t.en.startswith("all-gather") for t in glossary.find("全收集"))


# -- 中文口述版 -------------------------------------------------------------------------------------
def test_every_guide_section_has_its_spoken_answer_and_a_home():
    assert set(answers.SPOKEN) == set(GUIDE_QUESTIONS) == set(numbers.VALUES) == set(insert.HOME)
    for section, chapters in insert.HOME.items():
        answering = {c.number for c in CHAPTERS if section in c.sections}
        assert answering <= set(chapters), f"guide {section}: shown in {chapters}, answered in {sorted(answering)}"
        for number in chapters:  # and every chapter showing it has a heading naming it
            assert where(section, CHAPTERS[number]).heading is not None, (section, number)


@pytest.mark.parametrize("section", list(answers.SPOKEN))
def test_a_spoken_answer_has_three_to_five_points_and_all_its_numbers_computed(section):
    points = answers.SPOKEN[section]
    assert 3 <= len(points) <= 5
    text = spoken(section)  # every placeholder filled by numbers.values
    assert "{" not in text and "[[" not in text
    for p in points:
        bare = GUIDE_REF.sub("", p)
        assert tokens.stray_digits(bare, answers.NAMES) == [], f"guide {section}: a typed number in {p[:40]!r}"


def test_names_that_may_hold_digits_are_names():
    for name in answers.NAMES:
        assert re.search(r"[A-Za-z]", name), name


def test_a_changed_number_changes_the_chinese(monkeypatch):
    before = spoken("1.6")
    monkeypatch.setitem(numbers.VALUES, "1.6", lambda: {**numbers.s_1_6(), "bubble": "99.9%"})
    assert "99.9%" in spoken("1.6") and before != spoken("1.6")


def test_every_marked_term_is_in_the_glossary():
    for section, points in answers.SPOKEN.items():
        for p in points:
            for term in TERM.findall(p):
                assert glossary.known(term), f"guide {section}: [[{term}]] is not in the glossary"


def test_the_spoken_answer_is_collapsed_with_the_english_term_on_hover():
    page = Spoken(("1.17",))._repr_html_()
    assert f'<details class="{SPOKEN_CLASS}" lang="zh-CN"><summary>中文口述版' in page and "<details open" not in page
    assert '<abbr title="ZeRO stage 3">ZeRO-3</abbr>' in page
    assert all(len(line) <= 110 for line in repr(Spoken(("1.17",))).splitlines())


def test_an_unknown_section_is_one_clear_error():
    with pytest.raises(ValueError, match="'9.9'"):
        spoken("9.9")


# -- the chapters --------------------------------------------------------------------------------
def _zh_cells(nb) -> list:
    return [c for c in nb.cells if "zh" in c.metadata.get("tags", [])]


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c.ready and (any(c.number in h for h in insert.HOME.values())
                                                                        or c.number in (0, 12))],
                         ids=lambda c: c.file)
def test_a_chapter_with_chinese_cells_has_all_of_them_executed(chapter):
    nb = nbformat.read(COURSE_DIR / chapter.file, as_version=4)
    cells = _zh_cells(nb)
    if not cells:
        pytest.skip(f"{chapter.file}: no Chinese cells yet (python -m parlab.zh.insert {chapter.file})")
    assert insert.plan(nb, chapter.number) == [], "some 中文口述版 cells are missing: run parlab.zh.insert"
    for cell in cells:
        if cell.cell_type == "code":
            assert cell.metadata["jupyter"]["source_hidden"] is True
            assert cell.outputs, f"{chapter.file}: a Chinese cell was never executed"


def test_the_chapters_i_own_carry_their_chinese():
    for number in (0, 1, 2, 3, 4, 5, 6, 8, 9):
        nb = nbformat.read(COURSE_DIR / CHAPTERS[number].file, as_version=4)
        assert _zh_cells(nb), CHAPTERS[number].file


def _without_chinese(name: str, tmp_path) -> Path:
    """A copy of chapter ``name`` with its Chinese cells (if any) taken out."""
    nb = nbformat.read(COURSE_DIR / name, as_version=4)
    nb.cells = [c for c in nb.cells if "zh" not in c.metadata.get("tags", [])]
    nbformat.write(nb, tmp_path / name)
    return tmp_path / name


def test_the_inserter_is_idempotent_on_every_chapter(tmp_path):
    for name in ("07_zero_fsdp.ipynb", "10_choosing_a_strategy.ipynb", "11_practice.ipynb",
                 "12_interview_drill.ipynb"):
        copy = _without_chinese(name, tmp_path)
        first = insert.insert(copy)
        assert insert.insert(copy) == 0
        nb = nbformat.read(copy, as_version=4)
        assert len(_zh_cells(nb)) == first > 0
    nb = nbformat.read(tmp_path / "12_interview_drill.ipynb", as_version=4)
    assert any("both_languages" in c.source for c in _zh_cells(nb))


def test_the_inserter_names_what_it_cannot_place(tmp_path, capsys):
    nb = nbformat.read(_without_chinese("12_interview_drill.ipynb", tmp_path), as_version=4)
    nb.cells = [c for c in nb.cells if "## 3. A sample round" not in c.source]
    nbformat.write(nb, tmp_path / "12_interview_drill.ipynb")
    assert insert.main([str(tmp_path / "12_interview_drill.ipynb")]) == 1
    assert "chapter 12 has no markdown cell with '## 3. A sample round'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not a chapter"):
        insert.insert(tmp_path / "12_interview_drill.ipynb".replace("12", "99"))


def test_a_spoken_cell_sits_right_under_its_heading(tmp_path):
    copy = _without_chinese("07_zero_fsdp.ipynb", tmp_path)
    insert.insert(copy)
    nb = nbformat.read(copy, as_version=4)
    for i, cell in enumerate(nb.cells):
        if "zh-spoken-1.19" in cell.metadata.get("tags", []):
            assert "guide 1.19" in nb.cells[i - 1].source
            break
    else:
        pytest.fail("no 中文口述版 cell for guide 1.19 in chapter 07")


# -- the drill --------------------------------------------------------------------------------------
def test_every_card_has_its_chinese_twin():
    assert {q.key for q in BANK} <= set(ZH)
    assert set(ZH) <= {q.key for q in BANK}, "Chinese text for a card that no longer exists"


def _fields(question, seed):
    from parlab.drill.zh.translate import _english_parts

    zh = ZH[question.key]
    prompt, working = _english_parts(question, seed)
    out = [("prompt", zh["p"], prompt, True), ("why", zh.get("y"), question.why, False)]
    if question.kind == "choice":
        out.append(("correct", zh.get("c"), question.correct, True))
        out += [(f"wrong {i}", z, e, True) for i, (z, e) in enumerate(zip(zh.get("w", ()), question.wrong, strict=True))]
    if working:
        out.append(("working", zh.get("k"), working, True))
    return out


@pytest.mark.parametrize("question", BANK, ids=lambda q: q.key)
def test_a_chinese_card_shows_the_english_numbers_and_types_none(question):
    for seed in (0, 1):
        for name, zh, english, all_of_them in _fields(question, seed):
            if zh is None:  # kept in English (code, names)
                continue
            assert tokens.stray_digits(zh, answers.NAMES) == [], f"{question.key} {name}: a typed number"
            used, have = set(tokens.slots(zh)), set(range(len(tokens.numbers(english))))
            assert used <= have, f"{question.key} {name}: slots {sorted(used)} for {tokens.numbers(english)}"
            if all_of_them:
                assert used == have, f"{question.key} {name}: shows {sorted(used)} of {tokens.numbers(english)}"


def test_quiz_in_chinese_poses_and_scores_every_card():
    quiz = Quiz(seed=3, lang="zh")
    seen = set()
    for _ in range(len(quiz)):
        card = quiz.next()
        assert isinstance(card, ZhCard) and re.search(r"[\u4e00-\u9fff]", card.prompt + card.how_to_answer())
        english = card.english
        assert (card.answer, card.params, card.kind) == (english.answer, english.params, english.kind)
        if card.kind == "choice":
            answer = LETTERS[card.answer]
        else:
            answer = str(card.answer) if card.kind == "name" else card.expected.split(" (")[0]
        result = quiz.answer(answer)
        assert result.correct, (card.key, answer, result.message)
        assert result.message == "正确。" and "参见 guide" in result.explanation
        seen.add(card.key)
    assert seen == {q.key for q in BANK}
    assert quiz.score.correct == len(BANK)


def test_a_name_can_be_answered_in_chinese_and_a_wrong_one_says_so_in_chinese():
    q = next(q for q in BANK if q.key == "rs-plus-ag")
    card = translate(q, 0)
    assert card.check("全收集").correct
    wrong = card.check("全规约")
    assert wrong.readable and not wrong.correct and wrong.message == "不对，答案是 all-gather（全收集）。"
    assert "all-gather（全收集）" in card.how_to_answer() and NAME_ZH["all-gather"] == "全收集"


def test_english_stays_the_default_and_lang_is_checked():
    assert not isinstance(Quiz(seed=0).next(), ZhCard)
    with pytest.raises(ValueError, match="lang must be one of en, zh, got 'fr'"):
        Quiz(lang="fr")


def test_both_languages_shows_one_card_twice():
    both = both_languages("1.19", seed=2)
    assert both.english.key == both.chinese.key and both.english.answer == both.chinese.answer
    assert "中文:" in repr(both) and 'lang="zh-CN"' in both._repr_html_()


def test_the_dashboard_switches_language():
    from parlab.widgets.drill import DrillDashboard

    dash = DrillDashboard(seed=0)
    assert 'lang="en"' in dash.output.value
    dash.controls["language"].value = "zh"
    assert 'lang="zh-CN"' in dash.output.value and isinstance(dash.quiz.card, ZhCard)
    dash.answer_with("A")
    assert dash.check() is not None and re.search(r"[\u4e00-\u9fff]", dash.feedback.value)


def test_the_glossary_search_box_filters_both_languages():
    from parlab.zh.widget import GlossaryTable, browser

    view = browser()
    view.box.value = "bubble"
    assert "气泡率" in view.out.value and "张量并行" not in view.out.value
    view.box.value = ""
    assert view.out.value == ""
    assert f"{len(glossary.GLOSSARY)} terms" in repr(GlossaryTable())

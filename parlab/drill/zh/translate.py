"""The drill in Chinese: ``translate(question, seed)`` poses a bank question as a Chinese card.

The card is the English card (same key, seed, options order, answer, numbers) with its text
replaced by the Chinese twin of ``drill_part1.ZH`` / ``drill_part2.ZH``: every number in it is
taken from the English card's own text (``tokens.fill``), so both languages show one computation.
A name answer can be typed as the option (``all-reduce``) or its Chinese name (``全规约``).

    from parlab.drill import Quiz
    quiz = Quiz(sections="1.19", lang="zh", seed=1); quiz.next().text(); quiz.answer("B")
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from parlab.course import beyond_chapter, chapters_for
from parlab.drill.parse import DIMENSIONS, MAX_ANSWER, Uncheckable, Unreadable, normalize_name
from parlab.drill.questions import LETTERS, Card, Question, Result, title, wrap

from .drill_beyond import ZH_BEYOND
from .drill_modern import ZH_MODERN
from .drill_part1 import ZH as _ZH1
from .drill_part2 import EXTRA
from .drill_part2 import ZH as _ZH2
from .tokens import fill

ZH: dict[str, dict] = {**_ZH1, **_ZH2, **ZH_MODERN}  # the guide's bank; the cards beyond it: ZH_BEYOND

#: Chinese names of the named options (shown beside the option, accepted as an answer)
NAME_ZH: dict[str, str] = {
    "all-reduce": "全规约", "all-gather": "全收集", "reduce-scatter": "规约散射", "broadcast": "广播",
    "reduce": "规约", "identity": "恒等", "split": "切分", "data parallel": "数据并行",
    "tensor parallel": "张量并行", "pipeline parallel": "流水线并行", "model parallelism": "模型并行",
    "pipeline parallelism": "流水线并行", "expert parallelism": "专家并行", "latency": "延迟",
    "bandwidth": "带宽", "yes": "是", "no": "否", "CPU offload": "CPU 卸载",
}
TOPIC_ZH = {
    "memory": "显存", "compute": "算力", "communication": "通信", "data parallel": "数据并行",
    "pipeline": "流水线", "tensor parallel": "张量并行", "zero": "ZeRO", "3d parallel": "3D 并行",
    "memory optimizations": "显存优化", "frameworks": "框架", "strategy": "策略", "inference": "推理",
    "network": "网络", "launching": "启动", "context parallel": "上下文并行", "expert parallel": "专家并行",
}
UNIT_ZH = {"years": "年", "days": "天", "s": "秒", "ms": "毫秒"}
#: ``parlab.drill.parse.UNCHECKABLE`` in Chinese: why an answer is not checked, same rules and fields
UNCHECKABLE_ZH: dict[str, str] = {
    "long": "{shown} 有 {n:,} 个字符，超过答案上限 {limit} 个：无法核对这个答案",
    "exponent": "{shown} 的指数超出 1e±{limit}：不是能核对的数字；例如 {example}",
    "zero": "{shown} 除以零：不是能核对的数字；例如 {example}",
    "huge": "{shown} 超出 ±1.8e308（双精度浮点数的上限）：不是能核对的数字；例如 {example}",
}


def _english_parts(question: Question, seed: int) -> tuple[str, str]:
    """(prompt, working) of ``question`` posed with ``seed``, as the English card has them."""
    make = getattr(question, "make", None)
    if make is None:
        return getattr(question, "prompt", ""), ""
    posed = make(random.Random(f"{question.key}:{seed}"))
    return posed.prompt, posed.working


def citation_zh(section: str, beyond: bool = False) -> str:
    """'参见 guide 1.7（…）和 parlab 第 05 章 …。'; a card beyond the guide names its nearest guide
    question and the chapter beyond the guide."""
    if beyond:
        c = beyond_chapter()
        return f"超出指南范围（最接近的是 guide {section}，{title(section)}）；参见 parlab 第 {c.number:02d} 章 {c.title}。"
    where = "；".join(f"第 {c.number:02d} 章 {c.title}" for c in chapters_for(section))
    return f"参见 guide {section}（{title(section)}）和 parlab {where}。"


@dataclass(frozen=True)
class ZhCard(Card):
    """A card in Chinese: ``check`` accepts the Chinese names of named options and answers in Chinese."""

    english: Card | None = field(default=None, compare=False)

    @property
    def expected(self) -> str:
        text = super().expected
        if self.kind == "name" and str(self.answer) in NAME_ZH:
            return f"{text}（{NAME_ZH[str(self.answer)]}）"
        return text

    def how_to_answer(self) -> str:
        if self.kind == "choice":
            return f"用字母 A-{LETTERS[len(self.options) - 1]} 作答。"
        if self.kind == "name":
            shown = [f"{o}（{NAME_ZH[o]}）" if o in NAME_ZH else o for o in self.options]
            return "从以下选项中作答：" + "、".join(shown) + "。"
        tol = f"（误差 {self.rtol:.0%} 以内）" if self.rtol else ""
        unit = f"，单位 {UNIT_ZH.get(self.unit, self.unit)}" if self.unit else ""
        return f"填一个数字{unit}{tol}；例如 {DIMENSIONS[self.dimension].example}。"

    def text(self, width: int = 60) -> str:
        lines = [f"[guide {self.section} | {TOPIC_ZH.get(self.topic, self.topic)}] {self.title_zh}", self.prompt]
        if self.kind == "choice":
            lines += [f"  {LETTERS[i]}) {o}" for i, o in enumerate(self.options)]
        lines.append(self.how_to_answer())
        return wrap("\n".join(lines), width)

    def unreadable(self, error: Unreadable) -> str:
        reason = UNCHECKABLE_ZH[error.key].format(**error.fields) if isinstance(error, Uncheckable) else str(error)
        return f"无法识别你的答案：{reason}"

    def check(self, answer: object) -> Result:
        if self.kind == "name" and isinstance(answer, str) and len(answer) <= MAX_ANSWER:
            by_zh = {normalize_name(NAME_ZH[o]): o for o in self.options if o in NAME_ZH}
            answer = by_zh.get(normalize_name(answer), answer)
        result = super().check(answer)
        if not result.readable:
            message = result.message  # ``unreadable``'s, in Chinese
        elif result.correct:
            message = "正确。"
        else:
            message = f"不对，答案是 {self.expected}。"
        return replace(result, expected=self.expected, message=message)


def translate(question: Question, seed: int = 0) -> ZhCard:
    """``question`` posed with ``seed`` (the English card), its text in Chinese."""
    english = question.pose(seed)
    texts = ZH_BEYOND if question.beyond else ZH
    if question.key not in texts:
        raise ValueError(f"drill card {question.key!r} has no Chinese text (parlab.drill.zh.drill_part1/2.ZH, "
                         f"drill_beyond.ZH_BEYOND)")
    zh = texts[question.key]
    names = {k: v for k, v in english.params.items() if isinstance(v, str)}
    if question.key in EXTRA:
        names.update(EXTRA[question.key](english.params))
    prompt_en, working_en = _english_parts(question, seed)

    def put(template: str | None, english_text: str) -> str:
        return english_text if template is None else fill(template, english_text, names)

    options = english.options
    if english.kind == "choice":
        twins = {question.correct: zh.get("c"), **dict(zip(question.wrong, zh.get("w", (None,) * len(question.wrong)),
                                                              strict=True))}
        options = tuple(put(twins[o], o) for o in english.options)
    why = put(zh.get("y"), question.why)
    working = put(zh.get("k"), working_en) if working_en else ""
    explanation = " ".join(p for p in (why, working) if p) + "\n" + citation_zh(question.section, question.beyond)
    return ZhCard(english.key, english.section, english.topic, english.kind, put(zh["p"], prompt_en), options,
                  english.answer, explanation, english.unit, english.dimension, english.rtol, dict(english.params),
                  english.aliases, english=english)

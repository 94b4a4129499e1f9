"""The interview drill: a bank of questions on every section of the guide, auto-checked.

Each question carries its guide section (``'1.7'``), a topic (``questions.TOPICS``) and, shown
beside it, the guide's Chinese heading of that section (``titles``). Three kinds:

- ``MultipleChoice``: one correct option and distractors drawn from real misconceptions;
  answered with a letter (``'b'``, ``'B)'``), the option's number, or its text.
- ``Named``: a short answer among named options (``'all-reduce'``, ``'NCCL_SOCKET_IFNAME'``);
  case, spaces, hyphens and underscores do not matter; some accept aliases.
- ``Numeric``: a number with a unit and a tolerance (``'112 GB'``, ``'104.3 GiB'``, ``'70 ms'``,
  ``'3/11'``, ``'27%'``, ``'6.7B'``, ``'10 Gb/s'`` vs ``'1.25 GB/s'``). Most are *generated*: a
  seed draws the parameters and parlab computes the answer (``costmodel``, its alpha-beta
  collectives, the ``schedules`` simulator); ``card.params`` keeps the parameters.

Every answer's explanation ends with the guide section and the parlab chapter covering it
(``parlab.course.CHAPTERS``).

API for faces (the chapter 12 notebook, a dashboard)::

    from parlab.drill import BANK, Quiz, select, count_by_section, TOPICS, SECTIONS

    quiz = Quiz(sections=["1.6", "1.7"], topics=None, kinds=None, seed=0)  # or sections="1" (a part)
    quiz = Quiz(sections="1.19", lang="zh")   # the same cards in Chinese (parlab.drill.zh.translate)
    card = quiz.next()        # Card: .key .section .topic .kind .title_zh .prompt .options .unit
                              #       .how_to_answer() .text() (plain text of the whole card)
    result = quiz.answer(s)   # Result: .correct .readable .given .expected .message .explanation
    quiz.score                # Score: .answered .correct .fraction .by_section .text()
    quiz.answered             # whether the current card has been scored

    q = BANK[0]; card = q.pose(seed=3); card.check("B")   # without a session
    quiz = Quiz(bank=BEYOND)  # beyond the guide: context and expert parallelism, DualPipe (chapter 13)

``check`` never raises on learner input: an unreadable answer comes back with ``readable`` False
and a message saying what to type, and a quiz does not count it; one longer than
``parse.MAX_ANSWER`` characters, a number with an exponent past ``parse.MAX_EXPONENT``, a division
by zero or a value past the double range is "not a number I can check" (``parse.UNCHECKABLE``, in
Chinese ``parlab.drill.zh.translate.UNCHECKABLE_ZH``), decided in microseconds, the answer quoted cut short. A widget needs only
``card.kind`` to choose its control (buttons for 'choice', a dropdown for 'name', a text box for
'number'), ``card.text()`` or the fields to display, and the Result to show feedback; no
formula or answer lives in the face.
"""

from .bank import BANK, SECTIONS, count_by_section, count_by_topic, get, select
from .beyond_3d import BEYOND
from .parse import DIMENSIONS, Unreadable, normalize_name, read_number
from .questions import KINDS, TOPICS, Card, MultipleChoice, Named, Numeric, Posed, Question, Result
from .quiz import Quiz, Score
from .titles import TITLES, guide_titles, title

__all__ = [
    "BANK", "BEYOND", "DIMENSIONS", "KINDS", "SECTIONS", "TITLES", "TOPICS", "Card", "MultipleChoice", "Named",
    "Numeric", "Posed", "Question", "Quiz", "Result", "Score", "Unreadable", "count_by_section",
    "count_by_topic", "get", "guide_titles", "normalize_name", "read_number", "select", "title",
]

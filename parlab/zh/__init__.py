"""Studying in Chinese (用中文备考): the glossary, the spoken answers, the Chinese drill.

- ``glossary``: 术语表, every term with its English twin, both definitions and the chapter
  heading explaining it (``glossary.GLOSSARY``, ``glossary.find``); ``GlossaryBrowser`` searches it.
- ``spoken(section)`` / ``show_spoken(*sections)``: the 中文口述版 of a guide section, rendered
  from ``answers.SPOKEN`` with numbers computed by ``numbers.values``.
- ``parlab.drill.Quiz(lang="zh")``: the drill in Chinese (``parlab.drill.zh.translate``).
"""

from .glossary import GLOSSARY, Term, find
from .spoken import Spoken, show_spoken, spoken

__all__ = ["GLOSSARY", "Spoken", "Term", "find", "show_spoken", "spoken"]

"""The drill in Chinese: the Chinese text of every card (``drill_part1``, ``drill_part2``,
``drill_beyond``), the number tokens it shares with the English card (``tokens``) and
``translate``, which poses a bank question as a Chinese card."""

"""Launching real runs: ``python -m parlab.train`` (the tiny GPT trained with dp x tp x pp, here or
under torchrun: ``cli``), what it checks before any rank starts (``checks``), and the DeepSpeed
config and launcher files for the same plans (``deepspeed_config``, ``deepspeed_launcher``).
"""

from parlab.train.cli import Progress, main

__all__ = ["Progress", "main"]

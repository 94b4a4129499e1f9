"""The model options of ``parlab estimate``, ``search`` and ``memory``: ``--model`` (a preset, a size
such as 7B, or a Hugging Face ``config.json``) and the shape flags that change one field of it
(``--layers --hidden --heads --kv-heads --ffn --vocab --seq``), so a model without a preset is one
command line away: ``--model llama-2-7b --layers 40 --hidden 5120 --heads 40 --kv-heads 8``."""

from __future__ import annotations

import argparse

from parlab.cli import options

#: flag -> (ModelSpec field, help)
SHAPE_FLAGS: dict[str, tuple[str, str]] = {
    "--layers": ("layers", "transformer layers"),
    "--hidden": ("hidden", "hidden size h"),
    "--heads": ("heads", "attention heads"),
    "--kv-heads": ("kv_heads", "K/V heads (grouped-query attention; 1 = multi-query)"),
    "--ffn": ("ffn_hidden", "MLP inner width"),
    "--vocab": ("vocab", "vocabulary size"),
    "--seq": ("seq_len", "sequence length"),
}


def add_model_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    """``--model`` and the shape flags; each flag replaces that field of ``--model``'s shape."""
    parser.add_argument("--model", type=options.model, default=default,
                        help=f"preset name, size such as 7B, or path to a Hugging Face config.json (default {default}); "
                             f"`parlab models` lists the presets")
    for flag, (_, what) in SHAPE_FLAGS.items():
        parser.add_argument(flag, type=options.positive_int, help=f"{what} (default: the model's)")


def model_from(args: argparse.Namespace):
    """The ModelSpec ``--model`` names, with the shape flags applied; a shape that breaks a rule
    (kv heads not dividing the heads, ...) is the library's one-line ValueError."""
    changes = {field: getattr(args, flag[2:].replace("-", "_")) for flag, (field, _) in SHAPE_FLAGS.items()}
    changes = {k: v for k, v in changes.items() if v is not None}
    model = args.model
    if not changes:
        return model
    shape = {k: v for k, v in changes.items() if k != "seq_len"}
    if shape:
        words = ", ".join(f"{k}={v}" for k, v in shape.items())
        changes["name"] = f"{model.name} ({words})"
    return model.with_(**changes)

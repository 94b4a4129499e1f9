"""``parlab models`` and ``parlab gpus``: the presets, as tables."""

from __future__ import annotations

import argparse

HELPS = {"models": "list the model presets (shape and exact parameter count)",
         "gpus": "list the GPU presets (memory, peak FLOP/s by dtype, HBM bandwidth, own link)"}
HELP = HELPS["models"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources", action="store_true", help="add a column citing each preset's source")


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import GPUS, MODELS
    from parlab.tables import human_count, table

    if args._name == "models":
        headers = ["name", "params", "active", "layers", "hidden", "heads", "kv heads", "ffn", "seq", "vocab"]
        rows = [[m.name, human_count(m.num_params()), human_count(m.active_params()) if m.moe else "",
                 m.layers, m.hidden, m.heads, m.kv_heads or m.heads, m.ffn, m.seq_len, m.vocab]
                + ([m.source] if args.sources else []) for m in MODELS.values()]
        print(table(rows, headers + (["source"] if args.sources else []), "lrrrrrrrrr" + "l" * args.sources))
        print("\nAlso accepted: a size such as 7B or 350M (the guide's preset of that size, else a GPT-style\n"
              "shape) or a path to a Hugging Face config.json; --layers, --hidden, --heads, --kv-heads, --ffn,\n"
              "--vocab and --seq change one field of the model.")
        return 0
    headers = ["name", "memory (GB)", "bf16 TFLOP/s", "fp8 TFLOP/s", "fp32 TFLOP/s", "HBM (GB/s)",
               "own link"]
    rows = [[g.name, round(g.memory_bytes / 1e9, 1), g.half_flops / 1e12,
             f"{g.fp8_flops / 1e12:,.1f}" + ("+MX" if g.mxfp8 else "") if g.fp8_flops else "-", g.fp32_flops / 1e12,
             round(g.hbm_bytes_per_s / 1e9), g.intra] + ([g.source] if args.sources else []) for g in GPUS.values()]
    print(table(rows, headers + (["source"] if args.sources else []), "lrrrrrl" + "l" * args.sources))
    print("\nDense tensor-core peaks (no 2:4 sparsity; fp16 runs at the bf16 rate); fp8 '-': no FP8 tensor\n"
          "cores; +MX: also MXFP8 (Blackwell). own link: the intra-node link the GPU brings to a cluster\n"
          "(--gpu), PCIe for cards without NVLink.")
    return 0

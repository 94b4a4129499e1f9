"""Megatron-LM 2021's published runs as the model reads them: each Table 1 row's GPT model and the
micro-batch and interleaving the authors' scripts used (shared by ``answers.validation`` and
``answers.mtnlg``)."""

from __future__ import annotations

from parlab.costmodel.specs.models import ModelSpec

#: micro-batch size and interleaving (v = layers / pp / layers-per-virtual-stage) of each Table 1
#: row, which the paper does not print: NVIDIA/Megatron-LM examples/sc21/run_table_1.sh.
MEGATRON_TABLE1_RUNS: dict[float, tuple[int, int]] = {
    1.7: (16, 1), 3.6: (16, 1), 7.5: (16, 1), 18.4: (8, 1), 39.1: (4, 1), 76.1: (2, 3),
    145.6: (2, 2), 310.1: (1, 2), 529.6: (1, 3), 1008.0: (1, 1),
}


def megatron_model(row: dict[str, str]) -> ModelSpec:
    """The GPT model of a Table 1 row (seq 2048, vocab 51200): GPT's block of Table 2 (dropout, no
    FlashAttention, which postdates the 2021 runs)."""
    return ModelSpec(f"gpt-{row['params_b']}b", int(row["layers"]), int(row["hidden"]), int(row["heads"]),
                     2048, 51200, source="Narayanan et al. 2021, Table 1")

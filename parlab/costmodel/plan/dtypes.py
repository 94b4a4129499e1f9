"""The training precisions a plan may name (``--dtype`` everywhere): spelling -> model-state
precision, compute dtype and gradient precision, and the FP8 recipe of an FP8 plan."""

from __future__ import annotations

from parlab.costmodel.specs._check import canonical
from parlab.costmodel.specs.fp8 import DEFAULT_FP8_RECIPE, fp8_recipe_name

#: The one vocabulary of training precisions (the CLI's ``--dtype`` everywhere, and ``Plan``):
#: spelling -> (model-state precision in ``memory.PRECISIONS``, compute dtype of a ``Plan`` or
#: None when a plan cannot model it, gradients kept in fp32 by default). 'bf16' and 'fp16' mean
#: mixed precision (16-bit weights, fp32 master weights and Adam states: Micikevicius et al.
#: 2018), as the field uses the words. With bf16 the gradients are fp32 by default, as the
#: frameworks keep them: Megatron-LM turns on accumulate_allreduce_grads_in_fp32 whenever --bf16
#: is set (megatron/training/arguments.py) and DeepSpeed's bf16 optimizer keeps fp32 gradients
#: (runtime/bf16_optimizer.py); with fp16 both keep 16-bit gradients. 'mixed' is the ZeRO paper's
#: 2 + 2 + 12 accounting (bf16 compute, 16-bit gradients); ``Plan(fp32_grads=False)`` says the
#: same for any dtype. Training with no fp32 copy at all is 'pure-bf16'. 'fp8' is bf16 mixed precision
#: whose linear-layer GEMMs run in FP8 (``Plan.fp8_recipe``, ``specs.fp8``): the BF16 weights, fp32
#: master weights and fp32 gradients stay (TransformerEngine; Megatron-LM --fp8-format with --bf16).
TRAINING_DTYPES: dict[str, tuple[str, str | None, bool]] = {
    "bf16": ("mixed-fp32-grad", "bf16", True),
    "fp16": ("mixed", "fp16", False),
    "fp32": ("fp32", "fp32", False),
    "fp8": ("mixed-fp32-grad", "fp8", True),
    "mixed": ("mixed", "bf16", False),
    "mixed-fp32-grad": ("mixed-fp32-grad", "bf16", True),
    "pure-bf16": ("bf16", None, False),
    "pure-fp16": ("fp16", None, False),
}
DTYPE_ALIASES = {"amp": "mixed", "bf16-mixed": "bf16", "mixed-bf16": "bf16", "fp16-mixed": "fp16",
                 "mixed-fp16": "fp16", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                 "float32": "fp32", "float": "fp32", "mixed-fp32": "mixed-fp32-grad",
                 "mixed-fp32-grads": "mixed-fp32-grad", "bf16-pure": "pure-bf16", "fp16-pure": "pure-fp16",
                 "float8": "fp8", "fp8-mixed": "fp8"}


def training_dtype(name: str) -> tuple[str, str | None, bool]:
    """(precision, compute dtype, fp32 gradients) of a ``--dtype`` spelling (``TRAINING_DTYPES``)."""
    return TRAINING_DTYPES[canonical("dtype", name, TRAINING_DTYPES, DTYPE_ALIASES)]


def fp8_recipe_of(dtype: str, recipe: str | None) -> str:
    """The canonical FP8 recipe of a plan of ``dtype``: the named one or the default for 'fp8'."""
    if dtype != "fp8":
        raise ValueError(f"fp8_recipe={recipe!r} is for dtype 'fp8', got dtype {dtype!r}")
    return fp8_recipe_name(DEFAULT_FP8_RECIPE if recipe is None else recipe)


"""``parlab memory``: bytes of model states for a model, dtype and optimizer, and the GPUs it fits."""

from __future__ import annotations

import argparse

from parlab.cli import options
from parlab.cli.model_options import add_model_arguments, model_from

HELP = "memory of the model states (weights, grads, master weights, optimizer) of a model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from parlab.costmodel import OPTIMIZERS

    add_model_arguments(parser, "175b")
    parser.add_argument("--dtype", type=options.dtype, default="mixed",
                        help="mixed = fp16 (16 B/param with Adam: 16-bit gradients), bf16 = mixed-fp32-grad (18: fp32 ones), fp32, "
                             "pure-bf16 / pure-fp16 (no fp32 copy), fp8 (bf16's states; `parlab estimate --dtype fp8` "
                             "adds the FP8 weight copies)")
    parser.add_argument("--optimizer", type=options.name_of("optimizer", OPTIMIZERS), default="adam",
                        help="adam, adamw, momentum, sgd, none (inference)")


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import GPUS, model_state_memory
    from parlab.costmodel.plan.spec import training_dtype
    from parlab.tables import human_bytes, human_count, table

    model = model_from(args)
    mem = model_state_memory(model.num_params(), training_dtype(args.dtype)[0], args.optimizer)
    states = "" if mem.precision == args.dtype else f" (model states: {mem.precision})"
    print(f"{model.name}: {human_count(model.num_params())} parameters, dtype {args.dtype}{states}, "
          f"optimizer {mem.optimizer}\n")
    rows = [[name, f"{value / mem.n_params:g}", human_bytes(value)] for name, value in mem.terms().items()]
    rows.append(["total", f"{mem.bytes_per_param:g}", human_bytes(mem.total)])
    print(table(rows, ["term", "bytes/param", "memory"], "lrr"))
    print("\nGPUs needed just to hold these model states (no activations, no sharding overheads):")
    rows = [[g.name, human_bytes(g.memory_bytes), int(-(-mem.total // g.memory_bytes))] for g in GPUS.values()]
    print(table(rows, ["gpu", "memory", "min GPUs"], "lrr"))
    if args.dtype == "fp8":
        print("\nfp8 keeps bf16's model states; its FP8 copies of the linear weights (about 2 B/param with "
              "the weight's transpose) come on top: `parlab estimate --dtype fp8` prices them per recipe.")
    print("\nsource: Rajbhandari et al. 2020 (ZeRO), Section 3.1")
    return 0

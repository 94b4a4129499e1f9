"""``parlab memory``: bytes of model states for a model, dtype and optimizer, and the GPUs it fits."""

from __future__ import annotations

import argparse

HELP = "memory of the model states (weights, grads, master weights, optimizer) of a model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="175b", help="preset name or size such as 7B (default 175b)")
    parser.add_argument("--dtype", default="mixed",
                        help="fp32, mixed (16 B/param with Adam), mixed-fp32-grad (18), bf16, fp16")
    parser.add_argument("--optimizer", default="adam", help="adam, adamw, momentum, sgd, none (inference)")


def run(args: argparse.Namespace) -> int:
    from parlab.costmodel import GPUS, get_model, model_state_memory
    from parlab.tables import human_bytes, human_count, table

    model = get_model(args.model)
    mem = model_state_memory(model.num_params(), args.dtype, args.optimizer)
    print(f"{model.name}: {human_count(model.num_params())} parameters, dtype {mem.precision}, "
          f"optimizer {mem.optimizer}\n")
    rows = [[name, f"{value / mem.n_params:g}", human_bytes(value)] for name, value in mem.terms().items()]
    rows.append(["total", f"{mem.bytes_per_param:g}", human_bytes(mem.total)])
    print(table(rows, ["term", "bytes/param", "memory"], "lrr"))
    print("\nGPUs needed just to hold these model states (no activations, no sharding overheads):")
    rows = [[g.name, human_bytes(g.memory_bytes), -(-mem.total // g.memory_bytes)] for g in GPUS.values()]
    print(table(rows, ["gpu", "memory", "min GPUs"], "lrr"))
    print("\nsource: Rajbhandari et al. 2020 (ZeRO), Section 3.1")
    return 0

"""ZeRO's sharding of model states over the data-parallel ranks (Rajbhandari et al. 2020, "ZeRO",
Figure 1 and Section 5), and the parameters ZeRO-3 holds gathered in full at its peak: FSDP's
units, one prefetched ahead (Zhao et al. 2023, "PyTorch FSDP", Section 3.3), or DeepSpeed stage
3's modules and prefetch bucket (partitioned_param_coordinator.py)."""

from __future__ import annotations

from dataclasses import dataclass

from parlab.costmodel.pricing.attention_terms import attention_param_split
from parlab.costmodel.pricing.memory import ModelStateMemory, model_state_memory
from parlab.costmodel.pricing.params import layer_params_per_gpu, stage_params
from parlab.costmodel.specs._check import positive
from parlab.costmodel.specs.models import ModelSpec


@dataclass(frozen=True)
class DeepSpeedStage3:
    """The ``zero_optimization`` values of DeepSpeed's stage 3 that decide how many parameters are
    gathered at once (DeepSpeed's defaults, and what chapter 11's generated config writes):
    ``stage3_prefetch_bucket_size`` 5e7 parameters fetched ahead of the module in use,
    ``stage3_max_live_parameters`` 1e9 parameters gathered at most before prefetching stops,
    ``stage3_max_reuse_distance`` 1e9 (a parameter used again within that many parameters of
    compute, as a recomputed layer's are by its backward, is kept, not released and gathered again)
    and ``stage3_param_persistence_threshold`` 1e5 (smaller tensors stay gathered all the time)."""

    prefetch_bucket_size: float = 5e7
    max_live_parameters: float = 1e9
    max_reuse_distance: float = 1e9
    param_persistence_threshold: float = 1e5

    @classmethod
    def for_model(cls, model: ModelSpec) -> DeepSpeedStage3:
        """The values chapter 11's generated config writes for ``model`` (``parlab.train.deepspeed_config``),
        Hugging Face's rule for DeepSpeed's ``"auto"`` (transformers integrations/deepspeed.py):
        prefetch bucket 0.9 h^2, persistence threshold 10 h, DeepSpeed's defaults for the other two."""
        h = model.hidden
        return cls(prefetch_bucket_size=float(int(0.9 * h * h)), param_persistence_threshold=float(10 * h))

    def config(self) -> dict[str, int]:
        """The four keys as a DeepSpeed config writes them."""
        return {f"stage3_{k}": int(getattr(self, k)) for k in
                ("prefetch_bucket_size", "max_live_parameters", "max_reuse_distance", "param_persistence_threshold")}


DEEPSPEED_STAGE3 = DeepSpeedStage3()


def zero3_units(model: ModelSpec, tp: int = 1, impl: str = "fsdp") -> list[float]:
    """Parameters of each unit ZeRO-3 gathers with one collective, on one of ``tp`` TP ranks, in
    forward order, for ``impl`` 'fsdp' or 'deepspeed' (``plan.ZERO3_IMPLS``).

    FSDP (``impl='fsdp'``) wraps each transformer block as a unit and leaves the embeddings to the
    root unit: the input embedding (V h / t, the position table, BLOOM's embedding norm), the l
    blocks (``layer_params_per_gpu``), and the output end (the final norm and the output layer
    V h / t, which with tied embeddings is the embedding matrix gathered again for the logits).
    DeepSpeed's stage 3 (``impl='deepspeed'``) fetches module by module in the order it traced
    (partitioned_param_coordinator.py): the embedding, then per block its four linear modules
    (fused QKV, attention output, MLP in, MLP out, biases with their weights), the output end; the
    norms and row-parallel biases sit below ``stage3_param_persistence_threshold`` and stay gathered.
    """
    if impl not in ("fsdp", "deepspeed"):
        raise ValueError(f"zero3 implementation must be 'fsdp' or 'deepspeed', got {impl!r}")
    h, V, f = model.hidden, model.vocab, model.ffn
    norm = 2 * h if model.bias else h
    embedding = V * h / tp + (model.seq_len * h if model.learned_pos else 0) + (norm if model.embedding_norm else 0)
    output = norm + V * h / tp
    if impl == "fsdp":
        return [embedding, *[layer_params_per_gpu(model, tp)] * model.layers, output]
    n_in = 2 if model.gated_mlp else 1
    b = 1 if model.bias else 0
    out = model.q_width * h  # the attention output (a d, h); QKV the rest (``attention_terms``)
    split, _ = attention_param_split(model)
    qkv = split - out  # with its column-parallel biases (and sinks)
    block = [qkv / tp, out / tp, n_in * (h * f + b * f) / tp, f * h / tp]
    return [embedding, *block * model.layers, output]


def _deepspeed_live(units: list[float], ds: DeepSpeedStage3) -> float:
    """The most parameters DeepSpeed's stage 3 holds gathered at once: the module in use and the
    modules its prefetch starts. After fetching the module in use it prefetches the next ones in
    trace order while fewer than min(stage3_prefetch_bucket_size, stage3_max_live_parameters -
    live) are in flight; it fetches whole parameters, so the last one can overshoot the bucket
    (``PartitionedParameterCoordinator.fetch_sub_module``)."""
    peak = 0.0
    for i, unit in enumerate(units):
        budget = min(ds.prefetch_bucket_size, ds.max_live_parameters - unit)
        ahead, j = 0.0, i + 1
        while j < len(units) and ahead < budget:
            ahead += units[j]
            j += 1
        peak = max(peak, unit + ahead)
    return peak


def zero3_gathered_params(model: ModelSpec, tp: int = 1, impl: str = "fsdp",
                          deepspeed: DeepSpeedStage3 | None = None) -> float:
    """Parameters ZeRO-3 holds gathered in full at its peak, on top of its 1/dp shard.

    FSDP (``impl='fsdp'``): the unit in use and the next one, prefetched while the first computes:
    ``forward_prefetch`` / ``BackwardPrefetch.BACKWARD_PRE`` prefetch exactly one unit ahead
    (torch.distributed.fsdp; Zhao et al. 2023, "PyTorch FSDP", Section 3.3). So the largest sum of
    two units next to each other in execution order (``zero3_units``): for a deep model two blocks,
    for a model of one or two layers the embedding and a block.

    DeepSpeed (``impl='deepspeed'``): the module in use plus what ``stage3_prefetch_bucket_size``
    lets it fetch ahead, bounded by ``stage3_max_live_parameters`` (``_deepspeed_live``), with
    ``deepspeed``'s values (default: ``DeepSpeedStage3.for_model``, what chapter 11's config writes): for
    GPT-3 175B the MLP's two linear modules, 1.2B parameters, about a third of FSDP's two blocks.
    DeepSpeed's own estimator (``estimate_zero3_model_states_mem_needs``) budgets the largest
    layer's parameters and gradients, 4 B x largest_layer_params, on top of 18 Psi / N.

    Never more than the model's own weights (the units are disjoint parts of it).
    """
    units = zero3_units(model, tp, impl)
    if impl == "fsdp":
        peak = max(a + b for a, b in zip(units, units[1:], strict=False))
    else:
        peak = _deepspeed_live(units, deepspeed or DeepSpeedStage3.for_model(model))
    return min(peak, stage_params(model, tp, 1, "first"))


def zero_model_states(n_params: float, dp: int, stage: int, dtype: str = "mixed",
                      optimizer: str = "adam") -> ModelStateMemory:
    """Model-state bytes per GPU with ZeRO stage 0-3 over ``dp`` data-parallel ranks.

    Rajbhandari et al. 2020 ("ZeRO"), Figure 1 and Section 5: with K bytes of optimizer state per
    parameter (K = 12 for mixed-precision Adam), Psi parameters and Nd ranks:
    stage 0: (2 + 2 + K) Psi;  1 (P_os): 4 Psi + K Psi / Nd;  2 (P_os+g): 2 Psi + (2 + K) Psi / Nd;
    3 (P_os+g+p): (2 + 2 + K) Psi / Nd. The paper's example, 7.5B parameters on 64 GPUs:
    120 GB -> 31.4, 16.6 and 1.9 GB.
    """
    positive("dp", dp, integer=True)
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be one of 0, 1, 2, 3, got {stage!r}")
    full = model_state_memory(n_params, dtype, optimizer)
    return ModelStateMemory(
        n_params, full.precision, full.optimizer,
        full.weights / (dp if stage >= 3 else 1), full.grads / (dp if stage >= 2 else 1),
        full.master / (dp if stage >= 1 else 1), full.optimizer_states / (dp if stage >= 1 else 1))

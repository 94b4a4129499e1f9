"""What the cost model predicts one rank of a 3D run holds and sends in one step, for the same
tiny setting the trainer (``engine.train_3d``) measures: parameters from ``costmodel.plan_memory``
(Megatron's split, Shoeybi et al. 2019, Section 3), model states from ``costmodel.memory`` /
``zero_model_states`` (Rajbhandari et al. 2020, Section 3.1 and Figure 1), the TP collectives
of each layer from ``costmodel.tensor_parallel.tp_layer_collectives``, the pipeline's boundary
messages from ``pipeline_parallel.boundary_bytes``, and every collective's bytes sent by this rank from
``costmodel.alphabeta.traffic`` with the algorithm the backend runs (the local backend's
size-based default; the torch backend reports ring traffic, nominally).

Outside the layers Megatron's vocabulary-parallel ends add, per micro-batch (Megatron-LM,
megatron/core/tensor_parallel/layers.py and cross_entropy.py): on the first stage the embedding's
``g`` (an all-reduce of b s h forward); on the last stage the LM head's ``f`` (an all-reduce of
b s h backward) and the cross-entropy's three all-reduces of b s numbers (max, target logit,
sum of exponentials) forward. Numbers are bytes of fp32 (4 per element).
"""

from __future__ import annotations

from parlab.costmodel import alphabeta
from parlab.costmodel.plan.memory import zero_model_states
from parlab.costmodel.pricing.memory import model_state_memory
from parlab.costmodel.pricing.params import layer_params_per_gpu, stage_layers, stage_params
from parlab.costmodel.pricing.tensor_parallel import Collective, tp_layer_collectives
from parlab.schedules import peak_chunks_in_flight

from ..model import GPTConfig
from ..pipeline_parallel.executor import boundary_bytes
from ..pipeline_parallel.stage import split_layers

FP32 = 4


def _algorithm(backend: str, op: str, nbytes: float, ranks: int) -> str:
    """The algorithm whose traffic the backend counts for ``op``."""
    if backend == "torch":
        return "ring"  # torch_backend's nominal traffic
    from parlab.comm.algorithms import default

    return default(op, int(nbytes), ranks)


def _sent(backend: str, op: str, elements: float, ranks: int, rank: int) -> float:
    nbytes = elements * FP32
    if ranks == 1:
        return 0.0
    return alphabeta.traffic(op, _algorithm(backend, op, nbytes, ranks), ranks, nbytes, rank)[0]


def rank_pieces(config: GPTConfig, pp: int, v: int, pp_rank: int) -> list[int]:
    """The virtual stages pipeline rank ``pp_rank`` runs: c * pp + pp_rank for c < v."""
    return [c * pp + pp_rank for c in range(v)]


def predicted_params(config: GPTConfig, tp: int, pp: int, v: int, pp_rank: int) -> float:
    """Parameters one rank holds: its layers (``layer_params_per_gpu``) plus, on the first and
    last stage, the ends ``stage_params`` adds (vocabulary-parallel embedding, position table;
    final norm, the tied head's copy when pp > 1)."""
    spec = config.model_spec()
    bounds = split_layers(config.n_layer, pp * v)
    mine = sum(bounds[u][1] - bounds[u][0] for u in rank_pieces(config, pp, v, pp_rank))
    per_layer = layer_params_per_gpu(spec, tp)
    n = mine * per_layer
    for stage, here in (("first", pp_rank == 0), ("last", pp_rank == pp - 1)):
        if here and not (stage == "last" and pp == 1):  # pp = 1: 'first' counts both ends
            n += stage_params(spec, tp, pp, stage) - stage_layers(spec, pp) * per_layer
    return n


def tp_collectives(config: GPTConfig, micro_batch: int, tp: int, layers: int, first: bool,
                   last: bool) -> list[Collective]:
    """The TP collectives of one micro-batch on a rank holding ``layers`` layers (and the ends)."""
    s, h = config.seq_len, config.hidden
    n = micro_batch * s * h
    out = [replace_count(c, c.count * layers) for c in tp_layer_collectives(micro_batch, s, h, tp)]
    if tp > 1 and first:
        out.append(Collective("forward", "all_reduce", 1, n, tp, "g of the vocabulary-parallel embedding"))
    if tp > 1 and last:
        out.append(Collective("backward", "all_reduce", 1, n, tp, "f before the LM head"))
        out.append(Collective("forward", "all_reduce", 3, micro_batch * s, tp,
                              "vocabulary-parallel cross-entropy: max, target logit, sum of exp"))
    return out


def replace_count(c: Collective, count: int) -> Collective:
    return Collective(c.phase, c.op, count, c.elements, c.ranks, c.what)


def predict(config: GPTConfig, plan, coords, backend: str = "local") -> dict:
    """{"memory": {term: bytes}, "traffic": {group: {op: bytes sent}}} for the rank at
    ``coords`` (tp, dp, pp) of ``plan`` (a ``plan.TrainPlan``), one step."""
    tp_rank, dp_rank, pp_rank = coords
    tp, dp, pp, v = plan.tp, plan.dp, plan.pp, plan.v
    schedule = plan.make_schedule()
    m, mb = schedule.m, plan.micro_batch
    n_virtual = pp * v
    pieces = rank_pieces(config, pp, v, pp_rank)
    bounds = split_layers(config.n_layer, n_virtual)
    layers = sum(bounds[u][1] - bounds[u][0] for u in pieces)
    first, last = 0 in pieces, n_virtual - 1 in pieces

    n_params = predicted_params(config, tp, pp, v, pp_rank)
    states = (zero_model_states(n_params, dp, 1, "fp32") if plan.zero1 and dp > 1
              else model_state_memory(n_params, "fp32", "adam"))
    memory = {"parameters": states.weights, "gradients": states.grads,
              "optimizer states": states.optimizer_states + states.master,
              "micro-batches in flight": peak_chunks_in_flight(schedule)[pp_rank]}

    tp_bytes: dict[str, float] = {}
    for c in tp_collectives(config, mb, tp, layers, first, last):
        tp_bytes[c.op] = tp_bytes.get(c.op, 0.0) + m * c.count * _sent(backend, c.op, c.elements, tp, tp_rank)

    one = boundary_bytes(mb, config, FP32)  # one activation (b/m, s, h), or its gradient
    sends = 0
    for u in pieces:
        here = schedule.place(u)[0]
        sends += u < n_virtual - 1 and schedule.place(u + 1)[0] != here  # activation forward
        sends += u > 0 and schedule.place(u - 1)[0] != here  # gradient backward
    pp_bytes = m * sends * one
    if config.tie_embeddings and pp > 1 and pp_rank in (0, pp - 1):
        pp_bytes += config.vocab_size // tp * config.hidden * FP32  # the tied embedding's gradient

    if plan.zero1 and dp > 1:  # reduce-scatter the gradients, all-gather the updated shards
        padded = -(-int(n_params) // dp) * dp
        dp_bytes = {op: _sent(backend, op, padded, dp, dp_rank) for op in ("reduce_scatter", "all_gather")}
    else:
        dp_bytes = {"all_reduce": _sent(backend, "all_reduce", n_params, dp, dp_rank)}
    traffic = {"tp": tp_bytes, "pp": {"p2p": float(pp_bytes)}, "dp": dp_bytes}
    traffic = {g: {op: b for op, b in ops.items() if b} for g, ops in traffic.items()}
    return {"memory": memory, "traffic": traffic}


def rank_memory(config: GPTConfig, plan, pp_rank: int) -> float:
    """Bytes one rank of pipeline rank ``pp_rank`` holds at its peak: its model states (as
    ``predict``: weights, gradients, AdamW's moments) and the activations of its micro-batches in
    flight (Korthikanti et al. 2022, Table 2, ``activation_bytes_per_layer``, x2 for fp32), with
    the last stage's logits and their gradient (b s V / tp, fp32)."""
    from parlab.costmodel.pricing.memory import activation_bytes_per_layer

    n_params = predicted_params(config, plan.tp, plan.pp, plan.v, pp_rank)
    states = (zero_model_states(n_params, plan.dp, 1, "fp32") if plan.zero1 and plan.dp > 1
              else model_state_memory(n_params, "fp32", "adam"))
    schedule, mb = plan.make_schedule(), plan.micro_batch
    pieces = rank_pieces(config, plan.pp, plan.v, pp_rank)
    bounds = split_layers(config.n_layer, plan.pp * plan.v)
    layers = sum(bounds[u][1] - bounds[u][0] for u in pieces)
    in_flight = peak_chunks_in_flight(schedule)[pp_rank]
    per_layer = 2 * activation_bytes_per_layer(config.model_spec(), mb, plan.tp)
    logits = 2 * mb * config.seq_len * config.vocab_size / plan.tp * FP32 if pp_rank == plan.pp - 1 else 0
    return states.total + in_flight * per_layer * max(1, layers // max(1, len(pieces))) + logits


def run_memory(config: GPTConfig, plan, local_ranks: int | None = None) -> float:
    """Bytes the run's ranks on one machine hold at their peak: all ``plan.world`` ranks (the
    default), or the ``local_ranks`` heaviest of them (a node of a torchrun job)."""
    per_stage = [rank_memory(config, plan, p) for p in range(plan.pp)]
    if local_ranks is None or local_ranks >= plan.world:
        return sum(per_stage) * plan.tp * plan.dp
    return max(per_stage) * local_ranks

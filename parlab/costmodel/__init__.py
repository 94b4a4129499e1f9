"""The analytic cost model: memory and time of training plans, in plain Python + numpy.

Its folders read bottom-up the way the model is built, and imports only go down:

    specs/     models (and the catalogue), GPUs, links, clusters, assumptions, error bands
    pricing/   one layer and one collective: FLOPs, memory terms, alpha-beta, TP/CP/EP terms
    plan/      one plan: Plan, memory per GPU, step time, estimate
    search/    many plans: search, the advisor
    answers/   the course's answers to guide questions, and the validation against published runs

It never imports torch, ipywidgets, matplotlib or the runtime (``parlab.comm``), so widgets and
searches stay instant. Every formula names its source in its docstring.

    from parlab.costmodel import Plan, estimate, get_model, make_cluster, search
    est = estimate("gpt3-175b", make_cluster("dgx-a100", 1024),
                   Plan(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, recompute="full"))
    print(est.explain())

A plan in five dimensions adds ``cp`` (context parallelism: ring attention or Ulysses) and ``ep``
(expert parallelism of an MoE preset such as ``get_model("mixtral-8x7b")``):
``Plan(dp=8, tp=2, cp=4, ep=8, sequence_parallel=True)``.
"""

from parlab.costmodel.answers.scenarios import (
    ScalingPoint,
    advice,
    comm_time_vs_bandwidth,
    guide_1_19,
    memory_vs_dp,
    step_vs_inter_link,
    term_table,
    tp_without_nvlink,
    zero3_ranking,
    zero3_traffic_per_step,
    zero3_vs_3d,
)
from parlab.costmodel.answers.single_gpu import Lever, lora_params, one_gpu_levers
from parlab.costmodel.answers.validation import (
    bloom_summary,
    bloom_table,
    in_sample_summary,
    megatron_summary,
    megatron_table1,
    megatron_zero3,
    out_of_sample_summary,
    zero_paper_example,
)
from parlab.costmodel.plan.estimate import Estimate, Term, estimate, most_loaded_stage
from parlab.costmodel.plan.memory import (
    Zero3VsZero2,
    fp32_gradient_copy,
    in_flight_microbatches,
    stage_activations,
    stage_memory,
    zero3_gathered_params,
    zero3_units,
    zero3_vs_zero2,
    zero_model_states,
)
from parlab.costmodel.plan.spec import (
    CP_IMPLS,
    DTYPES,
    OFFLOADS,
    SCHEDULES,
    TRAINING_DTYPES,
    Plan,
    check_plan,
    training_dtype,
)
from parlab.costmodel.plan.step_time import StepTime, step_time
from parlab.costmodel.pricing.activation_terms import RECOMPUTE_MODULES
from parlab.costmodel.pricing.collectives import (
    GroupLink,
    bus_factor,
    collective_time,
    group_link,
    ring_time,
    tree_time,
)
from parlab.costmodel.pricing.flops import (
    SECONDS_PER_DAY,
    SECONDS_PER_YEAR,
    implied_utilisation,
    megatron_flops_per_iteration,
    train_flops_6nd,
    training_seconds,
)
from parlab.costmodel.pricing.layer_flops import (
    layer_forward_flops,
    logit_forward_flops,
    step_flops,
)
from parlab.costmodel.pricing.memory import (
    OPTIMIZERS,
    PRECISIONS,
    RECOMPUTE,
    ModelStateMemory,
    Precision,
    activation_bytes,
    activation_bytes_per_layer,
    attention_score_bytes,
    bytes_per_param,
    get_precision,
    largest_model,
    model_state_memory,
)
from parlab.costmodel.pricing.params import layer_params_per_gpu, stage_params
from parlab.costmodel.pricing.pipeline_split import pipeline_layout
from parlab.costmodel.pricing.tensor_parallel import (
    colossal_table,
    compare_on_link,
    layer_cost,
    tp_layer_collectives,
)
from parlab.costmodel.search.advisor import Advice, advise
from parlab.costmodel.search.ranking import SearchResult, candidate_plans, factorizations, search
from parlab.costmodel.specs.assumptions import DEFAULT, Assumptions
from parlab.costmodel.specs.bands import BLOOM_MEMORY_BAND, MEGATRON_BAND
from parlab.costmodel.specs.calibration import CALIBRATION
from parlab.costmodel.specs.catalogue import MODELS, get_model
from parlab.costmodel.specs.cluster import CLUSTERS, MAX_GPUS, Cluster, make_cluster
from parlab.costmodel.specs.fp8 import FP8_RECIPES, FP8Recipe, get_fp8_recipe
from parlab.costmodel.specs.hardware import GB, GPUS, GiB, GPUSpec, get_gpu
from parlab.costmodel.specs.hf_config import from_hf_config
from parlab.costmodel.specs.links import (
    GBIT,
    GBYTE,
    LINKS,
    LinkSpec,
    custom_link,
    gbit_per_s,
    gbyte_per_s,
    get_link,
)
from parlab.costmodel.specs.models import ModelSpec, gpt_like, megatron_eq2_params, parse_size
from parlab.layout import ORDER, GroupSpan, coords, group_ranks, group_span, rank_of

# modules the faces import by name (``from parlab.costmodel import alphabeta``)
from .pricing import alphabeta as alphabeta
from .pricing import inference as inference  # the decode-latency model (guide 4.1)
from .pricing import trees as trees

__all__ = [
    "CLUSTERS", "DEFAULT", "DTYPES", "GB", "GBIT", "GBYTE", "GPUS", "GiB", "LINKS", "MODELS", "OFFLOADS",
    "MAX_GPUS", "OPTIMIZERS", "ORDER", "PRECISIONS", "RECOMPUTE", "RECOMPUTE_MODULES", "SCHEDULES", "SECONDS_PER_DAY", "SECONDS_PER_YEAR",
    "Assumptions", "Cluster", "Estimate", "GPUSpec", "GroupLink", "GroupSpan", "LinkSpec", "ModelSpec",
    "ModelStateMemory", "Plan", "Precision", "ScalingPoint", "SearchResult", "StepTime", "Term",
    "advice", "bloom_table", "comm_time_vs_bandwidth", "guide_1_19", "megatron_table1", "memory_vs_dp",
    "step_vs_inter_link", "zero3_traffic_per_step", "zero3_vs_3d", "zero_paper_example",
    "activation_bytes", "activation_bytes_per_layer", "bus_factor", "bytes_per_param", "candidate_plans",
    "check_plan", "collective_time", "coords", "custom_link", "estimate", "factorizations", "gbit_per_s",
    "gbyte_per_s", "get_gpu", "get_link", "get_model", "get_precision", "gpt_like", "group_link",
    "group_ranks", "group_span", "implied_utilisation", "in_flight_microbatches", "largest_model",
    "layer_forward_flops", "layer_params_per_gpu", "logit_forward_flops", "make_cluster",
    "megatron_eq2_params", "megatron_flops_per_iteration", "model_state_memory", "most_loaded_stage",
    "parse_size", "pipeline_layout", "rank_of", "ring_time", "search", "stage_activations", "stage_memory", "stage_params",
    "step_flops", "step_time", "train_flops_6nd", "training_seconds", "tree_time", "zero_model_states",
    "CALIBRATION", "in_sample_summary", "out_of_sample_summary",
    "BLOOM_MEMORY_BAND", "MEGATRON_BAND", "TRAINING_DTYPES", "Zero3VsZero2", "bloom_summary", "megatron_summary",
    "term_table", "tp_without_nvlink", "training_dtype", "zero3_gathered_params", "zero3_ranking", "zero3_units",
    "zero3_vs_zero2", "attention_score_bytes", "Lever", "lora_params", "one_gpu_levers", "fp32_gradient_copy", "megatron_zero3",
    "colossal_table", "compare_on_link", "layer_cost", "tp_layer_collectives",
    "Advice", "advise", "CP_IMPLS", "from_hf_config", "FP8_RECIPES", "FP8Recipe", "get_fp8_recipe",
]

from parlab.costmodel.reprs import install as _install_reprs  # noqa: E402  (short reprs of the result types)

_install_reprs()

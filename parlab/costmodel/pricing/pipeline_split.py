"""How a model's layers are split over pipeline stages, as Megatron-Core splits them: evenly where
they divide, with fewer layers on the first and/or last stage where they do not, or with the
embedding and the loss counted as a layer each; and the pipeline bubble of such a split."""

from __future__ import annotations

from functools import lru_cache

#: Where the split rules come from.
SPLIT_SRC = ("Megatron-Core transformer_config.py (num_layers_in_first/last_pipeline_stage, "
             "account_for_embedding/loss_in_pipeline_split) and transformer_block.py get_num_layers_to_build; "
             "Llama 3, Dubey et al. 2024, Sec. 3.3.2")


def check_split_knobs(pp: int, first: int | None, last: int | None, embedding: bool, loss: bool) -> None:
    """The model-free rules of a plan's split knobs (``pipeline_layout``), each a ValueError."""
    uneven = first is not None or last is not None
    if (uneven or embedding or loss) and pp < 2:
        raise ValueError(f"first/last stage layers and counting the embedding/loss as layers split a pipeline: "
                         f"they need pp >= 2, got pp={pp}")
    if uneven and (embedding or loss):
        raise ValueError("first_stage_layers / last_stage_layers cannot be combined with embedding_as_layer / "
                         "loss_as_layer (Megatron-Core transformer_config.py)")


@lru_cache(maxsize=4096)
def pipeline_layout(layers: int, pp: int, chunks: int = 1, first: int | None = None, last: int | None = None,
                    embedding: bool = False, loss: bool = False) -> tuple[int, ...]:
    """Transformer layers on each of the ``pp`` pipeline ranks (first to last), or a ValueError
    naming the rule broken. ``chunks`` is v, the model chunks per rank of the interleaved schedule.

    Megatron-Core's rules (``transformer_config.py``; ``get_num_layers_to_build``):

    * ``first`` / ``last`` (``num_layers_in_first/last_pipeline_stage``): those ranks take that
      many layers, the middle ranks share the rest evenly; with v chunks each count is divisible
      by v. Not combined with the two flags below.
    * ``embedding`` / ``loss`` (``account_for_embedding/loss_in_pipeline_split``): the embedding
      (the loss) counts as one layer, l + 1 (+ 1) layers split evenly over pp x v, and the first
      (last) rank builds one transformer layer fewer. Llama 3 405B: 126 + 2 = 128 over pp = 16,
      7 layers on the first and last ranks, 8 on the others (Dubey et al. 2024, Sec. 3.3.2).
    * neither: the even split l / pp where pp x v divides l. Where it does not, Megatron-Core
      refuses an even split and asks for the knobs above (or a ``pipeline_model_parallel_layout``
      listing every stage); parlab picks the split for the user. Without interleaving (v = 1):
      floor(l / pp) or ceil(l / pp) layers per rank, the lighter ranks at the ends (they also
      hold the embedding and the output layer), taken in turn from the first and the last:
      126 layers on pp = 16 is 7 + 14 x 8 + 7, Llama 3's layout. Interleaved (v > 1): the first /
      last counts (multiples of v, middle ranks equal, no rank above ceil(l / pp) rounded up to a
      multiple of v) that minimise the most-loaded rank, then the spread between ranks, the last
      rank lighter before the first (the first holds the most activations).
    """
    check_split_knobs(pp, first, last, embedding, loss)
    if pp == 1:
        return (layers,)
    v = chunks
    if embedding or loss:
        total = layers + embedding + loss
        if total % (pp * v):
            raise ValueError(f"counting the embedding/loss as layers needs layers + {embedding + loss} = {total} "
                             f"divisible by pp x chunks = {pp} x {v} = {pp * v} (Megatron-Core)")
        n = total // pp
        if n - max(embedding, loss) < 1:
            raise ValueError(f"{total} layer slots over pp={pp} leave an end stage without a transformer layer")
        return (n - embedding,) + (n,) * (pp - 2) + (n - loss,)
    if first is not None or last is not None:
        return _with_ends(layers, pp, v, first, last)
    if layers % (pp * v) == 0:
        return (layers // pp,) * pp
    best = _floor_ceil(layers, pp) if v == 1 else _balanced(layers, pp, v)
    if best is None:
        raise ValueError(f"a pipeline split needs layers ({layers}) divisible by pp x chunks = {pp} x {v} = {pp * v}, "
                         f"or an uneven one by Megatron-Core's rules (equal middle stages, end stages of a multiple "
                         f"of v={v} layers), and none exists: set first_stage_layers / last_stage_layers, or count "
                         f"the embedding and the loss as layers")
    return best


def _with_ends(layers: int, pp: int, v: int, first: int | None, last: int | None) -> tuple[int, ...]:
    """The split with given first / last counts (Megatron-Core's uneven pipeline rules)."""
    for name, n in (("first_stage_layers", first), ("last_stage_layers", last)):
        if n is not None and n % v:
            raise ValueError(f"{name}={n} must be divisible by the chunks per rank v={v} (Megatron-Core)")
    middle, rest = pp - (first is not None) - (last is not None), layers - (first or 0) - (last or 0)
    if rest < middle or (middle == 0 and rest) or (middle and rest % (middle * v)):
        raise ValueError(f"the {rest} layers left by first/last stage layers ({first}, {last}) of {layers} must "
                         f"split evenly over the {middle} other stages x chunks v={v} (Megatron-Core)")
    n = rest // middle if middle else 0
    return ((n if first is None else first),) + (n,) * (pp - 2) + ((n if last is None else last),)


def _floor_ceil(layers: int, pp: int) -> tuple[int, ...]:
    """floor(l / pp) or ceil(l / pp) layers per rank, the lighter ranks taken from the ends in
    turn (first, last, second, second-to-last, ...)."""
    q, r = divmod(layers, pp)
    light = {(i // 2) if i % 2 == 0 else pp - 1 - i // 2 for i in range(pp - r)}
    return tuple(q if i in light else q + 1 for i in range(pp))


def _balanced(layers: int, pp: int, v: int) -> tuple[int, ...] | None:
    """The first/last/middle split (``pipeline_layout``'s default rule) or None when none exists."""
    best, key = None, None
    middle = pp - 2
    bound = -(-layers // pp)  # no stage above ceil(l / pp), rounded up to whole chunks of v
    bound = -(-bound // v) * v
    for first in range(v, min(layers, bound) + 1, v):
        for last in range(v, min(layers - first, bound) + 1, v):
            rest = layers - first - last
            if middle == 0:
                if rest:
                    continue
                n = 0
            elif rest < middle * v or rest % (middle * v):
                continue
            else:
                n = rest // middle
            counts = (first, last) + ((n,) if middle else ())
            if max(counts) > bound:
                continue
            k = (max(counts), max(counts) - min(counts), -(first <= last), abs(first - last))
            if key is None or k < key:
                best, key = (first,) + (n,) * middle + (last,), k
    return best


def stage_index(stage: str | int, pp: int) -> int:
    """The pipeline rank of a stage named 'first' (0), 'last' (pp - 1) or given by its index."""
    if stage == "first":
        return 0
    if stage == "last":
        return pp - 1
    if isinstance(stage, int) and 0 <= stage < pp:
        return stage
    raise ValueError(f"stage must be 'first', 'last' or a rank 0..{pp - 1}, got {stage!r}")


def fullest_stage(layout: tuple[int, ...]) -> int | None:
    """The first middle rank holding the most layers, where it holds more than an end rank (the
    first such rank has the most micro-batches in flight of them); None for an even split or
    where an end rank is among the fullest (the first and last are priced anyway)."""
    top = max(layout)
    i = layout.index(top)
    return i if 0 < i < len(layout) - 1 else None


def stage_loads(layout: tuple[int, ...], embedding: bool = False, loss: bool = False) -> tuple[int, ...]:
    """Each rank's work in layers: its transformer layers, plus one for the embedding (the loss)
    where it is counted as a layer (Megatron-Core's account_for_*_in_pipeline_split)."""
    loads = list(layout)
    loads[0] += embedding
    loads[-1] += loss
    return tuple(loads)


def bubble_stage_times(loads: tuple[int, ...], chunks: int = 1) -> float:
    """The pipeline bubble of one step in units of the slowest rank's time per micro-batch, for
    ranks whose time per micro-batch is proportional to ``loads`` (1F1B or interleaved 1F1B).

    Narayanan et al. 2021, Sec. 2.2: with equal stages of time t the bubble is (p - 1) t, and
    (p - 1) t / v interleaved with v chunks (Sec. 2.2.2). With unequal stages t_i the slowest
    rank k sets the pace (m t_k of work, no wait in the steady state), and the fill and drain
    are the other ranks' time for one micro-batch: (sum_i t_i - t_k) / v; for equal stages this
    is (p - 1) t / v. It is exact where the last rank is a slowest one (a faster rank after the
    slowest hides part of its drain in the slowest rank's idle time: there it is an upper bound);
    ``parlab.schedules.simulate`` checks both (tests/test_costmodel_uneven.py).
    """
    top = max(loads)
    return (sum(loads) - top) / top / chunks


def layout_text(layout: tuple[int, ...]) -> str:
    """A split in words: '8 per stage' when even, else '7 + 14 x 8 + 7' (first, middle, last)."""
    if len(set(layout)) == 1:
        return f"{layout[0]} per stage"
    middle = layout[1:-1]
    mid = (f" + {len(middle)} x {middle[0]}" if len(set(middle)) == 1 and middle
           else "".join(f" + {n}" for n in middle))
    return f"{layout[0]}{mid} + {layout[-1]}"

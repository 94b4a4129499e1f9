"""The pipeline executor: any synchronous ``parlab.schedules`` schedule, run for real on p ranks.

    from parlab.comm import launch
    from parlab.parallel.pipeline_parallel import pipeline_step, measured_timeline
    from parlab.schedules import one_f_one_b

    sched = one_f_one_b(p=4, m=8)
    runs = launch(pipeline_step, 4, sched, GPTConfig(n_layer=4), x, y)   # x, y: (b, s)
    runs[-1].loss                          # the step's loss = the serial model's (last piece's rank)
    gantt_figure(measured_timeline(sched, runs), unit="s")

Each rank runs its op list in order (Huang et al. 2019, GPipe; Narayanan et al. 2021 for 1F1B
and the interleaved schedule; Qi et al. 2023 for the split backward):
- ``F(mb, c)``: receive the activation (b/m, s, h) from the previous virtual stage (the first
  takes the token ids), run chunk c, send its output to the next virtual stage; the last runs
  the loss, divided by m so that the m backward passes add up to the serial batch gradient;
- ``B(mb, c)``: receive the output gradient (b/m, s, h) from the next virtual stage, backpropagate,
  send the input gradient to the previous one; with a split backward (a schedule with W ops)
  only the input gradient, keeping the graph (``retain_graph``);
- ``W(mb, c)``: the weight gradients of a split backward; the graph and its saved activations
  are freed here.
Messages carry no tags: every rank knows every rank's op list, so it knows the order in which a
peer sends to it, and files early arrivals until their op comes (a mailbox). Sends are eager
(``parlab.comm``): a valid schedule cannot deadlock. After the last op, the gradients of the tied
embedding are summed between the first and last rank (``stage.sync_tied_grads``).

Any placement runs (``Schedule.placement``): the V of ZB-V and DualPipeV (chunk p - 1 hands its
output to chunk p on the same rank; the loss is on rank 0) and DualPipe's two directions on two
copies of the stages (the loss on ranks p - 1 and 0, half the micro-batches each: the step's loss
is the sum of the ranks' ``loss``; after the step every gradient is summed with the mirror rank
p - 1 - r, ``stage.sync_schedule_grads``). An overlapped F&B pair runs as its F, then its B: the
order and the dependencies are DualPipe's, the overlap of one's compute with the other's
communication (two GPU streams) is not executed.

Measured on every rank: each op's span (``time.monotonic``, shared by the machine's processes),
the activations autograd saved (``measure.SavedActivations``: peak bytes and the most
(micro-batch, chunk) pairs held at once, which equals ``parlab.schedules.peak_chunks_in_flight``),
and the payload bytes sent to each peer (``comm.recording``): one activation (b/m) s h x 4 bytes
per micro-batch and boundary forward, one gradient of the same size backward.

Only synchronous (flush) schedules run here; PipeDream's weight stashing and 2BW are simulated
(``parlab.schedules.asynchronous``), not executed.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from parlab.schedules import Op, Schedule, Timeline, validate

from ..agree import check_training
from ..measure import PhaseClock, SavedActivations, align
from ..model import GPTConfig
from ..tensor_parallel.layers import check_ids
from ..tensor_parallel.split_backward import input_pass, weight_pass
from .stage import owned_params, schedule_chunks, sync_schedule_grads


@dataclass
class StageRun:
    """What one rank measured in one step. ``loss`` is set on the last rank only."""

    rank: int
    loss: float | None
    grads: dict[str, torch.Tensor]
    spans: list[tuple[Op, float, float]]
    peak_bytes: int
    peak_held: int  # most (micro-batch, chunk) pairs with saved activations at once
    bytes_of: dict[tuple[int, int], int]  # (mb, chunk) -> bytes its forward saved
    sent: dict[int, int] = field(default_factory=dict)  # peer rank -> payload bytes sent
    messages: dict[int, int] = field(default_factory=dict)  # peer rank -> messages sent


def check_run(comm, schedule: Schedule, config: GPTConfig, x: torch.Tensor,
              y: torch.Tensor | None = None) -> None:
    """The rules of a pipelined step, as errors naming the rule broken (checked on every rank
    before it sends anything): the schedule, and the batch: token ids ``x`` (b, s) and targets
    ``y`` of the same shape, integers in [0, vocab_size), b a multiple of m and at least m."""
    if not isinstance(schedule, Schedule):
        raise TypeError(f"schedule must be a parlab.schedules.Schedule, got {type(schedule).__name__}")
    validate(schedule)
    if not schedule.synchronous:
        raise ValueError(f"the executor runs synchronous (flush) schedules only; {schedule.name!r} "
                         f"uses weights={schedule.weights!r} (simulate it with parlab.schedules)")
    check_stages(comm, schedule)
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    if config.n_layer < schedule.depth:
        raise ValueError(f"more pipeline pieces than layers: p x v = {schedule.p} x {schedule.v} "
                         f"for n_layer={config.n_layer} (each virtual stage needs a layer)")
    for name, t in (("token ids x", x), ("targets y", y)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be (batch, sequence), got shape {tuple(t.shape)}")
        check_ids(t, config.vocab_size, name)
    if y is not None and y.shape != x.shape:
        raise ValueError(f"the targets y {tuple(y.shape)} must have the shape of the tokens x "
                         f"{tuple(x.shape)}: one next token per position")
    b, s = x.shape
    if b < schedule.m or b % schedule.m:
        raise ValueError(f"the batch size ({b}) must be a multiple of m={schedule.m} micro-batches, "
                         f"and at least m (equal micro-batches, none empty)")
    if not 1 <= s <= config.seq_len:
        raise ValueError(f"the sequence length ({s}) must be in 1..seq_len={config.seq_len}")


def check_stages(comm, schedule: Schedule) -> None:
    """One stage per rank of the pipeline group: the schedule's p must be ``comm``'s size."""
    if comm.world_size != schedule.p:
        raise ValueError(f"schedule {schedule.name!r} has p={schedule.p} stages but the pipeline has "
                         f"{comm.world_size} ranks (one stage per rank): build the schedule for "
                         f"p={comm.world_size}")


def send_order(schedule: Schedule, src: int, dst: int) -> list[tuple[str, int, int]]:
    """The messages ``src`` sends ``dst``, in order: ('act' | 'grad', mb, receiving virtual
    stage). Activations go forward at F, gradients backward at B."""
    n = schedule.depth
    order = []
    for op in schedule.stages[src]:
        u = schedule.virtual_stage(src, op.chunk)
        if op.kind == "F" and u < n - 1 and schedule.place(u + 1, op.chunk)[0] == dst:
            order.append(("act", op.microbatch, u + 1))
        elif op.kind == "B" and u > 0 and schedule.place(u - 1, op.chunk)[0] == dst:
            order.append(("grad", op.microbatch, u - 1))
    return order


class Mailbox:
    """Receive a given message from a peer: pull the peer's messages in its send order and keep
    those that arrive before their op (no tags on the wire). Same-rank hand-offs (p = 1) stay local."""

    def __init__(self, comm, schedule: Schedule):
        self.comm, self.rank = comm, comm.rank
        self.expected = {src: send_order(schedule, src, self.rank)
                         for src in range(schedule.p) if src != self.rank}
        self.next = dict.fromkeys(self.expected, 0)
        self.early: dict[tuple[str, int, int], torch.Tensor] = {}

    def put(self, key: tuple[str, int, int], dst: int, t: torch.Tensor) -> None:
        if dst == self.rank:
            self.early[key] = t
        else:
            self.comm.send(t, dst)

    def get(self, key: tuple[str, int, int], src: int) -> torch.Tensor:
        while key not in self.early:
            order = self.expected[src]
            if self.next[src] >= len(order):
                raise ValueError(f"rank {self.rank} waits for {key} from rank {src}, which never sends it")
            self.early[order[self.next[src]]] = self.comm.recv(src)
            self.next[src] += 1
        return self.early.pop(key)


def run_schedule(comm, schedule: Schedule, model, chunks, x: torch.Tensor, y: torch.Tensor, *,
                 count_activations: bool = True) -> StageRun:
    """One pipelined forward and backward of the batch (x, y) on this rank's ``chunks``;
    gradients accumulate in ``.grad`` (zero them before). Returns what was measured.
    ``count_activations=False``: no saved-tensor hooks (a Python call per tensor autograd saves,
    about 5% of a TinyGPT step), so the activation fields of the result are 0; for timing
    against an executor that counts nothing (``parlab bench pipeline``)."""
    check_stages(comm, schedule)  # a schedule for another depth: no op list for some ranks
    m, rank, n = schedule.m, comm.rank, schedule.depth
    # m micro-batches of (b/m, s), each its own storage (saved-tensor bytes count storages)
    xs, ys = [t.clone() for t in x.chunk(m)], [t.clone() for t in y.chunk(m)]
    split = schedule.split_backward
    acts = SavedActivations(model.parameters()) if count_activations else None
    clock, box = PhaseClock(), Mailbox(comm, schedule)
    inputs, outputs, out_grads = {}, {}, {}
    losses = []
    with comm.recording() as events:
        for op in schedule.stages[rank]:
            mb, c = op.microbatch, op.chunk
            u, chunk = schedule.virtual_stage(rank, c), chunks[c]
            if op.kind == "F":
                if u == 0:
                    inp = xs[mb]
                else:
                    inp = box.get(("act", mb, u), schedule.place(u - 1, c)[0]).requires_grad_()
                with clock.phase(op), (acts.tag((mb, c)) if acts else nullcontext()):
                    if u == n - 1:
                        loss = chunk(inp, ys[mb])
                        losses.append(loss.detach())
                        out = loss / m  # the m micro-batch losses average to the batch loss
                    else:
                        out = chunk(inp)  # (b/m, s, h)
                        box.put(("act", mb, u + 1), schedule.place(u + 1, c)[0], out.detach())
                inputs[(mb, c)], outputs[(mb, c)] = inp, out
            elif op.kind == "B":
                g = None if u == n - 1 else box.get(("grad", mb, u), schedule.place(u + 1, c)[0])
                with clock.phase(op):
                    out, inp = outputs[(mb, c)], inputs[(mb, c)]
                    if not split:
                        torch.autograd.backward(out, g)
                        gin = inp.grad if u > 0 else None
                        del outputs[(mb, c)], inputs[(mb, c)]
                    else:
                        out_grads[(mb, c)] = g
                        with input_pass():  # TP's backward collectives run here, once
                            gin = torch.autograd.grad(out, inp, g, retain_graph=True)[0] if u > 0 else None
                    if u > 0:
                        box.put(("grad", mb, u - 1), schedule.place(u - 1, c)[0], gin)
            else:  # W: the weight gradients; the graph (and its saved activations) goes
                with clock.phase(op):
                    out, g = outputs.pop((mb, c)), out_grads.pop((mb, c))
                    inputs.pop((mb, c))
                    with weight_pass():  # ... and not again (split_backward)
                        torch.autograd.backward(out, g, inputs=list(chunk.parameters()))
    sent: dict[int, int] = {}
    messages: dict[int, int] = {}
    for e in events:
        if e.kind == "send":
            sent[e.peer] = sent.get(e.peer, 0) + e.nbytes
            messages[e.peer] = messages.get(e.peer, 0) + 1
    loss = float(sum(losses) / m) if losses else None
    counted = (acts.peak_bytes, acts.peak_tags, dict(acts.bytes_of)) if acts else (0, 0, {})
    return StageRun(rank, loss, {}, clock.spans, *counted, sent, messages)


def pipeline_step(comm, schedule: Schedule, config: GPTConfig, x: torch.Tensor,
                  y: torch.Tensor) -> StageRun:
    """Worker function (``launch(pipeline_step, p, schedule, config, x, y)``): build the model
    from ``config``'s seed, run one step of ``schedule`` on the batch (x, y), sum the tied
    embedding's gradient; returns this rank's ``StageRun`` with the gradients of its parameters."""
    check_run(comm, schedule, config, x, y)
    model, chunks = schedule_chunks(config, schedule, comm.rank)
    run = run_schedule(comm, schedule, model, chunks, x, y)
    sync_schedule_grads(comm, schedule, model, chunks)
    run.grads = {name: prm.grad.clone() for name, prm in owned_params(model, chunks).items()
                 if prm.grad is not None}
    return run


def train_pipeline(comm, schedule: Schedule, config: GPTConfig, batches: Iterable[tuple],
                   steps: int, lr: float = 0.1) -> tuple[list[float], StageRun]:
    """Worker function: ``steps`` pipelined steps of plain SGD (``w -= lr * grad``, applied
    by hand: no optimizer object, so no ``torch._dynamo`` import in the worker) on consecutive
    batches; returns (the loss of every step on the last rank, [] elsewhere; the last step's
    ``StageRun``). The arguments are ``agree.check_training``'s (the first ``steps`` batches, the
    same on every rank) and ``check_run``'s, all checked before the first step."""
    taken = check_training(comm, "train_pipeline", batches, steps, lr)
    for x, y in taken:
        check_run(comm, schedule, config, x, y)
    model, chunks = schedule_chunks(config, schedule, comm.rank)
    params = list(owned_params(model, chunks).values())
    losses, run = [], None
    for x, y in taken:
        for prm in params:
            prm.grad = None
        run = run_schedule(comm, schedule, model, chunks, x, y)
        sync_schedule_grads(comm, schedule, model, chunks)
        with torch.no_grad():
            for prm in params:
                if prm.grad is not None:
                    prm -= lr * prm.grad
        if run.loss is not None:
            losses.append(run.loss)
    return losses, run


def measured_timeline(schedule: Schedule, runs: list[StageRun]) -> Timeline:
    """The ranks' measured spans on one axis (seconds from the first op's start), as a
    ``Timeline`` that ``parlab.viz.gantt.gantt_figure`` draws like a simulated one."""
    spans = align([r.spans for r in runs])
    return Timeline(schedule, tuple(tuple(s) for s in spans))


def activation_ratio(run: StageRun) -> float:
    """Peak saved bytes of a rank in micro-batches of its stage (v = 1: bytes one micro-batch's
    forward saved), to set beside ``parlab.schedules.peak_activations``."""
    one = sum(b for (mb, _), b in run.bytes_of.items() if mb == 0)
    return run.peak_bytes / one if one else 0.0


def boundary_bytes(micro_batch: int, config: GPTConfig, itemsize: int = 4) -> int:
    """Payload bytes one rank sends its neighbour for one micro-batch crossing one boundary:
    the activation (b/m, s, h) forward, and a gradient of the same size backward."""
    return micro_batch * config.seq_len * config.hidden * itemsize

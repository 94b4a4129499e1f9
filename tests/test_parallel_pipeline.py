"""The pipeline executor (``parlab.parallel.pipeline_parallel``): for every synchronous schedule and several
(p, m, v), on both backends, the pipelined step gives the unsplit model's loss and gradients on the
same batch, holds exactly the activations the simulator predicts (measured with saved-tensor
hooks), and sends b/m x s x h x 4 bytes per micro-batch and boundary each way; and it gives what
``torch.distributed.pipelining`` gives (ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B on
gloo, which do run on CPU in torch 2.13).

Tolerance: float32; the pipeline adds m micro-batch gradients where the serial model does one
batch, so values differ by rounding only: |grad - serial| <= 1e-6 + 1e-4 |serial| elementwise
(measured: about 5e-8 at most), loss within 1e-5.

Many checks share one launch (a worker runs every case for its world size), to keep the module
near a minute on a loaded 2-core machine.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from parlab.comm import launch
from parlab.parallel import GPTConfig, TinyGPT, batches
from parlab.parallel.measure import PhaseClock, SavedActivations, align
from parlab.parallel.pipeline_parallel import split_layers
from parlab.parallel.pipeline_parallel.executor import (
    activation_ratio,
    boundary_bytes,
    check_run,
    measured_timeline,
    pipeline_step,
    send_order,
)
from parlab.schedules import (
    gpipe,
    interleaved_1f1b,
    make_schedule,
    one_f_one_b,
    peak_activations,
    peak_chunks_in_flight,
    pipedream,
)

pytestmark = pytest.mark.usefixtures("warm_launches")  # launch runs on warm ranks (conftest)

CFG = GPTConfig(n_layer=8, hidden=32, n_head=2, seq_len=16)
BATCH = 24
RTOL, ATOL, LOSS_TOL = 1e-4, 1e-6, 1e-5

# (schedule name, m, v) run on each world size p
CASES = {
    1: [("1f1b", 2, 1), ("gpipe", 4, 1)],
    2: [("naive", 1, 1), ("gpipe", 4, 1), ("1f1b", 4, 1), ("1f1b", 8, 1), ("interleaved", 4, 2),
        ("interleaved", 2, 4), ("zb-h1", 4, 1)],
    3: [("gpipe", 2, 1), ("1f1b", 8, 1), ("interleaved", 6, 2), ("zb-h1", 8, 1)],
    4: [("naive", 1, 1), ("gpipe", 8, 1), ("1f1b", 2, 1), ("1f1b", 8, 1), ("interleaved", 4, 2),
        ("interleaved", 8, 2), ("zb-h1", 4, 1), ("zb-h1", 8, 1)],
}


def batch():
    """(x, y): BATCH rows, a multiple of every m used."""
    return next(batches(BATCH, CFG.seq_len, seed=3))


@pytest.fixture(scope="module")
def serial():
    x, y = batch()
    model = TinyGPT(CFG)
    loss = model(x, y)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


def every_case(comm, cases, cfg, x, y, with_torch=False):
    """Worker: parlab's executor for each case; and torch's pipelining for those it has."""
    out = {"parlab": [], "torch": []}
    for name, m, v in cases:
        out["parlab"].append(pipeline_step(comm, make_schedule(name, comm.world_size, m, v), cfg, x, y))
    if with_torch:
        from parlab.parallel.pipeline_parallel import TORCH_SCHEDULES, torch_pipeline_step

        for name, m, v in cases:
            if name in TORCH_SCHEDULES:
                out["torch"].append(torch_pipeline_step(comm, name, cfg, x, y, m, v))
    return out


def check_against_serial(serial, loss, grads_per_rank, what):
    ref_loss, ref = serial
    assert abs(loss - ref_loss) <= LOSS_TOL, f"{what}: loss {loss} vs serial {ref_loss}"
    got = {}
    for g in grads_per_rank:
        assert not set(g) & set(got) or set(g) & set(got) == {"wte.weight"}, f"{what}: shared params"
        got.update(g)
    assert set(got) == set(ref), f"{what}: missing gradients {sorted(set(ref) - set(got))}"
    for name, want in ref.items():
        assert torch.allclose(got[name], want, rtol=RTOL, atol=ATOL), (
            f"{what}: grad of {name} differs by {(got[name] - want).abs().max().item():.3g}")


def check_runs(serial, runs, name, p, m, v, backend):
    sched = make_schedule(name, p, m, v)
    what = f"{sched.name} p={p} m={m} v={v} ({backend})"
    check_against_serial(serial, runs[-1].loss, [r.grads for r in runs], what)
    # activations: the (micro-batch, chunk) pairs held at once are the simulator's, exactly
    assert tuple(r.peak_held for r in runs) == peak_chunks_in_flight(sched), what
    if v == 1:  # in micro-batches of the stage's bytes
        for r, want in zip(runs, peak_activations(sched), strict=True):
            assert activation_ratio(r) == pytest.approx(float(want), abs=1e-12), what
    # P2P: every boundary carries one activation forward and one gradient back per micro-batch
    one = boundary_bytes(BATCH // m, CFG)
    for r in runs:
        for peer in set(range(p)) - {r.rank}:
            crossings = len(send_order(sched, r.rank, peer))
            assert r.sent.get(peer, 0) == crossings * one, f"{what}: rank {r.rank} -> {peer}"
            assert r.messages.get(peer, 0) == crossings, what
        assert set(r.sent) <= set(range(p)) - {r.rank}, what
    # the measured timeline is a Timeline: every op once per stage, in the stage's order
    tl = measured_timeline(sched, runs)
    assert [[op for op, _, _ in s] for s in tl.spans] == [list(ops) for ops in sched.stages]
    assert all(t0 >= 0 and t1 >= t0 for s in tl.spans for _, t0, t1 in s)
    assert 0 <= float(tl.bubble_fraction) < 1


@pytest.mark.timeout(240)
@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_every_schedule_matches_the_serial_model_local(serial, p):
    x, y = batch()
    out = launch(every_case, p, CASES[p], CFG, x, y, timeout=60)
    for i, (name, m, v) in enumerate(CASES[p]):
        check_runs(serial, [r["parlab"][i] for r in out], name, p, m, v, "local")


@pytest.mark.timeout(300)
def test_torch_backend_and_torch_pipelining_agree(serial):
    """On gloo: parlab's executor over the torch backend, and torch.distributed.pipelining's
    ScheduleGPipe, Schedule1F1B and ScheduleInterleaved1F1B, both give the serial gradients."""
    p = 4
    cases = [("gpipe", 4, 1), ("1f1b", 8, 1), ("interleaved", 4, 2), ("zb-h1", 4, 1)]
    x, y = batch()
    out = launch(every_case, p, cases, CFG, x, y, True, backend="torch", timeout=120)
    for i, (name, m, v) in enumerate(cases):
        check_runs(serial, [r["parlab"][i] for r in out], name, p, m, v, "torch")
    torch_cases = [c for c in cases if c[0] != "zb-h1"]
    for i, (name, m, v) in enumerate(torch_cases):
        runs = [r["torch"][i] for r in out]
        what = f"torch.distributed.pipelining {name} p={p} m={m} v={v}"
        check_against_serial(serial, runs[-1]["loss"], [r["grads"] for r in runs], what)
        mine = {k: g for r in out for k, g in r["parlab"][i].grads.items()}
        theirs = {k: g for r in runs for k, g in r["grads"].items()}
        for k in mine:
            assert torch.allclose(mine[k], theirs[k], rtol=RTOL, atol=ATOL), f"{what}: {k}"


# -------------------------------------------------------------------------- in-process rules
def test_bad_input_names_the_rule():
    x, _ = batch()
    comm = SimpleNamespace(world_size=4, rank=0)
    with pytest.raises(ValueError, match="more pipeline pieces than layers"):
        check_run(comm, interleaved_1f1b(4, 4, 4), CFG, x)  # 16 pieces, 8 layers
    with pytest.raises(ValueError, match="more pipeline pieces than layers"):
        split_layers(3, 4)
    with pytest.raises(ValueError, match="the pipeline has 2 ranks"):
        check_run(SimpleNamespace(world_size=2, rank=0), gpipe(4, 4), CFG, x)
    with pytest.raises(ValueError, match="multiple of m=5"):
        check_run(comm, one_f_one_b(4, 5), CFG, x)  # 24 rows
    with pytest.raises(ValueError, match="synchronous"):
        check_run(comm, pipedream(4, 4), CFG, x)
    with pytest.raises(ValueError, match="m \\(micro-batches\\) must be >= 1"):
        gpipe(4, 0)
    bad = one_f_one_b(2, 2)
    swapped = type(bad)(bad.name, 2, 2, 1, (bad.stages[0], tuple(reversed(bad.stages[1]))))
    with pytest.raises(ValueError, match="rule"):
        check_run(SimpleNamespace(world_size=2, rank=0), swapped, CFG, x)
    with pytest.raises(TypeError, match="Schedule"):
        check_run(comm, "1f1b", CFG, x)


def test_a_bad_batch_is_named_before_any_rank_sends():
    x, y = batch()
    comm = SimpleNamespace(world_size=2, rank=0)  # no send/recv: the checks come first
    sched = gpipe(2, 2)
    with pytest.raises(ValueError, match=r"the batch size \(0\) must be a multiple of m=2 .*at least m"):
        pipeline_step(comm, sched, CFG, x[:0], y[:0])  # empty: no loss to average, not NaN
    with pytest.raises(TypeError, match="token ids x must be an integer tensor, got torch.float32"):
        pipeline_step(comm, sched, CFG, x.float(), y)
    with pytest.raises(TypeError, match="targets y must be an integer tensor, got torch.float32"):
        pipeline_step(comm, sched, CFG, x, y.float())
    with pytest.raises(ValueError, match=r"the targets y \(24, 8\) must have the shape of the tokens x \(24, 16\)"):
        pipeline_step(comm, sched, CFG, x, y[:, :8])
    with pytest.raises(ValueError, match=r"targets y must be \(batch, sequence\), got shape \(384,\)"):
        pipeline_step(comm, sched, CFG, x, y.reshape(-1))
    with pytest.raises(IndexError, match=rf"token ids x: id {CFG.vocab_size} is out of range"):
        pipeline_step(comm, sched, CFG, x.clamp(max=0) + CFG.vocab_size, y)
    ids = torch.zeros(8, 17, dtype=torch.long)
    with pytest.raises(ValueError, match=r"the sequence length \(17\) must be in 1..seq_len=16"):
        pipeline_step(comm, sched, CFG, ids, ids)


def test_split_layers_is_even_and_covers_every_layer():
    for n in range(1, 13):
        for k in range(1, n + 1):
            bounds = split_layers(n, k)
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            sizes = [b - a for a, b in bounds]
            assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_send_order_lists_each_crossing_once():
    s = interleaved_1f1b(2, 4, 2)
    fwd = [k for k in send_order(s, 0, 1) if k[0] == "act"]
    bwd = [k for k in send_order(s, 0, 1) if k[0] == "grad"]
    assert len(fwd) == 4 * 2 and len(bwd) == 4 * 1  # chunks 0 and 1 forward, chunk 1 backward


def test_saved_activations_counts_saved_tensors_until_backward():
    model = TinyGPT(CFG)
    x, y = batch()
    acts = SavedActivations(model.parameters())
    with acts.tag("a"):
        loss_a = model(x.clone(), y.clone())  # inputs with storages of their own
    one = acts.live_bytes
    assert one > 0 and acts.bytes_of["a"] == one and acts.live_tags == 1
    with acts.tag("b"):
        loss_b = model(x.clone(), y.clone())
    assert acts.live_bytes == 2 * one and acts.peak_tags == 2
    loss_a.backward()
    assert acts.live_bytes == one and acts.live_tags == 1
    loss_b.backward()
    assert acts.live_bytes == 0 and acts.peak_bytes == 2 * one
    # parameters are state, not activations: a bare linear saves only its input
    lin = torch.nn.Linear(4, 4)
    acts = SavedActivations(lin.parameters())
    inp = torch.ones(2, 4, requires_grad=True)
    with acts.tag("lin"):
        lin(inp).sum()
    assert acts.bytes_of["lin"] == inp.untyped_storage().nbytes()


def test_phase_clock_and_align():
    clock = PhaseClock()
    with clock.phase("x"):
        pass
    (label, t0, t1), = clock.spans
    assert label == "x" and t1 >= t0
    spans = align([[("a", 5.0, 6.0)], [("b", 5.5, 7.0)]])
    assert spans == [[("a", 0.0, 1.0)], [("b", 0.5, 2.0)]]


def _with_and_without_counting(comm, cfg, x, y):
    from parlab.parallel.pipeline_parallel import build_chunks
    from parlab.parallel.pipeline_parallel.executor import run_schedule

    sched = make_schedule("1f1b", comm.world_size, 4, 1)
    out = []
    for count in (True, False):
        model, chunks = build_chunks(cfg, sched.p, 1, comm.rank)
        run = run_schedule(comm, sched, model, chunks, x, y, count_activations=count)
        out.append((run.loss, {n: p.grad.clone() for n, p in model.named_parameters()
                               if p.grad is not None}, run.peak_bytes, run.peak_held, run.bytes_of,
                    [op for op, _, _ in run.spans]))
    return out


def test_the_executor_without_activation_counting_computes_the_same_and_counts_nothing():
    """``count_activations=False`` (bench pipeline's timing against torch, which counts nothing):
    the same loss and gradients bit for bit, the same ops timed, no activation figures."""
    x, y = batch()
    for counted, bare in launch(_with_and_without_counting, 2, CFG, x, y, timeout=60):
        assert counted[0] == bare[0] and counted[1].keys() == bare[1].keys()
        assert all(torch.equal(counted[1][n], bare[1][n]) for n in counted[1])
        assert counted[2] > 0 and counted[3] > 0 and counted[4]
        assert bare[2:5] == (0, 0, {}) and counted[5] == bare[5]


def _train_refusals(comm) -> dict[str, str]:
    """train_pipeline's refusals on 2 ranks: the error each case raised on this rank."""
    from parlab.parallel.pipeline_parallel import train_pipeline

    sched, data = one_f_one_b(2, 2), [b for _, b in zip(range(2), batches(4, CFG.seq_len, seed=1), strict=False)]
    mine = [next(batches(4, CFG.seq_len, seed=10 + comm.rank)), data[1]]  # rank r's own first batch
    out = {}
    for name, args in {"steps=0": (data, 0), "lr=nan": (data, 2, float("nan")), "1 batch, steps=2": (data[:1], 2),
                       "per-rank batches": (mine, 2)}.items():
        try:
            train_pipeline(comm, sched, CFG, *args)
            out[name] = "nothing"
        except Exception as err:  # noqa: BLE001 - the class and message are what the test reads
            out[name] = f"{type(err).__name__}: {err}"
    return out


def test_train_pipeline_refuses_bad_arguments_and_ranks_with_different_batches():
    """Too few batches trained fewer steps silently; per-rank batches were not compared."""
    for res in launch(_train_refusals, 2, timeout=60):
        assert res["steps=0"] == "ValueError: train_pipeline steps must be a positive integer, got 0"
        assert res["lr=nan"] == "ValueError: train_pipeline lr must be a positive number, got nan"
        assert res["1 batch, steps=2"] == ("ValueError: train_pipeline: batches holds 1 (x, y) pairs but "
                                           "steps=2: one batch per step")
        assert res["per-rank batches"].startswith("CollectiveMismatch: train_pipeline: the ranks disagree "
                                                  "on batches (CRC-32) (rank 0 "), res

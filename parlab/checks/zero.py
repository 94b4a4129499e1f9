"""Checker for exercise 07 (one ZeRO-2 step): the learner's ``zero2_step`` trains replicas that
stay equal to serial AdamW training on the full batch, keeps only its own shard of the optimizer
state, and sends exactly what the ZeRO paper says: one reduce-scatter of the gradients and one
all-gather of the parameters per step, the bytes of one ring all-reduce (Rajbhandari et al. 2020,
Section 7.2.1), no all-reduce.

The learner writes ``zero2_step(comm, params, state, lr)``, called on every rank after
``loss.backward()``: ``params`` are the model's fp32 parameters with their local gradients,
``state`` a dict the function may keep its shard's Adam moments in between calls. It runs on
3 ranks (local backend, which counts what it moves); TinyGPT's parameter count does not divide
by 3, so the flat vector must be padded.
"""

from __future__ import annotations

from parlab.parallel.zero import shard_plan

from .ranks import launch_learner_code

WORLD = 3          # TinyGPT's 104,192 parameters do not divide by 3: padding needed
STEPS = 3          # AdamW steps compared with serial training
LR = 1e-2
BATCH = 6          # global batch, divisible by WORLD
ATOL = 1e-4        # Adam turns the ranks' other summation order (~1e-7) into up to ~3e-5


def _train(comm, zero2_step) -> dict:
    import torch

    from parlab.parallel import batches
    from parlab.parallel.model import GPTConfig, TinyGPT
    from parlab.parallel.zero import ParamAdamW

    model = TinyGPT(GPTConfig(seed=0))  # the same replica on every rank
    params = list(model.parameters())
    state: dict = {}
    data = batches(BATCH, 32, seed=1, rank=comm.rank, world=comm.world_size)
    steps = []
    for _ in range(STEPS):
        x, y = next(data)
        model(x, y).backward()
        comm.reset_traffic()
        with comm.recording() as events:
            zero2_step(comm, params, state, LR)
        sent = {op: t.bytes_sent for op, t in comm.traffic().items()}
        steps.append({"ops": [e.op for e in events if e.kind == "op"], "sent": sent,
                      "grads_left": sum(p.grad is not None for p in params)})
    serial = TinyGPT(GPTConfig(seed=0))
    opt = ParamAdamW(serial.parameters(), lr=LR)  # torch.optim.AdamW's update (tests/test_parallel_zero.py)
    data = batches(BATCH, 32, seed=1)
    for _ in range(STEPS):
        x, y = next(data)
        serial(x, y).backward()
        opt.step()
        opt.zero_grad()
    errs = [(n, float((p - q).detach().abs().max()))
            for (n, p), q in zip(model.named_parameters(), serial.parameters(), strict=True)]
    kept = sum(v.numel() for v in state.values() if isinstance(v, torch.Tensor))
    return {"steps": steps, "errs": errs, "kept": kept, "psi": sum(p.numel() for p in params)}


def check_zero2_step(zero2_step) -> None:
    """Train TinyGPT on 3 ranks with the learner's ``zero2_step`` for ``STEPS`` AdamW steps (lr
    1e-2, betas 0.9 / 0.95, eps 1e-8, no weight decay): every parameter must equal serial
    training within ``ATOL``; each step must run exactly one reduce_scatter then one all_gather
    and send 2 (n-1)/n of the padded fp32 vector (a DDP all-reduce's bytes); the tensors kept in
    ``state`` must hold at most Adam's two moments of one shard. Raises AssertionError with one
    line naming the first problem; a stub's NotImplementedError passes through."""
    per_rank = launch_learner_code(
        _train, WORLD, zero2_step, stub="zero2_step is still a stub",
        hint="does every rank call reduce_scatter and all_gather, with blocks of the same size?",
        timeout=60)
    plan = shard_plan(per_rank[0]["psi"], WORLD)
    block = plan.shard * 4  # bytes of one rank's fp32 block
    want = {"reduce_scatter": (WORLD - 1) * block, "all_gather": (WORLD - 1) * block}
    for rank, run in enumerate(per_rank):
        for k, step in enumerate(run["steps"]):
            if step["ops"] != ["reduce_scatter", "all_gather"]:
                raise AssertionError(f"rank {rank}, step {k}: the collectives were {step['ops']}, expected "
                                     f"['reduce_scatter', 'all_gather'] (one of each, in that order)")
            if step["sent"] != want:
                raise AssertionError(f"rank {rank}, step {k}: sent {step['sent']} bytes, expected {want}: "
                                     f"flatten every gradient into one fp32 vector padded to "
                                     f"{plan.padded:,} elements ({WORLD} blocks of {plan.shard:,})")
            if step["grads_left"]:
                raise AssertionError(f"rank {rank}, step {k}: {step['grads_left']} parameters still hold a "
                                     f"gradient after the step: set p.grad = None (ZeRO-2 frees them)")
        if run["kept"] > 2 * plan.shard + 8:
            raise AssertionError(f"rank {rank}: state holds {run['kept']:,} elements, more than Adam's two "
                                 f"moments of one shard (2 x {plan.shard:,}): keep only your own shard")
        name, err = max(run["errs"], key=lambda e: e[1])
        if not err < ATOL:
            raise AssertionError(f"rank {rank}: after {STEPS} AdamW steps {name} differs from serial training "
                                 f"by {err:.3g} (tolerance {ATOL:g}): average the gradient (divide the "
                                 f"reduce-scattered sum by comm.world_size) and bias-correct Adam's moments")
    print(f"ZeRO-2 step correct on {WORLD} ranks: {STEPS} AdamW steps gave the parameters of serial "
          f"training (within {ATOL:g});\n"
          f"each step made one reduce-scatter and one all-gather, {sum(want.values()):,} bytes sent per "
          f"rank\n(a ring all-reduce's 2(n-1)/n of {plan.padded * 4:,} bytes); each rank kept "
          f"{per_rank[0]['kept']:,} optimizer elements\n(2 x {plan.shard:,}, one shard).")

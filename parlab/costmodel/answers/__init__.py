"""The course's answers to the guide's questions, and the model checked against published runs.
The top floor: it imports every layer below and nothing imports it but the faces.

    scenarios.py      guide 1.18-1.22 and 3.x: memory vs DP, TP without NVLink, ZeRO-3 vs 3D, ...
    scenarios_5d.py   CP and EP: memory against sequence length, an MoE model priced
    walls.py          the memory and compute walls (guide 1.1)
    phases.py         one GPU's memory, phase by phase
    single_gpu.py     what fits one GPU, and the levers (LoRA, offload, recompute)
    too_big.py        the options when a model does not fit
    pure_zero3.py     ZeRO-3 alone on a cluster
    mtnlg.py          MT-NLG 530B's layout priced
    frameworks.py     which framework provides which strategy (guide 3.2)
    stacks.py         published framework stacks (data/stack_runs.csv)
    validation.py     the model against published runs, calibration and validation rows apart
    errors.py         a row's signed error and a set's summary
    bloom_prelude.py  BLOOM's preparation runs (guide 2.3): memory and speed
    published_runs.py published runs of data/published_runs.csv, priced where the model can
"""

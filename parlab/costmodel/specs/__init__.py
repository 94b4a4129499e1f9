"""Specs, the cost model's ground floor: what is priced, never how.

    _check.py       the argument checks every layer uses (one line naming the value and the rule)
    models.py       ModelSpec (a transformer's shape, its exact parameter count), the dense presets
    moe.py          MoESpec (the experts), capacity and dispatch rows, MoEModel (total vs active)
    moe_presets.py  the MoE presets (Mixtral 8x7B, DeepSeek-V3) and multi-head latent attention
    catalogue.py    MODELS and get_model: every preset by name, or a size such as 7B
    hardware.py     GPUs (peak FLOP/s, HBM)
    links.py        interconnects (NVLink, InfiniBand, Ethernet)
    cluster.py      a cluster: GPUs per node, the links inside and between nodes
    assumptions.py  the efficiencies and overlaps the model assumes
    bands.py        the model's error bands and the verdict a margin gets
    calibration.py  which published rows each number was set on; the range the rows cover

Nothing here imports a layer above (``pricing``, ``plan``, ``search``, ``answers``).
"""

"""Specs, the cost model's ground floor: what is priced, never how.

    _check.py       the argument checks every layer uses (one line naming the value and the rule)
    attention.py    one layer's attention: its weight count (MHA/GQA/MQA, head_dim, QK-norm, biases,
                    sinks), sliding windows, AttentionShape (priced by pricing.attention_terms)
    models.py       ModelSpec (a transformer's shape, its exact parameter count), the guide's dense presets
    moe.py          MoESpec (the experts), capacity and dispatch rows, MoEModel (total vs active)
    moe_presets.py  the MoE presets (Mixtral 8x7B, DeepSeek-V3) and multi-head latent attention
    modern_presets.py  Llama 2/3.1, Qwen2.5/3, Mistral, Mixtral 8x22B, GPT-OSS, Nemotron-4, with the
                    published totals their counts are checked against
    hf_config.py    from_hf_config: a Hugging Face config.json as a ModelSpec (no network)
    catalogue.py    MODELS and get_model: every preset by name, a size such as 7B, or a config.json
    hardware.py     GPUs (peak FLOP/s by dtype, FP8 and MXFP8 where the silicon has them, HBM, own link)
    links.py        interconnects (NVLink 2-5, Infinity Fabric, PCIe, InfiniBand, Ethernet/RoCE)
    cluster.py      a cluster: GPUs per node, the links inside and between nodes
    fp8.py          the FP8 recipes, per tensor (TE delayed/current, DeepSeek-V3 blockwise, MXFP8)
    assumptions.py  the efficiencies and overlaps the model assumes
    bands.py        the model's error bands and the verdict a margin gets
    calibration.py  which published rows each number was set on; the range the rows cover

Nothing here imports a layer above (``pricing``, ``plan``, ``search``, ``answers``).
"""

"""``from_hf_config``: a Hugging Face config.json (tests/data/hf_configs/, sources in its README) maps
to the preset of the same model, parameter for parameter; what it cannot map is one line naming
the field or the architecture, never a silent multi-head-attention guess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parlab.costmodel import get_model
from parlab.costmodel.specs.hf_config import from_hf_config

DATA = Path(__file__).parent / "data" / "hf_configs"
CONFIGS = sorted(DATA.glob("*.json"))


def _config(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def test_every_config_has_its_source_in_the_readme():
    readme = (DATA / "README.md").read_text()
    assert len(CONFIGS) == 17
    for path in CONFIGS:
        assert f"| {path.name} |" in readme, path.name


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_counts_exactly_the_presets_parameters(path):
    m = from_hf_config(path)
    preset = get_model(path.stem)
    assert m.name == preset.name
    assert m.num_params() == preset.num_params()
    assert m.active_params() == preset.active_params()
    assert m.attention_shape() == preset.attention_shape()
    assert (m.window, m.window_pattern, m.tied_embeddings) == (preset.window, preset.window_pattern,
                                                              preset.tied_embeddings)


def test_a_dict_a_folder_and_get_model_open_the_same_door(tmp_path):
    cfg = _config("qwen3-8b")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    n = get_model("qwen3-8b").num_params()
    assert from_hf_config(cfg).num_params() == from_hf_config(tmp_path).num_params() == n
    by_path = get_model(str(tmp_path / "config.json"))
    assert by_path.num_params() == n and by_path.name == tmp_path.name
    assert from_hf_config(cfg, seq_len=2048).seq_len == 2048
    assert from_hf_config(_config("llama-3.1-8b")).seq_len == 8192  # pre-extension context, not 131072


def test_gemma_2_counts_sandwich_norms_and_windows():
    """google/gemma-2-9b: 9,241,705,984 parameters (safetensors index total_size 18,483,411,968 B / 2);
    four norms a layer, tied embeddings, head_dim 256, a 4096-token window on every other layer."""
    cfg = {"model_type": "gemma2", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
           "intermediate_size": 14336, "num_hidden_layers": 42, "num_attention_heads": 16,
           "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
           "sliding_window": 4096}
    m = from_hf_config(cfg, name="gemma-2-9b")
    assert m.num_params() == 9_241_705_984
    assert (m.window_layers, m.full_layers, m.tied_embeddings, m.sandwich_norm) == (21, 21, True, True)


def test_gemma_3_reads_its_window_pattern():
    cfg = {"model_type": "gemma3_text", "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18,
           "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
           "max_position_embeddings": 32768, "sliding_window": 512, "sliding_window_pattern": 6}
    m = from_hf_config(cfg)
    assert (m.window_layers, m.full_layers, m.qk_norm, m.kv_heads) == (15, 3, True, 1)


@pytest.mark.parametrize("change, match", [
    ({"model_type": "phi3"}, "model_type='phi3' is not mapped; from_hf_config reads llama"),
    ({"vision_config": {}, "text_config": {}}, "multimodal .* pass its text_config"),
    ({"mlp_bias": True}, "mlp_bias=true"),
    ({"hidden_act": "relu2"}, "hidden_act='relu2': only gated MLPs"),
    ({"num_hidden_layers": "32"}, "num_hidden_layers='32' must be a non-negative integer"),
    ({"num_key_value_heads": 5}, "kv_heads=5 must divide heads=32"),
    ({"use_sliding_window": True}, "use_sliding_window=true"),
    ({"layer_types": ["full_attention"] * 30 + ["sliding_attention"] * 2, "sliding_window": 128},
     "not one full-attention layer every k"),
    ({"layer_types": ["full_attention"] * 3}, "layer_types must list num_hidden_layers=32"),
])
def test_what_it_cannot_map_is_one_line_naming_it(change, match):
    cfg = {**_config("llama-3.1-8b"), **change}
    with pytest.raises(ValueError, match=match) as err:
        from_hf_config(cfg)
    assert "\n" not in str(err.value)


def test_a_missing_or_broken_file_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="cannot read a Hugging Face config.json at .*nope.json"):
        get_model(str(tmp_path / "nope.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        from_hf_config(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds no JSON object"):
        from_hf_config(tmp_path / "list.json")


def test_deepseek_latent_attention_needs_its_query_rank():
    cfg = {**_config("deepseek-v3"), "q_lora_rank": None}
    with pytest.raises(ValueError, match="q_lora_rank=null"):
        from_hf_config(cfg)

"""The Chinese twins of the drill cards on today's models (``parlab.drill.modern``: GQA, FP8,
uneven pipeline stages): the same template rules as ``drill_part1`` / ``drill_part2`` (``p``
prompt, ``y`` why, ``k`` the worked numbers; each ``{}`` takes the English card's next number,
``{model}`` a parameter's name)."""

from __future__ import annotations

ZH_MODERN: dict[str, dict] = {
    "gen-gqa-kv-cache": dict(
        p="{model} 有 {} 层、{} 个查询头、{} 个 K/V 头，每头维度 {}。一条 {} 个 token 的序列，bf16 的 K/V 缓存要多少 GB？",
        y="分组查询注意力（GQA）让几个查询头共用一个 K/V 头，K/V 缓存和 K/V 投影都按 heads / kv_heads 缩小"
          "（Ainslie 等，{}）。",
        k="parlab kv_cache_bytes_per_token：{}（K、V）× {} 层 × {} 个 K/V 头 × {} × {} B = 每个 token {} KB，"
          "× {} = {} GB；如果每个查询头都有自己的 K/V 头，要 {} GB（{}），K/V 投影也要多 {} 参数。"),
    "gen-fp8-weights": dict(
        p="{model} 在 {} 张 H100 上、tp = {}，用 TransformerEngine 的默认方案（te-delayed）做 FP8 训练而不是 bf16："
          "FP8 权重每张卡多占多少 GB？",
        y="FP8 训练让线性层的 GEMM 跑 FP8，主权重、梯度和优化器仍用更高精度（TransformerEngine；DeepSeek-V3，"
          "第 {} 节）。",
        k="parlab estimate，Plan(dtype='fp8') 对比 bf16：每层的线性权重（QKV、注意力输出、MLP）在 bf16 权重旁边"
          "再存一份 FP8 副本和它的转置，每个参数 {} × {} B，另加逐张量的缩放因子和 amax 历史：每张卡 {} GB。"
          "这些 GEMM 按 FP8 峰值算（一步 {} -> {} ms）；词嵌入、输出层、注意力的 softmax、归一化、fp32 主权重、"
          "fp32 梯度和 Adam 都和 bf16 训练一样。"),
    "gen-uneven-stages": dict(
        p="{model} 有 {} 个 Transformer 层，切成 pp = {} 段流水线，词嵌入和损失各算一层（Megatron-Core 的 "
          "account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split）：第一段建几层 Transformer？",
        y="层数分不匀时，两端的段少放层：它们还要放词嵌入和损失（Llama {0}，Dubey 等，{1}）。",
        k="parlab pipeline_layout：({} + {}) / {} = 每段 {} 个层位；第一段让一个给词嵌入，最后一段让一个给损失："
          "第一段 {} 层，中间每段 {} 层，最后一段 {} 层。"),
}

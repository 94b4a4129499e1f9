"""The Chinese twins of the drill cards beyond the guide (``parlab.drill.beyond_3d``): the same
template rules as ``drill_part1`` / ``drill_part2`` (``p`` prompt, ``y`` why, ``k`` the worked
numbers; each ``{}`` takes the English card's next number, ``{model}`` a parameter's name)."""

from __future__ import annotations

ZH_BEYOND: dict[str, dict] = {
    "gen-ring-kv": dict(
        p="{model}（hidden {}）用环形注意力切到 cp = {} 张卡上，序列长 {} 个 token，微批次 {}，bf16："
          "每个 rank 在一层的前向里发送多少 MB？",
        y="环形注意力让每个 rank 的 K/V 块沿环传一圈：每层 cp - {} 次发送，块够大时每次都藏在一个块的注意力计算后面"
          "（Liu 等，{}）。",
        k="parlab ring_attention_bytes：(cp - {}) 次发送一个 K/V 块，{} b (s/cp) h × {} B = {} × {} MB = {} MB"
          "（反向发送 {} MB：K/V 块再走一圈，dK、dV 送回各自的主人）。"),
    "gen-ulysses": dict(
        p="{model}（hidden {}，{} 个头）用 DeepSpeed-Ulysses 切到 cp = {} 张卡上，一条 {} 个 token 的序列，bf16："
          "每个 rank 在一层前向的 all-to-all（Q、K、V 进，输出回）里发送多少 MB？",
        y="Ulysses 每层用四次 all-to-all 把按序列切分换成按头切分，再换回来（Jacobs 等，{}）。",
        k="parlab ulysses_bytes：b (s/cp) (Q、K、V、O 各 h) × {1} B 的 (cp - {0})/cp = {2} MB；它按 {3}/cp 变小，"
          "环形注意力则趋近 {4} b s h × {5} B，但 cp 最多只能等于头数 {6}。"),
    "gen-ep-all-to-all": dict(
        p="一个无丢弃（dropless）的 MoE 层有 {} 个专家，top-k 路由、k = {}，hidden {}，切到 ep = {} 张卡上，每个 rank 有 {} 个 token。"
          "均匀路由、bf16 时，一个 rank 在这一层的 all-to-all（分发和合并，前向和反向）里发送多少 MB？",
        y="专家并行搬的是 token 而不是权重：每个 MoE 层都有分发和合并两次 all-to-all（GShard，Lepikhin 等，{}）。",
        k="parlab all_to_all_bytes_per_layer：{} 次 all-to-all × (ep - {})/ep × T k h × {} B = {} MB：每个 token 去 {} 个"
          "专家再回来，前向反向各一遍。"),
    "gen-capacity": dict(
        p="一个 MoE 层有 {} 个专家，top-k 路由、k = {}，容量因子 {}，收到 {} 个 token：每个专家在丢 token 之前有多少个 token 槽位？",
        y="每个专家的容量固定，all-to-all 的缓冲区就是静态的（Fedus 等，{}）。",
        k="parlab expert_capacity（Switch Transformer，式 {}）：ceil(c T k / E) = ceil({} × {} × {} / {}) = {}；"
          "超出容量的 token 被丢弃（走残差绕过专家），没用满的槽位是填充。"),
    "gen-dualpipe": dict(
        p="DualPipe 跑在 p = {} 个 rank 上，m = {} 个微批次（两端各送 m/{} 个），前向、输入梯度和权重梯度块耗时都相同："
          "卡时里空闲的比例是多少？",
        y="DualPipe 从流水线两端同时送入微批次，让一个前向块和一个反向块重叠执行（DeepSeek-V3，第 3.2.1 节）。",
        k="parlab schedules.simulate(dualpipe(p, m))：{}/{}；同样的 p 和 m 下 1F1B 空闲 {}/{}（即 (p - {})/(m + p - {})），"
          "DualPipe 要存 p + {} = {} 个微批次的激活和两份本段权重。"),
}

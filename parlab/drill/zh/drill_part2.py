"""中文 drill text, guide parts 2-4 and the generated cards (``parlab.drill.practice``,
``strategy``, ``problems``, ``generated``), keyed by card. Fields and slots as in ``drill_part1``;
a named slot (``{model}``) is the card's drawn parameter (``Card.params``) of that name, or one of
``EXTRA``'s words for it.
"""

from __future__ import annotations

from parlab.costmodel import alphabeta

BOUND_ZH = {"latency": "延迟受限", "bandwidth": "带宽受限"}
RECOMPUTE_ZH = {"none": "不重计算", "selective": "选择性重计算", "full": "全量重计算"}
#: what a dtype or an optimizer of the memory cards means, in words (no numbers)
DTYPE_ZH = {"fp32": "全程 fp32", "mixed": "混合精度、半精度梯度、fp32 主权重",
            "mixed-fp32-grad": "混合精度、fp32 梯度、fp32 主权重", "bf16": "纯 bf16、没有 fp32 主权重",
            "fp16": "只有 fp16 权重"}
OPTIMIZER_ZH = {"adam": "Adam，有一阶和二阶动量", "momentum": "带动量的 SGD，一份状态",
                "sgd": "不带动量的 SGD，没有优化器状态", "none": "没有优化器"}

#: card key -> words computed from the card's parameters (not numbers: names, yes/no phrases)
EXTRA = {
    "gen-activations": lambda p: {"sp": "、开启序列并行" if p["sequence_parallel"] else "",
                                  "recompute_zh": RECOMPUTE_ZH[p["recompute"]]},
    "gen-tp-layer": lambda p: {"recompute_zh": RECOMPUTE_ZH[p["recompute"]]},
    "gen-zero3-traffic": lambda p: {"recompute_zh": RECOMPUTE_ZH[p["recompute"]]},
    "fits-one-gpu": lambda p: {"recompute_zh": RECOMPUTE_ZH[p["recompute"]],
                               "grads_zh": "fp32 梯度" if p["grads"] == "fp32" else "半精度梯度"},
    "gen-bytes-per-param": lambda p: {"dtype_zh": DTYPE_ZH[p["dtype"]], "optimizer_zh": OPTIMIZER_ZH[p["optimizer"]]},
    "gen-ring-time": lambda p: {"bound_zh": BOUND_ZH[alphabeta.time("all_reduce", "ring", p["ranks"], p["nbytes"],
                                                                    p["alpha"], p["bandwidth"]).bound]},
    "gen-bubble": lambda p: {"schedule_name": "1F1B" if p["schedule"] == "1f1b" else "GPipe"},
}

ZH: dict[str, dict] = {
    # -- 2.1 -------------------------------------------------------------------------------------
    "dgx-tp-first": dict(
        p="在很多台 {} 卡的 DGX A100 上，哪种并行放在机内？",
        c="张量并行（{} 路），因为它需要 NVLink 的带宽",
        w=("流水线并行，因为各段必须共享显存", "数据并行，因为梯度最大", "ZeRO-3，因为它不需要快链路"),
        y="张量并行每层的全规约需要单向约 {} GB/s；流水线的点对点发送和数据并行每步一次的全规约可以走 InfiniBand。"),
    "mtnlg-replica": dict(
        p="MT-NLG {} 在每台 DGX A100 机内用 {} 路张量并行，共 {} 个流水线段。一个模型副本占多少张卡？",
        y="每个副本的卡数 = tp × pp。",
        k="parlab Plan(tp={}, pp={}).n_gpus = {} 张卡 = {} 台 {} 卡机器。"),
    "dgx-pp-second": dict(
        p="张量并行放在机内之后，MT-NLG 的流水线怎么摆？",
        c="每台机器放一段连续的层；{} 台机器排成一列组成一个副本",
        w=("每台机器的每张卡放不同的段", "所有段都在一台机器里，张量并行跨机", "段随机分配以平衡网络"),
        y="每台机器一段：段与段之间的激活走机器之间的 InfiniBand。"),
    # -- 2.2 -------------------------------------------------------------------------------------
    "mtnlg-stack": dict(
        p="MT-NLG {} 是用什么软件训练的？",
        c="英伟达 Megatron-LM 做张量并行，加微软 DeepSpeed 做流水线和数据并行",
        w=("Colossal-AI 的 3D 张量并行", "在 TPU 上用 JAX 的 pjit", "只用 PyTorch FSDP"),
        y="Megatron-DeepSpeed 把两者结合：Megatron 的张量并行算子、DeepSpeed 的流水线引擎和 ZeRO-1 数据并行（Smith 等，{}）。"),
    "bloom-tp": dict(
        p="BLOOM 用 DeepSpeed 做流水线和数据并行。它的张量并行是哪个库提供的？",
        y="BigScience 的 Megatron-DeepSpeed 分支：Megatron-LM 的张量并行，DeepSpeed 的流水线和 ZeRO-1。"),
    # -- 2.3 -------------------------------------------------------------------------------------
    "bloom-order": dict(
        p="在 {} 卡 NVLink 机器上训练真正的大模型，各并行度按什么顺序定？",
        c="先 TP = {} 用满 NVLink，再加 PP 直到模型放进 {} GB，剩下的给 DP 提吞吐",
        w=("先 DP，再 TP，最后 PP", "机内 PP = {}，然后 TP 跨机", "数据并行能开多大开多大；TP 和 PP 只用于推理"),
        y="数据并行、张量并行、流水线并行都能减显存；关键是用最便宜的通信压到卡的 {} GB 以下，剩下的交给数据并行扩展。"),
    "bloom-160-memory": dict(
        p="BLOOM 在 {} 张 A100 上的准备实验（{}、dp={}、tp={}、pp={}、ZeRO-1、bf16、全量重计算）：它的峰值每张卡用了多少 GB？",
        y="这是公开的实测值，旁边是成本模型逐项的预测。",
        k="BigScience 实测 {} GB。parlab 成本模型预测 {} GB（{}，在它对 BLOOM 显存验证过的 ±{} 误差带内；{} 年初"
          " DeepSpeed 的 bf16 优化器比模型多占约 {} GB）。从 {} 卡的实验起把数据并行翻倍，ZeRO-1 的优化器分片减半。"),
    "llama7b-choice": dict(
        p="指南建议怎样训练 {} 这样的模型（比如 LLaMA-7B）？",
        c="直接用 DeepSpeed ZeRO 数据并行，不需要 3D 并行",
        w=("像 BLOOM 一样 TP = {}、PP = {}", "在 {} 张卡上做流水线并行", "不用 3D 并行就训不了"),
        y="ZeRO 把 {} GB 的模型状态切分之后，{} 模型不用模型并行就能在一台机器上训（Open-LLaMA 的做法）。"),
    # -- 3.1 -------------------------------------------------------------------------------------
    "framework-criteria": dict(
        p="指南列出的选择分布式训练框架的标准是哪一组？",
        c="训练成本、支持哪些并行方式、接入要改多少代码、可移植性",
        w=("GitHub 星数、许可证和 logo", "只看单卡峰值 TFLOP/s", "是不是用 C++ 写的"),
        y="规模大了成本最重要；然后是对 DP/TP/PP/混合/自动并行的支持、分布式化一个模型要写多少代码、能否跨平台运行。"),
    "framework-cost": dict(
        p="两个框架训同一个模型，一个 MFU 达到 {}，另一个 {}。对成本意味着什么？",
        c="第二个同样的训练要多用 {} 倍的卡时",
        w=("没影响：MFU 不影响成本", "第二个贵 {}", "第一个需要 {} 倍的卡"),
        y="时间 = 浮点运算量 / (卡数 × 峰值 × MFU)：浮点运算量固定时卡时按 {}/MFU 变化，这里 {}/{} = {}。"),
    # -- 3.2 -------------------------------------------------------------------------------------
    "tpu-compiler": dict(
        p="在 TPU 技术栈上，JAX/TensorFlow 和芯片之间是哪个编译器？",
        y="TPU + XLA + TensorFlow/JAX，绑定谷歌云；GPU 技术栈是 PyTorch + NCCL，上面是 Megatron-LM 和 DeepSpeed。"),
    "gpu-stack": dict(
        p="指南说用得最广的 GPU 技术栈是哪个？",
        c="GPU + PyTorch + Megatron-LM + DeepSpeed",
        w=("GPU + TensorFlow + 只用 Horovod", "TPU + PyTorch/XLA + DeepSpeed", "GPU + JAX + Alpa"),
        y="有英伟达、Meta 和微软背书，社区最大。"),
    # -- 3.3 -------------------------------------------------------------------------------------
    "one-gpu-rule": dict(
        p="单卡训练，模型放不下。指南的答案是什么？",
        c="卸载到 CPU（ZeRO-Offload）：优化器状态和更新放在主机内存",
        w=("在这一张卡上做张量并行", "用 fp32 避免溢出", "加大批大小"),
        y="全参数训练时只有一张卡就没有东西可以切分，主机内存是富余空间；卸载之前，第 {} 章先算了更便宜的招（重计算、8-bit Adam、微调用 LoRA/QLoRA）。"),
    "fits-one-gpu": dict(
        p="{model}（{} 参数；{dtype} 混合精度、{grads_zh}、fp32 主权重和 Adam、微批次 {}、{recompute_zh}）全参数训练能放进一张 {gpu}（{} GB）吗？",
        y="单卡逐项表（第 {} 章）的每一项和卡的容量比：模型状态、激活、fp32 梯度、优化器更新、运行时缓冲和碎片。",
        k="parlab one_gpu_fit（第 {} 章的单卡逐项表）：模型状态 {} GB + 激活 {} GB + 梯度超出 {} 位的部分 {} GB + 优化器更新时的 fp32 梯度副本 {} GB + 运行时缓冲 {} GB + 碎片 {} GB = {} GB，卡的容量 {} GB。放不下时：先用重计算、8-bit Adam 或 LoRA（第 {} 章），再用 CPU 卸载（ZeRO-Offload），或者切到多张卡上。"),
    # -- 3.4 -------------------------------------------------------------------------------------
    "one-node-fits": dict(
        p="一台机器多张卡，模型放得进一张卡。指南先用哪个？",
        y="DDP，或者用 ZeRO 省出显存来跑更大的批。"),
    "one-node-no-nvlink": dict(
        p="一台机器，模型放不进一张卡，卡之间只有 PCIe（没有 NVLink）。指南推荐哪个？",
        y="没有 NVLink 时张量并行每层的全规约很慢；流水线只传边界激活。第 {} 章把策略顾问的数字和这条规则放在一起。"),
    "one-node-nvlink": dict(
        p="一台有 NVLink 的机器，模型放不进一张卡。指南给的选项是哪些？",
        c="TP、ZeRO 或 PP", w=("只能 DDP", "只能 CPU 卸载", "只能加机器"),
        y="有 NVLink 时三种都行；在机内 {} 张卡上做张量并行最自然。"),
    # -- 3.5 -------------------------------------------------------------------------------------
    "multi-node-fast": dict(
        p="多台机器、网络很快。指南建议什么，取舍是什么？",
        c="ZeRO 或 3D 并行；3D 搬的数据少，但要改更多模型代码",
        w=("只用流水线并行，因为网络是共享的", "张量并行跨所有机器", "ZeRO-3 永远不能跨机"),
        y="ZeRO 不用改模型，但每步都要收集权重；3D 把张量并行留在机内，段之间只传激活。"),
    "multi-node-slow": dict(
        p="多台机器、网络慢、显存小。指南把哪些组合起来？",
        c="DP + PP + TP + ZeRO-1", w=("只用 ZeRO-3", "纯数据并行加大桶", "张量并行跨机"),
        y="ZeRO-1 切分优化器状态，流量不比数据并行的全规约多；流水线让跨机流量只有边界激活。"),
    "poorest-cluster": dict(
        p="没有 NVLink，机器之间 {} GbE：指南最后的总结主要靠什么？",
        c="主要是流水线并行，加 ZeRO-1",
        w=("张量并行加 ZeRO-3", "纯数据并行", "在 {} GbE 上跑 ZeRO-3 加卸载"),
        y="没有 NVLink 就没法做张量并行，单靠数据并行显存不够；流水线和 ZeRO-1 对硬件要求最低。第 {} 章的策略顾问用成本模型检验了这一点。"),
    # -- 4.1 -------------------------------------------------------------------------------------
    "hbm-a800-v100": dict(
        p="解码一个 token 要把每个权重读一遍。A800 的 HBM 带宽是 V100 的多少倍？",
        y="批大小为 {} 的自回归解码受显存带宽限制。",
        k="parlab GPU 预设：{} / {} GB/s = {}，可按指南自己的表，V100 每个字只慢 {}（两条拟合直线的斜率之比，见第 {} 章；"
          "指南取整成 {}）：每个 token 的固定开销（kernel 启动、Python、采样）不随带宽变快。"),
    "decode-bound": dict(
        p="批大小为 {} 时，是什么限制了一个 {} 模型生成每个 token 的速度？",
        c="显存带宽：每个 token 都要从 HBM 读一遍全部权重（和 KV 缓存）",
        w=("张量核的峰值 FLOP/s", "到 CPU 的 PCIe 带宽", "分词器"),
        y="每个 token 约 2N 次浮点运算对 2N 字节读取：算术强度约 {} FLOP/字节，远低于 GPU 进入计算受限所需的水平。"),
    "decode-length": dict(
        p="指南的表里，ChatGLM 的推理时间随回答长度怎样增长？",
        c="大致线性：每生成一个 token 花的时间差不多",
        w=("平方增长，因为这个长度下注意力占主导", "基本不变：提示词的预填充占主导", "对数增长，多亏了 KV 缓存"),
        y="有 KV 缓存时每一步读一遍权重加缓存，几百个 token 时缓存比权重小得多；A800 上约每 {} 个字 {} 秒（指南的说法）。"),
    # -- 4.2 -------------------------------------------------------------------------------------
    "stage2-vs-3": dict(
        p="指南比较了 DeepSpeed ZeRO 第 {} 阶段和第 {} 阶段，显存够时保留第 {} 阶段。为什么？",
        c="第 {} 阶段每次前向反向还要收集权重，通信更多、跑得更慢",
        w=("第 {} 阶段切得比第 {} 阶段多", "第 {} 阶段不能用混合精度", "第 {} 阶段完全不需要通信"),
        y="第 {} 阶段：规约散射梯度、全收集更新后的权重（约等于数据并行的流量）。第 {} 阶段再加上逐层收集权重：流量是 {}。"),
    "stage3-saving": dict(
        p="{} 参数、混合精度 Adam、{} 张卡：ZeRO 第 {} 阶段比第 {} 阶段每张卡省多少 GB 模型状态？",
        y="第 {} 阶段换来的显存就是切分后的 16-bit 权重。",
        k="parlab zero_model_states：第 {} 阶段 {} GB，第 {} 阶段 {} GB：第 {} 阶段还切分了 16-bit 权重，省下 {} Psi ({} - {}/dp) = {} GB，代价是多 {} 的流量。"),
    "ds-stage-key": dict(
        p="DeepSpeed 的 JSON 配置里，哪个键设置 ZeRO 阶段？",
        y='例如 {{"zero_optimization": {{"stage": {}, "overlap_comm": true}}}}。'),
    # -- 4.3 -------------------------------------------------------------------------------------
    "hostfile-ip": dict(
        p="多机 DeepSpeed 启动报“host not found”（找不到主机）。指南里是怎么解决的？",
        c="在 hostfile 里写 IP 地址，而不是主机名",
        w=("设置 NCCL_DEBUG=INFO", "用 ZeRO 第 {} 阶段", "只在一台机器上跑"),
        y="启动器按 hostfile 里的名字 ssh 到每个 worker；名字如果不是在每个节点上都能解析（没有 DNS 或 /etc/hosts 条目）就会失败，IP 不会。"),
    "hostfile-format": dict(
        p="DeepSpeed 的 hostfile 一行长什么样？",
        c=None, w=(None, None, None),
        y="每个节点一行：一个地址，加上这个节点用几张卡（slots）。"),
    # -- 4.4 -------------------------------------------------------------------------------------
    "multinode-slow": dict(
        p="多台机器训练比一台还慢。监控显示网络链路跑满了。是怎么回事？",
        c="每步的梯度流量超过了 {} Gb/s 在计算时间内能传的量，GPU 在等网络",
        w=("其他机器的 GPU 更慢", "多台机器时数据加载跟不上", "用多台机器时 NCCL 退回到 CPU"),
        y="机内 GPU 走 NVLink/PCIe；跨机时每步的全规约都要过网络。把网络升到 {} Gb/s 就解决了。"),
    "800-vs-64": dict(
        p="指南的集群把机器之间的网络从 {} Gb/s 升到 {} Gb/s。带宽是原来的多少倍？",
        y="网络速度按 Gb/s 计，单向。",
        k="{}：带宽受限时，梯度全规约的时间差不多按同样的倍数下降。"),
    "linear-scaling": dict(
        p="带宽够时，指南看到 {} 台机器跑一个 epoch 的时间是一台的四分之一。这种线性加速什么时候成立？",
        c="梯度全规约藏在计算后面，所以每台机器的步时不变",
        w=("永远成立：数据并行按定义就线性扩展", "只在用 ZeRO-3 时", "只有每张卡的批缩小到 {} 分之一时"),
        y="只有通信没有暴露，每台机器用同样的步时处理 epoch 的 {}/{}；第 {} 章算出从哪个带宽开始成立。"),
    # -- 4.5 -------------------------------------------------------------------------------------
    "nccl-ifname": dict(
        p="哪个 NCCL 变量给它的 socket 传输选择网络接口（比如 eth0）？",
        y="机器上有 docker0、lo 和好几块网卡时，要把它设成各节点共用的那个接口。"),
    "nccl-ib": dict(
        p="哪个 NCCL 变量设为 {} 时，NCCL 不用 InfiniBand/RoCE，退回 TCP socket？",
        y="有 IB 设备但节点之间没接通时有用。"),
    "nccl-p2p": dict(
        p="哪个 NCCL 变量关掉机内 GPU 之间的直接传输（NVLink/PCIe 点对点），改走主机内存？",
        y="点对点坏掉时的权宜之计（某些虚拟机、PCIe 交换机上开了 ACS），代价是机内带宽。"),
    "nccl-debug": dict(
        p="哪个 NCCL 变量让它打印自己选了哪种传输和哪个接口？",
        y="NCCL_DEBUG=INFO 会打印 ring 和 tree、用的传输（NET/IB、NET/Socket、P2P、SHM）和接口。"),
    "deepspeed-env": dict(
        p="指南为什么把 NCCL 变量写进 .deepspeed_env 文件？",
        c="DeepSpeed 启动器通过 ssh 拉起每个节点时会导出这个文件里的变量",
        w=("NCCL 自己会读 .deepspeed_env", "它是 DeepSpeed JSON 配置的一个字段", "在 shell 里设的变量总会被远端节点继承"),
        y="在启动的 shell 里 export 只影响本机；~/.deepspeed_env（或工作目录里的那个）会转发给每个远端 worker。"),
    # -- generated -------------------------------------------------------------------------------
    "gen-states": dict(
        p="一个 {} 参数的模型用混合精度加 Adam 训练（fp16 权重和梯度，fp32 主权重和动量），模型状态要多少 GB？",
        y="混合精度 Adam 的模型状态每参数 {} 字节（ZeRO 论文第 {} 节）。",
        k="parlab model_state_memory：({} + {} + {} + {}) = 每参数 {} 字节 × {} = {} GB。"),
    "gen-6nd": dict(
        p="按 C = 6ND，{} 参数的模型在 {} 个 token 上训练要多少次浮点运算？",
        y="前向 2ND + 反向 4ND（Kaplan 等，{}）。",
        k="parlab train_flops_6nd：{} × {} × {} = {} 次浮点运算。"),
    "gen-bytes-per-param": dict(
        p="dtype 为 '{dtype}'（{dtype_zh}）、优化器为 '{optimizer}'（{optimizer_zh}）时，每个参数的模型状态是多少字节？",
        y="权重 + 梯度 + 主权重副本 + 优化器状态，按每个参数算。",
        k="parlab model_state_memory：权重 {} + 梯度 {} + 主权重 {} + 优化器状态 {} = 每参数 {} 字节。"),
    "gen-days": dict(
        p="{model} 在 {} 个 token 上训练，用 {} 张 {gpu}、bf16 峰值的 {}，假设完美扩展：要多少天？",
        y="数据并行最多把算力墙除以 N。",
        k="parlab compute_wall：{} 次浮点运算 / ({} × {} TFLOP/s × {}) = {} 天。"),
    "gen-ring-time": dict(
        p="{} 字节在 {} 个 rank 间做环形全规约，每条消息 alpha = {} µs，每条链路 {} GB/s：按 alpha-beta 模型（不算规约计算）要多少毫秒？",
        y="Hockney 的 alpha-beta 模型，加上环形算法的步数和字节数（Thakur 等，{}）。",
        k="parlab alphabeta：{}(p-1) alpha + {}(p-1)/p n/B：all_reduce（ring，{} 个 rank，{} 字节）：\n"
          "  {} 步 × alpha = {} µs 延迟\n+ {} 字节 × beta = {} µs 传输\n+ {} 字节 × gamma = {} µs 规约计算\n"
          "= {} µs（{bound_zh}）"),
    "gen-busbw": dict(
        p="nccl-tests 测得 {} 张卡上 {1} 字节的全规约用了 {2} 毫秒。它报的总线带宽是多少 GB/s？".replace("{} 张卡上 {1}", "{1} 张卡上 {0}"),
        y="总线带宽让全规约的速度能和链路速度直接比较（nccl-tests）。",
        k="parlab bus_bandwidth：S / t × {}(n-1)/n = {} GB/s。"),
    "gen-bound": dict(
        p="{} 字节在 {} 个 rank 间做环形全规约，alpha = {} µs，{} GB/s：它是延迟受限还是带宽受限（哪一项更大）？",
        y="alpha × 步数，对比字节数 / 带宽。",
        k="延迟 {} µs，对比传输 {} µs。小消息是延迟受限的：这就是梯度要分桶的原因。"),
    "gen-bubble": dict(
        p="{schedule_name}，p = {} 段、m = {} 个微批次，各段耗时相同（反向 = {} × 前向）：气泡占各段时间的比例是多少？（填分数，如 {}/{}，或小数 {}。）",
        y="填充和排空让 m+p-1 个时间片里空闲 p-1 个（Huang 等，{}；Narayanan 等，{}）。",
        k="parlab schedules.simulate：(p-1)/(m+p-1) = {}/{}。"),
    "gen-in-flight": dict(
        p="1F1B，p = {} 段、m = {} 个微批次：第 {} 段（{} = 第一段）同时最多存多少个微批次的激活？",
        y="1F1B 用流水线深度限制在途激活的个数。",
        k="parlab peak_activations：min(p - stage, m) = {}（GPipe 要存全部 {} 个）。"),
    "gen-tp-message": dict(
        p="{model}（s={}、h={}），微批次 {}，bf16，tp={}：每次张量并行对注意力或 MLP 块输出做的全规约传多少 MB？",
        y="Megatron 的 g（以及反向的 f）对块的 (s, b, h) 输出做全规约。",
        k="parlab step_time：(s, b, h) 激活，每个元素 {} 字节 = {} MB，和张量并行度无关。"),
    "gen-tp-layer": dict(
        p="{model}，微批次 {}，bf16，tp={}，{recompute_zh}：一个张量并行 rank 每层每个微批次发多少 MB（前向 + 反向，环形全规约）？",
        y="张量并行的流量随激活增长，而且每一层都有。",
        k="parlab：每层 {} 次全规约（前向 {}、反向 {}，重计算时再加 {}）× {}(t-1)/t × {} MB = {} MB。"),
    "gen-rank": dict(
        p="3D 网格 tp={}、dp={}、pp={}，按 Megatron 的顺序（tp 变化最快，然后 dp，然后 pp）：tp_rank {}、dp_rank {}、pp_rank {} 的全局 rank 是多少？",
        y="成本模型和运行时用的是同一个 rank 网格（parlab.costmodel.specs.cluster）。",
        k="parlab rank_of：pp_rank × tp × dp + dp_rank × tp + tp_rank = {}。"),
    "gen-naive-bubble": dict(
        p="层切到 {} 张卡上、只有一个批在途（accelerate 的 device_map）：卡时里空闲的比例是多少？",
        y="朴素的按层切分，p 张卡里只有一张在忙。",
        k="parlab schedules.simulate(naive(p))：(p-1)/p = {}/{}。"),
    "gen-gpus-to-hold": dict(
        p="{model} 用混合精度 Adam、微批次 {}、全量重计算：如果模型状态平均切到各卡（ZeRO-3 式），每张卡自己存激活，至少要多少张 {gpu}（{} GB）？",
        y="模型状态能切分；每张卡的激活不能。",
        k="parlab memory_wall：{} GB 模型状态，除以每张卡扣掉 {} GB 激活后剩下的空间 -> {} 张卡。"),
    "gen-largest": dict(
        p="一张 {gpu}（{} 字节）以 '{dtype}'（{dtype_zh}）做{what_zh}，只算模型状态，能放多少参数？",
        y="容量 / 每参数字节数。",
        k="parlab largest_model：{} / 每参数 {} 字节 = {}。显卡参数表上的“GB”常常是 GiB：标称“80GB”的 A100 有 {} 字节。"),
    "gen-zero-stage": dict(
        p="{} 参数、混合精度 Adam、ZeRO 第 {} 阶段、{} 张数据并行卡：每张卡存多少 GB 模型状态？",
        y="ZeRO 第 {} 阶段（Rajbhandari 等，{}，图 {}）。",
        k="parlab zero_model_states：权重 {} + 梯度 {} + 主权重 {} + Adam {} = {} GB（第 {} 阶段切优化器状态，第 {} 阶段切梯度，第 {} 阶段切权重）。"),
    "gen-zero3-traffic": dict(
        p="ZeRO-3，{} 个 bf16 参数，{} 张卡，一个微批次，{recompute_zh}：每张卡每步发多少 GB？",
        y="ZeRO-3 为前向和反向收集权重，为反向把梯度规约散射到各自的属主。",
        k="parlab zero3_traffic_per_step：（{} 次权重收集 + {} 次梯度规约散射）× {} 字节 × Psi × (n-1)/n = {} GB。"),
    "gen-zero3-seconds": dict(
        p="ZeRO-3，{} 个 bf16 参数，{} 张卡：按 {link} 的线速（{} GB/s），每步通信要多少秒（不重计算、一个微批次、完全不重叠）？",
        y="流量 / 线速，就是指南自己的估算，只不过按字节算。",
        k="parlab：{} GB / {} GB/s = {} 秒。"),
    "gen-gbit": dict(
        p="一条 {} Gb/s 的网络链路，单向是多少 GB/s？",
        y="网络按比特计；每字节 {} 比特。",
        k="parlab gbit_per_s：{} / {} = {} GB/s。"),
    "gen-interleaved": dict(
        p="交错式 1F1B（Megatron-LM，每段 v = {} 个模型块的 PipeDream-Flush），p = {}、m = {}，耗时相同：气泡占各段时间的比例是多少？",
        y="交错的虚拟段让气泡变小（Narayanan 等，{}，第 2.2.2 节）。",
        k="parlab schedules.simulate：(p-1)/(v m + p - {}) = {}/{}；v 个块把气泡时间缩小 v 倍，代价是发送次数变成 v 倍。"),
    "gen-activations": dict(
        p="{model}（s={}、h={}、a={}），微批次 {}，tp={}{sp}，{recompute_zh}：每层每张卡为反向保留多少 MB 激活？",
        y="选择性重计算去掉注意力分数那一项；全量重计算只留输入。",
        k="parlab activation_bytes_per_layer（Korthikanti 等，{}，表 {}）：{} MB。"),
    "gen-mtnlg-nodes": dict(
        p="MT-NLG 的切法（DGX A100 机内 tp = {}，pp = {}）加 {} 路数据并行：要多少台 {} 卡机器？",
        y="卡数 = dp × tp × pp；机器数 = 卡数 / {}。",
        k="parlab Plan(dp={}, tp={}, pp={}).n_gpus = {} 张卡 = {} 台机器。"),
    "gen-multinode": dict(
        p="{} 台机器做数据并行，机间 {} Gb/s（实际达到线速的 {}，延迟 {} µs）：对一个 {4} 模型的 16-bit 梯度做一次环形全规约要多少秒？",
        y="机器之间的梯度全规约，对应指南里的 {} 和 {} Gb/s。",
        k="parlab comm_time_vs_bandwidth：{}(n-1) alpha + {}(n-1)/n × {} GB / ({} Gb/s × {}) = {} 秒。"),
}

#: gen-largest: what the card asks for, by optimizer
WHAT_ZH = {"none": "推理（只有权重）"}
EXTRA["gen-largest"] = lambda p: {"what_zh": WHAT_ZH.get(p["optimizer"], f"训练（优化器：{OPTIMIZER_ZH[p['optimizer']]}）"),
                                   "dtype_zh": DTYPE_ZH[p["dtype"]]}

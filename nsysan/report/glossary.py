"""The metric definitions the report carries inline, in English and Chinese.

Every evidence row of a finding links to one of these (``#def-<page>``), so a reader
of an attached report can check what a number means without the docs folder. They
summarise docs/metrics/<page>.md, which remains the full definition.
"""

from __future__ import annotations

DEFINITIONS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "gaps": (
        ("Gaps, gap share, dominant gap, steady state", "间隙、间隙占比、主导间隙、稳态"),
        (
            "Busy = the union of a GPU's kernels (and CUDA graph executions) over all its streams (overlaps counted once). The window runs from the "
            "GPU's first to its last kernel unless --start/--end, --nvtx-range or --skip-warmup say otherwise. A gap is a "
            "maximal interval inside the window with no kernel running; gap share = gap time / window. The longest gap is "
            "dominant when it is 25% of the window or more, and it is the start-up when the GPU did at most 10% of its work "
            "before it; steady state then starts where it ends, and steady-state gap share is measured from there. Times "
            "are on the trace timeline, the values --start/--end take. Kernel and gap medians are over the GPU's kernels "
            "and its steady-state gaps.",
            "忙碌 = 某张卡所有流上内核（及 CUDA 图执行）区间的并集（重叠只计一次）。时间窗从该卡第一个内核到最后一个内核，除非用 --start/--end、"
            "--nvtx-range 或 --skip-warmup 另行指定。间隙是时间窗内没有任何内核运行的最长区间；间隙占比 = 间隙时间 / 时间窗。"
            "最长间隙占时间窗 25% 及以上即为主导间隙；若该卡在它之前完成的工作不超过 10%，它就是启动阶段，稳态从它结束处开始，"
            "稳态间隙占比从那里算起。时间为时间线上的位置，即 --start/--end 接受的数值。内核与间隙的中位数分别按该卡的内核和稳态间隙计算。",
        ),
    ),
    "dashboard": (
        (
            "Dashboard view: NVML-style utilization, GR Active, SM Active",
            "监控面板视图：NVML 口径利用率、GR Active、SM Active",
        ),
        (
            "NVML-style utilization is the share of each sample period with at least one kernel running (what nvidia-smi "
            "reports); its mean equals the timeline's busy share. GR Active (GPU metrics) is the share of time the graphics "
            "engine has any work resident, what DCGM-style dashboards show; it also counts copies and time between kernels "
            "of a busy queue, so it can exceed the kernel busy share. SM Active is the share of time the SMs have a warp "
            "resident, averaged over SMs: a GPU can be GR-active while its SMs idle.",
            "NVML 口径利用率是每个采样周期中至少有一个内核在运行的时间比例（即 nvidia-smi 的读数），其均值等于时间线的忙碌占比。"
            "GR Active（GPU 指标）是图形引擎上有任何工作驻留的时间比例，即 DCGM 类监控面板显示的数值；它也计入拷贝以及队列繁忙时内核之间的时间，"
            "因此可能高于内核忙碌占比。SM Active 是 SM 上有 warp 驻留的时间比例（对所有 SM 取平均）：GPU 可以处于 GR 活跃状态而 SM 空闲。",
        ),
    ),
    "stagger": (
        ("Stagger of gaps across GPUs", "各卡间隙的错开程度"),
        (
            "Compares how often GPUs are idle together with what independent gaps would give. Co-idle ratio = observed "
            "co-idle time / expected if independent; the stagger score runs from −1 (aligned: GPUs idle together, a shared "
            "cause) through 0 (independent) to +1 (staggered: when one GPU idles the others work, per-process stalls). "
            "All-idle share = time with every GPU idle at once / the common window (after a start-up gap, the common "
            "steady-state window).",
            "比较各卡同时空闲的频率与间隙相互独立时的期望。同时空闲比 = 实测同时空闲时间 / 独立时的期望；错开分数从 −1（对齐：各卡同时空闲，"
            "存在共同原因）经 0（互不相关）到 +1（错开：一张卡空闲时其他卡在工作，各进程各自的停顿）。全部空闲占比 = 所有卡同时空闲的时间 / "
            "共同时间窗（存在启动间隙时为共同稳态时间窗）。",
        ),
    ),
    "host": (
        ("Host-side cause of gap time", "间隙时间的主机侧原因"),
        (
            "Each nanosecond of a gap gets one cause. If the next kernel's launch call started after the gap began, the "
            "host was late, and the cause is what the feeding thread was doing: in a CUDA synchronizing call, a GIL-signature "
            "wait (repeated ~5 ms condition waits), a blocking OS call, another CUDA or OS call, off CPU, or inside a named "
            "NVTX range; 'unattributed' when the trace has none of that data. If the next kernel was launched before the gap "
            "began, the work was queued and the GPU waited (GPU-side wait). Time during which the GPU ran a memcpy or "
            "memset is 'GPU busy with a transfer', before any other cause. Measured host-side causes are all but "
            "'unattributed'. NVTX coverage (share of gap time inside a range) overlaps the causes and other ranges.",
            "间隙中的每一纳秒对应一个原因。若下一个内核的发射调用在间隙开始之后才开始，说明主机滞后，原因即发射线程当时在做什么：CUDA 同步调用、"
            "GIL 特征等待（反复约 5 ms 的条件等待）、阻塞型系统调用、其他 CUDA 或系统调用、被调度出 CPU、或位于命名的 NVTX 区间内；"
            "追踪中没有这些数据时记为“未归因”。若内核在间隙开始前已发射，说明工作已排队而 GPU 在等待（GPU 侧等待）。GPU 正在执行 memcpy 或 memset 的时间"
            "归为“GPU 正在传输”，优先于其他原因。“实测的主机侧原因”指除“未归因”"
            "之外的主机侧原因。NVTX 覆盖（位于某区间内的间隙时间占比）与各原因以及其他区间相互重叠。",
        ),
    ),
    "balance": (
        ("Load balance, skew, drift, bubbles", "负载均衡、偏差、漂移与气泡"),
        (
            "Compute = the union of a GPU's non-NCCL kernels. Load-balance efficiency = mean / max over GPUs (of busy or "
            "compute time); max / mean is the skew. The kernels behind the skew are the per-kernel time differences between "
            "the most and the least loaded GPU. Drift: busy share per time window per GPU, its spread between GPUs and its "
            "fitted trend. Bubbles: idle time at the start (fill) and end (drain) of each iteration (repeated NVTX range or "
            "kernel sequence).",
            "计算 = 某张卡非 NCCL 内核的并集。负载均衡效率 = 各卡（忙碌或计算时间）的均值 / 最大值；最大值 / 均值即偏差。造成偏差的内核是最忙与"
            "最闲两张卡之间逐内核的时间差。漂移：每张卡在每个时间窗的忙碌占比、卡间差异及其拟合趋势。气泡：每次迭代（重复的 NVTX 区间或内核序列）"
            "开始（填充）与结束（排空）时的空闲时间。",
        ),
    ),
    "nccl": (
        ("Communication: NCCL share, skew, wait, outliers", "通信：NCCL 占比、偏差、等待与异常值"),
        (
            "NCCL time = the union of a GPU's NCCL kernels; NCCL share = NCCL time / busy time. Instances of a collective "
            "are matched across GPUs by order; start skew = last start − first start, and the early GPUs' estimated wait is "
            "their time inside the kernel before the last GPU arrived. Outliers: a GPU's longest NCCL kernels against the "
            "median of the same collective on that GPU. Transfers are memory copies, not part of busy time.",
            "NCCL 时间 = 某张卡 NCCL 内核的并集；NCCL 占比 = NCCL 时间 / 忙碌时间。同一集合通信的各次实例按顺序跨卡匹配；启动偏差 = 最晚开始 − 最早开始，"
            "先到卡的估计等待是最后一张卡到达前它在内核中的时间。异常值：某卡最长的 NCCL 内核与该卡同一集合通信的中位数相比。传输指内存拷贝，不计入忙碌时间。",
        ),
    ),
    "bound": (
        ("Memory- vs compute-bound (Nsight Compute)", "带宽受限与计算受限（Nsight Compute）"),
        (
            "Each kernel profiled by Nsight Compute gets a class from its speed-of-light throughputs (memory vs compute, % "
            "of peak); weighted by its time in the trace, this gives per-GPU shares. Kernels without Nsight Compute data are "
            "counted as 'unjoined', never guessed.",
            "Nsight Compute 分析过的每个内核按其 SOL 吞吐（显存与计算，占峰值百分比）分类；按其在时间线中的时长加权得到每张卡的占比。"
            "没有 Nsight Compute 数据的内核计为“unjoined”，不做推测。",
        ),
    ),
    "transfers": (
        ("Memory transfers and memsets", "内存传输与 memset"),
        (
            "Per GPU and operation (host-to-device, device-to-host, peer, memset, ...): count, bytes and the sum of "
            "durations over the whole trace, as NVIDIA's cuda_gpu_mem_time_sum reports it. Transfer time in the window is "
            "the union of the GPU's memcpys and memsets inside its window; the part with no kernel running is the exposed "
            "share. Transfers are not busy time; gap time during which one runs is 'GPU busy with a transfer'.",
            "按卡与操作类型（主机到设备、设备到主机、卡间、memset 等）：整条时间线上的次数、字节数与时长之和，与 NVIDIA 的 "
            "cuda_gpu_mem_time_sum 口径一致。时间窗内的传输时间是该卡 memcpy 与 memset 在时间窗内的区间并集；其中没有内核运行的部分即暴露占比。"
            "传输不计入忙碌时间；其运行期间的间隙时间归为“GPU 正在传输”。",
        ),
    ),
    "contention": (
        (
            "Contention signals: clocks, SM activity, bandwidth",
            "资源争用信号：时钟、SM 活跃度与带宽",
        ),
        (
            "From GPU metrics, time-weighted per bin. A clock drop is a GPC clock more than the set share (15% by default) "
            "below the reference clock while the GPU is busy; its share is over busy time. Throughputs are % of peak.",
            "来自 GPU 指标，按时间段加权平均。降频指 GPU 忙碌时 GPC 时钟比参考时钟低出设定比例（默认 15%）以上；其占比按忙碌时间计算。吞吐以峰值百分比表示。",
        ),
    ),
}


def definition_anchor(source: str) -> str:
    """``docs/metrics/gaps.md#x`` → ``#def-gaps`` (the inline definition's anchor)."""
    page = source.rsplit("/", 1)[-1].split("#", 1)[0].removesuffix(".md")
    return f"#def-{page}" if page in DEFINITIONS else source


def definitions(lang: str) -> tuple[tuple[str, str, str], ...]:
    """(anchor id, title, text) for each metric page, in ``lang``."""
    i = 1 if lang == "zh" else 0
    return tuple((f"def-{key}", title[i], text[i]) for key, (title, text) in DEFINITIONS.items())


SHORT_TITLES = {
    "gaps": ("gaps", "间隙"),
    "dashboard": ("dashboard view", "面板视图"),
    "stagger": ("stagger", "错开"),
    "host": ("host causes", "主机侧原因"),
    "balance": ("load balance", "负载均衡"),
    "nccl": ("communication", "通信"),
    "bound": ("bound class", "受限类型"),
    "contention": ("contention", "资源争用"),
    "transfers": ("transfers", "传输"),
    "launch": ("launch overhead", "发射开销"),
    "cpu": ("host CPUs", "主机 CPU"),
    "memory": ("device memory", "显存"),
    "steps": ("steps", "步"),
    "load": ("load", "负载"),
}


def definition_title(anchor: str, lang: str) -> str:
    """The short name an evidence row's link shows for ``#def-<page>``."""
    entry = SHORT_TITLES.get(anchor.removeprefix("#def-"))
    return entry[1 if lang == "zh" else 0] if entry else anchor

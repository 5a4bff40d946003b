"""The diagnosis's wording in English and Chinese, keyed by rule id and part.

Every sentence a finding, the headline or the myth checklist says is an entry here,
``key: (English, Chinese)``, keyed ``<rule id>.<part>`` (``memory-bound.claim``) or
``myth.<myth id>.<part>``; wording several rules share has a key of its own
(``gpus.are``, ``window.steady``). Placeholders are ``str.format`` names, the same set
in both languages (``tests/test_wording.py`` checks it, and that every entry is used).

A rule fills the placeholders with the numbers it formats (:func:`say`). A phrase
present only when a value exists is an entry of its own, which the rule passes in as a
placeholder's value, or :func:`nothing` when it is absent. Where English agrees with a
number ("GPU 1 is", "GPU 1–3 are"), the entry has two forms, ``<key>.one`` and
``<key>.many``, and :func:`say_n` picks one; Chinese repeats the same text in both.
Evidence labels stay English here: ``nsysan.report.catalog`` translates them.
"""

from __future__ import annotations

from collections.abc import Iterable

from nsysan.diagnose.resource_wording import RESOURCE_WORDING

Text = dict[str, str]  # one text per language: {"en": ..., "zh": ...}
LANGS = ("en", "zh")

WORDING: dict[str, tuple[str, str]] = {
    # --- wording several rules share
    "sep.list": (", ", "，"),
    "sep.enum": (", ", "、"),
    "sep.clause": ("; ", "；"),
    # A group of GPUs as a sentence's subject: Chinese has no verb to agree.
    "gpus.are.one": ("{where} is", "{where}"),
    "gpus.are.many": ("{where} are", "{where}"),
    "pronoun.its.one": ("its", "其"),
    "pronoun.its.many": ("their", "其"),
    "window.steady.one": (" of its steady-state window", "稳态时间窗内"),
    "window.steady.many": (" of their steady-state window", "稳态时间窗内"),
    "window.whole.one": (" of its window", "时间窗内"),
    "window.whole.many": (" of their window", "时间窗内"),
    "against-others": (", against {shares} on {where}", "，而 {where} 仅 {shares}"),
    "sm-active": (
        " SM Active is {sm} while GR Active shows {gr}.",
        "SM Active 仅 {sm}，而 GR Active 显示 {gr}。",
    ),
    # --- the headline
    "headline.no-gpu": (
        "No GPU kernels in this trace: there is no GPU balance to diagnose (what the trace holds and lacks is listed below).",
        "该追踪中没有 GPU 内核：没有可诊断的 GPU 负载均衡（追踪包含和缺少的内容列在下方）。",
    ),
    "headline.more.one": (
        "{claim} ({more} more finding below)",
        "{claim}（下文还有 {more} 项发现）",
    ),
    "headline.more.many": (
        "{claim} ({more} more findings below)",
        "{claim}（下文还有 {more} 项发现）",
    ),
    "headline.none.one": (
        "No imbalance found: {n} GPU with kernels, gap share {gaps}; no rule's threshold was reached (the myth checklist says what this trace could not show).",
        "未发现负载不均：{n} 张运行内核的 GPU，间隙占比 {gaps}；没有规则达到阈值（误区检查列出了本追踪无法说明的内容）。",
    ),
    "headline.none.many": (
        "No imbalance found: {n} GPUs with kernels, gap share {gaps}; no rule's threshold was reached (the myth checklist says what this trace could not show).",
        "未发现负载不均：{n} 张运行内核的 GPU，间隙占比 {gaps}；没有规则达到阈值（误区检查列出了本追踪无法说明的内容）。",
    ),
    # --- dominant-gap
    "dominant-gap.title.startup": (
        "One gap dominates the capture: the start-up",
        "单个间隙主导了本次采集：启动阶段",
    ),
    "dominant-gap.title.stall": ("One gap dominates the capture", "单个间隙主导了本次采集"),
    "dominant-gap.idle.one": ("{where} sits", "{where}"),
    "dominant-gap.idle.many": ("{where} each sit", "{where}"),
    "dominant-gap.claim": (
        "One gap dominates: {idle} idle {length} in a single gap ({share} of the window), from {start} to {end} on the trace timeline — {what}.{steady}",
        "单个间隙占主导：{idle} 在一个间隙中空闲 {length}（占时间窗的 {share}），位于时间线上 {start} 至 {end}，{what}。{steady}",
    ),
    "dominant-gap.what.startup": ("the start-up before steady state", "即进入稳态之前的启动阶段"),
    "dominant-gap.what.stall": ("a stall in the middle of the run", "即运行中途的一次停顿"),
    "dominant-gap.steady": (
        " In steady state (from {start}) the gap share is {share}.",
        "稳态（自 {start} 起）的间隙占比为 {share}。",
    ),
    "dominant-gap.recommendation.startup": (
        "Judge the run by its steady state (this report shows both; `--start {skip}` pins it) and capture steady state only "
        "(`nsys profile --delay` or `--capture-range=cudaProfilerApi`); if the start-up is part of every job, find what the host "
        "does before the first kernels (initialisation, data loading, compilation) and cache or overlap it.",
        "以稳态评判这次运行（本报告两者都给出；可用 `--start {skip}` 固定），并只采集稳态"
        "（`nsys profile --delay` 或 `--capture-range=cudaProfilerApi`）；若每个作业都有这段启动，找出第一个内核之前主机在做什么"
        "（初始化、数据加载、编译），缓存它或使其与计算重叠。",
    ),
    "dominant-gap.recommendation.stall": (
        "Open the trace in Nsight Systems at the gap's start and see what the GPU waited for (the host-side cause "
        "section says what the feeding thread was doing).",
        "在 Nsight Systems 中打开该间隙开始处，查看 GPU 在等待什么（主机侧原因一节给出了发射线程当时在做什么）。",
    ),
    # --- small-kernels
    "small-kernels.title": (
        "Kernels too small: launch overhead sets the pace",
        "内核过小：发射开销决定了节奏",
    ),
    "small-kernels.run.one": ("{where} runs {kernels} kernels", "{where} 运行了 {kernels} 个内核"),
    "small-kernels.run.many": ("{where} run {kernels} kernels", "{where} 运行了 {kernels} 个内核"),
    "small-kernels.claim": (
        "{run} with a median of {median}, and {gaps} of the window is the gaps between them (median gap {median_gap}{queued}): "
        "per-kernel launch and scheduling overhead, not GPU work, sets the pace.{sm}",
        "{run}，中位时长仅 {median}，时间窗内 {gaps} 是内核之间的间隙（间隙中位数 {median_gap}{queued}）："
        "决定节奏的是每个内核的发射与调度开销，而不是 GPU 计算。{sm}",
    ),
    "small-kernels.queued": (
        "; {queued} of it with the next kernel already queued",
        "；其中 {queued} 的时间下一个内核已在排队",
    ),
    "small-kernels.recommendation": (
        "Fuse the small kernels, give each launch more work (larger batches or grids), or capture the sequence once in a CUDA graph.",
        "融合这些小内核，让每次发射承担更多工作（更大的批量或网格），或用 CUDA Graph 一次性捕获这段序列。",
    ),
    # --- gpu-side-gaps
    "gpu-side-gaps.title": ("GPUs idle with work already queued", "工作已排队，GPU 却在空闲"),
    "gpu-side-gaps.claim": (
        "{gpus} idle {gaps}{window}{others}, with the next kernel already queued for {queued} of that gap time; {why}.",
        "{gpus} 在{window}空闲 {gaps}{others}，其中 {queued} 的间隙时间下一个内核已在排队；{why}。",
    ),
    "gpu-side-gaps.why.copies": (
        "memory copies run during {copies} of that gap time: the kernels wait for their data transfers, which do not overlap compute",
        "其中 {copies} 的间隙时间有内存拷贝在进行：内核在等待数据传输，而传输没有与计算重叠",
    ),
    "gpu-side-gaps.why.dependencies": (
        "memory copies run during only {copies} of it: the GPU waited on device-side dependencies (events, other streams, copies of another GPU)",
        "其中只有 {copies} 的时间有内存拷贝：GPU 在等待设备侧的依赖（事件、其他流、其他卡的拷贝）",
    ),
    "gpu-side-gaps.recommendation.copies": (
        "Overlap transfers with compute: pinned host memory, cudaMemcpyAsync on a separate stream, double buffering; or keep the data on the GPU between kernels.",
        "让传输与计算重叠：使用锁页内存、在独立的流上用 cudaMemcpyAsync、双缓冲；或在内核之间把数据保留在 GPU 上。",
    ),
    "gpu-side-gaps.recommendation.dependencies": (
        "Open the trace at the longest gaps and follow the dependency the next kernel waits on (event waits, cross-stream or cross-GPU synchronization); reorder the streams so that independent work fills the wait.",
        "在最长的间隙处打开追踪，找出下一个内核等待的依赖（事件等待、跨流或跨卡同步）；重新安排各流，让独立的工作填补等待。",
    ),
    # --- sm-idle-while-busy
    "sm-idle-while-busy.title": (
        "The dashboard says busy, the SMs are nearly idle",
        "面板显示忙碌，SM 却几乎空闲",
    ),
    "sm-idle-while-busy.claim": (
        "{where}: GR Active (what a dashboard shows) is {gr} while SM Active is {sm} — the GPU counts as busy whenever any work is "
        "resident, but almost none of its SMs are working.",
        "{where}：GR Active（监控面板显示的数值）为 {gr}，而 SM Active 仅 {sm}——只要有任何工作驻留，GPU 就被计为忙碌，但几乎没有 SM 在工作。",
    ),
    "sm-idle-while-busy.recommendation": (
        "Give each kernel enough blocks to fill the SMs (larger batches, fused kernels), and watch SM Active, not utilization.",
        "让每个内核有足够的线程块填满 SM（更大的批量、融合内核），并关注 SM Active 而不是利用率。",
    ),
    # --- host-bound-gaps: each measured host cause's name and what to do about it
    "host-cause.share": ("{cause} {share}", "{cause} {share}"),
    "host-cause.cuda_sync": ("CUDA synchronizing calls", "CUDA 同步调用"),
    "host-cause.gil_wait": ("GIL-signature waits", "GIL 特征等待"),
    "host-cause.blocking_os": ("blocking OS calls", "阻塞型系统调用"),
    "host-cause.cuda_api": ("other CUDA API calls", "其他 CUDA API 调用"),
    "host-cause.os_call": ("other OS calls", "其他系统调用"),
    "host-cause.descheduled": ("off CPU", "线程被调度出 CPU"),
    "host-cause.nvtx": ("named NVTX ranges", "命名的 NVTX 区间"),
    "host-cause.launch_call": ("launch calls", "发射调用"),
    "host-cause.cuda_sync.advice": (
        "remove synchronizing calls (cudaStreamSynchronize, cudaDeviceSynchronize, blocking copies) from the loop, or wait on events only where the result is needed",
        "把同步调用（cudaStreamSynchronize、cudaDeviceSynchronize、阻塞式拷贝）移出循环，或只在确实需要结果的地方等待事件",
    ),
    "host-cause.gil_wait.advice": (
        "move tokenization and sampling off the Python GIL (a C++/Rust tokenizer, separate processes with enough CPU cores per GPU)",
        "把 tokenizer 与采样移出 Python GIL（改用 C++/Rust 实现，或用独立进程并为每张卡分配足够的 CPU 核）",
    ),
    "host-cause.blocking_os.advice": (
        "find the lock, queue or sleep the feeding thread blocks on (the OS-runtime rows in the gaps) and take it off the launch path",
        "找出发射线程阻塞的锁、队列或 sleep（间隙中的 OS 运行时调用），把它移出发射路径",
    ),
    "host-cause.cuda_api.advice": (
        "hoist the other CUDA API calls (allocation, memcpy setup, stream/event creation) out of the loop",
        "把其他 CUDA API 调用（显存分配、拷贝准备、流/事件创建）移出循环",
    ),
    "host-cause.os_call.advice": (
        "move I/O and other system calls of the feeding thread off the launch path",
        "把发射线程上的 I/O 等系统调用移出发射路径",
    ),
    "host-cause.descheduled.advice": (
        "give the feeding thread a CPU core of its own (pinning, fewer threads per core)",
        "为发射线程分配独占的 CPU 核（绑核，减少每核线程数）",
    ),
    "host-cause.nvtx.advice": (
        "speed up or overlap the host work in the NVTX ranges that cover the gaps (see the host-side cause section)",
        "加速覆盖间隙的 NVTX 区间中的主机工作，或使其与 GPU 计算重叠（见主机侧原因一节）",
    ),
    "host-cause.launch_call.advice": (
        "launches themselves are slow: batch them with CUDA graphs",
        "发射调用本身耗时：用 CUDA Graph 合并发射",
    ),
    "host-bound-gaps.title": ("GPU gaps caused on the host side", "GPU 间隙由主机侧造成"),
    "host-bound-gaps.claim": (
        "{gpus} idle {gaps}{window}{others}; {measured} of that gap time has a measured host-side cause "
        "({causes}): the next kernel was launched only after the GPU ran dry.",
        "{gpus} 在{window}空闲 {gaps}{others}；其中 {measured} 的间隙时间有实测的主机侧原因（{causes}）：GPU 空闲之后下一个内核才被发射。",
    ),
    "host-bound-gaps.recommendation": ("{advice}.", "{advice}。"),
    # --- host-late-unknown
    "host-late-unknown.title": (
        "The host launched late, and the trace cannot say why",
        "主机发射滞后，但追踪无法说明原因",
    ),
    "host-late-unknown.claim": (
        "{gpus} idle {gaps}{window}{others}: the next kernel was launched only after the GPU ran dry, "
        "but {unknown} of that gap time is unattributed{lacking} — the trace cannot say what the host was doing.",
        "{gpus} 在{window}空闲 {gaps}{others}：GPU 空闲之后下一个内核才被发射，但其中 {unknown} 的间隙时间无法归因{lacking}——"
        "追踪无法说明主机当时在做什么。",
    ),
    "host-late-unknown.lacking": (" ({missing})", "（{missing}）"),
    "host-late-unknown.no-osrt": ("no OS-runtime trace", "没有 OS 运行时追踪"),
    "host-late-unknown.no-scheduling": ("no CPU scheduling data", "没有 CPU 调度数据"),
    "host-late-unknown.no-nvtx": ("no NVTX ranges", "没有 NVTX 区间"),
    "host-late-unknown.no-cuda-api": ("no CUDA API trace", "没有 CUDA API 追踪"),
    "host-late-unknown.recommendation": (
        "Capture again with `{capture} …` and NVTX ranges around data loading, tokenization and sampling, so the host time can be attributed; "
        "no fix is recommended from this trace.",
        "用 `{capture} …` 重新采集，并在数据加载、tokenizer 与采样周围加上 NVTX 区间，以便归因主机时间；"
        "仅凭本追踪不建议具体修改。",
    ),
    # --- false-balance
    "false-balance.title": (
        "False balance: busy-looking GPUs with staggered gaps",
        "假均衡：利用率看似均衡，时间线上间隙错开",
    ),
    "false-balance.claim": (
        "False balance: all {n} GPUs look {dashboard} busy on the dashboard ({measure}), "
        "but {gaps} of each GPU's time is gaps, {verdict} across GPUs{host}.",
        "假均衡：监控面板上 {n} 张卡的利用率都显示为 {dashboard}（{measure}），"
        "但每张卡有 {gaps} 的时间是计算间隙，且各卡间隙{verdict}{host}。",
    ),
    "false-balance.gr-active": ("GR Active from GPU metrics", "GPU 指标中的 GR Active"),
    "false-balance.nvml": ("NVML-style utilization", "NVML 口径利用率"),
    "false-balance.staggered": ("staggered", "错开"),
    "false-balance.independent": ("independent", "互不相关"),
    "false-balance.host": (
        ", and {share} of gap time has a measured host-side cause{details} — throughput is limited by the CPU, not the GPUs",
        "，且 {share} 的间隙时间有实测的主机侧原因{details}——吞吐受限于 CPU，而不是 GPU",
    ),
    "false-balance.details": (" ({details})", "（{details}）"),
    "false-balance.gil": ("GIL-signature waits {share}", "GIL 特征等待 {share}"),
    "false-balance.nvtx": (
        "inside NVTX ranges, overlapping the waits: {ranges}",
        "位于 NVTX 区间内（与上述等待重叠）：{ranges}",
    ),
    "false-balance.recommendation.cpu": (
        "Move tokenization and sampling off the Python GIL (a C++/Rust tokenizer, separate "
        "processes with enough CPU cores per GPU), overlap host preparation of the next batch "
        "with GPU work, and verify with a new trace that gap share falls (the case study: 35% → 8%).",
        "把 tokenizer 与采样逻辑移出 Python GIL（改用 C++/Rust 实现，或用独立进程并为每张卡分配足够的 CPU 核），"
        "让下一批数据的主机侧准备与 GPU 计算重叠，并重新抓取时间线确认间隙占比下降（案例中 35% → 8%）。",
    ),
    "false-balance.recommendation.stalls": (
        "Look at what each process does between kernels (host-side cause section); the gaps are "
        "per-process stalls, not a shared barrier.",
        "查看每个进程在内核之间做了什么（主机侧原因一节）；这些间隙是各进程各自的停顿，而不是共同的屏障。",
    ),
    # --- aligned-gaps
    "aligned-gaps.title": ("All GPUs idle at the same time", "所有 GPU 同时空闲"),
    "aligned-gaps.claim": (
        "Gaps are aligned across the {n} GPUs: all of them are idle together {share} of the common {steady}window (stagger score {score}), "
        "which points to a shared cause such as a barrier, a collective or a shared data loader.",
        "{n} 张卡的间隙是对齐的：在共同{steady}时间窗内有 {share} 的时间所有卡同时空闲（错开分数 {score}），"
        "说明存在共同原因，如屏障、集合通信或共享的数据加载。",
    ),
    "aligned-gaps.steady": ("steady-state ", "稳态"),
    "aligned-gaps.recommendation": (
        "Find what every rank waits for at the same time (host-side cause section, NVTX ranges): data loading, checkpointing, a barrier; overlap it with compute.",
        "找出所有进程同时在等待什么（主机侧原因、NVTX 区间）：数据加载、检查点、屏障；使其与计算重叠。",
    ),
    # --- static-split-skew / moe-hot-expert
    "compute-skew.kernel": ("{name} ({share})", "{name}（{share}）"),
    "compute-skew.other-kernels": ("(other kernels)", "（其他内核）"),
    "moe-hot-expert.title": ("A hot MoE expert overloads one GPU", "MoE 热点专家使单卡过载"),
    "moe-hot-expert.claim": (
        "GPU {most} computes {skew} the mean; expert kernels explain most of its extra time over GPU {least}: {kernels}.",
        "GPU {most} 的计算时间是平均值的 {skew}；它比 GPU {least} 多出的时间主要来自专家内核：{kernels}。",
    ),
    "moe-hot-expert.recommendation": (
        "Re-balance experts periodically (expert replication or re-placement by measured heat), add capacity factors / token dropping, or use expert parallelism with load-aware routing.",
        "周期性地按实测热度重新分配专家（复制热点专家或重新放置），设置容量因子/丢弃超额词元，或使用负载感知的路由。",
    ),
    "static-split-skew.title": ("Uneven split of work across GPUs", "各卡之间工作切分不均"),
    "static-split-skew.claim": (
        "GPU {most} computes {skew} the mean (load-balance efficiency {efficiency}); the kernels behind its extra time over GPU {least}: {kernels}.",
        "GPU {most} 的计算时间是平均值的 {skew}（负载均衡效率 {efficiency}）；它比 GPU {least} 多出的时间来自：{kernels}。",
    ),
    "static-split-skew.recommendation": (
        "Make the split divisible (heads, layers or shards per GPU), or weight the assignment by measured cost; re-check with a new trace.",
        "让切分可整除（每卡的注意力头、层或分片数），或按实测开销加权分配；用新的时间线复核。",
    ),
    # --- pipeline-bubble
    "pipeline-bubble.title": ("Pipeline bubbles at fill and drain", "流水线填充/排空气泡"),
    "pipeline-bubble.claim": (
        "{bubble} of each iteration is bubble (idle at its start or end), growing from stage to stage: fill {fill}, drain {drain} across GPUs.",
        "每次迭代有 {bubble} 的时间是气泡（迭代开始或结束时空闲），且逐级递增：各卡填充 {fill}，排空 {drain}。",
    ),
    "pipeline-bubble.recommendation": (
        "Use more micro-batches per iteration, an interleaved (virtual-stage) schedule, or fewer pipeline stages.",
        "每次迭代使用更多微批次，采用交错（虚拟流水级）调度，或减少流水线级数。",
    ),
    # --- dp-long-tail
    "dp-long-tail.title": ("Load drifts between GPUs over time", "负载随时间在各卡之间漂移"),
    "dp-long-tail.claim": (
        "The load drifts between GPUs over the capture: one GPU's busy share moves {trend} relative to another's, and in the worst time window "
        "the GPUs' busy shares differ by {worst} (best window {best}) — some GPUs keep working while others run dry.",
        "负载在采集期间于各卡之间漂移：某张卡的忙碌占比相对另一张卡变化了 {trend}，最差时间窗内各卡忙碌占比相差 {worst}"
        "（最好时间窗 {best}）——部分卡持续工作而其他卡无事可做。",
    ),
    "dp-long-tail.recommendation": (
        "Schedule by estimated cost (sequence length, generation budget), not round-robin; add starvation detection and preemption or request migration.",
        "按预估开销（序列长度、生成长度）调度而不是轮询；加入饥饿检测与抢占或请求迁移。",
    ),
    # --- comm-bound
    "comm-bound.title": (
        "Communication takes a large share of GPU time",
        "通信占用了大量 GPU 时间",
    ),
    "comm-bound.claim": (
        "NCCL kernels take {nccl} of busy GPU time{collective}; {transfer} is communication itself, not waiting for late GPUs.",
        "NCCL 内核占 GPU 忙碌时间的 {nccl}{collective}；其中 {transfer} 是通信本身，而不是等待迟到的卡。",
    ),
    "comm-bound.collective": (" (mostly {collective})", "（主要是 {collective}）"),
    "comm-bound.recommendation": (
        "Keep tensor-parallel groups inside one NVLink/NVSwitch domain, overlap communication with compute, or lower the TP degree for long sequences.",
        "把张量并行组限制在同一个 NVLink/NVSwitch 域内，让通信与计算重叠，或在长序列时降低 TP 度。",
    ),
    # --- collective-skew
    "collective-skew.title": (
        "GPUs wait for each other inside collectives",
        "各卡在集合通信中互相等待",
    ),
    "collective-skew.claim": (
        "{wait} of NCCL time is early arrivers waiting for the last GPU (median start skew {skew}); the wait is a symptom of imbalance before the collective.",
        "NCCL 时间中有 {wait} 是先到的卡在等待最后一张卡（启动偏差中位数 {skew}）；这种等待是集合通信之前负载不均的表现。",
    ),
    "collective-skew.recommendation": (
        "Fix the imbalance before the collective (see the other findings); the late GPU is listed per instance in the JSON output.",
        "修正集合通信之前的负载不均（见其他发现）；JSON 输出中列出了每次通信最晚到达的卡。",
    ),
    # --- nccl-outlier
    "nccl-outlier.title": (
        "One collective takes far longer than the others",
        "某次集合通信远慢于其他",
    ),
    "nccl-outlier.claim": (
        "One {collective} on GPU {gpu} takes {duration} against a {median} median ({over} over {count} instances), "
        "starting at {start} on the trace timeline{more}: the GPUs waiting on it stall for that long.",
        "GPU {gpu} 上的一次 {collective} 耗时 {duration}，而中位数仅 {median}（{count} 次中的 {over}），"
        "开始于时间线上 {start}{more}：等待它的卡会停顿同样长的时间。",
    ),
    "nccl-outlier.more": (
        " ({more} more over {threshold}× in the communication section)",
        "（通信一节另有 {more} 个超过 {threshold}×）",
    ),
    "nccl-outlier.recommendation": (
        "Open the trace at that time: a late peer, a first-call setup (communicator init, buffer registration) or a contended link; "
        "warm the communicator up before timing, and check the peer GPU's timeline just before.",
        "在该时刻打开追踪：可能是对端迟到、首次调用的初始化（通信器创建、缓冲区注册）或链路争用；计时前先预热通信器，并查看对端卡在此之前的时间线。",
    ),
    # --- memory-bound
    "memory-bound.title": ("Most GPU time is memory-bound", "大部分 GPU 时间受显存带宽限制"),
    "memory-bound.claim": (
        "{share} of kernel time is in memory-bound kernels (Nsight Compute speed-of-light); high utilization here does not mean compute is used.",
        "{share} 的内核时间属于带宽受限内核（Nsight Compute SOL）；此时的高利用率并不代表算力被用满。",
    ),
    "memory-bound.recommendation": (
        "Fuse memory-bound kernels, use lower-precision KV cache / weights, and batch more requests to raise arithmetic intensity.",
        "融合带宽受限的内核，使用更低精度的 KV cache/权重，增大批量以提高计算强度。",
    ),
    # --- clock-throttling
    "clock-throttling.title": ("GPU clocks drop while busy", "GPU 在忙碌时降频"),
    "clock-throttling.claim": (
        "{gpus}: the GPC clock falls{drop} for up to {share} of busy time — power or thermal throttling slows these GPUs and everyone waiting for them.",
        "{gpus}：GPC 时钟{drop}，最多占忙碌时间的 {share}——功耗或温度降频拖慢了这些卡以及等待它们的卡。",
    ),
    "clock-throttling.reference": (" from {mhz} MHz", "从 {mhz} MHz"),
    "clock-throttling.drop": ("{reference} down to {mhz} MHz", "{reference}降至{mhz} MHz"),
    "clock-throttling.drop-unknown": ("{reference}", "{reference}降至更低"),
    "clock-throttling.recommendation": (
        "Check power limits, cooling and neighbouring load (`nvidia-smi -q -d PERFORMANCE` shows the throttle reasons).",
        "检查功耗上限、散热和相邻负载（`nvidia-smi -q -d PERFORMANCE` 可显示降频原因）。",
    ),
    # --- transfer-heavy
    "transfer-heavy.title": ("GPUs busy moving data", "GPU 忙于搬运数据"),
    "transfer-heavy.spend.one": (
        "{where} spends {shares} of its window",
        "{where} 的时间窗中有 {shares}",
    ),
    "transfer-heavy.spend.many": (
        "{where} spend {shares} of their window",
        "{where} 的时间窗中有 {shares}",
    ),
    "transfer-heavy.claim": (
        "{spend} in memory copies and memsets, {exposed} with no kernel running{outlast}.",
        "{spend} 在做内存拷贝与 memset，其中 {exposed} 没有内核在运行{outlast}。",
    ),
    "transfer-heavy.outlast": (
        "; their transfer time is {times} their kernel time",
        "；传输时间是内核时间的 {times}",
    ),
    "transfer-heavy.recommendation": (
        "See the transfer table (direction and bytes): keep data resident on the GPU "
        "between steps, batch small copies, use pinned host memory and cudaMemcpyAsync on a "
        "separate stream so copies overlap kernels; for peer copies, check the topology "
        "(PCIe vs NVLink) the GPUs share.",
        "查看传输表（方向与字节数）：让数据在各步之间常驻 GPU，合并小拷贝，使用锁页内存并在独立的流上"
        "用 cudaMemcpyAsync，让拷贝与内核重叠；对卡间拷贝，检查 GPU 之间的拓扑（PCIe 还是 NVLink）。",
    ),
    # --- the myth checklist
    "myth.no-kernels": (
        "No GPU kernels in the trace: nothing to judge.",
        "时间线中没有 GPU 内核：无从判断。",
    ),
    "myth.only-gpu-utilization.title": (
        "GPU utilization alone shows whether the GPUs are used well",
        "只看 GPU 利用率就能判断 GPU 是否被充分利用",
    ),
    "myth.only-gpu-utilization.hidden": (
        "Utilization hides what the timeline shows here: {findings}.",
        "此处利用率掩盖了时间线揭示的问题：{findings}。",
    ),
    "myth.only-gpu-utilization.no-metrics": (
        "Utilization agrees with the timeline here (gap share {gaps}), but without GPU metrics "
        "(SM Active, memory bandwidth, NVLink) the trace cannot show what it hides; capture with "
        "`nsys profile --gpu-metrics-devices=all`.",
        "此处利用率与时间线一致（间隙占比 {gaps}），但缺少 GPU 指标（SM Active、显存带宽、NVLink），"
        "追踪无法说明利用率掩盖了什么；请用 `nsys profile --gpu-metrics-devices=all` 采集。",
    ),
    "myth.only-gpu-utilization.holds": (
        "Utilization, SM activity and clocks agree here (gap share {gaps}); no hidden bottleneck was found.",
        "此处利用率、SM 活跃度与时钟一致（间隙占比 {gaps}），未发现隐藏瓶颈。",
    ),
    "myth.dp-balanced-by-nature.title": (
        "Data parallelism is balanced by nature",
        "数据并行天然均衡",
    ),
    "myth.dp-balanced-by-nature.one-gpu": (
        "Only one GPU ran kernels: there is no balance between GPUs to judge.",
        "只有一张卡运行了内核：没有卡间均衡可供判断。",
    ),
    "myth.dp-balanced-by-nature.uneven": (
        "Busy time is uneven: {idler} idles {idle} against {busy} on {busier} (busy-time efficiency {efficiency}){drift}.",
        "各卡忙碌时间不均：{idler} 空闲 {idle}，而 {busier} 仅 {busy}（忙碌时间效率 {efficiency}）{drift}。",
    ),
    "myth.dp-balanced-by-nature.drift": ("; the load drifts over time", "；负载随时间漂移"),
    "myth.dp-balanced-by-nature.moment": (
        "The totals are even (busy-time efficiency {efficiency}), but moment to moment they are not: "
        "one GPU works while another idles {spread} of the common time.",
        "总量均衡（忙碌时间效率 {efficiency}），但逐时刻并不均衡：在共同时间内有 {spread} "
        "的时间一张卡在工作而另一张卡空闲。",
    ),
    "myth.dp-balanced-by-nature.holds": (
        "Busy time is even across GPUs (efficiency {efficiency}) and stable over this capture.",
        "各卡忙碌时间均匀（效率 {efficiency}），且在本次采集中保持稳定。",
    ),
    "myth.topology-irrelevant.title": (
        "Communication topology does not matter",
        "可以忽略通信拓扑",
    ),
    "myth.topology-irrelevant.one-gpu": (
        "Only one GPU ran kernels: no communication between GPUs to judge.",
        "只有一张卡运行了内核：没有卡间通信可供判断。",
    ),
    "myth.topology-irrelevant.no-nccl": (
        "No NCCL kernels in this trace: communication was not exercised, so topology cannot be judged; "
        "a capture of a run that communicates (NCCL) would tell.",
        "该追踪中没有 NCCL 内核：没有发生通信，无法判断拓扑的影响；需要采集一次有通信（NCCL）的运行。",
    ),
    "myth.topology-irrelevant.findings": (
        "NCCL takes {share} of busy time and {findings}.",
        "NCCL 占忙碌时间的 {share}，且{findings}。",
    ),
    "myth.topology-irrelevant.negligible": (
        "Collectives take {share} of busy time in this run; longer sequences may change that.",
        "本次运行中集合通信仅占忙碌时间的 {share}；序列更长时可能改变。",
    ),
    "myth.topology-irrelevant.unclear": (
        "NCCL takes {share} of busy time: not dominant, but not negligible; interconnect "
        "metrics (NVLink/PCIe throughput in GPU metrics) would tell.",
        "NCCL 占忙碌时间的 {share}：不占主导，但也不可忽略；需要互联带宽指标（GPU 指标中的 NVLink/PCIe 吞吐）才能判断。",
    ),
    "myth.static-split-final.title": (
        "A static split never needs re-balancing",
        "静态切分后无需再调整",
    ),
    "myth.static-split-final.one-gpu": (
        "Only one GPU ran kernels: there is no split between GPUs to judge.",
        "只有一张卡运行了内核：没有卡间切分可供判断。",
    ),
    "myth.static-split-final.findings": (
        "The split is uneven or shifts over time here: {findings}.",
        "此处切分不均或随时间变化：{findings}。",
    ),
    "myth.static-split-final.holds": (
        "Compute is even across GPUs (max/mean {ratio}) and the load does not drift in this capture.",
        "各卡计算均匀（最大/平均 {ratio}），且本次采集中负载没有漂移。",
    ),
    **RESOURCE_WORDING,
}


def _in(lang: str, values: dict[str, object]) -> dict[str, object]:
    """``values`` for one language: a value given per language gives that language's text."""
    return {k: v[lang] if isinstance(v, dict) else v for k, v in values.items()}


def say(key: str, /, **values: object) -> Text:
    """Entry ``key`` in every language, its placeholders filled from ``values``.

    A value may be text per language (another :func:`say`), so that each language
    gets its own; any other value is formatted the same in both.
    """
    return {
        lang: text.format(**_in(lang, values))
        for lang, text in zip(LANGS, WORDING[key], strict=True)
    }


def say_n(n: int, key: str, /, **values: object) -> Text:
    """:func:`say` of ``key.one`` when ``n`` is 1, else of ``key.many`` (English agreement)."""
    return say(f"{key}.one" if n == 1 else f"{key}.many", **values)


def nothing() -> Text:
    """An absent phrase: empty in every language."""
    return dict.fromkeys(LANGS, "")


def join(separator: str, parts: Iterable[Text]) -> Text:
    """``parts`` joined per language with the entry ``separator`` (``sep.list``, ...)."""
    items = list(parts)
    return {
        lang: sep.join(p[lang] for p in items)
        for lang, sep in zip(LANGS, WORDING[separator], strict=True)
    }


def capitalized(text: Text) -> Text:
    """``text`` starting a sentence: English capitalizes its first letter (Chinese has no case)."""
    return {**text, "en": text["en"][:1].upper() + text["en"][1:]}


def mid_sentence(text: Text) -> Text:
    """Titles inside a sentence: English in lower case (Chinese has no case)."""
    return {**text, "en": text["en"].lower()}

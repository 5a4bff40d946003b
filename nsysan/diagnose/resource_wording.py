"""The wording of the rules on launches, host CPUs, device memory and load over time.

Part of :data:`nsysan.diagnose.wording.WORDING` (kept beside it as
``resource_facts`` is beside ``facts``); the same conventions: ``key: (English,
Chinese)``, ``str.format`` placeholders, ``.one``/``.many`` forms where English agrees
with a number.
"""

from __future__ import annotations

RESOURCE_WORDING: dict[str, tuple[str, str]] = {
    # --- launch-bound
    "launch-bound.title": ("Launch-bound: tiny kernels, µs gaps", "发射受限：微小内核与微秒级间隙"),
    "launch-bound.claim": (
        "{gpus} launch-bound: {small} of {kernels} kernels run under 10 µs "
        "(median {median}) at {rate} launches per second, and {gaps} of the window is gaps under 10 µs between back-to-back kernels: "
        "the launch path, not GPU work, sets the pace.{shape}{sm}",
        "{gpus} 受发射开销限制：{kernels} 个内核中 {small} 短于 10 µs（中位数 {median}），每秒发射 {rate} 次，"
        "时间窗内 {gaps} 是相邻内核之间不足 10 µs 的间隙：决定节奏的是发射路径，而不是 GPU 计算。{shape}{sm}",
    ),
    "launch-bound.shape": (
        " Its top kernel is also small in shape: {kernel} (grid {grid}, block {block}: {why}).",
        "其主要内核的形状也很小：{kernel}（网格 {grid}，线程块 {block}：{why}）。",
    ),
    "launch-bound.recommendation": (
        "Capture the repeated launch sequence once in a CUDA graph (cudaGraphLaunch, torch.cuda.CUDAGraph), fuse the small kernels, "
        "or give each launch more work (larger batches or grids).",
        "把重复的发射序列用 CUDA Graph 一次性捕获（cudaGraphLaunch、torch.cuda.CUDAGraph），融合小内核，"
        "或让每次发射承担更多工作（更大的批量或网格）。",
    ),
    # --- launch-config: what is wrong with one launch shape
    "launch-config.one-thread": (
        "one thread per block, so one lane of each 32-lane warp works",
        "每个线程块只有一个线程，每个 32 线程的 warp 只有一条通道在工作",
    ),
    "launch-config.sub-warp": (
        "{threads} threads per block, less than one 32-thread warp",
        "每块 {threads} 个线程，不足一个 32 线程的 warp",
    ),
    "launch-config.single-block": (
        "a single block, which runs on one SM{of}",
        "只有一个线程块，只能在一个 SM 上运行{of}",
    ),
    "launch-config.of-sms": (" of {sms}", "（共 {sms} 个）"),
    "launch-config.title": ("Kernels launched too narrow", "内核发射配置过窄"),
    "launch-config.claim": (
        "On {gpus}, kernels launched with {kind} take {share} of kernel time: {shapes}{more}.",
        "{gpus} 上，{kind}的内核占内核时间的 {share}：{shapes}{more}。",
    ),
    "launch-config.kind.one-thread": ("one thread per block", "每个线程块只有一个线程"),
    "launch-config.kind.narrow": (
        "blocks smaller than a warp or a single block",
        "线程块小于一个 warp 或只有一个线程块",
    ),
    "launch-config.shape": (
        "{kernels} with grid {grid} and block {block} ({why})",
        "{kernels}，网格 {grid}、线程块 {block}（{why}）",
    ),
    "launch-config.more.one": ("; and {more} more shape", "；另有 {more} 种形状"),
    "launch-config.more.many": ("; and {more} more shapes", "；另有 {more} 种形状"),
    "launch-config.recommendation": (
        "Launch at least one warp per block (typically 128–256 threads) and enough blocks to fill every SM; for compiler-generated "
        "kernels (OpenACC/OpenMP offload), set the vector length or thread limit of the loop.",
        "每个线程块至少发射一个 warp（通常 128–256 个线程），并让线程块数足以占满所有 SM；对编译器生成的内核"
        "（OpenACC/OpenMP 卸载），设置循环的向量长度或线程上限。",
    ),
    # --- host CPUs (cpu-saturated, cpu-blocked, feeding-thread-busy, feeding-thread-off-cpu)
    "cpu.idle.one": ("{gpus} is idle {gaps} of its window", "{gpus} 空闲占时间窗的 {gaps}"),
    "cpu.idle.many": ("{gpus} are idle {gaps} of their window", "{gpus} 空闲占时间窗的 {gaps}"),
    "cpu.cores": ("{busy} of {total}", "{busy} / {total}"),
    "cpu.covers": (
        "(Nsight Systems records only the profiled processes' threads: other programs' use of the cores is not seen.)",
        "（Nsight Systems 只记录被分析进程的线程：其他程序对 CPU 核的占用不可见。）",
    ),
    "cpu-saturated.title": ("Host CPUs saturated", "主机 CPU 饱和"),
    "cpu-saturated.claim": (
        "{idle} while the profiled processes keep at least 90% of the cores of {hosts} busy "
        "during {saturated} of GPU gap time (on average {cores} cores); the feeding threads are off CPU outside any call "
        "{off} of their gap time: the host is CPU-starved.",
        "{idle}，而在 GPU 间隙时间的 {saturated} 内，被分析进程占用了 {hosts} 至少 90% 的 CPU 核"
        "（平均 {cores} 个核）；发射线程在其间隙时间的 {off} 内不在 CPU 上且不在任何调用中："
        "主机 CPU 不足。",
    ),
    "cpu-saturated.recommendation": (
        "Give each GPU more CPU cores, or run fewer CPU threads (data-loader workers, tokenizer threads, OMP_NUM_THREADS), "
        "and pin each feeding thread to a core of its own.",
        "为每张卡分配更多 CPU 核，或减少 CPU 线程数（数据加载进程、tokenizer 线程、OMP_NUM_THREADS），并为每个发射线程绑定独占的 CPU 核。",
    ),
    "cpu-blocked.title": (
        "Feeding threads blocked, not short of cores",
        "发射线程被阻塞，而不是缺少 CPU 核",
    ),
    "cpu-blocked.claim": (
        "{idle}; {its} feeding threads wait in locks, condition variables or synchronizing "
        "calls {waiting} of their gap time, while the profiled processes keep only {cores} cores of {hosts} busy: "
        "serialization (GIL, a lock, a queue) — more cores will not help. {covers}",
        "{idle}；{its}发射线程在间隙时间的 {waiting} 内等待锁、条件变量或同步调用，"
        "而被分析进程在 {hosts} 上平均只占用 {cores} 个核：这是串行化（GIL、锁、队列）——"
        "增加 CPU 核无济于事。{covers}",
    ),
    "cpu-blocked.recommendation": (
        "Remove the serialization on the launch path: move tokenization and sampling off the GIL (C++/Rust, separate processes), "
        "shorten the critical section, or hand work through a lock-free queue; adding cores alone will not help.",
        "消除发射路径上的串行化：把 tokenizer 与采样移出 GIL（C++/Rust 实现或独立进程），缩短临界区，或改用无锁队列传递工作；"
        "仅增加 CPU 核无济于事。",
    ),
    "feeding-thread-busy.title": (
        "The feeding thread is busy on its CPU",
        "发射线程自身在 CPU 上忙碌",
    ),
    "feeding-thread-busy.claim": (
        "{idle}; {its} feeding threads are on CPU {running} of their gap time while the profiled "
        "processes keep {cores} cores of {hosts} busy: one thread's own host work sits on the launch path. {covers}",
        "{idle}；{its}发射线程在间隙时间的 {running} 内在 CPU 上运行，而被分析进程在 {hosts} 上平均只占用 "
        "{cores} 个核：单个线程自身的主机工作处在发射路径上。{covers}",
    ),
    "feeding-thread-busy.recommendation": (
        "Find what the feeding thread computes between launches (NVTX ranges or CPU sampling: --sample=cpu) and move it off the "
        "launch path (another thread or process, precomputation) or speed it up; more cores alone will not help.",
        "找出发射线程在两次发射之间计算了什么（NVTX 区间或 CPU 采样：--sample=cpu），把它移出发射路径（其他线程或进程、预先计算）"
        "或加速它；仅增加 CPU 核无济于事。",
    ),
    "feeding-thread-off-cpu.title": (
        "The feeding thread is off CPU in the gaps",
        "间隙中发射线程不在 CPU 上",
    ),
    "feeding-thread-off-cpu.claim": (
        "{idle}; {its} feeding threads are off CPU outside any traced call {off} of their gap "
        "time, while the profiled processes keep {cores} cores of {hosts} busy: {why}.",
        "{idle}；{its}发射线程在间隙时间的 {off} 内不在 CPU 上且不在任何被追踪的调用中，"
        "而被分析进程在 {hosts} 上平均只占用 {cores} 个核：{why}。",
    ),
    "feeding-thread-off-cpu.why.traced": (
        "waiting for a core that other programs held (not recorded) or blocked in a call the OS-runtime trace does not cover",
        "在等待被其他程序占用的 CPU 核（未被记录），或阻塞在 OS 运行时追踪未覆盖的调用中",
    ),
    "feeding-thread-off-cpu.why.untraced": (
        "waiting for a core that other programs held (not recorded) or blocked in a call — the trace has no OS-runtime calls to tell",
        "在等待被其他程序占用的 CPU 核（未被记录），或阻塞在某个调用中——追踪中没有 OS 运行时调用，无法区分",
    ),
    "feeding-thread-off-cpu.recommendation": (
        "Capture again with `{capture} …` to see blocking calls; if the thread waits for a core, pin it to a core of its own.",
        "用 `{capture} …` 重新采集以看到阻塞调用；若线程在等待 CPU 核，为它绑定独占的核。",
    ),
    # --- memory-pressure
    "memory-pressure.full.one": (
        "{where} runs with device memory at least 90% of {capacity} for {near} of its window",
        "{where} 在时间窗的 {near} 内显存占用不低于 {capacity} 的 90%",
    ),
    "memory-pressure.full.many": (
        "{where} run with device memory at least 90% of {capacity} for {near} of their window",
        "{where} 在时间窗的 {near} 内显存占用不低于 {capacity} 的 90%",
    ),
    "memory-pressure.lower-bound": (
        "(in use counts only the allocations the trace saw, so the GPU held at least this much)",
        "（占用只统计追踪中看到的分配，GPU 实际占用至少如此）",
    ),
    "memory-pressure.title.blocked": (
        "Memory nearly full: the GPU waits for room",
        "显存接近占满：GPU 在等待空间",
    ),
    "memory-pressure.claim.blocked": (
        "{full} (peak {peak}, first at {first}), and {share} of {its} {gaps} gap time is in gaps that start while memory is that full: "
        "the scheduler cannot admit more work (a full KV cache) {lower}.",
        "{full}（峰值 {peak}，首次出现在 {first}），"
        "{its} {gaps} 的间隙时间中有 {share} 的间隙开始于显存如此之满时：调度器无法接纳更多工作（KV cache 已满）{lower}。",
    ),
    "memory-pressure.recommendation.blocked": (
        "Free room for the KV cache: a smaller max batch or max sequence length, a quantized KV cache, more tensor "
        "parallelism, or preemption/swapping of long requests; route new requests to GPUs with free cache.",
        "为 KV cache 腾出空间：减小最大批量或最大序列长度、量化 KV cache、提高张量并行度，或对长请求抢占/换出；"
        "把新请求路由到仍有空闲 cache 的卡上。",
    ),
    "memory-pressure.title.close": ("Memory close to the limit", "显存接近上限"),
    "memory-pressure.claim.close": (
        "{full} (peak {peak}) {lower}; "
        "the GPU gaps do not start mostly while it is that full, so memory is not shown to hold the GPUs back.",
        "{full}（峰值 {peak}）{lower}；"
        "GPU 间隙并非主要开始于显存如此之满时，因此没有证据表明显存拖慢了 GPU。",
    ),
    "memory-pressure.recommendation.close": (
        "Leave headroom for longer requests or larger batches, or watch for out-of-memory preemption as load grows.",
        "为更长的请求或更大的批量预留余量，或在负载增长时留意显存不足导致的抢占。",
    ),
    # --- request-burst
    "request-burst.title": ("A request burst lands on one GPU", "请求突发集中到一张卡"),
    "request-burst.claim": (
        "From {start} to {end} on the trace timeline, {load} requests arrived ({over}); "
        "{share} of them went to {gpu}{before}.{more}",
        "在时间线上 {start} 到 {end} 之间到达了 {load} 个请求（{over}）；"
        "其中 {share} 被分到 {gpu}{before}。{more}",
    ),
    "request-burst.over-median": ("{times}× the median window", "为中位数时间窗的 {times} 倍"),
    "request-burst.no-median": ("against a median of none", "而中位数时间窗没有请求"),
    "request-burst.before": (" (it was {busy} busy just before)", "（此前它的忙碌占比为 {busy}）"),
    "request-burst.more.one": (
        " {more} more burst window follows the same pattern.",
        "另有 {more} 个突发时间窗呈同样模式。",
    ),
    "request-burst.more.many": (
        " {more} more burst windows follow the same pattern.",
        "另有 {more} 个突发时间窗呈同样模式。",
    ),
    "request-burst.recommendation": (
        "Spread bursts: admit by each GPU's queue depth and free KV cache rather than by emptiness at arrival, cap a GPU's "
        "batch growth per step, or smooth arrivals with a rate limiter.",
        "分散突发：按各卡的队列深度与空闲 KV cache 接纳请求，而不是按到达时谁最空；限制每步单卡批量的增长，或用限流平滑到达。",
    ),
    # --- gpu-starvation
    "gpu-starvation.title": ("GPUs starve while others work", "部分 GPU 在其他卡工作时挨饿"),
    "gpu-starvation.claim.one": (
        "{where} is idle {share} of its window while other GPUs run kernels and "
        "its feeding thread waits on a queue or condition "
        "(the longest from {start} to {end} on GPU {gpu}): no work reaches them while the others are loaded.",
        "{where} 在时间窗的 {share} 内空闲，而其他卡在运行内核，且其发射线程在等待队列或条件变量"
        "（最长的一段在 GPU {gpu} 上，从 {start} 到 {end}）：其他卡满载时没有工作到达这些卡。",
    ),
    "gpu-starvation.claim.many": (
        "{where} are idle {share} of their window while other GPUs run kernels and "
        "their feeding threads wait on a queue or condition "
        "(the longest from {start} to {end} on GPU {gpu}): no work reaches them while the others are loaded.",
        "{where} 在时间窗的 {share} 内空闲，而其他卡在运行内核，且其发射线程在等待队列或条件变量"
        "（最长的一段在 GPU {gpu} 上，从 {start} 到 {end}）：其他卡满载时没有工作到达这些卡。",
    ),
    "gpu-starvation.recommendation": (
        "Let idle GPUs take work: a shared queue or work stealing across replicas, routing by outstanding tokens instead of "
        "round-robin, and splitting long requests (chunked prefill) so one GPU does not hold the backlog.",
        "让空闲的卡能拿到工作：副本之间共享队列或工作窃取，按未完成的词元数而不是轮询路由，并拆分长请求（分块预填充），"
        "避免积压集中在一张卡上。",
    ),
    # --- long-tail-latency
    "long-tail-latency.request": ("request", "请求"),
    "long-tail-latency.step": ("step", "步"),
    "long-tail-latency.title": ("Long-tail {what} latency", "{what}延迟长尾"),
    "long-tail-latency.times": ("{low}×", "{low}"),
    "long-tail-latency.times-range": ("{low}×–{high}×", "{low}–{high}"),
    "long-tail-latency.claim": (
        "On {gpus} the {what} latency p99 is {times} the median "
        "(GPU {gpu}: p50 {p50}, p99 {p99}, max {max} starting at {start}): a few long {what}s dominate the tail.",
        "在 {gpus} 上，{what}延迟的 p99 是中位数的 {times} 倍"
        "（GPU {gpu}：p50 {p50}，p99 {p99}，最大 {max}，起点 {start}）：少数很长的{what}决定了尾部。",
    ),
    "long-tail-latency.recommendation": (
        "Keep long generations from blocking short ones: cap generation length per batch, schedule by remaining tokens, "
        "or preempt and resume long requests.",
        "避免长生成阻塞短请求：限制每批的生成长度，按剩余词元数调度，或对长请求抢占后再恢复。",
    ),
}

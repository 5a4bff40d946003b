"""Chinese for the English text other modules hand the report (reasons, notes, labels).

The analyses, the ingest and the rules say why something is unavailable, what a trace
lacks, and label their evidence in English; the report shows that text in the
reader's language. :func:`translate` looks a sentence up whole (:data:`ZH_EXACT`),
then by pattern (:data:`ZH_PATTERNS`, whose groups are translated in turn), then as
"a; b" or "a: b" parts. Text it cannot translate comes back unchanged, and
``tests/test_report_zh.py`` fails on any English phrase left in a Chinese report.
Identifiers (kernel names, NVTX text, metric keys, units) are not translated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nsysan.analyze.host_causes import CAUSE_LABELS

CAUSE_LABELS_ZH = {
    "cuda_sync": "CUDA 同步调用",
    "gil_wait": "GIL 特征（反复约 5 ms 的条件等待）",
    "blocking_os": "阻塞型系统调用（锁、条件等待、poll、sleep）",
    "descheduled": "线程被调度出 CPU",
    "cuda_api": "其他 CUDA API 调用",
    "os_call": "其他系统调用（I/O 等）",
    "nvtx": "在命名的 NVTX 区间内",
    "unattributed": "未归因",
    "unattributed_no_data": "未归因（缺少数据）",
    "launch_call": "下一个操作的发射调用",
    "gpu_transfer": "GPU 正在传输（memcpy/memset）",
    "gpu_wait": "GPU 侧等待（工作已排队）",
    "no_launch_record": "无发射记录",
}

ZH_EXACT: dict[str, str] = {
    # what a trace lacks (nsysan.ingest.MISSING_MESSAGES)
    "no GPU kernel records: compute, gaps and NCCL analyses unavailable": "没有 GPU 内核记录：计算、间隙与 NCCL 分析不可用",
    "no CUDA API trace: host-side attribution of gaps unavailable": "没有 CUDA API 追踪：无法对间隙做主机侧归因",
    "no NVTX ranges: gaps cannot be tied to named phases (tokenizer, sampling, data loading) and iteration boundaries are unknown": "没有 NVTX 区间：无法把间隙对应到命名阶段（tokenizer、采样、数据加载），迭代边界未知",
    "no OS runtime trace: blocking-call attribution (locks, condition waits, the GIL signature) unavailable": "没有 OS 运行时追踪：无法归因阻塞调用（锁、条件等待、GIL 特征）",
    "no thread scheduling events: descheduling attribution unavailable": "没有线程调度事件：无法归因线程被调度出 CPU 的时间",
    "no GPU metrics: SM activity, clocks and bandwidth unavailable": "没有 GPU 指标：SM 活跃度、时钟与带宽不可用",
    "no memory copy records": "没有内存拷贝记录",
    "no profiler overhead records": "没有采集开销记录",
    "no GPU activity at all: a CPU-only trace": "完全没有 GPU 活动：这是仅含 CPU 的追踪",
    "the trace has no GPU kernels": "该追踪中没有 GPU 内核",
    # analysis.unavailable
    "one GPU ran work: stagger compares the gaps of two or more GPUs": "只有一张卡运行了工作：错开分析需要比较两张及以上 GPU 的间隙",
    "no GPU metrics": "没有 GPU 指标",
    "no Nsight Compute data: give --ncu kernels.csv for the memory- vs compute-bound view": "没有 Nsight Compute 数据：提供 --ncu kernels.csv 以查看带宽受限与计算受限视图",
    "no NCCL kernels in this trace": "此时间线中没有 NCCL 内核",
    "no memory copies or memsets on the GPUs": "GPU 上没有内存拷贝或 memset",
    "no GPU metrics sample falls inside any analysis window": "没有任何 GPU 指标采样落在分析时间窗内",
    # host attribution: what is missing, and the cause labels
    "no CUDA API trace": "没有 CUDA API 追踪",
    "no OS runtime trace": "没有 OS 运行时追踪",
    "no thread scheduling events": "没有线程调度事件",
    "no NVTX ranges": "没有 NVTX 区间",
    **{en: CAUSE_LABELS_ZH[key] for key, en in CAUSE_LABELS.items()},
    # stagger
    "one GPU: there is no other GPU to compare gaps with": "只有一张卡：没有其他卡可比较间隙",
    "no gaps inside the analysis windows": "分析时间窗内没有间隙",
    "no GPU pair has overlapping windows with an idle share strictly between 0 and 1": "没有任何一对 GPU 的时间窗重叠且空闲占比严格介于 0 与 1 之间",
    # ingest notes
    "some files lack a UTC session start: their times were not aligned (each file keeps its own session-relative clock)": "部分文件缺少 UTC 会话起点：它们的时间未对齐（各文件保留自己的会话相对时钟）",
    "GPU identity from the CUDA ordinal (the export has no per-process device map): correct unless the process ran with CUDA_VISIBLE_DEVICES remapping": "GPU 身份取自 CUDA 序号（导出中没有逐进程的设备映射）：除非进程用 CUDA_VISIBLE_DEVICES 重新映射过，否则正确",
    # rule cause categories
    "CPU-side scheduling": "CPU 侧调度",
    "unaligned per-GPU stalls": "各卡各自的停顿（未对齐）",
    "common stall (barrier, collective, shared loader)": "共同停顿（屏障、集合通信、共享的数据加载）",
    "static split": "静态切分",
    "hot expert": "热点专家",
    "pipeline fill/drain": "流水线填充/排空",
    "dynamic requests (long tail)": "动态请求（长尾）",
    "interconnect bandwidth (NVLink/PCIe)": "互联带宽（NVLink/PCIe）",
    "arrival skew at collectives": "集合通信的到达偏差",
    "memory bandwidth": "显存带宽",
    "power / thermal": "功耗/温度",
    "start-up before steady state": "进入稳态之前的启动阶段",
    "one long stall": "一次长时间停顿",
    "host late, cause not captured": "主机滞后，原因未被采集",
    "launch overhead of small kernels": "小内核的发射开销",
    "launch configuration": "发射配置",
    "serialized host (GIL, locks, queues)": "主机串行化（GIL、锁、队列）",
    "device memory / KV-cache pressure": "显存 / KV cache 压力",
    "request bursts": "请求突发",
    "starvation": "饥饿",
    "requests in the burst window": "突发时间窗内的请求数",
    "burst window / median window": "突发时间窗 / 中位数时间窗",
    "utilization overstates work": "利用率高估了实际工作",
    "one slow collective": "一次缓慢的集合通信",
    "waits for data transfers": "等待数据传输",
    "memory transfers": "内存传输",
    "device-side dependencies": "设备侧依赖",
    # evidence labels without a GPU
    "stagger score (−1 aligned … +1 staggered)": "错开分数（−1 对齐 … +1 错开）",
    "co-idle time, observed / if independent": "同时空闲时间，实测 / 独立时期望",
    "gap time with a measured host-side cause": "有实测主机侧原因的间隙时间",
    "GIL-signature share of gap time": "GIL 特征占间隙时间的比例",
    "all GPUs idle, share of common window": "所有卡同时空闲，占共同时间窗",
    "all GPUs idle, share of common steady-state window": "所有卡同时空闲，占共同稳态时间窗",
    "stagger score": "错开分数",
    "compute time, max / mean": "计算时间，最大值 / 均值",
    "load-balance efficiency (mean / max)": "负载均衡效率（均值 / 最大值）",
    "bubble share of iteration time": "气泡占迭代时间的比例",
    "busy-share spread, worst window": "忙碌占比差异，最差时间窗",
    "busy-share spread, best window": "忙碌占比差异，最好时间窗",
    "NCCL share of busy time": "NCCL 占忙碌时间的比例",
    "estimated wait share of NCCL time": "估计等待占 NCCL 时间的比例",
    "memory-bound share of kernel time": "带宽受限内核占内核时间的比例",
    "kernel time without Nsight Compute data": "没有 Nsight Compute 数据的内核时间",
    "gap start (trace timeline)": "间隙起点（时间线）",
    "gap end (trace timeline)": "间隙终点（时间线）",
    "longest / median": "最长 / 中位数",
    "start (trace timeline)": "起点（时间线）",
    # stagger verdicts and values shown as text
    "aligned": "对齐",
    "independent": "互不相关",
    "staggered": "错开",
    "not applicable": "不适用",
    "n/a": "无",
    "(other kernels)": "（其他内核）",
    # analysis names (the appendix lists "name: why" for each unavailable one)
    "busy": "忙碌时间",
    "gaps": "间隙",
    "stagger": "错开分析",
    "imbalance": "负载均衡",
    "nccl": "NCCL 通信",
    "host": "主机侧归因",
    "dashboard": "监控面板视图",
    "contention": "资源争用",
    "bound": "带宽/计算受限",
    "transfers": "传输（内存拷贝与置位）",
    "launch": "发射开销与配置",
    "cpu": "主机 CPU",
    "memory": "显存占用",
    "steps": "步与请求延迟",
    "load": "负载随时间变化",
    "no steps: no NVTX range repeats around each step and no GPU runs a repeating kernel sequence; wrap each step in an NVTX range (e.g. 'decode_step') for step latency": "没有步：没有在每一步周围重复的 NVTX 区间，也没有 GPU 运行重复的内核序列；用 NVTX 区间包住每一步才能得到步延迟",
    "no CUDA memory usage events: capture with --cuda-memory-usage=true to see device memory in use per GPU (KV-cache pressure)": "没有 CUDA 显存使用事件：用 --cuda-memory-usage=true 采集，才能看到每张卡的显存占用（KV cache 压力）",
    "no thread scheduling events: capture with --cpuctxsw=process-tree (the default with --sample=cpu) to tell saturated host CPUs from blocked feeding threads": "没有线程调度事件：用 --cpuctxsw=process-tree（--sample=cpu 时默认开启）采集，才能区分主机 CPU 饱和与发射线程被阻塞",
}

_GPU = r"(GPU \d+)"
# (pattern, Chinese template): groups are translated recursively and formatted in.
ZH_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), zh)
    for p, zh in (
        (rf"gap share, {_GPU}", "间隙占比，{0}"),
        (rf"steady-state gap share, {_GPU}", "稳态间隙占比，{0}"),
        (rf"longest gap, {_GPU}", "最长间隙，{0}"),
        (rf"longest gap share of the window, {_GPU}", "最长间隙占时间窗，{0}"),
        (rf"GR Active from GPU metrics, {_GPU}", "GR Active（GPU 指标），{0}"),
        (rf"NVML-style utilization, {_GPU}", "NVML 口径利用率，{0}"),
        (rf"GR Active, {_GPU}", "GR Active，{0}"),
        (rf"SM Active, {_GPU}", "SM Active，{0}"),
        (rf"kernels, {_GPU}", "内核数，{0}"),
        (rf"kernels under 10 µs, {_GPU}", "短于 10 µs 的内核，{0}"),
        (rf"share of the burst, {_GPU}", "占突发的比例，{0}"),
        (rf"window starved, {_GPU}", "饥饿时间占时间窗，{0}"),
        (rf"request latency p99 / p50, {_GPU}", "请求延迟 p99 / p50，{0}"),
        (rf"step latency p99 / p50, {_GPU}", "步延迟 p99 / p50，{0}"),
        (rf"peak device memory in use, share of capacity, {_GPU}", "显存占用峰值占容量，{0}"),
        (rf"window with memory ≥90% full, {_GPU}", "显存 ≥90% 占满的时间窗占比，{0}"),
        (
            rf"gap time starting with memory ≥90% full, {_GPU}",
            "开始于显存 ≥90% 占满时的间隙时间，{0}",
        ),
        (
            r"cores running the profiled processes during gaps, (.+)",
            "间隙期间运行被分析进程的核数，{0}",
        ),
        (r"gap time with ≥90% of cores busy, (.+)", "≥90% 核忙碌的间隙时间，{0}"),
        (r"feeding threads waiting, share of gap time, (.+)", "发射线程等待占间隙时间，{0}"),
        (r"feeding threads on CPU, share of gap time, (.+)", "发射线程在 CPU 上占间隙时间，{0}"),
        (
            r"feeding threads off CPU outside any call, share of gap time, (.+)",
            "发射线程不在 CPU 上且不在调用中占间隙时间，{0}",
        ),
        (rf"median kernel, {_GPU}", "内核时长中位数，{0}"),
        (rf"launches per second, {_GPU}", "每秒发射数，{0}"),
        (rf"window in gaps under 10 µs, {_GPU}", "短于 10 µs 的间隙占时间窗，{0}"),
        (
            rf"kernel time, (.+) \(grid (\S+), block (\S+)\), {_GPU}",
            "内核时间，{0}（网格 {1}，线程块 {2}），{3}",
        ),
        (rf"median kernel duration, {_GPU}", "内核时长中位数，{0}"),
        (rf"median gap, {_GPU}", "间隙中位数，{0}"),
        (rf"unattributed share of gap time, {_GPU}", "未归因占间隙时间，{0}"),
        (rf"GPU-side wait, share of gap time, {_GPU}", "GPU 侧等待占间隙时间，{0}"),
        (
            rf"GPU-side wait or transfer, share of gap time, {_GPU}",
            "GPU 侧等待或传输占间隙时间，{0}",
        ),
        (rf"memcpy/memset time, share of the window, {_GPU}", "memcpy/memset 时间占时间窗，{0}"),
        (
            rf"transfer time with no kernel running, share of the window, {_GPU}",
            "无内核运行时的传输时间占时间窗，{0}",
        ),
        (rf"memcpy/memset time in the window, {_GPU}", "时间窗内 memcpy/memset 时间，{0}"),
        (rf"gap time with a memory copy running, {_GPU}", "有内存拷贝在进行的间隙时间，{0}"),
        (rf"(.+), share of gap time, {_GPU}", "{0}占间隙时间，{1}"),
        (rf"fill share, {_GPU}", "填充占比，{0}"),
        (rf"busy-share trend over the capture, {_GPU}", "采集期间忙碌占比趋势，{0}"),
        (rf"busy time with clock drop, {_GPU}", "降频的忙碌时间，{0}"),
        (r"NVTX range covering gaps: (.+)", "覆盖间隙的 NVTX 区间：{0}"),
        (r"share of the difference: (.+)", "占差值比例：{0}"),
        (r"longest (\w+), (GPU \d+)", "最长的 {0}，{1}"),
        (r"median (\w+), (GPU \d+)", "{0} 中位数，{1}"),
        (r"CUDA synchronizing calls", "CUDA 同步调用"),
        (r"GIL-signature waits", "GIL 特征等待"),
        (r"blocking OS calls", "阻塞型系统调用"),
        (r"other CUDA API calls", "其他 CUDA API 调用"),
        (r"other OS calls", "其他系统调用"),
        (r"off CPU", "线程被调度出 CPU"),
        (r"named NVTX ranges", "命名的 NVTX 区间"),
        (r"launch calls", "发射调用"),
        (
            r"(\d[\d,]*) (\w+) row\(s\) ending before they start were ignored",
            "忽略了 {0} 行结束早于开始的 {1} 记录",
        ),
        (
            r"(\d+) \(process, CUDA device\) pair\(s\) not found in TARGET_INFO_GPU: identified by process and ordinal only",
            "{0} 个（进程，CUDA 设备）对不在 TARGET_INFO_GPU 中：仅按进程与序号识别",
        ),
        (
            r"not applicable: no iteration boundaries \(no NVTX range repeats at least (\d+) times covering (\d+%) of the GPU time span, and no GPU runs a repeating kernel sequence\)",
            "不适用：没有迭代边界（没有 NVTX 区间重复至少 {0} 次并覆盖 GPU 时间跨度的 {1}，也没有 GPU 运行重复的内核序列）",
        ),
        (
            r"(GPU \d+): every (\d+) kernels from (\S+) \((.+)\)",
            "{0}：从 {2} 起每 {1} 个内核为一次迭代（{3}）",
        ),
        # rows dropped at ingest (nsysan.ingest.validate.explain_note)
        (r"(\d+) (\S+) rows? with no (\S+): ignored", "{1} 中有 {0} 行缺少 {2}：已忽略"),
        (r"(\d+) (\S+) rows? with (.+): ignored", "{1} 中有 {0} 行{2}：已忽略"),
        (r"a text value in (\S+) \(nsys writes integers\)", "{0} 为文本值（nsys 只写整数）"),
        (r"a real value in (\S+) \(nsys writes integers\)", "{0} 为浮点值（nsys 只写整数）"),
        (r"a blob value in (\S+) \(nsys writes integers\)", "{0} 为二进制值（nsys 只写整数）"),
        (
            r"(\S+) (-?\d+)(.*?), more than a day after the capture end \((-?\d+) ns\)",
            "{0} 为 {1}{2}，比采集结束（{3} ns）晚一天以上",
        ),
        (
            r"(\S+) (-?\d+)(.*?), more than a day before the session start",
            "{0} 为 {1}{2}，比会话开始早一天以上",
        ),
        (
            r"(\S+) (-?\d+)(.*?), more than a week after the session start",
            "{0} 为 {1}{2}，比会话开始晚一周以上",
        ),
        (r"(\S+) (-?\d+)(.*?), outside (\S+)", "{0} 为 {1}{2}，超出 {3}"),
        (
            r"(\d+) (\S+) string\(s\) longer than (\d+) bytes were truncated for display",
            "{1} 中有 {0} 个字符串超过 {2} 字节，显示时已截断",
        ),
        (
            r"(\d+) GPU metrics sample\(s\) with a non-integer or implausible timestamp or source id: ignored",
            "{0} 个 GPU 指标采样的时间戳或来源 id 不是整数或不合理：已忽略",
        ),
        (
            r"(\d+) GENERIC_EVENTS GPU metrics sample\(s\) that are not a JSON object or have no valid timestamp: ignored",
            "{0} 个 GENERIC_EVENTS GPU 指标采样不是 JSON 对象或没有有效时间戳：已忽略",
        ),
        # .nsys-rep input (nsysan.ingest.nsysrep.NsysExport.note)
        (
            r"(.+): exported to SQLite by (.+) \((\S+)\) in (.+)",
            "{0}：已由 {1}（{2}）导出为 SQLite，位于 {3}",
        ),
        (
            r"(.+): reused the SQLite export made by (.+) \((\S+)\) in (.+)",
            "{0}：沿用 {1}（{2}）此前导出的 SQLite，位于 {3}",
        ),
        (
            r"(\S+): (\d+) graph execution\(s\) without timestamps ignored",
            "{0} 中有 {1} 次 CUDA 图执行没有时间戳：已忽略",
        ),
        (r"([^:]+): (.+)", "{0}：{1}"),
    )
)


def in_lang(lang: str, en: str, zh: str) -> str:
    """The wording of ``lang`` of a pair written in the layout code."""
    return zh if lang == "zh" else en


def unavailable_text(reasons: Mapping[str, str], name: str, lang: str) -> str:
    """Why the analysis ``name`` is unavailable (``Analysis.unavailable``), in ``lang``."""
    return translate(reasons.get(name, ""), lang)


def translate(text: str, lang: str) -> str:
    """``text`` in ``lang``: English as given, Chinese from the catalogue when known."""
    if lang != "zh" or not text:
        return text
    return _zh(text.strip())


def _zh(text: str) -> str:
    if text in ZH_EXACT:
        return ZH_EXACT[text]
    for pattern, template in ZH_PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            return template.format(*(_zh(g) for g in match.groups()))
    if "; " in text:
        return "；".join(_zh(p) for p in text.split("; "))
    return text


def cause_label(cause: str, lang: str) -> str:
    """The report's name of a host-side cause id (nsysan.analyze.host_causes.CAUSES)."""
    if lang == "zh":
        return CAUSE_LABELS_ZH.get(cause, cause)
    return CAUSE_LABELS.get(cause, cause)


SHORT_CAUSES = {
    "cuda_sync": ("CUDA sync", "CUDA 同步"),
    "gil_wait": ("GIL waits", "GIL 等待"),
    "blocking_os": ("blocking OS calls", "阻塞系统调用"),
    "descheduled": ("off CPU", "被调度出 CPU"),
    "cuda_api": ("other CUDA calls", "其他 CUDA 调用"),
    "os_call": ("other OS calls", "其他系统调用"),
    "nvtx": ("NVTX ranges", "NVTX 区间"),
    "unattributed": ("unattributed", "未归因"),
    "unattributed_no_data": ("unattributed (no data)", "未归因（缺数据）"),
    "launch_call": ("launch calls", "发射调用"),
    "gpu_transfer": ("GPU transfers", "GPU 传输"),
    "gpu_wait": ("GPU-side wait", "GPU 侧等待"),
    "no_launch_record": ("no launch record", "无发射记录"),
}


def short_cause(cause: str, lang: str) -> str:
    """A short name of a host-side cause, for narrow table cells."""
    names = SHORT_CAUSES.get(cause)
    if names is None:
        return cause_label(cause, lang)
    return names[1] if lang == "zh" else names[0]

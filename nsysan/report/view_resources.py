"""Report sections for launches, host CPUs and device memory (what the page shows).

Every number comes from an analysis result (:mod:`nsysan.analyze.launch`, ...) and is
formatted by :mod:`nsysan.report.fmt`; missing data is named with what to capture.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.report import fmt
from nsysan.report.catalog import in_lang, unavailable_text
from nsysan.report.viewmodel import Section, SeriesView, Table

Lang = Literal["en", "zh"]

TITLES: dict[str, dict[str, str]] = {
    "launch": {"en": "Launch overhead and launch configuration", "zh": "发射开销与发射配置"},
    "cpu": {"en": "Host CPUs during GPU gaps", "zh": "GPU 间隙期间的主机 CPU"},
    "memory": {"en": "Device memory in use (KV-cache pressure)", "zh": "显存占用（KV cache 压力）"},
}
VERDICTS = {
    "saturated": ("saturated", "饱和"),
    "blocked": ("blocked (waiting)", "阻塞（等待）"),
    "feeding_thread_busy": ("feeding thread busy", "发射线程 忙碌"),
    "off_cpu": ("feeding thread off CPU", "发射线程 不在 CPU 上"),
    "mixed": ("mixed", "混合"),
    "unknown": ("unknown", "未知"),
}
CORE_ROWS = 16
CONFIG_ROWS = 12


def _rate(per_s: float | None) -> str:
    return "—" if per_s is None else fmt.rate(per_s)


def launch_section(analysis: Analysis, lang: Lang) -> Section:
    result = analysis.launch
    if result is None:
        return Section(
            key="launch",
            title=TITLES["launch"][lang],
            unavailable=unavailable_text(analysis.unavailable, "launch", lang),
        )
    per = result.per_gpu.sort("gpu")
    yes, no = in_lang(lang, "yes", "是"), in_lang(lang, "no", "否")
    overhead = Table(
        title=in_lang(lang, "Kernel sizes and launch-scale gaps", "内核大小与发射级间隙"),
        columns=(
            "GPU",
            in_lang(lang, "kernels (per second)", "内核数 （每秒）"),
            in_lang(lang, "kernel p50 / p90 / p99", "内核时长 p50 / p90 / p99"),
            in_lang(
                lang,
                "kernels under 10 µs (share of kernel time)",
                "短于 10 µs 的内核 （占内核时间）",
            ),
            in_lang(lang, "gaps under 10 µs (share of window)", "短于 10 µs 的间隙 （占时间窗）"),
            in_lang(lang, "launch bound", "发射 受限"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                f"{fmt.count(r['kernels'])} ({_rate(r['launch_rate'])})",
                " / ".join(
                    fmt.duration(r[c]) for c in ("kernel_p50_ns", "kernel_p90_ns", "kernel_p99_ns")
                ),
                f"{fmt.percent(r['small_kernel_share'])} ({fmt.percent(r['small_kernel_time_share'])})",
                f"{fmt.count(r['short_gap_count'])} ({fmt.percent(r['short_gap_share'])})",
                yes if r["launch_bound"] else no,
            )
            for r in per.iter_rows(named=True)
        ),
        note=in_lang(
            lang,
            "Kernels that start in each GPU's window. A GPU is launch-bound when at least half its kernels run under 10 µs "
            "and gaps under 10 µs between back-to-back kernels fill at least 20% of its window.",
            "统计在各卡时间窗内开始的内核。当至少一半内核短于 10 µs，且相邻内核之间短于 10 µs 的间隙至少占时间窗的 20% 时，"
            "该卡即为发射受限。",
        ),
    )
    buckets = result.durations.sort("gpu", "bucket")
    labels = (
        buckets.filter(pl.col("gpu") == buckets["gpu"][0])["label"].to_list()
        if buckets.height
        else []
    )
    histogram = Table(
        title=in_lang(
            lang,
            "Kernel duration distribution (kernels, share of kernel time)",
            "内核时长分布（内核数，占内核时间）",
        ),
        columns=("GPU", *labels),
        rows=tuple(
            (
                f"GPU {gpu}",
                *(
                    f"{fmt.count(c)} ({fmt.percent(t / total if total else None)})"
                    for c, t in zip(rows["count"], rows["time_ns"], strict=True)
                ),
            )
            for (gpu,), rows in buckets.group_by("gpu", maintain_order=True)
            for total in [int(rows["time_ns"].sum())]
        ),
    )
    tables = [overhead, histogram]
    paragraphs: list[str] = []
    if result.configs_available and result.configs.height:
        sms = {
            int(g): int(n)
            for g, n in analysis.trace.gpus.select("gpu", "sm_count").drop_nulls().iter_rows()
        }
        tables.append(_config_table(result.configs, lang, sms))
    else:
        paragraphs.append(
            in_lang(
                lang,
                "The export has no grid/block sizes for its kernels: launch configurations cannot be shown.",
                "导出中没有内核的网格/线程块大小：无法显示发射配置。",
            )
        )
    return Section(
        key="launch",
        title=TITLES["launch"][lang],
        paragraphs=tuple(paragraphs),
        tables=tuple(tables),
    )


def _config_table(configs: pl.DataFrame, lang: Lang, sms: dict[int, int]) -> Table:
    def flag(r: dict[str, object]) -> str:
        if r["one_thread_blocks"]:
            return in_lang(lang, "one thread per block", "每块一个线程")
        if r["sub_warp_blocks"]:
            return in_lang(lang, "block smaller than a warp", "线程块小于一个 warp")
        if r["single_block"]:
            n = sms.get(int(r["gpu"]))  # type: ignore[call-overload]
            if n:
                return in_lang(
                    lang, f"single block: 1 of {n} SMs", f"单个线程块：{n} 个 SM 中的 1 个"
                )
            return in_lang(lang, "single block", "单个线程块")
        return "—"

    def dims(r: dict[str, object], kind: str) -> str:
        return "×".join(str(r[f"{kind}_{a}"]) for a in "xyz")

    rows = configs.head(CONFIG_ROWS)
    return Table(
        title=in_lang(lang, "Launch configuration of the top kernels", "主要内核的发射配置"),
        columns=(
            "GPU",
            in_lang(lang, "kernel", "内核"),
            in_lang(lang, "grid / block", "网格 / 线程块"),
            in_lang(lang, "launches", "发射次数"),
            in_lang(lang, "share of kernel time", "占内核时间"),
            in_lang(lang, "shape", "形状"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                str(r["short_name"]),
                f"{dims(r, 'grid')} / {dims(r, 'block')}",
                fmt.count(r["launches"]),
                fmt.percent(r["time_share"]),
                flag(r),
            )
            for r in rows.iter_rows(named=True)
        ),
        note=in_lang(
            lang,
            f"The {CONFIG_ROWS} largest (GPU, kernel, grid, block) rows by kernel time over the whole trace, from the top five kernels of each GPU. "
            "One thread per block leaves 31 of a warp's 32 lanes idle; a single block runs on one SM.",
            f"按整个追踪的内核时间取前 {CONFIG_ROWS} 行（GPU、内核、网格、线程块），来自每张卡的前五个内核。"
            "每块一个线程会让一个 warp 的 32 条通道中 31 条空闲；单个线程块只能在一个 SM 上运行。",
        ),
    )


def cpu_section(analysis: Analysis, lang: Lang) -> Section:
    result = analysis.cpu
    if result is None:
        return Section(
            key="cpu",
            title=TITLES["cpu"][lang],
            unavailable=unavailable_text(analysis.unavailable, "cpu", lang),
        )
    host_names = result.hosts["host"].to_list()
    one = len(host_names) == 1
    # One host: its name goes in the titles, not in a column of its own.
    named = f" — {host_names[0]}" if one else ""
    hosts = Table(
        title=in_lang(
            lang,
            "Per host: cores running the profiled processes",
            "逐主机：运行被分析进程的 CPU 核",
        )
        + named,
        columns=(
            *(() if one else (in_lang(lang, "host", "主机"),)),
            in_lang(lang, "cores (seen)", "核数 （出现过）"),
            in_lang(lang, "busy cores: window / gap time", "忙碌核数： 时间窗 / 间隙时间"),
            in_lang(lang, "gap time with ≥90% of cores busy", "≥90% 核忙碌的 间隙时间"),
            in_lang(
                lang,
                "feeding threads: on CPU / waiting / off CPU",
                "发射线程： 在 CPU 上 / 等待 / 不在 CPU 上",
            ),
            in_lang(lang, "verdict", "结论"),
        ),
        rows=tuple(
            (
                *(() if one else (str(r["host"]),)),
                f"{r['cores'] if r['cores'] is not None else '—'} ({r['cores_seen']})",
                f"{_mean(r['busy_cores_mean'])} / {_mean(r['busy_cores_gap_mean'])}",
                fmt.percent(r["saturated_gap_share"]),
                " / ".join(
                    fmt.percent(r[c])
                    for c in (
                        "feeding_running_share",
                        "feeding_waiting_share",
                        "feeding_descheduled_share",
                    )
                ),
                VERDICTS.get(str(r["verdict"]), (str(r["verdict"]),) * 2)[1 if lang == "zh" else 0],
            )
            for r in result.hosts.iter_rows(named=True)
        ),
        note=in_lang(
            lang,
            "Nsight Systems records context switches only for the profiled processes' threads: a core's busy share is the time it ran "
            "one of them. Time a core ran other programs, or idled, is not distinguished, so a low share never means an idle core. "
            "Gap time is the union of the host's GPUs' gaps. Waiting = in a CUDA synchronizing call, a GIL-signature wait or another "
            "blocking OS call (a spinning wait is also on CPU); off CPU = switched out outside any traced call.",
            "Nsight Systems 只记录被分析进程线程的上下文切换：某个核的忙碌占比是它运行这些线程的时间。核运行其他程序与空闲的时间无法区分，"
            "因此占比低并不表示核空闲。间隙时间是该主机各卡间隙的并集。等待 = 处于 CUDA 同步调用、GIL 特征等待或其他阻塞型系统调用中"
            "（自旋等待同时也在 CPU 上）；不在 CPU 上 = 在任何被追踪的调用之外被调度出 CPU。",
        ),
    )
    threads = Table(
        title=in_lang(
            lang, "Feeding threads during the gaps they ended", "发射线程在其结束的间隙中的状态"
        ),
        columns=(
            "GPU",
            in_lang(lang, "thread (pid/tid)", "线程（pid/tid）"),
            in_lang(lang, "gaps", "间隙数"),
            in_lang(lang, "gap time", "间隙时间"),
            in_lang(lang, "on CPU", "在 CPU 上"),
            in_lang(lang, "waiting", "等待"),
            in_lang(lang, "off CPU outside any call", "不在 CPU 上且不在调用中"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                f"{r['pid']}/{r['tid']}",
                fmt.count(r["gaps"]),
                fmt.duration(r["gap_ns"]),
                fmt.percent(r["running_share"]),
                fmt.percent(r["waiting_share"]),
                fmt.percent(r["descheduled_share"]),
            )
            for r in result.threads.iter_rows(named=True)
        ),
    )
    cores = result.cores.sort(["host", "gap_busy_share", "cpu"], descending=[False, True, False])
    core_table = Table(
        title=in_lang(
            lang,
            "Busiest cores (time running the profiled processes)",
            "最忙的 CPU 核（运行被分析进程的时间）",
        )
        + named,
        columns=(
            *(() if one else (in_lang(lang, "host", "主机"),)),
            "CPU",
            in_lang(lang, "share of window", "占时间窗"),
            in_lang(lang, "share of gap time", "占间隙时间"),
        ),
        rows=tuple(
            (
                *(() if one else (str(r["host"]),)),
                str(r["cpu"]),
                fmt.percent(r["busy_share"]),
                fmt.percent(r["gap_busy_share"]),
            )
            for r in cores.group_by("host", maintain_order=True)
            .head(CORE_ROWS)
            .iter_rows(named=True)
        ),
    )
    return Section(key="cpu", title=TITLES["cpu"][lang], tables=(hosts, threads, core_table))


def _mean(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def memory_section(analysis: Analysis, lang: Lang) -> Section:
    result = analysis.memory
    if result is None:
        return Section(
            key="memory",
            title=TITLES["memory"][lang],
            unavailable=unavailable_text(analysis.unavailable, "memory", lang),
        )
    per = result.per_gpu.sort("gpu")
    table = Table(
        title=in_lang(lang, "Per GPU, over its window", "逐卡（在各自时间窗内）"),
        columns=(
            "GPU",
            in_lang(lang, "capacity", "容量"),
            in_lang(lang, "in use at window start", "时间窗起点占用"),
            in_lang(lang, "peak (share of capacity), first at", "峰值（占容量），首次出现"),
            in_lang(lang, "mean share", "平均占比"),
            in_lang(lang, "window with ≥90% in use", "占用 ≥90% 的时间窗占比"),
            in_lang(
                lang,
                "gaps starting ≥90% full (share of gap time)",
                "开始于 ≥90% 占用的间隙（占间隙时间）",
            ),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                fmt.nbytes(r["capacity_bytes"]),
                fmt.nbytes(r["start_bytes"]),
                f"{fmt.nbytes(r['peak_bytes'])} ({fmt.percent(r['peak_share'])}), {fmt.duration(r['peak_ns'], 4)}",
                fmt.percent(r["mean_share"]),
                fmt.percent(r["near_full_share"]),
                f"{fmt.count(r['near_full_gaps'])} ({fmt.percent(r['near_full_gap_share'])})",
            )
            for r in per.iter_rows(named=True)
        ),
        note=in_lang(
            lang,
            "In use = device memory allocated minus freed by the profiled processes since the capture began "
            "(CUDA_GPU_MEMORY_USAGE_EVENTS): allocations made before the capture and other processes' memory are not seen, "
            "so it is a lower bound. A caching allocator (PyTorch, a KV-cache pool) shows what it reserved.",
            "占用 = 采集开始后被分析进程分配减去释放的显存（CUDA_GPU_MEMORY_USAGE_EVENTS）：采集前的分配与其他进程的显存不可见，"
            "因此是下限。缓存分配器（PyTorch、KV cache 池）显示的是它预留的显存。",
        ),
    )
    capacity = {int(r["gpu"]): r["capacity_bytes"] for r in per.iter_rows(named=True)}
    gpu_ids = [g for g in per["gpu"].to_list() if capacity.get(int(g))]
    series: tuple[SeriesView, ...] = ()
    if gpu_ids:
        rows = result.series
        series = (
            SeriesView(
                title=in_lang(
                    lang, "device memory in use, share of capacity", "显存占用，占容量比例"
                ),
                y_label=in_lang(lang, "in use", "占用"),
                y_kind="share",
                gpu_labels=tuple(f"GPU {g}" for g in gpu_ids),
                x_ns=tuple(
                    tuple(int(v) for v in rows.filter(pl.col("gpu") == g)["bin_start_ns"].to_list())
                    for g in gpu_ids
                ),
                y=tuple(
                    tuple(
                        round(int(v) / capacity[int(g)], 4)
                        for v in rows.filter(pl.col("gpu") == g)["in_use_bytes"].to_list()
                    )
                    for g in gpu_ids
                ),
            ),
        )
    return Section(key="memory", title=TITLES["memory"][lang], tables=(table,), series=series)

"""Rules on launch overhead and launch configuration (docs/findings.md).

* ``launch-bound``: a GPU whose kernels are mostly under 10 µs and which spends a
  large share of its window in launch-scale gaps (< 10 µs) between them
  (:mod:`nsysan.analyze.launch`). It names the launch configuration of the top
  kernel when that is a single block or sub-warp blocks.
* ``launch-config``: the top kernels of a GPU launched with one thread per block,
  fewer than a warp per block, or a single block, holding a notable share of its
  kernel time.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import gpu_list, span
from nsysan.diagnose.resource_facts import ConfigFact, LaunchFacts
from nsysan.report.fmt import count, duration, percent, rate

CONFIG_TIME_SHARE = 0.10  # flagged configurations holding this share of a GPU's kernel time
CONFIG_WARNING_SHARE = 0.50  # ... a warning from this share on (info below)
SOURCE = "docs/metrics/launch.md"


def _ev(metric: str, label: str, value: float | int | None, display: str) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=SOURCE)


def dims(d: tuple[int, int, int]) -> str:
    """(1024, 1, 1) → "1024×1×1"."""
    return "×".join(str(v) for v in d)


def _rate(per_s: float | None) -> str:
    return rate(per_s)


def _why(c: ConfigFact, sms: int | None) -> tuple[str, str]:
    """What is wrong with one launch shape, in words."""
    threads = c.block[0] * c.block[1] * c.block[2]
    if c.one_thread_blocks:
        return (
            "one thread per block, so one lane of each 32-lane warp works",
            "每个线程块只有一个线程，每个 32 线程的 warp 只有一条通道在工作",
        )
    if c.sub_warp_blocks:
        return (
            f"{threads} threads per block, less than one 32-thread warp",
            f"每块 {threads} 个线程，不足一个 32 线程的 warp",
        )
    of_en = f" of {sms}" if sms else ""
    of_zh = f"（共 {sms} 个）" if sms else ""
    return (
        f"a single block, which runs on one SM{of_en}",
        f"只有一个线程块，只能在一个 SM 上运行{of_zh}",
    )


def _shape(c: ConfigFact, sms: int | None) -> tuple[str, str]:
    en, zh = _why(c, sms)
    grid, block = dims(c.grid), dims(c.block)
    return (
        f"{c.kernel} (grid {grid}, block {block}: {en})",
        f"{c.kernel}（网格 {grid}，线程块 {block}：{zh}）",
    )


def launch_bound(f: Facts) -> Finding | None:
    """Tiny kernels with µs gaps between them: the launch path sets the pace."""
    hit: list[LaunchFacts] = [g for g in f.resources.launch if g.launch_bound]
    if not hit:
        return None
    where = gpu_list(g.gpu for g in hit)
    kernels = sum(g.kernels for g in hit)
    small = span(g.small_kernel_share or 0.0 for g in hit)
    med = span((g.kernel_p50_ns or 0 for g in hit), duration)
    rate = span((g.launch_rate or 0.0 for g in hit), _rate)
    gaps = span(g.short_gap_share or 0.0 for g in hit)
    ids = {g.gpu for g in hit}
    shapes = [
        c
        for c in f.resources.configs
        if c.gpu in ids
        and c.time_share >= CONFIG_TIME_SHARE
        and (c.single_block or c.sub_warp_blocks)
    ]
    cfg_en = cfg_zh = ""
    if shapes:
        top = max(shapes, key=lambda c: c.time_share)
        en, zh = _shape(top, (f.resources.sm_count or {}).get(top.gpu))
        cfg_en = f" Its top kernel is also small in shape: {en}."
        cfg_zh = f"其主要内核的形状也很小：{zh}。"
    sm = [
        g
        for g in f.per_gpu
        if g.gpu in ids and g.sm_active_share is not None and g.gr_active_share is not None
    ]
    if sm:
        active_sm = span(g.sm_active_share or 0.0 for g in sm)
        active_gr = span(g.gr_active_share or 0.0 for g in sm)
        cfg_en += f" SM Active is {active_sm} while GR Active shows {active_gr}."
        cfg_zh += f"SM Active 仅 {active_sm}，而 GR Active 显示 {active_gr}。"
    evidence: list[EvidenceItem] = []
    for g in hit[:4]:
        lab = f"GPU {g.gpu}"
        evidence += [
            _ev("kernels", f"kernels, {lab}", g.kernels, count(g.kernels)),
            _ev("small_kernel_share", f"kernels under 10 µs, {lab}", g.small_kernel_share, percent(g.small_kernel_share)),
            _ev("kernel_p50", f"median kernel, {lab}", g.kernel_p50_ns, duration(g.kernel_p50_ns)),
            _ev("launch_rate", f"launches per second, {lab}", g.launch_rate, _rate(g.launch_rate)),
            _ev("short_gap_share", f"window in gaps under 10 µs, {lab}", g.short_gap_share, percent(g.short_gap_share)),
        ]  # fmt: skip
    return Finding(
        rule_id="launch-bound",
        severity="warning",
        seed_section="4.4",
        cause_category="launch overhead of small kernels",
        impact_share=max(g.short_gap_share or 0.0 for g in hit),
        title={"en": "Launch-bound: tiny kernels, µs gaps", "zh": "发射受限：微小内核与微秒级间隙"},
        claim={
            "en": f"{where} {'is' if len(hit) == 1 else 'are'} launch-bound: {small} of {count(kernels)} kernels run under 10 µs "
            f"(median {med}) at {rate} launches per second, and {gaps} of the window is gaps under 10 µs between back-to-back kernels: "
            f"the launch path, not GPU work, sets the pace.{cfg_en}",
            "zh": f"{where} 受发射开销限制：{count(kernels)} 个内核中 {small} 短于 10 µs（中位数 {med}），每秒发射 {rate} 次，"
            f"时间窗内 {gaps} 是相邻内核之间不足 10 µs 的间隙：决定节奏的是发射路径，而不是 GPU 计算。{cfg_zh}",
        },
        recommendation={
            "en": "Capture the repeated launch sequence once in a CUDA graph (cudaGraphLaunch, torch.cuda.CUDAGraph), fuse the small kernels, "
            "or give each launch more work (larger batches or grids).",
            "zh": "把重复的发射序列用 CUDA Graph 一次性捕获（cudaGraphLaunch、torch.cuda.CUDAGraph），融合小内核，"
            "或让每次发射承担更多工作（更大的批量或网格）。",
        },
        evidence=tuple(evidence),
    )


def launch_config(f: Facts) -> Finding | None:
    """Top kernels launched with one-thread blocks, sub-warp blocks or a single block."""
    hit = [c for c in f.resources.configs if c.time_share >= CONFIG_TIME_SHARE]
    if not hit:
        return None
    by_gpu: dict[int, float] = {}
    for c in hit:
        by_gpu[c.gpu] = by_gpu.get(c.gpu, 0.0) + c.time_share
    where = gpu_list(by_gpu)
    share = span(by_gpu.values())
    # Kernels grouped by shape, most time first (the same kernels repeat across ranks).
    sms = f.resources.sm_count or {}
    groups: dict[tuple[tuple[int, int, int], tuple[int, int, int]], list[ConfigFact]] = {}
    for c in sorted(hit, key=lambda c: -c.time_share):
        groups.setdefault((c.grid, c.block), []).append(c)
    texts = []
    for (grid, block), members in list(groups.items())[:3]:
        names = list(dict.fromkeys(c.kernel for c in members))
        shown = ", ".join(names[:4]) + (f" (+{len(names) - 4})" if len(names) > 4 else "")
        en, zh = _why(members[0], sms.get(members[0].gpu))
        texts.append(
            (
                f"{shown} with grid {dims(grid)} and block {dims(block)} ({en})",
                f"{shown}，网格 {dims(grid)}、线程块 {dims(block)}（{zh}）",
            )
        )
    more = len(groups) - len(texts)
    more_en = f"; and {more} more shape{'s' if more > 1 else ''}" if more > 0 else ""
    more_zh = f"；另有 {more} 种形状" if more > 0 else ""
    named = sorted(hit, key=lambda c: -c.time_share)[:4]
    narrow = [c for c in hit if c.one_thread_blocks or c.sub_warp_blocks]
    kind_en = (
        "one thread per block"
        if all(c.one_thread_blocks for c in hit)
        else "blocks smaller than a warp or a single block"
    )
    kind_zh = (
        "每个线程块只有一个线程"
        if all(c.one_thread_blocks for c in hit)
        else "线程块小于一个 warp 或只有一个线程块"
    )
    evidence = [
        _ev(
            "config_time_share",
            f"kernel time, {c.kernel} (grid {dims(c.grid)}, block {dims(c.block)}), GPU {c.gpu}",
            c.time_share,
            percent(c.time_share),
        )
        for c in named
    ]
    return Finding(
        rule_id="launch-config",
        # Narrow blocks waste lanes on every SM: a warning when they hold most of the time.
        severity="warning" if narrow and max(by_gpu.values()) >= CONFIG_WARNING_SHARE else "info",
        seed_section="4.4",
        cause_category="launch configuration",
        impact_share=max(by_gpu.values()),
        title={"en": "Kernels launched too narrow", "zh": "内核发射配置过窄"},
        claim={
            "en": f"On {where}, kernels launched with {kind_en} take {share} of kernel time: "
            + "; ".join(en for en, _ in texts)
            + f"{more_en}.",
            "zh": f"{where} 上，{kind_zh}的内核占内核时间的 {share}："
            + "；".join(zh for _, zh in texts)
            + f"{more_zh}。",
        },
        recommendation={
            "en": "Launch at least one warp per block (typically 128–256 threads) and enough blocks to fill every SM; for compiler-generated "
            "kernels (OpenACC/OpenMP offload), set the vector length or thread limit of the loop.",
            "zh": "每个线程块至少发射一个 warp（通常 128–256 个线程），并让线程块数足以占满所有 SM；对编译器生成的内核"
            "（OpenACC/OpenMP 卸载），设置循环的向量长度或线程上限。",
        },
        evidence=tuple(evidence),
    )


LAUNCH_RULES = (launch_bound, launch_config)
LAUNCH_RULE_IDS = ("launch-bound", "launch-config")

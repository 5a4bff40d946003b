"""Hand-built report view models for the renderer tests (no trace, no analysis).

``sample_view()`` tells the seed's section 4.5 case (4×A100, DP=4, "false balance")
with every kind of block the report has; ``hostile=True`` puts script-breaking
strings in a kernel name, NVTX text, a GPU name and a file path. Numbers are made
up but consistent; the timeline comes from a seeded generator so it is identical
on every run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Literal

from nsysan.report import fmt
from nsysan.report.viewmodel import (
    AppendixView,
    Evidence,
    FindingView,
    HistogramView,
    MatrixView,
    MythView,
    ReportView,
    Section,
    SeriesView,
    StackedSharesView,
    Table,
    TimelineView,
)

# Each string tries a different way out of its context: a script element, the end of
# an enclosing <script>, and an HTML attribute.
HOSTILE = (
    "<script>alert(1)</script>",
    "</script>",
    '"><img src=x onerror=alert(1)>',
)
HOSTILE_TEXT = " ".join(HOSTILE)

N_GPUS = 4
N_BINS = 240
BIN_NS = 25_000_000  # 6 s of trace in 25 ms bins
T0_NS = 1_700_000_000_000_000_000

SECTION_KEYS = (
    "gpus",
    "timeline",
    "gaps",
    "stagger",
    "host",
    "communication",
    "bound",
    "contention",
    "pipeline",
)
SECTION_ROWS = {"gpus": N_GPUS}  # rows of the first table of a section
CHART_COUNT = 8  # timeline, histogram, matrix, 3 stacked, 2 series


def sample_view(hostile: bool = False, lang: Literal["en", "zh"] = "en") -> ReportView:
    """A rich, made-up report: every block type, one unavailable section."""
    bad = f" {HOSTILE_TEXT}" if hostile else ""
    gpus = tuple(f"GPU {i} (A100-SXM4-80GB, node1:{i:02x}:00.0)" for i in range(N_GPUS))
    if hostile:
        gpus = (gpus[0] + bad, *gpus[1:])
    kernel = "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn" + bad
    nvtx_tokenize = "tokenizer.encode" + bad
    path = f"/data/run-17/rank0{bad}.sqlite"

    busy = (0.65, 0.66, 0.64, 0.65)
    gap_share = tuple(1 - b for b in busy)
    per_gpu = Table(
        columns=(
            "GPU",
            "dashboard util.",
            "busy share",
            "gap share",
            "gaps",
            "longest gap",
            "window",
        ),
        rows=tuple(
            (
                gpus[i],
                fmt.percent(0.87 + 0.01 * (i % 3)),
                fmt.percent(busy[i]),
                fmt.percent(gap_share[i]),
                fmt.count(41_200 + 317 * i),
                fmt.duration(118_000_000 + 9_000_000 * i),
                fmt.duration(6_000_000_000),
            )
            for i in range(N_GPUS)
        ),
        note="Dashboard utilization = share of 100 ms samples with any kernel running "
        "(what nvidia-smi shows).",
    )

    timeline, gaps = _timeline(gpus)
    sections = (
        Section(
            key="gpus",
            title="Per-GPU summary",
            paragraphs=(
                "The dashboard view is balanced and high on every GPU; the timeline view is not.",
            ),
            tables=(per_gpu,),
        ),
        Section(
            key="timeline",
            title="Timeline",
            paragraphs=("Gaps come in bursts and move from GPU to GPU.",),
            timeline=TimelineView(
                gpu_labels=gpus,
                bin_start_ns=tuple(T0_NS + b * BIN_NS for b in range(N_BINS)),
                bin_ns=BIN_NS,
                busy_share=timeline,
                gaps=gaps,
                note=f"1,482,113 kernels aggregated into {N_BINS} bins of "
                f"{fmt.duration(BIN_NS)} each; the longest {len(gaps)} gaps drawn.",
            ),
        ),
        Section(
            key="gaps",
            title="Gap-size distribution",
            paragraphs=("Most gap time is in gaps of 10–100 ms: far above launch latency.",),
            histogram=HistogramView(
                bucket_labels=(
                    "<10 µs",
                    "10–100 µs",
                    "100 µs–1 ms",
                    "1–10 ms",
                    "10–100 ms",
                    "≥100 ms",
                ),
                gpu_labels=gpus,
                counts=tuple(
                    (31_000 + 50 * i, 6_100, 2_400, 1_200, 480, 6 + i) for i in range(N_GPUS)
                ),
                time_ns=tuple(
                    (
                        95_000_000,
                        210_000_000,
                        640_000_000,
                        1_900_000_000 + i * 1e7,
                        3_100_000_000,
                        860_000_000,
                    )
                    for i in range(N_GPUS)
                ),
            ),
        ),
        Section(
            key="stagger",
            title="Stagger between GPUs",
            paragraphs=(
                "GPUs are idle together far less often than independence predicts: "
                "their gaps avoid each other (staggered), which points to "
                "per-process host-side stalls.",
            ),
            matrix=MatrixView(
                labels=gpus,
                values=tuple(
                    tuple(
                        None if i == j else round(0.42 + 0.03 * ((i + j) % 3), 2)
                        for j in range(N_GPUS)
                    )
                    for i in range(N_GPUS)
                ),
                title="Observed / expected co-idle time",
                value_label="observed / expected",
            ),
        ),
        Section(
            key="host",
            title="Host-side causes of gap time",
            paragraphs=("What the process feeding each GPU was doing while the GPU was idle.",),
            stacked=(
                StackedSharesView(
                    gpu_labels=gpus,
                    categories=(
                        f"NVTX: {nvtx_tokenize}",
                        "NVTX: sampling",
                        "blocking OS call (GIL/queue)",
                        "late launch",
                        "CUDA sync",
                        "GPU-side wait",
                        "unattributed",
                    ),
                    shares=tuple(
                        (0.31 - 0.01 * i, 0.22, 0.18 + 0.01 * i, 0.12, 0.05, 0.04, 0.08)
                        for i in range(N_GPUS)
                    ),
                    title="Gap time by host-side cause",
                ),
            ),
            tables=(
                Table(
                    columns=("NVTX range", "gap time inside", "share of gap time"),
                    rows=(
                        (nvtx_tokenize, "1.92 s", "30.5%"),
                        ("sampling", "1.38 s", "22.0%"),
                        ("detokenize", "0.21 s", "3.3%"),
                    ),
                ),
            ),
        ),
        Section(
            key="communication",
            title="Communication",
            paragraphs=(
                "NCCL kernels take a small share of busy time; little of it overlaps compute.",
            ),
            stacked=(
                StackedSharesView(
                    gpu_labels=gpus,
                    categories=("compute", "AllReduce", "AllGather", "other NCCL"),
                    shares=tuple((0.93, 0.05, 0.015, 0.005) for _ in range(N_GPUS)),
                    title="Busy time by kind",
                ),
            ),
            tables=(
                Table(
                    columns=("collective", "calls", "time", "skew p50", "skew p99", "est. wait"),
                    rows=(
                        ("AllReduce", "1,204", "152 ms", "84.0 µs", "2.10 ms", "31.2 ms"),
                        ("AllGather", "301", "44.1 ms", "60.2 µs", "1.30 ms", "6.40 ms"),
                    ),
                ),
            ),
        ),
        Section(
            key="bound",
            title="Memory- vs compute-bound",
            stacked=(
                StackedSharesView(
                    gpu_labels=gpus,
                    categories=("memory", "compute", "balanced", "latency", "unclassified"),
                    shares=tuple((0.46, 0.31, 0.08, 0.1, 0.05) for _ in range(N_GPUS)),
                    title="Kernel time by bound class",
                ),
            ),
            tables=(
                Table(
                    columns=("kernel", "class", "memory SOL", "compute SOL", "GPU time"),
                    rows=(
                        (kernel, "compute", "41.0%", "88.2%", "1.21 s"),
                        ("flash_fwd_kernel", "memory", "86.5%", "52.1%", "0.94 s"),
                        ("rms_norm_kernel", "memory", "91.0%", "12.4%", "0.31 s"),
                    ),
                    note="Classes from Nsight Compute (SOLBottleneck rule).",
                ),
            ),
        ),
        Section(
            key="contention",
            title="Contention signals",
            series=(
                _series(gpus, "SM clock", "MHz", lambda i, k: 1410 - (i == 2) * 150 * (k > 30)),
                _series(
                    gpus,
                    "Busy share per 250 ms window",
                    "busy share",
                    lambda i, k: round(0.65 + 0.05 * math.sin((k + 6 * i) / 3), 3),
                ),
            ),
        ),
        Section(
            key="pipeline",
            title="Pipeline bubbles",
            unavailable="No NVTX ranges name pipeline stages in this trace.",
        ),
    )

    findings = (
        FindingView(
            rule_id="false-balance",
            severity="critical",
            title="False balance: busy on the dashboard, idle on the timeline",
            claim="Every GPU shows 87–89% utilization on the dashboard, yet 34–36% of each "
            "GPU's window is gaps, staggered across GPUs.",
            cause_category="4.4 resource contention: CPU-side scheduling",
            evidence=(
                Evidence("dashboard utilization, mean", "88.0%", "docs/metrics/dashboard.md"),
                Evidence("gap share, mean", "35.0%", "docs/metrics/gaps.md#gap-share"),
                Evidence(f"gap share, {gpus[0]}", "35.0%", "docs/metrics/gaps.md#gap-share"),
                Evidence("co-idle observed / expected", "0.45", "docs/metrics/stagger.md"),
            ),
            recommendation="Move tokenization and sampling out of the Python process that "
            "feeds each GPU (C++/Rust tokenizer, more CPU cores per rank).",
        ),
        FindingView(
            rule_id="host-bound-gaps",
            severity="warning",
            title="Gap time is spent in tokenizer and sampling",
            claim=f"53% of gap time falls inside the NVTX ranges '{nvtx_tokenize}' and "
            "'sampling'; 18% in blocking OS calls (a GIL signature).",
            cause_category="4.4 resource contention: CPU-side scheduling",
            evidence=(
                Evidence(f"gap time in NVTX '{nvtx_tokenize}'", "30.5%", "docs/metrics/host.md"),
                Evidence("gap time in blocking OS calls", "18.7%", "docs/metrics/host.md"),
            ),
            recommendation="Profile the tokenizer and sampler; run them off the GIL.",
        ),
        FindingView(
            rule_id="memory-bound-share",
            severity="info",
            title="Memory-bound kernels dominate kernel time",
            claim=f"46% of kernel time is memory-bound; the top compute kernel is {kernel}.",
            cause_category="4.4 resource contention: memory bandwidth",
            evidence=(
                Evidence("memory-bound share of kernel time", "46.0%", "docs/metrics/bound.md"),
            ),
            recommendation="",
        ),
    )
    myths = (
        MythView(
            "only-gpu-utilization",
            "Only watching GPU utilization",
            "holds",
            "Holds: utilization reads 88% while 35% of the time is gaps.",
            "The dashboard samples 'any kernel running' every 100 ms and hides gaps "
            "shorter than that.",
        ),
        MythView(
            "dp-is-balanced",
            "Assuming data parallelism is balanced by nature",
            "does_not_hold",
            "Does not hold here: per-GPU busy time differs by under 3%.",
            "The imbalance is in time, not in total work.",
        ),
        MythView(
            "ignore-topology",
            "Ignoring communication topology",
            "does_not_hold",
            "Does not hold: NCCL takes 6.5% of busy time.",
            "Collective skew is small next to the gaps.",
        ),
        MythView(
            "static-split",
            "Never re-balancing a static split",
            "cannot_tell",
            "Cannot tell: DP=4 has no static split of the model.",
            "No tensor- or pipeline-parallel kernels were found.",
        ),
    )
    appendix = AppendixView(
        tool_version="0.1.0",
        inputs=Table(
            columns=("file", "export", "host", "UTC start", "offset"),
            rows=tuple(
                (
                    path if r == 0 else f"/data/run-17/rank{r}.sqlite",
                    "2024.5.1",
                    "node1",
                    f"2025-03-04 10:12:0{r}Z",
                    f"+{r * 3} ms",
                )
                for r in range(N_GPUS)
            ),
        ),
        settings=Table(
            columns=("setting", "value"),
            rows=(
                ("window", "per GPU, first to last GPU operation"),
                ("busy includes", "kernels"),
                ("skip warm-up", "0 s"),
                ("timeline bins", str(N_BINS)),
            ),
        ),
        missing=(
            "no NVLink/PCIe counters: bandwidth series unavailable",
            "no OS runtime trace on rank 3" + bad,
        ),
        notes=("GPU identity is host + PCI bus id, not the CUDA ordinal.",),
    )
    headline = (
        "False balance: all 4 GPUs look 87–89% busy, but 35% of each GPU's time is gaps, "
        "staggered across GPUs and caused on the CPU side (tokenizer and sampling)."
    )
    if hostile:
        headline += f" Top kernel: {kernel}."
    return ReportView(
        title=f"nsysan report: {path}" if hostile else "nsysan report: run-17 (4 ranks)",
        lang=lang,
        headline=headline,
        headline_severity="critical",
        findings=findings,
        sections=sections,
        myths=myths,
        recommendations=(
            "Replace the Python tokenizer with a native one and give each rank more CPU "
            "cores; re-measure: the case study went from 35% to 8% gaps.",
            "Keep sampling on the GPU or in a separate process that does not hold the GIL.",
            "Gate CI on the gap share from `nsysan report --json`, not on utilization.",
        ),
        appendix=appendix,
        extra={"analysis time": "3.2 s"},
    )


def no_gpu_view(lang: Literal["en", "zh"] = "en") -> ReportView:
    """The short report for a CPU-only trace."""
    return ReportView(
        title="nsysan report: cpu-only.sqlite",
        lang=lang,
        headline="The trace has no GPU work: nothing to diagnose about GPU balance.",
        headline_severity="info",
        findings=(),
        sections=(),
        myths=(),
        recommendations=(),
        appendix=AppendixView(
            tool_version="0.1.0",
            inputs=Table(columns=("file", "export"), rows=(("cpu-only.sqlite", "2023.4.1"),)),
            settings=Table(columns=("setting", "value"), rows=(("window", "per GPU"),)),
            missing=(
                "no CUPTI kernel table: the trace was recorded without CUDA tracing",
                "no CUDA API trace: host attribution unavailable",
            ),
            notes=(),
        ),
        no_gpu_work=True,
    )


def _timeline(
    gpus: tuple[str, ...],
) -> tuple[tuple[tuple[float | None, ...], ...], tuple[tuple[int, int, int], ...]]:
    """Busy share per bin with staggered idle bursts; the longest gaps, in ns."""
    rng = random.Random(42)
    rows: list[tuple[float | None, ...]] = []
    gaps: list[tuple[int, int, int]] = []
    for g in range(len(gpus)):
        row: list[float | None] = []
        for b in range(N_BINS):
            # Windows differ per GPU: GPU 3 starts late and GPU 1 ends early.
            if (g == 3 and b < 4) or (g == 1 and b >= N_BINS - 3):
                row.append(None)
                continue
            phase = (b + 9 * g) % 24
            share = 0.08 + 0.1 * rng.random() if phase < 5 else 0.86 + 0.12 * rng.random()
            row.append(round(min(share, 1.0), 3))
        rows.append(tuple(row))
        for k in range(3):
            start_bin = (24 * (2 + 3 * k) - 9 * g) % N_BINS
            start = T0_NS + start_bin * BIN_NS + 2_000_000
            gaps.append((g, start, start + 4 * BIN_NS + 1_000_000 * g))
    return tuple(rows), tuple(gaps)


def _series(
    gpus: tuple[str, ...], title: str, y_label: str, value: Callable[[int, int], float]
) -> SeriesView:
    points = 60
    return SeriesView(
        title=title,
        y_label=y_label,
        gpu_labels=gpus,
        x_ns=tuple(tuple(T0_NS + k * 100_000_000 for k in range(points)) for _ in gpus),
        y=tuple(
            tuple(None if (i == 3 and k < 2) else float(value(i, k)) for k in range(points))
            for i in range(len(gpus))
        ),
    )

"""The report's view model: plain data the HTML (and text) renderers lay out.

Computed from an analysis and its findings by ``nsysan.report.view.build_view``;
rendered by ``nsysan.report.html.render_html``. Nothing here knows about polars,
jinja or plotly, so the numbers a report shows can be tested without parsing HTML.

Text fields are plain text (never pre-escaped HTML): the templates autoescape them.
Numbers meant for display are pre-formatted by ``nsysan.report.fmt`` into ``*_text``
fields next to their raw values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["critical", "warning", "info"]
MythVerdict = Literal["holds", "does_not_hold", "cannot_tell"]


@dataclass(frozen=True)
class Evidence:
    label: str  # "gap share, GPU 2"
    value_text: str  # "35.1%"
    source: str  # the in-page definition it links to: "#def-gaps"
    source_label: str = ""  # that definition's title


@dataclass(frozen=True)
class FindingView:
    rule_id: str  # "false-balance"
    severity: Severity
    title: str
    claim: str  # one sentence with its key numbers
    cause_category: str  # "4.4 resource contention: CPU-side scheduling"
    evidence: tuple[Evidence, ...]
    recommendation: str


@dataclass(frozen=True)
class Table:
    """A rectangular table: header labels and rows of display strings."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    title: str = ""


@dataclass(frozen=True)
class TimelineView:
    """Per-GPU busy share in equal time bins (the aggregated timeline).

    ``busy_share[g][b]`` is the share of bin ``b`` during which GPU ``g`` ran a kernel
    (the busy union); ``None`` where the bin is outside that GPU's window.
    ``gaps`` are the longest gaps drawn on top: ``(gpu_row, start_ns, end_ns)``.
    """

    gpu_labels: tuple[str, ...]
    bin_start_ns: tuple[int, ...]
    bin_ns: int
    busy_share: tuple[tuple[float | None, ...], ...]
    gaps: tuple[tuple[int, int, int], ...]
    note: str  # "N kernels aggregated into B bins of X each; the longest K gaps drawn"
    # Per GPU row (same bins): share of each bin in NCCL kernels / memory copies; a row
    # is None for a GPU without any; empty when no GPU has any.
    nccl_share: tuple[tuple[float | None, ...] | None, ...] = ()
    copy_share: tuple[tuple[float | None, ...] | None, ...] = ()


@dataclass(frozen=True)
class HistogramView:
    """Gap-size distribution: per GPU label, count and total time per size bucket."""

    bucket_labels: tuple[str, ...]  # "<1 µs", "1–10 µs", ...
    gpu_labels: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]  # [gpu][bucket]
    time_ns: tuple[tuple[int, ...], ...]  # [gpu][bucket]


@dataclass(frozen=True)
class MatrixView:
    """A square GPU × GPU matrix (e.g. observed / expected co-idle time)."""

    labels: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    title: str
    value_label: str
    center: float | None = None  # midpoint of a diverging colour scale, if any


@dataclass(frozen=True)
class StackedSharesView:
    """Per GPU, shares of a whole by category (host causes, bound classes, NCCL types)."""

    gpu_labels: tuple[str, ...]
    categories: tuple[str, ...]
    shares: tuple[tuple[float, ...], ...]  # [gpu][category], rows sum to 1 (or 0)
    title: str


@dataclass(frozen=True)
class SeriesView:
    """Time series per GPU (clocks, SM active, per-window busy share)."""

    title: str
    y_label: str
    gpu_labels: tuple[str, ...]
    x_ns: tuple[tuple[int, ...], ...]  # [gpu][point], on the trace timeline
    y: tuple[tuple[float | None, ...], ...]  # [gpu][point]
    # "share": 0..1 values drawn as percent from 0 to 100%; "zero": an axis from 0
    # (clocks); "": autoscaled
    y_kind: str = ""


@dataclass(frozen=True)
class Section:
    """One report section: narrative text, tables and charts, or why it is unavailable."""

    key: str  # anchor id, e.g. "gaps"
    title: str
    paragraphs: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    timeline: TimelineView | None = None
    zoom: TimelineView | None = None  # the same timeline over a short stretch of steady state
    histogram: HistogramView | None = None
    matrix: MatrixView | None = None
    stacked: tuple[StackedSharesView, ...] = ()
    series: tuple[SeriesView, ...] = ()
    unavailable: str = ""  # non-empty: the section has no data, and this says why


@dataclass(frozen=True)
class MythView:
    myth_id: str  # "only-gpu-utilization"
    title: str
    verdict: MythVerdict
    verdict_text: str
    why: str


@dataclass(frozen=True)
class AppendixView:
    tool_version: str
    inputs: Table  # one row per file: path, export version, host, UTC start, offset
    settings: Table  # setting, value
    missing: tuple[str, ...]  # what the trace lacked
    notes: tuple[str, ...]  # identity notes, aggregation notes, plotly size note
    # (anchor id, title, text) of each metric definition the evidence links to
    definitions: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class ReportView:
    title: str
    lang: Literal["en", "zh"]
    headline: str  # the verdict sentence with its key numbers
    headline_severity: Severity
    findings: tuple[FindingView, ...]
    sections: tuple[Section, ...]
    myths: tuple[MythView, ...]
    recommendations: tuple[str, ...]
    appendix: AppendixView
    no_gpu_work: bool = False  # short report: the trace has no GPU activity
    extra: dict[str, str] = field(default_factory=dict)

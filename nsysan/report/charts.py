"""Plotly figures for the HTML report, built from view-model pieces.

Each builder takes one view-model block and returns an HTML fragment (a ``<div>``
plus the ``<script>`` that draws it) made by ``fig.to_html(full_html=False,
include_plotlyjs=False, div_id=...)``; the page embeds plotly.js once. Builders do
no analysis: the timeline arrives already binned. Floats are rounded so the
embedded data stays small, and the ids are the caller's, so output is deterministic.

Text from a trace (GPU names, kernel and NVTX names) is entity-escaped before it
reaches plotly, which renders a subset of HTML tags in labels, and every JSON
string in the fragment's script has ``<``, ``>`` and ``&`` as ``\\u`` escapes, so
no label can close the ``<script>`` element.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nsysan.report import fmt
from nsysan.report.i18n import t
from nsysan.report.viewmodel import (
    HistogramView,
    MatrixView,
    SeriesView,
    StackedSharesView,
    TimelineView,
)

FONT = (
    'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, '
    '"PingFang SC", "Hiragino Sans GB", "Microsoft YaHei", "Noto Sans CJK SC", sans-serif'
)
INK, MUTED, GRID, AXIS = "#1d2939", "#667085", "#eaecf0", "#d0d5dd"
GAP_COLOUR = "#d92d20"

# One colour per GPU row, the same in every chart (Okabe–Ito, colour-blind safe).
GPU_PALETTE = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#7f7f7f",
    "#f0e442",
)
# Categories of stacked shares (host causes, bound classes, collective types).
CATEGORY_PALETTE = (
    "#3b6fb6",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#9c755f",
    "#bab0ac",
    "#ff9da7",
)
# Busy share 0 → pale (idle stands out as a hole), 1 → dark blue.
BUSY_SCALE = ((0.0, "#fdf1e1"), (0.35, "#f6c48f"), (0.7, "#6a9fd4"), (1.0, "#17365d"))
# NCCL and copies get their own hues, so communication never reads as compute.
NCCL_SCALE = ((0.0, "#f7f4fb"), (0.5, "#b49ad6"), (1.0, "#5b2a86"))
COPY_SCALE = ((0.0, "#f2faf4"), (0.5, "#8fd1a0"), (1.0, "#1b6b35"))
MATRIX_SCALE = ((0.0, "#f7fbff"), (0.5, "#9ecae1"), (1.0, "#08519c"))

CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
    "toImageButtonOptions": {"format": "png", "scale": 2},
}

_TIME_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"), (1, "ns"))
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SCRIPT = re.compile(r"(<script[^>]*>)(.*?)(</script>)", re.DOTALL)


def timeline_chart(view: TimelineView, div_id: str, lang: str = "en") -> str:
    """Heatmap of busy share per GPU × time bin, NCCL and copies on their own rows.

    One heatmap row (trace) per GPU, then, for a GPU that has them, a row of NCCL
    kernels and a row of memory copies in their own colours, on a numeric y axis so
    the gap markers can sit at the top edge of their GPU's row. The x axis is the trace
    timeline (the values ``--start``/``--end`` take). Equal bins are sent as ``x0``/``dx``.
    """
    starts = list(view.bin_start_ns)
    edges = [*starts, starts[-1] + view.bin_ns] if starts else [0, view.bin_ns or 1]
    scale, unit = _time_unit(edges[-1])
    digits = _decimals(view.bin_ns / scale if view.bin_ns else 1.0) + max(
        0, math.ceil(math.log10(max(edges[-1] / scale, 1)))
    )
    x_edges = [round(e / scale, digits) for e in edges]
    equal_bins = all(b - a == view.bin_ns for a, b in zip(starts, starts[1:], strict=False))
    x_axis: dict[str, Any] = (
        {"x0": (edges[0] + view.bin_ns / 2) / scale, "dx": view.bin_ns / scale}
        if equal_bins
        else {"x": x_edges}
    )
    busy = t("chart.busy_share", lang)
    rows: list[tuple[str, tuple[float | None, ...], str, str]] = []  # label, shares, axis, kind
    gpu_row: dict[int, int] = {}
    for g, shares in enumerate(view.busy_share):
        label = view.gpu_labels[g] if g < len(view.gpu_labels) else str(g)
        gpu_row[g] = len(rows)
        rows.append((label, shares, "coloraxis", busy))
        nccl = view.nccl_share[g] if g < len(view.nccl_share) else None
        if nccl is not None:
            rows.append((f"{label} · NCCL", nccl, "coloraxis2", t("chart.nccl_share", lang)))
        copies = view.copy_share[g] if g < len(view.copy_share) else None
        if copies is not None:
            rows.append(
                (
                    f"{label} · {t('chart.copies', lang)}",
                    copies,
                    "coloraxis3",
                    t("chart.copy_share", lang),
                )
            )

    fig = go.Figure()
    for r, (label, shares, axis, what) in enumerate(rows):
        name = _text(label)
        fig.add_trace(
            go.Heatmap(
                z=[[_round(v, 3) for v in shares]],
                y=[r],
                **x_axis,
                coloraxis=axis,
                hoverongaps=False,
                ygap=3,
                name=name,
                hovertemplate=f"{name}<br>t ≈ %{{x:.6g}} {unit}<br>{_text(what)}: %{{z:.1%}}<extra></extra>",
            )
        )
    gap_x: list[float] = []
    gap_y: list[float] = []
    gap_text: list[str] = []
    # Given to the layout at once: add_shape checks the whole list again each time.
    shapes: list[dict[str, Any]] = []
    for g, start_ns, end_ns in view.gaps:
        if g not in gpu_row:
            continue
        row = gpu_row[g]
        x0, x1 = start_ns / scale, end_ns / scale
        shapes.append(
            {
                "type": "rect",
                "x0": x0,
                "x1": x1,
                "y0": row - 0.44,
                "y1": row + 0.44,
                "line": {"color": GAP_COLOUR, "width": 1.2},
                "fillcolor": "rgba(217,45,32,0.10)",
                "layer": "above",
            }
        )
        gap_x.append(round((x0 + x1) / 2, digits + 1))
        gap_y.append(row - 0.5)
        gap_text.append(
            f"{_text(rows[row][0])}<br>{t('chart.gap', lang)}: {_text(fmt.duration(end_ns - start_ns))}"
            f"<br>{_text(fmt.duration(start_ns, 4))} – {_text(fmt.duration(end_ns, 4))}"
        )
    if shapes:
        fig.update_layout(shapes=shapes)
    if gap_x:
        fig.add_trace(
            go.Scatter(
                x=gap_x,
                y=gap_y,
                mode="markers",
                cliponaxis=False,
                marker={
                    "symbol": "triangle-down",
                    "size": 9,
                    "color": GAP_COLOUR,
                    "line": {"width": 1, "color": "#ffffff"},
                },
                text=gap_text,
                hovertemplate="%{text}<extra></extra>",
                name=t("chart.longest_gaps", lang),
                showlegend=True,
            )
        )
    n = len(rows)

    def colour_axis(
        scale_stops: tuple[tuple[float, str], ...], title: str, show: bool, x: float
    ) -> dict[str, Any]:
        return {
            "colorscale": [list(stop) for stop in scale_stops],
            "cmin": 0,
            "cmax": 1,
            "showscale": show,
            "colorbar": {
                "title": {"text": _text(title), "side": "right"},
                "tickformat": ".0%",
                "thickness": 10,
                "len": 0.9,
                "x": x,
                "outlinewidth": 0,
            },
        }

    fig.update_layout(
        _layout(height=max(220, 100 + 40 * n)),
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        coloraxis=colour_axis(BUSY_SCALE, busy, True, 1.01),
        # One colour bar: NCCL and copy rows share its 0–100% scale in their own hue.
        coloraxis2=colour_axis(NCCL_SCALE, t("chart.nccl_share", lang), False, 1.09),
        coloraxis3=colour_axis(COPY_SCALE, t("chart.copy_share", lang), False, 1.09),
    )
    fig.update_xaxes(
        title_text=t("chart.trace_time", lang, unit=unit),
        showgrid=False,
        range=[x_edges[0], x_edges[-1]],
    )
    fig.update_yaxes(
        range=[n - 0.5, -0.62],
        showgrid=False,
        tickmode="array",
        tickvals=list(range(n)),
        ticktext=[_tick(r[0]) for r in rows],
    )
    return _div(fig, div_id)


def histogram_chart(view: HistogramView, div_id: str, lang: str = "en") -> str:
    """Grouped bars per size bucket: number of gaps (left) and their total time (right)."""
    buckets = [_text(label) for label in view.bucket_labels]
    peak = max((v for row in view.time_ns for v in row), default=0)
    scale, unit = _time_unit(peak)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1)
    for g, label in enumerate(view.gpu_labels):
        name, full = _tick(label), _text(label)
        colour = GPU_PALETTE[g % len(GPU_PALETTE)]
        counts = view.counts[g] if g < len(view.counts) else ()
        times = view.time_ns[g] if g < len(view.time_ns) else ()
        fig.add_trace(
            go.Bar(
                x=buckets,
                y=list(counts),
                name=name,
                legendgroup=f"g{g}",
                marker_color=colour,
                customdata=[fmt.count(c) for c in counts],
                hovertemplate=f"{full}<br>%{{x}}: %{{customdata}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=buckets,
                y=[_round(v / scale, 4) for v in times],
                name=name,
                legendgroup=f"g{g}",
                showlegend=False,
                marker_color=colour,
                customdata=[_text(fmt.duration(v)) for v in times],
                hovertemplate=f"{full}<br>%{{x}}: %{{customdata}}<extra></extra>",
            ),
            row=1,
            col=2,
        )
    positive = [c for row in view.counts for c in row if c > 0]
    log_counts = bool(positive) and max(positive) > 100 * min(positive)
    fig.update_layout(
        _layout(height=340),
        barmode="group",
        bargap=0.2,
        legend={"orientation": "h", "x": 0, "y": 1.04, "yanchor": "bottom"},
    )
    fig.update_xaxes(title_text=t("chart.gap_size", lang), showgrid=False)
    fig.update_yaxes(
        title_text=t("chart.gap_count", lang),
        row=1,
        col=1,
        **({"type": "log", "dtick": 1} if log_counts else {}),
    )
    fig.update_yaxes(title_text=t("chart.gap_time", lang, unit=unit), row=1, col=2)
    return _div(fig, div_id)


def matrix_chart(view: MatrixView, div_id: str, lang: str = "en") -> str:
    """Annotated GPU × GPU heatmap (row GPU against column GPU), colour from 0."""
    labels = [_text(label) for label in view.labels]
    n = len(labels)
    z = [[_round(v, 3) for v in row] for row in view.values]
    text = [["–" if v is None else f"{v:.2f}" for v in row] for row in view.values]
    present = [v for row in view.values for v in row if v is not None]
    center = getattr(view, "center", None)
    scale = [list(stop) for stop in MATRIX_SCALE]
    if center is not None:
        # Diverging around the centre (e.g. stagger score: -1 aligned .. +1 staggered).
        reach = max([abs(v - center) for v in present] + [1e-9])
        low, high = center - reach, center + reach
        scale = [[0.0, "#2166ac"], [0.5, "#f7f7f7"], [1.0, "#b2182b"]]
    else:
        low = min(0.0, min(present, default=0.0))
        high = max(present, default=1.0)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(n)),
            y=list(range(n)),
            text=text,
            texttemplate="%{text}",
            customdata=[[[labels[i], labels[j]] for j in range(n)] for i in range(n)],
            textfont={"size": 12},
            zmin=low,
            zmax=high if high > low else low + 1,
            colorscale=scale,
            hoverongaps=False,
            xgap=2,
            ygap=2,
            colorbar={
                "title": {"text": _text(view.value_label), "side": "right"},
                "thickness": 12,
                "outlinewidth": 0,
            },
            hovertemplate=(
                f"%{{customdata[0]}}<br>× %{{customdata[1]}}<br>{_text(view.value_label)}: "
                "%{text}<extra></extra>"
            ),
        )
    )
    fig.update_layout(_layout(height=min(640, 110 + 44 * max(n, 3))))
    # Columns get short tick labels (full names are on the rows and in the hover).
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(n)),
        ticktext=_column_ticks(view.labels),
        showgrid=False,
        side="top",
        tickangle=0,
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(n)),
        ticktext=[_tick(label) for label in view.labels],
        showgrid=False,
        autorange="reversed",
    )
    return _div(fig, div_id)


def stacked_chart(view: StackedSharesView, div_id: str, lang: str = "en") -> str:
    """Horizontal bars per GPU, split into the shares of each category (summing to 1)."""
    labels = [_text(label) for label in view.gpu_labels]
    fig = go.Figure()
    for c, category in enumerate(view.categories):
        name, full = _tick(category, 48), _text(category)
        values = [_round(row[c] if c < len(row) else 0.0, 4) for row in view.shares]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=values,
                name=name,
                orientation="h",
                marker_color=CATEGORY_PALETTE[c % len(CATEGORY_PALETTE)],
                texttemplate="%{x:.0%}",
                textposition="inside",
                insidetextanchor="middle",
                textangle=0,
                textfont={"size": 11},
                hovertemplate=f"%{{y}}<br>{full}: %{{x:.1%}}<extra></extra>",
            )
        )
    fig.update_layout(
        _layout(height=max(200, 110 + 34 * len(labels))),
        barmode="stack",
        uniformtext={"minsize": 9, "mode": "hide"},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom", "traceorder": "normal"},
    )
    fig.update_xaxes(range=[0, 1], tickformat=".0%", title_text=t("chart.share", lang))
    fig.update_yaxes(
        type="category", autorange="reversed", showgrid=False, **_ticks(labels, view.gpu_labels)
    )
    return _div(fig, div_id)


def series_chart(view: SeriesView, div_id: str, lang: str = "en") -> str:
    """One line per GPU over the trace timeline (clocks, SM activity, busy share).

    A share is drawn as a percentage on an axis from 0 to 100%; a clock on an axis from
    0, so a wobble of a few MHz does not look like a cliff (the hover has the values).
    """
    ends = [xs[-1] for xs in view.x_ns if xs]
    scale, unit = _time_unit(max(ends) if ends else 0)
    fig = go.Figure()
    peak = 0.0
    for g, label in enumerate(view.gpu_labels):
        xs = view.x_ns[g] if g < len(view.x_ns) else ()
        ys = view.y[g] if g < len(view.y) else ()
        peak = max([peak, *(y for y in ys if y is not None)])
        name, full = _tick(label), _text(label)
        value = "%{y:.1%}" if view.y_kind == "share" else "%{y:.4g}"
        fig.add_trace(
            go.Scatter(
                x=[_round(x / scale, 9) for x in xs],
                y=[_round(y, 4) for y in ys],
                name=name,
                mode="lines",
                connectgaps=False,
                line={"color": GPU_PALETTE[g % len(GPU_PALETTE)], "width": 1.6},
                hovertemplate=f"{full}<br>%{{x:.6g}} {unit}: {value}<extra></extra>",
            )
        )
    fig.update_layout(
        _layout(height=320),
        hovermode="x unified",
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
    )
    fig.update_xaxes(title_text=t("chart.trace_time", lang, unit=unit))
    y_axis: dict[str, Any] = {"title_text": _text(view.y_label)}
    if view.y_kind == "share":
        y_axis.update(tickformat=".0%", range=[0, max(1.0, peak) * 1.02])
    elif view.y_kind == "zero":
        y_axis.update(range=[0, (peak or 1.0) * 1.08])
    fig.update_yaxes(**y_axis)
    return _div(fig, div_id)


def _layout(height: int) -> dict[str, Any]:
    axis = {
        "gridcolor": GRID,
        "linecolor": AXIS,
        "zeroline": False,
        "automargin": True,
        "tickfont": {"color": MUTED},
        "title": {"font": {"color": MUTED}},
    }
    return {
        "template": go.layout.Template(),
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "font": {"family": FONT, "size": 12, "color": INK},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hoverlabel": {"font": {"family": FONT, "size": 12}, "align": "left"},
        "xaxis": axis,
        "yaxis": axis,
        "xaxis2": axis,
        "yaxis2": axis,
    }


def _div(fig: go.Figure, div_id: str) -> str:
    fragment = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG)
    return _SCRIPT.sub(
        lambda m: m.group(1) + _JSON_STRING.sub(_escape_json, m.group(2)) + m.group(3),
        fragment,
    )


def _escape_json(match: re.Match[str]) -> str:
    """Inside a JSON string literal, ``<``, ``>`` and ``&`` become ``\\u`` escapes."""
    return match.group(0).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _text(value: str) -> str:
    """Plain text for a plotly label: plotly reads ``<b>``, ``<br>``... as markup."""
    return html.escape(value, quote=False)


def _tick(label: str, limit: int = 34) -> str:
    """A tick or legend label: long names are cut in the middle (hover shows them whole)."""
    if len(label) > limit:
        keep = limit - 1
        label = label[: (keep + 1) // 2] + "…" + label[len(label) - keep // 2 :]
    return _text(label)


def _ticks(categories: list[str], labels: tuple[str, ...]) -> dict[str, Any]:
    """Axis settings that show ``labels`` shortened on a category axis of ``categories``."""
    return {"tickmode": "array", "tickvals": categories, "ticktext": [_tick(x) for x in labels]}


def _column_ticks(labels: tuple[str, ...]) -> list[str]:
    """Labels narrow enough to sit under a matrix cell ("GPU 3" of "GPU 3 (A100, ...)")."""
    heads = [label.split(" (", 1)[0] for label in labels]
    if len(set(heads)) < len(heads):
        heads = list(labels)
    return [_tick(head, 14) for head in heads]


def _round(value: float | None, digits: int) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(float(value), digits)


def _time_unit(span_ns: float) -> tuple[int, str]:
    for scale, unit in _TIME_UNITS:
        if span_ns >= scale:
            return scale, unit
    return 1, "ns"


def _decimals(step: float) -> int:
    """Decimals that keep three significant digits of ``step``."""
    if step <= 0:
        return 3
    return max(0, 2 - math.floor(math.log10(step)))

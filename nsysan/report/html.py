"""The self-contained HTML report: one file, no network needed to open it.

``render_html(view)`` lays a :class:`~nsysan.report.viewmodel.ReportView` out with
the Jinja2 templates of ``templates/`` (autoescaped, strict about undefined names,
compiled once). The stylesheet and plotly.js are inlined, plotly.js once per page
and only when there is a chart; each chart is a fragment from
:mod:`nsysan.report.charts`. JSON embedded in a ``<script>`` has ``<``, ``>`` and
``&`` escaped, so trace text such as ``</script>`` cannot end the element.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import plotly
from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from nsysan.output import write_atomic
from nsysan.report import charts, fmt
from nsysan.report.i18n import t
from nsysan.report.templates import templates_dir
from nsysan.report.viewmodel import ReportView, Section, Table

_NUMERIC_CELL = re.compile(
    r"^[<>≈~+\-−]?\s?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?\s?"
    r"(%|×|x|ns|µs|us|ms|s|B|KiB|MiB|GiB|TiB|MHz|GHz|W|GB/s)?$"
)
# A token this long without a space is an identifier (kernel name, path), not a word.
_IDENT = re.compile(r"\S{28,}")
_BLANK_CELLS = frozenset({"", "n/a", "–", "-"})
_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_RESERVED_ANCHORS = frozenset(
    {"top", "verdict", "toc", "findings", "myths", "recommendations", "appendix", "nogpu"}
)


@dataclass(frozen=True)
class _Chart:
    html: Markup
    kind: str
    title: str
    explain: str = ""
    note: str = ""


@dataclass(frozen=True)
class _TableBlock:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str
    title: str
    numeric: tuple[bool, ...]
    ident: tuple[bool, ...] = ()


@dataclass(frozen=True)
class _SectionBlock:
    anchor: str
    number: int
    title: str
    paragraphs: tuple[str, ...]
    tables: tuple[_TableBlock, ...]
    charts: tuple[_Chart, ...] = ()
    unavailable: str = ""


def render_html(view: ReportView) -> str:
    """The whole report page for ``view`` as one HTML string."""
    lang = view.lang

    def tr(key: str, **params: object) -> str:
        return t(key, lang, **params)

    show_findings = bool(view.findings) or not view.no_gpu_work
    show_recommendations = bool(view.recommendations) or not view.no_gpu_work
    numbers = itertools.count(1)
    findings_number = next(numbers) if show_findings else 0
    sections = _sections(view, numbers)
    chart_count = sum(len(s.charts) for s in sections)
    context: dict[str, Any] = {
        "view": view,
        "lang": lang,
        "t": tr,
        "sections": sections,
        "show_findings": show_findings,
        "show_recommendations": show_recommendations,
        "number": {
            "findings": findings_number,
            "myths": next(numbers) if view.myths else 0,
            "recommendations": next(numbers) if show_recommendations else 0,
            "appendix": next(numbers),
        },
        "findings": view.findings,
        "severity_counts": _severity_counts(view),
        "appendix_inputs": _table(view.appendix.inputs),
        "appendix_settings": _table(view.appendix.settings),
        "extra": sorted(view.extra.items()),
        "css": Markup(_css()),
        "plotly_js": Markup(_plotly_js()) if chart_count else None,
        "plotly_note": tr(
            "appendix.plotly",
            plotly_version=_plotly_js_version(),
            plotly_size=fmt.nbytes(_plotly_js_bytes()),
        )
        if chart_count
        else "",
        "meta_json": script_json(_metadata(view)),
    }
    return _template().render(context)


def write_html(view: ReportView, path: str | Path) -> Path:
    """Render ``view`` and write it to ``path`` atomically; return the path written."""
    return write_atomic(path, render_html(view))


def script_json(value: object) -> Markup:
    """``value`` as JSON that is safe inside ``<script>``: ``<``, ``>``, ``&`` escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    # U+2028/2029 end a line in older JavaScript parsers.
    return Markup(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _sections(view: ReportView, numbers: Iterator[int]) -> tuple[_SectionBlock, ...]:
    used: set[str] = set(_RESERVED_ANCHORS)
    blocks: list[_SectionBlock] = []
    for section in view.sections:
        anchor = _anchor(section.key, used)
        blocks.append(
            _SectionBlock(
                anchor=anchor,
                number=next(numbers),
                title=section.title,
                paragraphs=section.paragraphs,
                tables=tuple(_table(table) for table in section.tables),
                charts=() if section.unavailable else _charts(section, anchor, view.lang),
                unavailable=section.unavailable,
            )
        )
    return tuple(blocks)


def _charts(section: Section, anchor: str, lang: str) -> tuple[_Chart, ...]:
    out: list[_Chart] = []
    if section.timeline is not None:
        tl = section.timeline
        out.append(
            _Chart(
                Markup(charts.timeline_chart(tl, f"chart-{anchor}-timeline", lang)),
                "timeline",
                t("timeline.title", lang),
                t("timeline.explain", lang, bin=fmt.duration(tl.bin_ns)),
                tl.note,
            )
        )
    if section.zoom is not None:
        z = section.zoom
        out.append(
            _Chart(
                Markup(charts.timeline_chart(z, f"chart-{anchor}-zoom", lang)),
                "timeline",
                t("zoom.title", lang),
                t("timeline.explain", lang, bin=fmt.duration(z.bin_ns)),
                z.note,
            )
        )
    if section.histogram is not None:
        out.append(
            _Chart(
                Markup(
                    charts.histogram_chart(section.histogram, f"chart-{anchor}-histogram", lang)
                ),
                "histogram",
                t("histogram.title", lang),
                t("histogram.explain", lang),
            )
        )
    if section.matrix is not None:
        out.append(
            _Chart(
                Markup(charts.matrix_chart(section.matrix, f"chart-{anchor}-matrix", lang)),
                "matrix",
                section.matrix.title,
            )
        )
    for i, stacked in enumerate(section.stacked):
        out.append(
            _Chart(
                Markup(charts.stacked_chart(stacked, f"chart-{anchor}-stacked-{i}", lang)),
                "stacked",
                stacked.title,
            )
        )
    for i, series in enumerate(section.series):
        out.append(
            _Chart(
                Markup(charts.series_chart(series, f"chart-{anchor}-series-{i}", lang)),
                "series",
                series.title,
            )
        )
    return tuple(out)


def _table(table: Table) -> _TableBlock:
    columns = [[row[i] for row in table.rows if i < len(row)] for i in range(len(table.columns))]
    return _TableBlock(
        columns=table.columns,
        rows=table.rows,
        note=table.note,
        title=str(getattr(table, "title", "")),  # a field the view model may gain
        numeric=tuple(_is_numeric(cells) for cells in columns),
        ident=tuple(any(_IDENT.search(c) for c in cells) for cells in columns),
    )


def _is_numeric(cells: list[str]) -> bool:
    """Right-align a column whose cells are all numbers (blanks and "n/a" allowed)."""
    values = [c.strip() for c in cells if c.strip() not in _BLANK_CELLS]
    return bool(values) and all(_NUMERIC_CELL.match(v) for v in values)


def _anchor(key: str, used: set[str]) -> str:
    base = _ANCHOR_UNSAFE.sub("-", key).strip("-").lower() or "section"
    if base in used:
        base = f"s-{base}"
    anchor, n = base, 2
    while anchor in used:
        anchor, n = f"{base}-{n}", n + 1
    used.add(anchor)
    return anchor


def _severity_counts(view: ReportView) -> tuple[tuple[str, int], ...]:
    order = ("critical", "warning", "info")
    return tuple((sev, n) for sev in order if (n := sum(f.severity == sev for f in view.findings)))


def _metadata(view: ReportView) -> dict[str, Any]:
    """A machine-readable summary for tools that scrape attached reports."""
    return {
        "generator": f"nsysan {view.appendix.tool_version}",
        "lang": view.lang,
        "headline": view.headline,
        "severity": view.headline_severity,
        "no_gpu_work": view.no_gpu_work,
        "findings": [{"rule_id": f.rule_id, "severity": f.severity} for f in view.findings],
        "myths": {m.myth_id: m.verdict for m in view.myths},
    }


@cache
def _environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(templates_dir())),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@cache
def _template() -> Template:
    return _environment().get_template("report.html.j2")


@cache
def _css() -> str:
    return (templates_dir() / "assets" / "report.css").read_text(encoding="utf-8")


# The charts use only heatmap, bar and scatter traces: plotly.js's "cartesian" partial
# bundle (npm plotly.js-cartesian-dist-min, MIT, same version as plotly.py's full
# bundle) has them in a third of the size. It ships in templates/assets, so a report
# is made without a network; the full bundle of the plotly package is the fallback.
PLOTLY_BUNDLE_GLOB = "plotly-cartesian-*.min.js"


@cache
def _plotly_bundle() -> tuple[str, str]:
    """(the plotly.js source to embed, which bundle it is)."""
    found = sorted((templates_dir() / "assets").glob(PLOTLY_BUNDLE_GLOB))
    if found:
        source, kind = found[-1].read_text(encoding="utf-8"), "cartesian"
    else:
        source, kind = get_plotlyjs(), "full"
    # No "</script" in the bundle today; keep it that way whatever version is installed.
    return source.replace("</script", "<\\/script"), kind


def _plotly_js() -> str:
    return _plotly_bundle()[0]


@cache
def _plotly_js_bytes() -> int:
    return len(_plotly_js().encode("utf-8"))


def _plotly_js_version() -> str:
    match = re.search(r"plotly\.js(?: \((\w+)[^)]*\))? v([\w.\-]+)", _plotly_js()[:300])
    if not match:
        return f"(plotly.py {plotly.__version__})"
    return f"{match.group(2)} ({match.group(1) or 'full'} bundle: heatmap, bar, scatter)"

"""Reports: the JSON document, the view model and the HTML page of an analysis."""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import Literal

from nsysan.analysis import Analysis

# What write_report imports: plotly and jinja2 among them, ~0.2 s at start-up.
_PAGE_MODULES = (
    "nsysan.diagnose",
    "nsysan.output",
    "nsysan.report.document",
    "nsysan.report.html",
    "nsysan.report.jsonout",
    "nsysan.report.view",
)


def import_page_modules_meanwhile() -> None:
    """Import what :func:`write_report` needs on a thread of its own, while the trace is
    analysed (native code mostly, which leaves the interpreter free): the page is then
    written without waiting for them. A failed import is left for :func:`write_report`
    to raise. Not a daemon: an exit meanwhile waits for the import, rather than ending
    the interpreter under it."""

    def load() -> None:
        for name in _PAGE_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - write_report imports it again and says why
                return

    threading.Thread(target=load, name="nsysan-page-imports").start()


def write_report(
    analysis: Analysis,
    path: str | Path,
    *,
    lang: Literal["en", "zh"] = "en",
    json_path: str | Path | None = None,
) -> str:
    """Write the HTML report (and optionally the JSON) atomically; return the headline."""
    from nsysan.diagnose import diagnose
    from nsysan.output import write_atomic
    from nsysan.report.document import analysis_document
    from nsysan.report.html import write_html
    from nsysan.report.jsonout import dumps
    from nsysan.report.view import build_view

    diagnosis = diagnose(analysis)
    view = build_view(analysis, diagnosis, lang)
    write_html(view, path)
    if json_path is not None:
        write_atomic(json_path, dumps(analysis_document(analysis, diagnosis=diagnosis)) + "\n")
    return diagnosis.headline.texts[lang]

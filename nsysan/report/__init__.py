"""Reports: the JSON document, the view model and the HTML page of an analysis."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from nsysan.analysis import Analysis


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

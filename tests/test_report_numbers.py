"""Every number in the headline appears, with the same value, in a section that defines it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import REPO, SHARED_TRACES, cori_rank_files

from nsysan.analysis import analyze
from nsysan.diagnose import diagnose
from nsysan.ingest import load_trace
from nsysan.report.html import render_html
from nsysan.report.view import build_view

# A number with its unit as the report prints it: "35.1%", "5.85 s", "1,010", "327×".
NUMBER = re.compile(r"[<>]?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|µs|ms|ns|s|×))?")
# Parts of the page that restate the headline rather than define its numbers.
RESTATING = {"verdict", "findings", "toc", "recommendations", "myths"}


class _Sections(HTMLParser):
    """Visible text outside the restating parts of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, bool]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"br", "meta", "img", "hr", "link", "input"}:
            return
        skip = tag in {"script", "style"} or dict(attrs).get("id") in RESTATING
        self.stack.append((tag, skip))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        if not any(skip for _, skip in self.stack):
            self.text.append(data)


def headline_numbers_missing(paths: list[Path], lang: str = "en") -> list[str]:
    analysis = analyze(load_trace(paths))
    view = build_view(analysis, diagnose(analysis), lang)  # type: ignore[arg-type]
    parser = _Sections()
    parser.feed(render_html(view))
    body = " ".join(parser.text)
    numbers = [n for n in NUMBER.findall(view.headline) if not re.fullmatch(r"\d", n)]
    # "GPU 0–7", "4 GPUs": GPU counts and indices are not measurements.
    numbers = [
        n
        for n in numbers
        if not re.search(rf"GPU {re.escape(n)}\b|{re.escape(n)} GPUs", view.headline)
    ]
    return [n for n in numbers if n not in body]


def test_demo_headline_numbers_are_defined_in_sections() -> None:
    assert headline_numbers_missing([REPO / "fixtures" / "case-study.sqlite"]) == []


@pytest.mark.shared
@pytest.mark.parametrize("folder", ["T028-nsight-systems-deep-dive", "T039-gpu-poisson-solver"])
def test_named_trace_headline_numbers_are_defined_in_sections(folder: str) -> None:
    path = SHARED_TRACES / folder / "trace.sqlite"
    if not path.exists():
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    assert headline_numbers_missing([path]) == []


@pytest.mark.shared
def test_cori_headline_numbers_are_defined_in_sections() -> None:
    files = cori_rank_files()
    if not files:
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    assert headline_numbers_missing(files) == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_internal_wording_in_the_report(lang: str) -> None:
    """The report speaks of the case study and the static split, never of "seed" sections."""
    analysis = analyze(load_trace([REPO / "fixtures" / "case-study.sqlite"]))
    page = render_html(build_view(analysis, diagnose(analysis), lang))  # type: ignore[arg-type]
    text = re.sub(r"<(script|style)\b.*?</\1>|<[^>]+>", " ", page, flags=re.S)
    assert not re.search(r"(?i)\bseed\b|种子", text)
    # Durations in prose are in human units, never raw nanosecond counts.
    assert not re.search(r"\d{7,} ?ns\b", text)

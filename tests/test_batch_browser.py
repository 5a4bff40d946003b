"""The batch index and the diff page in a real browser: offline, no errors; the index
sorts on a header click and filters on typed text.

Skips like tests/test_report_browser.py when Chromium or Playwright is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_report_browser import CHROMIUM, CHROMIUM_ARGS

from nsysan.batch.index import render_index
from nsysan.batch.rows import empty_row

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page() -> Any:
    if not CHROMIUM.is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context()
        pg = context.new_page()
        pg.errors = []  # type: ignore[attr-defined]
        pg.requests = []  # type: ignore[attr-defined]
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))  # type: ignore[attr-defined]
        pg.on("request", lambda r: r.url.startswith("http") and pg.requests.append(r.url))  # type: ignore[attr-defined]
        yield pg
        browser.close()


def _row(tid: str, gap: float | None, rule: str | None) -> dict[str, Any]:
    row = empty_row(tid, f"{tid}.sqlite", "ok", None)
    row.update(
        gap_share_worst=gap,
        gap_share_mean=gap,
        gpus=4,
        rules=rule,
        severity="warning" if rule else None,
        verdict=f"verdict of {tid}",
        report=f"traces/{tid}.html",
    )
    return row


def _ids(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "#results tbody tr:not([hidden]) th", "els => els.map(e => e.textContent)"
    )


def test_index_sorts_and_filters(page: Any, tmp_path: Path) -> None:
    rows = [
        _row("b-run", 0.30, "false-balance"),
        _row("a-run", 0.05, None),
        _row("c-run", None, None),
    ]
    rows.append(empty_row("d-broken", "d.sqlite", "failed", "not a SQLite database"))
    html = tmp_path / "index.html"
    html.write_text(render_index(rows, ["grouped 8 files as one run: x/report*"], "en"))
    page.goto(html.as_uri())
    assert _ids(page) == ["b-run", "a-run", "c-run", "d-broken"]
    page.click("th[data-col='5']")  # gap share worst, ascending; unmeasured last
    assert _ids(page)[:2] == ["a-run", "b-run"] and set(_ids(page)[2:]) == {"c-run", "d-broken"}
    page.click("th[data-col='5']")
    assert _ids(page)[0] == "b-run"
    page.click("th[data-col='0']")
    assert _ids(page) == ["a-run", "b-run", "c-run", "d-broken"]
    page.fill("#filter", "false-bal")
    assert _ids(page) == ["b-run"]
    page.fill("#filter", "sqlite database")
    assert _ids(page) == ["d-broken"]
    page.fill("#filter", "")
    assert len(_ids(page)) == 4
    assert page.errors == [] and page.requests == []  # type: ignore[attr-defined]

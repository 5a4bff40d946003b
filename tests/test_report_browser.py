"""The HTML report in a real browser: it opens offline, every chart draws, no errors.

Needs headless Chromium (Debian package ``chromium``) and Playwright for Python
(``pip install playwright``; the browser is the system one, ``playwright install`` is
never run). Skips with the reason when either is missing. With
``NSYSAN_UPDATE_SCREENSHOT=1`` the sample report's screenshot is copied to
``docs/img/report.png``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_samples import CHART_COUNT, N_GPUS, sample_view

from nsysan.report.html import write_html

pytestmark = pytest.mark.browser

CHROMIUM = Path(os.environ.get("NSYSAN_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
_DRAWN = (
    "Array.from(document.querySelectorAll('.js-plotly-plot'))"
    ".filter(el => el.querySelector('.main-svg')).length"
)
REPO = Path(__file__).resolve().parent.parent
SCREENSHOT = REPO / "docs" / "img" / "report.png"
N_GAPS = len(sample_view().sections[1].timeline.gaps)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # On CI (.ci/run installs both) a missing browser is a failure, not a skip.
    missing = pytest.fail if os.environ.get("CI") else pytest.skip
    if not CHROMIUM.is_file():
        missing(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("Playwright for Python is not installed (pip install playwright)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


class Opened:
    """A report loaded in a fresh page, with what the page complained about."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.context = browser.new_context(viewport={"width": 1366, "height": 900})
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: r.url.startswith("file:") or self.requests.append(r.url))
        self.page.goto(path.as_uri(), wait_until="load")
        # plotly draws after load; wait until every chart div has its SVG
        self.page.wait_for_function(
            f"document.querySelectorAll('.plotly-graph-div').length === {_DRAWN}",
            timeout=15_000,
        )

    def charts(self) -> tuple[int, int]:
        """(plotly charts, charts with an SVG drawn)."""
        return self.page.locator(".js-plotly-plot").count(), self.page.evaluate(_DRAWN)

    def close(self) -> None:
        self.context.close()


def test_sample_report_renders_without_errors(browser: Any, tmp_path: Path) -> None:
    report = write_html(sample_view(), tmp_path / "report.html")
    opened = Opened(browser, report)
    try:
        assert opened.errors == []
        assert opened.requests == []  # nothing fetched: the page is self-contained
        assert opened.charts() == (CHART_COUNT, CHART_COUNT)
        headline = opened.page.locator("#verdict .headline")
        assert headline.is_visible()
        assert headline.inner_text() == sample_view().headline
        # the timeline drew one heatmap row per GPU, the gap outlines and their markers
        timeline = "#chart-timeline-timeline"
        assert opened.page.locator(f"{timeline} .heatmaplayer image").count() == N_GPUS
        assert opened.page.locator(f"{timeline} .shapelayer path").count() == N_GAPS
        assert opened.page.locator(f"{timeline} .scatterlayer .point").count() == N_GAPS
        shot = tmp_path / "report.png"
        opened.page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 50_000
        if os.environ.get("NSYSAN_UPDATE_SCREENSHOT") == "1":
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, SCREENSHOT)
    finally:
        opened.close()


def test_hostile_report_runs_no_injected_script(browser: Any, tmp_path: Path) -> None:
    report = write_html(sample_view(hostile=True), tmp_path / "hostile.html")
    opened = Opened(browser, report)
    try:
        assert opened.dialogs == []  # no alert(1) ran
        assert opened.errors == []
        assert opened.page.locator("img").count() == 0
        assert opened.charts() == (CHART_COUNT, CHART_COUNT)
        # the kernel name is shown as text, tags and all
        assert "<script>alert(1)</script>" in opened.page.locator("#verdict .headline").inner_text()
        gpu_cell = opened.page.locator("#gpus tbody th").first.inner_text()
        assert gpu_cell.endswith('</script> </script> "><img src=x onerror=alert(1)>')
        # plotly would drop a tag it parsed: the chart labels keep them as text
        ticks = opened.page.locator("#chart-timeline-timeline .ytick text").all_text_contents()
        assert sum(tick.endswith("alert(1)>") for tick in ticks) == 1
        legend = opened.page.locator("#chart-host-stacked-0 .legendtext").all_text_contents()
        assert (
            sum(
                text.startswith("NVTX: tokenizer.encode <") and text.endswith("alert(1)>")
                for text in legend
            )
            == 1
        )
    finally:
        opened.close()


def test_chinese_report_renders(browser: Any, tmp_path: Path) -> None:
    report = write_html(sample_view(lang="zh"), tmp_path / "zh.html")
    opened = Opened(browser, report)
    try:
        assert opened.errors == []
        assert opened.page.evaluate("document.documentElement.lang") == "zh"
        assert opened.charts() == (CHART_COUNT, CHART_COUNT)
    finally:
        opened.close()


def test_demo_report_renders(browser: Any, tmp_path: Path) -> None:
    """The report of ``nsysan demo`` (when the command exists) opens cleanly too."""
    from click.testing import CliRunner

    from nsysan.cli import cli

    result = CliRunner().invoke(cli, ["demo", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    reports = sorted(tmp_path.rglob("*.html"))
    assert reports, "nsysan demo wrote no HTML report"
    for report in reports:
        opened = Opened(browser, report)
        try:
            assert opened.errors == [], report
            assert opened.requests == [], report
            drawn = opened.charts()
            assert drawn[0] == drawn[1] == opened.page.locator(".plotly-graph-div").count()
            assert opened.page.locator("#verdict .headline").is_visible()
        finally:
            opened.close()


# Every word of a table cell fits in the cell (identifier cells, which may wrap
# anywhere, and the settings/inputs tables of typed values are left out), and which
# tables scroll inside their own box.
_TABLE_LAYOUT = """
() => {
  const narrow = [];
  const probe = document.createElement('span');
  probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
  document.body.appendChild(probe);
  for (const cell of document.querySelectorAll('table.data th, table.data td')) {
    if (cell.classList.contains('ident') || cell.closest('table.settings, table.inputs')) continue;
    if (cell.closest('table.evidence') && cell.matches('tbody th, td.source')) continue;
    const cs = getComputedStyle(cell);
    for (const k of ['fontFamily', 'fontSize', 'fontWeight', 'fontStyle', 'letterSpacing', 'textTransform'])
      probe.style[k] = cs[k];
    const inner = cell.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    for (const word of cell.textContent.trim().split(/\\s+/)) {
      probe.textContent = word;
      if (word && probe.getBoundingClientRect().width > inner + 1) narrow.push(word);
    }
  }
  probe.remove();
  const scrolling = [...document.querySelectorAll('.table-wrap')]
    .filter(w => w.scrollWidth > w.clientWidth + 1 && !w.querySelector('table.settings, table.inputs'))
    .map(w => (w.closest('section') || {}).id);
  return {narrow, scrolling, page: document.documentElement.scrollWidth, view: window.innerWidth};
}
"""


@pytest.mark.parametrize("width", [1024, 1400, 1920])
def test_tables_are_readable_at_common_widths(browser: Any, tmp_path: Path, width: int) -> None:
    """The demo report: no cell narrower than its longest word, no sideways scrolling."""
    from click.testing import CliRunner

    from nsysan.cli import cli

    result = CliRunner().invoke(cli, ["demo", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    pages = [*sorted(tmp_path.rglob("*.html")), write_html(sample_view(), tmp_path / "s.html")]
    for report in pages:
        context = browser.new_context(viewport={"width": width, "height": 900})
        try:
            page = context.new_page()
            page.goto(report.as_uri(), wait_until="load")
            layout = page.evaluate(_TABLE_LAYOUT)
            assert layout["narrow"] == [], (report.name, width, layout["narrow"][:10])
            assert layout["page"] <= layout["view"], (report.name, width)
            assert "gpus" not in layout["scrolling"], (report.name, width, layout["scrolling"])
        finally:
            context.close()

"""The HTML report: structure, self-containment, escaping, size, atomic write, i18n."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_samples import (
    CHART_COUNT,
    HOSTILE,
    SECTION_KEYS,
    SECTION_ROWS,
    no_gpu_view,
    sample_view,
)

from nsysan.errors import OutputError
from nsysan.report import charts, i18n
from nsysan.report.html import render_html, script_json, write_html
from nsysan.report.templates import templates_dir
from nsysan.report.viewmodel import Section, TimelineView

VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
PLOTLY_BANNER = re.compile(r"\* plotly\.js (\(cartesian - minified\) )?v\d")


class Node:
    """An element of the parsed page: tag, attributes, children, text."""

    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.content: list[Node | str] = []  # children and text, in document order

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.content)

    def iter(self) -> list[Node]:
        out = [self]
        for child in self.children:
            out.extend(child.iter())
        return out

    def find_all(self, tag: str, **attrs: str) -> list[Node]:
        return [
            n
            for n in self.iter()[1:]
            if n.tag == tag
            and all(
                (n.attrs.get(k.rstrip("_")) or "").split().count(v)
                if k == "class_"
                else n.attrs.get(k) == v
                for k, v in attrs.items()
            )
        ]

    def by_id(self, ident: str) -> Node:
        found = [n for n in self.iter() if n.attrs.get("id") == ident]
        assert len(found) == 1, f"{len(found)} elements with id={ident!r}"
        return found[0]


class Soup(HTMLParser):
    """A tiny tree builder over the standard library's tolerant HTML tokenizer."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.current = self.root
        self.doctype = ""
        self.feed(text)
        self.close()

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        self.current.content.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        self.current.content.append(node)

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.content.append(data)


@pytest.fixture(scope="module")
def page() -> str:
    return render_html(sample_view())


@pytest.fixture(scope="module")
def soup(page: str) -> Node:
    return Soup(page).root


@pytest.fixture(scope="module")
def hostile_page() -> str:
    return render_html(sample_view(hostile=True))


def _plotly_calls(page: str) -> list[tuple[str, list, dict]]:
    """(div id, data, layout) of every ``Plotly.newPlot`` call, parsed as JSON."""
    decoder = json.JSONDecoder()
    calls = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        data, end = decoder.raw_decode(page, m.end())
        rest = re.match(r",\s*", page[end:])
        assert rest is not None
        layout, _ = decoder.raw_decode(page, end + rest.end())
        calls.append((m.group(1), data, layout))
    return calls


def _without_script_bodies(page: str) -> str:
    return re.sub(r"(<script[^>]*>).*?(</script>)", r"\1\2", page, flags=re.S)


# -- structure ---------------------------------------------------------------------------


def test_page_is_html5_with_language(page: str, soup: Node) -> None:
    assert page.startswith("<!DOCTYPE html>")
    (root,) = soup.find_all("html")
    assert root.attrs["lang"] == "en"
    assert soup.find_all("title")[0].text == sample_view().title


def test_verdict_comes_first_with_headline_and_severity(soup: Node) -> None:
    view = sample_view()
    verdict = soup.by_id("verdict")
    assert "sev-critical" in (verdict.attrs["class"] or "").split()
    (headline,) = verdict.find_all("p", class_="headline")
    assert headline.text == view.headline
    main = soup.find_all("main")[0]
    first_section = next(n for n in main.iter() if n.tag == "section")
    assert first_section is verdict


def test_every_section_has_its_anchor_and_a_contents_link(soup: Node) -> None:
    links = {a.attrs["href"] for a in soup.by_id("toc").find_all("a")}
    for anchor in (*SECTION_KEYS, "findings", "myths", "recommendations", "appendix"):
        section = soup.by_id(anchor)
        assert section.tag == "section"
        assert f"#{anchor}" in links
    titles = [s.title for s in sample_view().sections]
    headings = [h.text for h in soup.find_all("h2")]
    for title in titles:
        assert any(h.endswith(title) for h in headings), title


@pytest.mark.parametrize("make", [sample_view, no_gpu_view])
def test_contents_are_numbered_like_the_headings(make: object) -> None:
    soup = Soup(render_html(make())).root  # type: ignore[operator]
    numbers = [
        a.find_all("span", class_="num")[0].text
        for a in soup.by_id("toc").find_all("a")
        if a.find_all("span", class_="num")
    ]
    assert numbers == [str(i) for i in range(1, len(numbers) + 1)]
    headings = [
        h.find_all("span", class_="num")[0].text
        for h in soup.find_all("h2")
        if h.find_all("span", class_="num")
    ]
    assert headings == numbers


def test_tables_have_their_rows(soup: Node) -> None:
    for key, n_rows in SECTION_ROWS.items():
        table = soup.by_id(key).find_all("table")[0]
        assert len(table.find_all("tbody")[0].find_all("tr")) == n_rows
        assert len(table.find_all("thead")[0].find_all("th")) == 7
    inputs = soup.by_id("appendix").find_all("table", class_="inputs")[0]
    n_inputs = len(sample_view().appendix.inputs.rows)
    assert len(inputs.find_all("tbody")[0].find_all("tr")) == n_inputs


def test_numeric_columns_are_right_aligned(soup: Node) -> None:
    header = soup.by_id("gpus").find_all("thead")[0].find_all("th")
    assert [("num" in (th.attrs.get("class") or "")) for th in header] == [
        False,
        True,
        True,
        True,
        True,
        True,
        True,
    ]


def test_findings_are_cards_with_evidence(soup: Node) -> None:
    view = sample_view()
    cards = soup.by_id("findings").find_all("article", class_="finding")
    assert [c.attrs["data-rule"] for c in cards] == [f.rule_id for f in view.findings]
    for card, finding in zip(cards, view.findings, strict=True):
        assert f"sev-{finding.severity}" in (card.attrs["class"] or "")
        rows = card.find_all("table", class_="evidence")[0].find_all("tbody")[0].find_all("tr")
        assert len(rows) == len(finding.evidence)
        assert finding.claim in card.text
    verdict_links = [a.attrs["href"] for a in soup.by_id("verdict").find_all("a")]
    assert verdict_links == [f"#{c.attrs['id']}" for c in cards]


def test_unavailable_section_says_why_and_has_no_chart(soup: Node) -> None:
    section = soup.by_id("pipeline")
    assert "unavailable" in (section.attrs["class"] or "")
    assert "No NVTX ranges name pipeline stages" in section.text
    assert not section.find_all("figure")


def test_myths_and_recommendations(soup: Node) -> None:
    view = sample_view()
    items = soup.by_id("myths").find_all("li", class_="myth")
    assert [i.attrs["data-myth"] for i in items] == [m.myth_id for m in view.myths]
    pills = [i.find_all("span", class_="pill")[0].text for i in items]
    assert pills == [i18n.t(f"myth.{m.verdict}", "en") for m in view.myths]
    recs = soup.by_id("recommendations").find_all("li")
    assert [r.text for r in recs] == list(view.recommendations)


def test_appendix_lists_what_the_trace_lacked(soup: Node) -> None:
    appendix = soup.by_id("appendix")
    missing = appendix.find_all("ul", class_="missing-list")[0].find_all("li")
    assert [m.text for m in missing] == list(sample_view().appendix.missing)
    assert "plotly.js" in appendix.text  # the size note


def test_timeline_states_its_aggregation(soup: Node) -> None:
    figure = soup.by_id("timeline").find_all("figure")[0]
    assert "25.0 ms" in figure.find_all("p", class_="chart-explain")[0].text
    note = figure.find_all("p", class_="chart-note")[0].text
    assert note == sample_view().sections[1].timeline.note  # type: ignore[union-attr]


def test_one_chart_per_block_with_deterministic_ids(page: str) -> None:
    calls = _plotly_calls(page)
    assert len(calls) == CHART_COUNT
    ids = [c[0] for c in calls]
    assert ids == [
        "chart-timeline-timeline",
        "chart-gaps-histogram",
        "chart-stagger-matrix",
        "chart-host-stacked-0",
        "chart-communication-stacked-0",
        "chart-bound-stacked-0",
        "chart-contention-series-0",
        "chart-contention-series-1",
    ]
    assert render_html(sample_view()) == page  # same view, same bytes


def test_timeline_chart_holds_binned_data_and_gap_shapes(page: str) -> None:
    view = sample_view().sections[1].timeline
    assert view is not None
    _, data, layout = _plotly_calls(page)[0]
    rows = [trace for trace in data if trace["type"] == "heatmap"]
    assert len(rows) == len(view.gpu_labels)  # one heatmap row per GPU
    assert all(len(r["z"][0]) == len(view.bin_start_ns) for r in rows)
    assert rows[0]["dx"] == pytest.approx(0.025)  # equal 25 ms bins, in seconds
    assert rows[3]["z"][0][0] is None  # outside GPU 3's window
    assert rows[0]["z"][0][0] == pytest.approx(view.busy_share[0][0], abs=5e-4)
    assert len(layout["shapes"]) == len(view.gaps)
    (markers,) = [trace for trace in data if trace["type"] == "scatter"]
    assert len(markers["x"]) == len(view.gaps)


# -- self-contained ----------------------------------------------------------------------


def test_plotly_is_inlined_exactly_once(page: str, soup: Node) -> None:
    assert len(PLOTLY_BANNER.findall(page)) == 1
    scripts = soup.find_all("script")
    assert all("src" not in s.attrs for s in scripts)
    # bundle + one per chart + metadata + print helper
    assert len(scripts) == 1 + CHART_COUNT + 2


def test_no_external_resources(page: str, soup: Node) -> None:
    markup = _without_script_bodies(page)  # plotly.js itself mentions plotly.com in strings
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", markup, re.IGNORECASE)
    assert not re.search(r"@import|url\(", markup)
    assert not soup.find_all("link")
    for node in soup.iter():
        for attr in ("src", "href"):
            value = node.attrs.get(attr)
            if value is not None:
                assert value.startswith("#"), f"<{node.tag} {attr}={value!r}>"


def test_sample_report_is_under_the_size_budget(page: str) -> None:
    assert len(page.encode("utf-8")) < 2 * 1000 * 1000  # a partial plotly.js bundle
    without_plotly = len(page) - len(re.search(r"<script>/\*\*.*?</script>", page, re.S)[0])
    assert without_plotly < 300_000  # the charts' own data stays small


def test_no_gpu_work_report_is_short_and_says_why() -> None:
    view = no_gpu_view()
    page = render_html(view)
    soup = Soup(page).root
    section = soup.by_id("nogpu")
    assert i18n.t("nogpu.title", "en") in section.text
    assert [li.text for li in section.find_all("li")] == list(view.appendix.missing)
    assert soup.by_id("appendix")
    assert not PLOTLY_BANNER.search(page)  # no charts, no 4 MB of plotly.js
    assert len(page) < 40_000


# -- escaping ----------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [h for h in HOSTILE if h != "</script>"])
def test_hostile_strings_never_appear_raw(hostile_page: str, raw: str) -> None:
    assert raw not in hostile_page
    assert "<img" not in hostile_page
    assert "alert(1)</script>" not in hostile_page


def test_hostile_strings_cannot_open_or_close_elements(hostile_page: str) -> None:
    soup = Soup(hostile_page).root
    assert not soup.find_all("img")
    assert len(soup.find_all("script")) == 1 + CHART_COUNT + 2
    # every "</script>" closes one of ours
    assert hostile_page.count("</script>") == len(re.findall(r"<script[ >]", hostile_page))
    for script in soup.find_all("script"):
        if not PLOTLY_BANNER.search(script.text[:200]):  # ours: JSON and a few lines of JS
            assert not set("<>&") & set(script.text)


def test_hostile_strings_are_shown_as_text(hostile_page: str) -> None:
    soup = Soup(hostile_page).root
    view = sample_view(hostile=True)
    assert soup.by_id("verdict").find_all("p", class_="headline")[0].text == view.headline
    gpu_cell = soup.by_id("gpus").find_all("tbody")[0].find_all("th")[0]
    assert gpu_cell.text == view.sections[0].tables[0].rows[0][0]
    assert view.appendix.inputs.rows[0][0] in soup.by_id("appendix").text
    assert soup.find_all("title")[0].text == view.title


def test_hostile_strings_in_chart_data_are_plain_text(hostile_page: str) -> None:
    """Plotly reads tags in labels; the label must decode to entity-escaped text."""
    view = sample_view(hostile=True)
    gpu0 = view.sections[1].timeline.gpu_labels[0]  # type: ignore[union-attr]
    calls = _plotly_calls(hostile_page)
    _, data, layout = calls[0]
    assert data[0]["name"] == html.escape(gpu0, quote=False)
    assert "…" in layout["yaxis"]["ticktext"][0]  # long names are cut on the axis
    nvtx = view.sections[4].stacked[0].categories[0]
    _, data, _ = next(c for c in calls if c[0] == "chart-host-stacked-0")
    assert html.escape(nvtx, quote=False) in data[0]["hovertemplate"]


def test_embedded_metadata_json_is_escaped_and_round_trips(hostile_page: str) -> None:
    soup = Soup(hostile_page).root
    meta = soup.by_id("nsysan-meta")
    assert "<" not in meta.text and ">" not in meta.text and "&" not in meta.text
    assert json.loads(meta.text)["headline"] == sample_view(hostile=True).headline


def test_script_json_escapes_markup_characters() -> None:
    text = str(script_json({"k": "</script><b>&amp;\u2028"}))
    assert not set("<>&") & set(text)
    assert json.loads(text) == {"k": "</script><b>&amp;\u2028"}


# -- i18n --------------------------------------------------------------------------------


def test_catalogs_have_the_same_keys_and_placeholders() -> None:
    assert i18n.EN.keys() == i18n.ZH.keys()
    field = re.compile(r"\{(\w+)\}")
    for key in i18n.EN:
        assert set(field.findall(i18n.EN[key])) == set(field.findall(i18n.ZH[key])), key


def test_chinese_report_uses_chinese_labels() -> None:
    page = render_html(sample_view(lang="zh"))
    soup = Soup(page).root
    assert soup.find_all("html")[0].attrs["lang"] == "zh"
    assert i18n.t("myths.title", "zh") in soup.by_id("myths").text
    assert i18n.t("appendix.title", "zh") in soup.by_id("appendix").text
    assert i18n.t("verdict.title", "en") not in soup.by_id("verdict").text
    layout = _plotly_calls(page)[0][2]
    assert layout["xaxis"]["title"]["text"].startswith("时间线上的时间")


def test_every_catalog_key_is_used() -> None:
    sources = "".join(
        p.read_text(encoding="utf-8")
        for p in [*templates_dir().rglob("*.j2"), *Path(charts.__file__).parent.glob("*.py")]
    )
    unused = [
        k
        for k in i18n.EN
        if f'"{k}"' not in sources
        and f"'{k}'" not in sources
        and not k.startswith(("severity.", "myth."))
    ]
    assert not unused


# -- charts alone ------------------------------------------------------------------------


def test_chart_fragment_escapes_json_strings() -> None:
    timeline = TimelineView(
        gpu_labels=("a&b </script>", "c"),
        bin_start_ns=(0, 10),
        bin_ns=10,
        busy_share=((0.5, None), (1.0, 0.0)),
        gaps=((1, 12, 20),),
        note="",
    )
    fragment = charts.timeline_chart(timeline, "t1")
    script = fragment[fragment.index("<script") :]
    body = script[script.index(">") + 1 : script.rindex("</script>")]
    assert "</" not in body and "&" not in body
    assert 'id="t1"' in fragment


def test_section_keys_become_safe_unique_anchors() -> None:
    base = sample_view()
    odd = Section(key='x" onmouseover="alert(1)', title="odd", paragraphs=("p",))
    clash = Section(key="appendix", title="clash", paragraphs=("p",))
    view = dataclasses.replace(base, sections=(odd, clash, odd))
    soup = Soup(render_html(view)).root
    ids = [s.attrs["id"] for s in soup.find_all("section")]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z0-9_-]+", i) for i in ids)
    assert "onmouseover" not in {k for n in soup.iter() for k in n.attrs}


def test_templates_are_found_with_every_partial() -> None:
    root = templates_dir()
    assert (root / "report.html.j2").is_file() and (root / "assets" / "report.css").is_file()
    referenced = set(
        re.findall(
            r'"(_partials/[\w.]+)"',
            "".join(p.read_text(encoding="utf-8") for p in root.rglob("*.j2")),
        )
    )
    assert referenced and all((root / name).is_file() for name in referenced)


# -- writing -----------------------------------------------------------------------------


def test_write_html_writes_the_rendered_page(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.html"
    assert write_html(no_gpu_view(), target) == target
    assert target.read_text(encoding="utf-8") == render_html(no_gpu_view())
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]


def test_failed_write_keeps_the_old_report_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.html"
    target.write_text("previous report", encoding="utf-8")

    def fail(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OutputError):
        write_html(no_gpu_view(), target)
    assert target.read_text(encoding="utf-8") == "previous report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_render_error_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nsysan.report.html as report_html

    def boom(view: object) -> str:
        raise RuntimeError("render failed")

    monkeypatch.setattr(report_html, "render_html", boom)
    with pytest.raises(RuntimeError):
        report_html.write_html(no_gpu_view(), tmp_path / "report.html")
    assert not list(tmp_path.iterdir())

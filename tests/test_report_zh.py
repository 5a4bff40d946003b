"""The Chinese report is Chinese throughout: no English phrase left on the page.

Every generated scenario (and the named real traces) is rendered with ``--lang zh``;
the visible text (outside scripts, code and the settings/inputs tables, which hold
identifiers as typed) must contain no English word, except identifiers taken from
the trace (kernel names, NVTX text, thread calls, GPU names, file names), metric
names and units in :data:`ALLOWED`.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, SHARED_TRACES, cori_rank_files

from nsysan.analysis import analyze
from nsysan.diagnose import diagnose
from nsysan.ingest import load_trace
from nsysan.ingest.ncu import read_ncu_csv
from nsysan.model import Trace
from nsysan.report.html import render_html
from nsysan.report.view import build_view

FIXTURES = REPO / "fixtures"
SCENARIOS = sorted(json.loads((FIXTURES / "ground_truth.json").read_text()))

# Names, metric keys and units that stay as they are in a Chinese report.
ALLOWED = frozenset(
    """
    nsysan GPU GPUs CPU NCCL CUDA NVTX NVML GIL SM GR Active Issue DCGM PCIe NVLink NVSwitch DRAM
    MHz GHz KiB MiB GiB TiB ms µs ns s B UTC Nsight Systems Compute SOL Graph API OS I/O poll sleep
    nvidia-smi nsys ncu profile delay capture-range cudaProfilerApi sample cpu cpuctxsw process-tree
    gpu-metrics-devices all trace cuda nvtx osrt plotly js cartesian bundle heatmap bar scatter true request
    cudaStreamSynchronize cudaDeviceSynchronize cudaMemcpyAsync Rust C warp DP TP PP MoE KV cache batch
    tokenizer gpu_gaps analyze unjoined AllReduce AllGather ReduceScatter Broadcast Reduce SendRecv
    Send Recv kernels csv Python CUDA_VISIBLE_DEVICES TARGET_INFO_GPU memcpy memset GPC JSON pts
    NVIDIA cudaGraphLaunch cuGraphLaunch MPS
    """.split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|[A-Za-z]")
_SKIP_TAGS = {"script", "style", "code", "title"}
_SKIP_TABLE_CLASSES = {"settings", "inputs"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, bool]] = []
        self.chunks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"br", "meta", "img", "input", "hr", "link"}:
            return
        classes = set((dict(attrs).get("class") or "").split())
        skip = tag in _SKIP_TAGS or (tag == "table" and bool(classes & _SKIP_TABLE_CLASSES))
        self.stack.append((tag, skip))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        if not any(skip for _, skip in self.stack):
            self.chunks.append(data)


def _identifiers(trace: Trace) -> list[str]:
    names: set[str] = set()
    for col in ("short_name", "name"):
        names |= set(trace.kernels[col].drop_nulls().unique().to_list())
    names |= set(trace.nvtx["text"].drop_nulls().unique().to_list())
    names |= set(trace.osrt["name"].drop_nulls().unique().to_list())
    gpu_names = set(trace.gpus["name"].drop_nulls().unique().to_list())
    names |= gpu_names | {n.replace("NVIDIA ", "") for n in gpu_names}
    names |= {p.rsplit("/", 1)[-1] for p in trace.sources["path"].to_list()}
    names |= set(trace.sources["host"].drop_nulls().to_list())
    return sorted((n for n in names if n), key=len, reverse=True)


def english_left(page: str, identifiers: list[str]) -> list[str]:
    """English words in the visible text of ``page`` that are not identifiers."""
    parser = _Text()
    parser.feed(page)
    text = " ".join(parser.chunks)
    for ident in identifiers:
        text = text.replace(ident, " ")
    # Command-line options and snake_case/dotted keys are identifiers too.
    text = re.sub(
        r"--[\w-]+|`[^`]*`|\bp\d+\b|\S*[_./\\:]\S*[A-Za-z]\S*|\S*\d[A-Za-z]+\S*", " ", text
    )
    return [w for w in _WORD.findall(text) if w not in ALLOWED]


def _check(paths: list[Path], ncu: Path | None = None) -> None:
    analysis = analyze(
        load_trace(paths),
        ncu=read_ncu_csv(ncu) if ncu is not None and ncu.exists() else None,
        ncu_path=ncu if ncu is not None and ncu.exists() else None,
    )
    page = render_html(build_view(analysis, diagnose(analysis), "zh"))
    left = english_left(page, _identifiers(analysis.trace))
    assert not left, f"untranslated English in the zh report: {sorted(set(left))[:40]}"


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_scenario_renders_fully_in_chinese(name: str) -> None:
    _check([FIXTURES / f"{name}.sqlite"], FIXTURES / f"{name}.ncu.csv")


NAMED = [
    "T028-nsight-systems-deep-dive",
    "T039-gpu-poisson-solver",
    "T010-alpa",
    "T111-cuda-multigpu-steams",
    "T109-abacus",
]


@pytest.mark.shared
@pytest.mark.parametrize("folder", NAMED)
def test_named_real_traces_render_fully_in_chinese(folder: str) -> None:
    path = SHARED_TRACES / folder / "trace.sqlite"
    if not path.exists():
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    _check([path])


@pytest.mark.shared
def test_cori_renders_fully_in_chinese() -> None:
    files = cori_rank_files()
    if not files:
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    _check(files)


def test_the_detector_finds_english() -> None:
    page = "<html><body><p>间隙 gap share 35%</p><code>not_this</code></body></html>"
    assert english_left(page, []) == ["gap", "share"]
    assert english_left("<p>GPU 0 的 SM Active 为 1%</p>", []) == []
    assert pl is not None


@pytest.mark.parametrize(
    ("note", "expected"),
    [
        (
            "h.sqlite: 1 CUPTI_ACTIVITY_KIND_KERNEL row with end 9223372036854775807 (2^63-1), "
            "more than a day after the capture end (3154332868 ns): ignored",
            "h.sqlite：CUPTI_ACTIVITY_KIND_KERNEL 中有 1 行end 为 9223372036854775807 (2^63-1)，"
            "比采集结束（3154332868 ns）晚一天以上：已忽略",
        ),
        (
            "h.sqlite: 12 CUPTI_ACTIVITY_KIND_RUNTIME rows with a text value in start "
            "(nsys writes integers): ignored",
            "h.sqlite：CUPTI_ACTIVITY_KIND_RUNTIME 中有 12 行start 为文本值（nsys 只写整数）：已忽略",
        ),
        (
            "3 NVTX_EVENTS rows with no start: ignored",
            "NVTX_EVENTS 中有 3 行缺少 start：已忽略",
        ),
        (
            "2 NVTX_EVENTS string(s) longer than 16384 bytes were truncated for display",
            "NVTX_EVENTS 中有 2 个字符串超过 16384 字节，显示时已截断",
        ),
    ],
)
def test_ingest_notes_on_dropped_rows_are_translated(note: str, expected: str) -> None:
    from nsysan.report.catalog import translate

    assert translate(note, "zh") == expected

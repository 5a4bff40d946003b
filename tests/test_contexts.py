"""Several contexts on one physical GPU: MPS clients and green contexts stay one GPU.

The balanced fixture (4 GPUs, one process each) is rewritten in a temporary copy: the
process of GPU 1 runs on GPU 0 instead (two processes on one GPU, as MPS clients are),
and GPU 2's kernels run in two green contexts.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from nsysan import load_trace
from nsysan.analysis import analyze
from nsysan.analyze.contexts import context_split
from nsysan.intervals import union_intervals

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def shared_gpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("contexts") / "mps.sqlite"
    shutil.copyfile(FIXTURES / "balanced.sqlite", path)
    con = sqlite3.connect(path)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"):
        con.execute(f"UPDATE {table} SET deviceId = 0 WHERE deviceId = 1")
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET greenContextId = 1 + correlationId % 2 "
        "WHERE deviceId = 2"
    )
    con.commit()
    con.close()
    return path


def test_contexts_on_one_gpu_stay_one_gpu_with_their_split(shared_gpu: Path) -> None:
    trace = load_trace(shared_gpu)
    original = load_trace(FIXTURES / "balanced.sqlite")
    assert original.gpus.height == 4
    assert trace.gpus.height == 3  # identity is physical: GPU 1's process now shares GPU 0
    assert original.kernels["green_context_id"].null_count() == original.kernels.height
    analysis = analyze(trace)
    assert analysis.busy is not None
    split = context_split(trace.kernels, analysis.busy.windows, analysis.busy.summary)
    # nsysan numbers the 3 physical GPUs 0-2: CUDA device 2 is now GPU 1.
    green = trace.kernels.filter(pl.col("device_id") == 2)["gpu"].unique().item()
    assert green == 1
    by_gpu = split.group_by("gpu").agg(pl.len(), pl.col("kernels").sum()).sort("gpu")
    assert by_gpu.rows() == [
        (0, 2, trace.kernels.filter(pl.col("gpu") == 0).height),
        (1, 2, trace.kernels.filter(pl.col("gpu") == 1).height),
    ]
    gpu0 = split.filter(pl.col("gpu") == 0)
    assert gpu0["pid"].n_unique() == 2 and gpu0["green_context_id"].null_count() == 2
    gpu2 = split.filter(pl.col("gpu") == green)
    assert gpu2["green_context_id"].to_list() == [1, 2] and gpu2["pid"].n_unique() == 1
    # Busy time per context: the union of its kernels; the GPU's busy time is the union
    # of all of them, so each context's share is at most 1 and together at least 1.
    for row in split.iter_rows(named=True):
        mine = trace.kernels.filter(
            (pl.col("gpu") == row["gpu"])
            & (pl.col("pid") == row["pid"])
            & pl.col("green_context_id").eq_missing(row["green_context_id"])
        )
        union = union_intervals(mine.select("start_ns", "end_ns"))
        assert row["busy_ns"] == (union["end_ns"] - union["start_ns"]).sum()
    shares = split.group_by("gpu").agg(
        pl.col("busy_share").sum().alias("total"), pl.col("busy_share").max().alias("largest")
    )
    for _, total, largest in shares.iter_rows():
        assert largest <= 1.0 + 1e-12 and total >= 1.0 - 1e-12


def test_report_shows_the_split_only_where_there_is_one(shared_gpu: Path) -> None:
    from nsysan.diagnose import diagnose
    from nsysan.report.view import build_view

    analysis = analyze(load_trace(shared_gpu))
    view = build_view(analysis, diagnose(analysis), "en")
    gpus = next(s for s in view.sections if s.key == "gpus")
    table = next(t for t in gpus.tables if t.title == "Contexts sharing a GPU")
    assert sorted({r[0] for r in table.rows}) == ["GPU 0", "GPU 1"]
    assert sorted(r[3] for r in table.rows if r[0] == "GPU 1") == ["1", "2"]
    plain = analyze(load_trace(FIXTURES / "balanced.sqlite"))
    plain_view = build_view(plain, diagnose(plain), "en")
    titles = {t.title for s in plain_view.sections for t in s.tables}
    assert "Contexts sharing a GPU" not in titles


def test_the_split_reads_in_chinese(shared_gpu: Path) -> None:
    from test_report_zh import _identifiers, english_left

    from nsysan.diagnose import diagnose
    from nsysan.report.html import render_html
    from nsysan.report.view import build_view

    analysis = analyze(load_trace(shared_gpu))
    page = render_html(build_view(analysis, diagnose(analysis), "zh"))
    assert "共享同一 GPU 的上下文" in page
    assert not english_left(page, _identifiers(analysis.trace))

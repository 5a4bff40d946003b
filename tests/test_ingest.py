"""Ingest of real exports: every version loads, numbers equal NVIDIA's own reports."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest
from conftest import cori_rank_files, reference_dir, single_file_traces

from nsysan import load_trace, model
from nsysan.ingest.nsys import pid_of, tid_of

ALL_FILES = single_file_traces() + cori_rank_files()


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def _kern_sum_reference(path: Path) -> pl.DataFrame | None:
    ref = reference_dir(path) / "cuda_gpu_kern_sum.csv"
    if not ref.exists() or ref.stat().st_size == 0:
        return None
    return pl.read_csv(ref)


@pytest.mark.shared
@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_every_table_conforms_to_the_model(path: Path) -> None:
    trace = load_trace([path])
    for name, schema in model.TABLE_SCHEMAS.items():
        model.check_schema(trace.table(name), schema)
    # GPU activity is always mapped to a physical GPU.
    for name in ("kernels", "memcpy", "memset"):
        assert trace.table(name)["gpu"].null_count() == 0, name


@pytest.mark.shared
@pytest.mark.parametrize(
    "path", [p for p in ALL_FILES if _kern_sum_reference(p) is not None], ids=_id
)
def test_kernel_totals_equal_nsys_stats(path: Path) -> None:
    """Per demangled name: instances, total, min and max equal cuda_gpu_kern_sum exactly."""
    ref = _kern_sum_reference(path)
    assert ref is not None
    trace = load_trace([path])
    duration = pl.col("end_ns") - pl.col("start_ns")
    mine = trace.kernels.group_by(pl.col("name").cast(pl.String)).agg(
        pl.len().cast(pl.Int64).alias("instances"),
        duration.sum().alias("total"),
        duration.min().alias("min"),
        duration.max().alias("max"),
    )
    theirs = ref.select(
        pl.col("Name").alias("name"),
        pl.col("Instances").cast(pl.Int64).alias("instances"),
        pl.col("Total Time (ns)").cast(pl.Int64).alias("total"),
        pl.col("Min (ns)").cast(pl.Int64).alias("min"),
        pl.col("Max (ns)").cast(pl.Int64).alias("max"),
    )
    assert sorted(mine["name"].to_list()) == sorted(theirs["name"].to_list())
    joined = theirs.join(mine, on="name", suffix="_mine")
    for col in ("instances", "total", "min", "max"):
        diff = joined.filter(pl.col(col) != pl.col(f"{col}_mine"))
        assert diff.is_empty(), f"{col} differs:\n{diff}"


@pytest.mark.shared
def test_same_report_two_export_versions_gives_identical_kernels(shared_traces: Path) -> None:
    new = load_trace([shared_traces / "T111-cuda-multigpu-steams/trace.sqlite"])
    old = load_trace([shared_traces / "T112-cuda-multigpu-steams/trace.sqlite"])
    assert new.sources["export_version"][0] == "2022.4.2.1"
    assert old.sources["export_version"][0] == "pre-2021"
    assert new.kernels.height == 128
    assert new.kernels.equals(old.kernels)
    assert new.gpus["pci_bus"].to_list() == old.gpus["pci_bus"].to_list()
    assert new.memcpy.equals(old.memcpy)


@pytest.mark.shared
def test_cori_ranks_are_eight_physical_gpus_on_one_timeline(shared_traces: Path) -> None:
    files = cori_rank_files()
    assert len(files) == 8
    trace = load_trace(files)
    assert trace.gpus.height == 8
    assert trace.gpus["uuid"].n_unique() == 8
    # every rank file drives exactly one GPU, and no GPU is shared between ranks
    per_source = trace.kernels.group_by("source").agg(pl.col("gpu").n_unique())
    assert per_source["gpu"].to_list() == [1] * 8
    assert trace.kernels.select("gpu", "source").unique().height == 8
    sources = trace.sources
    utc = sources["utc_start_ns"].to_list()
    assert utc == sorted(utc)
    assert sources["offset_ns"].to_list() == [u - utc[0] for u in utc]
    # Times are shifted by the offset: compare one rank with its own single-file load.
    last = Path(sources["path"][7])
    alone = load_trace([last])
    shifted = trace.kernels.filter(pl.col("source") == 7)["start_ns"].sort()
    assert (shifted - alone.kernels["start_ns"].sort()).unique().to_list() == [
        sources["offset_ns"][7]
    ]
    # Per-rank CUDA ordinals are the physical indices 0..7, all different.
    assert sorted(trace.kernels["device_id"].unique().to_list()) == list(range(8))


@pytest.mark.shared
@pytest.mark.parametrize(
    "path", [p for p in single_file_traces() if "T039" in str(p) or "T109" in str(p)], ids=_id
)
def test_trace_is_opened_read_only(path: Path) -> None:
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    listing = sorted(p.name for p in path.parent.iterdir())
    load_trace([path])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in path.parent.iterdir()) == listing


@pytest.mark.shared
def test_launches_without_kernel_records_are_named(shared_traces: Path) -> None:
    trace = load_trace([shared_traces / "T078-qcu/trace.sqlite"])
    assert trace.kernels.is_empty()
    assert trace.gpus.is_empty()
    assert any("no GPU activity records" in m for m in trace.capabilities.missing)


@pytest.mark.shared
@pytest.mark.parametrize("name", ["T019-cardiac-simulation", "T082-jacc-jl", "T128-uvmtorch"])
def test_cpu_only_traces_load_as_empty_gpu_work(shared_traces: Path, name: str) -> None:
    trace = load_trace([shared_traces / name / "trace.sqlite"])
    assert not trace.has_gpu_work
    assert trace.capabilities.missing


@pytest.mark.shared
def test_gpu_metrics_by_name_on_one_gpu(shared_traces: Path) -> None:
    trace = load_trace([shared_traces / "T028-nsight-systems-deep-dive/trace.sqlite"])
    metrics = trace.gpu_metrics
    assert {"SM Active", "GR Active", "GPC Clock Frequency"} <= set(metrics["metric"].unique())
    assert metrics["gpu"].null_count() == 0
    assert metrics["time_ns"].min() >= 0  # the negative first sample is dropped
    assert metrics.filter(pl.col("metric") == "SM Active")["value"].max() <= 100


@pytest.mark.shared
def test_nvtx_registered_strings_and_domains(shared_traces: Path) -> None:
    trace = load_trace([shared_traces / "T039-gpu-poisson-solver/trace.sqlite"])
    nccl = trace.nvtx.filter(pl.col("domain") == "NCCL")
    assert nccl.height > 0
    assert {"ncclSend", "ncclRecv"} <= set(nccl["text"].drop_nulls().unique())
    assert trace.nvtx["text"].null_count() < trace.nvtx.height


@pytest.mark.shared
def test_cuda_api_names_lose_version_suffix(shared_traces: Path) -> None:
    trace = load_trace([shared_traces / "T039-gpu-poisson-solver/trace.sqlite"])
    names = set(trace.cuda_api["name"].unique())
    assert "cudaLaunchKernel" in names
    assert not any(n.endswith("_v7000") for n in names)
    # Every kernel has its launch call in the same process (correlation id).
    joined = trace.kernels.join(trace.cuda_api, on=["source", "pid", "correlation_id"], how="left")
    assert joined["name_right"].null_count() == 0


def test_global_id_decoding() -> None:
    gtid = (1 << 48) + (14047 << 24) + 14047
    df = pl.DataFrame({"v": [gtid]}).select(pid_of(pl.col("v")), tid_of(pl.col("v")).alias("t"))
    assert df.row(0) == (14047, 14047)


@pytest.mark.shared
def test_generic_events_form_gives_the_same_metrics(shared_traces: Path) -> None:
    """T028 has both forms: the older GENERIC_EVENTS JSON decodes to the same samples."""
    from nsysan.ingest import nsys_targets
    from nsysan.ingest.sqlite import open_export

    db = open_export(shared_traces / "T028-nsight-systems-deep-dive/trace.sqlite")
    try:
        generic = nsys_targets._read_generic_gpu_metrics(db).filter(pl.col("time_ns") >= 0)
        modern = nsys_targets.read_gpu_metrics(db, 0)
    finally:
        db.close()
    assert generic.height == modern.height > 50_000
    joined = generic.join(modern, on=["time_ns", "metric"], suffix="_modern")
    assert joined.height == generic.height
    assert joined.filter(pl.col("value") != pl.col("value_modern")).is_empty()


def test_text_stored_as_a_blob_in_key_value_tables_reads_as_text(tmp_path: Path) -> None:
    """Some exports store the host name and metadata values as BLOBs: shown as text."""
    import sqlite3

    from nsysan.ingest.nsys_targets import read_metadata, read_system_env
    from nsysan.ingest.sqlite import open_export

    path = tmp_path / "blob.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
        conn.execute("CREATE TABLE TARGET_INFO_SYSTEM_ENV (name TEXT, value TEXT)")
        conn.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES ('Hostname', ?)", (b"node-7\x00",))
        conn.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
        conn.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', ?)", (b"3.11",))
    db = open_export(path)
    try:
        assert read_system_env(db, ["Hostname"]) == {"Hostname": "node-7"}
        assert read_metadata(db) == {"EXPORT_SCHEMA_VERSION": "3.11"}
    finally:
        db.close()


@pytest.mark.shared
def test_big_tables_read_in_halves_side_by_side_equal_one_piece_reads(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nsysan.ingest.sqlite as sqlite_module

    path = shared_traces / "T109-abacus/trace.sqlite"
    # Slices of 1,000 rows: the kernel (23,805) and CUDA API (34,670) tables are then
    # long enough to be read in row-id halves, as on exports with millions of rows.
    monkeypatch.setattr(sqlite_module, "SLICE_ROWS", 1_000)
    halves: list[tuple[str, int]] = []
    ranges = sqlite_module.ExportDB._rowid_ranges

    def counted(self: sqlite_module.ExportDB, table: str, parts: int) -> list[tuple[int, int]]:
        found = ranges(self, table, parts)
        halves.extend((table, len(found)) for _ in found[:1])
        return found

    monkeypatch.setattr(sqlite_module.ExportDB, "_rowid_ranges", counted)
    split = load_trace([path])
    assert sorted(halves) == [("CUPTI_ACTIVITY_KIND_KERNEL", 2), ("CUPTI_ACTIVITY_KIND_RUNTIME", 2)]
    monkeypatch.setattr(sqlite_module.ExportDB, "_rowid_ranges", lambda *a: [])
    whole = load_trace([path])
    for name in model.TABLE_SCHEMAS:
        assert split.table(name).equals(whole.table(name)), name
    assert split.notes == whole.notes

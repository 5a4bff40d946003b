"""Nsight Compute CSV ingest: real exports, unit normalisation, malformed input."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from nsysan.errors import NcuCsvError
from nsysan.ingest.ncu import DETAILS_METRIC_NAMES, ID_COLUMNS, read_ncu_csv, unit_factor

DURATION = "gpu__time_duration.sum"

# Launches per report, counted by hand (raw.csv data rows; details.csv distinct IDs).
REPORT_LAUNCHES = {
    "C012-isc25-icon-c": 7,
    "C043-gpu-poisson-solver": 8,
    "C046-hpc-assignment3": 4,
    "C073-spyinfer": 105,
    "C083-jax-toolbox": 3,
}
# The details page prints 2 decimals of the auto-scaled unit ("789.54 us"), i.e. at
# least 3 significant digits for every value >= 1: relative rounding error <= 0.5%.
DETAILS_ROUNDING = 5e-3


def _report(shared_traces: Path, name: str) -> Path:
    return shared_traces / "ncu" / name


# --- the shared exports -------------------------------------------------------------


@pytest.mark.shared
@pytest.mark.parametrize("report", sorted(REPORT_LAUNCHES))
@pytest.mark.parametrize("page", ["raw", "details"])
def test_every_shared_csv_loads_one_row_per_launch(
    shared_traces: Path, report: str, page: str
) -> None:
    df = read_ncu_csv(_report(shared_traces, report) / f"{page}.csv")
    assert df.height == REPORT_LAUNCHES[report]
    assert df.get_column("id").to_list() == list(range(REPORT_LAUNCHES[report]))
    assert list(df.columns[: len(ID_COLUMNS)]) == list(ID_COLUMNS)
    assert {c: df.schema[c] for c in ID_COLUMNS} == ID_COLUMNS
    assert df.get_column("kernel_name").null_count() == 0


@pytest.mark.shared
@pytest.mark.parametrize("report", sorted(REPORT_LAUNCHES))
def test_raw_and_details_agree(shared_traces: Path, report: str) -> None:
    folder = _report(shared_traces, report)
    raw = read_ncu_csv(folder / "raw.csv")
    details = read_ncu_csv(folder / "details.csv")
    assert raw.get_column("kernel_name").to_list() == details.get_column("kernel_name").to_list()
    if report == "C083-jax-toolbox":
        # ncu 2024.2 read this 2025.3 report's details page as rule rows only (no metric
        # name or value): the page has launches but no metrics.
        assert details.width == len(ID_COLUMNS)
        return
    assert details.get_column(DURATION).to_list() == pytest.approx(
        raw.get_column(DURATION).to_list(), rel=DETAILS_ROUNDING
    )


@pytest.mark.shared
@pytest.mark.parametrize("report", sorted(REPORT_LAUNCHES))
def test_details_display_names_map_to_the_raw_metric(shared_traces: Path, report: str) -> None:
    """Every renamed details metric equals the raw metric of that name (within rounding)."""
    folder = _report(shared_traces, report)
    raw = read_ncu_csv(folder / "raw.csv")
    details = read_ncu_csv(folder / "details.csv")
    for metric in set(DETAILS_METRIC_NAMES.values()) & set(details.columns):
        got, want = details.get_column(metric).to_list(), raw.get_column(metric).to_list()
        if details.schema[metric] == pl.String:
            assert got == want, metric
        else:
            assert got == pytest.approx(want, rel=DETAILS_ROUNDING, abs=0.006), metric


@pytest.mark.shared
def test_hand_checked_values(shared_traces: Path) -> None:
    """Values read off the files by eye, converted by hand."""
    ncu = shared_traces / "ncu"
    c012_raw = read_ncu_csv(ncu / "C012-isc25-icon-c" / "raw.csv")
    c012_details = read_ncu_csv(ncu / "C012-isc25-icon-c" / "details.csv")
    # raw: "789.536000" in a "us" column; details: "Duration","us","789.54".
    assert c012_raw.item(0, DURATION) == pytest.approx(789_536.0)
    assert c012_details.item(0, DURATION) == pytest.approx(789_540.0)
    assert (
        c012_raw.row(0, named=True).items()
        >= {
            "block_x": 256,
            "block_y": 1,
            "grid_x": 10,
            "device": 0,
            "cc": "8.9",
            "pid": 2968,
            "stream": 7,
        }.items()
    )
    assert c012_raw.item(0, "device__attribute_display_name") == "NVIDIA GeForce RTX 4070 SUPER"

    # ncu 2022.3 words: "2.432832" msecond; "931.125089" Gbyte/second; "764.626560"
    # cycle/usecond. No Device/CC/Block/Grid columns: taken from the metrics.
    c043 = read_ncu_csv(ncu / "C043-gpu-poisson-solver" / "raw.csv")
    assert c043.item(0, DURATION) == pytest.approx(2_432_832.0)
    assert c043.item(0, "dram__bytes.sum.per_second") == pytest.approx(931.125089e9)
    assert c043.item(0, "smsp__cycles_elapsed.avg.per_second") == pytest.approx(764.626560e6)
    assert c043.item(0, "launch__shared_mem_config_size") == pytest.approx(8192.0)  # 8.192 Kbyte
    assert (
        c043.row(0, named=True).items()
        >= {
            "device": 0,
            "cc": "8.0",
            "block_x": 8,
            "block_y": 8,
            "block_z": 16,
            "grid_x": 64,
            "grid_y": 64,
            "grid_z": 32,
        }.items()
    )
    assert c043.schema["nvlink__source_ports"] == pl.Float64  # all "no data" -> null
    assert c043.get_column("nvlink__source_ports").null_count() == c043.height

    # ncu 2024.2 words: "1.941696" ms; "9.009394" Gbyte/s; details "1.94" ms.
    c046 = read_ncu_csv(ncu / "C046-hpc-assignment3" / "raw.csv")
    assert c046.item(3, DURATION) == pytest.approx(1_941_696.0)
    assert c046.item(3, "dram__bytes.sum.per_second") == pytest.approx(9.009394e9)
    c046_details = read_ncu_csv(ncu / "C046-hpc-assignment3" / "details.csv")
    assert c046_details.item(3, DURATION) == pytest.approx(1_940_000.0)
    assert c046_details.item(0, DURATION) == pytest.approx(4_830.0)  # "4.83" us

    # "868.365119" Mhz and "6.098039" Ghz.
    c073 = read_ncu_csv(ncu / "C073-spyinfer" / "raw.csv")
    assert c073.item(0, "gpc__cycles_elapsed.avg.per_second") == pytest.approx(868.365119e6)
    assert c073.item(0, "dram__cycles_elapsed.avg.per_second") == pytest.approx(6.098039e9)

    # A 2025.3 report read by ncu 2024.2: every unit blank, durations raw ns ("5184").
    c083 = read_ncu_csv(ncu / "C083-jax-toolbox" / "raw.csv")
    assert c083.get_column(DURATION).to_list() == [5184.0, 4864.0, 4896.0]
    assert c083.get_column("derived_tempMetric4").null_count() == 3  # "nan"
    assert c083.item(0, "launch__tpc_enabled") == "all"
    assert c083.get_column("stream").to_list() == [16, 16, 19]


# --- small hand-written files -------------------------------------------------------

RAW_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__bytes_read.sum",'
    '"dram__bytes.sum.per_second","gpc__cycles_elapsed.avg.per_second",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","launch__func_cache_config",'
    '"smsp__inst_executed.sum"\n'
)
RAW_UNITS = (
    '"","","","","","","","","","","","usecond","Mbyte","Gbyte/second","Ghz","%","","inst"\n'
)


def _row(launch: int, duration: str, name: str = "k(int)") -> str:
    return (
        f'"{launch}","10","app","host","{name}","1","7","(256, 1, 1)","(80, 2, 1)","0","9.0",'
        f'"{duration}","1.5","2.5","1.41","42.5","CachePreferNone","1,234,567"\n'
    )


def _write(tmp_path: Path, text: str | bytes, name: str = "ncu.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_raw_page_with_preamble_separators_and_nulls(tmp_path: Path) -> None:
    text = (
        "==PROF== Connected to process 10 (/app)\n"
        "hello from the application, with, commas\n"
        "==PROF== Disconnected from process 10\n"
        + RAW_HEADER
        + RAW_UNITS
        + _row(1, "1,234.5")
        + _row(0, "n/a")
        + "==WARNING== a late profiler message\n"
    )
    df = read_ncu_csv(_write(tmp_path, text))
    assert df.get_column("id").to_list() == [0, 1]
    first = df.row(1, named=True)
    assert first[DURATION] == pytest.approx(1_234_500.0)  # 1,234.5 usecond -> ns
    assert first["dram__bytes_read.sum"] == pytest.approx(1.5e6)
    assert first["dram__bytes.sum.per_second"] == pytest.approx(2.5e9)
    assert first["gpc__cycles_elapsed.avg.per_second"] == pytest.approx(1.41e9)
    assert first["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(42.5)
    assert first["smsp__inst_executed.sum"] == pytest.approx(1_234_567.0)
    assert first["launch__func_cache_config"] == "CachePreferNone"
    assert (first["grid_x"], first["grid_y"], first["grid_z"]) == (80, 2, 1)
    assert df.item(0, DURATION) is None  # "n/a"
    assert df.schema["launch__func_cache_config"] == pl.String
    assert df.schema[DURATION] == pl.Float64


def test_details_page_pivots_to_the_raw_form(tmp_path: Path) -> None:
    head = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context",'
        '"Stream","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name",'
        '"Rule Type","Rule Description"\n'
    )
    ident = '"{}","10","app","host","k(int)","2023-Jul-21 13:59:20","1","7",'
    sol = "GPU Speed Of Light Throughput"
    text = (
        head
        + ident.format(0) + f'"{sol}","Duration","msecond","1,002.50",\n'
        + ident.format(0) + f'"{sol}","Memory [%]","%","81.20",\n'
        + ident.format(0) + '"SpeedOfLight","","","","SOLBottleneck","WRN","a rule"\n'
        + ident.format(0) + '"Memory Workload Analysis","Memory Throughput","Tbyte/second","1.5",\n'
        + ident.format(0) + '"Custom","Odd Metric","","fast",\n'
        + ident.format(1) + f'"{sol}","Duration","usecond","3.25",\n'
        + ident.format(1) + '"Custom","Odd Metric","","n/a",\n'
    )  # fmt: skip
    df = read_ncu_csv(_write(tmp_path, text))
    assert df.get_column(DURATION).to_list() == pytest.approx([1_002_500_000.0, 3_250.0])
    assert df.item(0, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") == 81.2
    assert df.item(0, "dram__bytes.sum.per_second") == pytest.approx(1.5e12)
    assert df.get_column("Custom: Odd Metric").to_list() == ["fast", None]
    assert "Kernel Time" not in df.columns
    assert df.get_column("block_x").to_list() == [None, None]


@pytest.mark.parametrize(
    ("unit", "factor"),
    [
        ("", 1.0),
        ("%", 1.0),
        ("nsecond", 1.0),
        ("ns", 1.0),
        ("usecond", 1e3),
        ("us", 1e3),
        ("msecond", 1e6),
        ("ms", 1e6),
        ("second", 1e9),
        ("s", 1e9),
        ("byte", 1.0),
        ("Kbyte", 1e3),
        ("Mbyte", 1e6),
        ("Gbyte", 1e9),
        ("KB", 1e3),
        ("MB", 1e6),
        ("KiB", 1024.0),
        ("byte/second", 1.0),
        ("Gbyte/second", 1e9),
        ("Mbyte/s", 1e6),
        ("Tbyte/s", 1e12),
        ("Kbyte/cycle", 1e3),
        ("Kbyte/block", 1e3),
        ("Hz", 1.0),
        ("Khz", 1e3),
        ("Mhz", 1e6),
        ("Ghz", 1e9),
        ("GHz", 1e9),
        ("cycle/nsecond", 1e9),
        ("cycle/usecond", 1e6),
        ("sector/ns", 1e9),
        ("sector/second", 1.0),
        ("cycle", 1.0),
        ("inst", 1.0),
        ("inst/cycle", 1.0),
        ("register/thread", 1.0),
        ("warp", 1.0),
        ("SM", 1.0),
        ("Kinst", 1e3),
    ],
)
def test_unit_factor(unit: str, factor: float) -> None:
    assert unit_factor(unit) == pytest.approx(factor)


@pytest.mark.parametrize("unit", ["12.5", "@@", "byte/", "a/b/c", "(256, 1, 1)"])
def test_unit_factor_rejects_garbage(unit: str) -> None:
    assert unit_factor(unit) is None


# --- malformed input ----------------------------------------------------------------

DETAILS_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
    '"Rule Description"\n'
)

MALFORMED: dict[str, tuple[str | bytes, str]] = {
    "empty": ("", "empty file"),
    "blank": ("\n  \n", "empty file"),
    "preamble only": (
        "==PROF== Connected to process 10\n==PROF== Disconnected from process 10\n",
        'no ncu header row (a CSV row with "ID" and "Kernel Name")',
    ),
    "not a csv": ("just some text\nand more\n", "no ncu header row"),
    "binary junk": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "binary data"),
    "not utf-8": (b"ID,Kernel Name\n\xff\xfe\xfa\n", "not UTF-8 text"),
    "no units row": (RAW_HEADER, "without its units row"),
    "units row missing": (RAW_HEADER + _row(0, "1.0"), "line 2: expected the units row"),
    "units row garbage": (
        RAW_HEADER + RAW_UNITS.replace('"usecond"', '"12.5"'),
        "line 2: units row: '12.5' (column 'gpu__time_duration.sum') is not a unit",
    ),
    "units row short": (RAW_HEADER + '"",""\n', "line 2: units row has 2 fields"),
    "ragged row": (
        RAW_HEADER + RAW_UNITS + _row(0, "1.0") + '"1","10","app"\n',
        "line 4: 3 fields, the header has 18",
    ),
    "non-numeric value": (
        RAW_HEADER + RAW_UNITS + _row(0, "1.0") + _row(1, "fast"),
        "line 4: value 'fast' of metric 'gpu__time_duration.sum' (unit 'usecond') is not a number",
    ),
    "non-integer id": (RAW_HEADER + RAW_UNITS + _row(0, "1.0").replace('"0"', '"x"', 1), "line 3"),
    "duplicate id": (
        RAW_HEADER + RAW_UNITS + _row(0, "1.0") + _row(0, "2.0"),
        "line 4: launch ID 0 appears twice",
    ),
    "bad block size": (
        RAW_HEADER + RAW_UNITS + _row(0, "1.0").replace("(256, 1, 1)", "(256, 1)"),
        "line 3: Block Size '(256, 1)' is not of the form (x, y, z)",
    ),
    "details ragged": (
        DETAILS_HEADER + '"0","10","app","host","k","1","7","S","M","us"\n',
        "line 2: 10 fields, expected 11 to 14",
    ),
    "details bad unit": (
        DETAILS_HEADER + '"0","10","app","host","k","1","7","S","M","u$","1.0",\n',
        "line 2: Metric Unit 'u$' is not a unit",
    ),
    "details non-numeric": (
        DETAILS_HEADER + '"0","10","app","host","k","1","7","S","M","us","1.0.0",\n',
        "line 2: value '1.0.0' of metric 'S: M' (unit 'us') is not a number",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_is_a_one_line_error(tmp_path: Path, case: str) -> None:
    content, expected = MALFORMED[case]
    path = _write(tmp_path, content)
    with pytest.raises(NcuCsvError) as info:
        read_ncu_csv(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert info.value.slug == "ncu-csv"


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(NcuCsvError, match="file not found"):
        read_ncu_csv(tmp_path / "absent.csv")
    with pytest.raises(NcuCsvError, match="is a directory"):
        read_ncu_csv(tmp_path)


def test_header_and_units_only_is_an_empty_table(tmp_path: Path) -> None:
    df = read_ncu_csv(_write(tmp_path, RAW_HEADER + RAW_UNITS))
    assert df.height == 0
    assert df.schema[DURATION] == pl.Float64
    assert list(df.columns[: len(ID_COLUMNS)]) == list(ID_COLUMNS)

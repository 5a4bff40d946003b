"""Writing a built trace as an SQLite export (atomically), with the rows about the export."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from nsysan.output import in_flight
from nsysan.simulate import schema
from nsysan.simulate.hardware import Gpu, system_env_rows, target_info_gpu_row
from nsysan.simulate.trace import TraceBuilder

SESSION_START = datetime(2025, 3, 14, 9, 26, 53, tzinfo=timezone.utc)
EXPORT_TIME = "2025-03-14T10:02:11"
CAPTURE_START_NS = 120_000_000  # collection starts this long after the session
CAPTURE_TAIL_NS = 40_000_000  # collection stops this long after the last event


def add_header(
    b: TraceBuilder, gpus: Sequence[Gpu], *, scenario: str, seed: int, scale: float,
    hostile: bool,
) -> None:  # fmt: skip
    """Metadata, session, node and enum rows, plus ANALYSIS_DETAILS spanning every event."""
    source = f"{scenario}.nsys-rep"
    meta = (
        ("EXPORT_PRODUCT_NAME", schema.EXPORT_PRODUCT_NAME),
        ("EXPORT_PRODUCT_VERSION", schema.EXPORT_PRODUCT_VERSION),
        ("EXPORT_PRODUCT_DATE", "2024.2"),
        ("EXPORT_SCHEMA_VERSION", schema.EXPORT_SCHEMA_VERSION),
        *(
            (f"EXPORT_SCHEMA_VERSION_{part}", value)
            for part, value in zip(
                ("MAJOR", "MINOR", "MICRO"), schema.EXPORT_SCHEMA_VERSION.split("."), strict=True
            )
        ),
        ("EXPORT_PLATFORM", "linux-desktop"),
        ("EXPORT_ARCH", "x64"),
        ("EXPORT_TIME_UTC", EXPORT_TIME),
        ("EXPORT_TIME_LOCAL", f"{EXPORT_TIME} +0000 UTC"),
        ("EXPORT_HOST", schema.EXPORT_HOST),
        ("EXPORT_USER", "nsysan"),
        ("EXPORT_PARAM_INPUT_FILE", source),
        ("EXPORT_PARAM_OUTUPT_FILE", f"{scenario}.sqlite"),
        ("EXPORT_PARAM_LAZY", "true"),
        ("NSYSAN_SIMULATE_SCENARIO", scenario),
        ("NSYSAN_SIMULATE_SEED", str(seed)),
        ("NSYSAN_SIMULATE_SCALE", repr(scale)),
        ("NSYSAN_SIMULATE_HOSTILE_NAMES", "true" if hostile else "false"),
    )
    b.rows["META_DATA_EXPORT"].extend(meta)
    epoch_ns = int(SESSION_START.timestamp()) * 1_000_000_000
    stamp = SESSION_START.strftime("%Y-%m-%dT%H:%M:%S")
    b.rows["TARGET_INFO_SESSION_START_TIME"].append((epoch_ns, stamp, stamp))
    b.rows["TARGET_INFO_SYSTEM_ENV"].extend(system_env_rows(b.cpu_cores))
    b.rows["TARGET_INFO_GPU"].extend(target_info_gpu_row(g) for g in gpus)
    for table, rows in schema.ENUM_ROWS.items():
        b.rows[table].extend(rows)
    last = max(
        [r.end for r in b.kernel_runs]
        + [c.end for c in b.copy_runs]
        + [s.end for s in b.host_spans]
        + [b.last_metric_ns]
    )
    stop = last + CAPTURE_TAIL_NS
    b.rows["ANALYSIS_DETAILS"].append(
        (schema.GLOBAL_VID, stop - CAPTURE_START_NS, CAPTURE_START_NS, stop)
    )


def write_sqlite(b: TraceBuilder, path: Path) -> None:
    """Write every non-empty table of ``b`` to ``path`` (temp file + os.replace)."""
    _atomic(path, lambda tmp: _fill(b, tmp))


def _fill(b: TraceBuilder, tmp: Path) -> None:
    con = sqlite3.connect(tmp)
    try:
        con.execute("PRAGMA journal_mode = OFF")
        con.execute("PRAGMA synchronous = OFF")
        for table, ddl in schema.DDL.items():
            rows = b.rows[table]
            if not rows:
                continue  # a lazy export leaves empty tables out
            con.execute(ddl)
            con.executemany(schema.insert_sql(table), rows)
        con.commit()
    finally:
        con.close()


def _atomic(path: Path, fill: Callable[[Path], None]) -> None:
    """Run ``fill`` on a temporary file in ``path``'s directory, then rename it over ``path``."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    tmp = Path(name)
    try:
        with in_flight(tmp, f"{tmp}-journal"):
            fill(tmp)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""

    def fill(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    _atomic(path, fill)

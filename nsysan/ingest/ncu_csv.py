"""The text layer of an Nsight Compute CSV export: rows found, cells typed, errors located.

ncu's page shapes, metric names and units are :mod:`nsysan.ingest.ncu`'s; this module
knows only how ncu frames its CSV. :func:`read_rows` reads the file as UTF-8 text,
finds the header (the first CSV row holding both "ID" and "Kernel Name", past the
``==PROF==`` lines and program output ``ncu --csv`` prints when it profiles live) and
returns the rows after it, without blank rows and ncu's ``==...==`` lines. The
``parse_*`` functions type a text column of those rows (launch IDs, integers,
"(x, y, z)" sizes). Each problem becomes a one-line :class:`nsysan.errors.NcuCsvError`
naming the file and, where there is one, the line (:func:`csv_error`).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import polars as pl

from nsysan.errors import NcuCsvError

__all__ = ["csv_error", "parse_ids", "parse_ints", "parse_launch_dims", "read_rows"]

_LAUNCH_DIMS = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")


def csv_error(path: Path, problem: str, line: int | None = None) -> NcuCsvError:
    """The error for ``problem`` in ``path``, at ``line`` where there is one (to raise)."""
    where = f"{path}: line {line}: " if line is not None else f"{path}: "
    return NcuCsvError(where + problem)


def read_rows(path: Path) -> tuple[int, list[str], list[tuple[int, list[str]]]]:
    """Header line number, header, and (line number, fields) of every later CSV row."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise csv_error(path, "file not found") from None
    except IsADirectoryError:
        raise csv_error(path, "is a directory, not an ncu CSV file") from None
    except OSError as exc:
        raise csv_error(path, f"cannot be read ({exc.strerror})") from None
    if not data.strip():
        raise csv_error(path, "empty file (expected an ncu --csv export)")
    if b"\x00" in data:
        raise csv_error(path, "binary data, not an ncu CSV export")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise csv_error(path, f"not UTF-8 text (byte {exc.start}): not an ncu CSV export") from None

    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    header_line = 0
    rows: list[tuple[int, list[str]]] = []
    try:
        for fields in reader:
            line = reader.line_num
            if header is None:
                if "ID" in fields and "Kernel Name" in fields:
                    header, header_line = fields, line
                continue
            # ncu interleaves its own "==PROF==" / "==WARNING==" lines with output.
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if fields[0].startswith("=="):
                continue
            rows.append((line, fields))
    except csv.Error as exc:
        raise csv_error(path, f"not valid CSV ({exc})", reader.line_num) from None
    if header is None:
        raise csv_error(path, 'no ncu header row (a CSV row with "ID" and "Kernel Name") found')
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise csv_error(path, f"header repeats column {duplicates[0]!r}", header_line)
    return header_line, header, rows


def parse_ids(path: Path, table: pl.DataFrame) -> pl.Series:
    """The "ID" column of ``table`` (text, with a "line" column) as Int64 launch IDs."""
    ids = table.get_column("ID").str.strip_chars().cast(pl.Int64, strict=False)
    bad = table.filter(ids.is_null())
    if bad.height:
        raise csv_error(
            path, f"launch ID {bad.item(0, 'ID')!r} is not an integer", bad.item(0, "line")
        )
    return ids


def parse_ints(
    path: Path, table: pl.DataFrame, header: str, dtype: pl.DataType | type[pl.DataType]
) -> pl.Series:
    """Column ``header`` of ``table`` as integers of ``dtype``; blank cells are null."""
    text = table.get_column(header).str.strip_chars()
    values = text.cast(dtype, strict=False)
    bad = table.filter(values.is_null() & (text != ""))
    if bad.height:
        raise csv_error(
            path, f"{header} {bad.item(0, header)!r} is not an integer", bad.item(0, "line")
        )
    return values


def parse_launch_dims(path: Path, table: pl.DataFrame, header: str, prefix: str) -> list[pl.Series]:
    """Column ``header`` ("(256, 1, 1)") as ``<prefix>_x/y/z`` Int32; blank cells are null."""
    text = table.get_column(header).str.strip_chars()
    groups = text.str.extract_groups(_LAUNCH_DIMS.pattern)
    dims = [groups.struct.field(str(i + 1)).cast(pl.Int32, strict=False) for i in range(3)]
    bad = table.filter((dims[0].is_null() | dims[1].is_null() | dims[2].is_null()) & (text != ""))
    if bad.height:
        raise csv_error(
            path,
            f"{header} {bad.item(0, header)!r} is not of the form (x, y, z)",
            bad.item(0, "line"),
        )
    return [dim.alias(f"{prefix}_{axis}") for dim, axis in zip(dims, "xyz", strict=True)]

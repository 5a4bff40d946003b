"""Shared fixtures: where the real exports live, and per-trace reference reports."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

# Tests read exports from SQLite and never fill the user's cache folder; the table
# cache has its own tests (test_table_cache.py), which turn it on in a temporary folder.
os.environ["NSYSAN_CACHE"] = "off"


def _shared_traces_dir() -> Path:
    env = os.environ.get("NSYSAN_SHARED_TRACES")
    if env:
        return Path(env)
    return REPO.parent / "shared" / "traces"


SHARED_TRACES = _shared_traces_dir()


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The folder of real Nsight exports (../shared/traces); skips when absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    return SHARED_TRACES


def single_file_traces() -> list[Path]:
    """Every single-file export (``<id>-<name>/trace.sqlite``), sorted; [] when absent."""
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(SHARED_TRACES.glob("*/trace.sqlite"))


def cori_rank_files() -> list[Path]:
    """The 8 per-rank reports of one MPI job, in file-name order."""
    return sorted((SHARED_TRACES / "cori-8rank-a").glob("report*.sqlite"))


def reference_dir(trace_path: Path) -> Path:
    """NVIDIA's reports for one export: ``<folder>/reference/<file stem>/``."""
    return trace_path.parent / "reference" / trace_path.stem


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``nsysan ARGS`` in-process: (exit code, stdout, stderr)."""
    from nsysan.cli import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def with_string_names(trace: Any) -> Any:
    """``trace`` with its categorical name columns as plain strings.

    The reference implementations kept in the tests predate names as categoricals
    and use string operations on them.
    """
    import dataclasses

    import polars as pl

    from nsysan import model

    tables = {
        name: trace.table(name).with_columns(pl.col(pl.Categorical).cast(pl.String))
        for name in model.TABLE_SCHEMAS
    }
    return dataclasses.replace(trace, **tables)


@pytest.fixture
def cache_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """nsysan's table cache turned on, in a fresh folder; returns its ``tables/`` folder."""
    from nsysan.ingest import cache

    folder = tmp_path / "cache"
    monkeypatch.setenv("NSYSAN_CACHE", "on")
    monkeypatch.setenv("NSYSAN_CACHE_DIR", str(folder))
    monkeypatch.delenv("NSYSAN_CACHE_MAX_GB", raising=False)
    cache.set_enabled(True)
    return folder / "tables"

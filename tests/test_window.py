"""Analysis windows on tiny hand-built traces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl
import pytest

from nsysan import model
from nsysan.errors import SettingsError
from nsysan.settings import WindowSpec
from nsysan.window import gpu_operations, resolve_process_windows, resolve_windows

_OP_DEFAULTS = {"source": 0, "pid": 100, "context_id": 1, "stream_id": 7, "correlation_id": 0}


def _table(
    rows: Iterable[Mapping[str, Any]], schema: model.Schema, **defaults: Any
) -> pl.DataFrame:
    filled = [{**defaults, **r} for r in rows]
    if not filled:
        return model.empty_frame(schema)
    return model.conform(pl.DataFrame(filled), schema)


def _ops(rows: Iterable[Mapping[str, Any]], schema: model.Schema) -> pl.DataFrame:
    rows = [{**_OP_DEFAULTS, "device_id": r.get("gpu", 0), **r} for r in rows]
    return _table(rows, schema)


def make_trace(
    kernels: Iterable[Mapping[str, Any]] = (),
    memcpy: Iterable[Mapping[str, Any]] = (),
    memset: Iterable[Mapping[str, Any]] = (),
    overhead: Iterable[Mapping[str, Any]] = (),
    nvtx: Iterable[Mapping[str, Any]] = (),
    offsets: Mapping[int, int] | None = None,
) -> model.Trace:
    """A Trace from a few rows per table (each row a dict of model columns)."""
    tables = {name: model.empty_frame(schema) for name, schema in model.TABLE_SCHEMAS.items()}
    tables["kernels"] = _ops(kernels, model.KERNELS)
    tables["memcpy"] = _ops(memcpy, model.MEMCPY)
    tables["memset"] = _ops(memset, model.MEMSET)
    tables["overhead"] = _table(overhead, model.OVERHEAD, source=0, pid=100, tid=100)
    tables["nvtx"] = _table(
        nvtx, model.NVTX, source=0, pid=100, tid=100, event_type="NvtxPushPopRange"
    )
    ops = pl.concat([tables[t].select("source", "gpu") for t in ("kernels", "memcpy", "memset")])
    gpus = sorted(set(ops["gpu"].drop_nulls().to_list()))
    tables["gpus"] = _table(({"gpu": g, "gpu_key": f"gpu{g}"} for g in gpus), model.GPUS)
    offsets = offsets or {0: 0}
    tables["sources"] = _table(
        ({"source": s, "offset_ns": o} for s, o in offsets.items()), model.SOURCES
    )
    return model.Trace(**tables, capabilities=model.Capabilities(present={}, missing=()))


K = {"gpu": 0}


def windows(trace: model.Trace, **spec: Any) -> list[tuple[int, int, int]]:
    mode = spec.pop("busy_mode", "kernels")
    return resolve_windows(trace, WindowSpec(**spec), mode).rows()


TRACE = make_trace(
    kernels=[
        {"gpu": 0, "start_ns": 100, "end_ns": 200},
        {"gpu": 0, "start_ns": 500, "end_ns": 900},
        {"gpu": 1, "start_ns": 300, "end_ns": 400, "pid": 200},
        {"gpu": 1, "start_ns": 1_000, "end_ns": 1_200, "pid": 200},
    ],
    memcpy=[
        {"gpu": 0, "start_ns": 50, "end_ns": 60},
        {"gpu": 1, "start_ns": 1_300, "end_ns": 1_400, "pid": 200},
    ],
    nvtx=[
        {"pid": 100, "start_ns": 150, "end_ns": 600, "text": "step"},
        {"pid": 100, "start_ns": 700, "end_ns": 800, "text": "step"},
        {"pid": 300, "start_ns": 20, "end_ns": 2_000, "text": "step"},
        {"pid": 100, "start_ns": 10, "end_ns": None, "text": "step", "event_type": "NvtxMark"},
        {"pid": 200, "start_ns": 0, "end_ns": 5_000, "text": "other"},
    ],
)


def test_per_gpu_window_spans_the_busy_operations_of_the_mode() -> None:
    assert windows(TRACE) == [(0, 100, 900), (1, 300, 1_200)]
    assert windows(TRACE, busy_mode="nvidia") == [(0, 50, 900), (1, 300, 1_400)]


def test_common_window_covers_every_gpu() -> None:
    assert windows(TRACE, kind="common") == [(0, 100, 1_200), (1, 100, 1_200)]


def test_explicit_window_and_its_missing_bound() -> None:
    assert windows(TRACE, kind="explicit", start_ns=0, end_ns=2_000) == [
        (0, 0, 2_000),
        (1, 0, 2_000),
    ]
    assert windows(TRACE, kind="explicit", start_ns=150) == [(0, 150, 900), (1, 150, 1_200)]


def test_nvtx_window_per_feeding_process_else_trace_wide() -> None:
    # GPU 0 is fed by pid 100, which has "step" ranges; pid 200 (GPU 1) has none,
    # so GPU 1 falls back to every "step" range in the trace. The mark never counts.
    assert windows(TRACE, kind="nvtx", nvtx_range="step") == [(0, 150, 800), (1, 20, 2_000)]


def test_skip_warmup_moves_every_start() -> None:
    assert windows(TRACE, skip_warmup_ns=50) == [(0, 150, 900), (1, 350, 1_200)]


def test_process_windows_key_by_process_and_device() -> None:
    got = resolve_process_windows(TRACE, WindowSpec(), "nvidia")
    assert got.columns == ["source", "pid", "device_id", "gpu", "window_start_ns", "window_end_ns"]
    assert got.rows() == [(0, 100, 0, 0, 50, 900), (0, 200, 1, 1, 300, 1_400)]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "explicit", "start_ns": 5, "end_ns": 5}, "empty or inverted"),
        ({"kind": "explicit", "start_ns": 9, "end_ns": 5}, "empty or inverted"),
        ({"kind": "explicit"}, "needs start_ns"),
        ({"kind": "explicit", "start_ns": 1_000}, "empty or inverted"),  # after GPU 0's last op
        ({"kind": "nvtx", "nvtx_range": "nope"}, "no NVTX range with text 'nope'"),
        ({"kind": "nvtx"}, "needs the range text"),
        ({"skip_warmup_ns": 10_000}, "empty or inverted"),
        ({"skip_warmup_ns": -1}, "must not be negative"),
        ({"kind": "per_gpu", "start_ns": 3}, "only to an explicit window"),
        ({"kind": "weekly"}, "unknown window kind"),
    ],
)
def test_bad_window_settings_raise_settings_error(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        resolve_windows(TRACE, WindowSpec(**spec))


def test_unknown_busy_mode_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="unknown busy mode"):
        resolve_windows(TRACE, WindowSpec(), "memcpy")  # type: ignore[arg-type]


def test_trace_without_busy_operations_has_no_windows() -> None:
    only_copies = make_trace(memcpy=[{"gpu": 0, "start_ns": 1, "end_ns": 2}])
    assert resolve_windows(only_copies, WindowSpec()).is_empty()
    assert windows(only_copies, busy_mode="nvidia") == [(0, 1, 2)]


def test_nvidia_operations_drop_work_starting_at_or_before_zero_in_file_time() -> None:
    trace = make_trace(
        kernels=[
            {"gpu": 0, "start_ns": 0, "end_ns": 10},
            {"gpu": 0, "start_ns": 1_005, "end_ns": 1_010},  # file time 5
            {"gpu": 0, "start_ns": 20, "end_ns": 30, "source": 1},  # file time -980
        ],
        offsets={0: 1_000, 1: 1_000},
    )
    assert gpu_operations(trace, "kernels").height == 3
    assert gpu_operations(trace, "nvidia")["start_ns"].to_list() == [1_005]

"""Analysis windows: the part of the timeline each GPU is measured over.

Every busy/gap number is relative to a window (docs/metrics/gaps.md#window):

* ``per_gpu`` (default): from the GPU's first to its last *busy operation*, the
  convention of Nsight Systems' ``gpu_gaps`` rule. The busy operations are those
  of the busy mode: kernels in ``kernels`` mode; kernels, memcpys and memsets in
  ``nvidia`` mode. So busy time always lies inside the window, and a GPU without
  busy operations has no window (it is not measured).
* ``common``: one window for every GPU, from the earliest first operation to the
  latest last operation of any GPU.
* ``explicit``: ``start_ns``..``end_ns`` on the trace timeline, the same for every
  GPU; a missing bound is the GPU's own first/last operation.
* ``nvtx``: from the start of the first to the end of the last NVTX range whose text
  equals ``nvtx_range`` exactly, taken from the processes that feed the GPU (those
  with busy operations on it); a GPU whose processes have no such range uses the
  matching ranges of the whole trace. Marks and unclosed ranges never match.

``skip_warmup_ns`` then moves every window's start later by that amount. A window
the settings leave empty or inverted, or an NVTX range that does not exist, is a
:class:`~nsysan.errors.SettingsError`.

In ``nvidia`` mode busy time is kept per process and CUDA device
(:func:`resolve_process_windows`); ``per_gpu`` then means that process-device's
first to last operation, exactly as NVIDIA's rule does.
"""

from __future__ import annotations

import polars as pl

from nsysan.errors import SettingsError
from nsysan.model import Trace
from nsysan.settings import BusyMode, WindowSpec

__all__ = [
    "GPU_KEYS",
    "PROCESS_KEYS",
    "gpu_operations",
    "resolve_windows",
    "resolve_process_windows",
]

WINDOW_START = "window_start_ns"
WINDOW_END = "window_end_ns"
GPU_KEYS = ("gpu",)
# One CUDA device as one process sees it; ``gpu`` rides along (it is a function of
# the other three).
PROCESS_KEYS = ("source", "pid", "device_id", "gpu")

_KINDS = ("per_gpu", "common", "explicit", "nvtx")
_BUSY_MODES = ("kernels", "nvidia")

OPERATION_COLUMNS = (
    "source",
    "pid",
    "device_id",
    "gpu",
    "context_id",
    "start_ns",
    "end_ns",
    "kind",
)


def _ops_of(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    return df.select(*OPERATION_COLUMNS[:-1], pl.lit(kind).alias("kind"))


def gpu_operations(trace: Trace, busy_mode: BusyMode) -> pl.DataFrame:
    """The GPU operations a busy mode counts (without profiler overhead).

    ``kernels``: every kernel. ``nvidia``: kernels, memcpys and memsets whose start,
    in their own file's clock, is after 0 (Nsight Systems' rules drop the others).
    Rows without a GPU, with a null bound or ending before they start are left out.
    Columns: ``OPERATION_COLUMNS``; ``kind`` is kernel, memcpy or memset.
    """
    _check_mode(busy_mode)
    parts = [_ops_of(trace.kernels, "kernel")]
    if busy_mode == "nvidia":
        parts += [_ops_of(trace.memcpy, "memcpy"), _ops_of(trace.memset, "memset")]
    ops = pl.concat(parts).filter(
        pl.col("gpu").is_not_null()
        & pl.col("start_ns").is_not_null()
        & pl.col("end_ns").is_not_null()
        & (pl.col("end_ns") >= pl.col("start_ns"))
    )
    if busy_mode == "nvidia":
        offsets = trace.sources.select("source", "offset_ns")
        ops = (
            ops.join(offsets, on="source", how="left", maintain_order="left")
            .filter(pl.col("start_ns") - pl.col("offset_ns").fill_null(0) > 0)
            .drop("offset_ns")
        )
    return ops


def _check_mode(busy_mode: str) -> None:
    if busy_mode not in _BUSY_MODES:
        raise SettingsError(f"unknown busy mode {busy_mode!r}; choose one of {_BUSY_MODES}")


def _check_spec(spec: WindowSpec) -> None:
    if spec.kind not in _KINDS:
        raise SettingsError(f"unknown window kind {spec.kind!r}; choose one of {_KINDS}")
    if spec.skip_warmup_ns < 0:
        raise SettingsError(f"skip_warmup_ns must not be negative (got {spec.skip_warmup_ns})")
    if spec.kind == "explicit":
        if spec.start_ns is None and spec.end_ns is None:
            raise SettingsError("an explicit window needs start_ns, end_ns or both")
        if spec.start_ns is not None and spec.end_ns is not None and spec.end_ns <= spec.start_ns:
            raise SettingsError(
                f"explicit window is empty or inverted: start_ns={spec.start_ns} "
                f">= end_ns={spec.end_ns}"
            )
    elif spec.start_ns is not None or spec.end_ns is not None:
        raise SettingsError(
            f"start_ns/end_ns apply only to an explicit window, not to kind {spec.kind!r}"
        )
    if spec.kind == "nvtx" and not spec.nvtx_range:
        raise SettingsError("an NVTX window needs the range text (nvtx_range)")
    if spec.kind != "nvtx" and spec.nvtx_range is not None:
        raise SettingsError(f"nvtx_range applies only to an NVTX window, not to kind {spec.kind!r}")


def _first_last(ops: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    return (
        ops.group_by(keys)
        .agg(pl.col("start_ns").min().alias(WINDOW_START), pl.col("end_ns").max().alias(WINDOW_END))
        .sort(keys)
    )


def _nvtx_windows(trace: Trace, ops: pl.DataFrame, keys: list[str], text: str) -> pl.DataFrame:
    ranges = (
        trace.nvtx.lazy()
        .filter(
            (pl.col("text") == text)
            & pl.col("start_ns").is_not_null()
            & pl.col("end_ns").is_not_null()
            & (pl.col("end_ns") >= pl.col("start_ns"))
        )
        .collect()
    )
    if ranges.is_empty():
        raise SettingsError(f"no NVTX range with text {text!r} in the trace")
    feeders = ops.select(*dict.fromkeys([*keys, "source", "pid"])).unique()
    own = (
        feeders.join(ranges.select("source", "pid", "start_ns", "end_ns"), on=["source", "pid"])
        .group_by(keys)
        .agg(pl.col("start_ns").min().alias(WINDOW_START), pl.col("end_ns").max().alias(WINDOW_END))
    )
    trace_wide = ranges.select(
        pl.col("start_ns").min().alias("_all_start"), pl.col("end_ns").max().alias("_all_end")
    )
    return (
        ops.select(keys)
        .unique()
        .join(own, on=keys, how="left")
        .join(trace_wide, how="cross")
        .select(
            *keys,
            pl.coalesce(WINDOW_START, "_all_start").alias(WINDOW_START),
            pl.coalesce(WINDOW_END, "_all_end").alias(WINDOW_END),
        )
        .sort(keys)
    )


def _resolve(trace: Trace, spec: WindowSpec, busy_mode: BusyMode, keys: list[str]) -> pl.DataFrame:
    _check_mode(busy_mode)
    _check_spec(spec)
    ops = gpu_operations(trace, busy_mode)
    if ops.is_empty():
        # Nothing to measure; an NVTX name is still checked so a typo is reported.
        if spec.kind == "nvtx" and spec.nvtx_range:
            _nvtx_windows(trace, ops, keys, spec.nvtx_range)
        return pl.DataFrame(
            schema={
                **{k: ops.schema[k] for k in keys},
                WINDOW_START: pl.Int64,
                WINDOW_END: pl.Int64,
            }
        )
    own = _first_last(ops, keys)
    if spec.kind == "per_gpu":
        windows = own
    elif spec.kind == "common":
        windows = own.with_columns(
            pl.col(WINDOW_START).min().alias(WINDOW_START),
            pl.col(WINDOW_END).max().alias(WINDOW_END),
        )
    elif spec.kind == "explicit":
        windows = own.with_columns(
            pl.lit(spec.start_ns, dtype=pl.Int64)
            .fill_null(pl.col(WINDOW_START))
            .alias(WINDOW_START),
            pl.lit(spec.end_ns, dtype=pl.Int64).fill_null(pl.col(WINDOW_END)).alias(WINDOW_END),
        )
    else:
        windows = _nvtx_windows(trace, ops, keys, spec.nvtx_range or "")
    windows = windows.with_columns(pl.col(WINDOW_START) + spec.skip_warmup_ns)
    if spec.kind in ("explicit", "nvtx") or spec.skip_warmup_ns:
        _reject_empty(windows, keys, spec)
    return windows.select(*keys, WINDOW_START, WINDOW_END)


def _reject_empty(windows: pl.DataFrame, keys: list[str], spec: WindowSpec) -> None:
    empty = windows.filter(pl.col(WINDOW_END) <= pl.col(WINDOW_START))
    if empty.is_empty():
        return
    first = empty.row(0, named=True)
    who = ", ".join(f"{k}={first[k]}" for k in keys)
    raise SettingsError(
        f"the {spec.kind} window (skip_warmup_ns={spec.skip_warmup_ns}) is empty or inverted "
        f"for {empty.height} GPU(s), e.g. {who}: {WINDOW_START}={first[WINDOW_START]} "
        f">= {WINDOW_END}={first[WINDOW_END]}"
    )


def resolve_windows(
    trace: Trace, spec: WindowSpec, busy_mode: BusyMode = "kernels"
) -> pl.DataFrame:
    """One window per GPU with busy operations: ``gpu, window_start_ns, window_end_ns``.

    A ``per_gpu`` or ``common`` window made only of zero-length operations can have
    zero length; every other empty or inverted window raises ``SettingsError``.
    """
    return _resolve(trace, spec, busy_mode, list(GPU_KEYS))


def resolve_process_windows(
    trace: Trace, spec: WindowSpec, busy_mode: BusyMode = "nvidia"
) -> pl.DataFrame:
    """One window per (source, pid, device_id) with busy operations, as NVIDIA's rules key them.

    ``per_gpu`` is that process-device's first to last operation; ``common`` and
    ``explicit`` are as for GPUs; ``nvtx`` uses the process's own matching ranges
    (else the trace's). Columns: ``PROCESS_KEYS`` plus the window bounds.
    """
    return _resolve(trace, spec, busy_mode, list(PROCESS_KEYS))

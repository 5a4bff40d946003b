"""Host-side cause of each GPU gap: what the process feeding the GPU was doing.

Definition (docs/metrics/host.md):

* **Feeding operation and thread.** The operation that *ends* a gap is the GPU
  operation (kernel, memcpy or memset) of the same unit (GPU, or process-device in
  ``nvidia`` busy mode) that starts exactly at the gap's end. Among several starting
  at that instant: a kernel before a memcpy before a memset, then the smallest
  (source, pid, correlation id). Its **launch call** is the CUDA
  API row with the same (source, pid, correlation id), whatever its name
  (cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch, cudaMemcpyAsync, ...); when
  several rows share the id, the earliest-starting one. The feeding process is the
  operation's (source, pid), the feeding thread the launch call's tid.
* **Primary class.** With the gap ``[S, E)`` and the launch call ``[L, Le)``:
  ``launched_late`` when ``L >= S - launch_slack_ns`` (the host had not started the
  launch when the GPU ran dry), ``gpu_wait`` otherwise (the work was being queued
  before the gap began; the GPU waited on something else). ``no_launch_record``
  when no operation starts at ``E`` (the gap ends at the window's end or at a
  profiler-overhead range) or its correlation id has no CUDA API row; ``no_data``
  when the trace has no CUDA API table at all.
* **Time split.** Every nanosecond of a gap gets exactly one cause, so causes sum
  to the gap: ``[S, clamp(L))`` is the *host portion*, ``[clamp(L), clamp(Le))`` is
  ``launch_call`` and ``[clamp(Le), E)`` is ``gpu_wait`` (queued, not running), with
  ``clamp`` into ``[S, E]``. Gaps without a launch record are wholly
  ``no_launch_record`` (``unattributed_no_data`` without a CUDA API table).
* **Host portion**, per instant, by precedence (:data:`HOST_CAUSES`): the feeding
  thread was in a CUDA synchronizing call (:data:`CUDA_SYNC_APIS`) > in a GIL-like
  wait (see below) > in another blocking OS call (:data:`BLOCKING_OS_CALLS`) > in
  another CUDA API call > in another OS runtime call > descheduled (between a
  switch-out and the next switch-in in SCHED_EVENTS) > inside an NVTX range of that
  thread > ``unattributed``. Waits outrank work, a traced call outranks bare
  descheduling (which it explains), and any call outranks a named phase. Time no
  available source explains is ``unattributed_no_data`` instead of
  ``unattributed`` when a source that could have explained it (OS runtime,
  scheduling, NVTX) is missing from the trace.
* **GIL signature.** A thread waiting for the GIL sleeps in a timed condition wait
  of CPython's switch interval (:data:`GIL_SWITCH_INTERVAL_NS`, the default
  ``sys.getswitchinterval()``), then asks again: its waits pile up at the interval
  and never exceed it. A feeding thread shows the signature for one call of
  :data:`GIL_WAIT_CALLS` (outermost calls only) when at least :data:`GIL_MIN_WAITS`
  of them last the interval ± :data:`GIL_TOLERANCE_NS`, and at least
  :data:`GIL_MIN_SHARE` of those longer than :data:`GIL_LONG_WAIT_NS` end within the
  interval + tolerance. Then every wait of that call no longer than the interval +
  tolerance is ``gil_wait`` (the last wait of an acquisition is woken early); its
  other blocking calls stay ``blocking_os``.
* **NVTX text.** The innermost range (the most recently opened one still open) on
  the feeding thread. Per gap, ``nvtx_text`` is the innermost text covering most of
  the host portion whatever its cause; per GPU, :attr:`HostResult.nvtx` gives per
  text the time attributed to ``nvtx`` and the host-portion time it covers.
* **Unavailable.** A cause whose table is missing (:attr:`Capabilities.present`) is
  never assigned; :attr:`HostResult.unavailable` names it with the reason.

How, without a Python loop over gaps (millions in big exports): the next operation
is an exact as-of join on the kernels, which ingest keeps in (gpu, start) order, so
neither side is sorted again; only operations tied at one instant are ranked. The
launch call is a look-up among the CUDA API rows keyed by (source, pid, correlation
id) packed into one integer, only the keys sorted (an as-of join when the ids are too
wide to pack). The feeding threads are then taken in about four groups of equal host
portions (:func:`~nsysan.analyze.host_tables.thread_groups`), so that what follows
holds one group's rows, not every thread's: one sweep over the edges of the group's
intervals (written per thread from the tables, only the group's rows copied out of
them) cuts their timelines, inside the host portions only, into segments of one
cause and one innermost NVTX range; each host portion then adds up the run of
segments it overlaps, found by binary search, for its split and, when inside NVTX
ranges, its texts. A portion is on one thread, so the groups' results simply sit
side by side. Those loops are compiled (:mod:`nsysan.analyze.host_loops`); the
segments stay numpy arrays.

The parts, one module each:

* :mod:`~nsysan.analyze.host_causes`: the vocabulary: causes, their precedence and
  labels, primary classes, synchronizing CUDA calls and blocking OS calls, which
  table each cause needs;
* :mod:`~nsysan.analyze.host_launch`: each gap's next operation and its launch call;
* :mod:`~nsysan.analyze.host_gil`: the GIL signature;
* :mod:`~nsysan.analyze.host_timeline`: the feeding threads' timelines cut into
  segments of one cause and one innermost NVTX range, and each host portion's time
  per cause and per NVTX text;
* :mod:`~nsysan.analyze.host_slices`: one group attributed in time slices of its host
  portions (a big group's rows are read a slice at a time; the result is the same);
* :mod:`~nsysan.analyze.host_transfers`: gap time under a transfer;
* :mod:`~nsysan.analyze.host_sums`: the per-GPU sums and shares of the causes and
  the NVTX texts' time;
* :mod:`~nsysan.analyze.host_tables`: the keys and table plumbing they share;
* :mod:`~nsysan.analyze.host_loops`: the compiled loops.

This module numbers and classifies the gaps, finds their host portions, offers the
thread groups to the analyses' thread pool and splits each gap's time into causes
(:func:`attribute_gaps`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from nsysan.analyze.host_causes import (
    CAUSE_LABELS,
    CAUSES,
    HOST_TABLES,
    PRIMARY_CLASSES,
    unavailable_causes,
)
from nsysan.analyze.host_gil import gil_threads
from nsysan.analyze.host_launch import KIND_ORDER, feeding_launches
from nsysan.analyze.host_loops import first_largest
from nsysan.analyze.host_slices import thread_group_time
from nsysan.analyze.host_sums import (
    cause_sums,
    in_steady_state,
    long_shares,
    nvtx_table,
    texts_per_gpu,
)
from nsysan.analyze.host_tables import (
    ENGINE,
    THREAD_KEYS,
    THREAD_NUMBER,
    feeding_rows,
    in_group,
    portion_time_type,
    rows_on_threads,
    run_starts,
    thread_groups,
)
from nsysan.analyze.host_transfers import transfer_time
from nsysan.model import Trace
from nsysan.packing import bit_widths, packed, unpacked
from nsysan.pool import results_as_done
from nsysan.settings import Settings

__all__ = ["LEAN_GAP_COLUMNS", "HostResult", "attribute_gaps"]

# The per-gap columns the other analyses read (the gap's unit keys come first): the
# CPU analysis, each feeding thread's waits and descheduled time in gaps; the load
# analysis, the blocking OS time of long gaps. The per-GPU sums of every cause
# (HostResult.per_gpu, .steady) are summed here; the full JSON document shows the rest
# (HostResult.gaps).
LEAN_GAP_COLUMNS = (
    "start_ns",
    "end_ns",
    "duration_ns",
    "source",
    "pid",
    "tid",
    *(f"{c}_ns" for c in ("cuda_sync", "gil_wait", "blocking_os", "descheduled")),
)

# Per-gap labels as Enums: millions of short strings are slow to build.
_PRIMARY = pl.Enum(PRIMARY_CLASSES)
_CAUSE = pl.Enum(CAUSES)
_KIND = pl.Enum(KIND_ORDER)


@dataclass(frozen=True)
class HostResult:
    """Host-side attribution of gap time.

    ``gaps``: one row per gap: the unit keys, ``start_ns``, ``end_ns``,
    ``duration_ns``, the feeding ``source``/``pid``/``tid``, ``next_kind``,
    ``next_correlation_id``, ``launch_name``, ``launch_start_ns``, ``launch_end_ns``,
    ``primary`` (:data:`PRIMARY_CLASSES`), ``cause`` (the cause with the most time
    in the gap), ``nvtx_text`` and ``<cause>_ns`` for every cause in :data:`CAUSES`
    (summing to ``duration_ns``). ``next_kind``, ``primary`` and ``cause`` are
    Enums of those names, ``launch_name`` and ``nvtx_text`` categoricals (all compare
    equal to the plain strings). Without ``per_gap_detail`` (:func:`attribute_gaps`),
    only the unit keys and :data:`LEAN_GAP_COLUMNS`.
    ``per_gpu``: one row per GPU: ``gap_count``, ``gap_ns``, gap counts per primary
    class (``<class>_count``), ``<cause>_ns`` and ``<cause>_share`` (of ``gap_ns``;
    they sum to 1; null when the GPU has no gap time), ``host_share`` (the host-side
    causes together) and ``dominant_cause``.
    ``shares``: the same in long form: ``gpu, cause, label, time_ns, share``.
    ``nvtx``: per GPU and innermost NVTX text: ``nvtx_ns`` (time attributed to the
    ``nvtx`` cause), ``covered_ns`` (host-portion time inside that range, any
    cause), ``nvtx_share`` (``nvtx_ns`` over the GPU's gap time); largest first.
    ``gil_threads``: feeding threads and wait calls that show the GIL signature
    (columns of :func:`gil_threads`; counted over the whole trace).
    ``unavailable``: one line per cause that cannot be attributed and why;
    ``unavailable_causes``: their ids.
    ``steady``: per GPU, the gap time from its steady state's start on, in all and per
    cause (:func:`~nsysan.analyze.host_sums.cause_sums`); None unless
    :func:`attribute_gaps` was given the steady starts. The analysis shows it as
    :attr:`Analysis.steady_causes`, not in this result's document.
    """

    gaps: pl.DataFrame
    per_gpu: pl.DataFrame
    shares: pl.DataFrame
    nvtx: pl.DataFrame
    gil_threads: pl.DataFrame
    unavailable: tuple[str, ...]
    unavailable_causes: tuple[str, ...]
    steady: pl.DataFrame | None = field(default=None, metadata={"document": False})


def _clamp(col: str) -> pl.Expr:
    return pl.min_horizontal(pl.max_horizontal(pl.col(col), "start_ns"), "end_ns")


_LAUNCHED = pl.col("launch_start_ns").is_not_null()
# After classification: the clamped launch start is null exactly without a launch call
# (the lean table keeps it, not the launch start).
_HAS_LAUNCH = pl.col("_l").is_not_null()


def _classified(table: pl.LazyFrame, has_api: bool, slack_ns: int) -> pl.LazyFrame:
    """Adds ``primary`` and the launch call clamped into the gap (``_l, _le``)."""
    return table.with_columns(
        pl.when(pl.lit(not has_api))
        .then(pl.lit("no_data", dtype=_PRIMARY))
        .when(~_LAUNCHED)
        .then(pl.lit("no_launch_record", dtype=_PRIMARY))
        .when(pl.col("launch_start_ns") >= pl.col("start_ns") - slack_ns)
        .then(pl.lit("launched_late", dtype=_PRIMARY))
        .otherwise(pl.lit("gpu_wait", dtype=_PRIMARY))
        .alias("primary"),
        pl.when(_LAUNCHED).then(_clamp("launch_start_ns")).alias("_l"),
        pl.when(_LAUNCHED).then(_clamp("launch_end_ns")).alias("_le"),
    )


def _gap_table(
    trace: Trace,
    gaps: pl.DataFrame,
    keys: list[str],
    has_api: bool,
    slack_ns: int,
    call_names: bool = True,
) -> pl.DataFrame:
    """The gaps, numbered (``_gap``) and classified, with their next operation and launch
    (without ``call_names``, maybe not the launch call's name)."""
    # The gaps' own length column (GapsResult.gaps has one) is shared, not computed again.
    length = (
        pl.col("duration_ns")
        if "duration_ns" in gaps.columns
        else (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns")
    )
    numbered = gaps.select(*keys, "start_ns", "end_ns", length).with_row_index("_gap")
    # Only what the look-ups need goes through them; back in gap order, the result
    # sits beside the gaps.
    found = feeding_launches(
        trace, numbered.select("_gap", *keys, "end_ns"), keys, call_names
    ).drop("_gap", *keys, "end_ns")
    joined = pl.concat([numbered, found], how="horizontal")
    return _classified(joined.lazy(), has_api, slack_ns).collect(engine=ENGINE)


def _host_portions(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The feeding threads (``source, pid, tid, _th``) and the host portions of the gaps.

    A host portion is ``_gap, _th, start_ns, end_ns``: from the gap's start to its
    launch call's start, for gaps whose launch began after the gap did; in gap order.
    """
    with_host = (
        table.lazy()
        .filter(_HAS_LAUNCH & (pl.col("_l") > pl.col("start_ns")))
        .select(
            "_gap",
            pl.col("_feed_source").alias("source"),
            pl.col("_feed_pid").alias("pid"),
            "tid",
            "start_ns",
            pl.col("_l").alias("end_ns"),
        )
        .collect(engine=ENGINE)
    )
    widths = bit_widths([with_host], THREAD_KEYS)
    if widths is None or with_host.select(THREAD_KEYS).null_count().sum_horizontal().item():
        threads = (
            with_host.select(THREAD_KEYS)
            .unique()
            .sort(list(THREAD_KEYS))
            .with_row_index(THREAD_NUMBER)
        )
        portions = (
            feeding_rows(with_host, threads)
            .select("_gap", THREAD_NUMBER, "start_ns", "end_ns")
            .collect(engine=ENGINE)
        )
        return threads, portions
    # A thread is one packed integer: the distinct ones of a million rows are a
    # one-column unique, and a thread's number a binary search among a handful.
    keys = packed(with_host, THREAD_KEYS, widths)
    distinct = keys.unique().sort()
    threads = unpacked(distinct, THREAD_KEYS, widths, with_host.schema).with_row_index(
        THREAD_NUMBER
    )
    number = np.searchsorted(distinct.to_numpy(), keys.to_numpy())
    portions = with_host.select(
        "_gap",
        pl.Series(THREAD_NUMBER, number, dtype=threads.schema[THREAD_NUMBER]),
        "start_ns",
        "end_ns",
    )
    return threads, portions


# The feeding process's columns of the gap table, named for the result.
_FEED = {"_feed_source": "source", "_feed_pid": "pid"}
# The transfer time of a gap (host_transfers.transfer_time): in all, in its host
# portion, in its launch call.
_CARVED = ("_t_gap", "_t_host", "_t_call")


def _split(
    table: pl.DataFrame,
    per_cause: dict[str, np.ndarray],
    has_api: bool,
    no_host_data: bool,
    carved: pl.DataFrame | None = None,
    in_order: bool = True,
) -> tuple[pl.LazyFrame, frozenset[str]]:
    """``table`` with ``<cause>_ns`` (Int64) for every cause, as a plan: what reads it
    only sums most causes, and needs no column of millions of rows per cause. Its rows
    are in ``table``'s order only when ``in_order`` (a plan that is only summed need
    not keep it, and streams without holding rows back).

    ``per_cause`` has the host causes' time per gap. ``carved``
    (:func:`~nsysan.analyze.host_transfers.transfer_time`) has the transfer time of the
    gaps that meet one, in all (``_t_gap``), in its host portion (``_t_host``) and in
    its launch call (``_t_call``): that time is ``gpu_transfer`` and leaves the
    positional parts it falls in.

    Also returns the cause columns that are 0 for every gap: constant columns, which
    take no memory.
    """
    per_cause = {name: values for name, values in per_cause.items() if values.any()}
    zero = pl.lit(0, dtype=pl.Int64)
    t_gap, t_host, t_call = (
        [pl.col(name) for name in _CARVED] if carved is not None else [zero, zero, zero]
    )
    host_len = pl.when(_HAS_LAUNCH).then(pl.col("_l") - pl.col("start_ns") - t_host).otherwise(0)
    # The host causes' time may be held narrower than Int64 (attribute_gaps).
    rest = host_len - pl.sum_horizontal(
        pl.lit(0, dtype=pl.Int64), *(pl.col(name).cast(pl.Int64) for name in per_cause)
    )
    columns: dict[str, pl.Expr | None] = {f"{c}_ns": None for c in CAUSES}
    if carved is not None:
        columns["gpu_transfer_ns"] = t_gap
    if not has_api:
        # Without a CUDA API table there is no launch to look for: nothing is known.
        columns["unattributed_no_data_ns"] = pl.col("duration_ns") - t_gap
    else:
        columns["unattributed_no_data_ns" if no_host_data else "unattributed_ns"] = rest
        columns["launch_call_ns"] = (
            pl.when(_HAS_LAUNCH).then(pl.col("_le") - pl.col("_l") - t_call).otherwise(0)
        )
        columns["gpu_wait_ns"] = (
            pl.when(_HAS_LAUNCH)
            .then(pl.col("end_ns") - pl.col("_le") - (t_gap - t_host - t_call))
            .otherwise(0)
        )
        columns["no_launch_record_ns"] = (
            pl.when(_HAS_LAUNCH).then(0).otherwise(pl.col("duration_ns") - t_gap)
        )
    constant = frozenset(
        name for name, expr in columns.items() if expr is None and name not in per_cause
    )
    split = table.with_columns(
        *(pl.Series(name, values) for name, values in per_cause.items()),
    ).lazy()
    if carved is not None:
        # A join with the few gaps that met a transfer, not a column of every gap
        # (which would take ~0.1 GB at 5M gaps: they are spread over the run).
        split = split.join(
            carved.lazy().select("_gap", *_CARVED),
            on="_gap",
            how="left",
            maintain_order="left" if in_order else "none",
        ).with_columns(pl.col(_CARVED).fill_null(0).cast(pl.Int64))
    split = split.with_columns(
        zero.alias(name)
        if name in constant
        else (pl.col(name) if expr is None else expr).cast(pl.Int64).alias(name)
        for name, expr in columns.items()
    )
    return split, constant


def _with_largest_cause(
    split: pl.LazyFrame, constant: frozenset[str], text_time: pl.DataFrame
) -> tuple[pl.DataFrame, frozenset[str]]:
    """The per-gap detail: :func:`_split`'s table in memory with ``cause`` (the cause with
    the most time in the gap) and ``nvtx_text`` (from the per-gap NVTX ``text_time``).

    A computed cause with no time anywhere (unattributed time where every gap is
    explained, say) becomes a constant column too, and joins ``constant``.
    """
    table = split.collect(engine=ENGINE)
    computed = [f"{c}_ns" for c in CAUSES if f"{c}_ns" not in constant]
    idle = [
        name for name in computed if table[name].null_count() == 0 and not (table[name] != 0).any()
    ]
    if idle:
        table = table.with_columns(pl.lit(0, dtype=pl.Int64).alias(name) for name in idle)
        constant = constant | frozenset(idle)
    # Causes sum to the gap, so a gap with time has a positive largest cause, which a
    # constant 0 column never ties: only the others are compared.
    top = first_largest(
        [None if f"{c}_ns" in constant else table[f"{c}_ns"].to_numpy() for c in CAUSES],
        (table["duration_ns"] > 0).to_numpy(),
    )
    cause = pl.Series(top).replace_strict(
        list(range(len(CAUSES))), list(CAUSES), default=None, return_dtype=_CAUSE
    )
    return table.with_columns(cause.alias("cause"), _nvtx_texts(table["_gap"], text_time)), constant


def _nvtx_texts(gaps: pl.Series, text_time: pl.DataFrame) -> pl.Series:
    """Per gap of ``gaps``, the innermost NVTX text covering most of its host portion."""
    if text_time.is_empty():
        return pl.repeat(None, len(gaps), dtype=pl.Categorical(), eager=True).alias("nvtx_text")
    top = (
        text_time.lazy()
        .sort(["covered_ns", "nvtx_text"], descending=[True, False])
        .sort("_gap", maintain_order=True)
        .filter(run_starts(["_gap"]))
        .select("_gap", "nvtx_text")
    )
    # Only the gap numbers go through the join, not the whole gap table.
    return (
        gaps.to_frame()
        .lazy()
        .join(top, on="_gap", how="left", maintain_order="left")
        .collect(engine=ENGINE)["nvtx_text"]
    )


def attribute_gaps(
    trace: Trace,
    gaps: pl.DataFrame,
    settings: Settings | None = None,
    keys: Sequence[str] = ("gpu",),
    transfers: pl.DataFrame | None = None,
    per_gap_detail: bool = True,
    pool: Executor | None = None,
    steady_starts: Callable[[], pl.DataFrame] | None = None,
) -> HostResult:
    """Attribute every gap's time to host-side and GPU-side causes (see the module docstring).

    ``gaps`` is :attr:`GapsResult.gaps` (``keys`` + ``start_ns, end_ns``) and ``keys``
    its unit keys (:attr:`GapsResult.keys`); ``gpu`` must be among them. ``transfers``
    (``gpu, start_ns, end_ns``, per-GPU memcpy/memset time) is gap time of its own
    cause, ``gpu_transfer``, whatever the host did meanwhile (per-GPU keys only).

    Without ``per_gap_detail``, :attr:`HostResult.gaps` keeps only what the other
    analyses read (:data:`LEAN_GAP_COLUMNS`: the gap, its feeding thread and its wait
    causes), not its next operation, launch call, primary class, its other causes,
    largest cause or NVTX text: those are summed per GPU without a column per gap (at
    5M gaps, ~0.5 GB less); every other result is the same.

    ``pool``, the analyses' thread pool when this runs in it, takes the groups of
    feeding threads that its idle workers can (:func:`~nsysan.pool.results_as_done`).
    ``steady_starts`` gives ``gpu, steady_start_ns`` (:attr:`DominantResult.per_gpu`)
    for :attr:`HostResult.steady`; it is called once the groups are attributed, so it
    may wait on another job of the pool.
    """
    settings = settings or Settings()
    keys = list(keys)
    if "gpu" not in keys:
        raise ValueError(f"gap keys {keys} must include 'gpu'")
    caps = trace.capabilities
    missing = unavailable_causes(caps)
    has_api = caps.has("cuda_api")
    no_host_data = any(not caps.has(t) for t in HOST_TABLES)

    table = _gap_table(trace, gaps, keys, has_api, settings.launch_slack_ns, per_gap_detail)
    if not per_gap_detail:
        # Held while every group is attributed; only the detail shows them (the
        # clamped launch start, _l, says whether there is a launch call).
        table = table.drop(
            "next_correlation_id",
            "launch_name",
            "_kind_rank",
            "launch_start_ns",
            "launch_end_ns",
            strict=False,
        )
    threads, portions = _host_portions(table)
    signature = gil_threads(rows_on_threads(trace.osrt, threads))
    carved = pieces = None
    if transfers is not None and transfers.height > 0 and keys == ["gpu"]:
        carved, pieces = transfer_time(table, portions, transfers)
    spent: dict[str, np.ndarray] = {}
    # At 5M gaps, a cause's column is 20 MB, not 40 (portion_time_type).
    spent_type = portion_time_type(portions)
    # While the groups run, a portion is its gap and thread; its times are the gap
    # table's, gathered for one group at a time (at 20M kernels, 0.24 GB less held).
    portions = portions.select("_gap", THREAD_NUMBER)
    gap_table = table

    # Per gap and NVTX text for the detail (each gap's text); else summed per GPU
    # slice by slice (nvtx_table sums the slices' sums), since that is all the rest
    # reads (10M rows at 5M gaps).
    text_keys = None if per_gap_detail else table["gpu"]

    def group_time(members: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray], pl.DataFrame]:
        group, (group_portions, group_pieces) = in_group(threads, members, [portions, pieces])
        assert group_portions is not None
        gap = group_portions["_gap"]
        group_portions = group_portions.with_columns(
            gap_table["start_ns"].gather(gap), gap_table["_l"].gather(gap).alias("end_ns")
        )
        group_spent, group_texts = thread_group_time(
            trace, group, signature, group_portions, group_pieces, text_keys
        )
        return group_portions["_gap"].to_numpy(), group_spent, group_texts

    groups = thread_groups(threads, portions)
    texts: list[pl.DataFrame] = [pl.DataFrame()] * len(groups)
    # A portion, and its pieces under transfers, are on one thread: each gap's times
    # come from the one group that has its portion, whichever finishes first.
    calls = [functools.partial(group_time, members) for members in groups]
    for k, (gap, group_spent, group_texts) in results_as_done(pool, calls):
        for name, values in group_spent.items():
            spent.setdefault(name, np.zeros(table.height, dtype=spent_type))[gap] = values
        texts[k] = group_texts
    # In group order, not gap order: what reads it sorts or sums it.
    text_time = pl.concat(texts, rechunk=False) if len(texts) > 1 else texts[0]
    table = table.with_columns(
        pl.col(feed).alias(name) for feed, name in _FEED.items() if name not in keys
    )
    front = list(
        dict.fromkeys([*keys, "start_ns", "end_ns", "duration_ns", "source", "pid", "tid"])
    )
    gpus = pl.concat(
        [
            trace.gpus.select(pl.col("gpu").cast(pl.Int32)),
            table.select(pl.col("gpu").cast(pl.Int32)),
        ]
    ).unique()
    starts = steady_starts() if steady_starts else None
    if starts is not None:
        table = table.with_columns(in_steady_state(table, starts))
    split, constant = _split(table, spent, has_api, no_host_data, carved, per_gap_detail)
    per_gap: pl.DataFrame | pl.LazyFrame
    if per_gap_detail:
        detail, constant = _with_largest_cause(split, constant, text_time)
        out = detail.select(
            *front,
            pl.col("_kind_rank")
            .replace_strict(list(range(len(KIND_ORDER))), list(KIND_ORDER), return_dtype=_KIND)
            .alias("next_kind"),
            "next_correlation_id",
            "launch_name",
            "launch_start_ns",
            "launch_end_ns",
            "primary",
            "cause",
            "nvtx_text",
            *(f"{c}_ns" for c in CAUSES),
        )
        per_gap = detail
        text_time = texts_per_gpu(text_time, table["gpu"])
    else:
        # The sums below read the plan; the lean table is taken from the gap table
        # and the causes' own arrays, not through the plan's join with the transfers.
        per_gap = split
        out = table.select(
            *front,
            *(
                pl.Series(name, spent[name]).cast(pl.Int64)
                if name in spent and spent[name].any()
                else pl.lit(0, dtype=pl.Int64).alias(name)
                for name in LEAN_GAP_COLUMNS
                if name not in front
            ),
        )
    del spent
    per_gpu, steady = cause_sums(per_gap, gpus, constant, steady=starts is not None)
    return HostResult(
        gaps=out,
        per_gpu=per_gpu,
        shares=long_shares(per_gpu),
        nvtx=nvtx_table(text_time, per_gpu.select("gpu", "gap_ns")),
        gil_threads=signature,
        unavailable=tuple(f"{CAUSE_LABELS[c]}: {why}" for c, why in missing.items()),
        unavailable_causes=tuple(missing),
        steady=steady,
    )

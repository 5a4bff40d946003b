"""NCCL: communication share of GPU time, its overlap with compute, collective skew.

Definitions (exact, with a worked example, in docs/metrics/nccl.md):

* **NCCL kernel**: a kernel whose name -- ``short_name``, else the demangled ``name``,
  after stripping a leading ``void `` and an unresolved ``_Z<len>`` mangling prefix --
  starts with ``nccl``.
* **Collective**: parsed from that name for every naming scheme NCCL and RCCL have
  used (``ncclAllReduceRingLLKernel_sum_f32``, ``ncclKernel_AllReduce_RING_LL_Sum_float``,
  ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``ncclSymkDevKernel_AllGather_LL``, ...)
  into one of :data:`COLLECTIVES`, else :data:`OTHER` (``ncclDevKernel_Generic``
  runs whatever work it is handed, so its collective is unknown).
* **NCCL time** of a GPU (and of one collective on it): the length of the union of its
  NCCL kernel intervals clipped to the GPU's analysis window. ``nccl_busy_share`` =
  NCCL time / busy time; ``nccl_window_share`` = NCCL time / window length.
* **Overlap with compute**: the length of (NCCL union) ∩ (union of the non-NCCL kernels
  of the same GPU), both clipped to the window; ``overlap_share`` = overlap / NCCL time.
* **Instances**: NCCL kernels are matched across GPUs by (collective, stream rank,
  ordinal). The stream rank orders a GPU's streams carrying that collective by their
  first such kernel; it is used only when every GPU running the collective has the
  same number of such streams (``match_mode`` "stream"), else all streams are pooled
  (``match_mode`` "collective"). The ordinal counts kernels by start time within
  (GPU, collective, stream rank). With ``m`` the smallest per-GPU count of a group
  run on at least 2 GPUs, ordinals ``< m`` are matched; every other kernel is
  *unmatched* and counted, never dropped silently.
* **Skew** of an instance: latest start - earliest start. **Estimated wait** of a
  matched kernel: its duration - the shortest duration in its instance (the early
  arrivers wait inside the kernel for the last one).

Matching runs over the whole trace; an instance is reported when at least one of its
kernels overlaps its GPU's window, and per-GPU counts and wait totals take only the
kernels that do.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysan.analyze.nccl_instances import (
    GROUP_KEY,
    INSTANCE_READ,
    LAST_ARRIVAL,
    STREAM_KEY,
    kernels_by_instance,
    match_instances,
)
from nsysan.intervals import clip_to_windows, is_union_inside, union_length
from nsysan.names import is_one_of

__all__ = [
    "COLLECTIVES",
    "NCCL_PREFIX",
    "OTHER",
    "SKEW_QUANTILE",
    "NcclResult",
    "classify_nccl",
    "nccl_kernels",
    "measure_nccl",
]

NCCL_PREFIX = "nccl"
COLLECTIVES = (
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "Broadcast",
    "Reduce",
    "SendRecv",
    "AllToAll",
)
OTHER = "Other"
# The tail statistic of the skew distribution (besides the median and the maximum).
SKEW_QUANTILE = 0.99
# Percentiles are order statistics (index floor(q * (n - 1)) of the sorted values), so
# every reported skew is the skew of a real instance.
_QUANTILE_METHOD = "lower"

# NCCL 2.8-2.18 ``ncclKernel_<coll>_<algo>_<proto>_<redop>_<type>``, RCCL debug builds
# ``ncclKernelDebug_...``, NCCL >= 2.19 ``ncclDevKernel_<coll>[_<redop>_<ty>][_<algo>_<proto>]``
# (src/device/generate.py), NCCL >= 2.27 symmetric ``ncclSymkDevKernel_<coll>_<algo>...``
# (src/device/symmetric/generate.py).
_PREFIXED_NAME = r"^nccl(?:Kernel|KernelDebug|DevKernel|SymkDevKernel)_([A-Za-z]+)"
# NCCL <= 2.7: ``nccl<Coll>[Ring|Tree|CollNet][LL|LL128]Kernel_<op>_<type>``; the lazy
# token is the shortest collective name that lets the rest match.
_LEGACY_NAME = r"^nccl([A-Za-z]+?)(?:Ring|Tree|CollNet)?(?:LL128|LL)?Kernel_"
# nsys stores a demangling failure as the mangled symbol; NCCL kernels are in the global
# namespace, so ``_Z<len>`` is the whole prefix.
_NAME_NOISE = r"^(?:void\s+)?(?:_Z\d+)?"

# Lower-cased collective token -> collective. AllGatherV (NCCL 2.28+) is an AllGather;
# RCCL's AllToAllPivot and the GDA all-to-alls are all-to-alls.
_COLLECTIVE_TOKENS = {
    "allreduce": "AllReduce",
    "allgather": "AllGather",
    "allgatherv": "AllGather",
    "reducescatter": "ReduceScatter",
    "broadcast": "Broadcast",
    "reduce": "Reduce",
    "sendrecv": "SendRecv",
    "send": "SendRecv",
    "recv": "SendRecv",
    "alltoall": "AllToAll",
    "alltoallv": "AllToAll",
    "alltoallpivot": "AllToAll",
    "alltoallgda": "AllToAll",
    "alltoallvgda": "AllToAll",
}

# Label of the pseudo-collective "all NCCL kernels" while per-GPU and per-collective
# figures are computed in one pass.
_ALL = "\x00all"


@dataclass(frozen=True)
class NcclResult:
    """NCCL share, overlap and collective skew (see the module docstring).

    ``per_gpu``: one row per GPU of the windows: ``window_ns``, ``busy_ns``,
    ``nccl_kernels``, ``nccl_kernel_ns`` (sum of clipped durations), ``nccl_ns``
    (union), ``nccl_busy_share``, ``nccl_window_share``, ``overlap_ns``,
    ``overlap_share``, ``matched_kernels``, ``unmatched_kernels``,
    ``matched_kernel_ns`` (sum of durations of matched kernels), ``wait_ns``,
    ``wait_share`` (= wait / matched kernel time), ``arrival_lag_ns`` (sum of
    start - earliest start), ``last_arrivals`` (instances this GPU started last).
    ``per_collective``: the same columns (except window/busy) per (gpu, collective).
    ``instances``: one row per matched instance: ``collective``, ``stream_rank``,
    ``ordinal``, ``gpus``, ``first_start_ns``, ``last_start_ns``, ``skew_ns``,
    ``fastest_ns``, ``slowest_ns``, ``wait_ns`` (sum over its GPUs), ``last_gpu`` (the
    GPU that started last, lowest index on a tie; null when the skew is 0).
    ``instance_kernels``: one row per matched kernel: instance key, ``gpu``,
    ``stream_id``, ``start_ns``, ``end_ns``, ``duration_ns``, ``lag_ns``, ``wait_ns``,
    ``in_window``.
    ``matching``: one row per (collective, stream_rank): ``match_mode``, ``gpus``,
    ``min_count``/``max_count`` (kernels per GPU over the whole trace), ``kernels``
    (in windows), ``matched_instances``, ``unmatched_kernels``.
    Scalars pool all GPUs; a skew or share is None when nothing defines it.
    """

    per_gpu: pl.DataFrame
    per_collective: pl.DataFrame
    instances: pl.DataFrame
    instance_kernels: pl.DataFrame
    matching: pl.DataFrame
    nccl_kernels: int
    nccl_ns: int
    nccl_busy_share: float | None
    nccl_window_share: float | None
    overlap_ns: int
    overlap_share: float | None
    matched_instances: int
    unmatched_kernels: int
    skew_median_ns: int | None
    skew_p99_ns: int | None
    skew_max_ns: int | None
    wait_ns: int
    wait_share: float | None


def _kernel_label() -> pl.Expr:
    return pl.coalesce(pl.col("short_name"), pl.col("name"))


def _classify_labels(labels: pl.DataFrame) -> pl.DataFrame:
    """Distinct kernel labels (``_label``) with ``is_nccl`` and ``collective``."""
    label = pl.col("_label").cast(pl.String).str.replace(_NAME_NOISE, "")
    token = pl.coalesce(
        label.str.extract(_PREFIXED_NAME, 1), label.str.extract(_LEGACY_NAME, 1)
    ).str.to_lowercase()
    is_nccl = label.str.starts_with(NCCL_PREFIX).fill_null(False)
    collective = token.replace_strict(_COLLECTIVE_TOKENS, default=OTHER, return_dtype=pl.String)
    return labels.with_columns(
        is_nccl.alias("is_nccl"),
        pl.when(is_nccl).then(collective).otherwise(None).alias("collective"),
    )


def classify_nccl(kernels: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` with ``is_nccl`` (Boolean) and ``collective`` (null when not NCCL)."""
    labelled = kernels.drop("is_nccl", "collective", strict=False).with_columns(
        _kernel_label().alias("_label")
    )
    # A trace has millions of kernels but few distinct names: parse each name once.
    parsed = _classify_labels(labelled.select("_label").unique())
    return labelled.join(
        parsed, on="_label", how="left", nulls_equal=True, maintain_order="left"
    ).drop("_label")


def _nccl_labels(labelled: pl.DataFrame) -> pl.DataFrame:
    """The distinct NCCL labels of ``labelled`` (kernels with ``_label``), with their
    ``is_nccl`` and ``collective``.

    A trace has millions of kernels but few distinct names: each is parsed once.
    """
    return _classify_labels(labelled.select("_label").unique()).filter(pl.col("is_nccl"))


def _has_label_of(names: pl.DataFrame) -> pl.Expr:
    """Whether a row's ``_label`` is one of ``names``' (:func:`_nccl_labels`)."""
    return is_one_of(pl.col("_label"), names["_label"].sort().to_list())


def nccl_kernels(kernels: pl.DataFrame) -> pl.DataFrame:
    """The NCCL kernels of ``kernels``, in their order, with ``collective``: the rows of
    :func:`classify_nccl` that are NCCL, without ``is_nccl``.

    The rows are picked by their few distinct labels, and only they are joined with
    their collective: at 5M kernels, 0.05 s against 0.1 s for a join of every kernel.
    """
    labelled = kernels.drop("is_nccl", "collective", strict=False).with_columns(
        _kernel_label().alias("_label")
    )
    names = _nccl_labels(labelled)
    picked = labelled.filter(_has_label_of(names))
    return picked.join(
        names.select("_label", "collective"), on="_label", how="left", maintain_order="left"
    ).drop("_label")


def nccl_outliers(kernels: pl.DataFrame, top: int = 5) -> pl.DataFrame:
    """The longest NCCL kernels against their collective's median on the same GPU.

    One row per kernel, longest first (at most ``top``): ``gpu``, ``collective``,
    ``start_ns``, ``end_ns``, ``duration_ns``, ``median_ns`` (median duration of that
    collective's kernels on that GPU), ``count`` (those kernels), ``over_median``
    (duration / median; null when the median is 0). An empty frame without NCCL kernels.
    """
    nccl = (
        nccl_kernels(kernels.select("gpu", "start_ns", "end_ns", "short_name", "name"))
        .filter(pl.col("gpu").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns")))
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
    )
    stats = nccl.group_by("gpu", "collective").agg(
        pl.col("duration_ns").median().cast(pl.Int64).alias("median_ns"),
        pl.len().cast(pl.Int64).alias("count"),
    )
    return (
        nccl.sort("duration_ns", descending=True)
        .head(top)
        .join(stats, on=["gpu", "collective"], how="left")
        .select(
            "gpu",
            "collective",
            "start_ns",
            "end_ns",
            "duration_ns",
            "median_ns",
            "count",
            pl.when(pl.col("median_ns") > 0)
            .then(pl.col("duration_ns") / pl.col("median_ns"))
            .otherwise(None)
            .alias("over_median"),
        )
    )


def _share(num: str, den: str) -> pl.Expr:
    return (
        pl.when(pl.col(den) > 0)
        .then(pl.col(num).cast(pl.Float64) / pl.col(den))
        .otherwise(None)
        .cast(pl.Float64)
    )


def _with_all(per_collective: pl.DataFrame) -> pl.DataFrame:
    """Sums per (gpu, collective) plus their totals per GPU as the pseudo-collective of all."""
    totals = per_collective.group_by("gpu").agg(
        pl.lit(_ALL).alias("collective"), pl.all().exclude("gpu", "collective").sum()
    )
    return pl.concat([per_collective, totals.select(per_collective.columns)])


def _with_window(kernels: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Adds ``in_window`` and the clipped bounds ``clip_start_ns``/``clip_end_ns``.

    A kernel is in its GPU's window when it overlaps or touches it (the convention of
    ``nsysan.intervals.clip_to_windows``); GPUs without a window have none.
    """
    joined = kernels.join(windows, on="gpu", how="left")
    inside = (pl.col("end_ns") >= pl.col("window_start_ns")) & (
        pl.col("start_ns") <= pl.col("window_end_ns")
    )
    return joined.with_columns(
        inside.fill_null(False).alias("in_window"),
        pl.max_horizontal("start_ns", "window_start_ns").alias("clip_start_ns"),
        pl.min_horizontal("end_ns", "window_end_ns").alias("clip_end_ns"),
    ).drop("window_start_ns", "window_end_ns")


def _length_ns(union: pl.DataFrame) -> int:
    return int(union.select((pl.col("end_ns") - pl.col("start_ns")).sum()).item())


def _busy_ns(busy: pl.DataFrame, gpu: int, start: int, end: int) -> int:
    """Length of the union of one GPU's ``busy`` intervals inside its window ``[start, end]``."""
    own = busy.filter(pl.col("gpu") == gpu).select("start_ns", "end_ns")
    # A busy union handed in (``BusyResult.intervals``) needs no clipping or merging.
    if is_union_inside(own, start, end):
        return _length_ns(own)
    s, e = pl.col("start_ns"), pl.col("end_ns")
    clipped = own.filter((e >= start) & (s <= end)).select(
        s.clip(lower_bound=start), e.clip(upper_bound=end)
    )
    if not clipped.get_column("start_ns").is_sorted():
        clipped = clipped.sort("start_ns")
    return int(clipped.select(union_length(s, e)).item())


def _time_stats(
    nccl: pl.DataFrame, kernels: pl.DataFrame, labels: dict[str, list[str]], windows: pl.DataFrame
) -> pl.DataFrame:
    """Per (gpu, collective incl. all): kernel counts, NCCL union and its compute overlap.

    ``nccl``: the NCCL kernels with their window columns; ``kernels``: all kernels with
    ``_label`` and ``_nccl``; ``labels``: the kernel labels of each collective.
    """
    # Lazy: only the columns selected go through the filter.
    inside = (
        nccl.lazy()
        .filter(pl.col("in_window"))
        .select(
            "gpu",
            "collective",
            pl.col("clip_start_ns").alias("start_ns"),
            pl.col("clip_end_ns").alias("end_ns"),
        )
        .collect()
    )
    keys = ["gpu", "collective"]
    counts = _with_all(
        inside.group_by(keys).agg(
            pl.len().cast(pl.Int64).alias("kernels"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("kernel_ns"),
        )
    )
    present: dict[int, list[str]] = {}
    for gpu, collective in inside.select(keys).unique().sort(keys).iter_rows():
        present.setdefault(gpu, []).append(collective)
    rows = []
    s, e = pl.col("start_ns"), pl.col("end_ns")
    for gpu, start, end in windows.iter_rows():
        if gpu not in present:
            continue
        several = len(present[gpu]) > 1
        # Lazy: the filter gathers only the selected columns of the GPU's kernels.
        own = (
            kernels.lazy()
            .filter((pl.col("gpu") == gpu) & (e >= start) & (s <= end))
            .select(
                s.clip(lower_bound=start),
                e.clip(upper_bound=end),
                "_nccl",
                *(["_label"] if several else []),
            )
            .collect()
        )
        if not own.get_column("start_ns").is_sorted():
            own = own.sort("start_ns")
        # Kernels that never overlap (each starts where or after the one before it ends,
        # as on a GPU running one stream) add up to their union and overlap nothing.
        if own.select((s >= e.shift(1)).all()).item():
            rows.extend((gpu, c, None, 0) for c in [_ALL, *present[gpu]])
            continue
        # One pass per GPU and collective, never per kernel: with C the compute union
        # and N an NCCL union, |N ∩ C| = |N| + |C| - |N ∪ C|.
        compute = ~pl.col("_nccl")
        masks = {_ALL: pl.col("_nccl")}
        if several:  # else the one collective is all of the GPU's NCCL time
            masks |= {c: is_one_of(pl.col("_label"), labels[c]) for c in present[gpu]}
        found = own.select(
            union_length(s.filter(compute), e.filter(compute)).alias("_compute"),
            *(union_length(s.filter(m), e.filter(m)).alias(f"n{c}") for c, m in masks.items()),
            *(
                union_length(s.filter(compute | m), e.filter(compute | m)).alias(f"u{c}")
                for c, m in masks.items()
            ),
        ).row(0, named=True)
        for collective in [_ALL, *present[gpu]]:
            c = collective if collective in masks else _ALL
            nccl_ns, either_ns = found[f"n{c}"], found[f"u{c}"]
            rows.append((gpu, collective, nccl_ns, nccl_ns + found["_compute"] - either_ns))
    lengths = pl.DataFrame(
        rows,
        schema={
            "gpu": inside.schema["gpu"],
            "collective": pl.String,
            "nccl_ns": pl.Int64,
            "overlap_ns": pl.Int64,
        },
        orient="row",
    )
    # A null NCCL union stands for the summed kernel time (kernels that never overlap).
    return (
        counts.join(lengths, on=keys, how="left")
        .with_columns(
            pl.col("nccl_ns").fill_null(pl.col("kernel_ns")), pl.col("overlap_ns").fill_null(0)
        )
        .select(*keys, "kernels", "kernel_ns", pl.col("nccl_ns", "overlap_ns").cast(pl.Int64))
    )


def _match_counts(matched: pl.DataFrame) -> pl.DataFrame:
    """Per (gpu, collective incl. all): matched/unmatched counts, in windows."""
    keys = ["gpu", "collective"]
    return _with_all(
        matched.select(*keys, "matched", "in_window")
        .filter(pl.col("in_window"))
        .group_by(keys)
        .agg(
            pl.col("matched").sum().cast(pl.Int64).alias("matched_kernels"),
            (~pl.col("matched")).sum().cast(pl.Int64).alias("unmatched_kernels"),
        )
    )


def _match_groups(matched: pl.DataFrame) -> pl.DataFrame:
    """Per (collective, stream rank): how it was matched, and its kernels in windows
    (``NcclResult.matching`` but its ``matched_instances``)."""
    in_window = matched.select(*GROUP_KEY, "matched", "in_window").filter(pl.col("in_window"))
    return (
        matched.group_by(GROUP_KEY)
        .agg(pl.col("match_mode", "gpus", "min_count", "max_count").first())
        .join(
            in_window.group_by(GROUP_KEY).agg(
                pl.len().cast(pl.Int64).alias("kernels"),
                (~pl.col("matched")).sum().cast(pl.Int64).alias("unmatched_kernels"),
            ),
            on=list(GROUP_KEY),
            how="left",
        )
    )


def _wait_stats(counts: pl.DataFrame, instance_kernels: pl.DataFrame) -> pl.DataFrame:
    """Per (gpu, collective incl. all): ``counts`` (:func:`_match_counts`) and wait
    totals, in windows (``instance_kernels`` with their ``LAST_ARRIVAL``)."""
    keys = ["gpu", "collective"]
    # Lazy: the in-window filter copies only the columns summed, not every column.
    waits = _with_all(
        instance_kernels.lazy()
        .filter(pl.col("in_window"))
        .group_by(keys)
        .agg(
            pl.col("duration_ns").sum().alias("matched_kernel_ns"),
            pl.col("wait_ns").sum().alias("wait_ns"),
            pl.col("lag_ns").sum().alias("arrival_lag_ns"),
            pl.col(LAST_ARRIVAL).sum().cast(pl.Int64).alias("last_arrivals"),
        )
        .collect()
    )
    return counts.join(waits, on=keys, how="left").with_columns(
        pl.col("matched_kernel_ns", "wait_ns", "arrival_lag_ns", "last_arrivals")
        .fill_null(0)
        .cast(pl.Int64)
    )


# The kernel columns the analysis reads.
_KERNEL_COLUMNS = ("gpu", "start_ns", "end_ns", "short_name", "name", *STREAM_KEY, "correlation_id")

_STAT_COLUMNS = (
    "nccl_kernels",
    "nccl_kernel_ns",
    "nccl_ns",
    "overlap_ns",
    "matched_kernels",
    "unmatched_kernels",
    "matched_kernel_ns",
    "wait_ns",
    "arrival_lag_ns",
    "last_arrivals",
)


def _pooled_share(totals: pl.DataFrame, num: str, den: str) -> float | None:
    value = totals.select(_share(num, den)).item()
    return None if value is None else float(value)


def measure_nccl(
    trace_kernels: pl.DataFrame,
    busy: pl.DataFrame,
    windows: pl.DataFrame,
    ordered_kernels: bool = True,
) -> NcclResult:
    """NCCL share of busy time and window, overlap with compute, and collective skew.

    :param trace_kernels: the trace's ``kernels`` table (model.KERNELS columns); rows
        without a GPU or bounds, or ending before they start, are left out.
    :param busy: busy intervals ``gpu, start_ns, end_ns`` (any busy mode; clipped to
        the windows here, overlaps counted once).
    :param windows: ``gpu, window_start_ns, window_end_ns``, one row per GPU.
    :param ordered_kernels: ``instance_kernels`` in instance and GPU order; without,
        in no particular order (when nothing shows them: every other result is the same).
    """
    w = windows.select("gpu", "window_start_ns", "window_end_ns")
    kernels = trace_kernels.select(*_KERNEL_COLUMNS)
    # The library's checks (one valid window per GPU, busy bounds in order) run on the
    # only rows that can fail them.
    clip_to_windows(kernels.select("gpu", "start_ns", "end_ns").clear(), w, by="gpu")
    clip_to_windows(
        busy.select("gpu", "start_ns", "end_ns").filter(pl.col("end_ns") < pl.col("start_ns")),
        w,
        by="gpu",
    )
    valid = (
        pl.col("gpu").is_not_null()
        & pl.col("start_ns").is_not_null()
        & pl.col("end_ns").is_not_null()
        & (pl.col("end_ns") >= pl.col("start_ns"))
    )
    if not kernels.select(valid.all()).item():
        kernels = kernels.filter(valid)
    kernels = kernels.with_columns(_kernel_label().alias("_label"))
    names = _nccl_labels(kernels)
    labels: dict[str, list[str]] = {}
    for label, collective in names.select("_label", "collective").sort("_label").iter_rows():
        labels.setdefault(collective, []).append(label)
    kernels = kernels.with_columns(_has_label_of(names).alias("_nccl"))
    nccl = _with_window(
        kernels.select(
            "gpu", "start_ns", "end_ns", *STREAM_KEY, "correlation_id", "_label", "_nccl"
        )
        .filter(pl.col("_nccl"))
        .with_columns(
            pl.col("_label")
            .replace_strict(
                names.get_column("_label"),
                names.get_column("collective"),
                return_dtype=pl.String,
            )
            .alias("collective")
            if names.height
            # An empty mapping would keep the input's (categorical) dtype.
            else pl.lit(None, dtype=pl.String).alias("collective")
        )
        .drop("_label", "_nccl"),
        w,
    )
    keys = ["gpu", "collective"]

    # First, while the matching's tables are not held yet; then the kernels go.
    time_stats = _time_stats(nccl, kernels, labels, w)
    del kernels
    # The clipped bounds served the time statistics alone: not sorted with the rest.
    matched = match_instances(nccl.drop("clip_start_ns", "clip_end_ns"))
    del nccl
    # What is read of every NCCL kernel is taken now, and the matched table goes
    # before the instances are built (it was held through NCCL's memory peak).
    counts, groups = _match_counts(matched), _match_groups(matched)
    in_instances = matched.lazy().filter(pl.col("matched")).select(INSTANCE_READ).collect()
    del matched
    instance_kernels, instances = kernels_by_instance(in_instances, ordered=ordered_kernels)
    del in_instances
    stats = (
        time_stats.rename({"kernels": "nccl_kernels", "kernel_ns": "nccl_kernel_ns"})
        .join(_wait_stats(counts, instance_kernels), on=keys, how="left")
        .with_columns(pl.col(list(_STAT_COLUMNS)).fill_null(0).cast(pl.Int64))
    )
    instance_kernels = instance_kernels.drop(LAST_ARRIVAL)
    shares = [
        _share("overlap_ns", "nccl_ns").alias("overlap_share"),
        _share("wait_ns", "matched_kernel_ns").alias("wait_share"),
    ]

    busy_ns = pl.DataFrame(
        [(gpu, _busy_ns(busy, gpu, start, end)) for gpu, start, end in w.iter_rows()],
        schema={"gpu": w.schema["gpu"], "busy_ns": pl.Int64},
        orient="row",
    )
    gpu_stats = stats.filter(pl.col("collective") == _ALL).drop("collective")
    per_gpu = (
        w.select("gpu", (pl.col("window_end_ns") - pl.col("window_start_ns")).alias("window_ns"))
        .join(busy_ns, on="gpu", how="left")
        .join(gpu_stats, on="gpu", how="left")
        .with_columns(pl.col("busy_ns", *_STAT_COLUMNS).fill_null(0).cast(pl.Int64))
        .with_columns(
            _share("nccl_ns", "busy_ns").alias("nccl_busy_share"),
            _share("nccl_ns", "window_ns").alias("nccl_window_share"),
            *shares,
        )
        .sort("gpu")
    )
    per_collective = (
        stats.filter(pl.col("collective") != _ALL)
        .join(per_gpu.select("gpu", "busy_ns", "window_ns"), on="gpu", how="left")
        .with_columns(
            _share("nccl_ns", "busy_ns").alias("nccl_busy_share"),
            _share("nccl_ns", "window_ns").alias("nccl_window_share"),
            *shares,
        )
        .drop("busy_ns", "window_ns")
        .sort(keys)
    )

    matching = (
        groups.join(
            instances.group_by(GROUP_KEY).agg(pl.len().cast(pl.Int64).alias("matched_instances")),
            on=list(GROUP_KEY),
            how="left",
        )
        .with_columns(pl.col("kernels", "unmatched_kernels", "matched_instances").fill_null(0))
        .sort(list(GROUP_KEY))
    )

    totals = per_gpu.select(pl.col(*_STAT_COLUMNS, "busy_ns", "window_ns").sum())
    skew = pl.col("skew_ns")
    skews = instances.select(
        skew.quantile(0.5, _QUANTILE_METHOD).cast(pl.Int64).alias("median"),
        skew.quantile(SKEW_QUANTILE, _QUANTILE_METHOD).cast(pl.Int64).alias("tail"),
        skew.max().alias("max"),
    ).row(0, named=True)
    return NcclResult(
        per_gpu=per_gpu,
        per_collective=per_collective,
        instances=instances,
        instance_kernels=instance_kernels,
        matching=matching,
        nccl_kernels=int(totals["nccl_kernels"][0]),
        nccl_ns=int(totals["nccl_ns"][0]),
        nccl_busy_share=_pooled_share(totals, "nccl_ns", "busy_ns"),
        nccl_window_share=_pooled_share(totals, "nccl_ns", "window_ns"),
        overlap_ns=int(totals["overlap_ns"][0]),
        overlap_share=_pooled_share(totals, "overlap_ns", "nccl_ns"),
        matched_instances=instances.height,
        unmatched_kernels=int(totals["unmatched_kernels"][0]),
        skew_median_ns=skews["median"],
        skew_p99_ns=skews["tail"],
        skew_max_ns=skews["max"],
        wait_ns=int(totals["wait_ns"][0]),
        wait_share=_pooled_share(totals, "wait_ns", "matched_kernel_ns"),
    )

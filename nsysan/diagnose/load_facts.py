"""Facts about load over time (bursts, starvation, latency tails) for ``load_rules``.

Separate from the rules so that :mod:`nsysan.diagnose.resource_facts` can gather them
without importing the rules (which import ``Facts``).
"""

from __future__ import annotations

from dataclasses import dataclass

from nsysan.analysis import Analysis


@dataclass(frozen=True)
class BurstFact:
    start_ns: int
    end_ns: int
    load: int
    over_median: float | None
    top_gpu: int
    top_share: float
    top_busy_before: float | None


@dataclass(frozen=True)
class StarvedFact:
    gpu: int
    starved_share: float
    starved_count: int
    longest_start_ns: int | None
    longest_end_ns: int | None


@dataclass(frozen=True)
class TailFact:
    gpu: int
    what: str  # "request" or "step"
    count: int
    p50_ns: int
    p99_ns: int
    max_ns: int
    ratio: float
    slowest_start_ns: int | None


def load_facts(analysis: Analysis) -> dict[str, object]:
    out: dict[str, object] = {}
    if analysis.load is not None:
        out["bursts"] = (
            tuple(
                BurstFact(
                    start_ns=int(r["start_ns"]),
                    end_ns=int(r["end_ns"]),
                    load=int(r["load"]),
                    over_median=r["over_median"],
                    top_gpu=int(r["top_gpu"]),
                    top_share=float(r["top_share"] or 0.0),
                    top_busy_before=r["top_busy_before"],
                )
                for r in analysis.load.bursts.iter_rows(named=True)
            )
            if analysis.load.kind == "requests"
            else ()
        )
        longest = analysis.load.starved.sort("duration_ns", descending=True).unique(
            "gpu", keep="first", maintain_order=True
        )
        first = {int(r["gpu"]): r for r in longest.iter_rows(named=True)}
        out["starved"] = tuple(
            StarvedFact(
                gpu=int(r["gpu"]),
                starved_share=float(r["starved_share"] or 0.0),
                starved_count=int(r["starved_count"]),
                longest_start_ns=first[int(r["gpu"])]["start_ns"]
                if int(r["gpu"]) in first
                else None,
                longest_end_ns=first[int(r["gpu"])]["end_ns"] if int(r["gpu"]) in first else None,
            )
            for r in analysis.load.per_gpu.iter_rows(named=True)
            if r["starved_count"]
        )
    if analysis.steps is not None:
        tails = []
        slow_req = analysis.steps.requests.sort("duration_ns", descending=True).unique(
            "gpu", keep="first", maintain_order=True
        )
        slow_step = analysis.steps.slowest.unique("gpu", keep="first", maintain_order=True)
        req_start = {int(g): int(s) for g, s in slow_req.select("gpu", "start_ns").iter_rows()}
        step_start = {int(g): int(s) for g, s in slow_step.select("gpu", "start_ns").iter_rows()}
        for r in analysis.steps.per_gpu.iter_rows(named=True):
            g = int(r["gpu"])
            if r["request_tail_ratio"] is not None:
                tails.append(TailFact(g, "request", int(r["requests"]), int(r["request_p50_ns"]), int(r["request_p99_ns"]),
                                      int(r["request_max_ns"]), float(r["request_tail_ratio"]), req_start.get(g)))  # fmt: skip
            if r["step_tail_ratio"] is not None:
                tails.append(TailFact(g, "step", int(r["steps"]), int(r["step_p50_ns"]), int(r["step_p99_ns"]),
                                      int(r["step_max_ns"]), float(r["step_tail_ratio"]), step_start.get(g)))  # fmt: skip
        out["tails"] = tuple(tails)
    return out

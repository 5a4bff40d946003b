"""User-settable knobs of an analysis, in one frozen object.

The CLI builds a :class:`Settings`; the library never reads click. The report's
appendix prints every field, so a number can always be traced to the settings that
produced it (docs/metrics.md defines each).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

BusyMode = Literal["kernels", "nvidia"]
WindowKind = Literal["per_gpu", "common", "explicit", "nvtx"]


@dataclass(frozen=True)
class WindowSpec:
    """Which part of the timeline each GPU is measured over.

    * ``per_gpu`` (default): from the GPU's first to its last GPU operation, the
      convention of Nsight Systems' ``gpu_gaps`` rule.
    * ``common``: one window for all GPUs, from the earliest first operation to the
      latest last operation of any GPU.
    * ``explicit``: ``start_ns``..``end_ns`` on the trace timeline.
    * ``nvtx``: from the start of the first to the end of the last NVTX range whose
      text equals ``nvtx_range`` (per process feeding the GPU, else trace-wide).

    ``skip_warmup_ns`` moves every window's start later by that much (after the
    window is resolved), to leave out warm-up.
    """

    kind: WindowKind = "per_gpu"
    start_ns: int | None = None
    end_ns: int | None = None
    nvtx_range: str | None = None
    skip_warmup_ns: int = 0


@dataclass(frozen=True)
class Settings:
    """All settings of one analysis run."""

    busy_mode: BusyMode = "kernels"
    window: WindowSpec = field(default_factory=WindowSpec)
    # Number of equal time windows for load-drift series (seed 4.2); at least 20.
    drift_windows: int = 20
    # NVML-style utilization sample period (nvidia-smi samples over ~1 s periods;
    # shorter traces use 1/20 of the longest window, see docs/metrics/dashboard.md).
    dashboard_period_ns: int = 1_000_000_000
    # A clock sample more than this share below the trace's max clock is a drop.
    clock_drop_share: float = 0.15
    # A gap is "launched late" when the launch call of the operation that ends it started
    # no earlier than this many ns before the gap began; otherwise "GPU-side wait"
    # (docs/metrics/host.md#primary).
    launch_slack_ns: int = 0
    lang: Literal["en", "zh"] = "en"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

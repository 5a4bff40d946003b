"""The registry of diagnosis rules: every rule, in the order they are evaluated, and every rule id.

A rule is a function over :class:`Facts` that returns one finding or ``None``; the
rules live in one module per idea (``*_rules.py``). Every threshold is a named
constant in its rule's module and documented in docs/findings.md (a test checks that
every rule id and constant is). A rule returns ``None`` unless its evidence is
present and clear: a missing measurement never fires a rule.
"""

from __future__ import annotations

from collections.abc import Callable

from nsysan.diagnose.balance_rules import compute_skew, load_drift, pipeline_bubble
from nsysan.diagnose.cpu_rules import CPU_RULE_IDS, CPU_RULES
from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding
from nsysan.diagnose.gpu_rules import dominant_gap, gpu_side_gaps, sm_idle_while_busy, small_kernels
from nsysan.diagnose.hardware_rules import clock_throttling, memory_bound
from nsysan.diagnose.host_rules import host_bound_gaps, host_late_unknown
from nsysan.diagnose.launch_rules import LAUNCH_RULE_IDS, LAUNCH_RULES
from nsysan.diagnose.load_rules import LOAD_RULE_IDS, LOAD_RULES
from nsysan.diagnose.memory_rules import MEMORY_RULE_IDS, MEMORY_RULES
from nsysan.diagnose.nccl_rules import collective_skew, comm_bound, nccl_outlier
from nsysan.diagnose.stagger_rules import aligned_gaps, false_balance
from nsysan.diagnose.transfer_rules import transfer_heavy

Rule = Callable[[Facts], "Finding | None"]

#: Every rule, in the order they are evaluated. Order does not decide importance:
#: findings are sorted by severity, then impact_share.
RULES: tuple[Rule, ...] = (
    false_balance,
    gpu_side_gaps,
    dominant_gap,
    host_bound_gaps,
    host_late_unknown,
    small_kernels,
    sm_idle_while_busy,
    nccl_outlier,
    aligned_gaps,
    compute_skew,
    pipeline_bubble,
    load_drift,
    comm_bound,
    collective_skew,
    memory_bound,
    clock_throttling,
    transfer_heavy,
    *LAUNCH_RULES,
    *CPU_RULES,
    *MEMORY_RULES,
    *LOAD_RULES,
)

#: The id of every finding a rule can give (``compute_skew`` gives one of two).
RULE_IDS = (
    "false-balance",
    "gpu-side-gaps",
    "dominant-gap",
    "host-bound-gaps",
    "host-late-unknown",
    "small-kernels",
    "sm-idle-while-busy",
    "nccl-outlier",
    "aligned-gaps",
    "static-split-skew",
    "moe-hot-expert",
    "pipeline-bubble",
    "dp-long-tail",
    "comm-bound",
    "collective-skew",
    "memory-bound",
    "clock-throttling",
    "transfer-heavy",
    *LAUNCH_RULE_IDS,
    *CPU_RULE_IDS,
    *MEMORY_RULE_IDS,
    *LOAD_RULE_IDS,
)

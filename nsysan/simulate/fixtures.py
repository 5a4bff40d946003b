"""The small generated files in fixtures/: one export per scenario, its ncu CSV, the truths."""

from __future__ import annotations

import json
from pathlib import Path

from nsysan.simulate import FIXTURE_SCALES, GroundTruth, generate
from nsysan.simulate.writer import write_text_atomic

FIXTURE_SEED = 0
TRUTH_FILE = "ground_truth.json"


def regenerate(directory: str | Path) -> dict[str, GroundTruth]:
    """Write every scenario at its fixture scale into ``directory``; returns the truths.

    Also writes ``ground_truth.json`` (scenario -> :meth:`GroundTruth.to_json`).
    """
    out = Path(directory)
    truths = {
        name: generate(name, out / f"{name}.sqlite", seed=FIXTURE_SEED, scale=scale)
        for name, scale in FIXTURE_SCALES.items()
    }
    text = json.dumps({n: t.to_json() for n, t in truths.items()}, indent=1, sort_keys=True)
    write_text_atomic(out / TRUTH_FILE, text + "\n")
    return truths

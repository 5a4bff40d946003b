"""``python -m nsysan.simulate [DIR]``: regenerate the fixture files (default ``fixtures/``)."""

from __future__ import annotations

import argparse
import sys

from nsysan.simulate.fixtures import regenerate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nsysan.simulate",
        description="Regenerate the synthetic scenario exports used as test fixtures.",
    )
    parser.add_argument("directory", nargs="?", default="fixtures", help="output folder")
    args = parser.parse_args(argv)
    for name, truth in regenerate(args.directory).items():
        gaps = ", ".join(f"{g.gap_share:.3f}" for g in truth.gpus)
        print(f"{name:18} {len(truth.gpus)} GPUs  gap shares {gaps}  -> {truth.top_finding}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where the report templates live, installed or in a checkout.

A wheel carries them as ``nsysan/templates`` (hatch force-include of the top-level
``templates/``); an editable install reads the repository's ``templates/``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path


@cache
def templates_dir() -> Path:
    """The folder holding ``report.html.j2``, ``_partials/`` and ``assets/``."""
    packaged = resources.files("nsysan") / "templates"
    if isinstance(packaged, Path) and (packaged / "report.html.j2").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "templates"
    if (checkout / "report.html.j2").is_file():
        return checkout
    raise RuntimeError(
        f"nsysan report templates not found (looked in {packaged} and {checkout}); reinstall nsysan"
    )

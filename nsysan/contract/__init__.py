"""The JSON contract: one JSON Schema (draft 2020-12) for every document nsysan writes.

``analyze --json``, ``report --json``, the per-trace JSON and ``results.json`` of
``batch``, and ``diff --json`` are all described by ``nsysan.schema.json`` next to this
module; the document's ``kind`` says which part applies. The file ships in the wheel,
so a consumer validates against the schema of the version it runs::

    from nsysan.contract import validate
    validate(document)            # raises ContractError naming the failing path

``SCHEMA_VERSION`` (in :mod:`nsysan.report.jsonout`) and the schema file change
together: tests/test_contract.py pins the file's SHA-256 per version, so an edit to
the schema without a version bump fails CI.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

from nsysan.errors import NsysanError
from nsysan.report.jsonout import SCHEMA_HASHES, SCHEMA_VERSION

__all__ = [
    "SCHEMA_HASHES",
    "SCHEMA_VERSION",
    "ContractError",
    "schema",
    "schema_sha256",
    "validate",
]

SCHEMA_FILE = "nsysan.schema.json"


class ContractError(NsysanError):
    slug = "json-contract"


def _schema_bytes() -> bytes:
    return resources.files(__package__).joinpath(SCHEMA_FILE).read_bytes()


def schema_sha256() -> str:
    """SHA-256 of the shipped schema file (the value pinned in ``SCHEMA_HASHES``)."""
    return hashlib.sha256(_schema_bytes()).hexdigest()


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema as a dict."""
    return json.loads(_schema_bytes())  # type: ignore[no-any-return]


@cache
def _validator() -> Any:
    # jsonschema: the reference implementation of JSON Schema for Python (draft 2020-12
    # with $ref/$defs and if/then); a hand-written checker would be a second, weaker spec.
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema())
    return Draft202012Validator(schema())


def errors(document: Any) -> list[str]:
    """Every violation of the schema in ``document``, as ``path: message`` lines."""
    out = []
    for err in sorted(_validator().iter_errors(document), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(document)"
        out.append(f"{where}: {err.message[:300]}")
    return out


def validate(document: Any) -> None:
    """Raise :class:`ContractError` when ``document`` does not follow the schema."""
    problems = errors(document)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ContractError(f"not a valid nsysan document: {problems[0]}{more}")

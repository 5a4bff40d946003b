"""The versioned JSON form of an analysis (``nsysan analyze --json``, ``report --json``).

Documented in docs/json-schema.md. Result dataclasses are serialised field by field:
DataFrames become lists of row objects, nested dataclasses become objects. The
``schema_version`` changes whenever the JSON Schema (nsysan/contract/nsysan.schema.json)
changes: a field renamed, removed or added to the schema, or its meaning changed.
Fields the schema leaves open (a new analysis under ``results``, a new column of a
result table) may appear without a bump.

History:
  1: first version (analyses, findings, myths, settings, inputs).
  2: one JSON Schema for every document; ``kind`` (analysis, diff, batch) added;
     ``diff --json`` and batch ``results.json`` documents.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import polars as pl

SCHEMA_VERSION = 2
# SHA-256 of nsysan/contract/nsysan.schema.json at each version, append-only: a test
# fails when the shipped schema's hash is not the one recorded for SCHEMA_VERSION.
SCHEMA_HASHES: dict[int, str] = {
    2: "82a5115188ecfb5b21327ddb99d1f35bc090373d85b636d02decb34ae11123fe",
}


def to_jsonable(value: Any) -> Any:
    """Plain JSON values for dataclasses (but their fields marked
    ``metadata={"document": False}``), DataFrames, paths, tuples and floats."""
    if isinstance(value, pl.DataFrame):
        return [to_jsonable(row) for row in value.to_dicts()]
    if isinstance(value, pl.Series):
        return [to_jsonable(v) for v in value.to_list()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.metadata.get("document", True)
        }
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return str(value)


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(to_jsonable(document), indent=2, ensure_ascii=False, allow_nan=False)

"""The JSON contract: one schema (nsysan/contract/nsysan.schema.json) for every document.

Every analysis document of every generated scenario and every shared trace validates;
a document that breaks the contract does not; the schema cannot change without a
``schema_version`` bump (its SHA-256 is pinned per version in jsonout.SCHEMA_HASHES).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import REPO, cori_rank_files, run_cli, single_file_traces

from nsysan import contract
from nsysan.analysis import analyze
from nsysan.ingest import load_trace
from nsysan.ingest.ncu import read_ncu_csv
from nsysan.report.document import analysis_document
from nsysan.report.jsonout import SCHEMA_HASHES, SCHEMA_VERSION, to_jsonable
from nsysan.simulate import SCENARIOS

FIXTURES = REPO / "fixtures"


def _document(paths: list[Path], detail: str = "summary") -> dict:  # type: ignore[type-arg]
    csv = paths[0].with_suffix(".ncu.csv")
    ncu = read_ncu_csv(csv) if len(paths) == 1 and csv.exists() else None
    doc = analysis_document(analyze(load_trace(paths), ncu=ncu), detail)
    # Through JSON text, as a consumer reads it (tuples become lists, and so on).
    return json.loads(json.dumps(to_jsonable(doc)))  # type: ignore[no-any-return]


def test_schema_is_valid_draft_2020_12_and_names_the_current_version() -> None:
    from jsonschema import Draft202012Validator

    schema = contract.schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION}


def test_schema_change_needs_a_version_bump() -> None:
    """Edit the schema → bump SCHEMA_VERSION, append {version: new sha256} to SCHEMA_HASHES."""
    versions = list(SCHEMA_HASHES)
    assert versions == sorted(versions) and versions[-1] == SCHEMA_VERSION, (
        "SCHEMA_HASHES is append-only and its last entry is the current SCHEMA_VERSION"
    )
    assert len(set(SCHEMA_HASHES.values())) == len(SCHEMA_HASHES), (
        "two versions share one schema: a version bump must come with a schema change"
    )
    assert contract.schema_sha256() == SCHEMA_HASHES[SCHEMA_VERSION], (
        "nsysan/contract/nsysan.schema.json changed without a schema_version bump: "
        "bump SCHEMA_VERSION (nsysan/report/jsonout.py), record the new hash under it, "
        "and update docs/json-schema.md"
    )


def test_every_scenario_is_a_fixture() -> None:
    assert {p.stem for p in FIXTURES.glob("*.sqlite")} == set(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_document_follows_the_schema(name: str) -> None:
    for detail in ("summary", "full"):
        doc = _document([FIXTURES / f"{name}.sqlite"], detail)
        assert contract.errors(doc) == [], name
        assert doc["kind"] == "analysis" and doc["schema_version"] == SCHEMA_VERSION


@pytest.mark.shared
@pytest.mark.parametrize("path", single_file_traces(), ids=lambda p: p.parent.name)
def test_every_shared_trace_document_follows_the_schema(path: Path, shared_traces: Path) -> None:
    assert contract.errors(_document([path])) == []


@pytest.mark.shared
def test_multi_rank_document_follows_the_schema(shared_traces: Path) -> None:
    doc = _document(cori_rank_files())
    assert contract.errors(doc) == []
    assert len(doc["inputs"]) == 8


def test_command_outputs_follow_the_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = FIXTURES / "case-study.sqlite"
    code, out, _ = run_cli(["-q", "analyze", "--json", str(trace)], capsys)
    assert code == 0
    contract.validate(json.loads(out))
    code, _, _ = run_cli(
        [
            "-q",
            "report",
            str(trace),
            "-o",
            str(tmp_path / "r.html"),
            "--json",
            str(tmp_path / "r.json"),
        ],
        capsys,
    )
    assert code == 0
    contract.validate(json.loads((tmp_path / "r.json").read_text()))


def test_broken_documents_are_refused() -> None:
    good = _document([FIXTURES / "balanced.sqlite"])
    contract.validate(good)
    bad_severity = copy.deepcopy(good)
    bad_severity["findings"].append(copy.deepcopy(good["myths"][0]))
    bad_kind = dict(good, kind="report")
    missing_results = {k: v for k, v in good.items() if k != "results"}
    share_over_one = copy.deepcopy(good)
    share_over_one["results"]["gaps"]["summary"][0]["gap_share"] = 1.5
    old_version = dict(good, schema_version=1)
    extra_top_level = dict(good, surprise=1)
    for bad in (
        bad_severity,
        bad_kind,
        missing_results,
        share_over_one,
        old_version,
        extra_top_level,
    ):
        assert contract.errors(bad)
        with pytest.raises(contract.ContractError):
            contract.validate(bad)


@pytest.fixture(scope="module")
def scenario_documents() -> dict[str, dict]:  # type: ignore[type-arg]
    return {name: _document([FIXTURES / f"{name}.sqlite"]) for name in sorted(SCENARIOS)}


def test_every_scenario_diff_follows_the_schema(scenario_documents: dict) -> None:  # type: ignore[type-arg]
    from nsysan.diff import diff_documents

    gates = ["gap_share>+5pt", "throughput<-3%", "new_finding>=warning", "stagger_score>0.1"]
    base = scenario_documents["case-study"]
    for name, doc in scenario_documents.items():
        for before, after in ((base, doc), (doc, base), (doc, doc)):
            diff = json.loads(json.dumps(diff_documents(before, after, gates=gates)))
            assert contract.errors(diff) == [], name


def _batch_outputs_follow_the_schema(out: Path) -> int:
    results = json.loads((out / "results.json").read_text())
    assert contract.errors(results) == []
    checked = 0
    for row in results["traces"]:
        if row["status"] == "ok":
            assert contract.errors(json.loads((out / row["json"]).read_text())) == [], row
            checked += 1
    return checked


def test_batch_of_every_scenario_follows_the_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_cli(["-q", "batch", str(FIXTURES), "-o", str(tmp_path), "--jobs", "2"], capsys)
    assert code == 0
    assert _batch_outputs_follow_the_schema(tmp_path) == len(SCENARIOS)


@pytest.mark.shared
def test_batch_and_diff_of_every_shared_trace_follow_the_schema(
    tmp_path: Path, shared_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nsysan.diff import diff_documents

    code, _, _ = run_cli(
        ["-q", "batch", str(shared_traces), "-o", str(tmp_path), "--jobs", "2"], capsys
    )
    assert code == 0
    # Every single-file trace, and the 8 rank files of cori as one trace.
    assert _batch_outputs_follow_the_schema(tmp_path) == len(single_file_traces()) + 1
    docs = [json.loads(p.read_text()) for p in sorted((tmp_path / "traces").glob("*.json"))]
    for doc in docs:
        diff = json.loads(json.dumps(diff_documents(docs[0], doc, gates=["gap_share>+1pt"])))
        assert contract.errors(diff) == []

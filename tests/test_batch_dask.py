"""`nsysan batch --dask`: the same tasks on a dask.distributed cluster (a LocalCluster of
two worker processes here) give the same outputs as the local process pool, byte for
byte in results.csv."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from conftest import REPO, run_cli

distributed = pytest.importorskip("distributed")

NAMES = ["balanced", "case-study", "memory-bound", "tp-heads"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    # Shutdown chatter of the workers' heartbeats is not a test failure.
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    scheduler_file = tmp_path_factory.mktemp("dask") / "scheduler.json"
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        scheduler_kwargs={"scheduler_file": str(scheduler_file)},
    ) as c:
        yield c, scheduler_file


@pytest.mark.slow
def test_dask_run_equals_local_run(
    cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    local_cluster, scheduler_file = cluster
    src = tmp_path / "runs"
    src.mkdir()
    for n in NAMES:
        shutil.copy(REPO / "fixtures" / f"{n}.sqlite", src / f"{n}.sqlite")
    shutil.copy(REPO / "fixtures" / "memory-bound.ncu.csv", src)
    (src / "broken.sqlite").write_bytes(b"garbage")
    local, remote, by_file = tmp_path / "local", tmp_path / "dask", tmp_path / "file"
    code, out, _ = run_cli(["-q", "batch", str(src), "-o", str(local), "--jobs", "2"], capsys)
    assert code == 3 and "4 analysed" in out and "1 failed" in out
    address = local_cluster.scheduler_address
    code, out, _ = run_cli(["-q", "batch", str(src), "-o", str(remote), "--dask", address], capsys)
    assert code == 3 and "4 analysed" in out
    assert (remote / "results.csv").read_bytes() == (local / "results.csv").read_bytes()
    for name in NAMES:
        for suffix in (".json", ".html"):
            f = f"traces/runs__{name}{suffix}"
            assert (remote / f).read_bytes() == (local / f).read_bytes(), f
    code, out, _ = run_cli(
        ["-q", "batch", str(src), "-o", str(by_file), "--dask-scheduler-file", str(scheduler_file)],
        capsys,
    )
    assert code == 3
    assert (by_file / "results.csv").read_bytes() == (local / "results.csv").read_bytes()
    # Resume works across executors: the local state is reused by a Dask re-run.
    code, out, _ = run_cli(["-q", "batch", str(src), "-o", str(local), "--dask", address], capsys)
    assert "0 analysed, 4 up to date, 1 failed" in out


def test_both_dask_options_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        [
            "batch",
            str(tmp_path),
            "-o",
            str(tmp_path / "o"),
            "--dask",
            "tcp://x:1",
            "--dask-scheduler-file",
            "f",
        ],
        capsys,
    )
    assert code == 2 and "not both" in err

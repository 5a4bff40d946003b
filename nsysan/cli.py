"""The ``nsysan`` command line: a thin translator from options to library calls.

Errors on bad input are :class:`nsysan.errors.NsysanError`; they are caught once, in
:func:`main`, and printed as one line (exit 1). Usage errors are click's (exit 2).
Tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from nsysan import __version__
from nsysan.cli_options import (
    analysis_options,
    build_settings,
    nsys_option,
    trace_analysis_options,
    trace_paths,
)
from nsysan.errors import NsysanError
from nsysan.simulate import SCENARIOS

EXIT_OK, EXIT_INPUT_ERROR, EXIT_USAGE = 0, 1, 2
# batch: some traces failed (the rest were written); diff/analyze: a gate tripped.
EXIT_SOME_FAILED, EXIT_GATE = 3, 4
# Shell convention: 128 + the signal number.
SIGNAL_EXITS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, default=_json_default, ensure_ascii=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsysan")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress display (it is shown only on a terminal)."
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Read every export from SQLite, not from nsysan's table cache (also "
    "NSYSAN_CACHE=off; docs/architecture.md, 'Table cache').",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool, no_cache: bool) -> None:
    """Why is a multi-GPU job slower than it should be? Reads Nsight Systems SQLite exports
    (and .nsys-rep reports, exported with nsys)."""
    from nsysan import progress
    from nsysan.ingest import cache

    progress.enable(quiet)
    cache.set_enabled(not no_cache)
    ctx.obj = {"debug": debug}


@cli.command()
@trace_paths
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--exact",
    is_flag=True,
    help="Count the host-side tables' rows as a full read keeps them, with their time "
    "spans and the kernel launch calls (a scan of each table: seconds per million rows).",
)
@nsys_option
def info(traces: tuple[Path, ...], as_json: bool, exact: bool, nsys_path: Path | None) -> None:
    """What TRACES hold: export version, GPUs, processes, span, table counts, what is missing.

    Several files (one per rank or node) are put on one timeline. The GPU tables are
    read; the CUDA API, NVTX, OS-runtime, scheduling and overhead tables are not: their
    rows stored are counted from the tables' row ids (--exact: counted in SQLite as a
    full read keeps them).
    """
    from nsysan.info import render_text, summarize
    from nsysan.ingest import load_census

    summary = summarize(*load_census(list(traces), nsys_path=nsys_path, exact=exact))
    click.echo(dump_json(summary) if as_json else render_text(summary))


def refuse_overwrite_inputs(
    outputs: list[Path | None], traces: tuple[Path, ...], ncu_csv: Path | None
) -> None:
    """Fail before any work if an output would replace a trace, the --ncu CSV or another output."""
    from nsysan.output import refuse_overwrite

    refuse_overwrite(outputs, [*traces, ncu_csv])


def run_analysis(
    traces: tuple[Path, ...],
    ncu_csv: Path | None,
    settings: Any,
    nsys_path: Path | None = None,
    detail_tables: bool = False,
    meanwhile: Callable[[], None] | None = None,
) -> Any:
    """The analysis of ``traces``; ``meanwhile`` is called once they are read, before
    they are analysed (work to overlap with the analysis)."""
    from nsysan.analysis import analyze
    from nsysan.batch.inputs import expand_run, with_source_labels
    from nsysan.ingest import load_trace
    from nsysan.ingest.ncu import read_ncu_csv
    from nsysan.progress import phase

    ncu = read_ncu_csv(ncu_csv) if ncu_csv else None
    names = ", ".join(p.name for p in traces[:3]) + (" ..." if len(traces) > 3 else "")
    # A folder or archive given here holds the rank files of one run.
    with phase(f"reading {names}"), expand_run(traces) as (files, labels):
        # Grid and block sizes only serve the Nsight Compute join.
        # Big host tables stay in the table cache's files (nsysan.stored).
        trace = load_trace(
            files, launch_config=ncu is not None, nsys_path=nsys_path, store_host_tables=True
        )
        trace = with_source_labels(trace, labels)
    if meanwhile is not None:
        meanwhile()
    with phase(f"analysing {trace.kernels.height:,} kernels on {trace.gpu_count} GPU(s)"):
        analysis = analyze(trace, settings, ncu=ncu, ncu_path=ncu_csv, detail_tables=detail_tables)
    # A CSV of another program joins little of the trace: say so (the report does too).
    from nsysan.report.view import ncu_join_warning

    warning = ncu_join_warning(analysis)
    if warning:
        click.echo(f"nsysan: {warning[0]}", err=True)
    return analysis


@cli.command()
@trace_paths
@analysis_options
@nsys_option
@click.option(
    "--json", "as_json", is_flag=True, help="Print every result as JSON (docs/json-schema.md)."
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="Write the JSON to this file instead."
)
@click.option(
    "--detail",
    type=click.Choice(["summary", "full"]),
    default="summary",
    show_default=True,
    help="'full' adds the per-event tables (every gap, interval, collective instance).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["warning", "critical"]),
    help="Exit 4 when a finding of this severity or worse is present (a CI gate).",
)
def analyze(
    traces: tuple[Path, ...],
    ncu_csv: Path | None,
    nsys_path: Path | None,
    as_json: bool,
    output: Path | None,
    detail: str,
    fail_on: str | None,
    **options: Any,
) -> None:
    """Run every analysis on TRACES and print the results (JSON with --json).

    TRACES: export files, or a folder or archive holding one run's rank files.
    """
    from nsysan.report.document import analysis_document, render_summary_text
    from nsysan.report.jsonout import dumps

    refuse_overwrite_inputs([output], traces, ncu_csv)
    analysis = run_analysis(
        traces, ncu_csv, build_settings(**options), nsys_path, detail_tables=detail == "full"
    )
    document = analysis_document(analysis, detail)
    if output is not None:
        from nsysan.output import write_atomic

        write_atomic(output, dumps(document) + "\n")
        click.echo(f"wrote {output}")
    elif as_json:
        click.echo(dumps(document))
    else:
        click.echo(render_summary_text(document))
    if fail_on:
        from nsysan.diff.gates import findings_at_or_above

        hits = findings_at_or_above(document["findings"], fail_on)
        if hits:
            ids = ", ".join(f["rule_id"] for f in hits)
            click.echo(
                f"nsysan: gate: {len(hits)} finding(s) at {fail_on} or worse: {ids}", err=True
            )
            sys.exit(EXIT_GATE)


def _default_report_path(traces: tuple[Path, ...]) -> Path:
    stem = traces[0].stem if len(traces) == 1 else f"{traces[0].stem}-and-{len(traces) - 1}-more"
    return Path(f"{stem}-report.html")


@cli.command()
@trace_paths
@analysis_options
@nsys_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="HTML file to write (default: <trace>-report.html).",
)
@click.option(
    "--lang",
    type=click.Choice(["en", "zh"]),
    default="en",
    show_default=True,
    help="Report language.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    help="Also write the analysis JSON here.",
)
def report(
    traces: tuple[Path, ...],
    ncu_csv: Path | None,
    nsys_path: Path | None,
    output: Path | None,
    lang: str,
    json_path: Path | None,
    **options: Any,
) -> None:
    """Analyse TRACES and write one self-contained HTML report.

    Several files (one per rank or node), or a folder or archive of them, are one
    analysis on one timeline.
    """
    from nsysan.report import import_page_modules_meanwhile, write_report

    target = output or _default_report_path(traces)
    refuse_overwrite_inputs([target, json_path], traces, ncu_csv)
    analysis = run_analysis(
        traces,
        ncu_csv,
        build_settings(**options, lang=lang),
        nsys_path,
        meanwhile=import_page_modules_meanwhile,
    )
    from nsysan.progress import phase

    with phase(f"writing {target.name}"):
        headline = write_report(analysis, target, lang=lang, json_path=json_path)  # type: ignore[arg-type]
    click.echo(headline)
    click.echo(f"wrote {target}")


@cli.command()
@click.argument(
    "scenario",
    type=click.Choice(list(SCENARIOS)),
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), required=True, help="SQLite export to write."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--scale",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Multiplies the trace's length.",
)
@click.option(
    "--hostile-names",
    is_flag=True,
    help="Put <script> into a kernel name and an NVTX range (escaping tests).",
)
def simulate(scenario: str, output: Path, seed: int, scale: float, hostile_names: bool) -> None:
    """Write a synthetic Nsight Systems export of SCENARIO with known ground truth."""
    from nsysan.simulate import generate

    truth = generate(scenario, output, seed=seed, scale=scale, hostile_names=hostile_names)
    click.echo(
        f"wrote {output}" + (f" and {output.parent / truth.ncu_csv}" if truth.ncu_csv else "")
    )
    click.echo(f"intended top finding: {truth.top_finding or 'none (healthy control)'}")


@cli.command()
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("nsysan-demo"),
    show_default=True,
)
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)
def demo(out_dir: Path, lang: str) -> None:
    """Generate the seed chapter's case study (4×A100, false balance) and write its report."""
    from nsysan.analysis import analyze
    from nsysan.ingest import load_trace
    from nsysan.report import write_report
    from nsysan.settings import Settings
    from nsysan.simulate import generate

    out_dir.mkdir(parents=True, exist_ok=True)
    trace_path = out_dir / "case-study.sqlite"
    generate("case-study", trace_path, seed=0)
    analysis = analyze(load_trace([trace_path]), Settings(lang=lang))  # type: ignore[arg-type]
    target = out_dir / "case-study-report.html"
    headline = write_report(analysis, target, lang=lang, json_path=out_dir / "case-study.json")  # type: ignore[arg-type]
    click.echo(headline)
    click.echo(f"wrote {target}")


_DIFF_HELP = """Compare runs: BEFORE... --vs AFTER... (each side: one analysis JSON, or the
    export files, folder or archive of one run).

    Per GPU and overall before/after/delta of gap share, stagger, host-cause split, NCCL
    and transfer share and throughput; kernels added/removed/slower/faster; findings
    resolved/new/remaining. Gates (docs/diff.md#gates), e.g. --fail-if 'gap_share>+5pt'
    --fail-if 'throughput<-3%' --fail-if 'new_finding>=warning', exit 4 when one trips.
    """


def _diff_command(name: str, help_text: str, hidden: bool = False) -> Any:
    @cli.command(
        name=name,
        help=help_text,
        hidden=hidden,
        context_settings={"ignore_unknown_options": True},
    )
    @click.argument("runs", nargs=-1, required=True, type=click.UNPROCESSED)
    @click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
    @click.option(
        "-o", "--output", type=click.Path(path_type=Path), help="Also write an HTML diff page."
    )
    @click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)
    @click.option(
        "--fail-if", "gates", multiple=True, metavar="EXPR", help="A gate; exit 4 if it trips."
    )
    @click.option(
        "--strict",
        is_flag=True,
        help="Refuse plainly different programs or GPU counts; trip gates that cannot be evaluated.",
    )
    @click.option(
        "--top", type=click.IntRange(min=1), default=10, show_default=True, help="Kernels per list."
    )
    @nsys_option
    @trace_analysis_options
    def command(
        runs: tuple[str, ...],
        as_json: bool,
        output: Path | None,
        lang: str,
        gates: tuple[str, ...],
        strict: bool,
        top: int,
        nsys_path: Path | None,
        **options: Any,
    ) -> None:
        from nsysan.diff import diff_documents, load_run
        from nsysan.diff.text import render_text
        from nsysan.report.jsonout import dumps

        before_paths, after_paths = _split_runs(runs)
        refuse_overwrite_inputs([output], (*before_paths, *after_paths), None)
        # Settings apply to sides given as traces; an analysis JSON keeps its own.
        settings = build_settings(**options, lang=lang)
        before = load_run(before_paths, settings, nsys_path)
        after = load_run(after_paths, settings, nsys_path)
        result = diff_documents(
            before,
            after,
            before_paths=[str(p) for p in before_paths],
            after_paths=[str(p) for p in after_paths],
            gates=gates,
            top=top,
            strict=strict,
        )
        for warning in result["comparable"]["warnings"]:
            click.echo(f"nsysan: warning: {warning}", err=True)
        if output is not None:
            from nsysan.diff.html import write_diff_html

            write_diff_html(result, output, lang)  # type: ignore[arg-type]
        click.echo(dumps(result) if as_json else render_text(result))
        if output is not None and not as_json:
            click.echo(f"wrote {output}")
        tripped = [g["expression"] for g in result["gates"] if g["tripped"]]
        if tripped:
            click.echo(f"nsysan: gate tripped: {', '.join(tripped)}", err=True)
            sys.exit(EXIT_GATE)

    return command


def _split_runs(runs: tuple[str, ...]) -> tuple[list[Path], list[Path]]:
    """BEFORE... --vs AFTER..., or (the old ``compare`` form) exactly BEFORE AFTER."""
    unknown = [r for r in runs if r.startswith("-") and r != "--vs"]
    if unknown:
        raise click.UsageError(f"no such option: {unknown[0]}")
    if "--vs" in runs:
        i = runs.index("--vs")
        before, after = list(runs[:i]), list(runs[i + 1 :])
        if "--vs" in after:
            raise click.UsageError("--vs given twice")
    elif len(runs) == 2:
        before, after = [runs[0]], [runs[1]]
    else:
        raise click.UsageError("give BEFORE... --vs AFTER... (or exactly two runs)")
    if not before or not after:
        raise click.UsageError("each side needs at least one trace or analysis JSON")
    return [Path(p) for p in before], [Path(p) for p in after]


diff = _diff_command("diff", _DIFF_HELP)
compare = _diff_command("compare", "Alias of `nsysan diff`.\n\n" + _DIFF_HELP)


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Output folder.",
)
@click.option("--jobs", type=click.IntRange(min=1), help="Worker processes (default: CPU cores).")
@click.option(
    "--dask",
    "dask_address",
    metavar="ADDRESS",
    help="Run on this Dask scheduler (tcp://host:8786).",
)
@click.option(
    "--dask-scheduler-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Run on the Dask cluster of this scheduler file.",
)
@click.option("--no-group", is_flag=True, help="Analyse every file alone (no multi-rank grouping).")
@click.option("--force", is_flag=True, help="Redo traces whose results are up to date.")
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)
@nsys_option
@trace_analysis_options
def batch(
    inputs: tuple[Path, ...],
    out_dir: Path,
    jobs: int | None,
    dask_address: str | None,
    dask_scheduler_file: Path | None,
    no_group: bool,
    force: bool,
    lang: str,
    nsys_path: Path | None,
    **options: Any,
) -> None:
    """Analyse every trace under INPUTS (folders, .zip/.tar/.tar.gz archives, files) into OUTDIR.

    Per trace an HTML report and JSON; OUTDIR/index.html (sortable, filterable table),
    results.csv, results.parquet and results.json. Rank files of one run are analysed
    together. A re-run skips traces whose content and settings are unchanged. Exit 3
    when some traces failed (docs/batch.md). The analysis options apply to every trace;
    an Nsight Compute CSV named <stem>.ncu.csv next to an export is read with it.
    """
    from nsysan.batch.run import run_batch

    if dask_address and dask_scheduler_file:
        raise click.UsageError("give --dask or --dask-scheduler-file, not both")
    settings = build_settings(**options, lang=lang)
    summary = run_batch(
        list(inputs),
        out_dir,
        settings=settings,
        jobs=jobs or os.cpu_count() or 1,
        dask_address=dask_address,
        dask_scheduler_file=dask_scheduler_file,
        group=not no_group,
        force=force,
        nsys_path=nsys_path,
        echo=lambda line: click.echo(line, err=True),
    )
    click.echo(summary.text)
    if summary.failed:
        sys.exit(EXIT_SOME_FAILED)


def _on_signal(signum: int, frame: object) -> None:
    # Exit from the handler itself: an exception raised here could land inside a
    # finalizer or a library callback and be swallowed (the run went on and exited 0),
    # and unwinding would first wait for the reader threads.
    from nsysan.output import remove_temp_files

    remove_temp_files()
    code, word = SIGNAL_EXITS[signal.Signals(signum)]
    try:
        sys.stdout.flush()
    except Exception:  # a closed or broken stdout must not stop the exit
        pass
    os.write(2, f"nsysan: {word}\n".encode())
    os._exit(code)


@contextmanager
def _signals_exit_cleanly() -> Iterator[None]:
    """SIGINT/SIGTERM: remove temporary outputs, one line on stderr, exit 130/143."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (e.g. main() called from a thread)
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in SIGNAL_EXITS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``nsysan`` console script."""
    with _signals_exit_cleanly():
        _main(argv)


def _main(argv: list[str] | None) -> None:
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="nsysan", standalone_mode=False)
    except NsysanError as exc:
        if debug:
            raise
        click.echo(f"nsysan: error: {exc.message} (see docs/errors.md#{exc.slug})", err=True)
        sys.exit(EXIT_INPUT_ERROR)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):
            click.echo("nsysan: interrupted", err=True)
            sys.exit(130)
        click.echo("nsysan: aborted", err=True)
        sys.exit(EXIT_INPUT_ERROR)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("nsysan: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug, not bad input: still one line unless --debug
        if debug:
            raise
        click.echo(
            f"nsysan: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            err=True,
        )
        sys.exit(EXIT_INPUT_ERROR)
    sys.exit(EXIT_OK)

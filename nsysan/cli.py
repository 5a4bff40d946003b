"""The ``nsysan`` command line: a thin translator from options to library calls.

Errors on bad input are :class:`nsysan.errors.NsysanError`; they are caught once, in
:func:`main`, and printed as one line (exit 1). Usage errors are click's (exit 2).
Tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from nsysan import __version__
from nsysan.errors import NsysanError

EXIT_OK, EXIT_INPUT_ERROR, EXIT_USAGE = 0, 1, 2

trace_paths = click.argument(
    "traces", nargs=-1, required=True, type=click.Path(path_type=Path)
)


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, default=_json_default, ensure_ascii=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsysan")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Why is a multi-GPU job slower than it should be? Reads Nsight Systems SQLite exports."""
    ctx.obj = {"debug": debug}


@cli.command()
@trace_paths
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def info(traces: tuple[Path, ...], as_json: bool) -> None:
    """What TRACES hold: export version, GPUs, processes, span, table counts, what is missing.

    Several files (one per rank or node) are put on one timeline.
    """
    from nsysan.info import render_text, summarize
    from nsysan.ingest import load_trace

    summary = summarize(load_trace(list(traces)))
    click.echo(dump_json(summary) if as_json else render_text(summary))


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``nsysan`` console script."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="nsysan", standalone_mode=False)
    except NsysanError as exc:
        if debug:
            raise
        click.echo(f"nsysan: error: {exc.message} (see docs/errors.md#{exc.slug})", err=True)
        sys.exit(EXIT_INPUT_ERROR)
    except click.exceptions.Abort:
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
    sys.exit(EXIT_OK)

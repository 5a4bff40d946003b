"""The ``nsysan`` console script: the CLI, with a Ctrl-C while it loads ending quietly.

Loading polars, numba and the analyses takes about a second; an interrupt then would
otherwise print a traceback before :func:`nsysan.cli.main` could catch it.
"""

from __future__ import annotations

import sys

INTERRUPTED_EXIT = 130


def main() -> None:
    try:
        from nsysan.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("nsysan: interrupted\n")
        sys.exit(INTERRUPTED_EXIT)
    cli_main()

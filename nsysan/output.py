"""Atomic output: a reader never sees a half-written file.

The content goes to a temporary file in the target's own directory (same file
system), is flushed to disk, then renamed over the target with ``os.replace``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nsysan.errors import OutputError


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path written."""
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    directory = target.parent if str(target.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, target)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise OutputError(f"{target}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target

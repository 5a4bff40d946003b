"""Atomic output: a reader never sees a half-written file, and no input is ever overwritten.

The content goes to a temporary file in the target's own directory (same file
system), is flushed to disk, then renamed over the target with ``os.replace``.
Temporary files in flight are registered, so a signal handler can remove them
(:func:`remove_temp_files`) before the process exits.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from nsysan.errors import OutputError

# Temporary files being written right now; the CLI's signal handler removes them.
_IN_FLIGHT: set[str] = set()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _real(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


def refuse_overwrite(outputs: Iterable[Path | None], inputs: Iterable[Path | None]) -> None:
    """Raise :class:`OutputError` if an output is an input (or another output).

    Two paths are the same file when their real paths are equal or, for files that
    exist, when they share device and inode (hard links, bind mounts).
    """
    seen: list[tuple[Path, str, tuple[int, int] | None, str]] = []
    for path in inputs:
        if path is not None:
            seen.append((path, _real(path), _identity(path), "input"))
    for path in outputs:
        if path is None:
            continue
        real, ident = _real(path), _identity(path)
        for other, other_real, other_ident, role in seen:
            if real == other_real or (ident is not None and ident == other_ident):
                what = f"the {role} {other}" if str(other) != str(path) else f"an {role}"
                raise OutputError(f"{path}: is {what}; refusing to overwrite it")
        seen.append((path, real, ident, "output"))


@contextmanager
def in_flight(*names: str | Path) -> Iterator[None]:
    """Register temporary files for :func:`remove_temp_files` while the block runs."""
    keys = [str(n) for n in names]
    _IN_FLIGHT.update(keys)
    try:
        yield
    finally:
        _IN_FLIGHT.difference_update(keys)


def remove_temp_files() -> None:
    """Remove every temporary file still being written (called on SIGINT/SIGTERM)."""
    for name in list(_IN_FLIGHT):
        try:
            os.unlink(name)
        except OSError:
            pass
        _IN_FLIGHT.discard(name)


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
        with in_flight(tmp_name), os.fdopen(fd, "wb") as fh:
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

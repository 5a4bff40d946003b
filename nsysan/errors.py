"""Errors a user can act on.

Every error nsysan raises on bad input is an :class:`NsysanError` with a one-line
message and a slug that names its section in ``docs/errors.md``. The CLI catches
them in one place (``nsysan.cli.main``) and prints
``nsysan: error: <message> (see docs/errors.md#<slug>)`` with exit code 1.
"""

from __future__ import annotations


class NsysanError(Exception):
    """Base class: a problem with the user's input or settings, not a bug."""

    slug = "error"

    def __init__(self, message: str, *, slug: str | None = None) -> None:
        super().__init__(message)
        if slug is not None:
            self.slug = slug

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.slug


class InputNotFoundError(NsysanError):
    slug = "input-not-found"


class DuplicateInputError(NsysanError):
    slug = "duplicate-input"


class NotSqliteError(NsysanError):
    slug = "not-sqlite"


class TruncatedTraceError(NsysanError):
    slug = "truncated-trace"


class NotNsysExportError(NsysanError):
    slug = "not-nsys-export"


class UnfinishedWriteError(NsysanError):
    slug = "unfinished-write"


class EmptyTraceError(NsysanError):
    slug = "empty-trace"


class MissingColumnError(NsysanError):
    slug = "missing-column"


class NoGpuActivityError(NsysanError):
    slug = "no-gpu-activity"


class NcuCsvError(NsysanError):
    slug = "ncu-csv"


class SettingsError(NsysanError):
    slug = "settings"


class OutputError(NsysanError):
    slug = "output"


class NsysNotFoundError(NsysanError):
    slug = "nsys-not-found"


class NsysExportError(NsysanError):
    slug = "nsys-export"

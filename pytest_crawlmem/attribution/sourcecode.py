"""The keeping code of a leak read from the user's source file, for its fingerprint, and the installed versions of
libraries, for the known library leaks (crawl process).

The core hashes the code (``core/fingerprint.py``) and matches known leaks (``core/libleaks.py``) and reads no file;
this reads the code, relative to the crawl's working directory as the keeping line names it (``examples/spiders.py:40``),
and a distribution's metadata.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from pytest_crawlmem.core.fingerprint import KeepingCode, code_at


def read_source(file: str) -> str | None:
    """The text of a source file (``None`` when it cannot be read as UTF-8)."""
    try:
        return Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def read_keeping_code(location: str) -> KeepingCode | None:
    """The code at ``file:line`` of the user's source (``None`` when unreadable)."""
    return code_at(location, read_source)


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution (``scrapy`` -> ``2.19.0``; ``None`` when it is not installed)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None

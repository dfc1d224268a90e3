"""The ``samples.jsonl`` stream on disk, kept under a size budget by rotating to a compacted history (crawl process).

Records are appended one JSON object a line and flushed, so a killed crawl leaves its data. With
a budget, when the stream and its history together reach it, the whole crawl so far is written
(as the caller's bounded timeline holds it: every peak kept) to ``<path>.1`` atomically, and
``<path>`` restarts with the crawl's header. Readers (:mod:`pytest_crawlmem.reports.jsonl`) join the two
files when their headers name the same crawl. On disk: at most the budget.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any


def history_path(path: Path) -> Path:
    """Where the stream at ``path`` keeps its compacted history (``samples.jsonl.1``)."""
    return path.with_name(path.name + ".1")


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


class JsonlStream:
    """An append-only JSONL file with an optional size budget (0: unbounded). Not thread-safe: the caller locks."""

    def __init__(self, path: Path, max_bytes: int = 0) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.rotations = 0
        self.history_bytes = 0
        self._header: dict[str, Any] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.active_bytes = self._file.tell()

    @property
    def disk_bytes(self) -> int:
        """Bytes the stream holds on disk (its file and its history)."""
        return self.active_bytes + self.history_bytes

    def header(self, record: dict[str, Any]) -> None:
        """Write the crawl's header (kept, to start each rotated file with it)."""
        self._header = record
        self.write(record)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record and flush it; raises OSError/ValueError (the caller decides what a full disk means)."""
        text = _line(record)
        self._file.write(text)
        self._file.flush()
        self.active_bytes += len(text.encode("utf-8")) if not text.isascii() else len(text)

    def over_budget(self) -> bool:
        """Whether the stream reached its budget and should be rotated."""
        return bool(self.max_bytes) and self.disk_bytes >= self.max_bytes

    def rotate(self, history: Iterable[dict[str, Any]]) -> None:
        """Replace ``<path>.1`` with ``history`` (the whole crawl so far) and restart ``<path>`` with the header."""
        target = history_path(self.path)
        tmp = target.with_name(target.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(_line({**self._header, "segment": "history"}))
            for record in history:
                out.write(_line(record))
            out.flush()
            size = out.tell()
        os.replace(tmp, target)  # a crash before this line keeps the old history; after it, the reader drops duplicates
        self.history_bytes = size
        self._file.close()
        self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.active_bytes = 0
        self.rotations += 1
        self.write({**self._header, "segment": "active"})

    def close(self) -> None:
        """Close the file."""
        self._file.close()

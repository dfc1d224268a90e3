"""The crawl's measurements as they accumulate, and their ``samples.jsonl`` stream (crawl process)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any

from .models import Checkpoint, Sample


class Recording:
    """Samples and checkpoints of one crawl, appended to a JSONL file as they are taken.

    Thread-safe: the sampler thread and the reactor thread both append.
    """

    def __init__(self, jsonl_path: Path | None = None) -> None:
        self.samples: list[Sample] = []
        self.checkpoints: list[Checkpoint] = []
        self.errors: list[str] = []
        self.jsonl_path = jsonl_path
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        if jsonl_path is not None:
            jsonl_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(jsonl_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._file.flush()
        except (OSError, ValueError) as exc:  # a full disk must not stop the crawl
            self.errors.append(f"could not write {self.jsonl_path}: {exc}")
            self._file = None

    def header(self, **fields: Any) -> None:
        """Write the stream's first line: what crawl this is."""
        with self._lock:
            self._write({"kind": "header", **fields})

    def add_sample(self, sample: Sample) -> None:
        """Keep a periodic sample and stream it."""
        with self._lock:
            self.samples.append(sample)
            self._write({"kind": "sample", **sample.to_json()})

    def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep a drained checkpoint and stream it."""
        with self._lock:
            self.checkpoints.append(checkpoint)
            self._write({"kind": "checkpoint", **checkpoint.to_json()})

    def add_error(self, message: str) -> None:
        """Note a problem of the measurement itself (a probe that failed, a file not written)."""
        with self._lock:
            self.errors.append(message)
            self._write({"kind": "error", "message": message})

    def close(self) -> None:
        """Close the stream; samples stay in memory."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

"""The crawl's measurements as they accumulate, and their ``samples.jsonl`` stream (crawl process)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.models import Checkpoint, Sample
from pytest_crawlmem.core.timeline import Timeline
from pytest_crawlmem.probes.stream import JsonlStream

#: Errors kept in memory (the first ones; later ones are counted, and still streamed).
MAX_ERRORS = 100


class Recording:
    """Samples and checkpoints of one crawl, appended to a JSONL file as they are taken.

    Thread-safe: the sampler thread and the reactor thread both append. ``max_samples``,
    ``max_checkpoints`` and ``max_bytes`` bound memory and disk (0: unbounded, as in tests of
    short crawls); see :mod:`pytest_crawlmem.core.timeline` and :mod:`pytest_crawlmem.probes.stream`.
    """

    def __init__(
        self, jsonl_path: Path | None = None, *, max_samples: int = 0, max_checkpoints: int = 0, max_bytes: int = 0
    ) -> None:
        self.timeline = Timeline(max_samples, max_checkpoints)
        self.errors: list[str] = []
        self.errors_dropped = 0
        self.jsonl_path = jsonl_path
        self.last_sample: Sample | None = None  # the newest raw sample (the timeline's last one may be merged)
        self.peak_rss_bytes = 0  # the highest sampled RSS
        self.checkpoint_pause_total_seconds = 0.0
        self.checkpoint_pause_max_seconds = 0.0
        self._last_pause_seconds = 0.0  # the pause of the last checkpoint, with what the plugin did after reading it
        self._lock = threading.Lock()
        self._stream: JsonlStream | None = None
        self._closed = (0, 0)  # the stream's bytes and rotations when it was closed
        if jsonl_path is not None:
            self._stream = JsonlStream(jsonl_path, max_bytes)

    @property
    def samples(self) -> list[Sample]:
        """The kept samples (a copy; thinned once a long crawl reaches ``max_samples``)."""
        with self._lock:
            return self.timeline.samples()

    @property
    def checkpoints(self) -> list[Checkpoint]:
        """The kept checkpoints, in the order taken."""
        return self.timeline.checkpoints

    @property
    def stream_bytes(self) -> int:
        """Bytes of the stream on disk (0 without one; the last figure once closed)."""
        return self._stream.disk_bytes if self._stream is not None else self._closed[0]

    @property
    def stream_rotations(self) -> int:
        """How many times the stream was rotated to its history."""
        return self._stream.rotations if self._stream is not None else self._closed[1]

    def _write(self, record: dict[str, Any], *, header: bool = False) -> None:
        if self._stream is None:
            return
        try:
            if header:
                self._stream.header(record)
            else:
                self._stream.write(record)
            if self._stream.over_budget():
                self._stream.rotate(self._history())
        except (OSError, ValueError) as exc:  # a full disk must not stop the crawl
            self._note(f"could not write {self.jsonl_path}: {exc}")
            self._close_stream()

    def _history(self) -> Iterator[dict[str, Any]]:
        """The whole crawl so far as records (the bounded timeline's samples, the kept checkpoints), one at a time."""
        for sample in self.timeline.samples():
            yield {"kind": "sample", **sample.to_json()}
        for checkpoint in self.timeline.checkpoints:
            yield {"kind": "checkpoint", **checkpoint.to_json()}

    def header(self, **fields: Any) -> None:
        """Write the stream's first line: what crawl this is."""
        with self._lock:
            self._write({"kind": "header", **fields}, header=True)

    def add_sample(self, sample: Sample) -> None:
        """Keep a periodic sample and stream it."""
        with self._lock:
            self.timeline.add(sample)
            self.last_sample = sample
            self.peak_rss_bytes = max(self.peak_rss_bytes, sample.rss_bytes)
            self._write({"kind": "sample", **sample.to_json()})

    def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep a drained checkpoint, count the pause it cost the crawl, and stream it."""
        with self._lock:
            self.timeline.add_checkpoint(checkpoint)
            self.checkpoint_pause_total_seconds += checkpoint.cost_seconds
            self.checkpoint_pause_max_seconds = max(self.checkpoint_pause_max_seconds, checkpoint.cost_seconds)
            self._last_pause_seconds = checkpoint.cost_seconds
            self._write({"kind": "checkpoint", **checkpoint.to_json()})

    def add_pause(self, seconds: float, *, after_checkpoint: bool = True) -> None:
        """Count more of a pause: what the plugin did after reading the last checkpoint (its attribution), before the
        engine resumed, or a pause of its own (``after_checkpoint=False``)."""
        with self._lock:
            self._last_pause_seconds = (self._last_pause_seconds if after_checkpoint else 0.0) + seconds
            self.checkpoint_pause_total_seconds += seconds
            self.checkpoint_pause_max_seconds = max(self.checkpoint_pause_max_seconds, self._last_pause_seconds)

    def add_error(self, message: str) -> None:
        """Note a problem of the measurement itself (a probe that failed, a file not written)."""
        with self._lock:
            self._note(message)
            self._write({"kind": "error", "message": message})

    def add_stop(self, reason: str, message: str) -> None:
        """Note that the harness is stopping the crawl: ``reason`` (a ``stops`` name) as data, and why."""
        with self._lock:
            self._note(f"stopped: {message}")
            self._write({"kind": "error", "message": f"stopped: {message}"})
            self._write({"kind": "stop", "reason": reason, "message": message})

    def add_finish(self, reason: str, **fields: Any) -> None:
        """Stream how the crawl ended: Scrapy's finish reason and what only the end knows (growth sites, the browser)."""
        with self._lock:
            self._write({"kind": "finish", "reason": reason, **fields})

    def _note(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)
        else:
            self.errors_dropped += 1

    def close(self) -> None:
        """Close the stream; samples stay in memory."""
        with self._lock:
            if self.errors_dropped:
                self.errors.append(f"... and {self.errors_dropped:,} more errors (in the stream, if one was written)")
                self.errors_dropped = 0
            self._close_stream()

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._closed = (self._stream.disk_bytes, self._stream.rotations)
            stream, self._stream = self._stream, None
            with contextlib.suppress(OSError, ValueError):  # a full disk can fail the last flush too
                stream.close()

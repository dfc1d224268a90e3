"""Reads ``samples.jsonl`` back, tolerating what a killed crawl leaves behind (any process, no Scrapy).

The extension appends one JSON object per line and flushes it, so a crawl killed mid-write
leaves a cut-off last line; a disk that filled up can leave garbage in the middle. Reading
never raises on content: every line that cannot be used becomes a problem naming its
line number, and the rest is kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard

from pytest_crawlmem.core.models import Checkpoint

MAX_PROBLEMS = 20
#: Largest figure accepted (8 PiB, 2**53: exact as a float); anything above is garbage, not a measurement.
MAX_FIGURE = 2**53

#: Fields a record must have (as finite numbers) to be plotted or judged.
_REQUIRED = {
    "sample": ("t_seconds", "responses", "items", "rss_bytes"),
    "checkpoint": ("responses", "t_seconds", "rss_bytes", "scheduled"),
}
#: Fields that may be a number or null.
_OPTIONAL_NUMBERS = {
    "sample": ("traced_bytes", "scheduled", "inflight", "slot_queued", "active_size_bytes", "span"),
    "checkpoint": ("heap_bytes", "traced_bytes", "allocated_blocks", "tracer_bytes", "cost_seconds"),
}


class SamplesFile(NamedTuple):
    """What ``samples.jsonl`` held: the crawl's header, its samples and checkpoints, and what could not be read."""

    header: dict[str, Any]
    samples: list[dict[str, Any]]
    checkpoints: list[dict[str, Any]]
    problems: list[str]


def is_number(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a finite int or float (not a bool)."""
    kind = type(value)
    if kind is int:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _figure(value: object) -> bool:
    return is_number(value) and 0 <= value <= MAX_FIGURE


def _invalid(kind: str, record: Mapping[str, Any]) -> str:
    """Return why a sample or checkpoint record cannot be used ('' when it can)."""
    missing, wrong, absurd = [], [], []
    for name in _REQUIRED[kind]:
        value = record.get(name)
        if not is_number(value):
            missing.append(name)
        elif not 0 <= value <= MAX_FIGURE:
            absurd.append(name)
    for name in _OPTIONAL_NUMBERS[kind]:
        value = record.get(name)
        if value is None:
            continue
        if not is_number(value):
            wrong.append(name)
        elif not 0 <= value <= MAX_FIGURE:
            absurd.append(name)
    if missing:
        return f"{kind} without a number for {', '.join(missing)}"
    if wrong:
        return f"{kind} with a non-number {', '.join(wrong)}"
    if absurd:
        return f"{kind} with {', '.join(absurd)} out of range (0 to 2**53)"
    if kind == "sample" and record.get("backout") not in (None, True, False):
        return "sample with a non-boolean backout"
    refs = record.get("live_refs", {})
    if kind == "checkpoint" and not (
        isinstance(refs, dict) and all(_figure(v) for v in refs.values())
    ):
        return "checkpoint with live_refs that are not counts by class name"
    return ""


def _parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """Return the record of one line, or None and why it is unusable."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except ValueError as exc:
        return None, f"not valid JSON ({getattr(exc, 'msg', exc)})"
    except RecursionError:
        return None, "JSON nested too deeply"
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not an object"
    return record, ""


def read_samples_jsonl(path: Path) -> SamplesFile:
    """Read a ``samples.jsonl`` stream; unusable lines become problems, never exceptions.

    When several crawls were appended to one file (a production crawl run again with the
    same ``CRAWLMEM_JSONL``), the last crawl is returned and the others are named in the
    problems. A stream rotated under its size budget (``CRAWLMEM_JSONL_MAX_BYTES``) is read
    with its history ``<path>.1`` when both name the same crawl. Raises only ``OSError`` when
    the file cannot be read at all.
    """
    current = _read_one(Path(path))
    history = Path(path).with_name(Path(path).name + ".1")
    if not history.is_file():
        return current
    try:
        older = _read_one(history)
    except OSError as exc:
        return current._replace(problems=[*current.problems, f"{history.name}: cannot be read ({exc.strerror or exc})"])
    return join_rotated(older, current, history.name)


def join_rotated(history: SamplesFile, current: SamplesFile, history_name: str = "history") -> SamplesFile:
    """The crawl of ``current`` with the records its ``history`` holds from before the rotation.

    A history of another crawl is ignored; records of the current file that the history also holds
    (a crash between writing the history and restarting the file) are kept once.
    """
    crawl = current.header.get("crawl_id")
    if not crawl or history.header.get("crawl_id") != crawl:
        return current
    last_sample = max((s["t_seconds"] for s in history.samples), default=-1.0)
    last_checkpoint = max((c["t_seconds"] for c in history.checkpoints), default=-1.0)
    header = {k: v for k, v in current.header.items() if k != "segment"}
    return SamplesFile(
        header,
        history.samples + [s for s in current.samples if s["t_seconds"] > last_sample],
        history.checkpoints + [c for c in current.checkpoints if c["t_seconds"] > last_checkpoint],
        [f"{history_name}: {p}" for p in history.problems] + current.problems,
    )


def _read_one(path: Path) -> SamplesFile:
    """Read one file of a stream (see :func:`read_samples_jsonl`)."""
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    cut_off = not data.endswith(b"\n")
    if not cut_off:
        lines.pop()  # the empty string after the final newline
    header: dict[str, Any] = {}
    samples: list[dict[str, Any]] = []
    checkpoints: list[dict[str, Any]] = []
    problems: list[str] = []
    bad = 0
    crawls: list[int] = []

    def problem(text: str) -> None:
        nonlocal bad
        bad += 1
        if bad <= MAX_PROBLEMS:
            problems.append(text)

    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        record, why = _parse_line(raw)
        if record is None:
            if cut_off and number == len(lines):
                problem(f"line {number}: cut off ({why}); the crawl was probably killed while writing it")
            else:
                problem(f"line {number}: {why}")
            continue
        kind = record.pop("kind", None)
        if kind == "header":
            crawls.append(number)
            header, samples, checkpoints = record, [], []
        elif kind in ("sample", "checkpoint"):
            why = _invalid(kind, record)
            if why:
                problem(f"line {number}: {why}")
            else:
                (samples if kind == "sample" else checkpoints).append(record)
        elif kind == "error":
            problem(f"line {number}: the crawl recorded an error: {record.get('message', '')}")
        elif not isinstance(kind, str):
            problem(f"line {number}: a record with no kind")
        # other kinds are newer records this version does not know: skipped
    if bad > MAX_PROBLEMS:
        problems.append(f"... and {bad - MAX_PROBLEMS:,} more unusable lines")
    if len(crawls) > 1:
        problems.insert(0, f"{len(crawls)} crawls were appended to this file; only the last one (from line {crawls[-1]}) is read")
    return SamplesFile(header, samples, checkpoints, problems)


def read_stop(path: Path) -> dict[str, Any] | None:
    """The harness's stop streamed by the crawl's last run in ``path``: ``reason`` (a stops name) and ``message``.

    ``None`` when the crawl was not stopped by the harness (or the file cannot be read). Lines that are not
    JSON are skipped, as :func:`read_samples_jsonl` does; a later header starts the crawl over.
    """
    records = _records(path)
    if records is None:
        return None
    stop: dict[str, Any] | None = None
    for record in records:
        if record.get("kind") == "header":
            stop = None
        elif record.get("kind") == "stop" and stop is None:
            stop = {"reason": str(record.get("reason") or ""), "message": str(record.get("message") or "")}
    return stop


def read_finish(path: Path) -> dict[str, Any] | None:
    """How the crawl's last run in ``path`` ended, from its ``finish`` record: ``reason`` (Scrapy's finish reason),
    ``growth_sites`` and ``browser`` (as ``to_json`` wrote them). ``None`` when the crawl never finished (killed, or
    still running) or the file cannot be read; a later header starts the crawl over."""
    records = _records(path)
    if records is None:
        return None
    finish: dict[str, Any] | None = None
    for record in records:
        if record.get("kind") == "header":
            finish = None
        elif record.get("kind") == "finish":
            finish = dict(record)
    return finish


def _records(path: Path) -> list[dict[str, Any]] | None:
    """The JSON records of ``path`` in order, lines that are not JSON skipped; ``None`` when it cannot be read."""
    try:
        lines = Path(path).read_bytes().split(b"\n")
    except OSError:
        return None
    parsed = (_parse_line(raw)[0] for raw in lines if raw.strip())
    return [record for record in parsed if record is not None]


def checkpoint_from_json(record: Mapping[str, Any]) -> Checkpoint:
    """Build a :class:`Checkpoint` from a record read by :func:`read_samples_jsonl` (unknown keys ignored)."""
    return Checkpoint.from_json(record)

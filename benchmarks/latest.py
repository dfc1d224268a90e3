"""One latest-results file per benchmark: ``benchmarks/results/<benchmark>.json``.

A benchmark's file holds the latest run of each of its *parts* (a grid shard, a clean set, a repeat of a
mode), each with when and how it was run, the machine and its load, and the run's own summary with the raw
runs summarised (counts, medians, intervals). The raw per-run records are not kept: git history has the
earlier files, and a benchmark's ``--json PATH`` option still writes everything to a path of your choosing.

The shape (``format`` 1)::

    {"benchmark": "detection", "format": 1,
     "parts": {"clean": {"written": "2026-12-06", "command": "python benchmarks/detection.py ...",
                         "machine": {"cpu_count": 2, "python": "3.11.7", ..., "load_average": [3.1, 2.9, 2.5]},
                         "summary": {...}}}}

``python -m pytest_crawlmem.docgen`` renders the docs' figures tables from these files.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
FORMAT = 1
#: Keys whose value is a list of raw per-run (or per-sample) records: summarised, not kept.
RAW_KEYS = {"runs", "before_runs", "raw", "crawls", "checkpoints", "traces", "samples", "rows_raw", "stability_runs"}


def machine() -> dict[str, Any]:
    """The machine and its load now (the fields a latest-results part records)."""
    return {"cpu_count": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def _median_and_interval(values: list[float]) -> dict[str, Any]:
    return {"count": len(values), "median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4)}


def summarise_records(records: list[Any]) -> dict[str, Any]:
    """A list of raw records as counts, medians and intervals of their numeric fields, counts of short labels."""
    summary: dict[str, Any] = {"count": len(records)}
    if not records or not all(isinstance(r, dict) for r in records):
        numbers = [r for r in records if isinstance(r, (int, float)) and not isinstance(r, bool)]
        if numbers and len(numbers) == len(records):
            summary.update(_median_and_interval([float(n) for n in numbers]))
        return summary
    numeric: dict[str, list[float]] = {}
    labels: dict[str, dict[str, int]] = {}
    for record in records:
        for key, value in record.items():
            if isinstance(value, bool):
                labels.setdefault(key, {}).setdefault(str(value).lower(), 0)
                labels[key][str(value).lower()] += 1
            elif isinstance(value, (int, float)):
                numeric.setdefault(key, []).append(float(value))
            elif isinstance(value, str) and len(value) <= 40:
                labels.setdefault(key, {}).setdefault(value, 0)
                labels[key][value] += 1
    if numeric:
        summary["fields"] = {key: _median_and_interval(values) for key, values in numeric.items()}
    kept = {key: counts for key, counts in labels.items() if len(counts) <= 6}
    if kept:
        summary["labels"] = kept
    return summary


def summarise(document: Any, key: str = "", raw: bool = False) -> Any:
    """``document`` with every raw list of runs (``RAW_KEYS``, or lists inside a ``RAW_KEYS`` dict) summarised and
    long number lists reduced."""
    if isinstance(document, dict):
        return {k: summarise(v, k, raw or key in RAW_KEYS) for k, v in document.items() if k != "markdown"}
    if isinstance(document, list):
        if key in RAW_KEYS or raw:
            return summarise_records(document)
        if len(document) > 12 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in document):
            return _median_and_interval([float(v) for v in document])
        if len(document) > 12 and all(isinstance(v, dict) for v in document):
            return summarise_records(document)
        return [summarise(v) for v in document]
    if isinstance(document, str) and len(document) > 600:
        return document[:600] + "..."
    return document


def save(benchmark: str, part: str, document: dict[str, Any], *, command: str | None = None,
         machine_info: dict[str, Any] | None = None, written: str | None = None,
         results: Path = RESULTS) -> Path:
    """Write ``document`` (summarised) as the latest ``part`` of ``benchmark``'s results file; the other parts stay."""
    path = results / f"{benchmark}.json"
    current: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if current.get("format") != FORMAT:
        current = {}
    parts = current.get("parts", {})
    info = dict(machine_info or document.get("machine") or machine())
    parts[part] = {"written": written or datetime.date.today().isoformat(),
                   "command": command or "python " + " ".join(["benchmarks/" + Path(sys.argv[0]).name, *sys.argv[1:]]),
                   "machine": info, "summary": summarise({k: v for k, v in document.items() if k != "machine"})}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": benchmark, "format": FORMAT, "parts": dict(sorted(parts.items()))},
                               indent=1) + "\n")
    return path

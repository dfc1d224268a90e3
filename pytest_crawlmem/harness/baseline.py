"""Saved runs and regression checks against them (pure: no pytest, no Scrapy; pytest process or xdist worker).

A baseline is ``<report dir>/baselines/<machine fingerprint hash>/NAME.json``: a header (format
version, machine, versions, commit) and, per test id, the figures of its last runs. A new run is
compared figure by figure to the median of those runs, with a tolerance per figure.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.models import CrawlResult, json_value
from pytest_crawlmem.core.sites import named_line
from pytest_crawlmem.core.tolerances import (
    DEFAULT_TOLERANCES as DEFAULT_TOLERANCES,  # the tolerances API, re-exported where it was
)
from pytest_crawlmem.core.tolerances import FIGURES as FIGURES
from pytest_crawlmem.core.tolerances import Tolerance as Tolerance
from pytest_crawlmem.core.tolerances import merge_tolerances as merge_tolerances
from pytest_crawlmem.core.tolerances import parse_compare_fail as parse_compare_fail
from pytest_crawlmem.core.tolerances import parse_tolerance as parse_tolerance
from pytest_crawlmem.core.tolerances import parse_tolerances as parse_tolerances
from pytest_crawlmem.core.units import format_size
from pytest_crawlmem.reports.report import interpreter

BASELINE_SCHEMA_VERSION = 1
KEEP_RUNS = 20  # runs kept per test: the newest win
BASELINES_DIR = "baselines"


class BaselineError(ValueError):
    """A baseline file or tolerance that cannot be used; the message names the file or the value's source."""


# -- figures of a run -------------------------------------------------------------------------------


def run_figures(result: CrawlResult, *, outcome: str = "", commit: str | None = None) -> dict[str, Any]:
    """The figures of one crawl kept in a baseline (bytes, seconds, counts)."""
    per = result.growth.per_response_bytes
    return {
        "peak_rss": result.peak_rss,
        "start_rss": result.start_rss,
        "peak_rss_above_start": result.peak_rss_above_start,
        "isolated": result.isolated,
        "earlier_crawls": result.earlier_crawls,
        "rss_growth": result.rss_growth,
        "traced_peak": result.traced_peak,
        "leak_per_response": json_value(None if per is None else round(per, 1)),
        "responses": result.responses,
        "items": result.items_scraped,
        "duration_seconds": round(result.duration_seconds, 3),
        "verdict": result.verdict,
        "leak_fingerprint": result.leak_fingerprint,  # None unless the verdict is a leak (core/fingerprint.py)
        "leak_where": named_line(result.top_growth, result.holders) if result.leak_fingerprint else None,
        # a known library leak's line (core/libleaks.py): crawlmem diff --new-leaks lists it apart
        "known_leak": result.growth.known_leak.describe() if result.growth.known_leak is not None else None,
        "interpreter": interpreter(),  # a comparison across interpreters is not judged (core/interpreter.py)
        "outcome": outcome,
        "commit": commit,
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def run_key(test_id: str, index: int) -> str:
    """The baseline key of the ``index``-th crawl (from 1) of a test: its id, then ``id [crawl 2]``, ..."""
    return test_id if index == 1 else f"{test_id} [crawl {index}]"


# -- machine and commit -----------------------------------------------------------------------------


def _total_memory_gib() -> int | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3)
    except (ValueError, OSError, AttributeError):
        return None


def machine_fingerprint() -> dict[str, Any]:
    """What must match for two runs' memory figures to be comparable."""
    libc, libc_version = platform.libc_ver()
    return {
        "machine": platform.machine(),
        "system": platform.system(),
        "python": f"{sys.implementation.name} {platform.python_version()}",
        "cpu_count": os.cpu_count(),
        "memory_gib": _total_memory_gib(),
        "libc": f"{libc} {libc_version}".strip(),
    }


def fingerprint_hash(fingerprint: Mapping[str, Any]) -> str:
    """A short stable hash of a fingerprint: the directory the machine's baselines live in."""
    canonical = json.dumps(dict(fingerprint), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def fingerprint_differences(saved: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """``cpu_count 8 in the baseline, 2 here`` for each fingerprint key that differs."""
    return [
        f"{key} {saved.get(key)!r} in the baseline, {here.get(key)!r} here"
        for key in sorted(set(saved) | set(here))
        if saved.get(key) != here.get(key)
    ]


def commit_info(cwd: Path) -> dict[str, Any]:
    """``{"id": HEAD or None, "dirty": bool or None}`` from git; tolerates a missing git or repository."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout

    head = git("rev-parse", "HEAD")
    if head is None:
        return {"id": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"id": head.strip(), "dirty": None if status is None else bool(status.strip())}


# -- the file ---------------------------------------------------------------------------------------


@dataclass
class Baseline:
    """A loaded baseline file: header and runs per test id."""

    path: Path
    fingerprint: dict[str, Any]
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    header: dict[str, Any] = field(default_factory=dict)


def baseline_path(report_root: Path, name: str, fingerprint: Mapping[str, Any], *, directory: Path | None = None) -> Path:
    """``<report root>/baselines/<fingerprint hash>/NAME.json`` (``directory`` instead of ``<report root>/baselines``)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name.startswith("."):
        raise BaselineError(f"invalid baseline name {name!r}: use letters, digits, '.', '_' and '-'")
    return (directory or report_root / BASELINES_DIR) / fingerprint_hash(fingerprint) / f"{name}.json"


def _upgrade(document: dict[str, Any], path: Path) -> dict[str, Any]:
    """Bring an older document to the current format, or refuse it with a message."""
    version = document.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BaselineError(f"baseline {path} has no valid schema_version: it is not a pytest-crawlmem baseline")
    if version > BASELINE_SCHEMA_VERSION:
        raise BaselineError(
            f"baseline {path} has schema_version {version}, newer than this pytest-crawlmem reads"
            f" ({BASELINE_SCHEMA_VERSION}): upgrade pytest-crawlmem, or save a new baseline under another name"
        )
    if version < 1:
        raise BaselineError(f"baseline {path} has schema_version {version}, which no release wrote: save it again")
    return document  # version 1 is the first format: nothing to upgrade yet


def parse_document(text: str, path: Path) -> Baseline:
    """Parse a baseline file's text; raise :class:`BaselineError` naming ``path`` when it is not usable."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline {path} is not valid JSON ({exc}): delete it or save it again") from None
    if not isinstance(document, dict):
        raise BaselineError(f"baseline {path} is not a JSON object: it is not a pytest-crawlmem baseline")
    document = _upgrade(document, path)
    tests = document.get("tests")
    if not isinstance(tests, dict) or not all(
        isinstance(runs, list) and all(isinstance(r, dict) for r in runs) for runs in tests.values()
    ):
        raise BaselineError(f"baseline {path} has no valid 'tests' table (test id -> list of runs)")
    header = {k: v for k, v in document.items() if k != "tests"}
    fingerprint = document.get("fingerprint")
    return Baseline(path, dict(fingerprint) if isinstance(fingerprint, dict) else {}, tests, header)


def load_baseline(path: Path) -> Baseline:
    """Read a baseline file; a missing, corrupt or too new file is a :class:`BaselineError` naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise BaselineError(f"baseline {path} does not exist: save one first with --crawlmem-save NAME") from exc
    except OSError as exc:
        raise BaselineError(f"baseline {path} cannot be read: {exc}") from None
    return parse_document(text, path)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path``'s lock file (``NAME.json.lock``), across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def write_json_atomic(path: Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` through a unique temporary file and ``os.replace``: readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=1, sort_keys=False)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_runs(
    path: Path,
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    header: Mapping[str, Any],
    *,
    keep: int = KEEP_RUNS,
) -> Baseline:
    """Append ``runs`` (test id -> runs) to the baseline at ``path`` under its lock, keeping the newest ``keep`` per test.

    Safe with concurrent writers (xdist workers, parallel sessions): each reads, merges and
    replaces the file while it holds the lock, so no writer's runs are lost.
    """
    with locked(path):
        existing = load_baseline(path) if path.exists() else None
        merged: dict[str, list[dict[str, Any]]] = {k: list(v) for k, v in existing.runs.items()} if existing else {}
        for test_id, new in runs.items():
            merged[test_id] = (merged.get(test_id, []) + [dict(r) for r in new])[-keep:]
        created = existing.header.get("created") if existing else None
        document: dict[str, Any] = {
            "schema_version": BASELINE_SCHEMA_VERSION,
            **{k: v for k, v in header.items() if k != "schema_version"},
            "created": created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tests": dict(sorted(merged.items())),
        }
        write_json_atomic(path, document)
    return parse_document(json.dumps(document), path)


def new_header(
    name: str, *, fingerprint: Mapping[str, Any], environment: Mapping[str, Any], commit: Mapping[str, Any]
) -> dict[str, Any]:
    """The header of a baseline file written now (the newest writer's machine, versions and commit)."""
    return {
        "name": name,
        "fingerprint": dict(fingerprint),
        "fingerprint_hash": fingerprint_hash(fingerprint),
        "environment": dict(environment),
        "commit": dict(commit),
    }


def find_baseline(
    report_root: Path, name_or_path: str, here: Mapping[str, Any], *, directory: Path | None = None
) -> tuple[Baseline, list[str]]:
    """Load the baseline to compare against, and the fingerprint differences to warn about.

    A NAME is looked up for this machine only; a baseline of another machine is used only
    when given as a path (``.../NAME.json``), with a warning naming what differs.
    """
    if name_or_path.endswith(".json") or os.sep in name_or_path:
        baseline = load_baseline(Path(name_or_path))
        return baseline, fingerprint_differences(baseline.fingerprint, here)
    path = baseline_path(report_root, name_or_path, here, directory=directory)
    if not path.exists():
        others = sorted((directory or report_root / BASELINES_DIR).glob(f"*/{name_or_path}.json"))
        elsewhere = ""
        if others:
            diffs = []
            for other in others:
                try:
                    diffs.append(f"{other} ({'; '.join(fingerprint_differences(load_baseline(other).fingerprint, here))})")
                except BaselineError as exc:
                    diffs.append(f"{other} (unreadable: {exc})")
            elsewhere = (
                "; baselines of that name were saved on other machines: " + ", ".join(diffs)
                + "; pass one's path to --crawlmem-compare to compare anyway"
            )
        raise BaselineError(f"baseline {path} does not exist: save one first with --crawlmem-save {name_or_path}{elsewhere}")
    return load_baseline(path), []


# -- comparison -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One figure beyond its tolerance from the baseline median: a regression (fails) or an improvement (a note).

    ``peak_rss`` is compared above each crawl's start RSS when both sides know it (``start`` and ``baseline_start``
    are then this crawl's start and the baseline's median start): earlier tests in the process do not move it.
    """

    figure: str
    value: float
    median: float
    low: float
    high: float
    runs: int
    tolerance: Tolerance
    regressed: bool
    start: float | None = None
    baseline_start: float | None = None

    def message(self) -> str:
        """One sentence with the new value, the baseline median, its spread and the tolerance."""
        spread = _span(self.figure, self.low, self.high)
        runs = "in 1 run" if self.runs == 1 else f"over {self.runs} runs"
        value, median = _fmt(self.figure, self.value), _fmt(self.figure, self.median)
        if self.start is not None and self.baseline_start is not None:
            value = f"{value} above its start (from {format_size(self.start)} to {format_size(self.start + self.value)})"
            median = f"{median} above the start (their start {format_size(self.baseline_start)}"
            spread = f"; {spread}"
        else:
            spread = f" ({spread}"
        head = (
            f"{self.figure} {'regressed' if self.regressed else 'improved'}: {value} against a"
            f" baseline median of {median}{spread} {runs})"
        )
        if self.regressed:
            return f"{head}, over the tolerance {self.tolerance.describe()}"
        return f"{head}, beyond the tolerance -{self.tolerance.describe()[1:]}: the baseline may be stale"


def _fmt(figure: str, value: float) -> str:
    kind = FIGURES[figure]
    if kind == "size":
        return format_size(value) + ("/response" if figure == "leak_per_response" else "")
    return f"{value:.1f} s" if kind == "seconds" else f"{value:,.0f}"


def _span(figure: str, low: float, high: float) -> str:
    """``105.1 to 114.0 MiB`` when both ends share a unit, else ``900 B to 1.2 KiB`` (a hyphen would read as a minus)."""
    if FIGURES[figure] == "size":
        a, b = format_size(low), format_size(high)
        if a == b:
            return a
        unit_a, unit_b = a.rsplit(" ", 1)[1], b.rsplit(" ", 1)[1]
        return f"{a.rsplit(' ', 1)[0]} to {b}" if unit_a == unit_b else f"{a} to {b}"
    a, b = (_fmt(figure, low), _fmt(figure, high)) if FIGURES[figure] == "count" else (f"{low:.1f}", f"{high:.1f} s")
    return b if a == b.removesuffix(" s") else f"{a} to {b}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class _Compared:
    """One figure of a run beside the baseline's runs: the values compared and the change allowed."""

    value: float
    past: list[float]
    allowance: float
    start: float | None = None
    baseline_start: float | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.past)


def _compared(figure: str, tolerance: Tolerance, figures: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
              ) -> _Compared | None:
    """The figure's value and the baseline's (``None``: not measured on one side).

    ``peak_rss`` compares the peak above each crawl's start RSS when the run and the baseline's runs know it; its
    relative tolerance stays a share of the baseline's median peak. Runs saved without a start compare the peak itself.
    """
    value = _number(figures.get(figure))
    past = [v for v in (_number(r.get(figure)) for r in runs) if v is not None]
    if value is None or not past:
        return None
    allowance = tolerance.allowance(statistics.median(past))
    if figure == "peak_rss":
        above = _number(figures.get("peak_rss_above_start"))
        past_above = [v for v in (_number(r.get("peak_rss_above_start")) for r in runs) if v is not None]
        starts = [v for v in (_number(r.get("start_rss")) for r in runs) if v is not None]
        if above is not None and past_above and starts:
            return _Compared(above, past_above, allowance, _number(figures.get("start_rss")), statistics.median(starts))
    return _Compared(value, past, allowance)


def compare_run(
    figures: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], tolerances: Mapping[str, Tolerance]
) -> list[Finding]:
    """Compare a run's figures to the median of the baseline ``runs``, for each figure with a tolerance."""
    findings = []
    for figure, tolerance in tolerances.items():
        compared = _compared(figure, tolerance, figures, runs)
        if compared is None:
            continue
        median = compared.median
        if abs(compared.value - median) > compared.allowance:
            findings.append(Finding(figure, compared.value, median, min(compared.past), max(compared.past),
                                    len(compared.past), tolerance, regressed=compared.value > median,
                                    start=compared.start, baseline_start=compared.baseline_start))
    return findings


def within_tolerance(
    figures: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], tolerances: Mapping[str, Tolerance]
) -> str | None:
    """The sentence for a run that kept every tolerance (``None`` when no figure could be compared, or one did not)."""
    if compare_run(figures, runs, tolerances):
        return None
    parts = []
    for figure, tolerance in tolerances.items():
        compared = _compared(figure, tolerance, figures, runs)
        if compared is None:
            continue
        value, median = _fmt(figure, compared.value), _fmt(figure, compared.median)
        if compared.start is not None and compared.baseline_start is not None:
            value = f"{value} above a start of {format_size(compared.start)}"
            median = f"{median} above {format_size(compared.baseline_start)}"
        parts.append(f"{figure} {value} (median {median}, {tolerance.describe()})")
    if not parts:
        return None
    count = "1 run" if len(runs) == 1 else f"{len(runs)} runs"
    return f"within tolerance of {count}: " + ", ".join(parts)


def without_start(runs: Sequence[Mapping[str, Any]], tolerances: Mapping[str, Tolerance]) -> bool:
    """The baseline's runs were saved without the start RSS, so ``peak_rss`` is compared as the absolute peak."""
    return "peak_rss" in tolerances and not any(_number(r.get("peak_rss_above_start")) is not None for r in runs)


def isolation_differs(figures: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str | None:
    """A sentence when this crawl ran isolated and the baseline's did not (or the other way round), else ``None``."""
    saved = [r["isolated"] for r in runs if isinstance(r.get("isolated"), bool)]
    here = figures.get("isolated")
    if not saved or not isinstance(here, bool) or saved.count(here) * 2 > len(saved):
        return None
    if here:
        return "this crawl ran isolated (a fresh process) and the baseline's crawls ran in the pytest process"
    return "the baseline's crawls ran isolated (--crawlmem-isolate) and this one in the pytest process"


def first_crawl_differs(figures: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str | None:
    """A sentence when this crawl was its process's first in-process crawl and most of the baseline's were not (or the
    other way round), else ``None`` (also when either side was not counted: isolated, or saved before it was)."""
    here = figures.get("earlier_crawls")
    saved = [r["earlier_crawls"] == 0 for r in runs if _count(r.get("earlier_crawls")) is not None]
    if _count(here) is None or not saved or saved.count(here == 0) * 2 > len(saved):
        return None
    if here == 0:
        return "this crawl was the first in its pytest process and the baseline's were not"
    return "the baseline's crawls were the first in their pytest process and this one was not"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


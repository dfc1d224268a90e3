"""Writes one crawl's reports: ``report.json`` (what was measured, against which budgets, on what machine),
``tracemalloc-diff.txt`` and ``report.html`` (pytest process)."""

from __future__ import annotations

import json
import os
import platform
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from .budgets import Budgets, Violation
from .loading import load_report, write_html
from .models import SCHEMA_VERSION, CrawlResult, json_value
from .snapshots import format_sites


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """Versions and machine facts that make figures comparable (or not)."""
    return {
        "pytest_crawlmem": _version("pytest-crawlmem"),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "scrapy": _version("scrapy"),
        "twisted": _version("twisted"),
        "machine": platform.machine(),
        "system": platform.system(),
        "release": platform.release(),
        "cpu_count": os.cpu_count(),
    }


def result_to_json(result: CrawlResult) -> dict[str, Any]:
    """The measured figures of ``result`` as a JSON-ready dict (samples stay in samples.jsonl)."""
    return {
        "spider": result.spider,
        "responses": result.responses,
        "items_scraped": result.items_scraped,
        "duration_seconds": result.duration_seconds,
        "finish_reason": result.finish_reason,
        "start_rss": result.start_rss,
        "end_rss": result.end_rss,
        "peak_rss": result.peak_rss,
        "rss_growth": result.rss_growth,
        "traced_peak": result.traced_peak,
        "max_scheduled": result.max_scheduled,
        "max_inflight": result.max_inflight,
        "max_active_size": result.max_active_size,
        "backout_seconds": result.peaks.backout_seconds,
        "verdict": result.verdict,
        "growth": result.growth.to_json(),
        "top_growth": [
            {
                "location": s.location,
                "size_diff_bytes": s.size_diff_bytes,
                "count_diff": s.count_diff,
                "bytes_per_response": json_value(s.bytes_per_response),
                "traceback": list(s.traceback),
                "in_user_code": s.in_user_code,
            }
            for s in result.top_growth
        ],
        "dropped": [{"url": d.url, "reason": d.reason, "size_bytes": d.size_bytes} for d in result.dropped],
        "dropped_count": result.dropped_count,
        "warnsize_warnings": result.warnsize_warnings,
        "response_sizes": result.response_sizes.to_json(),
        "suggested_maxsize": result.suggested_maxsize.to_json() if result.suggested_maxsize else None,
        "max_active_size_limit": result.max_active_size_limit,
        "active_size_ratio": json_value(result.active_size_ratio),
        "max_disk_scheduled": result.max_disk_scheduled,
        "jobdir_disk": result.jobdir_disk,
        "max_media_cached": result.max_media_cached,
        "media": result.media.to_json() if result.media else None,
        "scheduled_per_response": json_value(result.scheduled_per_response),
        "retries": result.retries,
        "retries_max_reached": result.retries_max_reached,
        "download_latency": result.download_latency.to_json(),
        "browser": result.browser.to_json() if result.browser else None,
        "replay_hits": result.replay_hits,
        "replay_misses": result.replay_misses,
        "replay_missed_urls": list(result.replay_missed_urls),
        "status_counts": {str(k): v for k, v in sorted(result.status_counts.items())},
        "live_refs": dict(result.live_refs),
        "samples": len(result.samples),
        "errors": list(result.errors),
        "retention": [{"class": r.class_name, "count": r.count, "path": r.path} for r in result.retention],
        "holders": [{"path": h.path, "gained": h.gained, "responses": h.responses, "line": h.line} for h in result.holders],
        "stats": dict(result.stats),
        "shots": result.shots.to_json() if result.shots else None,
        "parse_amplification": result.parse_amplification.to_json() if result.parse_amplification else None,
        "danger": result.danger.to_json() if result.danger else None,
    }


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file, so readers never see half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_reports(
    report_dir: Path,
    result: CrawlResult,
    *,
    test_id: str,
    budgets: Budgets | None,
    violations: Sequence[Violation],
) -> None:
    """Write report.json, tracemalloc-diff.txt and report.html of one crawl into ``report_dir``.

    The measured data is written first; report.html is rendered from those files, and if
    that fails for any reason the failure goes to ``report-error.txt`` instead.
    """
    write_report_json(report_dir / "report.json", result, test_id=test_id, budgets=budgets, violations=violations)
    write_text_atomic(report_dir / "tracemalloc-diff.txt", format_sites(result.top_growth))
    write_html_report(report_dir)


def write_html_report(report_dir: Path) -> Path:
    """Render ``report_dir/report.html`` from the files beside it; never raises: a failure is written to report-error.txt."""
    html_path = report_dir / "report.html"
    error_path = report_dir / "report-error.txt"
    try:
        error_path.unlink(missing_ok=True)
        return write_html(load_report(report_dir), html_path)
    except Exception:
        try:
            html_path.unlink(missing_ok=True)  # never leave an earlier crawl's page beside this crawl's data
            write_text_atomic(error_path, (
                "report.html could not be rendered; report.json, samples.jsonl and tracemalloc-diff.txt hold every figure.\n"
                f"Render it again with: python -m pytest_crawlmem report {report_dir}\n\n{traceback.format_exc()}"
            ))
        except OSError:
            pass
        return error_path


def report_document(
    result: CrawlResult,
    *,
    test_id: str,
    budgets: Budgets | None,
    violations: Sequence[Violation],
) -> dict[str, Any]:
    """The content of ``report.json``: schema version, test, environment, budgets, violations, result."""
    return {
        "schema_version": SCHEMA_VERSION,
        "test": test_id,
        "environment": environment(),
        "budgets": budgets.set_values() if budgets else {},
        "violations": [
            {"budget": v.budget, "measured": v.measured, "limit": v.limit, "message": v.message, "fails": v.fails}
            for v in violations
        ],
        "result": result_to_json(result),
    }


def write_report_json(
    path: Path,
    result: CrawlResult,
    *,
    test_id: str,
    budgets: Budgets | None,
    violations: Sequence[Violation],
) -> Path:
    """Write ``report.json`` atomically (a crash mid-write never leaves half a file)."""
    document = report_document(result, test_id=test_id, budgets=budgets, violations=violations)
    return write_text_atomic(path, json.dumps(document, indent=2, default=str))

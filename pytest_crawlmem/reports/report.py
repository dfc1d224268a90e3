"""Writes one crawl's reports: ``report.json`` (what was measured, against which budgets, on what machine),
``tracemalloc-diff.txt`` and ``report.html`` (pytest process)."""

from __future__ import annotations

import gc
import json
import os
import platform
import sys
import sysconfig
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.budgets import Budgets, Violation
from pytest_crawlmem.core.models import CrawlResult, format_sites
from pytest_crawlmem.reports.document import ReportDocument
from pytest_crawlmem.reports.loading import load_report, write_html


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def interpreter() -> dict[str, Any]:
    """The interpreter's facts that make memory figures comparable (core/interpreter.py): implementation, version,
    free-threaded build or not (``Py_GIL_DISABLED``), and the collector's thresholds now."""
    return {
        "implementation": sys.implementation.name,
        "version": platform.python_version(),
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "gc_threshold": list(gc.get_threshold()),
    }


def environment() -> dict[str, Any]:
    """Versions and machine facts that make figures comparable (or not)."""
    return {
        "pytest_crawlmem": _version("pytest-crawlmem"),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "interpreter": interpreter(),
        "scrapy": _version("scrapy"),
        "twisted": _version("twisted"),
        "machine": platform.machine(),
        "system": platform.system(),
        "release": platform.release(),
        "cpu_count": os.cpu_count(),
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
    return ReportDocument(result, test=test_id, environment=environment(), budgets=budgets.set_values() if budgets else {},
                          violations=tuple(violations)).to_json()


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

"""``crawlmem diff --new-leaks CONTROL TREATMENT``: the leaks whose fingerprints are new in TREATMENT (any process).

CONTROL and TREATMENT are each a report directory (one crawl's, or a whole ``.crawlmem`` folder: every report.json under
it), a report.json, a baseline file, or a baseline NAME (``<baseline dir>/*/NAME.json``: every machine's, since a
fingerprint does not depend on the machine). A control baseline counts every saved run; a treatment baseline each
test's newest run. The sorting itself is ``core/leakset.py``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.leakset import Leak, diff_leaks, format_diff, leaks_of_runs
from pytest_crawlmem.core.sites import named_line
from pytest_crawlmem.reports.document import ReportDocument
from pytest_crawlmem.reports.loading import LoadError

EXIT_NO_NEW_LEAK = 0
EXIT_NEW_LEAKS = 1
#: Folders under a report root that hold no crawl's report (saved baselines, screenshots).
SKIPPED_DIRS = frozenset({"baselines", "artifacts"})


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise LoadError(f"{path}: not readable JSON ({exc})") from exc


def leaks_of_report(path: Path, document: dict[str, Any], unfingerprinted: list[str]) -> list[Leak]:
    """The leak of one report.json (none when its verdict is not a leak); a leak verdict written without a fingerprint
    (an older pytest-crawlmem) is named in ``unfingerprinted`` instead."""
    if not isinstance(document.get("result"), dict):
        return []
    doc = ReportDocument.from_json(document)
    growth = doc.result.growth
    if not verdicts.is_leak(growth.verdict):
        return []
    if not growth.fingerprint:
        unfingerprinted.append(str(path))
        return []
    where = named_line(doc.result.top_growth, doc.result.holders)
    library = growth.known_leak.describe() if growth.known_leak is not None else ""
    return [Leak(growth.fingerprint, doc.test or str(path.parent), growth.verdict, where, growth.fingerprint_basis,
                 str(path.parent), library)]


def _report_files(root: Path) -> list[Path]:
    """Every report.json at or under ``root``, but not in saved baselines."""
    return sorted(p for p in root.rglob("report.json") if not SKIPPED_DIRS & set(p.relative_to(root).parts[:-1]))


def _is_baseline(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("tests"), dict) and "schema_version" in document


def leaks_at(spec: str, *, baseline_dir: Path, treatment: bool, unfingerprinted: list[str]) -> tuple[list[Leak], str]:
    """``(leaks, what was read)`` of a CONTROL or TREATMENT argument; a :class:`LoadError` when it names nothing usable."""
    path = Path(spec)
    if path.is_dir():
        files = _report_files(path)
        if not files:
            raise LoadError(f"{path}: no report.json in this directory or below it")
        leaks = [leak for file in files for leak in leaks_of_report(file, _json(file), unfingerprinted)]
        return leaks, f"{path} ({len(files)} report{'s' if len(files) != 1 else ''})"
    if path.is_file():
        document = _json(path)
        if _is_baseline(document):
            return leaks_of_runs(document["tests"], source=str(path), newest_only=treatment), f"baseline {path}"
        if isinstance(document, dict) and isinstance(document.get("result"), dict):
            return leaks_of_report(path, document, unfingerprinted), str(path)
        raise LoadError(f"{path}: neither a report.json nor a baseline file")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", spec) or spec.startswith("."):
        raise LoadError(f"{spec}: no such file or directory")
    files = sorted(baseline_dir.glob(f"*/{spec}.json"))
    if not files:
        raise LoadError(f"{spec}: no such file or directory, and no baseline of that name in {baseline_dir}"
                        " (--baseline-dir says where baselines are)")
    leaks = []
    for file in files:
        document = _json(file)
        if not _is_baseline(document):
            raise LoadError(f"{file}: not a pytest-crawlmem baseline (no 'tests' table)")
        leaks += leaks_of_runs(document["tests"], source=str(file), newest_only=treatment)
    return leaks, f"baseline {spec} ({', '.join(str(f) for f in files)})"


def new_leaks_command(control: str, treatment: str, *, baseline_dir: Path) -> int:
    """Print the treatment's new, known and gone leaks; exit 1 when it has a new one, else 0."""
    unfingerprinted: list[str] = []
    before, control_text = leaks_at(control, baseline_dir=baseline_dir, treatment=False, unfingerprinted=unfingerprinted)
    after, treatment_text = leaks_at(treatment, baseline_dir=baseline_dir, treatment=True, unfingerprinted=unfingerprinted)
    diff = diff_leaks(before, after)
    print("\n".join(format_diff(diff, control_text, treatment_text)))
    for path in unfingerprinted:
        print(f"crawlmem: warning: {path}: a leak verdict without a fingerprint (written by an older pytest-crawlmem):"
              " not compared", file=sys.stderr)
    return EXIT_NEW_LEAKS if diff.has_new else EXIT_NO_NEW_LEAK

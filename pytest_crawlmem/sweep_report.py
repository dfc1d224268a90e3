"""Writes a sweep's ``sweep.json`` and ``sweep.html`` under the test's report dir (pytest process)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .html import Safe, esc, page, section, table
from .report import write_text_atomic
from .sweep import Pick, SweepResult, derived_name
from .units import format_size


def sweep_file_stem(index: int) -> str:
    """``sweep`` for a test's first sweep, ``sweep-2`` for its second, ..."""
    return "sweep" if index == 1 else f"sweep-{index}"


def write_sweep_files(test_dir: Path, sweep: SweepResult, index: int = 1, pick: Pick | None = None) -> dict[str, Any]:
    """Write ``sweep.json`` (then ``sweep.html``) for the ``index``-th sweep of a test; return the JSON document."""
    stem = sweep_file_stem(index)
    pick = pick or sweep.default_pick()
    document = sweep.to_json(pick)
    write_text_atomic(test_dir / f"{stem}.json", json.dumps(document, indent=2, default=str))
    write_text_atomic(test_dir / f"{stem}.html", render_sweep_html(sweep, pick, test_dir))
    return document


def render_sweep_html(sweep: SweepResult, pick: Pick, test_dir: Path) -> str:
    """One self-contained page: the sweep table, each variant linked to its report.html."""
    headers = ["", "variant", "settings", "peak RSS", "RSS growth", "growth/resp", "resp/s", "items", "dropped",
               "gave up", "429", "503", "verdict", "budgets", "duration"]
    rows = []
    for row in sweep:
        name: object = row.variant
        if row.report_dir:
            href = os.path.relpath(Path(row.report_dir) / "report.html", test_dir)
            name = Safe(f'<a href="{esc(href)}">{esc(row.variant)}</a>')
        settings: object = "" if row.variant == derived_name(row.settings) else Safe("<br>".join(
            esc(f"{key}={json.dumps(value, default=str)}") for key, value in row.settings.items()))
        per = row.per_response_bytes
        rows.append([
            "*" if row.variant == pick.variant else "", name, settings, format_size(row.peak_rss), format_size(row.rss_growth),
            "-" if per is None else format_size(per), f"{row.responses_per_second:,.1f}", f"{row.items:,}",
            f"{row.dropped:,}", f"{row.gave_up:,}", f"{row.status_429:,}", f"{row.status_503:,}", row.verdict,
            "broken: " + ", ".join(row.broken) if row.broken else "ok", f"{row.duration_seconds:.1f} s",
        ])
    mode = "each variant in its own process" if sweep.isolated else "every variant in the pytest process"
    picked = f"* {pick.variant}: {pick.rule}." if pick.variant else f"No variant qualified for {pick.rule}."
    body = [
        section(f"Sweep: {sweep.test_id}", Safe(f'<div style="overflow-x:auto">{table(headers, rows)}</div>'),
                note=f"{len(sweep)} variants, {mode}. {picked}"),
    ]
    if pick.rejected:
        body.append(section("Not picked", table(["variant", "why"], list(pick.rejected.items()))))
    return page(f"crawlmem sweep: {sweep.test_id}", "\n".join(body))

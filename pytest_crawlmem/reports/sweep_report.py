"""Writes a sweep's ``sweep.json`` and ``sweep.html`` under the test's report dir (pytest process)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.sweep import Pick, SweepResult, derived_name
from pytest_crawlmem.core.units import format_size
from pytest_crawlmem.reports.markup import Safe, esc, page, section, table
from pytest_crawlmem.reports.report import write_text_atomic


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
    """One self-contained page: the sweep table (each variant linked to its report.html), the pick and why not the others."""
    headers = ["", "variant", "settings", "peak RSS", "RSS growth", "growth/resp", "resp/s", "items",
               "dropped / gave up", "429 / 503", "verdict", "budgets", "duration"]
    rows = []
    for row in sweep:
        name: object = row.variant
        if row.report_dir:
            href = os.path.relpath(Path(row.report_dir) / "report.html", test_dir)
            name = Safe(f'<a href="{esc(href)}">{esc(row.variant)}</a>')
        settings: object = "" if row.variant == derived_name(row.settings) else Safe("<br>".join(
            f"<code>{esc(key)}={esc(json.dumps(value, default=str))}</code>" for key, value in row.settings.items()))
        per = row.per_response_bytes
        rows.append([
            "*" if row.variant == pick.variant else "", name, settings, format_size(row.peak_rss), format_size(row.rss_growth),
            "-" if per is None else format_size(per), f"{row.responses_per_second:,.1f}", f"{row.items:,}",
            f"{row.dropped:,} / {row.gave_up:,}", f"{row.status_429:,} / {row.status_503:,}", row.verdict,
            Safe(f'<span class="badge fail">broken</span> {esc(", ".join(row.broken))}') if row.broken
            else Safe('<span class="badge pass">kept</span>'), f"{row.duration_seconds:.1f} s",
        ])
    mode = "each variant in its own process" if sweep.isolated else "every variant in the pytest process"
    picked = f"* {pick.variant}: {pick.rule}." if pick.variant else f"No variant qualified for {pick.rule}."
    note = (f"{len(sweep)} variants, {mode}. growth/resp is each variant's verdict figure (net of the scheduler's share;"
            " raw for a scheduler backlog; blank when the crawl was too short to judge). dropped: responses lost to a size"
            " limit; gave up: requests abandoned after retries.")
    body = [
        section(f"Sweep: {sweep.test_id}", Safe(f'<p class="pick">{esc(picked)}</p>'
                                                 f'<div class="sweep">{table(headers, rows, cls="sweep")}</div>'), note=note),
        section("Why not the others", table(["variant", "why it was not picked"], losing_reasons(sweep, pick))
                if len(sweep) > 1 or pick.variant is None else Safe('<p class="empty">One variant: nothing to compare.</p>')),
    ]
    return page(f"crawlmem sweep: {sweep.test_id}", "\n".join(body)).replace("</style>", SWEEP_CSS + "</style>")


def losing_reasons(sweep: SweepResult, pick: Pick) -> list[list[object]]:
    """Every variant but the pick, with why: the rule it broke, or that the pick ranked above it."""
    best = next((row for row in sweep if row.variant == pick.variant), None)
    rows: list[list[object]] = []
    for row in sweep:
        if row.variant == pick.variant:
            continue
        why = pick.rejected.get(row.variant)
        if not why and best is not None:
            why = (f"it qualified, but {best.variant} ranked above it by the rule ({pick.rule}):"
                   f" {row.responses_per_second:,.1f} against {best.responses_per_second:,.1f} responses/s,"
                   f" peak RSS {format_size(row.peak_rss)} against {format_size(best.peak_rss)}")
        rows.append([row.variant, why or "-"])
    return rows


SWEEP_CSS = """
main { max-width:1340px; }
.pick { font-weight:600; margin:0 0 10px; }
table.sweep th, table.sweep td { padding:5px 6px; font-size:13px; }
table.sweep td:nth-child(3) code { word-break:normal; overflow-wrap:anywhere; font-size:11.5px; }
table.sweep td:nth-child(3) { max-width:320px; }
table.sweep td:nth-child(n+4):nth-child(-n+10), table.sweep td:last-child { white-space:nowrap; }
"""

"""The memory governor's decisions as bands of report.html's timeline: which spans, drawn, and rendered by Chromium."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from test_html import chromium, records, synthetic_crawl, synthetic_document, typed

from pytest_crawlmem.reports.governor import GOVERNED_BAND, ROTATION_BAND, governor_bands
from pytest_crawlmem.reports.html import render_html


def decision(responses: int, kind: str, message: str = "") -> dict[str, object]:
    return {"t_seconds": responses / 100, "responses": responses, "kind": kind, "rss_bytes": 0, "concurrency": 4,
            "max_active_size": 0, "gate_start": False, "spill": False, "message": message or kind}


def write_governor(report_dir: Path, decisions: list[dict[str, object]]) -> None:
    record = {"budget_bytes": 300 * 2**20, "decisions": decisions}
    (report_dir / "governor.json").write_text(json.dumps(record), encoding="utf-8")


DECISIONS = [
    decision(100, "in_flight"), decision(150, "backlog"), decision(300, "restore"), decision(320, "restore"),
    decision(500, "in_flight"),  # lowered again: a second band, to the end of the crawl
    decision(600, "browser_context", "browser tree PSS 900 MiB ...: rotating browser context 'default' after 40 pages"),
    decision(640, "browser_context", "closed browser context 'default' after 41 pages, with no page open in it"),
    decision(700, "browser_context", "browser tree PSS 910 MiB ...: rotating browser context 'default#2' after 9 pages"),
]


def test_bands_run_from_a_lowering_to_its_last_restore_and_from_a_rotation_to_its_close(tmp_path):
    write_governor(tmp_path, DECISIONS)
    bands = governor_bands(tmp_path, "responses", 1200)
    spans = [(band.kind, band.x0, band.x1) for band in bands]
    assert spans == [(GOVERNED_BAND, 100, 320), (GOVERNED_BAND, 500, 1200), (ROTATION_BAND, 600, 640),
                     (ROTATION_BAND, 700, 1200)]
    assert "in_flight, backlog" in bands[0].title and "not closed by the end" in bands[-1].title
    by_time = governor_bands(tmp_path, "t_seconds", 12.0)
    assert [(band.x0, band.x1) for band in by_time][:2] == [(1.0, 3.2), (5.0, 12.0)]
    assert governor_bands(tmp_path / "missing", "responses", 1200) == []


def test_report_html_draws_the_bands_in_every_panel_and_chromium_renders_them(tmp_path):
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    write_governor(report_dir, DECISIONS)
    result = synthetic_crawl(report_dir)
    document = typed(synthetic_document(result))
    document = replace(document, result=replace(document.result, report_dir=report_dir))  # as load_report sets it
    page = render_html(document, *records(result))
    panels = page.count('<g class="panel"')
    assert panels >= 4
    # two governed and two rotation bands per panel, in both timelines (against responses, against time)
    assert page.count('<rect class="band governed"') == 2 * panels
    assert page.count('<rect class="band rotation"') == 2 * panels
    assert "governed: lowered until restored" in page and "a browser context rotated, until it closed" in page
    assert 'class="marker governor in_flight"' in page  # the decisions' markers stay
    html_file = report_dir / "report.html"
    html_file.write_text(page, encoding="utf-8")
    dom = chromium(tmp_path, "--dump-dom", html_file.as_uri())
    assert dom.returncode == 0, dom.stderr.decode()[-2000:]
    rendered = dom.stdout.decode()
    assert rendered.count('<rect class="band governed"') == 2 * panels
    assert rendered.count('<rect class="band rotation"') == 2 * panels
    assert "governor held the crawl under its settings (in_flight, backlog) until it restored them" in rendered

"""report.json read back as typed records (ReportDocument): old writers' reports, hand-edited ones, the round trip."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_assemble import every_field_result
from test_html import HOSTILE, synthetic_crawl, synthetic_document, write_synthetic_dir

from pytest_crawlmem.core.budgets import SPECS
from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.reports.cli import main
from pytest_crawlmem.reports.document import FIGURE_PATHS, FIGURES, ReportDocument, at_path, read_result
from pytest_crawlmem.reports.loading import load_report

#: The keys of ``result`` that the first schema_version 1 writer (commit 9bef258) wrote; sites had no in_user_code.
FIRST_WRITER_KEYS = [
    "spider", "responses", "items_scraped", "duration_seconds", "finish_reason", "start_rss", "end_rss", "peak_rss",
    "rss_growth", "traced_peak", "max_scheduled", "max_inflight", "max_active_size", "backout_seconds", "verdict",
    "growth", "top_growth", "dropped", "status_counts", "live_refs", "samples", "errors", "stats",
]


def before_field_keys(result: dict) -> dict:
    """report.json's ``result`` as writers before ``CrawlResult.ALIASES`` wrote it: flat peaks under their old keys."""
    old = {k: v for k, v in result.items() if k != "peaks"}
    for key, path in CrawlResult.ALIASES.items():
        old[key] = result["peaks"][path.split(".")[1]]
    return old


def row(page: str, label: str) -> str:
    """The value cell of a two-column row of report.html."""
    return page.split(f"<td>{label}</td><td>", 1)[1].split("</td>", 1)[0]


def test_a_report_of_the_first_writer_renders_what_it_lacks_as_not_measured(tmp_path):
    document = synthetic_document(synthetic_crawl())
    document["result"] = {k: v for k, v in before_field_keys(document["result"]).items() if k in FIRST_WRITER_KEYS}
    for site in document["result"]["top_growth"]:
        del site["in_user_code"]
    (tmp_path / "report.json").write_text(json.dumps(document))
    report = load_report(tmp_path)
    assert report.document.figure("retries") is None and report.document.figure("peak_rss") == 90 * 2**20
    assert report.result.top_growth[0].in_user_code and report.document.problems == ()
    assert main(["report", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text()
    assert row(page, "retries (gave up)") == "- (-)"  # not a made-up "0 (0)"
    assert row(page, "max scheduled (of which on disk)") == "200 (-)"
    assert "over DOWNLOAD_WARNSIZE" not in page and "/ - (" not in row(page, "max active size / SCRAPER_SLOT_MAX_ACTIVE_SIZE")
    assert "3.4 MiB" in page and "retained-objects" in page


def test_a_hand_edited_report_names_the_fields_it_cannot_read_and_still_renders(tmp_path, capsys):
    document = synthetic_document(synthetic_crawl())
    result = document["result"]
    result.update(peak_rss="a lot", retries=None, status_counts={"200": "many"},
                  browser={"peak_pss_bytes": 1}, dropped=[{"url": "http://x/", "oops": 1}])
    result["peaks"]["max_scheduled"] = True
    result["growth"]["per_response_bytes"] = "nan?"
    document["environment"] = ["not", "an", "object"]  # raised a TypeError before report.json was read typed
    document["violations"].append("not an object")
    (tmp_path / "report.json").write_text(json.dumps(document))
    assert main(["report", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text()
    problems = page.split("Problems of the measurement", 1)[1].split("</div>", 1)[0]
    for name in ("browser", "status_counts", "dropped"):
        assert f"report.json: result.{name} cannot be read (" in problems, name
    assert '<div class="label">peak RSS</div><div class="value">-</div>' in page
    assert row(page, "max scheduled (of which on disk)") == "- (0)" and row(page, "retries (gave up)") == "- (0)"
    assert HOSTILE not in page  # the hostile text still arrives escaped
    assert main(["diff", str(tmp_path), str(tmp_path)]) == 0
    figures = {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line) for line in capsys.readouterr().out.splitlines()[3:])}
    assert figures["peak RSS"] == ["-", "-"] and figures["growth/response"] == ["-", "-"]


def test_read_result_keeps_every_readable_field_and_names_the_others():
    written = synthetic_crawl().to_json()
    result, problems = read_result({**written, "holders": [{"path": "x"}], "responses": "12"})
    assert problems == ["report.json: result.holders cannot be read (TypeError: Holder.__init__() missing 2 required"
                        " positional arguments: 'gained' and 'responses'); not shown"]
    assert result.responses == 0 and result.peak_rss == 90 * 2**20 and result.holders == ()


def test_the_document_reads_back_to_what_was_written(tmp_path):
    path = write_synthetic_dir(tmp_path / "a", leak=True)
    written = json.loads((path / "report.json").read_text())
    assert list(written) == ["schema_version", "test", "environment", "budgets", "violations", "result"]
    document = load_report(path).document  # with the samples of samples.jsonl (report.json keeps their count)
    assert json.loads(json.dumps(document.to_json(), default=str)) == written
    assert ReportDocument.from_json(written).result.samples == ()
    assert document.unmeasured == {"traced_peak", "jobdir_disk", "max_media_cached", "active_size_ratio",
                                   "scheduled_per_response"}  # null in report.json: not measured by this crawl
    assert set(document.unmeasured) <= set(FIGURES)


def test_a_bare_stream_without_its_interval_shows_no_backout_time(tmp_path):
    path: Path = write_synthetic_dir(tmp_path / "a", leak=False) / "samples.jsonl"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    del header["interval_seconds"]
    bare = tmp_path / "bare.jsonl"
    bare.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert load_report(bare).document.figure("backout_seconds") is None
    assert main(["report", str(bare)]) == 0
    assert row((tmp_path / "report.html").read_text(), "time in backout") == "-"


def test_every_figure_and_budget_path_reads_the_same_from_the_typed_result_as_from_report_json():
    result = every_field_result()
    written = json.loads(json.dumps(result.to_json()))
    document = ReportDocument.from_json({"result": written})
    for name in FIGURES:  # each is an attribute of CrawlResult, with report.json's value at its field's path
        assert document.figure(name) == at_path(written, FIGURE_PATHS[name]), name
    for spec in (s for s in SPECS.values() if s.report_path):  # report.html walks them over attributes
        typed: object = result
        data: object = written
        for step in spec.report_path:
            typed, data = getattr(typed, step), data[step]  # type: ignore[index]
        assert typed == data, spec.name

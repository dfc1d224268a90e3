"""Heap figures that agree: report.json carries the "Python memory" figure report.html draws (``python_heap_bytes`` of
each checkpoint), and RSS growth that came in the warm-up is called that (summary, report.html, the rss_growth budget)."""

from __future__ import annotations

import json

from pytest_crawlmem.core.budgets import Budgets, check_budgets
from pytest_crawlmem.core.models import Checkpoint, CrawlResult, Growth, Peaks, heap_estimate
from pytest_crawlmem.core.units import format_size
from pytest_crawlmem.core.warmup import warmup_cell, warmup_note
from pytest_crawlmem.reports.report import write_reports

MIB = 2**20


def checkpoints(*rss_mib: float, every: int = 100) -> tuple[Checkpoint, ...]:
    """Drained checkpoints ``every`` responses apart at these RSS figures, with a heap that pymalloc's blocks add to."""
    return tuple(Checkpoint(i * every, float(i), int(rss * MIB), 80 * MIB + i * MIB, None, 0,
                            allocated_blocks=1_200_000 + i * 10_000, tracer_bytes=0) for i, rss in enumerate(rss_mib))


def result(marks: tuple[Checkpoint, ...], responses: int = 400) -> CrawlResult:
    start, end = marks[0].rss_bytes, marks[-1].rss_bytes
    return CrawlResult("s", (), start, end, end, None, responses, 0, 10.0, "finished", Peaks(),
                       Growth("steady", "grew 10 B/response", checkpoints=marks))


def test_report_json_carries_the_heap_estimate_report_html_draws(tmp_path):
    marks = checkpoints(100, 200, 205, 208.7, 208.7)
    write_reports(tmp_path, result(marks), test_id="t", budgets=None, violations=())
    written = json.loads((tmp_path / "report.json").read_text())["result"]["growth"]["checkpoints"]
    assert [c["python_heap_bytes"] for c in written] == [heap_estimate(c) for c in marks]
    assert [c["heap_bytes"] for c in written] == [c.heap_bytes for c in marks]  # glibc's bytes in use, as read
    assert written[0]["python_heap_bytes"] > written[0]["heap_bytes"]  # pymalloc's arenas are not in mallinfo's figure
    html = (tmp_path / "report.html").read_text()
    assert all(format_size(c["python_heap_bytes"]) in html for c in written)  # the checkpoints table's "heap" column


def test_growth_in_the_warm_up_is_called_that():
    marks = checkpoints(100, 200, 205, 208.7, 208.7)  # warm-up: the first 100 responses of 400
    assert warmup_note(marks[0].rss_bytes, marks[-1].rss_bytes, marks, 400) == (
        "100.0 MiB of it in the warm-up (the first 100 responses)")
    assert warmup_cell(result(marks)) == "100.0 MiB in warm-up"
    flat = checkpoints(100, 208.7, 208.7, 208.7, 208.7)
    assert warmup_note(flat[0].rss_bytes, flat[-1].rss_bytes, flat, 400) == "all of it in the warm-up (the first 100 responses)"
    assert warmup_cell(result(flat)) == "all in warm-up"
    late = checkpoints(100, 100, 100, 150, 208.7)
    assert warmup_cell(result(late)) == "" and warmup_note(late[0].rss_bytes, late[-1].rss_bytes, late, 400) == ""


def test_the_rss_growth_budget_says_how_much_came_in_the_warm_up():
    [violation] = check_budgets(Budgets(rss_growth=50 * MIB), result(checkpoints(100, 208.7, 208.7, 208.7, 208.7)))
    assert violation.message.endswith(
        "(from 100.0 MiB when the crawl began to 208.7 MiB at its end, all of it in the warm-up (the first 100 responses))")

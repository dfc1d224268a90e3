"""A browser job's verdict in pages (pure): the unit, and the pages a job needs at its own batch size."""

from __future__ import annotations

import pytest

from pytest_crawlmem.browser.jobverdict import in_pages, job_batch, pages_to_judge
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint

MIB = 2**20


def job(pages: list[int], uss_mib: float | None = None, rss_per_page: int = 0) -> list[Checkpoint]:
    """A job's checkpoints at these page counts (the closing one repeats the last)."""
    counts = [*pages, pages[-1]]
    return [Checkpoint(responses=n, t_seconds=i, rss_bytes=80 * MIB + n * rss_per_page, heap_bytes=40 * MIB + n * rss_per_page,
                       traced_bytes=None, scheduled=0, browser_uss_bytes=None if uss_mib is None else int(uss_mib * MIB))
            for i, n in enumerate(counts)]


def test_a_job_too_short_to_judge_is_told_in_pages_what_it_needs():
    checkpoints = job([0, 3])
    growth = in_pages(analyze(checkpoints), checkpoints)
    assert growth.verdict == "inconclusive"
    assert growth.reason == ("3 pages gave 0 checkpoint intervals after the warm-up; 3 are needed to judge growth:"
                             " call `await job.checkpoint()` after each batch of pages: at one every 10 pages, about 160"
                             " pages are needed")


def test_the_pages_needed_follow_the_jobs_own_batches():
    checkpoints = job(list(range(0, 101, 20)))
    assert job_batch(checkpoints) == 20
    reason = in_pages(analyze(checkpoints), checkpoints).reason
    assert reason.startswith("100 pages gave") and f"every 20 pages, about {pages_to_judge(20):,} pages" in reason


def test_a_browser_steady_job_says_python_is_not_judged_in_pages():
    checkpoints = job([0, 5, 10, 15, 20, 25, 30], uss_mib=300)
    raw = analyze(checkpoints)
    assert "responses are too few" in raw.reason  # what analyze says of a crawl
    reason = in_pages(raw, checkpoints).reason
    assert "response" not in reason
    assert reason.endswith("Python's own memory is not judged: 30 pages are too few (at a checkpoint every 5 pages,"
                           f" about {pages_to_judge(5):,} pages are needed)")


def test_a_judged_job_reads_per_page_and_keeps_verdict_names():
    checkpoints = job(list(range(0, 601, 50)), rss_per_page=64 * 1024)
    growth = in_pages(analyze(checkpoints), checkpoints)
    assert growth.verdict == "retained-objects"
    assert "/page" in growth.reason and "response" not in growth.reason, growth.reason


def test_pages_to_judge_matches_the_rule_and_refuses_a_bad_batch():
    assert pages_to_judge(5) == pages_to_judge(10) == 160 and pages_to_judge(50) == 250  # 4 drained checkpoints
    assert pages_to_judge(100) == 400
    with pytest.raises(ValueError, match="invalid batch 0"):
        pages_to_judge(0)

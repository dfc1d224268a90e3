"""A batch capture loop in Chromium: one browser context for every batch, or a fresh one per batch.

A reused context keeps what pages leave behind (storage, cache, cookies) and skips the
context's startup; a fresh context per batch pays the startup and starts clean each time.
Both are measured by ``browser_job``: pages/s, the browser tree's PSS and its USS growth.
Needs the browser extra (``pip install -e '.[browser]'``) and Debian's ``chromium``.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")

from pytest_crawlmem.browser import BrowserNotFound, chromium_path

try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)

BATCHES, BATCH_SIZE = 6, 5
#: What each page leaves in its origin's storage (a site caching its data client-side).
STORE_SCRIPT = "(n) => localStorage.setItem('page-' + n, 'x'.repeat(50000))"


def capture(fresh_context_per_batch: bool, timings: list[float]):  # type: ignore[no-untyped-def]
    async def job_function(job):  # type: ignore[no-untyped-def]
        context = None
        for batch in job.batches(range(BATCHES * BATCH_SIZE), BATCH_SIZE):
            started = time.perf_counter()
            if context is None or fresh_context_per_batch:
                if context is not None:
                    await context.close()
                context = await job.browser.new_context()
            for number in batch:
                page = await context.new_page()
                await page.goto(job.url(f"/js/{number}"))
                await page.wait_for_selector("body[data-rendered=true]")
                await page.evaluate(STORE_SCRIPT, number)
                await page.close()
                job.page_done()
            timings.append(time.perf_counter() - started)
            await job.checkpoint()
        if context is not None:
            await context.close()

    job_function.__name__ = "fresh_context_per_batch" if fresh_context_per_batch else "reused_context"
    return job_function


@pytest.mark.crawl_memory(browser_pss="3 GiB", max_open_pages=1, leak="fail")
def test_reused_context_against_fresh_context_per_batch(browser_job, fixture_site):
    timings: dict[bool, list[float]] = {False: [], True: []}
    results = {fresh: browser_job(capture(fresh, timings[fresh])) for fresh in (False, True)}
    rows = []
    for fresh, result in results.items():
        checkpoints = [c for c in result.growth.checkpoints if c.browser_uss_bytes]
        retained = checkpoints[-1].browser_uss_bytes - checkpoints[0].browser_uss_bytes
        rows.append((result.spider, sum(timings[fresh]) / result.responses, result.browser_pss, retained, result.verdict))
        assert result.responses == BATCHES * BATCH_SIZE
        assert result.verdict == "steady", result.growth.reason
    print()
    for name, per_page, pss, retained, verdict in rows:
        print(f"{name:24} {per_page * 1000:7.1f} ms/page  peak PSS {pss / 2**20:7.1f} MiB"
              f"  USS first->last batch {retained / 2**20:+7.1f} MiB  {verdict}")

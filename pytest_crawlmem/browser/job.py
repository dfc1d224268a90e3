"""Measures a plain async Playwright function (a capture loop, a batch job) like a crawl.

The job runs on its own asyncio loop in a worker thread (the test's thread may sit inside
pytest-twisted's reactor, whose loop is already running); a sampler thread reads the
process and the browser tree as for crawls; ``await job.checkpoint()`` after each batch is
the drained checkpoint: every open page's renderer collects its garbage first.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from pytest_crawlmem.browser.jobverdict import in_pages
from pytest_crawlmem.browser.pages import collect_renderer_garbage
from pytest_crawlmem.browser.settings import launch_options
from pytest_crawlmem.browser.watch import BrowserWatch
from pytest_crawlmem.core import stops
from pytest_crawlmem.core.assemble import RunFacts, assemble
from pytest_crawlmem.core.budgets import BudgetLimits, Budgets
from pytest_crawlmem.core.defaults import DEFAULT_LEAK_PER_RESPONSE
from pytest_crawlmem.core.growth import FIXES, analyze
from pytest_crawlmem.core.models import Checkpoint, CrawlResult, Sample
from pytest_crawlmem.probes import readings as probes
from pytest_crawlmem.probes.meter import Ceiling, Sampler, drained_checkpoint
from pytest_crawlmem.probes.recording import Recording

T = TypeVar("T")


@dataclass(frozen=True)
class JobOptions(BudgetLimits):
    """How one browser job is measured and limited."""

    report_dir: Path | None = None
    interval_seconds: float = 0.1
    detail_seconds: float = 2.0
    budgets: Budgets = field(default_factory=Budgets)  # the test's, whole (as CrawlOptions carries them)
    launch: Mapping[str, Any] | None = None


class BrowserJob:
    """What the measured function gets: the browser, a page counter and checkpoints."""

    def __init__(self, browser: Any, base_url: str | None, runner: _JobRunner) -> None:
        self.browser = browser
        self.base_url = base_url
        self.pages_done = 0
        self._runner = runner

    def url(self, path: str) -> str:
        """``base_url + path`` (the fixture site's, when the test uses ``fixture_site``)."""
        if self.base_url is None:
            raise RuntimeError("job.url() needs the fixture site: request the fixture_site fixture in the test")
        return self.base_url + path

    def page_done(self, count: int = 1) -> None:
        """Count pages (the job's unit of work: growth is judged per page)."""
        self.pages_done += count

    def open_pages(self) -> list[Any]:
        """Every open page of every context of the browser."""
        return [page for context in self.browser.contexts for page in context.pages if not page.is_closed()]

    async def checkpoint(self) -> None:
        """Take a drained checkpoint: renderer GC on every open page, then read Python and the browser tree."""
        pages = self.open_pages()
        if pages:
            try:
                await collect_renderer_garbage(pages)
            except asyncio.TimeoutError:
                self._runner.recording.add_error("renderer gc timed out")
        self._runner.checkpoint(self)

    @staticmethod
    def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
        """Split ``items`` into lists of ``size`` (the last may be shorter)."""
        if size < 1:
            raise ValueError(f"invalid batch size {size!r}: expected an integer >= 1")
        batch: list[T] = []
        for item in items:
            batch.append(item)
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch


class _JobRunner:
    """Runs one job: the sampler thread, checkpoints, limits, and the result."""

    def __init__(self, options: JobOptions) -> None:
        self.options = options
        jsonl = options.report_dir / "samples.jsonl" if options.report_dir else None
        self.recording = Recording(jsonl)
        self.watch = BrowserWatch(detail_seconds=options.detail_seconds)
        self.job: BrowserJob | None = None
        self.started_at = 0.0
        self.stopped_because = ""
        self.finish_reason = stops.FINISHED
        self._cancel: Callable[[], None] | None = None
        self.sampler = Sampler(self.sample, options.interval_seconds, self.recording, name="crawlmem-job-sampler")
        self.ceiling = Ceiling(options.kill_at_bytes, self._stop_once)

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started_at, 4)

    def _pages(self) -> tuple[int | None, int | None]:
        job = self.job
        if job is None:
            return None, None
        try:
            contexts = list(job.browser.contexts)
            return sum(len(c.pages) for c in contexts), len(contexts)
        except Exception:
            return None, None

    def sample(self) -> Sample:
        tree = self.watch.read()
        pages, contexts = self._pages()
        self.watch.count(pages, contexts)
        done = self.job.pages_done if self.job else 0
        sample = Sample(
            t_seconds=self.elapsed(), responses=done, items=0, rss_bytes=probes.read_rss_bytes(),
            browser_rss_bytes=tree.rss_bytes, browser_pss_bytes=tree.pss_bytes, browser_uss_bytes=tree.uss_bytes,
            open_pages=pages, open_contexts=contexts,
        )
        self.recording.add_sample(sample)
        self.ceiling.check(sample.rss_bytes, sample.t_seconds)
        return sample

    def _stop_once(self, reason: str, message: str) -> None:
        if not self.stopped_because:
            self.stop(reason, message)

    def stop(self, reason: str, message: str) -> None:
        """Cancel the job (any thread)."""
        self.finish_reason, self.stopped_because = reason, message
        self.recording.add_stop(reason, message)
        if self._cancel is not None:
            self._cancel()

    def checkpoint(self, job: BrowserJob | None) -> Checkpoint:
        """The drained checkpoint (the job's own work is at rest): the process, then the browser tree and its pages."""
        checkpoint = drained_checkpoint(job.pages_done if job else 0, started_at=self.started_at,
                                        cost_started=time.monotonic(), traced=False, scheduled=0, read=self._browser)
        self.recording.add_checkpoint(checkpoint)
        return checkpoint

    def _browser(self) -> dict[str, Any]:
        """A checkpoint's browser fields: the tree's PSS and USS (detailed reading), open pages and contexts."""
        tree = self.watch.read(detail=True)
        pages, contexts = self._pages()
        return {"browser_pss_bytes": tree.pss_bytes if tree.processes else None,
                "browser_uss_bytes": tree.uss_bytes if tree.processes else None,
                "open_pages": pages, "open_contexts": contexts}

    async def main(self, func: Callable[[BrowserJob], Awaitable[Any]], base_url: str | None) -> None:
        from playwright.async_api import async_playwright

        loop = asyncio.get_running_loop()
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options(self.options.launch))
            try:
                self.job = BrowserJob(browser, base_url, self)
                task = asyncio.ensure_future(func(self.job))

                def cancel() -> None:
                    loop.call_soon_threadsafe(task.cancel)

                self._cancel = cancel
                if self.options.timeout_seconds:
                    timeout = self.options.timeout_seconds
                    loop.call_later(timeout, self.stop, stops.TIMEOUT, stops.timeout_message(timeout, "job"))
                try:
                    await task
                except asyncio.CancelledError:
                    if not self.stopped_because:
                        raise
                self.sample()
                self.checkpoint(self.job)  # the closing checkpoint, with the job's contexts still open
            finally:
                await browser.close()


def run_browser_job(
    func: Callable[[BrowserJob], Awaitable[Any]], *, base_url: str | None = None, options: JobOptions = JobOptions()
) -> CrawlResult:
    """Run ``func(job)`` with a Chromium launched for it, measured; return a :class:`CrawlResult`.

    An exception raised by ``func`` is raised again after the measurement is complete.
    """
    if options.report_dir is not None:
        options.report_dir.mkdir(parents=True, exist_ok=True)
        (options.report_dir / "samples.jsonl").unlink(missing_ok=True)
    runner = _JobRunner(options)
    name = getattr(func, "__name__", "browser_job")
    runner.recording.header(spider=name, interval_seconds=options.interval_seconds)
    runner.started_at = time.monotonic()
    start = runner.checkpoint(None)
    exact_peak = probes.reset_peak_rss()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(runner.main(func, base_url))
        except BaseException as exc:  # handed to the test's thread
            failure.append(exc)

    worker = threading.Thread(target=target, name="crawlmem-browser-job", daemon=True)
    runner.sampler.start()
    worker.start()
    worker.join()
    runner.sampler.stop()
    if failure:
        runner.finish_reason = stops.ERROR
        runner.recording.add_error(f"the job raised {failure[0]!r}")
    runner.recording.close()
    result = _result(runner, name, start, exact_peak)
    if failure:
        raise JobFailed(result, failure[0]) from failure[0]
    return result


class JobFailed(Exception):
    """The measured function raised; ``result`` holds what was measured up to then."""

    def __init__(self, result: CrawlResult, cause: BaseException) -> None:
        super().__init__(f"the browser job raised {cause!r}; report: {result.report_dir}")
        self.result = result


def _result(runner: _JobRunner, name: str, start: Checkpoint, exact_peak: bool) -> CrawlResult:
    recording, options = runner.recording, runner.options
    samples, checkpoints = tuple(recording.samples), list(recording.checkpoints)
    peak = probes.read_peak_rss() if exact_peak else None
    growth = analyze(checkpoints, samples, leak_per_response=options.leak_per_response or DEFAULT_LEAK_PER_RESPONSE)
    growth = in_pages(growth, checkpoints)  # a job counts pages, not responses
    if growth.verdict in FIXES:
        growth = replace(growth, reason=f"{growth.reason}. Fix: {FIXES[growth.verdict]}")
    facts = RunFacts(
        spider=name,
        duration_seconds=time.monotonic() - runner.started_at,
        finish_reason=runner.finish_reason,
        start_rss=start.rss_bytes,
        end_rss=checkpoints[-1].rss_bytes,
        peak_rss=max(peak or 0, max((s.rss_bytes for s in samples), default=0), start.rss_bytes),
        responses=runner.job.pages_done if runner.job else 0,
        items_scraped=0,
        interval_seconds=options.interval_seconds,
        stopped_because=runner.stopped_because,
        errors=tuple(recording.errors),
        report_dir=options.report_dir,
    )
    return assemble(facts, samples, checkpoints, growth, browser=runner.watch.summary(checkpoints))

"""Spidermon monitors for production crawls (the ``spidermon`` extra; users write ``pytest_crawlmem.spidermon``):
fail a job on crawlmem's leak verdict, a budget that stopped it, or a governor close, with the evidence in the message
(crawl process, at the spider's close).

    EXTENSIONS = {"pytest_crawlmem.extension.CrawlMemExtension": 0, "spidermon.contrib.scrapy.extensions.Spidermon": 500}
    CRAWLMEM_ENABLED = True
    SPIDERMON_ENABLED = True
    SPIDERMON_SPIDER_CLOSE_MONITORS = ("pytest_crawlmem.spidermon.CrawlMemMonitorSuite",)

The judgement is ``pytest_crawlmem/core/jobstats.py`` on the job's stats; the extension must run before Spidermon's
(a lower number in EXTENSIONS) so that its closing stats are written when the monitors read them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from spidermon import Monitor, MonitorSuite, monitors

from pytest_crawlmem.core.jobstats import budget_finding, governor_finding, leak_finding

T = TypeVar("T")
#: Spidermon's ``monitors.name`` (untyped): the name Spidermon shows for a monitor or one of its checks.
name = cast("Callable[[str], Callable[[T], T]]", monitors.name)


@name("crawlmem")
class CrawlMemMonitor(Monitor):  # type: ignore[misc]
    """Memory of the job, as the crawlmem extension judged it."""

    longMessage = False  # the failure is the finding's sentence alone (as Spidermon's own Scrapy monitors do)

    def _stats(self) -> Any:
        return self.data.stats

    @name("no leak verdict")
    def test_no_leak_verdict(self) -> None:
        """Fails when the drained checkpoints judged a leak (``crawlmem/verdict``)."""
        finding = leak_finding(self._stats())
        self.assertIsNone(finding, msg=finding.message if finding else "")

    @name("no budget stopped the job")
    def test_no_budget_stop(self) -> None:
        """Fails when kill_at or the timeout stopped the job (its finish reason)."""
        finding = budget_finding(self._stats())
        self.assertIsNone(finding, msg=finding.message if finding else "")

    @name("the memory governor did not close the job")
    def test_no_governor_close(self) -> None:
        """Fails when the memory governor closed the job (finish reason ``memory_budget``)."""
        finding = governor_finding(self._stats())
        self.assertIsNone(finding, msg=finding.message if finding else "")


class CrawlMemMonitorSuite(MonitorSuite):  # type: ignore[misc]
    """The crawlmem monitors, for ``SPIDERMON_SPIDER_CLOSE_MONITORS``."""

    monitors = [CrawlMemMonitor]  # noqa: RUF012 (Spidermon's own declaration style)

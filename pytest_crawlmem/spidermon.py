"""The stable dotted path of the Spidermon monitors:
``SPIDERMON_SPIDER_CLOSE_MONITORS = ("pytest_crawlmem.spidermon.CrawlMemMonitorSuite",)`` (the ``spidermon`` extra).

The code lives in :mod:`pytest_crawlmem.measure.spidermon`; this path stays because users write it into settings.
"""

from pytest_crawlmem.measure.spidermon import CrawlMemMonitor, CrawlMemMonitorSuite

__all__ = ["CrawlMemMonitor", "CrawlMemMonitorSuite"]

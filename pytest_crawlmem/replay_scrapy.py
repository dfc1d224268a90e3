"""The stable dotted paths of replay's Scrapy components (``DOWNLOAD_HANDLERS``, ``SPIDER_MIDDLEWARES``).

The code lives in :mod:`pytest_crawlmem.replay.handler` and, for recording from a stand-in
(``crawlmem record --stand-in``), :mod:`pytest_crawlmem.replay.standin`.
"""

from pytest_crawlmem.replay.handler import ReplayCopiesMiddleware, ReplayDownloadHandler
from pytest_crawlmem.replay.standin import StandInDownloadHandler

__all__ = ["ReplayCopiesMiddleware", "ReplayDownloadHandler", "StandInDownloadHandler"]

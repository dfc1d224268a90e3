"""The stable dotted paths of replay's Scrapy components (``DOWNLOAD_HANDLERS``, ``SPIDER_MIDDLEWARES``).

The code lives in :mod:`pytest_crawlmem.crawl.replay_scrapy` and, for recording from a stand-in
(``crawlmem record --stand-in``), :mod:`pytest_crawlmem.crawl.standin`.
"""

from .crawl.replay_scrapy import ReplayCopiesMiddleware, ReplayDownloadHandler
from .crawl.standin import StandInDownloadHandler

__all__ = ["ReplayCopiesMiddleware", "ReplayDownloadHandler", "StandInDownloadHandler"]

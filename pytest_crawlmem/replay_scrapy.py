"""The stable dotted paths of replay's Scrapy components (``DOWNLOAD_HANDLERS``, ``SPIDER_MIDDLEWARES``).

The code lives in :mod:`pytest_crawlmem.crawl.replay_scrapy`.
"""

from .crawl.replay_scrapy import ReplayCopiesMiddleware, ReplayDownloadHandler

__all__ = ["ReplayCopiesMiddleware", "ReplayDownloadHandler"]

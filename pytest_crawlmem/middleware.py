"""The stable dotted paths of the downloader middlewares (``DOWNLOADER_MIDDLEWARES``).

The code lives in :mod:`pytest_crawlmem.crawl.middleware`; these paths stay because users write them into settings.
"""

from .crawl.middleware import CrawlMemDownloaderMiddleware, CrawlMemHttpCompressionMiddleware

__all__ = ["CrawlMemDownloaderMiddleware", "CrawlMemHttpCompressionMiddleware"]

"""The stable dotted path of the measuring extension: ``EXTENSIONS = {"pytest_crawlmem.extension.CrawlMemExtension": 0}``.

The code lives in :mod:`pytest_crawlmem.crawl.extension`; this path stays because users write it into settings.
"""

from .crawl.extension import CrawlMemExtension

__all__ = ["CrawlMemExtension"]

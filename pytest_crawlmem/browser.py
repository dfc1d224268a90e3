"""The stable path of the browser-crawl helpers (``from pytest_crawlmem.browser import playwright_settings``).

The code lives in :mod:`pytest_crawlmem.crawl.browser`.
"""

from .crawl.browser import BrowserNotFound, chromium_path, launch_options, playwright_settings

__all__ = ["BrowserNotFound", "chromium_path", "launch_options", "playwright_settings"]

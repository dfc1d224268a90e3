"""Browser crawls and jobs: the installed Chromium, its process tree, its pages (crawl process or a browser job's).

``from pytest_crawlmem.browser import playwright_settings`` is the stable path users write. Owns the settings
(``settings``), the measured Playwright job (``job``) and its verdict in pages (``jobverdict``), the browser tree's
memory (``tree``, ``watch``), the pages handed to callbacks (``pages``) and the page slots held while a checkpoint
drains (``slots``).
May import: ``core`` and ``probes``.
"""

from pytest_crawlmem.browser.settings import BrowserNotFound, chromium_path, launch_options, playwright_settings

__all__ = ["BrowserNotFound", "chromium_path", "launch_options", "playwright_settings"]

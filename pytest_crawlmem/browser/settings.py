"""Settings for browser crawls: the installed Chromium, never a downloaded one (pure: no pytest, no Scrapy)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

PLAYWRIGHT_HANDLER = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
#: The environment variable naming the Chromium to use (an environment variable, not a Scrapy setting).
CHROMIUM_ENV = "CRAWLMEM_CHROMIUM"
#: Where Debian's ``chromium`` package puts the browser; ``$CRAWLMEM_CHROMIUM`` overrides it.
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
#: Headless Chromium on a CI box: no GPU process doing software GL, no /dev/shm exhaustion.
CHROMIUM_ARGS = ("--disable-gpu", "--disable-dev-shm-usage")


class BrowserNotFound(RuntimeError):
    """No Chromium executable is installed where the plugin looks for one."""


def chromium_path() -> str:
    """Return the installed Chromium: ``$CRAWLMEM_CHROMIUM``, then Debian's paths, then ``chromium`` on PATH."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        if not os.access(configured, os.X_OK):
            raise BrowserNotFound(f"{CHROMIUM_ENV}={configured!r} is not an executable file")
        return configured
    for candidate in CHROMIUM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    raise BrowserNotFound(
        f"no Chromium found (looked at ${CHROMIUM_ENV}, " + ", ".join(CHROMIUM_CANDIDATES) + " and PATH);"
        " install Debian's package: apt-get install chromium"
    )


def launch_options(user: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Playwright launch options with the installed Chromium and CI-safe flags; the user's keys win."""
    options: dict[str, Any] = {"headless": True, **(user or {})}
    if "executable_path" not in options and "channel" not in options:
        options["executable_path"] = chromium_path()
    args = list(options.get("args") or [])
    options["args"] = args + [flag for flag in CHROMIUM_ARGS if flag not in args]
    return options


def is_playwright_crawl(settings: Mapping[str, Any]) -> bool:
    """Whether plain settings route downloads through scrapy-playwright."""
    handlers = settings.get("DOWNLOAD_HANDLERS") or {}
    return any("scrapy_playwright" in str(value) for value in dict(handlers).values())


def playwright_settings(settings: Mapping[str, Any] | None = None, **launch: Any) -> dict[str, Any]:
    """Settings for a scrapy-playwright crawl on the installed Chromium, merged over ``settings``.

    ``launch`` adds Playwright launch options (``args=[...]``, ``slow_mo=...``).
    """
    merged = dict(settings or {})
    handlers = dict(merged.get("DOWNLOAD_HANDLERS") or {})
    handlers.setdefault("http", PLAYWRIGHT_HANDLER)
    handlers.setdefault("https", PLAYWRIGHT_HANDLER)
    merged["DOWNLOAD_HANDLERS"] = handlers
    merged["PLAYWRIGHT_LAUNCH_OPTIONS"] = launch_options({**dict(merged.get("PLAYWRIGHT_LAUNCH_OPTIONS") or {}), **launch})
    merged.setdefault("PLAYWRIGHT_BROWSER_TYPE", "chromium")
    return merged

"""The screenshot API of the fixture site: ``/shot?url=PATH&format=...`` renders a fixture page in Chromium (site process).

It behaves like the hosted screenshot services teams pay per capture: the answer carries the
image (or PDF) with ``X-Page-Verdict`` (clean, blank, bot-check, timeout, failed, cached) and
``X-Billed`` (``true`` only for clean captures, unless ``bill=`` asks the site to mis-bill, to
test a crawl's accounting). Chromium is the installed one, driven by Playwright (the
``browser`` extra), launched on the first capture and closed with the site. Also the pages
that provoke the verdicts which no other route provokes: ``/blank/<id>`` and ``/botcheck/<id>``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from fixture_sites.params import BadParameter, Query, choice_param, int_param
from fixture_sites.replies import Response, text_response

VERDICTS = ("clean", "blank", "bot-check", "timeout", "failed", "cached")
FORMATS = ("png", "jpeg", "webp", "pdf")
CONTENT_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp", "pdf": "application/pdf"}
VERDICT_HEADER = "X-Page-Verdict"
BILLED_HEADER = "X-Billed"
#: Status of a capture without an image: the page took too long, or could not be captured.
STATUS_BY_VERDICT = {"timeout": 504, "failed": 502}

MAX_URL_CHARS = 2000
DEFAULT_TIMEOUT_MS = 10_000
MAX_TIMEOUT_MS = 120_000
MAX_CONCURRENT_CAPTURES = 4
CACHE_MAX_BYTES = 64 * 1024 * 1024
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM_ARGS = ["--disable-gpu", "--disable-dev-shm-usage"]

_HEAD = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n'

#: What the renderer looks for to call a page a bot check (as hosted services detect interstitials).
_BOT_CHECK_JS = """() => {
  if (document.querySelector("[data-bot-check], #challenge-form")) return true;
  const text = (document.body && document.body.innerText || "").toLowerCase();
  return text.includes("verify you are human") || text.includes("checking your browser");
}"""
#: A page with no visible text and no media is blank.
_BLANK_JS = """() => {
  const body = document.body;
  if (!body) return true;
  if (body.querySelector("img, svg, canvas, video, iframe, object")) return false;
  return body.innerText.trim() === "";
}"""


def render_blank(page_id: int) -> bytes:
    """Render ``/blank/<id>``: a single-page app whose script fails before it draws anything."""
    script = 'const data = JSON.parse("{not json"); document.getElementById("app").textContent = data.title;'
    return (_HEAD.format(title=f"Blank page {page_id}") + f'<body>\n<div id="app"></div>\n<script>{script}</script>\n'
            "</body></html>\n").encode()


def render_botcheck(page_id: int) -> bytes:
    """Render ``/botcheck/<id>``: an interstitial asking the visitor to prove it is human."""
    body = (
        '<body>\n<div id="challenge-form" data-bot-check="1">\n<h1>Checking your browser before accessing the site</h1>\n'
        f'<p>Please verify you are human. Ray id {page_id:08x}.</p>\n</div>\n</body></html>\n'
    )
    return (_HEAD.format(title="Just a moment...") + body).encode()


@dataclass(frozen=True, slots=True)
class ShotRequest:
    """One capture asked of ``/shot``: the fixture-site path, format, viewport, render timeout and billing rule."""

    path: str
    image_format: str
    width: int
    height: int
    timeout_ms: int
    billed_verdicts: frozenset[str]

    @property
    def cache_key(self) -> tuple[str, str, int, int]:
        """Captures of the same page, format and viewport are answered from the cache."""
        return (self.path, self.image_format, self.width, self.height)


def parse_shot_query(query: Query) -> ShotRequest:
    """Validate the query of ``/shot``; raise :class:`BadParameter` naming the bad value."""
    path = query.get("url")
    if not path:
        raise BadParameter("url is required: the path of a fixture-site page, e.g. url=/catalog/product/1")
    if not path.startswith("/") or path.startswith("//") or len(path) > MAX_URL_CHARS:
        raise BadParameter(f"url must be a path on this site starting with '/', got {path[:60]!r}")
    if path.split("?", 1)[0].rstrip("/") == "/shot":
        raise BadParameter("url cannot be the /shot endpoint itself")
    billed = query.get("bill", "clean")
    verdicts = frozenset(VERDICTS) if billed == "all" else frozenset(v for v in billed.split(",") if v)
    unknown = sorted(verdicts - set(VERDICTS))
    if unknown:
        raise BadParameter(f"bill must be 'all' or verdicts from {','.join(VERDICTS)}, got {unknown[0][:40]!r}")
    return ShotRequest(
        path=path,
        image_format=choice_param(query, "format", FORMATS),
        width=int_param(query, "width", 800, 100, 4000),
        height=int_param(query, "height", 600, 100, 4000),
        timeout_ms=int_param(query, "timeout_ms", DEFAULT_TIMEOUT_MS, 100, MAX_TIMEOUT_MS),
        billed_verdicts=verdicts,
    )


def shot_response(request: ShotRequest, verdict: str, body: bytes, detail: str = "") -> Response:
    """The answer of ``/shot``: the capture (or a text reason) with the verdict and billing headers."""
    headers = ((VERDICT_HEADER, verdict), (BILLED_HEADER, "true" if verdict in request.billed_verdicts else "false"))
    if verdict in STATUS_BY_VERDICT:
        return text_response(STATUS_BY_VERDICT[verdict], f"{verdict}: {detail}", headers)
    return Response(200, body, CONTENT_TYPES[request.image_format], headers)


def chromium_executable() -> str | None:
    """The installed Chromium: ``$CRAWLMEM_CHROMIUM``, Debian's paths, then PATH (``None`` if none)."""
    configured = os.environ.get("CRAWLMEM_CHROMIUM")
    if configured:
        return configured
    for candidate in CHROMIUM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


class CaptureUnavailable(RuntimeError):
    """The site cannot render captures here (no Playwright, no Chromium): answered with HTTP 500."""


class ShotRenderer:
    """Renders captures in one headless Chromium shared by all requests, a few at a time, with a cache of clean ones."""

    def __init__(self, base_url: str = "", max_concurrent: int = MAX_CONCURRENT_CAPTURES) -> None:
        self.base_url = base_url  # set by the server once it has bound its port
        self._slots = asyncio.Semaphore(max_concurrent)
        self._launching: asyncio.Lock | None = None
        self._playwright: Any = None
        self._browser: Any = None
        self._cache: OrderedDict[tuple[str, str, int, int], bytes] = OrderedDict()
        self._cache_bytes = 0
        self.captures = 0

    async def answer(self, request: ShotRequest) -> Response:
        """Capture ``request.path`` (or answer from the cache) and return the reply with its verdict."""
        cached = self._cache.get(request.cache_key)
        if cached is not None:
            self._cache.move_to_end(request.cache_key)
            return shot_response(request, "cached", cached)
        try:
            browser = await self._ensure_browser()
        except CaptureUnavailable as error:
            return text_response(500, f"capture unavailable: {error}")
        async with self._slots:
            verdict, body, detail = await self._capture(browser, request)
        self.captures += 1
        if verdict == "clean":
            self._remember(request.cache_key, body)
        return shot_response(request, verdict, body, detail)

    async def _ensure_browser(self) -> Any:
        if self._browser is not None:
            return self._browser
        if self._launching is None:
            self._launching = asyncio.Lock()
        async with self._launching:
            if self._browser is None:
                self._browser = await self._launch()
        return self._browser

    async def _launch(self) -> Any:
        try:
            from playwright.async_api import async_playwright
        except ImportError as error:
            raise CaptureUnavailable("the /shot route renders with Playwright: pip install 'pytest-crawlmem[browser]'") from error
        executable = chromium_executable()
        if executable is None:
            raise CaptureUnavailable("no Chromium found ($CRAWLMEM_CHROMIUM, /usr/bin/chromium, PATH): apt-get install chromium")
        self._playwright = await async_playwright().start()
        try:
            return await self._playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        except Exception as error:
            await self._playwright.stop()
            self._playwright = None
            raise CaptureUnavailable(f"Chromium {executable} did not start: {str(error)[:300]}") from error

    async def _capture(self, browser: Any, request: ShotRequest) -> tuple[str, bytes, str]:
        """Load the page and classify it; return (verdict, image bytes, detail)."""
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        context = await browser.new_context(viewport={"width": request.width, "height": request.height})
        try:
            page = await context.new_page()
            try:
                response = await page.goto(self.base_url + request.path, timeout=request.timeout_ms, wait_until="load")
            except PlaywrightTimeout:
                return "timeout", b"", f"{request.path} did not load within {request.timeout_ms} ms"
            except PlaywrightError as error:
                return "failed", b"", f"{request.path} could not be loaded: {str(error).splitlines()[0][:200]}"
            if response is None or response.status >= 400:
                status = response.status if response is not None else "no response"
                return "failed", b"", f"{request.path} answered {status}"
            if await page.evaluate(_BOT_CHECK_JS):
                verdict = "bot-check"
            elif await page.evaluate(_BLANK_JS):
                verdict = "blank"
            else:
                verdict = "clean"
            return verdict, await _render(context, page, request.image_format), ""
        except PlaywrightError as error:
            return "failed", b"", f"capturing {request.path} failed: {str(error).splitlines()[0][:200]}"
        finally:
            await context.close()

    def _remember(self, key: tuple[str, str, int, int], body: bytes) -> None:
        self._cache[key] = body
        self._cache_bytes += len(body)
        while self._cache_bytes > CACHE_MAX_BYTES and self._cache:
            _, evicted = self._cache.popitem(last=False)
            self._cache_bytes -= len(evicted)

    async def aclose(self) -> None:
        """Close the browser and Playwright's driver (at site shutdown)."""
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        try:
            if browser is not None:
                await browser.close()
        finally:
            if playwright is not None:
                await playwright.stop()


async def _render(context: Any, page: Any, image_format: str) -> bytes:
    """The page as an image through the DevTools protocol (PNG, JPEG, WebP), or as a PDF."""
    if image_format == "pdf":
        pdf: bytes = await page.pdf()
        return pdf
    session = await context.new_cdp_session(page)
    reply = await session.send("Page.captureScreenshot", {"format": image_format})
    return base64.b64decode(reply["data"])

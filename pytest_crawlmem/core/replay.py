"""Replay of a recorded crawl, the pure part: its knobs, the crawl's settings, the checks of its outcome (pure).

The replay site is started by :mod:`pytest_crawlmem.harness.replay_site`; the Scrapy side (download handler,
copies middleware) lives in :mod:`pytest_crawlmem.replay.handler`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pytest_crawlmem.core.defaults import settings_of
from pytest_crawlmem.core.units import UnitError, parse_seconds, parse_size

REPLAY_MODULE = "fixture_sites.replay"
HANDLER_PATH = "pytest_crawlmem.replay_scrapy.ReplayDownloadHandler"
COPIES_MIDDLEWARE_PATH = "pytest_crawlmem.replay_scrapy.ReplayCopiesMiddleware"
COPIES_MIDDLEWARE_ORDER = 950  # nearest the spider: every other spider middleware sees copies as plain requests
COPY_PREFIX = "crawlmem-copy"  # the replay site's fixture_sites.replay.recording.COPY_PREFIX (tests check they agree)
_ERROR_PREFIX = "crawlmem-replay: bad recording: "  # fixture_sites.replay.server.ERROR_PREFIX
MAX_MISSED_URLS = 1_000
MAX_COPIES = 10_000


class ReplayError(ValueError):
    """A recording, a replay option or a replayed crawl that cannot be used; names the file and the first bad entry."""


@dataclass(frozen=True)
class ReplayKnobs:
    """Stress knobs of the replay site: seconds before each reply, body bytes per second (0: full speed), size factor."""

    latency_seconds: float = 0.0
    drip_bytes_per_second: int = 0
    inflate: float = 1.0

    def argv(self) -> list[str]:
        """Command-line arguments of the replay site for these knobs."""
        return ["--latency", repr(self.latency_seconds), "--drip", str(self.drip_bytes_per_second),
                "--inflate", repr(self.inflate)]


@dataclass(frozen=True)
class ReplayTarget:
    """A running replay site as the crawl sees it: its URL, the copies to serve, the recording's summary."""

    url: str
    copies: int
    recording: str
    summary: Mapping[str, Any] = field(default_factory=dict)
    item_keys: tuple[str, ...] = ()  # item fields made distinct per copy (crawl(replay_item_keys=...))


def parse_knobs(latency: object = None, drip: object = None, inflate: object = None) -> ReplayKnobs:
    """Check ``crawl()``'s knobs: ``replay_latency`` seconds, ``replay_drip`` bytes per second, ``replay_inflate`` >= 1."""
    try:
        latency_seconds = parse_seconds(latency, source="replay_latency") if latency not in (None, 0) else 0.0
        drip_rate = parse_size(drip, source="replay_drip (bytes per second)") if drip is not None else 0
    except UnitError as exc:
        raise ReplayError(str(exc)) from None
    factor = 1.0 if inflate is None else inflate
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 <= factor <= 1000:
        raise ReplayError(f"invalid replay_inflate {inflate!r}: expected a factor from 1 to 1000 (2: bodies twice their size)")
    return ReplayKnobs(latency_seconds, drip_rate, float(factor))


def check_copies(copies: object) -> int:
    """Return ``replay_copies`` as an int from 1 to MAX_COPIES, or raise naming the value."""
    if isinstance(copies, bool) or not isinstance(copies, int) or not 1 <= copies <= MAX_COPIES:
        raise ReplayError(f"invalid replay_copies {copies!r}: expected a whole number from 1 to {MAX_COPIES:,}")
    return copies


def replay_settings(settings: Mapping[str, Any], target: ReplayTarget) -> dict[str, Any]:
    """The settings a replayed crawl needs, merged over ``settings``: the replay handler for http(s), the copies middleware.

    Other network schemes are switched off and the HTTP cache too (it would answer before the replay site).
    """
    handlers = dict(settings.get("DOWNLOAD_HANDLERS") or {})
    browser = [f"{scheme}: {path}" for scheme, path in handlers.items() if "scrapy_playwright" in str(path)]
    if browser:
        raise ReplayError(
            f"replay serves Scrapy's own HTTP downloads, not a browser's; this crawl downloads with {', '.join(browser)}:"
            " replay its pages without scrapy-playwright, or measure the browser against the fixture site"
        )
    handlers.update({"http": HANDLER_PATH, "https": HANDLER_PATH, "ftp": None, "s3": None})
    middlewares = dict(settings.get("SPIDER_MIDDLEWARES") or {})
    middlewares[COPIES_MIDDLEWARE_PATH] = COPIES_MIDDLEWARE_ORDER
    return {
        "DOWNLOAD_HANDLERS": handlers,
        "SPIDER_MIDDLEWARES": middlewares,
        "HTTPCACHE_ENABLED": False,
        **settings_of(replay_url=target.url, replay_copies=target.copies,
                      replay_item_keys=",".join(target.item_keys) or None),
    }


def copy_url(url: str, copy: int) -> str:
    """Return ``url`` on copy ``copy``'s host (``crawlmem-copyK.<host>``); copy 0 is the URL itself."""
    if copy == 0:
        return url
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{userinfo}{at}{COPY_PREFIX}{copy}.{hostport}").geturl()


def copy_of(url: str) -> int:
    """The copy ``url`` belongs to: K for a host ``crawlmem-copyK.<host>``, 0 for any other URL."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return 0
    prefix, dot, _ = host.partition(".")
    number = prefix[len(COPY_PREFIX):]
    return int(number) if dot and prefix.startswith(COPY_PREFIX) and number.isdigit() else 0


def original_url(url: str) -> str:
    """``url`` on the host its copy copies (``https://crawlmem-copy3.www.shop.example/p/1`` ->
    ``https://www.shop.example/p/1``); any other URL as it is."""
    copy = copy_of(url)
    if not copy:
        return url
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.replace(f"{COPY_PREFIX}{copy}.", "", 1)).geturl()


def _host(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ""
    host = (parts.hostname or "").lower()
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return host if port in (None, default) else f"{host}:{port}"


def check_start_urls(target: ReplayTarget, start_urls: Sequence[str] | None) -> None:
    """Refuse a crawl whose start URLs are on none of the recorded hosts (it would replay nothing)."""
    hosts = set(target.summary.get("hosts", ()))
    urls = [u for u in start_urls or () if isinstance(u, str)]
    if not urls or not hosts or any(_host(u) in hosts for u in urls):
        return
    raise ReplayError(
        f"replay recording {target.recording} holds none of the hosts the spider starts on: the first start URL is"
        f" {urls[0]}, the recording holds {_hosts_text(hosts)} (its first entry: {target.summary.get('first_url')})"
    )


def check_outcome(target: ReplayTarget, hits: int, misses: int, missed_urls: Sequence[str]) -> None:
    """Refuse a replayed crawl that found none of its URLs in the recording: it measured 404 pages."""
    if hits or not misses:
        return
    hosts = set(target.summary.get("hosts", ()))
    raise ReplayError(
        f"replay recording {target.recording} answered none of the crawl's {misses:,} requests: the first was"
        f" {missed_urls[0] if missed_urls else '?'}, the recording holds {_hosts_text(hosts)}"
        f" (its first entry: {target.summary.get('first_url')}); record this spider's crawl, or check its start URLs"
    )


def _hosts_text(hosts: set[str], shown: int = 5) -> str:
    names = sorted(hosts)
    more = f" and {len(names) - shown:,} more" if len(names) > shown else ""
    return "hosts " + ", ".join(names[:shown]) + more if names else "no hosts"

"""The replay site's request handler: recorded replies for absolute URLs, 404 for the rest (replay process).

The crawl's download handler asks for ``http://127.0.0.1:PORT/<absolute URL>``; a host
``crawlmem-copyK.<host>`` is copy K of ``<host>``. Every reply carries
``X-Crawlmem-Replay: hit`` or ``miss``, which the crawl side counts and removes.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlsplit, urlunsplit

from fixture_sites.protocol import Request
from fixture_sites.replay.load import Recording
from fixture_sites.replay.recording import Exchange, split_copy
from fixture_sites.replay.transform import host_pattern, served
from fixture_sites.replies import Pending, Reply, Response, Streamed, text_response
from fixture_sites.routes import write_paced

MARKER_HEADER = "X-Crawlmem-Replay"
CONTROL_PREFIX = "/__crawlmem__/"
_DRIP_TICK_SECONDS = 0.05
_CACHED_COPIES = 64  # transformed bodies of copies 1..64 are kept; higher copies are rebuilt per request


@dataclass(frozen=True)
class Knobs:
    """Stress knobs: seconds before each reply, body bytes per second (0 = full speed), body size factor."""

    latency_seconds: float = 0.0
    drip_bytes_per_second: int = 0
    inflate: float = 1.0


class ReplaySite:
    """Answers requests from a :class:`Recording`, counting hits and misses."""

    def __init__(self, recording: Recording, knobs: Knobs = Knobs()) -> None:
        self.recording = recording
        self.knobs = knobs
        self.hits = 0
        self.misses = 0
        self._pattern = host_pattern(recording.hosts)
        self._bodies: dict[tuple[int, int], tuple[str, tuple[tuple[str, str], ...], bytes]] = {}

    def __call__(self, request: Request) -> Reply:
        target = request.target
        if target.startswith(CONTROL_PREFIX):
            return self._control(target[len(CONTROL_PREFIX):])
        url = target[1:]
        if not url.startswith(("http://", "https://")):
            return text_response(400, f"crawlmem replay: expected /<absolute http(s) URL>, got {target[:200]}")
        copy, original = _original_url(url)
        exchange = self.recording.find(request.method, original)
        if exchange is None:
            self.misses += 1
            reply: Response | Streamed = text_response(404, f"crawlmem replay: not recorded: {request.method} {original}",
                                                       ((MARKER_HEADER, "miss"),))
        else:
            self.hits += 1
            reply = self._reply(exchange, copy)
        return self._paced(reply)

    def _reply(self, exchange: Exchange, copy: int) -> Response | Streamed:
        key = (id(exchange), copy)
        cached = self._bodies.get(key)
        if cached is None:
            cached = served(exchange, copy=copy, factor=self.knobs.inflate, pattern=self._pattern)
            if copy <= _CACHED_COPIES:
                self._bodies[key] = cached
        content_type, headers, body = cached
        headers = (*headers, (MARKER_HEADER, "hit"))
        rate = self.knobs.drip_bytes_per_second
        if rate and body:
            piece = max(1, int(rate * _DRIP_TICK_SECONDS))
            chunks = [body[i:i + piece] for i in range(0, len(body), piece)]
            produce = partial(write_paced, chunks, len(chunks), len(body) / rate)
            return Streamed(exchange.status, content_type, produce, len(body), headers)
        return Response(exchange.status, body, content_type, headers)

    def _paced(self, reply: Response | Streamed) -> Reply:
        delay = self.knobs.latency_seconds
        if not delay:
            return reply

        async def resolve() -> Response | Streamed:
            await asyncio.sleep(delay)
            return reply

        return Pending(resolve)

    def _control(self, command: str) -> Response:
        if command.split("?")[0] == "summary":
            data = {**self.recording.summary(), "hits": self.hits, "misses": self.misses}
            return Response(200, json.dumps(data).encode(), "application/json")
        return text_response(404, f"crawlmem replay: unknown control command {command[:100]!r}")


def _original_url(url: str) -> tuple[int, str]:
    """Return the copy number and the URL with the copy prefix taken off its host."""
    parts = urlsplit(url)
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    copy, host = split_copy(hostport)
    if copy == 0:
        return 0, url
    return copy, urlunsplit((parts.scheme, f"{userinfo}{at}{host}", parts.path, parts.query, parts.fragment))

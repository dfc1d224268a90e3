"""Recorded exchanges, the errors of bad recordings, and URL keys (replay process; pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

Headers = tuple[tuple[str, str], ...]

#: Host prefix of copy K (K >= 1): ``crawlmem-copy3.www.shop.example`` is copy 3 of ``www.shop.example``.
COPY_PREFIX = "crawlmem-copy"
_COPY_HOST = re.compile(rf"^{COPY_PREFIX}(\d+)\.(.+)$")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Headers that describe the recorded transfer, not the page: the replay server frames bodies itself.
FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "date", "server"})


class RecordingError(ValueError):
    """A recording that cannot be replayed; the message names the file and the first bad entry."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded request and its response; ``body`` is as sent, encoded per its Content-Encoding header."""

    method: str
    url: str
    status: int
    headers: Headers
    body: bytes
    source: str  # where it came from, for messages: "shop.har: entries[3]"

    def header(self, name: str) -> str | None:
        """Return the first value of header ``name`` (case-insensitive), ``None`` when absent."""
        lowered = name.lower()
        return next((value for key, value in self.headers if key.lower() == lowered), None)


def split_copy(host: str) -> tuple[int, str]:
    """Return ``(copy, original host)``: copy 0 for a host without the copy prefix."""
    match = _COPY_HOST.match(host)
    if match is None:
        return 0, host
    return int(match[1]), match[2]


def url_key(url: str) -> str | None:
    """Return the lookup key of an absolute http(s) URL, ``None`` for anything else.

    Scheme and host lowercased, default port and fragment dropped, query arguments
    sorted (as Scrapy's request fingerprint treats them).
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return urlunsplit((scheme, netloc, parts.path or "/", query, ""))


def check_exchange(method: object, url: object, status: object, source: str) -> tuple[str, str, int]:
    """Validate the request line and status of one entry; raise :class:`RecordingError` naming ``source``."""
    if not isinstance(url, str) or url_key(url) is None:
        raise RecordingError(f"{source}: URL {url!r} is not an absolute http(s) URL")
    if not isinstance(method, str) or not method.isalpha():
        raise RecordingError(f"{source}: method {method!r} of {url} is not an HTTP method")
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise RecordingError(f"{source}: status {status!r} of {url} is not an HTTP status (100-599)")
    return method.upper(), url, status

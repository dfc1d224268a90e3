"""What the replay server does to a recorded body: copies' host rewriting and inflation (replay process; pure)."""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterable

from fixture_sites.replay.recording import COPY_PREFIX, FRAMING_HEADERS, Exchange, Headers

_TEXTUAL = re.compile(r"^(text/|application/(.*\+)?(json|xml|javascript|ecmascript|x-javascript)|image/svg)", re.I)
_URL_HEADERS = frozenset({"location", "content-location", "refresh", "link"})
#: The 4-byte comment that wraps an HTML body's padding: ``<!--`` + filler + ``-->``.
_HTML_PAD_OPEN, _HTML_PAD_CLOSE = b"<!--", b"-->"


def host_pattern(hosts: Iterable[str]) -> re.Pattern[bytes] | None:
    """Match the empty string before a recorded host in an absolute or scheme-relative URL (also JSON-escaped ``\\/\\/``)."""
    names = sorted({h.split(":")[0] for h in hosts if h}, key=len, reverse=True)
    if not names:
        return None
    alternation = b"|".join(re.escape(n.encode("ascii", "ignore")) for n in names)
    return re.compile(rb"(?:(?<=//)|(?<=\\/\\/))(?=(?:" + alternation + rb")(?:[:/?#\"'\s<>\\)]|$))", re.I)


def rewrite_hosts(data: bytes, pattern: re.Pattern[bytes] | None, copy: int) -> bytes:
    """Put copy ``copy``'s host prefix before every recorded host in ``data``."""
    if pattern is None or copy == 0:
        return data
    return pattern.sub(f"{COPY_PREFIX}{copy}.".encode(), data)


def decode(body: bytes, encoding: str) -> bytes | None:
    """Undo a Content-Encoding (gzip, deflate, br and zstd when their modules are installed); ``None`` when it can't."""
    encoding = encoding.strip().lower()
    try:
        if encoding in ("", "identity"):
            return body
        if encoding in ("gzip", "x-gzip"):
            return gzip.decompress(body)
        if encoding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)
        if encoding == "br":
            import brotli

            return bytes(brotli.decompress(body))
    except Exception:  # a body that does not decode is served as recorded
        return None
    return None


def encode(body: bytes, encoding: str) -> bytes | None:
    """Apply a Content-Encoding again after a transform; ``None`` when it can't."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        return gzip.compress(body, compresslevel=6, mtime=0)
    if encoding == "deflate":
        return zlib.compress(body)
    if encoding == "br":
        try:
            import brotli
        except ImportError:
            return None
        return bytes(brotli.compress(body))
    return None


def inflate(body: bytes, factor: float, content_type: str) -> bytes:
    """Pad ``body`` to ``factor`` times its size: an HTML comment after HTML, spaces after text, zeros after binary."""
    extra = int(len(body) * (factor - 1))
    if extra <= 0:
        return body
    lowered = content_type.lower()
    if "html" in lowered:
        filler = max(0, extra - len(_HTML_PAD_OPEN) - len(_HTML_PAD_CLOSE))
        return body + _HTML_PAD_OPEN + b" crawlmem" * (filler // 9) + b" " * (filler % 9) + _HTML_PAD_CLOSE
    return body + (b" " if _TEXTUAL.match(lowered) else b"\0") * extra


def served(exchange: Exchange, *, copy: int, factor: float, pattern: re.Pattern[bytes] | None) -> tuple[str, Headers, bytes]:
    """Return the content type, headers and body to serve for ``exchange`` as copy ``copy`` inflated ``factor`` times."""
    content_type = exchange.header("content-type") or ""
    headers = tuple((k, v) for k, v in exchange.headers if k.lower() not in FRAMING_HEADERS and k.lower() != "content-type")
    if copy == 0 and factor == 1:
        return content_type, headers, exchange.body
    if copy:
        headers = tuple(
            (k, rewrite_hosts(v.encode("latin-1"), pattern, copy).decode("latin-1")) if k.lower() in _URL_HEADERS else (k, v)
            for k, v in headers
        )
    encoding = exchange.header("content-encoding") or ""
    body = decode(exchange.body, encoding)
    if body is None:  # an encoding this process cannot undo: links stay as recorded, no padding
        return content_type, headers, exchange.body
    if copy and _TEXTUAL.match(content_type):
        body = rewrite_hosts(body, pattern, copy)
    body = inflate(body, factor, content_type)
    encoded = encode(body, encoding)
    return content_type, headers, encoded if encoded is not None else exchange.body

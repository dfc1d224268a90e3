"""Small generated pages: index, slow, explode, status and not-found (site process)."""

from __future__ import annotations

from html import escape

from fixture_sites import limits
from fixture_sites.protocol import status_reason

_HEAD = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n<body>\n'
_TAIL = "</body></html>\n"

ROUTE_TABLE: tuple[tuple[str, str, str], ...] = (
    (
        "/catalog/?pages=N&per_page=M&page=i",
        "/catalog/?pages=3&per_page=5",
        "listing page i of N with M product links and a next link; "
        f"pages*per_page <= {limits.CATALOG_MAX_PRODUCTS:,}, per_page <= {limits.CATALOG_MAX_PER_PAGE:,}",
    ),
    ("/catalog/product/<id>", "/catalog/product/1", "product detail: h1.name, span.price, div.description"),
    (
        "/large/<id>?kb=K",
        "/large/1?kb=64",
        f"structured HTML of exactly K KiB (default 256, max {limits.LARGE_MAX_KB:,})",
    ),
    (
        "/oversized/<id>?kb=K&mode=declared|chunked",
        "/oversized/1?kb=4096&mode=chunked",
        f"K KiB body with Content-Length or chunked (default 2048, max {limits.OVERSIZED_MAX_KB:,})",
    ),
    (
        "/bomb/<id>?mb=M",
        "/bomb/1?mb=64",
        f"gzip body inflating to exactly M MiB (default 64, max {limits.BOMB_MAX_MB:,})",
    ),
    ("/slow/<id>?ms=D", "/slow/1?ms=500", f"small page after D ms (max {limits.MAX_DELAY_MS:,})"),
    (
        "/drip/<id>?kb=K&ms=D",
        "/drip/1?kb=64&ms=1000",
        f"K KiB trickled over D ms (max {limits.DRIP_MAX_KB:,} KiB)",
    ),
    (
        "/explode/<id>?fanout=k",
        "/explode/0?fanout=10",
        f"links to k new pages (max fanout {limits.EXPLODE_MAX_FANOUT:,})",
    ),
    (
        "/status/<code>?retry_after=S",
        "/status/503?retry_after=5",
        "answers with status code 200..599 and optional Retry-After",
    ),
    (
        "/media/<id>.jpg?kb=K",
        "/media/1.jpg?kb=32",
        f"JPEG of exactly K KiB (default 32, max {limits.MEDIA_MAX_KB:,})",
    ),
    ("/media/missing/<id>.jpg", "/media/missing/1.jpg", "always 404"),
    (
        "/js/<id>?mode=render|alloc|socket|store&kb=K",
        "/js/1",
        "page built by JavaScript; alloc keeps allocating; socket opens an EventSource",
    ),
    (
        "/nested/<id>?depth=D&kb=K",
        "/nested/1?depth=50&kb=64",
        f"K KiB of blocks nested D elements deep (default 50, max {limits.NESTED_MAX_DEPTH:,})",
    ),
    (
        "/shot?url=PATH&format=png|jpeg|webp|pdf",
        "/shot?url=/catalog/product/1&format=png",
        "capture of a page of this site in Chromium; X-Page-Verdict clean|blank|bot-check|timeout|failed|cached,"
        " X-Billed true for clean; timeout_ms=T, width=W, height=H, bill=all|VERDICT,...",
    ),
    ("/blank/<id>", "/blank/1", "a page whose script fails before drawing: a blank capture"),
    ("/botcheck/<id>", "/botcheck/1", "a bot-check interstitial: a bot-check capture"),
    (
        "/json/<id>?kb=K",
        "/json/1?kb=64",
        f"JSON document of exactly K KiB: records, then padding (default 256, max {limits.LARGE_MAX_KB:,})",
    ),
    (
        "/js/stream/<id>?ms=D",
        "/js/stream/1",
        "text/event-stream, one event every D ms (default 1000) until the client leaves",
    ),
)


def render_index() -> bytes:
    """Render ``/``: every route with an example link."""
    rows = "".join(
        f'<li><code>{escape(pattern)}</code>: <a href="{escape(example)}">{escape(example)}</a> {escape(about)}</li>\n'
        for pattern, example, about in ROUTE_TABLE
    )
    title = "fixture site"
    return (_HEAD.format(title=title) + f'<h1>{title}</h1>\n<ul class="routes">\n{rows}</ul>\n' + _TAIL).encode()


def render_slow(page_id: int, delay_ms: int) -> bytes:
    """Render the small page ``/slow/<id>`` answers after its delay."""
    title = f"Slow page {page_id}"
    return (_HEAD.format(title=title) + f'<h1>{title}</h1>\n<p class="delay">{delay_ms} ms</p>\n' + _TAIL).encode()


def explode_children(node: int, fanout: int) -> range:
    """Return the ids of the children of ``node``: unique across the whole tree."""
    first = node * fanout + 1
    if len(str(first + fanout)) > limits.EXPLODE_MAX_ID_DIGITS:
        return range(0)
    return range(first, first + fanout)


def render_explode(node: int, fanout: int) -> bytes:
    """Render ``/explode/<id>``: links to ``fanout`` new pages (none past the id-length cap)."""
    links = "".join(
        f'<li><a class="child" href="/explode/{child}?fanout={fanout}">node {child}</a></li>\n'
        for child in explode_children(node, fanout)
    )
    title = f"Explode node {node}"
    body = f'<h1>Explode node</h1>\n<ul class="children">\n{links}</ul>\n'
    return (_HEAD.format(title=title) + body + _TAIL).encode()


def render_status(code: int) -> bytes:
    """Render the body of ``/status/<code>``."""
    title = f"{code} {status_reason(code)}"
    return (_HEAD.format(title=title) + f'<h1 class="status">{title}</h1>\n' + _TAIL).encode()


def render_not_found(path: str) -> bytes:
    """Render the 404 page."""
    return (_HEAD.format(title="Not found") + f"<h1>Not found</h1>\n<p>{escape(path[:200])}</p>\n" + _TAIL).encode()

"""URL routing and parameter validation: maps a request to a reply (site process)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from functools import partial

from fixture_sites import limits
from fixture_sites.bodies import html_chunks, rechunk
from fixture_sites.bomb import BombCache
from fixture_sites.cache import PageCache
from fixture_sites.catalog import render_listing, render_product
from fixture_sites.js import JS_MODES, event_stream, render_js_page
from fixture_sites.jsondoc import json_chunks
from fixture_sites.media import jpeg_chunks
from fixture_sites.nested import nested_chunks
from fixture_sites.pages import render_explode, render_index, render_not_found, render_slow, render_status
from fixture_sites.params import BadParameter, Query, checked_int, choice_param, int_param, parse_query
from fixture_sites.protocol import Request
from fixture_sites.replies import HTML, BodyWriter, Pending, Reply, Response, Streamed, text_response
from fixture_sites.shots import ShotRenderer, parse_shot_query, render_blank, render_botcheck

RouteHandler = Callable[["re.Match[str]", Query], Reply]

_ID = rf"(\d{{1,{limits.MAX_ID_DIGITS}}})"
_EXPLODE_ID = rf"(\d{{1,{limits.EXPLODE_MAX_ID_DIGITS}}})"


async def write_all(chunks: Iterable[bytes], writer: BodyWriter) -> None:
    """Write every chunk of a lazily generated body, honouring backpressure."""
    for chunk in chunks:
        await writer.write(chunk)


async def write_paced(chunks: Iterable[bytes], count: int, duration_seconds: float, writer: BodyWriter) -> None:
    """Write ``count`` chunks evenly over ``duration_seconds``, the last one at the end."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for index, chunk in enumerate(chunks, start=1):
        await asyncio.sleep(max(0.0, start + duration_seconds * index / count - loop.time()))
        await writer.write(chunk)


class Site:
    """The fixture site's request handler: deterministic content for one seed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.pages = PageCache()
        self.bombs = BombCache()
        self.shots = ShotRenderer()  # its base_url is set once the server has bound its port
        self._routes: dict[str, list[tuple[re.Pattern[str], RouteHandler]]] = {}
        table: list[tuple[str, RouteHandler]] = [
            (r"/", self.index),
            (r"/catalog", self.catalog_redirect),
            (r"/catalog/", self.catalog),
            (rf"/catalog/product/{_ID}", self.product),
            (rf"/large/{_ID}", self.large),
            (rf"/oversized/{_ID}", self.oversized),
            (rf"/bomb/{_ID}", self.bomb),
            (rf"/slow/{_ID}", self.slow),
            (rf"/drip/{_ID}", self.drip),
            (rf"/explode/{_EXPLODE_ID}", self.explode),
            (r"/status/([^/]*)", self.status),
            (rf"/media/{_ID}\.jpg", self.media),
            (rf"/js/{_ID}", self.js_page),
            (rf"/js/stream/{_ID}", self.js_stream),
            (rf"/nested/{_ID}", self.nested),
            (r"/shot", self.shot),
            (rf"/blank/{_ID}", self.blank),
            (rf"/botcheck/{_ID}", self.botcheck),
            (rf"/json/{_ID}", self.json_document),
        ]
        for pattern, handler in table:
            key = pattern.split("/")[1]
            self._routes.setdefault(key, []).append((re.compile(pattern), handler))

    def __call__(self, request: Request) -> Reply:
        """Answer one request (GET and HEAD only)."""
        if request.method not in ("GET", "HEAD"):
            return text_response(405, f"method {request.method[:20]} not allowed", (("Allow", "GET, HEAD"),))
        target = request.target
        if target.startswith(("http://", "https://")):
            target = "/" + target.split("/", 3)[3] if target.count("/") >= 3 else "/"
        path, _, raw_query = target.partition("?")
        key = path.split("/", 2)[1] if path.startswith("/") else ""
        for pattern, handler in self._routes.get(key, ()):
            match = pattern.fullmatch(path)
            if match is not None:
                try:
                    return handler(match, parse_query(raw_query))
                except BadParameter as error:
                    return text_response(400, str(error))
        return Response(404, render_not_found(path))

    def _page(self, key: tuple[object, ...], render: Callable[[], bytes]) -> Response:
        """Return a cached small HTML page."""
        return Response(200, self.pages.get_or_render(key, render))

    def index(self, match: re.Match[str], query: Query) -> Reply:
        """``/``: the route list."""
        return self._page(("index",), render_index)

    def catalog_redirect(self, match: re.Match[str], query: Query) -> Reply:
        """``/catalog``: redirect to ``/catalog/`` keeping the query."""
        location = "/catalog/" + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
        return Response(301, b"", HTML, (("Location", location),))

    def catalog(self, match: re.Match[str], query: Query) -> Reply:
        """``/catalog/?pages=N&per_page=M&page=i``: one listing page."""
        pages = int_param(query, "pages", 10, 1, limits.CATALOG_MAX_PRODUCTS)
        per_page = int_param(query, "per_page", 20, 1, limits.CATALOG_MAX_PER_PAGE)
        if pages * per_page > limits.CATALOG_MAX_PRODUCTS:
            raise BadParameter(f"pages*per_page must be at most {limits.CATALOG_MAX_PRODUCTS}, got {pages * per_page}")
        page = int_param(query, "page", 1, 1, pages)
        return self._page(("catalog", pages, per_page, page), partial(render_listing, self.seed, pages, per_page, page))

    def product(self, match: re.Match[str], query: Query) -> Reply:
        """``/catalog/product/<id>``: one product's detail page."""
        product_id = int(match[1])
        return self._page(("product", product_id), partial(render_product, self.seed, product_id))

    def large(self, match: re.Match[str], query: Query) -> Reply:
        """``/large/<id>?kb=K``: structured HTML of exactly K KiB, streamed."""
        page_id = int(match[1])
        kb = int_param(query, "kb", 256, 1, limits.LARGE_MAX_KB)
        total = kb * limits.KIB
        chunks = html_chunks(self.seed, page_id, f"Large page {page_id}", total, limits.STREAM_CHUNK_BYTES)
        return Streamed(200, HTML, partial(write_all, chunks), total)

    def oversized(self, match: re.Match[str], query: Query) -> Reply:
        """``/oversized/<id>?kb=K&mode=declared|chunked``: a big body with or without Content-Length."""
        page_id = int(match[1])
        kb = int_param(query, "kb", 2048, 1, limits.OVERSIZED_MAX_KB)
        mode = choice_param(query, "mode", ("declared", "chunked"))
        total = kb * limits.KIB
        chunk_bytes = min(limits.STREAM_CHUNK_BYTES, max(limits.KIB, total // 8))
        chunks = html_chunks(self.seed, page_id, f"Oversized page {page_id}", total, chunk_bytes)
        if mode == "chunked":
            return Streamed(200, HTML, partial(write_all, rechunk(chunks, chunk_bytes)), None)
        return Streamed(200, HTML, partial(write_all, chunks), total)

    def bomb(self, match: re.Match[str], query: Query) -> Reply:
        """``/bomb/<id>?mb=M``: a gzip body that inflates to exactly M MiB."""
        mebibytes = int_param(query, "mb", 64, 1, limits.BOMB_MAX_MB)

        async def resolve() -> Response:
            body = await self.bombs.get(mebibytes)
            return Response(200, body, HTML, (("Content-Encoding", "gzip"),))

        return Pending(resolve)

    def slow(self, match: re.Match[str], query: Query) -> Reply:
        """``/slow/<id>?ms=D``: a small page after D ms."""
        page_id = int(match[1])
        delay_ms = int_param(query, "ms", 500, 0, limits.MAX_DELAY_MS)
        body = self.pages.get_or_render(("slow", page_id, delay_ms), partial(render_slow, page_id, delay_ms))

        async def resolve() -> Response:
            await asyncio.sleep(delay_ms / 1000)
            return Response(200, body)

        return Pending(resolve)

    def drip(self, match: re.Match[str], query: Query) -> Reply:
        """``/drip/<id>?kb=K&ms=D``: K KiB trickled in even pieces over D ms."""
        page_id = int(match[1])
        kb = int_param(query, "kb", 64, 1, limits.DRIP_MAX_KB)
        duration_ms = int_param(query, "ms", 1000, 0, limits.MAX_DELAY_MS)
        total = kb * limits.KIB
        count = max(1, min(total // 256, duration_ms // 10, 1000))
        piece_bytes = -(-total // count)
        count = -(-total // piece_bytes)
        chunks = rechunk(html_chunks(self.seed, page_id, f"Drip page {page_id}", total, piece_bytes), piece_bytes)
        return Streamed(200, HTML, partial(write_paced, chunks, count, duration_ms / 1000), total)

    def explode(self, match: re.Match[str], query: Query) -> Reply:
        """``/explode/<id>?fanout=k``: links to k new pages with tree-unique ids."""
        node = int(match[1])
        fanout = int_param(query, "fanout", 10, 0, limits.EXPLODE_MAX_FANOUT)
        return self._page(("explode", node, fanout), partial(render_explode, node, fanout))

    def status(self, match: re.Match[str], query: Query) -> Reply:
        """``/status/<code>?retry_after=S``: that status code, with Retry-After if asked."""
        code = checked_int(match[1], "code", 200, 599, max_digits=3)
        retry_after = int_param(query, "retry_after", -1, 0, limits.RETRY_AFTER_MAX_SECONDS)
        headers = (("Retry-After", str(retry_after)),) if retry_after >= 0 else ()
        body = self.pages.get_or_render(("status", code), partial(render_status, code))
        return Response(code, body, HTML, headers)

    def media(self, match: re.Match[str], query: Query) -> Reply:
        """``/media/<id>.jpg?kb=K``: a decodable JPEG of exactly K KiB."""
        image_id = int(match[1])
        kb = int_param(query, "kb", 32, 1, limits.MEDIA_MAX_KB)
        total = kb * limits.KIB
        return Streamed(200, "image/jpeg", partial(write_all, jpeg_chunks(self.seed, image_id, total)), total)

    def js_page(self, match: re.Match[str], query: Query) -> Reply:
        """``/js/<id>?mode=render|alloc|socket|store&kb=K``: a page built or driven by JavaScript (``store`` keeps K
        KiB in IndexedDB first)."""
        page_id = int(match[1])
        mode = choice_param(query, "mode", JS_MODES)
        kb = int_param(query, "kb", 1024, 1, limits.JS_STORE_MAX_KB)
        return self._page(("js", page_id, mode, kb), partial(render_js_page, self.seed, page_id, mode, kb))

    def js_stream(self, match: re.Match[str], query: Query) -> Reply:
        """``/js/stream/<id>?ms=D``: server-sent events every D ms until the client disconnects."""
        stream_id = int(match[1])
        interval_ms = int_param(query, "ms", 1000, limits.STREAM_MIN_INTERVAL_MS, limits.MAX_DELAY_MS)

        async def produce(writer: BodyWriter) -> None:
            await event_stream(writer, stream_id, interval_ms / 1000)

        return Streamed(200, "text/event-stream", produce, None, (("Cache-Control", "no-cache"),))

    def nested(self, match: re.Match[str], query: Query) -> Reply:
        """``/nested/<id>?depth=D&kb=K``: K KiB of blocks nested D elements deep, streamed."""
        page_id = int(match[1])
        depth = int_param(query, "depth", 50, 1, limits.NESTED_MAX_DEPTH)
        kb = int_param(query, "kb", 256, 1, limits.LARGE_MAX_KB)
        total = kb * limits.KIB
        return Streamed(200, HTML, partial(write_all, nested_chunks(page_id, depth, total, limits.STREAM_CHUNK_BYTES)), total)

    def shot(self, match: re.Match[str], query: Query) -> Reply:
        """``/shot?url=PATH&format=png|jpeg|webp|pdf``: a capture of a page of this site, with its verdict and billing."""
        request = parse_shot_query(query)
        renderer = self.shots

        async def resolve() -> Response:
            return await renderer.answer(request)

        return Pending(resolve)

    def blank(self, match: re.Match[str], query: Query) -> Reply:
        """``/blank/<id>``: a page whose script fails before it draws anything (a blank capture)."""
        page_id = int(match[1])
        return self._page(("blank", page_id), partial(render_blank, page_id))

    def botcheck(self, match: re.Match[str], query: Query) -> Reply:
        """``/botcheck/<id>``: a bot-check interstitial (a bot-check capture)."""
        page_id = int(match[1])
        return self._page(("botcheck", page_id), partial(render_botcheck, page_id))

    def json_document(self, match: re.Match[str], query: Query) -> Reply:
        """``/json/<id>?kb=K``: a JSON document of exactly K KiB (records, then padding), streamed."""
        doc_id = int(match[1])
        kb = int_param(query, "kb", 256, 1, limits.LARGE_MAX_KB)
        chunks = json_chunks(doc_id, kb * limits.KIB, limits.STREAM_CHUNK_BYTES)
        return Streamed(200, "application/json", partial(write_all, chunks), kb * limits.KIB)

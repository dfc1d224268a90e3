"""A stand-in for the shop's real web site, to record a crawl from (its own process).

The real https://www.acme-shop.example is not on this machine, so this server plays it:
deterministic pages for ``--products N`` products, gzip when asked, cookies, a redirect,
robots.txt, a sitemap. It answers requests of the form ``GET /https://www.acme-shop.example/path``,
which is what the replay download handler sends, so the shop spider runs unchanged against
it with ``-s CRAWLMEM_REPLAY_URL=<this server>``. ``record_origin.py`` uses it to write the
committed recording. Run: ``python origin.py --products 40`` (prints its URL).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import random
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HOST = "www.acme-shop.example"
BASE = f"https://{HOST}"
CATEGORIES = ("kitchen", "garden", "tools", "lighting")
PER_PAGE = 12
WORDS = (
    "steel", "oak", "handy", "compact", "quiet", "robust", "bright", "sleek", "matte", "durable",
    "classic", "modern", "foldable", "portable", "premium", "rustic", "vintage", "smart", "eco", "soft",
)


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def product_ids(category: str, products: int) -> list[int]:
    """The products of a category: every fourth product, round-robin."""
    index = CATEGORIES.index(category)
    return [i for i in range(1, products + 1) if (i - 1) % len(CATEGORIES) == index]


def page(title: str, body: str, crumbs: str = "") -> str:
    """Wrap a page body in the shop's layout."""
    nav = "".join(f'<a href="{BASE}/c/{c}/">{c.title()}</a>' for c in CATEGORIES)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title} | ACME Shop</title>'
            f'<link rel="stylesheet" href="https://static.acme-shop.example/css/site.css"></head><body>'
            f'<header><a href="/" class="logo">ACME</a><nav class="categories">{nav}</nav></header>'
            f'{crumbs}<main>{body}</main><footer><a href="/about">About</a> <a href="/terms">Terms</a></footer></body></html>')


def home() -> str:
    """The home page, with a sale banner that redirects."""
    return page("Home", '<h1>Welcome</h1><a class="sale-banner" href="/sale">Sale: 20% off garden</a>')


def listing(category: str, number: int, products: int) -> str | None:
    """Page ``number`` of a category; ``None`` past its last page."""
    ids = product_ids(category, products)
    pages = max(1, -(-len(ids) // PER_PAGE))
    if not 1 <= number <= pages:
        return None
    items = "".join(
        f'<li><a class="product-link" href="{BASE}/p/{i}-{category}-item.html">Item {i}</a>'
        f'<img src="https://static.acme-shop.example/thumb/{i}.jpg" alt=""></li>'
        for i in ids[(number - 1) * PER_PAGE:number * PER_PAGE]
    )
    more = f'<a rel="next" href="?page={number + 1}">Next</a>' if number < pages else ""
    return page(f"{category.title()} page {number}", f'<h1>{category.title()}</h1><ul class="products">{items}</ul>{more}')


def product(product_id: int, category: str, currency: str) -> str:
    """A product page of a few KiB: title, price, specs, description, gallery, related products."""
    rng = random.Random(product_id)
    symbol = {"EUR": "€", "USD": "$"}.get(currency, "$")
    price = f"{symbol}{rng.randint(5, 2500):,}.{rng.randint(0, 99):02d}"
    specs = "".join(f"<tr><th>{_words(rng, 1).title()}</th><td>{_words(rng, 2)}</td></tr>" for _ in range(8))
    paragraphs = "".join(f"<p>{_words(rng, 60)}</p>" for _ in range(4))
    gallery = "".join(f'<img src="https://static.acme-shop.example/img/{product_id}-{k}.jpg" alt="">' for k in range(4))
    related = "".join(f'<a href="{BASE}/p/{rng.randint(1, 10_000)}-x-item.html">Related</a>' for _ in range(4))
    crumbs = f'<nav class="breadcrumbs"><a href="/">Home</a> <a href="{BASE}/c/{category}/">{category.title()}</a></nav>'
    body = (f'<div itemscope itemtype="https://schema.org/Product"><h1 class="product-title">{_words(rng, 3).title()}</h1>'
            f'<span itemprop="sku">ACME-{product_id:06d}</span><span class="price">{price}</span>'
            f'<meta itemprop="priceCurrency" content="{currency}">'
            f'<link itemprop="availability" href="https://schema.org/{"InStock" if rng.random() < 0.8 else "OutOfStock"}">'
            f'<table class="specs">{specs}</table><div class="description">{paragraphs}</div>'
            f'<div class="gallery">{gallery}</div><aside class="related">{related}</aside></div>')
    return page(f"Item {product_id}", body, crumbs)


def sitemap(products: int) -> str:
    """The shop's sitemap: the home page, the categories and every product (a sitemap spider keeps the products)."""
    urls = [f"{BASE}/", *(f"{BASE}/c/{c}/" for c in CATEGORIES),
            *(f"{BASE}/p/{i}-{CATEGORIES[(i - 1) % len(CATEGORIES)]}-item.html" for i in range(1, products + 1))]
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'


class Origin(BaseHTTPRequestHandler):
    """Serves the shop for ``GET /https://www.acme-shop.example/...``."""

    products = 40
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path[1:])
        if url.hostname != HOST:
            self._send(404, "text/plain", b"not this site\n")
            return
        query = parse_qs(url.query)
        cookies = self.headers.get("Cookie", "")
        currency = "EUR" if "currency=EUR" in cookies else "USD"
        path = url.path
        if path == "/robots.txt":
            self._send(200, "text/plain", b"User-agent: *\nDisallow: /checkout/\n")
        elif path == "/":
            self._send(200, "text/html; charset=utf-8", home().encode(),
                       [("Set-Cookie", "session=s3cr3t; Domain=.acme-shop.example; Path=/; HttpOnly"),
                        ("Set-Cookie", "currency=EUR; Path=/")])
        elif path == "/sitemap.xml":
            self._send(200, "application/xml", sitemap(self.products).encode())
        elif path == "/sale":
            self._send(301, "text/html", b"", [("Location", f"{BASE}/c/garden/?promo=sale")])
        elif (match := re.fullmatch(r"/c/([a-z]+)/", path)) and match[1] in CATEGORIES:
            html = listing(match[1], int(query.get("page", ["1"])[0]), self.products)
            self._send(200 if html else 404, "text/html; charset=utf-8", (html or "no such page").encode())
        elif (match := re.fullmatch(r"/p/(\d+)-([a-z]+)-item\.html", path)) and match[2] in CATEGORIES:
            self._send(200, "text/html; charset=utf-8", product(int(match[1]), match[2], currency).encode())
        else:
            self._send(404, "text/html", b"<h1>Not found</h1>")

    def _send(self, status: int, content_type: str, body: bytes, headers: list[tuple[str, str]] | None = None) -> None:
        if "gzip" in self.headers.get("Accept-Encoding", "") and len(body) > 512:
            body = gzip.compress(body, mtime=0)
            headers = [*(headers or []), ("Content-Encoding", "gzip")]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers or []:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted; print the URL first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", type=int, default=40)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    Origin.products = args.products
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Origin)
    print(f"origin listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())

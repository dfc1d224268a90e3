"""The paginated catalog and its product detail pages (site process)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from fixture_sites.text import digest, sentences, words


@dataclass(frozen=True, slots=True)
class Product:
    """One deterministic product."""

    product_id: int
    name: str
    price: str
    description: str


def make_product(seed: int, product_id: int) -> Product:
    """Return the product ``product_id`` of the seed's catalog."""
    data = digest(seed, "product", product_id, 64)
    name = " ".join(word.capitalize() for word in words(data[:3]))
    cents = 100 + int.from_bytes(data[3:6], "big") % 99_900
    return Product(product_id, name, f"{cents // 100}.{cents % 100:02d}", sentences(data[6:]))


def catalog_url(pages: int, per_page: int, page: int, *, html: bool = False) -> str:
    """Return the URL of one listing page (``&`` escaped when ``html``)."""
    amp = "&amp;" if html else "&"
    return f"/catalog/?pages={pages}{amp}per_page={per_page}{amp}page={page}"


def render_listing(seed: int, pages: int, per_page: int, page: int) -> bytes:
    """Render listing page ``page`` of ``pages``: ``per_page`` product links and a next link."""
    first = (page - 1) * per_page + 1
    items = "".join(
        f'<li><a class="product" href="/catalog/product/{pid}">{make_product(seed, pid).name}</a></li>\n'
        for pid in range(first, first + per_page)
    )
    next_link = ""
    if page < pages:
        href = catalog_url(pages, per_page, page + 1, html=True)
        next_link = f'<a class="next" rel="next" href="{href}">Next page</a>\n'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Catalog page {page} of {pages}</title></head>\n<body>\n"
        f'<h1>Catalog</h1>\n<p class="pager">Page {page} of {pages}</p>\n'
        f'<ul class="products">\n{items}</ul>\n{next_link}</body></html>\n'
    ).encode()


def render_product(seed: int, product_id: int) -> bytes:
    """Render the detail page of one product."""
    product = make_product(seed, product_id)
    name = escape(product.name)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{name}</title></head>\n<body>\n"
        f'<main class="product-detail" data-id="{product_id}">\n'
        f'<h1 class="name">{name}</h1>\n'
        f'<span class="price">{product.price}</span>\n'
        f'<div class="description">{escape(product.description)}</div>\n'
        "</main>\n</body></html>\n"
    ).encode()

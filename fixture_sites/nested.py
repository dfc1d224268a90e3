"""Deeply nested HTML of an exact size: many elements per byte, what makes parse trees outgrow their bodies (site process)."""

from __future__ import annotations

from collections.abc import Iterator

from fixture_sites.bodies import sized_page


def nested_chunks(ident: int, depth: int, total_bytes: int, chunk_bytes: int) -> Iterator[bytes]:
    """Yield a page of exactly ``total_bytes``: blocks of ``depth`` nested ``<div>`` around a short linked leaf.

    Each block is ``<div class="n">`` x depth, ``<p><a href="/catalog/product/N">leaf N</a></p>``,
    ``</div>`` x depth; a padding comment makes the size exact.
    """
    title = f"Nested page {ident} (depth {depth})"
    opening, closing = b'<div class="n">' * depth, b"</div>" * depth

    def block(number: int) -> bytes:
        product_id = (ident * 7919 + number) % 1_000_000 + 1
        return b'%b<p><a class="leaf" href="/catalog/product/%d">leaf %d</a></p>%b\n' % (opening, product_id, number, closing)

    return sized_page(title, block, total_bytes, chunk_bytes)

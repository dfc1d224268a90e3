"""Deeply nested HTML of an exact size: many elements per byte, what makes parse trees outgrow their bodies (site process)."""

from __future__ import annotations

from collections.abc import Iterator

from fixture_sites.bodies import _padding

_SUFFIX = b"</body></html>\n"
_MIN_COMMENT = len(b"<!---->")


def nested_chunks(ident: int, depth: int, total_bytes: int, chunk_bytes: int) -> Iterator[bytes]:
    """Yield a page of exactly ``total_bytes``: blocks of ``depth`` nested ``<div>`` around a short linked leaf.

    Each block is ``<div class="n">`` x depth, ``<p><a href="/catalog/product/N">leaf N</a></p>``,
    ``</div>`` x depth; a padding comment makes the size exact.
    """
    title = f"Nested page {ident} (depth {depth})"
    prefix = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n<body>\n<h1>{title}</h1>\n'
    ).encode()
    room = total_bytes - len(prefix) - len(_SUFFIX)
    if room < 0:
        raise ValueError(f"{total_bytes} bytes is too small for an HTML page")
    opening, closing = b'<div class="n">' * depth, b"</div>" * depth
    parts: list[bytes] = [prefix]
    pending = len(prefix)
    number = 0
    while True:
        product_id = (ident * 7919 + number) % 1_000_000 + 1
        block = b'%b<p><a class="leaf" href="/catalog/product/%d">leaf %d</a></p>%b\n' % (opening, product_id, number, closing)
        if len(block) > room - _MIN_COMMENT and len(block) != room:
            break
        parts.append(block)
        pending += len(block)
        room -= len(block)
        number += 1
        if pending >= chunk_bytes:
            yield b"".join(parts)
            parts, pending = [], 0
    parts.append(_padding(room))
    parts.append(_SUFFIX)
    yield b"".join(parts)

"""Exact-size structured HTML bodies produced in chunks, never whole (site process)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from fixture_sites.text import PARAGRAPH_POOL_SIZE, paragraph_pool

_SUFFIX = b"</body></html>\n"
_MIN_COMMENT = len(b"<!---->")
_ITEM = (
    b'<div class="item" id="item-%d"><h2>Item %d</h2><p>%b</p>'
    b'<a class="item-link" href="/catalog/product/%d">Product %d</a></div>\n'
)


def html_chunks(seed: int, ident: int, title: str, total_bytes: int, chunk_bytes: int) -> Iterator[bytes]:
    """Yield a structured HTML page of exactly ``total_bytes`` in pieces of about ``chunk_bytes``.

    The page is a prefix, many ``<div class="item">`` blocks (heading, paragraph,
    link to a product page) and a padding comment that makes the size exact.
    """
    pool = [paragraph.encode() for paragraph in paragraph_pool(seed)]

    def item(number: int) -> bytes:
        paragraph = pool[(number * 37 + ident * 11) % PARAGRAPH_POOL_SIZE]
        product_id = (ident * 7919 + number) % 1_000_000 + 1
        return _ITEM % (number, number, paragraph, product_id, product_id)

    return sized_page(title, item, total_bytes, chunk_bytes)


def sized_page(title: str, block: Callable[[int], bytes], total_bytes: int, chunk_bytes: int) -> Iterator[bytes]:
    """Yield an HTML page of exactly ``total_bytes``: a head titled ``title``, ``block(0)``, ``block(1)``, ... while
    they fit, a padding comment making the size exact, in pieces of about ``chunk_bytes``."""
    prefix = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n<body>\n<h1>{title}</h1>\n'
    ).encode()
    room = total_bytes - len(prefix) - len(_SUFFIX)
    if room < 0:
        raise ValueError(f"{total_bytes} bytes is too small for an HTML page")
    return _sized_chunks(prefix, block, room, chunk_bytes)


def _sized_chunks(prefix: bytes, block: Callable[[int], bytes], room: int, chunk_bytes: int) -> Iterator[bytes]:
    parts: list[bytes] = [prefix]
    pending = len(prefix)
    number = 0
    while True:
        piece = block(number)
        if len(piece) > room - _MIN_COMMENT and len(piece) != room:
            break
        parts.append(piece)
        pending += len(piece)
        room -= len(piece)
        number += 1
        if pending >= chunk_bytes:
            yield b"".join(parts)
            parts, pending = [], 0
    parts.append(_padding(room))
    parts.append(_SUFFIX)
    yield b"".join(parts)


def _padding(size: int) -> bytes:
    """Return ``size`` bytes of harmless HTML filler (a comment, or newlines if tiny)."""
    if size >= _MIN_COMMENT:
        return b"<!--" + b"." * (size - _MIN_COMMENT) + b"-->"
    return b"\n" * size


def rechunk(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """Re-cut a byte stream into pieces of exactly ``size`` bytes (the last may be shorter)."""
    buffer = bytearray()
    for chunk in chunks:
        buffer += chunk
        while len(buffer) >= size:
            yield bytes(buffer[:size])
            del buffer[:size]
    if buffer:
        yield bytes(buffer)

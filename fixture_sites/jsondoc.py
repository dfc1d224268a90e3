"""Deterministic JSON documents of an exact size: a list of records and a padding string (site process)."""

from __future__ import annotations

from collections.abc import Iterator

_TAIL_OPEN = b'], "pad": "'
_TAIL_CLOSE = b'"}'


def _record(doc_id: int, number: int) -> bytes:
    price = (doc_id * 7919 + number * 104729) % 100_000 / 100
    return (b'{"n": %d, "sku": "D%d-%06d", "name": "Item %d of document %d", "price": %.2f, "tags": ["a%d", "b%d"]}'
            % (number, doc_id, number, number, doc_id, price, number % 7, number % 11))


def json_chunks(doc_id: int, total_bytes: int, chunk_bytes: int) -> Iterator[bytes]:
    """Yield ``{"id": ID, "records": [...], "pad": "..."}`` of exactly ``total_bytes`` in pieces of ~``chunk_bytes``."""
    head = b'{"id": %d, "records": [' % doc_id
    room = total_bytes - len(head) - len(_TAIL_OPEN) - len(_TAIL_CLOSE)
    if room < 0:
        raise ValueError(f"{total_bytes} bytes is too small for a JSON document")
    pieces, size, number = [head], len(head), 0
    while True:
        record = (b", " if number else b"") + _record(doc_id, number)
        if len(record) > room:
            break
        pieces.append(record)
        size += len(record)
        room -= len(record)
        number += 1
        if size >= chunk_bytes:
            yield b"".join(pieces)
            pieces, size = [], 0
    pieces.append(_TAIL_OPEN + b"x" * room + _TAIL_CLOSE)
    yield b"".join(pieces)

"""Deterministic exact-size JPEG files: a tiny decodable image padded with comment segments (site process)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from fixture_sites.text import digest, sentences

_SOI = b"\xff\xd8"
_EOI = b"\xff\xd9"
_APP0_JFIF = b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
_COM = b"\xff\xfe"
_MAX_COM_SEGMENT = 2 + 65535  # marker + length field + 65533 data bytes
_MIN_COM_SEGMENT = 4


def _image_tail(gray_level: int) -> bytes:
    """Return the tables, frame, scan and EOI of an 8x8 grayscale baseline JPEG of one level."""
    quant = b"\xff\xdb\x00\x43\x00" + b"\x08" * 64
    frame = b"\xff\xc0\x00\x0b\x08\x00\x08\x00\x08\x01\x01\x11\x00"
    dc_value = gray_level - 128  # quantiser 8 turns the DC coefficient 8*(v-128) into v-128
    category = abs(dc_value).bit_length()
    dc_table = b"\xff\xc4\x00\x14\x00" + b"\x01" + b"\x00" * 15 + bytes([category])
    ac_table = b"\xff\xc4\x00\x14\x10" + b"\x01" + b"\x00" * 15 + b"\x00"
    scan_header = b"\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00"
    extra = dc_value if dc_value >= 0 else dc_value + (1 << category) - 1
    # DC code "0", `category` value bits, AC end-of-block code "0", padded with ones.
    bits = "0" + (format(extra, f"0{category}b") if category else "") + "0"
    bits += "1" * (-len(bits) % 8)
    data = int(bits, 2).to_bytes(len(bits) // 8, "big").replace(b"\xff", b"\xff\x00")
    return quant + frame + dc_table + ac_table + scan_header + data + _EOI


def jpeg_chunks(seed: int, image_id: int, total_bytes: int) -> Iterator[bytes]:
    """Yield a JPEG of exactly ``total_bytes``: SOI, JFIF, comment padding, an 8x8 image, EOI."""
    key = digest(seed, "media", image_id, 48)
    tail = _image_tail(key[0])
    head = _SOI + _APP0_JFIF
    padding = total_bytes - len(head) - len(tail)
    if padding < _MIN_COM_SEGMENT:
        raise ValueError(f"{total_bytes} bytes is too small for a JPEG")
    filler = (sentences(key[1:]) + " ").encode()
    yield head
    for segment_bytes in _segment_sizes(padding):
        data_bytes = segment_bytes - _MIN_COM_SEGMENT
        repeats = data_bytes // len(filler) + 1
        yield _COM + struct.pack(">H", data_bytes + 2) + (filler * repeats)[:data_bytes]
    yield tail


def _segment_sizes(total: int) -> Iterator[int]:
    """Split ``total`` padding bytes into comment segments of legal sizes."""
    count = -(-total // _MAX_COM_SEGMENT)
    base, extra = divmod(total, count)
    for index in range(count):
        yield base + (1 if index < extra else 0)

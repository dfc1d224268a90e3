"""Gzip bombs: tiny gzip bodies that inflate to exactly N MiB of HTML, built once per size (site process)."""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections import OrderedDict

from fixture_sites.limits import MIB

_PREFIX = b"<!DOCTYPE html>\n<html><head><title>bomb</title></head><body>\n"
_SUFFIX = b"\n</body></html>\n"
_FILL = b" "
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"


def _deflate_flushed(data: bytes) -> bytes:
    """Raw-deflate ``data`` into byte-aligned, non-final blocks that can be concatenated."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush(zlib.Z_FULL_FLUSH)


def build_bomb(mebibytes: int) -> bytes:
    """Return a gzip member that decompresses to exactly ``mebibytes`` MiB of HTML.

    One MiB of filler is compressed once; its full-flushed deflate blocks are repeated,
    so building a 4 GiB bomb costs one CRC pass, not one compression pass.
    """
    total = mebibytes * MIB
    fill_bytes = total - len(_PREFIX) - len(_SUFFIX)
    whole, rest = divmod(fill_bytes, MIB)
    one_mib = _FILL * MIB
    crc = zlib.crc32(_PREFIX)
    for _ in range(whole):
        crc = zlib.crc32(one_mib, crc)
    crc = zlib.crc32(_FILL * rest, crc)
    crc = zlib.crc32(_SUFFIX, crc)
    final = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = b"".join(
        (
            _GZIP_HEADER,
            _deflate_flushed(_PREFIX),
            _deflate_flushed(one_mib) * whole,
            _deflate_flushed(_FILL * rest) if rest else b"",
            _deflate_flushed(_SUFFIX),
            final.flush(zlib.Z_FINISH),
            struct.pack("<II", crc & 0xFFFFFFFF, total & 0xFFFFFFFF),
        )
    )
    return body


class BombCache:
    """Builds bombs in a worker thread (the server keeps serving) and keeps the last few."""

    def __init__(self, max_entries: int = 8) -> None:
        self._entries: OrderedDict[int, asyncio.Future[bytes]] = OrderedDict()
        self._max_entries = max_entries

    async def get(self, mebibytes: int) -> bytes:
        """Return the compressed bomb of ``mebibytes`` MiB, building it once."""
        future = self._entries.get(mebibytes)
        if future is None:
            future = asyncio.ensure_future(asyncio.to_thread(build_bomb, mebibytes))
            self._entries[mebibytes] = future
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(mebibytes)
        return await asyncio.shield(future)

"""What keeps a checkpoint from draining, in words (pure: no pytest, no Scrapy; any process)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def media_phrase(downloads: Sequence[tuple[str, str, int]], shown: int = 3) -> str:
    """The media pipelines' downloads in flight, ``(pipeline, url, retries)`` each: ``"5 downloads of FilesPipeline
    (http://x/media/missing/1.jpg retried 2 times, ...)"``; ``""`` when none."""
    if not downloads:
        return ""
    by: dict[str, list[tuple[str, int]]] = {}
    for pipeline, url, retries in downloads:
        by.setdefault(pipeline, []).append((url, retries))
    parts = []
    for pipeline, found in sorted(by.items(), key=lambda kv: -len(kv[1])):
        found.sort(key=lambda f: -f[1])
        urls = ", ".join(f"{url}{f' retried {n} time' + ('s' if n != 1 else '') if n else ''}" for url, n in found[:shown])
        more = f", {len(found) - shown:,} more" if len(found) > shown else ""
        parts.append(f"{len(found):,} download{'s' if len(found) != 1 else ''} of {pipeline} ({urls}{more})")
    return " and ".join(parts)


def holders_phrase(downloading: int, callbacks: Mapping[str, int]) -> str:
    """What still held a response or was getting one when a drain timed out: ``"2 downloads still in progress (pages
    navigating or plain downloads) and 3 responses in callbacks (BooksSpider.parse_book 3)"``; ``""`` when nothing."""
    parts = []
    if downloading:
        parts.append(f"{downloading:,} download{'s' if downloading != 1 else ''} still in progress (pages navigating"
                     " or plain downloads)")
    in_callbacks = sum(callbacks.values())
    if in_callbacks:
        named = ", ".join(f"{name} {count:,}" for name, count in sorted(callbacks.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"{in_callbacks:,} response{'s' if in_callbacks != 1 else ''} in callbacks ({named})")
    return " and ".join(parts)

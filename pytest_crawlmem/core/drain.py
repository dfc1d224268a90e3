"""What keeps a checkpoint from draining, in words (pure: no pytest, no Scrapy; any process)."""

from __future__ import annotations

from collections.abc import Mapping


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

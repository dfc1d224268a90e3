"""Downloader middleware of the catalog project."""

from __future__ import annotations

from typing import Any


class ShopHeadersMiddleware:
    """Sends the headers the shop expects and counts the requests it saw."""

    def __init__(self, stats: Any, contact: str) -> None:
        self.stats = stats
        self.contact = contact

    @classmethod
    def from_crawler(cls, crawler: Any) -> ShopHeadersMiddleware:
        return cls(crawler.stats, crawler.settings.get("CATALOGBOT_CONTACT", ""))

    def process_request(self, request: Any) -> None:
        request.headers.setdefault(b"Accept-Language", b"en")
        request.headers.setdefault(b"From", self.contact.encode())
        self.stats.inc_value("catalogbot/requests")
        return None

"""A leak to inject into the shop crawl from a test, leaving the spider and the project unchanged (crawl process)."""

from __future__ import annotations

from typing import Any, ClassVar


class BodyCacheMiddleware:
    """A downloader middleware that "caches" every response body and never evicts: 8 KiB and more per response."""

    kept: ClassVar[list[bytes]] = []

    def process_response(self, request: Any, response: Any) -> Any:
        self.kept.append(response.body + bytes(8192))
        return response

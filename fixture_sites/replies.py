"""Reply values routes return; the HTTP layer turns them into bytes (site process)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

Headers = tuple[tuple[str, str], ...]

HTML = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"


class BodyWriter(Protocol):
    """Sink for a streamed body; ``write`` waits while the client's socket is backed up."""

    async def write(self, chunk: bytes) -> None:
        """Send ``chunk`` and wait for the transport to drain if its buffer is full."""


@dataclass(frozen=True, slots=True)
class Response:
    """A complete small reply held in memory."""

    status: int
    body: bytes = b""
    content_type: str = HTML
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class Streamed:
    """A reply whose body is produced in chunks; ``content_length=None`` means chunked."""

    status: int
    content_type: str
    produce: Callable[[BodyWriter], Awaitable[None]]
    content_length: int | None = None
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class Pending:
    """A reply computed later (after a delay or in a worker thread) without blocking others."""

    resolve: Callable[[], Awaitable[Response | Streamed]]


Reply = Response | Streamed | Pending


def text_response(status: int, message: str, headers: Headers = ()) -> Response:
    """Return a short ``text/plain`` reply, e.g. a 400 naming the bad parameter."""
    return Response(status, (message + "\n").encode(), TEXT, headers)

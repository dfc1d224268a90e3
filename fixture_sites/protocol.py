"""A small HTTP/1.1 server protocol for asyncio: keep-alive, pipelining, backpressure (site process)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus

from fixture_sites.limits import (
    IDLE_TIMEOUT_SECONDS,
    MAX_PIPELINED_BYTES,
    MAX_REQUEST_HEAD_BYTES,
    WRITE_BUFFER_HIGH_BYTES,
)
from fixture_sites.replies import Reply, Response, Streamed, text_response

log = logging.getLogger("fixture_sites")

_REASONS = {status.value: status.phrase for status in HTTPStatus}
_BODYLESS = frozenset({204, 304})
_YIELD_EVERY_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed request head; bodies of requests are read and ignored."""

    method: str
    target: str
    version: str
    keep_alive: bool


class BadRequest(Exception):
    """A request head the server cannot handle: answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ConnectionLost(Exception):
    """The client went away while a body was being streamed."""


Handler = Callable[[Request], Reply]


def parse_head(head: bytes) -> tuple[Request, int]:
    """Parse a request head (without the blank line) into a request and its body length."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise BadRequest(400, "malformed request line")
    method, target, version = (part.decode("latin-1") for part in parts)
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(505, "only HTTP/1.0 and HTTP/1.1 are supported")
    connection = ""
    body_length = 0
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise BadRequest(400, "malformed header line")
        lowered = name.strip().lower()
        if lowered == b"connection":
            connection = value.decode("latin-1").lower()
        elif lowered == b"content-length":
            text = value.strip()
            if not text.isdigit() or len(text) > 15:
                raise BadRequest(400, "bad Content-Length")
            body_length = int(text)
        elif lowered == b"transfer-encoding":
            raise BadRequest(501, "request bodies with Transfer-Encoding are not supported")
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    return Request(method, target, version, keep_alive), body_length


def status_reason(status: int) -> str:
    """Return the reason phrase of ``status`` ("Status" for unregistered codes)."""
    return _REASONS.get(status, "Status")


_date_cache: tuple[int, str] = (0, "")


def _date_header() -> str:
    """Return the ``Date`` header line, formatted once per second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, f"Date: {formatdate(now, usegmt=True)}\r\n")
    return _date_cache[1]


def format_head(
    status: int,
    content_type: str,
    content_length: int | None,
    headers: tuple[tuple[str, str], ...],
    keep_alive: bool,
    chunked: bool = False,
) -> bytes:
    """Return the status line and headers of a response, ending with the blank line."""
    head = f"HTTP/1.1 {status} {status_reason(status)}\r\nServer: fixture-site\r\n{_date_header()}"
    if status not in _BODYLESS:
        if content_type:  # a replayed response recorded without one is served without one
            head += f"Content-Type: {content_type}\r\n"
        if content_length is not None:
            head += f"Content-Length: {content_length}\r\n"
        elif chunked:
            head += "Transfer-Encoding: chunked\r\n"
    for name, value in headers:
        head += f"{name}: {value}\r\n"
    if not keep_alive:
        head += "Connection: close\r\n"
    return (head + "\r\n").encode("latin-1")


def _with_keep_alive(headers: tuple[tuple[str, str], ...], request: Request, keep_alive: bool) -> tuple[tuple[str, str], ...]:
    """Add ``Connection: keep-alive`` for HTTP/1.0 clients that asked for it (1.1 keeps alive by default)."""
    if keep_alive and request.version == "HTTP/1.0":
        return (*headers, ("Connection", "keep-alive"))
    return headers


class _ChunkWriter:
    """Writes a streamed body to one connection, framing chunks when needed."""

    def __init__(self, connection: HttpConnection, chunked: bool) -> None:
        self._connection = connection
        self._chunked = chunked
        self._unyielded_bytes = 0
        self.written_bytes = 0

    async def write(self, chunk: bytes) -> None:
        """Send ``chunk`` and wait for the transport to drain if its buffer is full."""
        if not chunk:
            return
        self.written_bytes += len(chunk)
        if self._chunked:
            chunk = b"%x\r\n%b\r\n" % (len(chunk), chunk)
        await self._connection.send_and_drain(chunk)
        self._unyielded_bytes += len(chunk)
        if self._unyielded_bytes >= _YIELD_EVERY_BYTES:
            # A fast reader never fills the buffer: let other connections run anyway.
            self._unyielded_bytes = 0
            await asyncio.sleep(0)


class HttpConnection(asyncio.Protocol):
    """One client connection: parses pipelined requests and answers them in order."""

    def __init__(self, handler: Handler, registry: ConnectionRegistry) -> None:
        self._handler = handler
        self._registry = registry
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._discard_bytes = 0
        self._busy = False
        self._closing = False
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.last_active = time.monotonic()

    @property
    def idle(self) -> bool:
        """True when no response is being produced for this connection."""
        return not self._busy

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Register the new connection."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES)
        self._registry.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection and stop any response still being produced for it."""
        self._transport = None
        self._registry.discard(self)
        self._buffer.clear()
        if self._task is not None:
            self._task.cancel()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.cancel()

    def eof_received(self) -> bool:
        """Close when the client closes its side (a client that half-closes gets no answer)."""
        return False

    def pause_writing(self) -> None:
        """Note that the client is not reading fast enough."""
        self._writing_paused = True

    def resume_writing(self) -> None:
        """Wake a stream waiting for the client to catch up."""
        self._writing_paused = False
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def data_received(self, data: bytes) -> None:
        """Buffer incoming bytes and answer every complete request head."""
        self.last_active = time.monotonic()
        self._buffer += data
        if not self._busy:
            self._serve_buffered()
        elif len(self._buffer) > MAX_PIPELINED_BYTES and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def close(self) -> None:
        """Drop the connection now (server shutdown, idle timeout)."""
        if self._transport is not None:
            self._transport.abort()

    async def send_and_drain(self, data: bytes) -> None:
        """Write ``data`` and wait while the transport's buffer is above its high mark."""
        transport = self._transport
        if transport is None:
            raise ConnectionLost()
        transport.write(data)
        if self._writing_paused:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiter = waiter
            try:
                await waiter
            finally:
                self._drain_waiter = None
            if self._transport is None:
                raise ConnectionLost()

    def _serve_buffered(self) -> None:
        """Answer buffered requests until one needs asynchronous work or the buffer runs dry."""
        buffer = self._buffer
        while not self._busy and not self._closing and self._transport is not None:
            if self._discard_bytes:
                dropped = min(len(buffer), self._discard_bytes)
                del buffer[:dropped]
                self._discard_bytes -= dropped
                if self._discard_bytes:
                    return
            while buffer[:2] == b"\r\n":
                del buffer[:2]
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_REQUEST_HEAD_BYTES:
                    self._refuse(BadRequest(431, "request head too large"))
                return
            if end > MAX_REQUEST_HEAD_BYTES:
                self._refuse(BadRequest(431, "request head too large"))
                return
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            try:
                request, self._discard_bytes = parse_head(head)
            except BadRequest as error:
                self._refuse(error)
                return
            self._dispatch(request)
        if not self._busy and self._reading_paused and self._transport is not None:
            self._reading_paused = False
            self._transport.resume_reading()

    def _refuse(self, error: BadRequest) -> None:
        """Answer an unparseable request and close the connection."""
        self._send(Request("GET", "", "HTTP/1.1", False), text_response(error.status, str(error)))

    def _dispatch(self, request: Request) -> None:
        """Run the handler; answer synchronously when possible, else start a task."""
        try:
            reply = self._handler(request)
        except Exception:
            log.exception("handler failed for %s", request.target)
            reply = text_response(500, "internal error")
        if isinstance(reply, Response):
            self._send(request, reply)
            return
        self._busy = True
        self._task = asyncio.get_running_loop().create_task(self._answer_later(request, reply))

    async def _answer_later(self, request: Request, reply: Reply) -> None:
        """Resolve a pending reply or stream a body, then resume reading pipelined requests."""
        head_sent = False
        try:
            while not isinstance(reply, (Response, Streamed)):
                reply = await reply.resolve()
            if isinstance(reply, Response):
                self._send(request, reply)
            else:
                head_sent = True
                await self._stream(request, reply)
        except ConnectionLost:
            return
        except Exception:
            log.exception("reply failed for %s", request.target)
            if head_sent:
                self.close()
            else:
                self._send(request, text_response(500, "internal error"))
        finally:
            self._task = None
        self._busy = False
        self.last_active = time.monotonic()
        if self._transport is not None and not self._closing:
            self._serve_buffered()

    def _send(self, request: Request, response: Response) -> None:
        """Write a complete response."""
        transport = self._transport
        if transport is None:
            return
        status = response.status
        bodyless = status in _BODYLESS or request.method == "HEAD"
        length = None if status in _BODYLESS else len(response.body)
        headers = _with_keep_alive(response.headers, request, request.keep_alive)
        head = format_head(status, response.content_type, length, headers, request.keep_alive)
        transport.write(head if bodyless else head + response.body)
        self.last_active = time.monotonic()
        if not request.keep_alive:
            self._finish()

    async def _stream(self, request: Request, reply: Streamed) -> None:
        """Write a streamed response, chunked when no length is declared (close-delimited for 1.0)."""
        length = reply.content_length
        chunked = length is None and request.version == "HTTP/1.1"
        keep_alive = request.keep_alive and (length is not None or chunked)
        headers = _with_keep_alive(reply.headers, request, keep_alive)
        head = format_head(reply.status, reply.content_type, length, headers, keep_alive, chunked)
        await self.send_and_drain(head)
        if request.method != "HEAD":
            writer = _ChunkWriter(self, chunked)
            await reply.produce(writer)
            if length is not None and writer.written_bytes != length:
                log.error("%s wrote %d bytes, declared %d", request.target, writer.written_bytes, length)
                self.close()
                return
            if chunked:
                await self.send_and_drain(b"0\r\n\r\n")
        if not keep_alive:
            self._finish()

    def _finish(self) -> None:
        """Close after the buffered output has been sent."""
        self._closing = True
        if self._transport is not None:
            self._transport.close()


class ConnectionRegistry:
    """The open connections, for idle timeouts and shutdown."""

    def __init__(self) -> None:
        self._connections: set[HttpConnection] = set()

    def __len__(self) -> int:
        return len(self._connections)

    def add(self, connection: HttpConnection) -> None:
        """Track a new connection."""
        self._connections.add(connection)

    def discard(self, connection: HttpConnection) -> None:
        """Stop tracking a closed connection."""
        self._connections.discard(connection)

    def close_idle(self, idle_seconds: float = IDLE_TIMEOUT_SECONDS) -> int:
        """Drop connections that have been idle longer than ``idle_seconds``; return how many."""
        cutoff = time.monotonic() - idle_seconds
        stale = [c for c in self._connections if c.idle and c.last_active < cutoff]
        for connection in stale:
            connection.close()
        return len(stale)

    def close_all(self) -> None:
        """Drop every connection (server shutdown)."""
        for connection in list(self._connections):
            connection.close()

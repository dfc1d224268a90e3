"""Keep pytest's log capture out of a measured crawl's memory (crawl process; pytest is not imported).

pytest's capture handlers (``caplog`` and the report's "Captured log" section) keep every
record, and its formatted text, until the test phase ends: at ``--log-level=DEBUG`` that
is a few KiB per response, which drained checkpoints would count as a leak. While a crawl
is measured, what those handlers would keep goes to a spill file instead, one detached
record (message rendered, no references to crawl objects) at a time; when the crawl ends
the records are handed to the handlers in their original order. Only pytest's own capture
handlers are touched: every other handler (the user's, log_cli, log_file) receives the
original records, as in production.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import tempfile
from collections.abc import Iterator
from typing import IO, Any

_CAPTURE_HANDLERS = {("_pytest.logging", "LogCaptureHandler")}
_PLAIN = (str, int, float, bool, type(None))


def is_capture_handler(handler: logging.Handler) -> bool:
    """Whether ``handler`` is one of pytest's capture handlers, which keep every record in memory."""
    return any((cls.__module__, cls.__name__) in _CAPTURE_HANDLERS for cls in type(handler).__mro__)


def detached(record: logging.LogRecord) -> dict[str, Any]:
    """A copy of ``record``'s attributes that holds only plain values (the message rendered, the traceback as text)."""
    fields = dict(record.__dict__)
    try:
        fields["msg"] = record.getMessage()
    except Exception:  # a broken format: keep what logging would have shown
        fields["msg"] = str(record.msg)
    fields["args"] = None
    if record.exc_info:
        fields["exc_text"] = record.exc_text or logging.Formatter().formatException(record.exc_info)
    fields["exc_info"] = None
    for name, value in fields.items():
        if not isinstance(value, _PLAIN):
            fields[name] = repr(value)[:200]
    return fields


class _Spill:
    """One capture handler's records during a crawl: written to a temporary file, replayed at the end."""

    def __init__(self, handler: logging.Handler) -> None:
        self.handler = handler
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="crawlmem-log-")  # noqa: SIM115 - closed by replay()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        pickle.dump(detached(record), self.file, protocol=pickle.HIGHEST_PROTOCOL)
        self.count += 1

    def replay(self) -> None:
        """Hand the spilled records to the handler, in order, and close the file."""
        emit = type(self.handler).emit
        with self.file:
            self.file.seek(0)
            for _ in range(self.count):
                emit(self.handler, logging.makeLogRecord(pickle.load(self.file)))


@contextlib.contextmanager
def spilled_log_capture(logger: logging.Logger | None = None) -> Iterator[int]:
    """While the block runs, pytest's capture handlers on ``logger`` (the root logger) keep nothing in memory.

    Yields how many capture handlers were redirected.
    """
    target = logger or logging.getLogger()
    spills = [_Spill(h) for h in target.handlers if is_capture_handler(h)]
    for spill in spills:
        spill.handler.emit = spill.emit  # type: ignore[method-assign]
    try:
        yield len(spills)
    finally:
        for spill in spills:
            with spill.handler.lock or contextlib.nullcontext():  # no record slips in between, or out of order
                del spill.handler.emit
                spill.replay()

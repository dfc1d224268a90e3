"""Reads a HAR 1.2 file (a browser's or a proxy's export) into exchanges (replay process).

HAR keeps decoded bodies (``content.text``, base64 when ``content.encoding`` says so), so
the recorded Content-Encoding header is dropped: the body is served as stored.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fixture_sites.replay.recording import Exchange, RecordingError, check_exchange

_DECODED = frozenset({"content-encoding"})


def _headers(raw: Any, source: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, list):
        raise RecordingError(f"{source}: expected a list of {{name, value}} objects")
    headers = []
    for index, header in enumerate(raw):
        if not isinstance(header, dict) or not isinstance(header.get("name"), str) or not isinstance(header.get("value"), str):
            raise RecordingError(f"{source}[{index}]: expected {{name, value}} strings, got {str(header)[:80]}")
        name = header["name"]
        if name.startswith(":") or name.lower() in _DECODED:  # HTTP/2 pseudo-headers; the body is decoded
            continue
        headers.append((name, header["value"]))
    return tuple(headers)


def _body(content: Any, source: str) -> bytes:
    if not isinstance(content, dict):
        raise RecordingError(f"{source}: expected an object")
    text = content.get("text", "")
    if not isinstance(text, str):
        raise RecordingError(f"{source}.text: expected a string, got {type(text).__name__}")
    if content.get("encoding") == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RecordingError(f"{source}.text: invalid base64 ({exc})") from None
    return text.encode("utf-8")


def read_har(path: Path) -> Iterator[Exchange]:
    """Yield the exchanges of a HAR file; entries with status 0 (aborted in the browser) are skipped."""
    try:
        document = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path}: not a HAR file: invalid JSON ({exc})") from None
    entries = document.get("log", {}).get("entries") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise RecordingError(f"{path}: not a HAR file: no log.entries list")
    for index, entry in enumerate(entries):
        source = f"{path}: entries[{index}]"
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), dict) for k in ("request", "response")):
            raise RecordingError(f"{source}: expected an object with request and response")
        request, response = entry["request"], entry["response"]
        if response.get("status") == 0:
            continue
        method, url, status = check_exchange(request.get("method"), request.get("url"), response.get("status"), source)
        headers = _headers(response.get("headers", []), f"{source}.response.headers")
        body = _body(response.get("content", {}), f"{source}.response.content")
        yield Exchange(method, url, status, headers, body, source)

"""Reads a WARC file (``.warc`` or ``.warc.gz``, as wget, Browsertrix or warcio write it) with warcio (replay process).

``response`` records give status, headers and the payload; warcio undoes chunked transfer
and content encoding, so Content-Encoding and Transfer-Encoding are dropped. The method
comes from the ``request`` record the response is concurrent to (GET when there is none).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fixture_sites.replay.recording import Exchange, RecordingError, check_exchange

_DECODED = frozenset({"content-encoding", "transfer-encoding"})


def read_warc(path: Path) -> Iterator[Exchange]:
    """Yield the exchanges of the WARC file's ``response`` records (revisits and metadata are skipped)."""
    try:
        from warcio.archiveiterator import ArchiveIterator
    except ImportError:
        raise RecordingError(f"{path}: reading WARC needs warcio: pip install 'pytest-crawlmem[replay]'") from None
    methods: dict[str, str] = {}
    responses = []
    index = -1
    try:
        with path.open("rb") as stream:
            for index, record in enumerate(ArchiveIterator(stream)):
                source = f"{path}: record {index}"
                if record.rec_type == "request" and record.http_headers is not None:
                    concurrent = record.rec_headers.get_header("WARC-Concurrent-To")
                    if concurrent:
                        methods[concurrent] = record.http_headers.protocol
                    continue
                if record.rec_type != "response" or record.http_headers is None:
                    continue
                status_text = record.http_headers.get_statuscode()
                status: object = int(status_text) if status_text and status_text.isdigit() else status_text
                url = record.rec_headers.get_header("WARC-Target-URI")
                record_id = record.rec_headers.get_header("WARC-Record-ID") or ""
                headers = tuple((k, v) for k, v in record.http_headers.headers if k.lower() not in _DECODED)
                body = record.content_stream().read()
                responses.append((record_id, url, status, headers, body, source))
    except Exception as exc:  # warcio fails on a cut or corrupt record with whatever error the parser hits
        raise RecordingError(f"{path}: not a readable WARC file at record {index + 1} ({type(exc).__name__}: {exc})") from None
    for record_id, url, status, headers, body, source in responses:
        method, url, status = check_exchange(methods.get(record_id, "GET"), url, status, source)
        yield Exchange(method, url, status, headers, body, source)

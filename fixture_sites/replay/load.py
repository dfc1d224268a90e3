"""Loads a recording of any supported kind into a lookup table (replay process)."""

from __future__ import annotations

import dbm
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fixture_sites.replay.har import read_har
from fixture_sites.replay.httpcache import find_entry_dirs, is_dbm, read_dbm_cache, read_filesystem_cache
from fixture_sites.replay.recording import Exchange, RecordingError, url_key
from fixture_sites.replay.warc import read_warc

FORMATS = ("httpcache", "dbm", "har", "warc")


@dataclass
class Recording:
    """Recorded exchanges by ``(method, url key)``; the first of duplicates wins."""

    path: str
    kind: str
    exchanges: dict[tuple[str, str], Exchange] = field(default_factory=dict)
    duplicates: int = 0
    body_bytes: int = 0
    first_url: str = ""

    def add(self, exchange: Exchange) -> None:
        """Index one exchange."""
        key = (exchange.method, url_key(exchange.url) or exchange.url)
        if key in self.exchanges:
            self.duplicates += 1
            return
        self.exchanges[key] = exchange
        self.body_bytes += len(exchange.body)
        self.first_url = self.first_url or exchange.url

    def find(self, method: str, url: str) -> Exchange | None:
        """Return the exchange recorded for ``method url`` (HEAD falls back to GET), or ``None``."""
        key = url_key(url)
        if key is None:
            return None
        found = self.exchanges.get((method, key))
        if found is None and method == "HEAD":
            found = self.exchanges.get(("GET", key))
        return found

    @property
    def hosts(self) -> list[str]:
        """The recorded hosts (lowercase, with a port when not the default), sorted."""
        return sorted({key.split("/")[2] for _, key in self.exchanges})

    def summary(self) -> dict[str, object]:
        """What the parent needs to know about the recording, JSON-ready."""
        return {
            "path": self.path, "kind": self.kind, "entries": len(self.exchanges), "duplicates": self.duplicates,
            "body_bytes": self.body_bytes, "hosts": self.hosts, "first_url": self.first_url,
        }


def detect_kind(path: Path) -> str:
    """Return which reader fits ``path``; raise :class:`RecordingError` saying why none does."""
    if not path.exists():
        if dbm.whichdb(str(path)):  # dbm.dumb keeps <spider>.db.dat and .dir, no <spider>.db
            return "dbm"
        raise RecordingError(f"{path}: no such file or directory")
    if path.is_dir():
        if find_entry_dirs(path):
            return "httpcache"
        if is_dbm(path):
            return "dbm"
        raise RecordingError(
            f"{path}: a directory, but neither a Scrapy HTTP cache of the filesystem storage (no <spider>/<xx>/<fingerprint>/meta"
            " files) nor of the DBM storage (no <spider>.db file)"
        )
    name = path.name.lower()
    with path.open("rb") as stream:
        head = stream.read(8)
    if name.endswith(".har") or head.lstrip()[:1] == b"{":
        return "har"
    if ".warc" in name or head.startswith(b"WARC/") or head[:2] == b"\x1f\x8b":
        return "warc"
    if dbm.whichdb(str(path)):
        return "dbm"
    raise RecordingError(f"{path}: not a recording this plugin reads (a Scrapy HTTP cache dir or .db, a .har, a .warc[.gz])")


def _read(path: Path, kind: str) -> Iterable[Exchange]:
    if kind == "httpcache":
        return read_filesystem_cache(path)
    if kind == "dbm":
        return read_dbm_cache(path)
    if kind == "har":
        return read_har(path)
    return read_warc(path)


def load_recording(path: Path) -> Recording:
    """Read every exchange of the recording at ``path``; an empty recording is an error."""
    kind = detect_kind(path)
    recording = Recording(str(path), kind)
    for exchange in _read(path, kind):
        recording.add(exchange)
    if not recording.exchanges:
        raise RecordingError(f"{path}: the {kind} recording holds no response to replay")
    return recording

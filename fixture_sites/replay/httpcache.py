"""Reads a Scrapy HTTP cache directory: filesystem storage and DBM storage (replay process).

The filesystem storage keeps ``<dir>/<spider>/<fp[:2]>/<fp>/`` with ``meta`` (the repr of a
dict), ``response_headers`` (raw header lines) and ``response_body``, gzipped when
``HTTPCACHE_GZIP`` was on. The DBM storage keeps ``<dir>/<spider>.db`` with ``<fp>_data``, a
pickled dict; it is read with an unpickler that builds no object but plain data and IP addresses.
"""

from __future__ import annotations

import ast
import dbm
import gzip
import io
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fixture_sites.replay.recording import Exchange, RecordingError, check_exchange

_GZIP_MAGIC = b"\x1f\x8b"
_ALLOWED_CLASSES = {("ipaddress", "IPv4Address"), ("ipaddress", "IPv6Address")}


def _read(path: Path, gzipped: bool) -> bytes:
    """Return a cache file's bytes, gunzipped when HTTPCACHE_GZIP wrote it (a body may be gzip of its own)."""
    data = path.read_bytes()
    if gzipped:
        try:
            return gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise RecordingError(f"{path}: corrupt gzip file ({exc})") from None
    return data


def parse_raw_headers(raw: bytes, source: str) -> tuple[tuple[str, str], ...]:
    """Parse ``Name: value`` lines (CRLF or LF separated) into header pairs."""
    headers = []
    for line in raw.replace(b"\r\n", b"\n").split(b"\n"):
        if not line.strip():
            continue
        name, sep, value = line.partition(b":")
        if not sep or not name.strip():
            raise RecordingError(f"{source}: malformed header line {line[:80]!r}")
        headers.append((name.strip().decode("latin-1"), value.strip().decode("latin-1")))
    return tuple(headers)


def find_entry_dirs(root: Path) -> list[Path]:
    """Return the entry directories (holding ``meta``) under a cache dir or one spider's subdir, sorted."""
    return sorted({meta.parent for meta in root.glob("**/meta") if len(meta.relative_to(root).parts) <= 4})


def read_filesystem_cache(root: Path) -> Iterator[Exchange]:
    """Yield the exchanges of a filesystem-storage cache dir (the HTTPCACHE_DIR or one spider's subdir)."""
    for entry in find_entry_dirs(root):
        source = str(entry)
        gzipped = (entry / "meta").read_bytes()[:2] == _GZIP_MAGIC  # HTTPCACHE_GZIP gzips every file of an entry
        try:
            meta = ast.literal_eval(_read(entry / "meta", gzipped).decode("utf-8"))
        except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as exc:
            raise RecordingError(f"{source}/meta: not the dict Scrapy writes ({type(exc).__name__}: {exc})") from None
        if not isinstance(meta, dict):
            raise RecordingError(f"{source}/meta: expected a dict, got {type(meta).__name__}")
        method, url, status = check_exchange(meta.get("method", "GET"), meta.get("url"), meta.get("status"), f"{source}/meta")
        try:
            headers = parse_raw_headers(_read(entry / "response_headers", gzipped), f"{source}/response_headers")
            body = _read(entry / "response_body", gzipped)
        except FileNotFoundError as exc:
            raise RecordingError(f"{source}: incomplete cache entry for {url}: {Path(exc.filename).name} is missing") from None
        yield Exchange(method, url, status, headers, body, source)


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, bytes, str, numbers and IP addresses; refuses every other class."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_CLASSES:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to build {module}.{name}")


def _db_path(path: Path) -> Path:
    """Return the DBM file Scrapy wrote: ``path`` itself or the one ``*.db`` inside the directory."""
    if path.is_dir():
        found = sorted({p.with_name(p.stem) if p.suffix in (".dat", ".dir", ".bak") else p for p in path.glob("*.db*")})
        if len(found) != 1:
            names = ", ".join(p.name for p in found) or "none"
            raise RecordingError(f"{path}: expected one <spider>.db file of a DBM cache, found {names}")
        return found[0]
    return path


def is_dbm(path: Path) -> bool:
    """True when ``path`` is (or is a directory holding) a DBM cache file."""
    try:
        candidate = _db_path(path)
    except RecordingError:
        return False
    return candidate.name.endswith(".db") and bool(dbm.whichdb(str(candidate)))


def _headers_from_dict(raw: Any, source: str) -> tuple[tuple[str, str], ...]:
    """Header pairs from the ``{name: [values]}`` dict of a pickled response."""
    if not isinstance(raw, dict):
        raise RecordingError(f"{source}: headers are a {type(raw).__name__}, expected a dict")
    headers = []
    for name, values in raw.items():
        for value in values if isinstance(values, (list, tuple)) else [values]:
            text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            headers.append((name.decode("latin-1") if isinstance(name, bytes) else str(name), text))
    return tuple(headers)


def read_dbm_cache(path: Path) -> Iterator[Exchange]:
    """Yield the exchanges of a DBM-storage cache (the ``<spider>.db`` file or the dir holding it)."""
    db_file = _db_path(path)
    try:
        db = dbm.open(str(db_file), "r")  # noqa: SIM115 - closed by the with below
    except Exception as exc:  # dbm.error is a different class for each DBM flavour
        raise RecordingError(f"{db_file}: cannot open as a DBM cache ({exc})") from None
    with db:
        keys = sorted(k if isinstance(k, bytes) else k.encode("latin-1") for k in db.keys())  # noqa: SIM118
        for key in (k for k in keys if k.endswith(b"_data")):
            source = f"{db_file}: key {key.decode('latin-1')}"
            try:
                data = _PlainUnpickler(io.BytesIO(db[key])).load()
            except Exception as exc:  # any unpickling failure is a bad entry
                raise RecordingError(f"{source}: not a pickled response ({type(exc).__name__}: {exc})") from None
            if not isinstance(data, dict):
                raise RecordingError(f"{source}: expected a dict, got {type(data).__name__}")
            method, url, status = check_exchange("GET", data.get("url"), data.get("status"), source)
            body = data.get("body", b"")
            if not isinstance(body, bytes):
                raise RecordingError(f"{source}: body of {url} is a {type(body).__name__}, expected bytes")
            yield Exchange(method, url, status, _headers_from_dict(data.get("headers", {}), source), body, source)

"""``crawlmem record``: record a spider's crawl into a Scrapy HTTP cache for replay (any process, no Scrapy import).

It runs ``scrapy crawl SPIDER`` in the current Scrapy project with the HTTP cache on (every
response stored, never expired, filesystem storage), then reads the recording back through the
replay site's checker and prints its size per page.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.standin import STAND_IN_HANDLER_PATH, StandIn, StandInError, parse_stand_in, stand_in_setting
from pytest_crawlmem.core.units import format_size

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
RECORDING_SETTINGS = (
    "HTTPCACHE_ENABLED=True",
    "HTTPCACHE_EXPIRATION_SECS=0",
    "HTTPCACHE_POLICY=scrapy.extensions.httpcache.DummyPolicy",
    "HTTPCACHE_STORAGE=scrapy.extensions.httpcache.FilesystemCacheStorage",
)


def record_argv(spider: str, output: Path, *, pages: int | None, gzip: bool, settings: Sequence[str],
                stand_ins: Sequence[StandIn] = (), python: str = sys.executable) -> list[str]:
    """The ``scrapy crawl`` command that records ``spider`` into ``output`` (through ``stand_ins``' servers)."""
    argv = [python, "-m", "scrapy", "crawl", spider]
    through = [f"DOWNLOAD_HANDLERS={json.dumps(dict.fromkeys(('http', 'https'), STAND_IN_HANDLER_PATH))}",
               f"{name_of('stand_in')}={stand_in_setting(stand_ins)}"] if stand_ins else []
    for setting in (*RECORDING_SETTINGS, f"HTTPCACHE_DIR={output}", f"HTTPCACHE_GZIP={gzip}",
                    *([f"CLOSESPIDER_PAGECOUNT={pages}"] if pages else []), *through, *settings):
        argv += ["-s", setting]
    return argv


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    """Serves a directory standing in for a site, without a log line per request."""

    def log_message(self, format: str, *args: object) -> None:
        return


@contextlib.contextmanager
def serving_directories(stand_ins: Sequence[StandIn]) -> Iterator[list[StandIn]]:
    """``stand_ins`` with each directory served over loopback HTTP for the length of the block (a server each)."""
    servers: list[http.server.ThreadingHTTPServer] = []
    served: list[StandIn] = []
    try:
        for stand_in in stand_ins:
            if not stand_in.is_directory:
                served.append(stand_in)
                continue
            directory = Path(stand_in.target).expanduser().resolve()
            if not directory.is_dir():
                raise StandInError(f"--stand-in {stand_in.origin}={stand_in.target}: no such directory")
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(directory)))
            threading.Thread(target=server.serve_forever, name=f"stand-in {stand_in.origin}", daemon=True).start()
            servers.append(server)
            served.append(replace(stand_in, target=f"http://127.0.0.1:{server.server_address[1]}", is_directory=False))
        yield served
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def summarize(recording: Path, python: str = sys.executable) -> dict[str, object]:
    """The replay site's summary of ``recording`` (entries, hosts, body bytes); raises ValueError naming a bad entry."""
    done = subprocess.run([python, "-m", "fixture_sites.replay", "--recording", str(recording), "--check"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ValueError(done.stderr.strip().removeprefix("crawlmem-replay: bad recording: ") or f"exit {done.returncode}")
    summary: dict[str, object] = json.loads(done.stdout)
    return summary


def describe(recording: Path, summary: dict[str, object]) -> str:
    """One line: how many responses, how large on disk, per page."""
    entries = int(str(summary.get("entries", 0)))
    size = disk_bytes(recording) if recording.is_dir() else recording.stat().st_size
    per_page = size / entries if entries else 0
    recorded_hosts = summary.get("hosts")
    hosts = ", ".join(str(h) for h in recorded_hosts) if isinstance(recorded_hosts, list) else ""
    return (f"{recording}: {entries:,} responses from {hosts or 'no host'}; {format_size(size)} on disk"
            f" ({format_size(per_page)} per page; bodies {format_size(int(str(summary.get('body_bytes', 0))))})")


_STAT = re.compile(r"'(response_received_count|downloader/exception_type_count/[\w.]+)': (\d+)")
_FIRST_ERROR = re.compile(r"Error downloading <(\w+) ([^>]+)>")
_EXCEPTION_LINE = re.compile(r"^(?:\w+\.)+\w+: (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class CrawlOutcome:
    """What ``scrapy crawl``'s log says it got: responses, download errors by type, the first failed request and why."""

    responses: int | None = None  # None: the log holds no stats dump (LOG_FILE, LOG_ENABLED=False)
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str = ""

    def nothing_recorded(self) -> str:
        """The sentence for a crawl that recorded nothing: responses, download errors, the first one."""
        total = sum(self.errors.values())
        kinds = ", ".join(f"{n:,} {kind}" for kind, n in self.errors.most_common())
        detail = f" ({kinds}; the first: {self.first_error})" if kinds and self.first_error else f" ({kinds})" if kinds else ""
        return (f"0 responses recorded, {total:,} download errors{detail}: nothing to replay; check that the start"
                " URLs are reachable from this machine (or record from a local copy of the site: --stand-in"
                " ORIGIN=http://127.0.0.1:PORT or ORIGIN=DIRECTORY)")


def crawl_outcome(log: str) -> CrawlOutcome:
    """Read ``scrapy crawl``'s log: the stats dump's response and exception counts, the first download error."""
    stats = {name: int(count) for name, count in _STAT.findall(log)}
    errors = Counter({name.rsplit("/", 1)[1].rsplit(".", 1)[-1]: n for name, n in stats.items() if "/" in name})
    dumped = "Dumping Scrapy stats" in log
    first = ""
    found = _FIRST_ERROR.search(log)
    if found:
        reason = _EXCEPTION_LINE.search(log, found.end())
        first = f"{found.group(1)} {found.group(2)}" + (f": {reason.group(1).strip()}" if reason else "")
    return CrawlOutcome(stats.get("response_received_count", 0) if dumped else None, errors, first)


def record_command(spider: str, output: Path, *, pages: int | None, gzip: bool, settings: Sequence[str],
                   stand_in: Sequence[str] = ()) -> int:
    """Record ``spider``'s crawl into ``output`` (which must be new or empty), the origins of ``stand_in``
    (``ORIGIN=TARGET``) fetched from their stand-ins; print its size per page."""
    output = output.expanduser().resolve()
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        print(f"crawlmem: error: {output} exists and is not an empty directory: record into a new one", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        stand_ins = [parse_stand_in(text) for text in stand_in]
        with serving_directories(stand_ins) as served:
            crawl = subprocess.run(record_argv(spider, output, pages=pages, gzip=gzip, settings=settings, stand_ins=served),
                                   check=False, stderr=subprocess.PIPE, text=True, errors="replace")
    except StandInError as exc:
        print(f"crawlmem: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stderr.write(crawl.stderr)  # Scrapy's log, as scrapy crawl shows it
    if crawl.returncode != 0:
        print(f"crawlmem: error: scrapy crawl {spider} exited with code {crawl.returncode}", file=sys.stderr)
        return EXIT_FAILED
    outcome = crawl_outcome(crawl.stderr)
    if outcome.responses == 0 or (outcome.responses is None and not output.exists()):
        print(f"crawlmem: error: {outcome.nothing_recorded()}", file=sys.stderr)
        return EXIT_FAILED
    try:
        summary = summarize(output)
    except ValueError as exc:
        print(f"crawlmem: error: the recording cannot be replayed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(describe(output, summary))
    return EXIT_OK

"""``crawlmem record``: record a spider's crawl into a Scrapy HTTP cache for replay (any process, no Scrapy import).

It runs ``scrapy crawl SPIDER`` in the current Scrapy project with the HTTP cache on (every
response stored, never expired, filesystem storage), then reads the recording back through the
replay site's checker and prints its size per page.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..core.units import format_size

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
                python: str = sys.executable) -> list[str]:
    """The ``scrapy crawl`` command that records ``spider`` into ``output``."""
    argv = [python, "-m", "scrapy", "crawl", spider]
    for setting in (*RECORDING_SETTINGS, f"HTTPCACHE_DIR={output}", f"HTTPCACHE_GZIP={gzip}",
                    *([f"CLOSESPIDER_PAGECOUNT={pages}"] if pages else []), *settings):
        argv += ["-s", setting]
    return argv


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


def record_command(spider: str, output: Path, *, pages: int | None, gzip: bool, settings: Sequence[str]) -> int:
    """Record ``spider``'s crawl into ``output`` (which must be new or empty); print its size per page."""
    output = output.expanduser().resolve()
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        print(f"crawlmem: error: {output} exists and is not an empty directory: record into a new one", file=sys.stderr)
        return EXIT_BAD_INPUT
    crawl = subprocess.run(record_argv(spider, output, pages=pages, gzip=gzip, settings=settings), check=False)
    if crawl.returncode != 0:
        print(f"crawlmem: error: scrapy crawl {spider} exited with code {crawl.returncode}", file=sys.stderr)
        return EXIT_FAILED
    try:
        summary = summarize(output)
    except ValueError as exc:
        print(f"crawlmem: error: the recording cannot be replayed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(describe(output, summary))
    return EXIT_OK

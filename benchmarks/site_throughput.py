"""Throughput of the fixture site for small product pages at several concurrency levels (benchmark script).

Usage: python benchmarks/site_throughput.py [--requests 20000] [--max-seconds 10] [--json out.json]

Starts the site with ``pytest_crawlmem.harness.site.start_site``, drives it with an asyncio
HTTP/1.1 client (one request in flight per connection, keep-alive unless stated) and
reports requests/s, latency, refused connections and the site's CPU time per 1,000
responses (user + system, read with psutil on the site's pid).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

import latest
import psutil

from pytest_crawlmem.harness.site import RunningSite, start_site

CONCURRENCY_LEVELS = (1, 16, 64, 256)
PRODUCT_IDS = 5_000


@dataclass
class Row:
    """One measured concurrency level."""

    concurrency: int
    keep_alive: bool
    responses: int
    seconds: float
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    refused: int
    errors: int
    site_cpu_ms_per_1000: float


class _Client(asyncio.Protocol):
    """One connection sending GETs one at a time and parsing Content-Length responses."""

    def __init__(self, run: _Run, keep_alive: bool) -> None:
        self._run = run
        self._keep_alive = keep_alive
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._sent_at = 0.0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._send_next()

    def _send_next(self) -> None:
        assert self._transport is not None
        path = self._run.next_path()
        if path is None:
            self._transport.close()
            return
        connection = "" if self._keep_alive else "Connection: close\r\n"
        self._sent_at = time.perf_counter()
        self._transport.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n{connection}\r\n".encode())

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buffer[:end]).lower()
            marker = head.find(b"content-length:")
            length = int(head[marker + 15 :].split(b"\r\n", 1)[0]) if marker >= 0 else 0
            if len(self._buffer) < end + 4 + length:
                return
            ok = head.startswith(b"http/1.1 200")
            del self._buffer[: end + 4 + length]
            self._run.record(time.perf_counter() - self._sent_at, ok)
            if not self._keep_alive:
                return
            self._send_next()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


class _Run:
    """Shared request budget and results of one concurrency level."""

    def __init__(self, total: int, deadline: float) -> None:
        self._remaining = total
        self._deadline = deadline
        self._counter = 0
        self.latencies: list[float] = []
        self.errors = 0
        self.refused = 0

    def has_budget(self) -> bool:
        return self._remaining > 0 and time.perf_counter() <= self._deadline

    def next_path(self) -> str | None:
        if not self.has_budget():
            return None
        self._remaining -= 1
        self._counter += 1
        return f"/catalog/product/{self._counter % PRODUCT_IDS + 1}"

    def record(self, latency: float, ok: bool) -> None:
        self.latencies.append(latency)
        if not ok:
            self.errors += 1


async def _connection_worker(host: str, port: int, run: _Run, keep_alive: bool) -> None:
    """Drive one connection (keep-alive) or a series of connections (close) until the budget ends."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            _, client = await loop.create_connection(lambda: _Client(run, keep_alive), host, port)
        except ConnectionRefusedError:
            run.refused += 1
            return
        except OSError:
            run.errors += 1
            return
        await client.done
        if keep_alive or not run.has_budget():
            return


async def _measure(host: str, port: int, concurrency: int, total: int, max_seconds: float, keep_alive: bool) -> _Run:
    run = _Run(total, time.perf_counter() + max_seconds)
    await asyncio.gather(*(_connection_worker(host, port, run, keep_alive) for _ in range(concurrency)))
    return run


def measure_level(site: RunningSite, concurrency: int, total: int, max_seconds: float, keep_alive: bool) -> Row:
    """Measure one concurrency level."""
    parts = urlsplit(site.base_url)
    assert parts.hostname is not None and parts.port is not None
    process = psutil.Process(site.pid)
    cpu_before = sum(process.cpu_times()[:2])
    started = time.perf_counter()
    run = asyncio.run(_measure(parts.hostname, parts.port, concurrency, total, max_seconds, keep_alive))
    seconds = time.perf_counter() - started
    cpu_seconds = sum(process.cpu_times()[:2]) - cpu_before
    responses = len(run.latencies)
    latencies = sorted(run.latencies) or [0.0]
    return Row(
        concurrency=concurrency,
        keep_alive=keep_alive,
        responses=responses,
        seconds=round(seconds, 3),
        requests_per_second=round(responses / seconds, 1),
        p50_ms=round(statistics.median(latencies) * 1000, 2),
        p99_ms=round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 2),
        refused=run.refused,
        errors=run.errors,
        site_cpu_ms_per_1000=round(cpu_seconds * 1000 / max(responses, 1) * 1000, 1),
    )


def measure_all(site: RunningSite, requests: int, max_seconds: float) -> list[Row]:
    """Warm the site up, then measure every keep-alive level and 256 clients opening a connection per request."""
    measure_level(site, 16, PRODUCT_IDS, max_seconds, True)  # render and cache every product page once
    rows = [measure_level(site, level, requests, max_seconds, True) for level in CONCURRENCY_LEVELS]
    rows.append(measure_level(site, 256, requests // 4, max_seconds, False))
    return rows


def format_table(rows: list[Row]) -> str:
    """Return the rows as a plain-text table."""
    header = f"{'conc':>5} {'keep-alive':>10} {'responses':>9} {'s':>6} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
    header += f"{'refused':>7} {'errors':>6} {'site CPU ms/1k':>14}"
    lines = [header]
    for row in rows:
        lines.append(
            f"{row.concurrency:>5} {'yes' if row.keep_alive else 'no':>10} {row.responses:>9} {row.seconds:>6.2f} "
            f"{row.requests_per_second:>8.0f} {row.p50_ms:>7.2f} {row.p99_ms:>7.2f} {row.refused:>7} "
            f"{row.errors:>6} {row.site_cpu_ms_per_1000:>14.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print (and optionally save) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20_000, help="requests per concurrency level")
    parser.add_argument("--max-seconds", type=float, default=10.0, help="time cap per level")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    with start_site(seed=0) as site:
        rows = measure_all(site, args.requests, args.max_seconds)
    print(format_table(rows))
    payload = {
        "schema_version": 1,
        "benchmark": "site_throughput",
        "python": sys.version.split()[0],
        "machine": {"platform": platform.platform(), "cpus": psutil.cpu_count()},
        "rows": [asdict(row) for row in rows],
    }
    if args.json is not None:
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    latest.save("site_throughput", "latest", {k: v for k, v in payload.items() if k != "machine"})
    refused = sum(row.refused for row in rows)
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())

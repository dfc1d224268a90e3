"""Drives a running replay site alone with an asyncio HTTP/1.1 client (benchmark helper, its own process).

Usage: python benchmarks/replay_load.py REPLAY_URL REPLAY_PID URLS_JSON REQUESTS; prints JSON rows:
requests/s, median latency and the replay site's CPU per 1,000 responses, on original and copy hosts.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
from site_throughput import _Client, _Run


@dataclass
class LoadRow:
    """The replay site driven alone."""

    hosts: str
    concurrency: int
    responses: int
    requests_per_second: float
    p50_ms: float
    site_cpu_ms_per_1000: float


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


class _ReplayRun(_Run):
    """The load generator's request budget, asking for recorded URLs (optionally on copy hosts)."""

    def __init__(self, total: int, deadline: float, urls: list[str], copies: int) -> None:
        super().__init__(total, deadline)
        self._urls = urls
        self._copies = copies

    def next_path(self) -> str | None:
        if not self.has_budget():
            return None
        self._remaining -= 1
        self._counter += 1
        url = self._urls[self._counter % len(self._urls)]
        copy = self._counter % self._copies
        if copy:
            url = url.replace("://", f"://crawlmem-copy{copy}.", 1)
        return "/" + url


async def _drive(host: str, port: int, run: _ReplayRun, concurrency: int) -> None:
    loop = asyncio.get_running_loop()

    async def worker() -> None:
        _, client = await loop.create_connection(lambda: _Client(run, True), host, port)
        await client.done

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def load(base_url: str, pid: int, urls: list[str], copies: int, concurrency: int, total: int, max_seconds: float) -> LoadRow:
    """Drive the replay site alone; requests/s and its CPU per 1,000 responses."""
    host, port = base_url.split("//")[1].split(":")
    site = psutil.Process(pid)
    before, started = cpu_seconds(site), time.perf_counter()
    run = _ReplayRun(total, started + max_seconds, urls, copies)
    asyncio.run(_drive(host, int(port), run, concurrency))
    seconds = time.perf_counter() - started
    responses = len(run.latencies)
    assert run.errors == 0, f"{run.errors} non-200 answers"
    return LoadRow("original" if copies == 1 else f"{copies} copies", concurrency, responses, round(responses / seconds, 1),
                   round(statistics.median(run.latencies or [0.0]) * 1000, 2),
                   round((cpu_seconds(site) - before) * 1e6 / max(responses, 1), 1))


def main(argv: list[str]) -> int:
    """Measure three rows and print them as JSON."""
    base_url, pid, urls = argv[0], int(argv[1]), json.loads(Path(argv[2]).read_text())
    total = int(argv[3])
    rows = [load(base_url, pid, urls, copies, concurrency, total, 8.0) for copies, concurrency in ((1, 16), (1, 64), (20, 64))]
    print(json.dumps([asdict(r) for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

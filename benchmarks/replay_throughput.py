"""Replay: the replay site's throughput and CPU share in a crawl; a replayed crawl beside the live one (benchmark script).

Usage: python benchmarks/replay_throughput.py [--responses 1000] [--rounds 3] [--json out.json]

1. Records a catalog crawl of the fixture site (Scrapy's HTTP cache, filesystem storage).
2. Side by side, alternating, ``--rounds`` times: the same measured crawl (the plugin's default
   mode) against the live fixture site and replayed from the recording; wall time, CPU seconds
   of the crawl process and of the site process, peak RSS, growth per response, verdict.
3. Drives the replay site alone with an asyncio HTTP/1.1 client (keep-alive, one request in
   flight per connection) on recorded URLs, original and copy hosts: requests/s and its CPU
   time per 1,000 responses.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import latest
import psutil
from bench_spiders import Catalog, catalog_path
from harness import Crawl, block_on, measured, stop_reactor  # installs the asyncio reactor first

from pytest_crawlmem.core.replay import ReplayTarget
from pytest_crawlmem.harness.replay_site import running_replay
from pytest_crawlmem.harness.site import start_site
from pytest_crawlmem.measure.runner import CrawlOptions


@dataclass
class CrawlRow:
    """One measured crawl, live or replayed."""

    source: str
    round: int
    responses: int
    wall_seconds: float
    crawl_cpu_seconds: float
    site_cpu_seconds: float
    site_cpu_share: float
    peak_rss_mib: float
    growth_per_response_bytes: float | None
    verdict: str


def record(site_url: str, responses: int, cache_dir: Path) -> str:
    """Crawl the live catalog once with the HTTP cache on; return the start URL."""
    from bench_spiders import BASE_SETTINGS
    from scrapy.crawler import CrawlerRunner

    start = site_url + catalog_path(responses)
    settings = {**BASE_SETTINGS, "HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": str(cache_dir), "HTTPCACHE_EXPIRATION_SECS": 0}
    block_on(CrawlerRunner(settings).crawl(Catalog, start_urls=[start]))
    return start


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def one_crawl(source: str, round_: int, start: str, site_pid: int, target: ReplayTarget | None, reports: Path) -> CrawlRow:
    """Run the measured catalog crawl once, live (``target`` None) or replayed."""
    me, site = psutil.Process(), psutil.Process(site_pid)
    options = CrawlOptions(report_dir=Path(tempfile.mkdtemp(prefix=f"{source}-", dir=reports)), replay=target)
    crawl_before, site_before, started = cpu_seconds(me), cpu_seconds(site), time.perf_counter()
    result = measured(Crawl(Catalog, {"start_urls": [start]}, {}), options)
    wall = time.perf_counter() - started
    crawl_cpu, site_cpu = cpu_seconds(me) - crawl_before, cpu_seconds(site) - site_before
    if target is not None:
        assert result.replay_misses == 0, result.replay_missed_urls[:3]
    return CrawlRow(source, round_, result.responses, round(wall, 2), round(crawl_cpu, 2), round(site_cpu, 2),
                    round(site_cpu / (site_cpu + crawl_cpu), 3), round(result.peak_rss / 2**20, 1),
                    result.growth.per_response_bytes, result.verdict)


def recorded_urls(cache_dir: Path) -> list[str]:
    """The URLs of the recording's 200 responses."""
    import ast

    urls = []
    for meta in cache_dir.glob("*/*/*/meta"):
        data = ast.literal_eval(meta.read_text())
        if data["status"] == 200:
            urls.append(data["url"])
    return sorted(urls)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the tables (and save them as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--responses", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load-requests", type=int, default=20_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="replay-bench-"))
    rows: list[CrawlRow] = []
    loads: list[dict[str, Any]] = []
    with start_site() as site:
        start = record(site.base_url, args.responses, work / "cache")
        recording = work / "cache"
        summary_size = sum(f.stat().st_size for f in recording.rglob("*") if f.is_file())
        with running_replay(recording) as target:
            replay_pid = next(p.pid for p in psutil.Process().children() if "fixture_sites.replay" in " ".join(p.cmdline()))
            for round_ in range(1, args.rounds + 1):
                rows.append(one_crawl("live", round_, start, site.pid, None, work))
                rows.append(one_crawl("replay", round_, start, replay_pid, target, work))
            # the load generator runs asyncio itself: in its own process, away from this one's reactor
            urls_file = work / "urls.json"
            urls_file.write_text(json.dumps(recorded_urls(recording)))
            done = subprocess.run([sys.executable, str(Path(__file__).with_name("replay_load.py")), target.url, str(replay_pid),
                                   str(urls_file), str(args.load_requests)], capture_output=True, text=True, check=True)
            loads = json.loads(done.stdout)
    stop_reactor()
    entries = int(target.summary.get("entries", 0))
    per_page = summary_size / max(entries, 1) / 1024
    print(f"recording: {entries} responses, {summary_size / 1024:.1f} KiB on disk ({per_page:.2f} KiB/page)")
    print(f"{'source':>7} {'round':>5} {'resp':>5} {'wall s':>7} {'crawl CPU s':>11} {'site CPU s':>10} {'site share':>10}"
          f" {'peak MiB':>8} {'B/resp':>7} verdict")
    for r in rows:
        growth = "-" if r.growth_per_response_bytes is None else f"{r.growth_per_response_bytes:.0f}"
        print(f"{r.source:>7} {r.round:>5} {r.responses:>5} {r.wall_seconds:>7.2f} {r.crawl_cpu_seconds:>11.2f}"
              f" {r.site_cpu_seconds:>10.2f} {r.site_cpu_share:>10.1%} {r.peak_rss_mib:>8.1f} {growth:>7} {r.verdict}")
    for source in ("live", "replay"):
        mine = [r for r in rows if r.source == source]
        print(f"median {source}: wall {statistics.median(r.wall_seconds for r in mine):.2f} s,"
              f" crawl CPU {statistics.median(r.crawl_cpu_seconds for r in mine):.2f} s,"
              f" site share {statistics.median(r.site_cpu_share for r in mine):.1%}")
    live = statistics.median(r.wall_seconds for r in rows if r.source == "live")
    replayed = statistics.median(r.wall_seconds for r in rows if r.source == "replay")
    print(f"replayed / live wall time: {replayed / live:.3f}x")
    print(f"{'hosts':>10} {'conc':>5} {'responses':>9} {'req/s':>8} {'p50 ms':>7} {'site CPU ms/1k':>14}")
    for row in loads:
        print(f"{row['hosts']:>10} {row['concurrency']:>5} {row['responses']:>9} {row['requests_per_second']:>8.0f}"
              f" {row['p50_ms']:>7.2f} {row['site_cpu_ms_per_1000']:>14.1f}")
    document = {"recording_bytes": summary_size, "entries": entries, "crawls": [asdict(r) for r in rows], "load": loads}
    if args.json:
        args.json.write_text(json.dumps({"machine": platform.platform(), "cpus": psutil.cpu_count(), **document}, indent=2))
    latest.save("replay_throughput", "latest", document)
    return 0


if __name__ == "__main__":
    sys.exit(main())

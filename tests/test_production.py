"""The extension in a production crawl: a plain CrawlerProcess script, then `crawlmem report` on its stream."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from spiders_source import CATALOG_SPIDER

SCRIPT = '''
import sys
import scrapy
from scrapy.crawler import CrawlerProcess
from pytest_crawlmem.harness.site import start_site

''' + CATALOG_SPIDER + '''

class FirstPageChecks(Catalog):
    def parse(self, response):
        if response.url.endswith("pages=30&per_page=20"):
            import gc
            self.logger.info("gc freeze count %d", gc.get_freeze_count())
            yield scrapy.Request(response.urljoin("/status/404"), callback=self.parse_product)
        yield from super().parse(response)


with start_site() as site:
    process = CrawlerProcess({
        "EXTENSIONS": {"pytest_crawlmem.extension.CrawlMemExtension": 0},
        "CRAWLMEM_ENABLED": True,
        "CRAWLMEM_JSONL": sys.argv[1],
        "CRAWLMEM_LOG_INTERVAL_SECONDS": 0.3,
        "CRAWLMEM_INTERVAL_SECONDS": 0.1,
        "LOG_LEVEL": "INFO",
        "HTTPERROR_ALLOW_ALL": True,
    })
    process.crawl(FirstPageChecks, start_urls=[site.url("/catalog/?pages=30&per_page=20")])
    process.start()
'''


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_a_production_crawl_logs_status_lines_and_streams_samples_that_crawlmem_report_renders(tmp_path: Path):
    script = tmp_path / "crawl.py"
    script.write_text(SCRIPT)
    stream = tmp_path / "crawlmem-samples.jsonl"
    proc = subprocess.run([sys.executable, str(script), str(stream)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = [line for line in proc.stderr.splitlines() if "crawlmem: rss=" in line]
    assert len(status) >= 2, proc.stderr[-3000:]
    fields = ("scheduled", "inflight", "active", "backout", "items", "responses", "retries", "status", "size_p50",
              "size_p95", "latency_p50", "latency_p95", "jobdir", "stream", "checkpoints", "pause_max", "timeline")
    assert all(f" {field}=" in status[-1] for field in fields), status[-1]
    assert re.search(r"status=200:\d+,404:1 ", status[-1]), status[-1]
    assert re.search(r"latency_p50=\d+ms", status[-1]) and re.search(r"size_p95=[\d.]+(B|KiB|MiB) ", status[-1]), status[-1]
    for key in ("crawlmem/peak_rss", "crawlmem/status/rss_bytes", "crawlmem/status/response_p95_bytes",
                "crawlmem/status/latency_p95_seconds", "crawlmem/status/stream_bytes", "crawlmem/status/self_cpu_seconds",
                "crawlmem/checkpoint_pause_max_seconds", "crawlmem/checkpoint_pause_total_seconds"):
        assert f"'{key}':" in proc.stderr, key
    assert "gc freeze count 0" in proc.stderr  # production crawls leave the GC alone (CRAWLMEM_GC_FREEZE is opt-in)
    kinds = [json.loads(line)["kind"] for line in stream.read_text().splitlines()]
    assert kinds[0] == "header" and kinds.count("checkpoint") >= 5 and kinds.count("sample") >= 5

    rendered = subprocess.run([sys.executable, "-m", "pytest_crawlmem", "report", str(stream)],
                              capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    page = (tmp_path / "report.html").read_text()
    assert "<svg" in page and "catalog" in page


DAY_SCRIPT = '''
import json, sys, time, tracemalloc
from pathlib import Path
from pytest_crawlmem.core.defaults import CRAWLMEM_DEFAULTS, CrawlMemConfig
from pytest_crawlmem.measure.extension import CrawlMemExtension
from pytest_crawlmem.core.schedule import next_checkpoint_at
from pytest_crawlmem.core.models import Checkpoint, Sample
from pytest_crawlmem.measure.status import read_status

interval = float(sys.argv[2])
hours = float(sys.argv[3])
budget = int(sys.argv[4]) if len(sys.argv) > 4 else CRAWLMEM_DEFAULTS["CRAWLMEM_JSONL_MAX_BYTES"]
tracemalloc.start(1)
before = tracemalloc.get_traced_memory()[0]
ext = CrawlMemExtension(None, CrawlMemConfig.of(interval_seconds=interval, jsonl=sys.argv[1],
                                                jsonl_max_bytes=budget))
ext.started_at = time.monotonic()
ext.recording.header(spider="day", interval_seconds=interval, crawl_id="day-1")
n = int(hours * 3600 / interval)
per_sample = max(1, round(100 * interval))  # 100 responses a second
spike = n * 13 // 24  # a 1 GiB spike at hour 13, one sample long
next_checkpoint = 100
responses = 0
for i in range(n):
    responses += per_sample
    for _ in range(min(per_sample, 2)):  # the histograms are constant-size: 2 values a sample (172,800 a day) show it
        ext.response_sizes.add(20_000 + (i * 7919) % 400_000)
        ext.latency_us.add(5_000 + (i * 104729) % 900_000)
    ext.responses, ext.items = responses, responses // 2
    rss = 2**30 if i == spike else 300 * 2**20 + (i % 600) * 4096
    ext.recording.add_sample(Sample(t_seconds=round(i * interval, 4), responses=responses, items=responses // 2,
                                    rss_bytes=rss, scheduled=(i * 31) % 5000, inflight=16, slot_queued=3,
                                    active_size_bytes=(i * 13) % 5_000_000, backout=i % 5 == 0))
    if responses >= next_checkpoint:
        next_checkpoint = next_checkpoint_at(responses, 100)
        ext.recording.add_checkpoint(Checkpoint(responses=responses, t_seconds=i * interval, rss_bytes=300 * 2**20,
                                                heap_bytes=200 * 2**20, traced_bytes=None, scheduled=4000,
                                                live_refs={"Request": 4000, "HtmlResponse": 0}, cost_seconds=0.2))
    if i % 600 == 0:
        status = read_status(ext)
held = tracemalloc.get_traced_memory()
kept = ext.recording.samples
print(json.dumps({
    "samples": n, "held_bytes": held[0] - before, "peak_bytes": held[1] - before,
    "kept": len(kept), "span": ext.recording.timeline.span, "max_rss": max(s.rss_bytes for s in kept),
    "checkpoints": len(ext.recording.checkpoints), "stream_bytes": ext.recording.stream_bytes,
    "rotations": ext.recording.stream_rotations, "status_rss": status.rss_bytes,
}))
ext.recording.close()
'''


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_a_24_hour_crawl_holds_a_few_mib_and_its_stream_stays_within_budget_with_the_peak(tmp_path: Path):
    """A day at the production interval (1 s, 100 responses/s), time-compressed: the extension's own heap, traced."""
    from pytest_crawlmem.reports.jsonl import read_samples_jsonl

    stream = tmp_path / "day.jsonl"
    proc = subprocess.run([sys.executable, "-c", DAY_SCRIPT, str(stream), "1.0", "24"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    day = json.loads(proc.stdout)
    assert day["samples"] == 86_400
    assert day["held_bytes"] < 3 * 2**20, day  # 1.4 MiB measured; unbounded, the samples alone were ~35 MiB
    assert day["peak_bytes"] < 4 * 2**20, day  # 2.3 MiB measured (a halving copies the kept list)
    assert day["kept"] <= 4096 and day["span"] >= 32 and day["max_rss"] == 2**30
    assert day["rotations"] == 0 and day["stream_bytes"] < 64 * 2**20  # 86,400 samples fit the default 64 MiB budget
    assert day["status_rss"] >= 300 * 2**20
    read = read_samples_jsonl(stream)
    assert max(s["rss_bytes"] for s in read.samples) == 2**30 and len(read.samples) == 86_400


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_a_stream_over_its_budget_rotates_keeping_the_peak_and_the_heap_bounded(tmp_path: Path):
    """An hour sampled every 0.1 s (36,000 samples, ~13 MiB of records) under the smallest budget, 8 MiB."""
    from pytest_crawlmem.reports.jsonl import read_samples_jsonl

    stream = tmp_path / "day.jsonl"
    proc = subprocess.run([sys.executable, "-c", DAY_SCRIPT, str(stream), "0.1", "1", str(8 * 2**20)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    day = json.loads(proc.stdout)
    assert day["held_bytes"] < 3 * 2**20 and day["peak_bytes"] < 4 * 2**20, day
    assert day["rotations"] >= 1 and day["stream_bytes"] <= 8 * 2**20 + 1024, day
    on_disk = sum(p.stat().st_size for p in tmp_path.glob("day.jsonl*"))
    assert on_disk == day["stream_bytes"], (on_disk, day)
    read = read_samples_jsonl(stream)
    assert read.problems == [] and max(s["rss_bytes"] for s in read.samples) == 2**30
    assert sum(s.get("span", 1) for s in read.samples) == day["samples"]


METRICS_SCRIPT = '''
import sys
import scrapy
from scrapy.crawler import CrawlerProcess
from pytest_crawlmem.harness.site import start_site


class Slow(scrapy.Spider):
    name = "slow"

    async def start(self):
        for i in range(120):
            yield scrapy.Request(self.base + f"/slow/{i}?ms=150")
        yield scrapy.Request(self.base + "/status/503", callback=self.parse)

    def parse(self, response):
        yield {"url": response.url}


with start_site() as site:
    process = CrawlerProcess({
        "EXTENSIONS": {"pytest_crawlmem.extension.CrawlMemExtension": 0},
        "CRAWLMEM_ENABLED": True,
        "CRAWLMEM_PROMETHEUS_PORT": 0,
        "CONCURRENT_REQUESTS": 4,
        "RETRY_TIMES": 1,
        "LOG_LEVEL": "INFO",
    })
    process.crawl(Slow, base=site.base_url)
    process.start()
'''


def _scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_prometheus_metrics_are_served_while_the_crawl_runs_and_the_port_is_freed_after(tmp_path: Path):
    script = tmp_path / "crawl.py"
    script.write_text(METRICS_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "Prometheus metrics on" in line:
                found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert found.wait(60), "".join(lines)[-3000:]
        url = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", "".join(lines)).group(1)
        scrapes = []
        while proc.poll() is None and len(scrapes) < 40:
            try:
                scrapes.append(_scrape(url))
            except OSError:
                break  # the crawl closed between poll() and the scrape
            time.sleep(0.1)
        assert proc.wait(120) == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    during = [s for s in scrapes if s.get('crawlmem_responses_total{spider="slow"}', 0) > 0]
    assert len(during) >= 2, scrapes[-1:]
    last = during[-1]
    assert last['crawlmem_rss_bytes{spider="slow"}'] > 10 * 2**20
    assert 'crawlmem_scheduled_requests{spider="slow"}' in last and 'crawlmem_inflight_requests{spider="slow"}' in last
    assert last['crawlmem_latency_p50_seconds{spider="slow"}'] >= 0.1  # every page answers after 150 ms
    assert 'crawlmem_responses_by_status_total{spider="slow",status="200"}' in last
    counts = [s['crawlmem_responses_total{spider="slow"}'] for s in during]
    assert counts == sorted(counts) and counts[-1] > counts[0]  # scraped while it ran, not once at the end
    with pytest.raises(OSError):
        _scrape(url)


THINNED_TEST = '''
import json
from spiders import Catalog


def test_it(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=40&per_page=20")],
                   settings={"CRAWLMEM_TIMELINE_SAMPLES": 16, "CONCURRENT_REQUESTS": 4})
    assert result.responses == 840
    assert 0 < len(result.samples) <= 16
    assert max(s.span for s in result.samples) > 1  # the timeline halved at least once
    assert result.peak_rss >= max(s.rss_bytes for s in result.samples)
    assert result.peaks.max_scheduled >= max(s.scheduled or 0 for s in result.samples) > 0
    assert result.verdict in ("steady", "inconclusive")
    report = json.loads((result.report_dir / "report.json").read_text())
    assert report["result"]["samples"] == len(result.samples)
'''


def test_a_test_crawl_whose_timeline_thins_still_judges_and_reports(pytester: pytest.Pytester):
    """A real crawl through the plugin with a 16-sample timeline at 0.01 s: merged samples reach every consumer."""
    from spiders_source import SPIDERS

    pytester.makepyfile(spiders=SPIDERS, test_thinned=THINNED_TEST)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--crawlmem-interval", "0.01", timeout=300)
    outcome.assert_outcomes(passed=1)
    report_dir = pytester.path / ".crawlmem" / "test_thinned.py__test_it"
    assert (report_dir / "report.html").is_file()
    spans = [json.loads(line).get("span", 1) for line in (report_dir / "samples.jsonl").read_text().splitlines()
             if json.loads(line)["kind"] == "sample"]
    assert spans and set(spans) == {1}  # the stream keeps every raw sample (no rotation under 64 MiB)


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_a_metrics_port_in_use_is_logged_and_the_crawl_goes_on(tmp_path: Path):
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    script = tmp_path / "crawl.py"
    script.write_text(METRICS_SCRIPT.replace('"CRAWLMEM_PROMETHEUS_PORT": 0', f'"CRAWLMEM_PROMETHEUS_PORT": {port}')
                      .replace("range(120)", "range(5)"))
    try:
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    finally:
        taken.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"crawlmem: could not serve Prometheus metrics on 127.0.0.1:{port}:" in proc.stderr
    received = re.search(r"'response_received_count': (\d+)", proc.stderr)
    assert received and int(received.group(1)) >= 5, proc.stderr[-2000:]  # the 5 slow pages at least: the crawl ran


LEAKY_SCRIPT = '''
import sys
import scrapy
from scrapy.crawler import CrawlerProcess
from pytest_crawlmem.harness.site import start_site

KEPT = []

''' + CATALOG_SPIDER + '''

class Hoarding(Catalog):
    name = "hoarding"

    def parse_product(self, response):
        KEPT.append(bytes(8192))  # 8 KiB kept per product: the leak
        yield from super().parse_product(response)


with start_site() as site:
    process = CrawlerProcess({
        "EXTENSIONS": {"pytest_crawlmem.extension.CrawlMemExtension": 0},
        "CRAWLMEM_ENABLED": True,
        "CRAWLMEM_JSONL": sys.argv[1],
        "CRAWLMEM_LOG_INTERVAL_SECONDS": 0.5,
        "LOG_LEVEL": "INFO",
    })
    process.crawl(Hoarding, start_urls=[site.url("/catalog/?pages=40&per_page=20")])  # 840 responses (2,100 took 5 min, load 30)
    process.start()
'''


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_a_production_crawl_that_leaks_warns_once_and_streams_its_verdict_sites_and_finish(tmp_path: Path):
    script = tmp_path / "crawl.py"
    script.write_text(LEAKY_SCRIPT)
    stream = tmp_path / "crawlmem-samples.jsonl"
    proc = subprocess.run([sys.executable, str(script), str(stream)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line and "crawlmem: leak suspected" in line]
    assert len(warnings) == 1, proc.stderr[-5000:]
    assert "retained-objects" in warnings[0], warnings[0]
    assert "'crawlmem/verdict': 'retained-objects'" in proc.stderr, proc.stderr[-3000:]
    per_response = re.search(r"'crawlmem/growth_per_response': ([\d.]+)", proc.stderr)
    assert per_response and 4096 < float(per_response.group(1)) < 4 * 8192, proc.stderr[-3000:]
    status = [line for line in proc.stderr.splitlines() if "crawlmem: rss=" in line]
    assert re.search(r" active=([\d.]+(B|KiB|MiB)|-) ", status[-1]), status[-1]
    assert "verdict=retained-objects" in status[-1], status[-1]
    finish = [json.loads(line) for line in stream.read_text().splitlines() if '"finish"' in line]
    assert finish and finish[-1]["reason"] == "finished" and finish[-1]["growth_sites"], finish

    rendered = subprocess.run([sys.executable, "-m", "pytest_crawlmem", "report", str(stream)],
                              capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    page = (tmp_path / "report.html").read_text()
    assert "no allocation site recorded" not in page
    assert "crawl.py" in page  # the growth site: the spider's own line
    assert '<div class="label">finish reason</div><div class="value">finished</div>' in page

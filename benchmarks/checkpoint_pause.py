"""What a drained checkpoint's pause is made of, with and without a scheduler backlog.

The 100,000-response soak saw pauses grow with the crawl's backlog (0.1 s with under 1,000 requests
queued, 1.7 s with 33,000). This script times the parts of each checkpoint of a production crawl
(the extension at its defaults): the drain (pause to drained), ``gc.collect()``, ``malloc_trim``,
the trackref count and the rest, in a crawl whose first page queues ``--backlog`` product requests
and that stops after ``--responses`` responses (``CLOSESPIDER_PAGECOUNT``), so the backlog stays
queued at every checkpoint. Each crawl runs in a fresh process, against the fixture site.

    python benchmarks/checkpoint_pause.py --backlog 0,35000 --responses 3000
    python benchmarks/checkpoint_pause.py --backlog 0,35000 --responses 3000 --set CRAWLMEM_GC_FREEZE=true

Writes a part of ``benchmarks/results/checkpoint_pause.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import latest
from soak import parse_overrides

ROOT = Path(__file__).resolve().parent.parent

CHILD = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import scrapy
from scrapy.crawler import CrawlerProcess
from bench_spiders import BASE_SETTINGS
from pytest_crawlmem.attribution import window as attribution
from pytest_crawlmem.measure import extension
from pytest_crawlmem.probes import meter
from pytest_crawlmem.probes import readings as probes

base, backlog, responses, out = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
overrides = json.loads(sys.argv[6])
parts, current = [], {}


def timed(name, func):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            current[name] = current.get(name, 0.0) + time.perf_counter() - started
    return wrapper


class TimedGC:
    def __getattr__(self, name):
        import gc
        value = getattr(gc, name)
        return timed("collect", value) if name == "collect" else value


meter.gc = attribution.gc = TimedGC()  # the checkpoint's gc.collect() and the attribution window's
probes.malloc_trim = timed("trim", probes.malloc_trim)
probes.live_ref_counts = timed("refs", probes.live_ref_counts)
begin, take = extension.CrawlMemExtension._begin_checkpoint, extension.CrawlMemExtension._take_checkpoint


def begin_checkpoint(self):
    current.clear()
    current["began"] = time.perf_counter()
    begin(self)


def take_checkpoint(self, **kwargs):
    started = time.perf_counter()
    take(self, **kwargs)
    if "began" in current:
        queued = self.recording.checkpoints[-1].scheduled
        parts.append({"responses": self.responses, "queued": queued, "drain": started - current.pop("began"),
                      "collect": current.get("collect", 0.0), "trim": current.get("trim", 0.0),
                      "refs": current.get("refs", 0.0), "take": time.perf_counter() - started})


extension.CrawlMemExtension._begin_checkpoint = begin_checkpoint
extension.CrawlMemExtension._take_checkpoint = take_checkpoint


class Backlog(scrapy.Spider):
    name = "backlog"

    async def start(self):
        yield scrapy.Request(base + "/catalog/?pages=1&per_page=5")

    def parse(self, response):
        for i in range(backlog):
            yield scrapy.Request(f"{base}/catalog/product/{i}", callback=self.parse_product)
        for i in range(backlog, backlog + responses):  # enough work whatever the backlog
            yield scrapy.Request(f"{base}/catalog/product/{i}", callback=self.parse_product, priority=1)

    def parse_product(self, response):
        yield {"name": response.css("h1.name::text").get()}


settings = dict(BASE_SETTINGS, LOG_LEVEL="WARNING", CONCURRENT_REQUESTS=16, CLOSESPIDER_PAGECOUNT=responses,
                EXTENSIONS={"pytest_crawlmem.extension.CrawlMemExtension": 0}, CRAWLMEM_ENABLED=True, **overrides)
process = CrawlerProcess(settings)
process.crawl(Backlog)
process.start()
json.dump(parts, open(out, "w"))
'''


def run_one(base_url: str, backlog: int, responses: int, workdir: Path, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """One crawl in a fresh process; the parts of each of its checkpoints taken after the first page."""
    out = workdir / f"parts-{backlog}-{time.monotonic_ns()}.json"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "benchmarks"), base_url, str(backlog), str(responses),
                           str(out), json.dumps(overrides)], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"crawl with backlog {backlog} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    parts: list[dict[str, Any]] = json.loads(out.read_text())
    return parts


def main() -> None:
    """Run the crawls and write their checkpoints' parts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", default="0,35000", help="comma-separated: requests queued by the first page")
    parser.add_argument("--responses", type=int, default=3000)
    parser.add_argument("--set", action="append", default=[], metavar="CRAWLMEM_NAME=VALUE",
                        help="a CRAWLMEM_ setting of the crawls (JSON value), e.g. CRAWLMEM_GC_FREEZE=true")
    args = parser.parse_args()
    overrides = parse_overrides(args.set)
    sys.path.insert(0, str(ROOT))
    from pytest_crawlmem.harness.site import start_site

    results: dict[str, Any] = {}
    with start_site() as site, tempfile.TemporaryDirectory() as tmp:
        for backlog in (int(b) for b in args.backlog.split(",")):
            parts = [p for p in run_one(site.base_url, backlog, args.responses, Path(tmp), overrides) if p["responses"] > 0]
            scheduled = [p for p in parts if p["queued"] > 0] or parts  # the closing checkpoint may find none queued
            medians = {k: statistics.median(p[k] for p in scheduled) for k in ("drain", "collect", "trim", "refs", "take")}
            results[str(backlog)] = {"checkpoints": parts, "median_seconds": medians,
                                     "median_queued": statistics.median(p["queued"] for p in scheduled)}
            queued = results[str(backlog)]["median_queued"]
            print(f"backlog {backlog:>6,}: {len(scheduled)} checkpoints, median queued {queued:,.0f}; median "
                  + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in medians.items()), flush=True)
    suffix = "-" + "-".join(sorted(overrides)).lower() if overrides else ""
    out = latest.save("checkpoint_pause", suffix.lstrip("-").replace("_", "-") or "default",
                      {"settings": overrides, "results": results})
    print(f"written: {out}")


if __name__ == "__main__":
    main()

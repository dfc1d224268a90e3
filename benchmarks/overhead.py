"""Wall and CPU time of the same catalog crawl, bare vs measured by the extension, interleaved A/B.

    python benchmarks/overhead.py [--pairs 5] [--pages 50] [--json out.json]

Runs every crawl in this one process, alternating bare / sampled / sampled+checkpoints, so
machine noise hits all modes alike; prints median ratios to the bare crawl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

import scrapy  # noqa: E402
from scrapy.crawler import CrawlerRunner  # noqa: E402
from twisted.internet import defer, reactor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pytest_crawlmem.runner import CrawlOptions, crawl_settings  # noqa: E402
from pytest_crawlmem.site import start_site  # noqa: E402


class Catalog(scrapy.Spider):
    name = "catalog"

    def parse(self, response):  # type: ignore[no-untyped-def]
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):  # type: ignore[no-untyped-def]
        yield {"name": response.css("h1.name::text").get()}


BARE = {"LOG_LEVEL": "ERROR", "MEMUSAGE_ENABLED": False, "TELNETCONSOLE_ENABLED": False}
MODES = {
    "bare": BARE,
    "sampling": crawl_settings(BARE, CrawlOptions(checkpoints=False)),
    "checkpoints": crawl_settings(BARE, CrawlOptions(checkpoints=True)),
}


@defer.inlineCallbacks
def measure(url: str, pairs: int, out: dict[str, list[tuple[float, float]]]):  # type: ignore[no-untyped-def]
    for _ in range(pairs):
        for mode, settings in MODES.items():
            wall, cpu = time.perf_counter(), time.process_time()
            yield CrawlerRunner(settings).crawl(Catalog, start_urls=[url])
            out[mode].append((time.perf_counter() - wall, time.process_time() - cpu))
    reactor.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--json")
    args = parser.parse_args()
    out: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    with start_site() as site:
        url = site.url(f"/catalog/?pages={args.pages}&per_page=40")
        reactor.callWhenRunning(measure, url, args.pairs, out)
        reactor.run()
    bare_wall = statistics.median(w for w, _ in out["bare"])
    bare_cpu = statistics.median(c for _, c in out["bare"])
    rows = {}
    for mode, runs in out.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        rows[mode] = {"wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
                      "wall_ratio": round(wall / bare_wall, 3), "cpu_ratio": round(cpu / bare_cpu, 3)}
        print(f"{mode:12} wall {wall:6.2f}s ({wall / bare_wall:4.2f}x)  cpu {cpu:6.2f}s ({cpu / bare_cpu:4.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({"responses": args.pages * 41, "pairs": args.pairs, "modes": rows}, indent=2))


if __name__ == "__main__":
    main()

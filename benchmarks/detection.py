"""Detection power and false alarms of the leak verdict, over repeated real crawls.

    python benchmarks/detection.py [--runs 10] [--clean-runs 20] [--json out.json]

Every crawl runs in this one process against the fixture site, measured exactly as the
``crawl`` fixture measures it. Leaky crawls retain ``leak`` bytes per product response;
clean scenarios must never be called ``retained-objects``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections import OrderedDict, defaultdict
from pathlib import Path
from typing import Any

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

import scrapy  # noqa: E402
from scrapy.crawler import CrawlerRunner  # noqa: E402
from twisted.internet import defer, reactor  # noqa: E402

from pytest_crawlmem.runner import CrawlOptions, collect_result, crawl_settings  # noqa: E402
from pytest_crawlmem.site import start_site  # noqa: E402


class Catalog(scrapy.Spider):
    name = "catalog"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response: Any) -> Any:
        yield {"name": response.css("h1.name::text").get()}


class Leaky(Catalog):
    name = "leaky"
    kept: list[bytes] = []  # noqa: RUF012
    leak = 0

    def parse_product(self, response: Any) -> Any:
        self.kept.append(b"x" * self.leak)
        yield from super().parse_product(response)


class BoundedCache(Catalog):
    name = "bounded_cache"
    cache: OrderedDict[str, str] = OrderedDict()  # noqa: RUF012

    def parse_product(self, response: Any) -> Any:
        self.cache[response.url] = response.text * 3
        while len(self.cache) > 150:
            self.cache.popitem(last=False)
        yield from super().parse_product(response)


class LargePages(scrapy.Spider):
    name = "large_pages"
    base = ""

    async def start(self) -> Any:
        for i in range(700):
            yield scrapy.Request(self.base + f"/large/{i}?kb=128")

    def parse(self, response: Any) -> Any:
        yield {"links": len(response.css("a::attr(href)").getall())}


class Frontier(scrapy.Spider):
    name = "frontier"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a")


class SlowPipeline:
    def process_item(self, item: Any, spider: Any = None) -> Any:
        time.sleep(0.002)
        return item


BASE = {"LOG_LEVEL": "ERROR"}


def clean_scenarios(site: Any) -> dict[str, tuple[type, dict[str, Any], dict[str, Any]]]:
    catalog = {"start_urls": [site.url("/catalog/?pages=50&per_page=20")]}
    return {
        "catalog": (Catalog, catalog, {}),
        "bounded_cache": (BoundedCache, catalog, {}),
        "slow_pipeline": (Catalog, catalog, {"ITEM_PIPELINES": {f"{__name__}.SlowPipeline": 100}}),
        "large_pages": (LargePages, {"base": site.base_url}, {"CONCURRENT_REQUESTS": 8}),
        "backlog": (Frontier, {"start_urls": [site.url("/explode/0?fanout=20")]}, {"CLOSESPIDER_PAGECOUNT": 1500}),
    }


@defer.inlineCallbacks
def crawl_once(spider: type, kwargs: dict[str, Any], settings: dict[str, Any]) -> Any:
    options = CrawlOptions()
    runner = CrawlerRunner(crawl_settings({**BASE, **settings}, options))
    crawler = runner.create_crawler(spider)
    started = time.monotonic()
    yield runner.crawl(crawler, **kwargs)
    return collect_result(crawler, spider, time.monotonic() - started, options)


@defer.inlineCallbacks
def run_all(args: argparse.Namespace, site: Any, out: dict[str, Any]) -> Any:
    try:
        leaks = defaultdict(list)
        for responses in args.sizes:
            pages = max(1, round(responses / 21))
            for leak in args.leaks:
                for _ in range(args.runs):
                    Leaky.leak, Leaky.kept = leak, []
                    result = yield crawl_once(Leaky, {"start_urls": [site.url(f"/catalog/?pages={pages}&per_page=20")]}, {})
                    top = result.top_growth[0].location if result.top_growth else ""
                    leaks[f"{leak}@{responses}"].append(
                        {"verdict": result.verdict, "attributed": top.endswith("detection.py:" + str(LEAK_LINE)),
                         "seconds": result.duration_seconds}
                    )
                    Leaky.kept = []
                row = leaks[f"{leak}@{responses}"]
                flagged = sum(r["verdict"] == "retained-objects" for r in row)
                attributed = sum(r["attributed"] for r in row)
                print(f"leak {leak:6} B/resp at {responses:5} responses: flagged {flagged}/{len(row)},"
                      f" attributed {attributed}/{len(row)}", flush=True)
        clean = defaultdict(list)
        for name, (spider, kwargs, settings) in clean_scenarios(site).items():
            for _ in range(args.clean_runs):
                result = yield crawl_once(spider, kwargs, settings)
                clean[name].append({"verdict": result.verdict, "seconds": result.duration_seconds})
            verdicts = [r["verdict"] for r in clean[name]]
            print(f"clean {name:14}: retained-objects {verdicts.count('retained-objects')}/{len(verdicts)}"
                  f" ({', '.join(f'{v} {verdicts.count(v)}' for v in sorted(set(verdicts)))})", flush=True)
        out.update(leaks=leaks, clean=clean)
    finally:
        reactor.stop()


LEAK_LINE = next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if 'b"x" * self.leak' in line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--clean-runs", type=int, default=20)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--leaks", type=int, nargs="+", default=[512, 1024, 2048, 5120, 10240])
    parser.add_argument("--json")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    with start_site() as site:
        reactor.callWhenRunning(run_all, args, site, out)
        reactor.run()
    summary = {
        "machine": {"python": platform.python_version(), "machine": platform.machine()},
        "leaks": {k: {"runs": len(v), "flagged": sum(r["verdict"] == "retained-objects" for r in v),
                      "attributed": sum(r["attributed"] for r in v)} for k, v in out.get("leaks", {}).items()},
        "clean": {k: {"runs": len(v), "false_positives": sum(r["verdict"] == "retained-objects" for r in v),
                      "verdicts": sorted({r["verdict"] for r in v})} for k, v in out.get("clean", {}).items()},
    }
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

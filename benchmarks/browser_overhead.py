"""What measuring the browser tree costs a scrapy-playwright crawl, interleaved A/B/C in one process.

    python benchmarks/browser_overhead.py [--pairs 3] [--pages 60] [--json out.json]

Modes: ``bare`` (scrapy-playwright with Scrapy's CrawlerRunner alone), ``python-only`` (the
plugin with CRAWLMEM_BROWSER=False: the crawl process only) and ``browser`` (the plugin's
default for browser crawls: the tree's RSS every sample, PSS/USS every 2 s and at every
checkpoint, renderer GC before checkpoints). Prints median wall-time ratios to ``bare`` and
the sampler's own CPU time for the tree.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import harness
import scrapy

from pytest_crawlmem.crawl.browser import playwright_settings
from pytest_crawlmem.crawl.runner import CrawlOptions
from pytest_crawlmem.harness.site import start_site


class JsPages(scrapy.Spider):
    """Renders /js/ pages in Chromium (DOM built by script) and counts the products."""

    name = "js_pages"

    def __init__(self, base_url: str = "", pages: int = 60, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url, self.pages = base_url, int(pages)

    async def start(self):  # type: ignore[no-untyped-def]
        for number in range(self.pages):
            yield scrapy.Request(f"{self.base_url}/js/{number}", meta={"playwright": True})

    def parse(self, response):  # type: ignore[no-untyped-def]
        yield {"products": len(response.css("div.product"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--json")
    args = parser.parse_args()
    settings = playwright_settings({"CONCURRENT_REQUESTS": 4, "LOG_LEVEL": "ERROR"})
    walls: dict[str, list[float]] = {"bare": [], "python-only": [], "browser": []}
    tree_cpu: list[float] = []
    with start_site() as site, tempfile.TemporaryDirectory() as tmp:
        kwargs = {"base_url": site.base_url, "pages": args.pages}
        for _, mode in harness.rounds(list(walls), args.pairs):
            crawl = harness.Crawl(JsPages, kwargs, {**settings, "CRAWLMEM_BROWSER": mode == "browser"})
            with harness.timed() as timing:
                if mode == "bare":
                    harness.bare(crawl)
                    result = None
                else:
                    result = harness.measured(crawl, CrawlOptions(report_dir=Path(tempfile.mkdtemp(dir=tmp))))
            walls[mode].append(timing.wall)
            if result is not None and result.browser is not None:
                tree_cpu.append(result.browser.cost_seconds / timing.wall)
            print(f"{mode:12} {timing.wall:6.1f} s", flush=True)
    harness.stop_reactor()
    bare = harness.median(walls["bare"])
    rows = {mode: {"median_wall_seconds": round(harness.median(w), 2), "wall_ratio": round(harness.median(w) / bare, 3)}
            for mode, w in walls.items()}
    figures = {"pages": args.pages, "pairs": args.pairs, "modes": rows,
               "tree_sampler_cpu_share_of_one_core": round(harness.median(tree_cpu), 4),
               "machine": harness.machine_info()}
    for mode, row in rows.items():
        print(f"{mode:12} median {row['median_wall_seconds']:6.1f} s  {row['wall_ratio']:.2f}x bare")
    print(f"tree sampler CPU: {figures['tree_sampler_cpu_share_of_one_core']:.1%} of one core")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

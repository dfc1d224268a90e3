"""What the attribution window costs a leaky crawl, by traced depth: the same crawl bare and measured, interleaved.

    python benchmarks/attribution_cost.py [--pairs 5] [--leak 8192] [--concurrent-items 4] [--json out.json]

A 630-response catalog crawl whose spider keeps ``--leak`` bytes per product page (``bench_spiders.Leaky``): its
checkpoints look leaky, so the default mode opens one traced window (about 100 responses) and finds the holders at its
close. Each round runs the crawl bare, measured at each ``CRAWLMEM_ATTRIBUTION_FRAMES`` of ``--frames`` (0: no window),
and reports the median CPU seconds of the process and the verdict. ``--concurrent-items`` is the spider's
CONCURRENT_ITEMS: Scrapy 2.19 starts that many asyncio tasks a response, and a traced window traces each.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import latest
from bench_spiders import Catalog, Leaky
from harness import Crawl, bare, machine_info, measured, median, progress, rounds, stop_reactor

from pytest_crawlmem.harness.site import start_site
from pytest_crawlmem.measure.runner import CrawlOptions

CATALOG = "/catalog/?pages=30&per_page=20"  # 630 responses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--leak", type=int, default=8192, help="bytes kept per product page")
    parser.add_argument("--frames", type=int, nargs="+", default=[8, 4, 0], help="traced depths to compare")
    parser.add_argument("--concurrent-items", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    modes = ["bare", *(f"frames-{n}" for n in args.frames)]
    cpu: dict[str, list[float]] = defaultdict(list)
    verdicts: dict[str, Counter[str]] = defaultdict(Counter)
    with start_site() as site, tempfile.TemporaryDirectory(prefix="crawlmem-attribution-") as tmp:
        settings = {"CONCURRENT_ITEMS": args.concurrent_items}
        warm = Crawl(Catalog, {"start_urls": [site.url("/catalog/?pages=5&per_page=40")]}, settings)
        measured(warm, CrawlOptions(report_dir=Path(tmp) / "warm"))
        for i, mode in rounds(modes, args.pairs):
            frames = None if mode == "bare" else int(mode.split("-")[1])
            crawl = Crawl(Leaky, {"start_urls": [site.url(CATALOG)], "leak": args.leak},
                          {**settings, **({} if frames is None else {"CRAWLMEM_ATTRIBUTION_FRAMES": frames})})
            started = time.process_time()
            if frames is None:
                bare(crawl)
            else:
                verdicts[mode][measured(crawl, CrawlOptions(report_dir=Path(tmp) / f"{mode}-{i}")).verdict] += 1
            cpu[mode].append(time.process_time() - started)
            progress(f"round {i} {mode}: {cpu[mode][-1]:.2f} CPU-s")
    base = median(cpu["bare"])
    table = {mode: {"cpu_median_s": round(median(cpu[mode]), 3), "vs_bare": round(median(cpu[mode]) / base, 2),
                    "verdicts": dict(verdicts.get(mode, {}))} for mode in modes}
    for mode, row in table.items():
        print(f"{mode:10s} {row['cpu_median_s']:6.2f} CPU-s  {row['vs_bare']:5.2f}x bare  {row['verdicts']}")
    out: dict[str, Any] = {"machine": machine_info(), "pairs": args.pairs, "leak": args.leak,
                           "concurrent_items": args.concurrent_items, "table": table, "runs": cpu}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    latest.save("attribution_cost", f"ci{args.concurrent_items}", out)
    stop_reactor()


if __name__ == "__main__":
    main()

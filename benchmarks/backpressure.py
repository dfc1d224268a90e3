"""The scraper's backout under plain Scrapy and under the plugin, and the verdict, over repeated real crawls.

    python benchmarks/backpressure.py [--runs 10] [--shape pipeline|callback] [--pages 600] [--kb 256] [--ms 650]
                                      [--json benchmarks/results/backpressure.json]

The crawl: ``pages`` pages of ``kb`` KiB trickling in over ``ms`` (16 at once), one item each, through a pipeline
that serializes its writes (50 ms each: ``backpressure_spiders.SerializedWrites``). Per run: plain Scrapy's share of
50 ms samples with the scraper over ``SCRAPER_SLOT_MAX_ACTIVE_SIZE`` (``BackoutMeter``, no plugin), then the same
crawl through the plugin (``run_crawl``, default mode): its verdict and the share its reason states. ``--shape
callback``: the callback awaits a lookup serialized behind one lock (40 ms each: ``SerializedLookups``), no pipeline.
With ``--json``, the shape's runs replace that shape's entry in the file (the other shapes' stay).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from backpressure_spiders import READINGS, LargePages, SerializedLookups
from harness import Crawl, bare, machine_info, measured, progress, stop_reactor

from pytest_crawlmem.harness.site import start_site
from pytest_crawlmem.measure.runner import CrawlOptions

#: 16 downloads at once, each page trickling in over ``--ms``: pages arrive about as fast as the pipeline writes them
PIPELINE = {"ITEM_PIPELINES": {"backpressure_spiders.SerializedWrites": 300}, "CONCURRENT_REQUESTS": 16,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 16}
#: Shape -> (spider, settings).
SHAPES: dict[str, tuple[type, dict[str, Any]]] = {
    "pipeline": (LargePages, PIPELINE),
    "callback": (SerializedLookups, {"CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16}),
}
STATED = re.compile(r"over its active-size limit in (\d+)% of samples")


def one_run(base: str, shape: str, pages: int, kb: int, ms: int) -> dict[str, Any]:
    """Plain Scrapy's backout share, then the plugin's verdict, on the same crawl."""
    spider, settings = SHAPES[shape]
    kwargs = {"base": base, "pages": pages, "kb": kb, "path": f"/drip/{{i}}?kb={{kb}}&ms={ms}"}
    bare(Crawl(spider, kwargs, {**settings, "EXTENSIONS": {"backpressure_spiders.BackoutMeter": 500}}))
    plain = READINGS["over"] / READINGS["samples"] if READINGS["samples"] else None
    result = measured(Crawl(spider, kwargs, settings), CrawlOptions(), reports=False)
    stated = STATED.search(result.growth.reason)
    return {"plain_share": plain, "plain_samples": READINGS["samples"], "verdict": result.verdict,
            "stated_share": int(stated.group(1)) / 100 if stated else None, "responses": result.responses,
            "seconds": result.duration_seconds, "reason": result.growth.reason}


def save(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    """Write this shape's runs into ``args.json``, keeping the other shapes' and loads' entries."""
    key = f"{args.shape}{' beside ' + args.load if args.load else ''}"
    old = json.loads(args.json.read_text()) if args.json.exists() else {}
    shapes = old.get("shapes", {}) if isinstance(old.get("shapes"), dict) else {}
    hits = sum(r["verdict"] == "response-processing" for r in runs)
    shapes[key] = {"machine": machine_info(), "params": {"pages": args.pages, "kb": args.kb, "ms": args.ms},
                   "response_processing": f"{hits}/{len(runs)}", "runs": runs}
    args.json.write_text(json.dumps({"shapes": shapes}, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="pipeline")
    parser.add_argument("--load", default="", help="what else ran meanwhile, as recorded (e.g. 'a CPU hog')")
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--kb", type=int, default=256)
    parser.add_argument("--ms", type=int, default=650, help="each page trickles in over this many milliseconds")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    with start_site() as site:
        for i in range(args.runs):
            runs.append(one_run(site.base_url, args.shape, args.pages, args.kb, args.ms))
            row = runs[-1]
            progress(f"  run {i + 1}: plain Scrapy over its limit in {row['plain_share']:.0%} of samples;"
                     f" plugin {row['verdict']} (stated {row['stated_share']}), {row['seconds']:.0f} s")
            if args.json:
                save(args, runs)
    stop_reactor()
    hits = sum(r["verdict"] == "response-processing" for r in runs)
    plain = sorted(r["plain_share"] for r in runs if r["plain_share"] is not None)
    print(f"response-processing {hits}/{len(runs)}; plain Scrapy over its limit: median"
          f" {plain[len(plain) // 2]:.0%} of samples" if plain else f"response-processing {hits}/{len(runs)}")


if __name__ == "__main__":
    main()

"""Parse amplification: its cost (the same catalog crawl with the meter on and off, interleaved) and its figures.

    python benchmarks/amplification.py [--pairs 5] [--pages 25] [--kb 512] [--json out.json]

Cost: each round runs the catalog crawl in the plugin's default mode with
``CRAWLMEM_AMPLIFICATION`` off and on, the order alternating, and a bare crawl (Scrapy alone);
the figure is the median over rounds of on/off wall time (and CPU time), and of on/bare.
Figures: one crawl of the fixture site's large pages (``/large/<id>?kb=K``) and deeply nested
pages (``/nested/<id>?depth=D&kb=K``, D = 5, 50, 500), each parsed with a CSS selector; the
p50/p95/max of held bytes over body bytes per kind of page.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import latest
import scrapy
from bench_spiders import Catalog, catalog_path
from harness import Crawl, machine_info, measured, median, progress, rounds, run_mode, stop_reactor, timed

from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.harness.site import RunningSite, start_site
from pytest_crawlmem.measure.runner import CrawlOptions

#: The overhead target of the default mode against a bare crawl (benchmarks/overhead.py's TARGETS).
DEFAULT_TARGET = 1.35


class Links(scrapy.Spider):
    """Parses each page with a CSS selector, as a real callback does, and counts its links."""

    name = "links"

    def parse(self, response: Any) -> Any:
        yield {"links": len(response.css("a::attr(href)").getall())}


def run_cost(site: RunningSite, *, pairs: int, pages: int) -> dict[str, Any]:
    """Interleaved rounds of the catalog crawl: bare, meter off, meter on."""
    url = site.url(catalog_path(pages * 41))
    units = {"bare": None, "off": False, "on": True}
    runs: dict[str, list[dict[str, float]]] = {unit: [] for unit in units}
    catalog: dict[str, Any] = {}  # the catalog pages' own amplification, from the last crawl with the meter on
    with tempfile.TemporaryDirectory(prefix="crawlmem-amp-") as tmp:
        for _, unit in rounds(["bare", "on", "off"], 1):  # warm-up
            run_unit(unit, units[unit], url, Path(tmp))
        for i, unit in rounds(list(units), pairs):
            with timed(site.pid) as t:
                result = run_unit(unit, units[unit], url, Path(tmp))
            responses = result.responses if result else -1
            if result is not None and result.parse_amplification is not None:
                catalog = result.parse_amplification.to_json()
            runs[unit].append({"round": i, "wall": round(t.wall, 3), "cpu": round(t.cpu, 3), "responses": responses})
            progress(f"round {i} {unit:>4}: {t.wall:.2f} s wall, {t.cpu:.2f} s CPU, {responses} responses")
    ratios = {}
    for key in ("wall", "cpu"):
        on = [r[key] for r in runs["on"]]
        off = [r[key] for r in runs["off"]]
        bare = [r[key] for r in runs["bare"]]
        ratios[f"on_over_off_{key}"] = round(median([a / b for a, b in zip(on, off, strict=True)]), 3)
        ratios[f"on_over_bare_{key}"] = round(median([a / b for a, b in zip(on, bare, strict=True)]), 3)
        ratios[f"off_over_bare_{key}"] = round(median([a / b for a, b in zip(off, bare, strict=True)]), 3)
    return {"url": url, "runs": runs, "ratios": ratios, "default_target": DEFAULT_TARGET, "catalog_amplification": catalog}


def run_unit(unit: str, amplification: bool | None, url: str, tmp: Path) -> CrawlResult | None:
    """One catalog crawl: bare (None) or measured with the meter on or off; its result when measured."""
    if amplification is None:
        run_mode("bare", Crawl(Catalog, {"start_urls": [url]}, {}), tmp)
        return None
    crawl = Crawl(Catalog, {"start_urls": [url]}, {"CRAWLMEM_AMPLIFICATION": amplification})
    return measured(crawl, CrawlOptions(report_dir=Path(tempfile.mkdtemp(dir=tmp))), reports=False)


def run_figures(site: RunningSite, *, kb: int, copies: int = 4) -> dict[str, Any]:
    """Parse ``copies`` large and nested pages of ``kb`` KiB, one crawl per kind; the distribution of each."""
    kinds = {"large": "/large/{i}?kb={kb}", "nested-5": "/nested/{i}?depth=5&kb={kb}",
             "nested-50": "/nested/{i}?depth=50&kb={kb}", "nested-500": "/nested/{i}?depth=500&kb={kb}"}
    figures: dict[str, Any] = {}
    for kind, path in kinds.items():
        urls = [site.url(path.format(i=i, kb=kb)) for i in range(1, copies + 1)]
        with tempfile.TemporaryDirectory(prefix="crawlmem-amp-") as tmp:
            result = measured(Crawl(Links, {"start_urls": urls}, {"CONCURRENT_REQUESTS": 4}),
                              CrawlOptions(report_dir=Path(tmp)), reports=False)
        summary = result.parse_amplification
        assert summary is not None and summary.count == copies, summary
        figures[kind] = summary.to_json()
        progress(f"{kind:>10} {kb} KiB x{copies}: p50 {summary.p50_ratio}x, p95 {summary.p95_ratio}x, max {summary.max_ratio}x,"
                 f" held up to {(summary.max_held_bytes or 0) / 2**20:.1f} MiB")
    return figures


def step_cost(steps: int = 200_000) -> dict[str, float]:
    """Microseconds the meter adds to one step of a callback's output (a pass-through of the same generator without it)."""
    import time

    from pytest_crawlmem.probes.amplification import StepClock
    from pytest_crawlmem.probes.readings import read_malloc_in_use_bytes

    async def callback() -> Any:
        for i in range(steps):
            yield i

    async def plain() -> None:
        async for _ in callback():
            pass

    async def metered() -> None:
        async for _ in StepClock(read_malloc_in_use_bytes).measure(callback(), [0, 0]):
            pass

    def drive(coroutine: Any) -> float:
        started = time.perf_counter()
        with contextlib.suppress(StopIteration):
            coroutine.send(None)
        return time.perf_counter() - started

    plain_seconds = min(drive(plain()) for _ in range(3))
    metered_seconds = min(drive(metered()) for _ in range(3))
    return {"steps": steps, "plain_us_per_step": round(plain_seconds / steps * 1e6, 3),
            "metered_us_per_step": round(metered_seconds / steps * 1e6, 3),
            "added_us_per_step": round((metered_seconds - plain_seconds) / steps * 1e6, 3)}


def main() -> None:
    """Run both parts and print (and optionally save) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--pages", type=int, default=25, help="listing pages of 40 products each")
    parser.add_argument("--kb", type=int, default=512, help="size of the large and nested pages")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    steps = step_cost()
    progress(f"per step: {json.dumps(steps)}")
    with start_site() as site:
        figures = run_figures(site, kb=args.kb)
        cost = run_cost(site, pairs=args.pairs, pages=args.pages)
    stop_reactor()
    progress(f"cost: {json.dumps(cost['ratios'])}")
    amp = cost["catalog_amplification"]
    progress(f"catalog pages: p50 {amp.get('p50_ratio')}x, p95 {amp.get('p95_ratio')}x, max {amp.get('max_ratio')}x")
    document = {"machine": machine_info(), "step_cost": steps, "cost": cost, "figures": figures}
    if args.json:
        args.json.write_text(json.dumps(document, indent=2))
    latest.save("amplification", "latest", document)


if __name__ == "__main__":
    main()

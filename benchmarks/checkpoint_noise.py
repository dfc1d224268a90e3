"""How much clean crawls grow between drained checkpoints: the noise a leak threshold must sit above.

    python benchmarks/checkpoint_noise.py [--runs 3] [--every 25] [--json out.json]

Runs the clean scenarios of ``bench_spiders.clean_scenarios`` (and short ones of 300 responses)
with a checkpoint every ``--every`` responses, and prints, per scenario, the largest net growth per
response of the judged signal (heap estimate, net of the scheduler) in intervals that start at or after
50, 100 and 150 responses. Runs in this one process against the fixture site.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import latest
from bench_spiders import Catalog, catalog_path, clean_scenarios
from harness import Crawl, machine_info, measured, progress, stop_reactor

from pytest_crawlmem.core.evidence import intervals
from pytest_crawlmem.core.models import heap_estimate
from pytest_crawlmem.harness.site import start_site
from pytest_crawlmem.measure.runner import CrawlOptions


def interval_noise(checkpoints: list[Any], after: int) -> float:
    """Largest net heap growth per response among intervals starting at or after ``after`` responses."""
    kept = [c for c in checkpoints if c.responses >= after]
    kept = [c for i, c in enumerate(kept) if i == 0 or c.responses - kept[i - 1].responses >= 10]
    if len(kept) < 2:
        return 0.0
    values = [int(heap_estimate(c) or 0) for c in kept]
    return max(i.net_per_response for i in intervals(kept, values))


def main() -> None:
    """Run the clean scenarios with dense checkpoints; print the worst interval per warm-up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: dict[str, list[dict[str, float]]] = {}
    try:
        with start_site() as site:
            scenarios = clean_scenarios(site.base_url)
            scenarios["catalog_300"] = (Catalog, {"start_urls": [site.url(catalog_path(300, per_page=20))]}, {})
            for name, (spider, kwargs, settings) in scenarios.items():
                for _ in range(args.runs):
                    dense = {**settings, "CRAWLMEM_CHECKPOINT_MIN_RESPONSES": args.every}
                    result = measured(Crawl(spider, kwargs, dense), CrawlOptions(), reports=False)
                    row = {f"after_{a}": round(interval_noise(list(result.growth.checkpoints), a), 1) for a in (50, 100, 150)}
                    out.setdefault(name, []).append(row)
                    progress(f"  {name:14} {result.responses:5} responses: worst B/response {row}")
    finally:
        stop_reactor()
    if args.json:
        args.json.write_text(json.dumps({"machine": machine_info(), "noise": out}, indent=2) + "\n")
    latest.save("checkpoint_noise", "latest", {"machine": machine_info(), "noise": out})


if __name__ == "__main__":
    main()

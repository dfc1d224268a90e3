"""Where the default mode's overhead goes: the same clean crawl with one part of the plugin turned off at a time.

    python benchmarks/overhead_parts.py [--pairs 5] [--pages 50] [--json out.json]

Interleaved rounds, as ``overhead.py``: every round runs the crawl bare with the GC frozen (what the plugin does to
the GC, without the plugin), in the default mode, and in the default mode less one part: the parse amplification
middleware, the drained checkpoints (sampling only); and with the dense checkpoints 100 responses apart instead of
25 (``sparse-100``). A part's cost is the default mode's median ratio less the ratio without it. CPU time counts
every thread of this process.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import latest
from bench_spiders import Catalog
from harness import Crawl, machine_info, measured, median, progress, rounds, run_mode, stop_reactor, timed

from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.harness.site import start_site
from pytest_crawlmem.measure.runner import CrawlOptions

#: name -> (CrawlOptions fields, extra settings); "bare-frozen" is Scrapy alone.
PARTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {}),
    "no-amplification": ({}, {name_of("amplification"): False}),
    "no-checkpoints": ({"checkpoints": False}, {}),
    "sparse-100": ({}, {name_of("checkpoint_min_responses"): 100}),  # a long crawl's choice: 4x fewer dense checkpoints
}


def run_once(mode: str, crawl: Crawl, root: Path) -> Any:
    """One crawl in ``mode``; its result (None bare)."""
    if mode == "bare-frozen":  # Scrapy alone, the GC frozen as the plugin freezes it (harness.run_mode)
        return run_mode(mode, crawl, root)
    fields, settings = PARTS[mode]
    report_dir = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=root))
    return measured(Crawl(crawl.spider, crawl.kwargs, {**crawl.settings, **settings}),
                    CrawlOptions(report_dir=report_dir, **fields))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--modes", nargs="+", default=["bare-frozen", *PARTS], choices=["bare-frozen", *PARTS])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with start_site() as site, tempfile.TemporaryDirectory(prefix="crawlmem-parts-") as tmp:
        crawl = Crawl(Catalog, {"start_urls": [site.url(f"/catalog/?pages={args.pages}&per_page=40")]}, {})
        warm = Crawl(Catalog, {"start_urls": [site.url("/catalog/?pages=5&per_page=40")]}, {})
        for mode in args.modes:
            run_once(mode, warm, Path(tmp))
        for i, mode in rounds(args.modes, args.pairs):
            with timed(site.pid) as t:
                result = run_once(mode, crawl, Path(tmp))
            runs[mode].append({"round": i, "wall": round(t.wall, 3), "cpu": round(t.cpu, 3),
                               "verdict": result.growth.verdict if result else None})
            progress(f"  round {i + 1}/{args.pairs} {mode:18} wall {t.wall:6.2f} s  cpu {t.cpu:6.2f} s")
    stop_reactor()
    bare_by_round = {key: {r["round"]: r[key] for r in runs["bare-frozen"]} for key in ("wall", "cpu")}
    table: dict[str, Any] = {}
    for mode, mode_runs in runs.items():
        table[mode] = {key: {"median_s": median([r[key] for r in mode_runs]),
                             "ratio": median([r[key] / bare_by_round[key][r["round"]] for r in mode_runs])}
                       for key in ("wall", "cpu")}
        print(f"{mode:18} wall {table[mode]['wall']['ratio']:.3f}x  cpu {table[mode]['cpu']['ratio']:.3f}x"
              f"  (median {table[mode]['wall']['median_s']:.2f} s wall, {table[mode]['cpu']['median_s']:.2f} s cpu)")
    document = {"machine": machine_info(), "pairs": args.pairs, "pages": args.pages, "table": table, "runs": runs}
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
    latest.save("overhead_parts", "latest", document)


if __name__ == "__main__":
    main()

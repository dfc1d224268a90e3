"""What parse amplification's mallinfo2 reads cost, unbounded and kept to CRAWLMEM_AMPLIFICATION_SHARE.

    python benchmarks/amplification_cost.py [--rounds 6] [--json out.json]

A ``mallinfo2`` read walks glibc's free lists, so it gets dearer as the process's heap fragments: over a long crawl,
and over the crawls a test session runs in one process. Interleaved rounds (the order rotated by one per round) of
two crawls, the clean catalog (2,050 responses) and a leaky one (4 KiB kept per product, 4,100 responses), each in
four modes: amplification off, every callback measured (share 0), and the default share (0.01). A mode's figure is
the median over the rounds of its time over the ``off`` crawl's in the same round. After each crawl, 200 reads are
timed in the process as the crawl left it (the read's cost at that point of the process's life).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import latest
from bench_spiders import Catalog, Leaky
from harness import Crawl, machine_info, measured, median, progress, rounds, stop_reactor, timed

from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.harness.site import start_site
from pytest_crawlmem.measure.runner import CrawlOptions
from pytest_crawlmem.probes.readings import read_malloc_in_use_bytes

#: mode -> the crawl's extra settings.
MODES: dict[str, dict[str, Any]] = {
    "off": {name_of("amplification"): False},
    "every": {name_of("amplification_share"): 0.0},
    "share-0.01": {name_of("amplification_share"): 0.01},
}


def read_cost_us(reads: int = 200) -> float:
    """Median microseconds of one mallinfo2 read, now."""
    costs = []
    for _ in range(reads):
        started = time.perf_counter()
        read_malloc_in_use_bytes()
        costs.append(time.perf_counter() - started)
    return round(median(costs) * 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with start_site() as site, tempfile.TemporaryDirectory(prefix="crawlmem-amp-") as tmp:
        crawls = {
            "clean-2050": Crawl(Catalog, {"start_urls": [site.url("/catalog/?pages=50&per_page=40")]}, {}),
            "leaky-4100": Crawl(Leaky, {"start_urls": [site.url("/catalog/?pages=100&per_page=40")], "leak": 4096}, {}),
        }
        warm = Crawl(Catalog, {"start_urls": [site.url("/catalog/?pages=5&per_page=40")]}, {})
        measured(warm, CrawlOptions(report_dir=Path(tmp) / "warm"))
        for i, mode in rounds(list(MODES), args.rounds):
            for name, crawl in crawls.items():
                options = CrawlOptions(report_dir=Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=tmp)))
                with timed(site.pid) as t:
                    result = measured(Crawl(crawl.spider, crawl.kwargs, {**crawl.settings, **MODES[mode]}), options)
                amp = result.parse_amplification
                row = {"round": i, "wall": round(t.wall, 3), "cpu": round(t.cpu, 3), "verdict": result.growth.verdict,
                       "measured": amp.count if amp else 0, "skipped": amp.skipped if amp else 0,
                       "max_ratio": amp.max_ratio if amp else None, "read_us_after": read_cost_us()}
                runs[f"{name} {mode}"].append(row)
                progress(f"  round {i + 1}/{args.rounds} {name} {mode:10} wall {t.wall:6.2f} s cpu {t.cpu:6.2f} s"
                         f" measured {row['measured']:5} skipped {row['skipped']:5} read {row['read_us_after']} us")
    stop_reactor()
    table: dict[str, Any] = {}
    for key, mode_runs in runs.items():
        name = key.split()[0]
        off = {r["round"]: r for r in runs[f"{name} off"]}
        table[key] = {m: median([r[m] / off[r["round"]][m] for r in mode_runs]) for m in ("wall", "cpu")}
        table[key].update(measured=median([r["measured"] for r in mode_runs]),
                          skipped=median([r["skipped"] for r in mode_runs]),
                          read_us_after=median([r["read_us_after"] for r in mode_runs]))
        print(f"{key:22} wall {table[key]['wall']:.3f}x cpu {table[key]['cpu']:.3f}x of off;"
              f" measured {table[key]['measured']:.0f} skipped {table[key]['skipped']:.0f};"
              f" a read after it {table[key]['read_us_after']} us")
    document = {"machine": machine_info(), "rounds": args.rounds, "table": table, "runs": runs}
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
    latest.save("amplification_cost", "latest", document)


if __name__ == "__main__":
    main()

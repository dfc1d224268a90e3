"""Wall and CPU time of the same catalog crawl, bare vs through the plugin in each of its modes, interleaved.

    python benchmarks/overhead.py [--pairs 7] [--pages 50] [--modes sampling default ...] [--leak 2048] [--json out.json]

Every round runs the crawl once bare (Scrapy's CrawlerRunner, no extension) and once in
each mode, the order rotated by one per round, so machine noise hits all modes alike. A
mode's figure is the median over the rounds of its time divided by the bare crawl's time
in the same round. The measured crawl is what the ``crawl`` fixture runs (``run_crawl`` or
``run_isolated``, then the reports). CPU time counts every thread of this process (the
sampler thread too) and the isolated child; the fixture site's CPU is reported apart.

The leaky workload (the same crawl keeping ``--leak`` bytes per product page, 10 KiB by default)
shows the cost of the default mode when its attribution window opens; it has its own bare crawl.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import latest
from bench_spiders import Catalog, Leaky
from harness import MODES, Crawl, machine_info, median, progress, rounds, run_mode, stop_reactor, timed
from intervals import CONFIDENCE, median_interval

from pytest_crawlmem.harness.site import RunningSite, start_site

DEFAULT_MODES = ["bare-frozen", "sampling", "default", "traced-1", "isolated"]
#: Comparison modes that are not the plugin's: the bare crawl with pre-crawl objects frozen out of
#: the cyclic GC, as the plugin's extension does (gc.freeze()), so the plugin's own cost shows apart.
EXTRA_MODES = ["bare-frozen"]
TARGETS = {"sampling": 1.05, "default": 1.35}
#: Issue 26: the default mode within 1.10x of the bare-frozen crawl (the plugin's own cost, the GC freeze taken out).
FROZEN_TARGETS = {"default": 1.10}

#: Bytes kept per product page by the leaky workload: enough that the attribution window opens in every run
#: (at 2 KiB it opened in about half of the runs of this crawl, whose scheduler drains a 900-request backlog).
LEAK = 10240


def run_overhead(
    site: RunningSite, *, pairs: int, pages: int, modes: list[str], leak: int, per_page: int = 40,
) -> dict[str, Any]:
    """Run the interleaved rounds; return the per-run figures and the median ratios per mode."""
    url = site.url(f"/catalog/?pages={pages}&per_page={per_page}")
    workloads = {"clean": Crawl(Catalog, {"start_urls": [url]}, {}),
                 "leaky": Crawl(Leaky, {"start_urls": [url], "leak": leak}, {})}
    units = [f"clean/{m}" for m in ["bare", *modes]]
    if leak:
        units += ["leaky/bare", "leaky/default"]
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="crawlmem-bench-") as tmp:
        warm_up = Crawl(Catalog, {"start_urls": [site.url("/catalog/?pages=5&per_page=40")]}, {})
        for mode in ("bare", *modes):  # imports, caches, the site's page cache: not part of any figure
            run_mode(mode, warm_up, Path(tmp))
        for i, unit in rounds(units, pairs):
            workload, mode = unit.split("/")
            with timed(site.pid) as t:
                result = run_mode(mode, workloads[workload], Path(tmp))
            run: dict[str, Any] = {"round": i, "wall": round(t.wall, 3), "cpu": round(t.cpu, 3),
                                   "site_cpu": round(t.site_cpu, 3)}
            if result is not None:
                run.update(responses=result.responses, verdict=result.verdict, attribution_window=bool(result.top_growth),
                           checkpoints=int(result.stats.get("crawlmem/checkpoints") or 0), errors=list(result.errors))
            runs[unit].append(run)
            progress(f"  round {i + 1}/{pairs} {unit:16} wall {t.wall:6.2f} s  cpu {t.cpu:6.2f} s"
                     + (f"  {result.responses} responses, {result.verdict}" if result is not None else ""))
    return summarize(runs, responses=pages * (per_page + 1), pairs=pairs, leak=leak)


def _ratios(runs: list[dict[str, Any]], bare: list[dict[str, Any]], key: str) -> list[float]:
    by_round = {r["round"]: r[key] for r in bare}
    return [r[key] / by_round[r["round"]] for r in runs if by_round.get(r["round"])]


def summarize(runs: dict[str, list[dict[str, Any]]], *, responses: int, pairs: int, leak: int) -> dict[str, Any]:
    """Median times and median per-round ratios to the bare crawl of the same workload."""
    rows: dict[str, Any] = {}
    for unit, unit_runs in runs.items():
        workload, mode = unit.split("/")
        bare = runs[f"{workload}/bare"]
        wall_ratios, cpu_ratios = _ratios(unit_runs, bare, "wall"), _ratios(unit_runs, bare, "cpu")
        row: dict[str, Any] = {
            "workload": workload, "mode": mode, "runs": len(unit_runs),
            "wall_seconds": round(median([r["wall"] for r in unit_runs]), 3),
            "cpu_seconds": round(median([r["cpu"] for r in unit_runs]), 3),
            "site_cpu_seconds": round(median([r["site_cpu"] for r in unit_runs]), 3),
            "wall_ratio": round(median(wall_ratios), 3), "cpu_ratio": round(median(cpu_ratios), 3),
            "wall_ratio_range": [round(min(wall_ratios), 3), round(max(wall_ratios), 3)],
            "cpu_ratio_range": [round(min(cpu_ratios), 3), round(max(cpu_ratios), 3)],
        }
        frozen = runs.get(f"{workload}/bare-frozen")
        if frozen and mode not in ("bare", *EXTRA_MODES):  # the plugin's own cost, GC freeze taken out
            row["vs_frozen"] = vs_frozen = {}
            for key in ("wall", "cpu"):
                ratios = _ratios(unit_runs, frozen, key)
                interval = median_interval(ratios)
                vs_frozen[f"{key}_ratio"] = round(median(ratios), 3)
                vs_frozen[f"{key}_ratio_interval"] = [round(x, 3) for x in interval] if interval else None
            frozen_target = FROZEN_TARGETS.get(mode) if workload == "clean" else None
            if frozen_target is not None:
                vs_frozen["target_ratio"] = frozen_target
                vs_frozen["target_met"] = max(vs_frozen["wall_ratio"], vs_frozen["cpu_ratio"]) <= frozen_target
        if mode not in ("bare", *EXTRA_MODES):
            row["verdicts"] = {v: sum(r["verdict"] == v for r in unit_runs) for v in sorted({r["verdict"] for r in unit_runs})}
            row["attribution_windows"] = sum(r["attribution_window"] for r in unit_runs)
            row["responses"] = median([r["responses"] for r in unit_runs])
            for opened in (True, False):  # the window's cost: runs where it opened vs runs where it did not
                subset = [r for r in unit_runs if r["attribution_window"] is opened]
                if subset and row["attribution_windows"] not in (0, len(unit_runs)):
                    key = "window_opened" if opened else "window_not_opened"
                    row[key] = {"runs": len(subset), "wall_ratio": round(median(_ratios(subset, bare, "wall")), 3),
                                "cpu_ratio": round(median(_ratios(subset, bare, "cpu")), 3)}
        target = TARGETS.get(mode) if workload == "clean" else None
        if target is not None:
            row["target_ratio"] = target
            ratios = [row["wall_ratio"], row["cpu_ratio"]]
            ratios += [row["vs_frozen"][f"{key}_ratio"] for key in ("wall", "cpu") if "vs_frozen" in row]
            row["target_met"] = all(ratio <= target for ratio in ratios)  # against bare and bare-frozen alike
        rows[unit] = row
    return {"responses": responses, "pairs": pairs, "leak_per_response": leak, "rows": rows, "runs": runs}


def format_table(summary: dict[str, Any]) -> str:
    """Plain-text table of the median ratios."""
    lines = [f"{'workload/mode':18} {'wall s':>7} {'cpu s':>7} {'wall x':>7} {'cpu x':>7}  wall x range    target"]
    for unit, row in summary["rows"].items():
        target = row.get("target_ratio")
        verdict = "" if target is None else f"<= {target:.2f}x {'met' if row['target_met'] else 'MISSED'}"
        lines.append(f"{unit:18} {row['wall_seconds']:7.2f} {row['cpu_seconds']:7.2f} {row['wall_ratio']:7.3f}"
                     f" {row['cpu_ratio']:7.3f}  {row['wall_ratio_range'][0]:.2f}-{row['wall_ratio_range'][1]:.2f}"
                     f"       {verdict}")
        frozen = row.get("vs_frozen")
        if frozen:
            bounds = " ".join(f"{key} {frozen[f'{key}_ratio']:.3f}x" + (
                f" ({frozen[f'{key}_ratio_interval'][0]:.3f}-{frozen[f'{key}_ratio_interval'][1]:.3f}, {CONFIDENCE:.0%})"
                if frozen[f"{key}_ratio_interval"] else "") for key in ("wall", "cpu"))
            target = frozen.get("target_ratio")
            met = f"  <= {target:.2f}x {'met' if frozen['target_met'] else 'MISSED'}" if target else ""
            lines.append(f"{'':18}   against bare-frozen: {bounds}{met}")
    return "\n".join(lines)


def main() -> None:
    """Run the overhead benchmark alone."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=7, help="rounds (each runs bare and every mode once)")
    parser.add_argument("--pages", type=int, default=50, help="listing pages of 40 products each")
    parser.add_argument("--modes", nargs="+", default=DEFAULT_MODES, choices=[*EXTRA_MODES, *MODES])
    parser.add_argument("--leak", type=int, default=LEAK, help="bytes kept per product by the leaky workload (0: none)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        with start_site() as site:
            summary = run_overhead(site, pairs=args.pairs, pages=args.pages, modes=args.modes, leak=args.leak)
    finally:
        stop_reactor()
    print(format_table(summary))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine_info(), "overhead": summary}, indent=2) + "\n")
    latest.save("overhead", "latest", {"machine": machine_info(), "overhead": summary})


if __name__ == "__main__":
    main()

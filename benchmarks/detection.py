"""Detection power and false alarms of the leak verdict, over repeated real crawls.

    python benchmarks/detection.py [--runs 10] [--clean-runs 20] [--sizes 500 1000 2000]
                                   [--leaks 512 1024 2048 5120 10240] [--keepers list signal cache]
                                   [--clean-sizes 300 600] [--json out.json]
    python benchmarks/detection.py --grid [--runs 10]   # issue 21's grid: 1-32 KiB x 300-2,500 responses x 3 keepers
    python benchmarks/detection.py --grid --keepers list --clean-runs 0 --json a.json   # one shard of it (one process a core)
    python benchmarks/detection.py --merge a.json b.json ... [--json grid.json]          # the shards' table, as one run

Every crawl runs in this one process against the fixture site, measured exactly as the
``crawl`` fixture measures it (``run_crawl``, default mode: drained checkpoints and the
attribution window). Leaky crawls keep ``leak`` bytes per product response, in one of three
keepers (``list``: a list on the spider; ``signal``: a response_received receiver appending to a
module-level list; ``cache``: an unbounded ``functools.lru_cache``; ``pipeline``: an item pipeline
buffering items it never flushes), and should be called ``retained-objects`` with the keeper's line as
the top growth site or as the line that stores into the holder; the clean scenarios (a catalog
at every grid length, large pages, a bounded cache, a slow pipeline, a scheduler backlog) must never be.
The grid is monotonic when no cell is flagged less often than a cell with a smaller leak or a shorter crawl.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import weakref
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import latest
from bench_spiders import KEEPER_NAMES, KEEPER_SETTINGS, KEEPER_VERDICTS, KEEPERS, Catalog, catalog_path, clean_scenarios
from harness import Crawl, bare, machine_info, measured, progress, stop_reactor
from plateau_spiders import LocalCachePlateau, SqlitePlateau

from pytest_crawlmem.core.models import heap_estimate
from pytest_crawlmem.harness.site import RunningSite, start_site
from pytest_crawlmem.measure.runner import CrawlOptions

LEAKS = [512, 1024, 2048, 5120, 10240]
SIZES = [500, 1000, 2000]
#: Leaky crawls of another shape, ``LEAK@RESPONSES/PER_PAGE``: the matrix lists 20 products per page (the
#: scheduler holds ~20 requests); at 40 per page (the overhead crawl) it holds up to ~900 and drains them late.
EXTRA = ["2048@2050/40"]
#: Issue 21's grid: leak sizes x crawl lengths x keepers.
GRID_LEAKS, GRID_SIZES, GRID_KEEPERS = [1024, 2048, 8192, 32768], [300, 600, 1250, 2500], ["list", "signal", "cache"]
#: The issue's target: this leak (bytes/response) at this crawl size is flagged in at least this share of runs.
TARGET_LEAK, TARGET_SIZE, TARGET_RATE = 2048, 1000, 0.95


# -- the keepers issue 26 names, beside bench_spiders' list / signal / cache --------------------------------------


class _Groups:
    """What NestedKeeper hangs on the spider: finished groups of items, two levels below it."""

    def __init__(self) -> None:
        self.done: dict[str, list[bytes]] = defaultdict(list)


class NestedKeeper(Catalog):
    """Keeps ``leak`` bytes per product in a dict two levels below the spider (``self.state.done[group]``)."""

    name = "nested_keeper"
    leak = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = _Groups()

    def parse_product(self, response: Any) -> Iterator[Any]:
        """File the product's bytes under its group, then scrape it."""
        self.state.done[response.url[-1]].append(b"x" * int(self.leak))  # KEEP nested
        yield from super().parse_product(response)


class Tracked:
    """A project base class that registers every instance in a class-level registry (and never lets go)."""

    registry: ClassVar[list[Tracked]] = []

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        Tracked.registry.append(self)  # KEEP registry


class RegistryKeeper(Catalog):
    """Builds one ``Tracked`` object of ``leak`` bytes per product: the class keeps them all."""

    name = "registry_keeper"
    leak = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        Tracked.registry.clear()

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Wrap the product's bytes, then scrape it."""
        Tracked(b"x" * int(self.leak))
        yield from super().parse_product(response)


class MetaChainKeeper(Catalog):
    """Passes one history list through ``request.meta`` from listing page to listing page; every product appends."""

    name = "meta_chain_keeper"
    leak = 0

    def parse(self, response: Any) -> Iterator[Any]:
        """A listing page: its products and the next page, all sharing the history carried in meta."""
        history = response.meta.get("history", [])
        yield from response.follow_all(css="a.product", callback=self.parse_product, meta={"history": history})
        yield from response.follow_all(css="a.next", meta={"history": history})

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Add the product's bytes to the history, then scrape it."""
        response.meta["history"].append(b"x" * int(self.leak))  # KEEP meta
        yield from super().parse_product(response)


class WeakRegistry(Catalog):
    """Clean: a weak-value registry of the products' selectors (freed with each response)."""

    name = "weak_registry"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Register the response weakly, then scrape it."""
        self.seen[response.url] = response
        yield from super().parse_product(response)


class FillingCache(Catalog):
    """Clean: a cache of the last 300 products' text, filling over the first 300 responses, then plateauing."""

    name = "filling_cache"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cache: dict[str, str] = {}

    def parse_product(self, response: Any) -> Iterator[Any]:
        """Cache the text while there is room, then scrape the product."""
        if len(self.cache) < 300:
            self.cache[response.url] = response.text * 2
        yield from super().parse_product(response)


def _keep_line(cls: type, tag: str) -> str:
    """``detection.py:N`` of the line in ``cls``'s module marked ``# KEEP tag``."""
    lines, start = inspect.getsourcelines(sys.modules[cls.__module__])
    line = next(i for i, text in enumerate(lines, start or 1) if f"# KEEP {tag}" in text)
    return f"{Path(__file__).name}:{line}"


ALL_KEEPERS: dict[str, tuple[type, str]] = {
    **KEEPERS,
    "nested": (NestedKeeper, _keep_line(NestedKeeper, "nested")),
    "registry": (RegistryKeeper, _keep_line(RegistryKeeper, "registry")),
    "meta": (MetaChainKeeper, _keep_line(MetaChainKeeper, "meta")),
}
#: The priority cells of issue 26: (bytes kept per product, responses).
PRIORITY_CELLS = [(2048, 300), (1024, 600), (4096, 150)]


@contextlib.contextmanager
def cpu_hog(on: bool) -> Iterator[None]:
    """When ``on``: a process spinning on one core beside the crawls (stopped by its own handle afterwards)."""
    if not on:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.terminate()
        hog.wait(timeout=10)


def more_clean_scenarios(base_url: str) -> dict[str, tuple[type, dict[str, Any], dict[str, Any]]]:
    """Issue 26's clean set beyond bench_spiders' (a cache filling over 300 responses, a late 900 -> 0 drain, weak refs),
    and the two plateaus of issue 54."""
    return {
        "filling_cache_600": (FillingCache, {"start_urls": [base_url + catalog_path(600, per_page=20)]}, {}),
        "late_drain_2050": (Catalog, {"start_urls": [base_url + catalog_path(2050, per_page=40)]}, {}),
        "weak_registry_600": (WeakRegistry, {"start_urls": [base_url + catalog_path(600, per_page=20)]}, {}),
        # plateaus: Scrapy's LocalCache(limit=200) full after 200 of 420 responses; SQLite's 1 MiB page cache (native
        # memory) full after ~480 of 1,197 (both must read steady, with the plateau clause)
        "localcache_425": (LocalCachePlateau, {"start_urls": [base_url + catalog_path(425, per_page=20)]}, {}),
        "sqlite_cache_1200": (SqlitePlateau, {"start_urls": [base_url + catalog_path(1200, per_page=20)]}, {}),
        # JOBDIR is filled in per run (jobdir_resumed): a first crawl stopped after 300 pages, the measured one resumes it
        "jobdir_resume": (Catalog, {"start_urls": [base_url + catalog_path(1050, per_page=20)]}, {"JOBDIR": ""}),
    }


#: The JOBDIR scenario's first crawl stops after this many pages (CLOSESPIDER_PAGECOUNT); the measured crawl resumes.
RESUME_AFTER_PAGES = 300


@contextlib.contextmanager
def jobdir_resumed(crawl: Crawl) -> Iterator[Crawl]:
    """For a crawl whose settings hold ``JOBDIR``: a fresh JOBDIR that a first, unmeasured crawl stopped after
    RESUME_AFTER_PAGES pages left behind (its disk queue and dupefilter), and the crawl resuming from it."""
    if "JOBDIR" not in crawl.settings:
        yield crawl
        return
    with tempfile.TemporaryDirectory(prefix="crawlmem-resume-") as jobdir:
        bare(Crawl(crawl.spider, crawl.kwargs, {**crawl.settings, "JOBDIR": jobdir, "CLOSESPIDER_PAGECOUNT": RESUME_AFTER_PAGES}))
        yield Crawl(crawl.spider, crawl.kwargs, {**crawl.settings, "JOBDIR": jobdir})


@contextlib.contextmanager
def debug_logging(on: bool) -> Iterator[None]:
    """When ``on``: the root logger at DEBUG with pytest's LogCaptureHandler and a file handler, as pytest with
    ``--log-level=DEBUG --log-file=...`` would have it (what they keep is dropped afterwards)."""
    if not on:
        yield
        return
    from _pytest.logging import LogCaptureHandler

    root = logging.getLogger()
    handlers = [LogCaptureHandler(), logging.FileHandler(os.devnull)]
    level = root.level
    for handler in handlers:
        handler.setLevel(logging.DEBUG)
        root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        root.setLevel(level)
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        handlers[0].reset()  # type: ignore[attr-defined]


def _crawl(crawl: Crawl, site_line: str = "", name: str = "", expected: str = "retained-objects") -> dict[str, Any]:
    with debug_logging(crawl.settings.get("LOG_LEVEL") == "DEBUG"):
        result = measured(crawl, CrawlOptions(), reports=False)
    top = result.top_growth[0].location if result.top_growth else ""
    holder = result.holders[0].line or "" if result.holders else ""
    named = bool(site_line) and (top.endswith(site_line) or holder.endswith(site_line))  # the allocating or keeping line
    if name:  # a library's structure keeps it: the holder (or, for media-disk, the reason) names it
        named = named or name in (result.holders[0].path if result.holders else "") or name in result.growth.reason
    return {"verdict": result.verdict, "flagged": result.verdict == expected, "attributed": named, "top": top, "holder": holder,
            "responses": result.responses, "per_response_bytes": result.growth.per_response_bytes,
            "seconds": result.duration_seconds, "rule": result.growth.rule,
            "detectable_per_response_bytes": result.growth.detectable_per_response_bytes, "reason": result.growth.reason,
            "checkpoints": [[c.responses, heap_estimate(c), c.scheduled, c.drained, c.tracer_bytes, c.plugin_bytes]
                            for c in result.growth.checkpoints]}


def key_of(keeper: str, leak: int, size: int, per_page: int = 20) -> str:
    """``2048@1000`` (the list keeper, 20 products per page), else ``signal:2048@1000`` / ``2048@2050/40``."""
    key = f"{leak}@{size}" if per_page == 20 else f"{leak}@{size}/{per_page}"
    return key if keeper == "list" else f"{keeper}:{key}"


def parse_shape(text: str) -> tuple[int, int, int]:
    """``LEAK@RESPONSES/PER_PAGE`` (bytes kept per response, crawl size, products per listing page)."""
    leak, rest = text.split("@")
    size, per_page = rest.split("/")
    return int(leak), int(size), int(per_page)


def run_detection(
    site: RunningSite, *, runs: int, clean_runs: int, sizes: list[int], leaks: list[int], extra: list[str] = EXTRA,
    keepers: list[str] | None = None, clean_sizes: list[int] | None = None, save: Path | None = None,
    only: list[str] | None = None, cells: list[tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """Run the leaky crawls (per keeper, then the ``extra`` shapes) and the clean scenarios; return every run and the rates.

    ``save``: rewrite this JSON file after every cell, so a long run stopped midway keeps what it measured.
    """
    leaky: dict[str, list[dict[str, Any]]] = defaultdict(list)
    configs = [(keeper, leak, size, 20) for keeper in keepers or ["list"] for size in sizes for leak in leaks]
    if cells is not None:
        configs = [(keeper, leak, size, 20) for keeper in keepers or ["list"] for leak, size in cells]
    configs += [("list", *parse_shape(e)) for e in extra]
    configs = configs if runs else []  # --runs 0: the clean scenarios only
    for keeper, leak, size, per_page in configs:
        spider, line = ALL_KEEPERS[keeper]
        url = site.url(catalog_path(size, per_page=per_page))
        key = key_of(keeper, leak, size, per_page)
        for _ in range(runs):
            run = Crawl(spider, {"start_urls": [url], "leak": leak}, KEEPER_SETTINGS.get(keeper, {}))
            leaky[key].append(_crawl(run, line, KEEPER_NAMES.get(keeper, ""), KEEPER_VERDICTS.get(keeper, "retained-objects")))
        flagged = sum(_flagged(r) for r in leaky[key])
        attributed = sum(r["attributed"] for r in leaky[key])
        progress(f"  {keeper:6} leak {leak:6} B/response at {size:5} responses, {per_page} per listing page:"
                 f" flagged {flagged}/{runs}, attributed {attributed}/{runs}")
        _save(save, leaky, {})
    clean: dict[str, list[dict[str, Any]]] = defaultdict(list)
    everything = {**clean_scenarios(site.base_url), **more_clean_scenarios(site.base_url)}
    scenarios = {name: s for name, s in everything.items() if not only or name in only}
    for size in clean_sizes or []:
        scenarios[f"catalog_{size}"] = (Catalog, {"start_urls": [site.url(catalog_path(size, per_page=20))]}, {})
    for name, (spider, kwargs, settings) in scenarios.items():
        for _ in range(clean_runs):
            with jobdir_resumed(Crawl(spider, kwargs, settings)) as crawl:
                clean[name].append(_crawl(crawl))
        verdicts = [r["verdict"] for r in clean[name]]
        progress(f"  clean {name:14}: retained-objects {verdicts.count('retained-objects')}/{clean_runs}"
                 f" ({', '.join(f'{v} {verdicts.count(v)}' for v in sorted(set(verdicts)))})")
        _save(save, leaky, clean)
    return summarize(leaky, clean)


def run_stability(site: RunningSite, reruns: int, save: Path | None = None) -> dict[str, Any]:
    """``reruns`` crawls of the list keeper, 2 KiB per product over ~900 responses, 28 products a page (queue 2-30)."""
    url = site.url(catalog_path(900, per_page=28))
    spider, line = ALL_KEEPERS["list"]
    runs = []
    for i in range(reruns):
        runs.append(_crawl(Crawl(spider, {"start_urls": [url], "leak": 2048}, {}), line))
        progress(f"  stability rerun {i + 1}: {runs[-1]['verdict']} at {runs[-1]['per_response_bytes'] or 0:.0f} B/response"
                 f" (stated {runs[-1]['detectable_per_response_bytes']}), {runs[-1]['responses']} responses")
        if save is not None:  # a long run stopped midway keeps what it measured
            save.write_text(json.dumps({"machine": machine_info(), "stability_runs": runs}, indent=2) + "\n")
    verdicts = [r["verdict"] for r in runs]
    common = max(set(verdicts), key=verdicts.count)
    counts = ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))
    progress(f"  stability: {verdicts.count(common)}/{reruns} {common} ({counts})")
    return {"reruns": reruns, "same_verdict": verdicts.count(common), "verdict": common,
            "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))}, "runs": runs}


def run_stated(site: RunningSite, sizes: list[int], pairs: int) -> dict[str, Any]:
    """Per length: a clean catalog crawl states its bound B; a list keeper keeping B per response is then flagged?

    The keeper keeps bytes per *product* (20 of 21 responses), so it keeps ``B * 21 / 20`` less the bytes object's
    own 33 B and its list slot (8 B) per product: about B per response.
    """
    spider, line = ALL_KEEPERS["list"]
    out: dict[str, Any] = {}
    for size in sizes:
        url = site.url(catalog_path(size, per_page=20))
        rows = []
        for _ in range(pairs):
            clean = _crawl(Crawl(Catalog, {"start_urls": [url]}, {}))
            bound = clean["detectable_per_response_bytes"]
            if clean["verdict"] != "steady" or bound is None:
                rows.append({"clean": clean, "leaky": None})
                continue
            keep = max(1, math.ceil(bound * 21 / 20) - 41)
            leaky = _crawl(Crawl(spider, {"start_urls": [url], "leak": keep}, {}), line)
            rows.append({"clean": clean, "bound": bound, "leaky": leaky})
        seeded = [r for r in rows if r["leaky"] is not None]
        flagged = sum(r["leaky"]["flagged"] for r in seeded)
        bounds = sorted(r["bound"] for r in seeded)
        progress(f"  stated bound at {size}: flagged {flagged}/{len(seeded)} (bounds {bounds[0] if bounds else '-'}"
                 f"-{bounds[-1] if bounds else '-'} B/response; {len(rows) - len(seeded)} clean runs not steady)")
        out[str(size)] = {"pairs": len(rows), "seeded": len(seeded), "flagged": flagged, "bounds": bounds, "runs": rows}
    return out


def _save(path: Path | None, leaky: dict[str, list[dict[str, Any]]], clean: dict[str, list[dict[str, Any]]]) -> None:
    """Write the runs so far (and their summary) to ``path``, if given."""
    if path is not None:
        path.write_text(json.dumps({"machine": machine_info(), "detection": summarize(leaky, clean)}, indent=2) + "\n")


def _flagged(run: dict[str, Any]) -> bool:
    """The run got its keeper's verdict (``retained-objects``, ``media-disk`` for Scrapy's cached media failures)."""
    return bool(run.get("flagged", run["verdict"] == "retained-objects"))


def _parse_key(key: str) -> tuple[str, int, int, int]:
    keeper, _, shape = key.rpartition(":")
    leak, size, per_page = parse_shape(shape if "/" in shape else shape + "/20")
    return keeper or "list", leak, size, per_page


def monotonic_breaks(leaks: dict[str, dict[str, Any]]) -> list[str]:
    """Cells flagged less often than a cell of the same keeper with a smaller (or equal) leak and a shorter (or equal) crawl."""
    breaks = []
    rows = [r for r in leaks.values() if r["per_page"] == 20]
    for a in rows:
        for b in rows:
            if (a["keeper"] == b["keeper"] and b is not a and b["leak_bytes"] >= a["leak_bytes"] and b["size"] >= a["size"]
                    and b["flagged_rate"] < a["flagged_rate"]):
                breaks.append(f"{a['keeper']}: {a['leak_bytes']}@{a['size']} flagged {a['flagged_rate']:.0%} but"
                              f" {b['leak_bytes']}@{b['size']} only {b['flagged_rate']:.0%}")
    return breaks


def summarize(leaky: dict[str, list[dict[str, Any]]], clean: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Rates per leak and size, false positives per clean scenario, and the two targets."""
    leaks = {}
    for key, rows in leaky.items():
        flagged = sum(_flagged(r) for r in rows)
        keeper, leak, size, per_page = _parse_key(key)
        leaks[key] = {"keeper": keeper, "leak_bytes": leak, "size": size, "per_page": per_page, "runs": len(rows),
                      "responses": rows[0]["responses"] if rows else 0, "flagged": flagged,
                      "flagged_rate": round(flagged / len(rows), 3) if rows else None,
                      "attributed": sum(r["attributed"] for r in rows),
                      "flagged_and_attributed": sum(r["attributed"] and _flagged(r) for r in rows),
                      "verdicts": {v: sum(r["verdict"] == v for r in rows) for v in sorted({r["verdict"] for r in rows})}}
    scenarios = {}
    for name, rows in clean.items():
        scenarios[name] = {"runs": len(rows), "responses": rows[0]["responses"] if rows else 0,
                           "false_positives": sum(r["verdict"] == "retained-objects" for r in rows),
                           "verdicts": {v: sum(r["verdict"] == v for r in rows) for v in sorted({r["verdict"] for r in rows})}}
    clean_total = sum(s["runs"] for s in scenarios.values())
    false_positives = sum(s["false_positives"] for s in scenarios.values())
    target = leaks.get(f"{TARGET_LEAK}@{TARGET_SIZE}")
    targets = {
        "false_positives": {"target": 0, "measured": false_positives, "of": clean_total,
                            "met": false_positives == 0 if clean_total else None},
        f"{TARGET_LEAK}@{TARGET_SIZE}": {"target": TARGET_RATE, "measured": target["flagged_rate"] if target else None,
                                        "met": target["flagged_rate"] >= TARGET_RATE if target else None},
    }
    return {"leaks": leaks, "clean": scenarios, "targets": targets, "monotonic_breaks": monotonic_breaks(leaks),
            "runs": {"leaky": leaky, "clean": clean}}


def merge_runs(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary of several ``--json`` files' runs (shards of one grid run in parallel processes)."""
    leaky: dict[str, list[dict[str, Any]]] = defaultdict(list)
    clean: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for document in documents:
        runs = document["detection"].get("runs")
        if runs is None:
            raise SystemExit("a file to --merge has no runs: write it with this version's --json")
        for key, rows in runs["leaky"].items():
            leaky[key].extend(rows)
        for name, rows in runs["clean"].items():
            clean[name].extend(rows)
    return summarize(leaky, clean)


def format_markdown(summary: dict[str, Any]) -> str:
    """The grid as one Markdown table (the README's): per leak and length, flagged runs of each keeper; then the clean row."""
    matrix = [v for v in summary["leaks"].values() if v["per_page"] == 20]
    keepers = [k for k in ("list", "signal", "cache", "nested", "registry", "meta") if any(v["keeper"] == k for v in matrix)]
    leaks, sizes = sorted({v["leak_bytes"] for v in matrix}), sorted({v["size"] for v in matrix})
    lines = ["| kept per product | " + " | ".join(f"{s:,} responses" for s in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for leak in leaks:
        cells = []
        for size in sizes:
            rows = [summary["leaks"].get(key_of(k, leak, size)) for k in keepers]
            cells.append(" · ".join(f"{r['flagged']}/{r['runs']}" if r else "-" for r in rows) if any(rows) else "")
        lines.append(f"| {leak // 1024} KiB | " + " | ".join(cells) + " |")
    clean = {int(name.rpartition("_")[2]): row for name, row in summary["clean"].items() if name.startswith("catalog_")}
    if clean:
        lines.append("| clean (false positives) | " + " | ".join(
            f"{clean[s]['false_positives']}/{clean[s]['runs']}" if s in clean else "-" for s in sizes) + " |")
    return "\n".join(lines)


def format_table(summary: dict[str, Any]) -> str:
    """Plain-text tables: flagged (attributed) per keeper, leak and size; clean verdicts per scenario."""
    lines = []
    matrix = [v for v in summary["leaks"].values() if v["per_page"] == 20]
    for keeper in sorted({v.get("keeper", "list") for v in matrix}):
        rows = [v for v in matrix if v.get("keeper", "list") == keeper]
        leaks, sizes = sorted({v["leak_bytes"] for v in rows}), sorted({v["size"] for v in rows})
        lines.append(f"keeper {keeper}: leak B/resp " + "".join(f"{s:>18}" for s in sizes))
        for leak in leaks:
            cells = []
            for size in sizes:
                row = summary["leaks"].get(key_of(keeper, leak, size))
                cells.append(f"{row['flagged']}/{row['runs']} ({row['attributed']} attr)" if row else "-")
            lines.append(f"{'':8}{leak:>14} " + "".join(f"{c:>18}" for c in cells))
    for key, row in summary["leaks"].items():
        if row["per_page"] != 20:
            lines.append(f"leak {key}: {row['flagged']}/{row['runs']} flagged ({row['attributed']} attributed) {row['verdicts']}")
    for name, row in summary["clean"].items():
        lines.append(f"clean {name:14} {row['false_positives']}/{row['runs']} false positives  {row['verdicts']}")
    breaks = summary.get("monotonic_breaks") or []
    lines.append(f"monotonic: {'yes' if not breaks else 'NO: ' + '; '.join(breaks)}")
    return "\n".join(lines)


def main() -> None:
    """Run the detection benchmark alone."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="runs per leak and crawl size")
    parser.add_argument("--clean-runs", type=int, default=20, help="runs per clean scenario")
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="responses per leaky crawl")
    parser.add_argument("--leaks", type=int, nargs="+", default=LEAKS, help="bytes kept per response")
    parser.add_argument("--extra", nargs="*", default=EXTRA, help="more leaky crawls, LEAK@RESPONSES/PER_PAGE")
    parser.add_argument("--keepers", nargs="+", default=["list"], choices=sorted(ALL_KEEPERS), help="what keeps the leak")
    parser.add_argument("--cells", nargs="*", help="leaky cells LEAK@RESPONSES instead of --leaks x --sizes"
                        " (--cells priority: issue 26's 2048@300 1024@600 4096@150)")
    parser.add_argument("--hog", action="store_true", help="run everything beside a process spinning on one core")
    parser.add_argument("--stability", type=int, default=0, help="reruns of 2 KiB/response over 900 responses, queue 2-30")
    parser.add_argument("--stated", type=int, nargs="*", default=[],
                        help="crawl lengths: pairs of a clean crawl and a list keeper seeded at the bound it stated")
    parser.add_argument("--stated-runs", type=int, default=10, help="pairs per --stated length")
    parser.add_argument("--scenarios", nargs="*", default=[], help="only these clean scenarios (default: all)")
    parser.add_argument("--clean-sizes", type=int, nargs="*", default=[], help="clean catalog crawls of these lengths too")
    parser.add_argument("--grid", action="store_true",
                        help="issue 21's grid (sets --leaks, --sizes, --clean-sizes, and --keepers unless given)")
    parser.add_argument("--merge", type=Path, nargs="+", help="print (and --json) the table of these runs' JSON files as one")
    parser.add_argument("--json", type=Path, help="write the summary and every run to this file")
    parser.add_argument("--part", help="the part of benchmarks/results/detection.json this run replaces"
                                       " (default: grid with --grid or --merge, else latest)")
    parser.add_argument("--markdown", action="store_true", help="with --merge: print the grid as the README's table too")
    args = parser.parse_args()
    if args.merge:
        merged = merge_runs([json.loads(path.read_text()) for path in args.merge])
        print(format_table(merged))
        if args.markdown:
            print(format_markdown(merged))
        if args.json:
            args.json.write_text(json.dumps({"machine": machine_info(), "merged": [str(p) for p in args.merge],
                                             "detection": merged}, indent=2) + "\n")
        latest.save("detection", args.part or "grid", {"merged": [str(p) for p in args.merge], "detection": merged})
        return
    if args.grid:
        keepers_given = args.keepers != ["list"]
        args.leaks, args.sizes, args.clean_sizes = GRID_LEAKS, GRID_SIZES, GRID_SIZES
        args.keepers = args.keepers if keepers_given else GRID_KEEPERS
        args.extra = [] if args.extra == EXTRA else args.extra
    cells = None
    if args.cells is not None:
        cells = PRIORITY_CELLS if args.cells == ["priority"] else [tuple(map(int, c.split("@"))) for c in args.cells]
    extra_results: dict[str, Any] = {}
    try:
        with start_site() as site, cpu_hog(args.hog):
            summary = run_detection(site, runs=args.runs, clean_runs=args.clean_runs, sizes=args.sizes, leaks=args.leaks,
                                    extra=args.extra, keepers=args.keepers, clean_sizes=args.clean_sizes, save=args.json,
                                    only=args.scenarios, cells=cells)  # type: ignore[arg-type]
            if args.stability:
                extra_results["stability"] = run_stability(site, args.stability, args.json)
            if args.stated:
                extra_results["stated"] = run_stated(site, args.stated, args.stated_runs)
    finally:
        stop_reactor()
    summary.update(extra_results, hog=args.hog)
    print(format_table(summary))
    for name, block in extra_results.items():
        print(name, json.dumps({k: v for k, v in block.items() if k != "runs"}))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine_info(), "detection": summary}, indent=2) + "\n")
    latest.save("detection", args.part or ("grid" if args.grid else "latest"), {"detection": summary})


if __name__ == "__main__":
    main()

"""The docs' measured-figures tables, rendered from the benchmarks' latest-results files.

Each benchmark writes one file, ``benchmarks/results/<benchmark>.json`` (``benchmarks/latest.py``: ``{"benchmark",
"format": 1, "parts": {PART: {"written", "command", "machine", "summary"}}}``); ``governor.json`` and
``backpressure.json`` keep the shapes their benchmarks write (``{"budget_mib", "runs": [...]}`` and
``{"machine", "runs": [...]}``). A docs page holds a table as ``<!-- generated: figures-<benchmark> -->``; ``python
-m pytest_crawlmem.docgen`` rewrites it, and ``--check`` (the docs test) fails while a table differs from its file.
A file without a figure its table needs is a :class:`FiguresError` naming the file and the key, not a crash.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_crawlmem.core import verdicts


class FiguresError(ValueError):
    """A results file is missing, unreadable or lacks a figure its docs table needs."""


class Results:
    """One results file, read once; ``get`` fails with the file and the key path it could not find."""

    def __init__(self, directory: Path, benchmark: str) -> None:
        self.path = directory / f"{benchmark}.json"
        self.name = f"benchmarks/results/{benchmark}.json"
        if not self.path.is_file():
            raise FiguresError(f"{self.name}: no such file; run the benchmark (benchmarks/{benchmark}.py) to write it")
        try:
            self.data: dict[str, Any] = json.loads(self.path.read_text())
        except ValueError as exc:
            raise FiguresError(f"{self.name}: not JSON ({exc})") from exc

    def get(self, *keys: str | int, start: Any = None) -> Any:
        value: Any = self.data if start is None else start
        for key in keys:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                path = ".".join(str(k) for k in keys)
                raise FiguresError(f"{self.name}: no {path!r} (the docs' figures table needs it)") from None
        return value

    def part(self, name: str) -> dict[str, Any]:
        part: dict[str, Any] = self.get("parts", name)
        return part

    def summary(self, name: str) -> Any:
        return self.get("parts", name, "summary")

    def caption(self, parts: list[str]) -> str:
        """Where and when the figures were measured: the file, the parts' dates, CPUs and load averages."""
        dates, cpus, loads = set(), set(), []
        for name in parts:
            part = self.part(name)
            machine = part.get("machine") or {}
            dates.add(str(part.get("written", "undated")))
            if machine.get("cpu_count"):
                cpus.add(machine["cpu_count"])
            loads += _loads(machine.get("load_average"))
        when = " to ".join(sorted({min(dates), max(dates)})) if dates else "undated"
        where = f" on {'/'.join(str(c) for c in sorted(cpus))} CPUs" if cpus else ""
        load = f", load average {_span(loads)}" if loads else ""
        count = f"{len(parts)} parts, " if len(parts) > 1 else ""
        return f"From `{self.name}` ({count}{when}{where}{load})."

def _loads(load: Any) -> list[float]:
    """The 1-minute load averages in a machine record's ``load_average`` (one triple, or one per invocation)."""
    if isinstance(load, list) and load and isinstance(load[0], (int, float)):
        return [float(load[0])]
    if isinstance(load, list):
        return [value for item in load for value in _loads(item)]
    return []


def _load(load: Any) -> str:
    values = _loads(load)
    return _span(values) if values else str(load)


def _span(values: list[float]) -> str:
    low, high = f"{min(values):.1f}", f"{max(values):.1f}"
    return low if low == high else f"{low}-{high}"

def _table(header: list[str], rows: list[list[str]], caption: str) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + f"\n\n{caption}"


def _pct(value: float) -> str:
    return f"{value:.1%}"


# -- one renderer per benchmark ------------------------------------------------------------------------------------

DETECTION_PARTS = {"grid": "1-32 KiB/response x 300-2,500 responses x 3 keepers",
                   "grid-short": "4 KiB/response at 150, 2 KiB at 300 responses, 6 keepers",
                   "grid-1k600": "1 KiB/response at 600 responses, 6 keepers",
                   "late-drain": "2 KiB/response over 2,050 responses, late scheduler drain",
                   "clean": "clean crawls", "clean-hog": "clean crawls beside a CPU hog"}


def detection(results: Path) -> str:
    r = Results(results, "detection")
    rows, used = [], []
    for name, what in DETECTION_PARTS.items():
        if name not in r.get("parts"):
            continue
        used.append(name)
        det = r.get("detection", start=r.summary(name))
        leaks = r.get("leaks", start=det).values()
        if leaks:
            runs, flagged = sum(c["runs"] for c in leaks), sum(c["flagged"] for c in leaks)
            named = sum(c.get("flagged_and_attributed", c.get("attributed", 0)) for c in leaks)
            rows.append([what, f"{flagged}/{runs} leaky crawls flagged", f"line named in {named}/{flagged}"])
        clean = [c for c in r.get("clean", start=det).values() if c["runs"]]
        if clean:
            runs, false = sum(c["runs"] for c in clean), sum(c["false_positives"] for c in clean)
            rows.append([what, f"{false}/{runs} clean crawls flagged (false alarms)", f"{len(clean)} scenarios"])
    for name in ("stability", "stability-hog"):
        if name in r.get("parts"):
            used.append(name)
            block = r.get("detection", "stability", start=r.summary(name))
            rows.append([f"2 KiB/response over 900 responses, rerun{' beside a CPU hog' if 'hog' in name else ''}",
                         f"{block['same_verdict']}/{block['reruns']} reruns gave the same verdict", block["verdict"]])
    if "stated" in r.get("parts"):
        used.append("stated")
        for length, block in r.get("detection", "stated", start=r.summary("stated")).items():
            bounds = block.get("bounds") or {}
            low = bounds.get("min") if isinstance(bounds, dict) else min(bounds, default=None)
            high = bounds.get("max") if isinstance(bounds, dict) else max(bounds, default=None)
            rows.append([f"stated bound, clean crawl of {length} responses",
                         f"a leak at the bound flagged {block['flagged']}/{block['seeded']}",
                         f"bound {low:,.0f}-{high:,.0f} B/response" if low is not None else ""])
    return _table(["crawls", "result", "detail"], rows, r.caption(used))


def run(results: Path) -> str:
    r = Results(results, "run")
    rows, used = [], []
    for name, part in r.get("parts").items():
        targets = r.get("targets", start=part["summary"])
        if name != "overhead" and "overhead" in r.get("parts") and "overhead" in name.split("+"):
            targets = [t for t in targets if "overhead" not in t["target"]]  # a later overhead run supersedes these
        if not targets:
            continue
        used.append(name)
        rows += [[t["target"], t["measured"], "met" if t["met"] else "**missed**", name] for t in targets]
    return _table(["target", "measured", "", "run"], rows, r.caption(used))


def browser(results: Path) -> str:
    over, drain, hang = Results(results, "browser_overhead"), Results(results, "browser_drain"), Results(results, "browser_hang")
    rows = []
    overhead_parts = [name for name in ("production", "whole") if name in over.get("parts")]
    for name in overhead_parts:
        for mode, block in over.get("summary", start=over.summary(name)).items():
            rows.append([f"extension's own CPU, {mode} ({name})", f"{_pct(block['own_share_median'])} of the crawl's"
                         f" (max {_pct(block['own_share_max'])})", str(block["runs"])])
    for name in drain.get("parts"):
        for block in drain.get("summary", start=drain.summary(name)).values():
            rows.append([f"mid-crawl checkpoints drained within 1 s ({name})",
                         f"{block['within_1s']}/{block['checkpoints']}, median drain {block['median_drain_seconds']} s",
                         str(block["runs"])])
    for name in hang.get("parts"):
        cells = hang.get("by_concurrency", start=hang.summary(name))
        ended = ", ".join(f"{block['ended_in_time']}/{block['runs']} at {concurrency}" for concurrency, block in cells.items())
        rows.append([f"pages never closed: crawl ended within timeout + 10 s ({name})", f"{ended} in flight",
                     str(sum(block["runs"] for block in cells.values()))])
    captions = " ".join([over.caption(overhead_parts), drain.caption(list(drain.get("parts"))),
                         hang.caption(list(hang.get("parts")))])
    return _table(["figure", "measured", "runs"], rows, captions)


def production(results: Path) -> str:
    costs, soak = Results(results, "production_costs"), Results(results, "soak")
    full = costs.summary("full")
    day = costs.get("day_bounded_1s", start=full)
    rows = [["one sample, bounded timeline, streamed", f"{costs.get('per_sample_us', 'bounded_streamed', start=full)} us", ""],
            ["one status line", f"{costs.get('per_status_us', start=full)} us", ""],
            ["a day at 1 sample/s: heap held (bounded)", f"{day['held_mib']} MiB (peak {day['peak_mib']} MiB)",
             f"{day['samples']:,} samples"]]
    for name in sorted(soak.get("parts"), key=lambda n: int(n.split("-")[0])):
        block = soak.get("summary", start=soak.summary(name))
        ratios = block.get("ratios_production")
        if not ratios:
            continue
        prod = block["production"]
        rows.append([f"soak, {prod['responses']:,} responses ({name})",
                     f"throughput {ratios['throughput']:.2f}x bare, CPU/response {ratios['cpu_per_response']:.2f}x;"
                     f" extension heap max {prod.get('ext_heap_max_kib', 0):.0f} KiB", str(prod["runs"])])
    return _table(["figure", "measured", "runs"], rows, costs.caption(["full"]) + " " + soak.caption(list(soak.get("parts"))))


def replay_throughput(results: Path) -> str:
    r = Results(results, "replay_throughput")
    s = r.summary("latest")
    crawls = r.get("crawls", "fields", start=s)
    rows = [["recording", f"{r.get('entries', start=s)} responses, {r.get('recording_bytes', start=s) / 2**20:.1f} MiB", ""],
            ["crawl wall time (live and replayed)", f"median {crawls['wall_seconds']['median']} s"
             f" ({crawls['wall_seconds']['min']}-{crawls['wall_seconds']['max']})", str(crawls["wall_seconds"]["count"])],
            ["replay site's CPU share", f"median {_pct(crawls['site_cpu_share']['median'])}",
             str(crawls["site_cpu_share"]["count"])]]
    for row in r.get("load", start=s):
        rows.append([f"replay site under load: {row['hosts']}, concurrency {row['concurrency']}",
                     f"{row['requests_per_second']:,.0f} requests/s, p50 {row['p50_ms']} ms", f"{row['responses']:,} requests"])
    return _table(["figure", "measured", "runs"], rows, r.caption(["latest"]))


def cluster_cost(results: Path) -> str:
    r = Results(results, "cluster_cost")
    s = r.get("summary", start=r.summary("latest"))
    ledger, cluster = r.get("ledger", start=s), r.get("cluster", start=s)
    rows = [["ledger: CPU against a bare worker", f"{ledger['cpu_ratio_vs_bare']:.2f}x"
             f" (+{ledger['extra_cpu_us_per_request']:.0f} us/request)"],
            ["ledger: Redis memory per request", f"{ledger['redis_bytes_per_request']:.0f} B"],
            ["measured cluster worker: CPU against a bare worker", f"{cluster['cpu_ratio_vs_bare']:.2f}x"],
            ["measured cluster worker: wall against a bare worker", f"{cluster['wall_ratio_vs_bare']:.2f}x"]]
    return _table(["figure", "measured"], rows, r.caption(["latest"]))


def baseline_spread(results: Path) -> str:
    r = Results(results, "baseline_spread")
    s = r.summary("latest")
    rows = [["unchanged crawls failing against their saved baseline", f"{s['unchanged_failed']}/{s['unchanged_runs']}"],
            ["2 KiB/response leaks caught against the baseline", f"{s['leaky_caught']}/{s['leaky_runs']}"],
            ["default tolerances", f"`{s['tolerances']}`"]]
    return _table(["figure", "measured"], rows, r.caption(["latest"]))


def fingerprint_stability(results: Path) -> str:
    r = Results(results, "fingerprint_stability")
    cases = r.get("cases", start=r.summary("latest"))
    flagged = sum(c["flagged"] for c in cases.values())
    runs = sum(c["runs"] for c in cases.values())
    same = sum(int(str(c["most_common_share"]).split("/")[0]) for c in cases.values())
    distinct = len({fingerprint for c in cases.values() for fingerprint in c.get("fingerprints", {})})
    rows = [[f"{len(cases)} leak shapes ({', '.join(cases)})", f"{flagged}/{runs}", f"{same}/{runs}", str(distinct)]]
    return _table(["leak shapes", "flagged", "the shape's usual fingerprint", "distinct fingerprints"], rows,
                  r.caption(["latest"]))

def keeping_line(results: Path) -> str:
    r = Results(results, "keeping_line")
    rows = []
    for name in r.get("parts"):
        for shape, c in r.get("table", start=r.summary(name)).items():
            rows.append([f"{shape} ({name})", f"{c['flagged']}/{c['runs']}", f"{c['keeping']}/{c['flagged']}"])
    return _table(["leak shape", "flagged", "keeping line named"], rows, r.caption(list(r.get("parts"))))


def governor(results: Path) -> str:
    """``governor.json``: ``{"runs": [{"workload", "mode", "budget_mib", "items", "expected", "peak_rss_bytes",
    "duration_seconds", "governor_cpu_seconds", "crawl_cpu_seconds", ...}]}``, as ``benchmarks/governor.py`` writes it;
    one row per workload: the governed runs beside doing nothing, Scrapy's MEMUSAGE_LIMIT_MB, the Crawlee-style rule
    and the fastest static setting that fits the budget (doing nothing or a static setting: every item delivered, the
    peak within the budget), with the governed runs' items a second as a share of its. Peaks as the benchmark reads
    them: the browser tree's PSS, else ``ru_maxrss`` read from outside the crawl's process."""
    r = Results(results, "governor")
    cells: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for index, item in enumerate(r.get("runs")):
        for key in ("workload", "mode", "items", "expected", "peak_rss_bytes", "duration_seconds"):
            r.get("runs", index, key)
        cells.setdefault(item["workload"], {}).setdefault(item["mode"], []).append(item)

    def peak(run: dict[str, Any]) -> float:
        return float(run.get("tree_peak_pss_bytes") or run.get("peak_rss_outside_bytes") or run["peak_rss_bytes"])

    def mib(runs: list[dict[str, Any]]) -> str:
        peaks = sorted(peak(run) / 2**20 for run in runs)
        return f"{peaks[0]:,.0f}" if len(peaks) == 1 else f"{peaks[0]:,.0f}-{peaks[-1]:,.0f}"

    def delivered(runs: list[dict[str, Any]]) -> str:
        least = min(runs, key=lambda run: run["items"])
        return "" if least["items"] >= least["expected"] else f", {least['items']:,}/{least['expected']:,} items"

    def rate(run: dict[str, Any]) -> float:
        return float(run["items"] / run["duration_seconds"]) if run["duration_seconds"] else 0.0

    rows = []
    for workload, modes in cells.items():
        governed = modes.get("governed", [])
        budget = float((governed or next(iter(modes.values())))[0].get("budget_mib") or r.get("budget_mib"))
        shares = [run["governor_cpu_seconds"] / run["crawl_cpu_seconds"] for run in governed
                  if run.get("governor_cpu_seconds") is not None and run.get("crawl_cpu_seconds")]
        fits = [(statistics.median(rate(run) for run in runs), mode, runs) for mode, runs in modes.items()
                if (mode == "ungoverned" or mode.startswith(("static-", "release-")))
                and all(run["items"] >= run["expected"] and peak(run) <= budget * 2**20 for run in runs)]
        best = max(fits, key=lambda fit: fit[0]) if fits else None
        statics = any(mode.startswith(("static-", "release-")) for mode in modes)
        runs_of = f"{mib(governed)}{delivered(governed)} ({len(governed)} runs)" if governed else "-"
        ratios = sorted(rate(run) / best[0] for run in governed) if best and best[0] and governed else []
        rows.append([f"{workload} ({budget:,.0f} MiB)", runs_of,
                     *(f"{mib(modes[mode])}{delivered(modes[mode])}" if mode in modes else "-"
                       for mode in ("ungoverned", "memusage", "crawlee")),
                     f"{best[1]}: {mib(best[2])}" if best else "none fits" if statics else "-",
                     f"{ratios[0]:.2f}-{ratios[-1]:.2f}x" if ratios else "-",
                     f"{min(shares):.1%}-{max(shares):.1%}" if shares else "-"])
    caption = (f"From `{r.name}`: peak RSS in MiB read from outside the crawl's process; every item delivered unless"
               " said; items a second of the governed runs as a share of the fastest setting that fits; the"
               " governor's own CPU as a share of the crawl's.")
    return _table(["workload (budget)", "governed", "ungoverned", "MEMUSAGE_LIMIT_MB", "Crawlee-style",
                   "fastest that fits", "governed speed", "governor CPU"], rows, caption)


def backpressure(results: Path) -> str:
    """``backpressure.json``: ``{"note", "shapes": {NAME: {"machine", "params", "runs": [{"plain_share", "verdict",
    "stated_share", ...}]}}}``, one row per shape (a serialized pipeline, a serialized callback, each beside a hog too)."""
    r = Results(results, "backpressure")
    rows = []
    for name in r.get("shapes"):
        runs = r.get("shapes", name, "runs")
        plain = [r.get("shapes", name, "runs", i, "plain_share") for i in range(len(runs))]
        stated = [run.get("stated_share") for run in runs if run.get("stated_share") is not None]
        caught = sum(r.get("shapes", name, "runs", i, "verdict") == verdicts.RESPONSE_PROCESSING for i in range(len(runs)))
        under = f"{_pct(min(stated))}-{_pct(max(stated))}" if stated else "-"
        rows.append([name, f"{_pct(min(plain))}-{_pct(max(plain))}", under, f"{caught}/{len(runs)}"])
    return _table(["shape", "plain Scrapy over its limit", "over its limit under the plugin", "read response-processing"],
                  rows, f"From `{r.name}`: shares of 50 ms samples; under the plugin, of the samples outside its pauses.")


def amplification(results: Path) -> str:
    r = Results(results, "amplification")
    s = r.summary("latest")
    rows = [[f"`{kind}` pages", f"{a['p50_ratio']}x", f"{a['p95_ratio']}x", f"{a['max_ratio']}x",
             f"{a['max_held_bytes'] / 2**20:.1f} MiB"] for kind, a in r.get("figures", start=s).items()]
    catalog = r.get("cost", "catalog_amplification", start=s)
    rows.append([f"catalog crawl ({catalog['count']:,} callbacks)", f"{catalog['p50_ratio']}x", f"{catalog['p95_ratio']}x",
                 f"{catalog['max_ratio']}x", f"{catalog['max_held_bytes'] / 2**10:.0f} KiB"])
    step = r.get("step_cost", "added_us_per_step", start=s)
    cpu = r.get("cost", "ratios", "on_over_off_cpu", start=s)
    caption = (f"The meter adds {step} us to each step of a callback's output; the catalog crawl's CPU with it on"
               f" was {cpu}x its CPU with it off. " + r.caption(["latest"]))
    return _table(["pages", "p50", "p95", "max", "held at most"], rows, caption)


FIGURES: dict[str, Callable[[Path], str]] = {
    "figures-detection": detection, "figures-overhead": run, "figures-browser": browser, "figures-production": production,
    "figures-replay": replay_throughput, "figures-cluster": cluster_cost, "figures-baselines": baseline_spread,
    "figures-fingerprints": fingerprint_stability, "figures-keeping-line": keeping_line, "figures-governor": governor,
    "figures-backpressure": backpressure, "figures-amplification": amplification,
}

"""Renders one crawl's ``report.html``: a self-contained page (inline SVG and CSS, no script, no network).

Pure: works from report.json read back (:class:`~pytest_crawlmem.reports.document.ReportDocument`) and the
samples and checkpoints of ``samples.jsonl``, in any process; it reads typed records, never report.json's keys.
Every string that came from a crawl (URLs, paths, source lines, exception text, test ids)
is escaped; the page also forbids scripts and remote loads in its Content-Security-Policy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.budgets import SPECS, BudgetSpec
from pytest_crawlmem.core.evidence import REQUEST_ALLOWANCE, intervals, judged_checkpoints, unexplained_refs
from pytest_crawlmem.core.growth import FIXES
from pytest_crawlmem.core.leaktrend import MAX_REQUEST_CREDIT, REQUEST_CREDIT
from pytest_crawlmem.core.models import Checkpoint, CrawlResult, DangerSnapshot, Growth, Sample, ShotSummary, heap_estimate
from pytest_crawlmem.core.replay_copies import copies_warning, per_copy_line, shown_copies
from pytest_crawlmem.core.rules import decided_by
from pytest_crawlmem.core.schedule import warmup_responses
from pytest_crawlmem.core.sites import source_line
from pytest_crawlmem.core.tracebuild import trace_of
from pytest_crawlmem.core.units import format_duration, format_size
from pytest_crawlmem.core.warmup import result_warmup_note
from pytest_crawlmem.reports.document import ReportDocument
from pytest_crawlmem.reports.governor import governor_bands, governor_markers, load_decisions
from pytest_crawlmem.reports.jsonl import is_number
from pytest_crawlmem.reports.markup import Safe, count, esc, page, section, size, table
from pytest_crawlmem.reports.markup import number_of as _number
from pytest_crawlmem.reports.svgchart import Budget, Marker, Panel, Series, XAxis, count_tick, render_timeline, seconds_tick
from pytest_crawlmem.reports.tracehtml import known_leak_html, trace_html

COLORS = {"rss": "#0072b2", "traced": "#cc79a7", "heap": "#009e73", "scheduled": "#e69f00",
          "inflight": "#56b4e9", "active": "#7b61a8", "pss": "#d55e00", "uss": "#009e73", "pages": "#0072b2",
          "contexts": "#e69f00"}
def _badge(text: str, kind: str) -> Safe:
    return Safe(f'<span class="badge {esc(kind)}">{esc(text)}</span>')


# -- the timeline -------------------------------------------------------------------------


def _at(samples: Sequence[Sample], x_key: str, y_key: str) -> list[tuple[float, float | None]]:
    return [(float(getattr(s, x_key)), _number(getattr(s, y_key))) for s in samples]


def _checkpoint_title(c: Checkpoint) -> str:
    heap = heap_estimate(c)
    drained = "drained" if c.drained else "did not drain in time"
    return (f"checkpoint at {c.responses:,} responses, {c.t_seconds:.1f} s ({drained}): RSS {format_size(c.rss_bytes)},"
            f" heap {size(heap)}, scheduler {c.scheduled:,}")


def _warmup_x(warm: int, samples: Sequence[Sample], checkpoints: Sequence[Checkpoint], x_key: str) -> float | None:
    """Where the warm-up of ``warm`` responses ends on the x axis (responses, or the time it was reached)."""
    if x_key == "responses":
        return float(warm)
    times = [float(s.t_seconds) for s in samples if s.responses >= warm]
    times += [c.t_seconds for c in checkpoints if c.responses >= warm]
    return min(times, default=None)


def _budgets(budgets: Mapping[str, Any], panel: str, start_rss: float = 0.0) -> list[Budget]:
    """The budgets drawn on ``panel`` (their rows' ``panel``) that were set; a growth is drawn at start RSS + budget."""
    found = []
    for name in (name for name, spec in SPECS.items() if spec.panel == panel):
        value = _number(budgets.get(name))
        if value is None:
            continue
        if SPECS[name].from_start:
            found.append(Budget(name, value + start_rss, shown=value,
                                note=f"drawn at the start RSS {format_size(start_rss)} + {format_size(value)}"))
        else:
            found.append(Budget(name, value))
    return found


def is_browser_job(result: CrawlResult, samples: Sequence[Sample]) -> bool:
    """A ``browser_job`` (pages, no Scrapy engine): a browser summary and no scheduler reading in any sample."""
    return result.browser is not None and not result.stats and all(s.scheduled is None for s in samples)


def _present(samples: Sequence[Sample], x_key: str, y_key: str) -> list[tuple[float, float | None]]:
    """The samples that carry ``y_key`` (read now and then, such as the browser tree's PSS), as one unbroken line."""
    return [(float(getattr(s, x_key)), _number(getattr(s, y_key))) for s in samples if _number(getattr(s, y_key)) is not None]


def _browser_panels(budgets: Mapping[str, Any], samples: Sequence[Sample], checkpoints: Sequence[Checkpoint],
                    cp_x: Sequence[float], x_key: str) -> list[Panel]:
    """The browser tree's PSS and USS, and its open pages and contexts."""
    def at_checkpoints(field: str) -> list[tuple[float, float | None]]:
        return [(x, _number(getattr(c, field))) for x, c in zip(cp_x, checkpoints, strict=True)
                if getattr(c, field) is not None]
    memory = Panel("Browser tree", "bytes", [
        Series("pss", "PSS, summed over the tree", COLORS["pss"],
               sorted(_present(samples, x_key, "browser_pss_bytes") + at_checkpoints("browser_pss_bytes"))),
        Series("uss", "USS at checkpoints (private: what it keeps)", COLORS["uss"], at_checkpoints("browser_uss_bytes"),
               dots=True),
    ], _budgets(budgets, "pss"), zoom=True)
    pages = Panel("Open pages", "count", [
        Series("pages", "pages open", COLORS["pages"], _at(samples, x_key, "open_pages")),
        Series("contexts", "contexts open", COLORS["contexts"], _at(samples, x_key, "open_contexts")),
    ], _budgets(budgets, "pages"))
    return [memory, pages]


def _warmup(doc: ReportDocument, checkpoints: Sequence[Checkpoint]) -> int:
    """Units (responses or pages) before which growth is not judged: growth.warmup_responses, or the browser's rule."""
    total = checkpoints[-1].responses if checkpoints else int(_number(doc.figure("responses")) or 0)
    if doc.unit != "pages":
        return warmup_responses(total)
    readings = [c for c in checkpoints if c.drained and c.browser_uss_bytes is not None]  # as growth.browser_growth
    return max(readings[0].responses + 1, readings[-1].responses // 4) if readings else total // 4


def _danger_summary(danger: DangerSnapshot) -> str:
    """The danger snapshot's one line (a hand-edited report.json may hold figures it cannot format)."""
    try:
        return danger.describe()
    except (TypeError, ValueError):
        return "danger snapshot"


def timeline(doc: ReportDocument, samples: Sequence[Sample], checkpoints: Sequence[Checkpoint], x_key: str) -> str:
    """The stacked timeline (RSS, Python memory, browser, scheduler, in flight, scraper) against ``responses`` or time.

    Panels without data are left out (a browser job has no scheduler); memory panels zoom on their data.
    """
    budgets, result = doc.budgets, doc.result
    browser_job = doc.unit == "pages"
    unit = doc.unit
    cp_x = [float(c.responses if x_key == "responses" else c.t_seconds) for c in checkpoints]
    heap = Series("heap", "heap at checkpoints", COLORS["heap"], [(x, _number(heap_estimate(c))) for x, c in
                  zip(cp_x, checkpoints, strict=True)], dots=True, titles=[_checkpoint_title(c) for c in checkpoints])
    start_rss = _number(doc.figure("start_rss")) or 0.0
    panels = [
        Panel("RSS", "bytes", [Series("rss", "RSS of this process", COLORS["rss"], _at(samples, x_key, "rss_bytes"))],
              _budgets(budgets, "rss", start_rss), zoom=True),
    ]
    traced = Series("traced", "traced (tracemalloc)", COLORS["traced"], _at(samples, x_key, "traced_bytes"))
    if result.growth.signal == "traced":
        panels.append(Panel("Python memory", "bytes", [traced, heap], _budgets(budgets, "traced"), zoom=True))
    else:  # a traced window (attribution) is far below the heap: its own panel keeps both readable
        panels += [Panel("Python memory", "bytes", [heap], zoom=True),
                   Panel("Traced window", "bytes", [traced], _budgets(budgets, "traced"), zoom=True)]
    if result.browser is not None:
        panels += _browser_panels(budgets, samples, checkpoints, cp_x, x_key)
    panels += [
        Panel("Scheduler", "count", [Series("scheduled", "requests waiting", COLORS["scheduled"],
                                            _at(samples, x_key, "scheduled"))], _budgets(budgets, "scheduled")),
        Panel("In flight", "count", [Series("inflight", "downloads in flight", COLORS["inflight"],
                                            _at(samples, x_key, "inflight"))], _budgets(budgets, "inflight")),
        Panel("Scraper", "bytes", [Series("active", "active size (responses being processed)", COLORS["active"],
                                          _at(samples, x_key, "active_size_bytes"))], _budgets(budgets, "active")),
    ]
    if browser_job:
        panels = [p for p in panels if p.title not in ("Scheduler", "In flight", "Scraper")]
    markers = [Marker(x, "checkpoint" if c.drained else "checkpoint undrained", _checkpoint_title(c))
               for x, c in zip(cp_x, checkpoints, strict=True)]
    warm_units = _warmup(doc, checkpoints)
    warm = _warmup_x(warm_units, samples, checkpoints, x_key) if checkpoints or samples else None
    if warm is not None:
        rule = "a quarter of the pages, after the browser's launch" if browser_job else "max(150, N/4)"
        markers.append(Marker(warm, "warmup", f"warm-up ends at {warm_units:,} {unit}: {rule}"))
    danger = result.danger  # the danger snapshot (danger.json): where RSS crossed snapshot_at
    at = getattr(danger, x_key) if danger is not None else None
    if danger is not None and is_number(at):
        markers.append(Marker(float(at), "danger", _danger_summary(danger)))
    markers += governor_markers(result.report_dir, x_key)  # the memory governor's decisions (governor.json)
    x_end = max([float(getattr(s, x_key)) for s in samples] + [float(x) for x in cp_x], default=0.0)
    by_responses = x_key == "responses"
    axis = XAxis(f"{unit} processed" if by_responses else "seconds since the start",
                 count_tick if by_responses else seconds_tick, shade_until=warm, markers=markers,
                 bands=governor_bands(result.report_dir, x_key, x_end))
    caption = f"memory and queues against {unit if by_responses else 'time'}"
    return render_timeline(panels, axis, caption=caption)


def chart_section(doc: ReportDocument, samples: Sequence[Sample], checkpoints: Sequence[Checkpoint]) -> Safe:
    """The timeline with its x-axis toggle (pure CSS) and legend."""
    if not samples and not checkpoints:
        return section("Timeline", '<p class="empty">No samples were recorded, so there is nothing to plot.</p>')
    unit = doc.unit
    total = checkpoints[-1].responses if checkpoints else 0
    rule = "a quarter of the pages" if unit == "pages" else "max(150, N/4)"
    warm = f"warm-up: first {_warmup(doc, checkpoints):,} {unit} ({rule}), not judged" if total else "warm-up"
    zoom = ("memory panels start where their data does, not at 0, when that hides growth: read the axis labels."
            " Budgets far above the data are named at the right (\u2191), not drawn.")
    legend = (
        f'<ul class="legend"><li><span class="swatch warmup"></span>{esc(warm)}</li>'
        '<li><span class="swatch checkpoint"></span>drained checkpoint (hover a dot for its figures)</li>'
        '<li><span class="swatch undrained"></span>checkpoint that did not drain in time</li>'
        '<li><span class="swatch budget"></span>budget</li>'
        + ('<li><span class="swatch danger"></span>danger snapshot (danger.json)</li>' if doc.result.danger else "")
        + ('<li><span class="swatch governor"></span>memory governor decision (governor.json: lowered blue,'
           ' restored green; hover for the sentence)</li><li><span class="swatch band-governed"></span>governed:'
           ' lowered until restored</li><li><span class="swatch band-rotation"></span>a browser context rotated,'
           ' until it closed</li>' if load_decisions(doc.result.report_dir) else "")
        + f'</ul><p class="note">{esc(zoom)}</p>'
    )
    body = (
        '<div class="chart">'
        f'<input type="radio" name="xaxis" id="x-responses" checked><label for="x-responses">against {unit}</label>'
        '<input type="radio" name="xaxis" id="x-time"><label for="x-time">against time</label>'
        f'<div class="by-responses">{timeline(doc, samples, checkpoints, "responses")}</div>'
        f'<div class="by-time">{timeline(doc, samples, checkpoints, "t_seconds")}</div>'
        f"{legend}</div>"
    )
    return section("Timeline", body)


# -- the tables ---------------------------------------------------------------------------


def budgets_section(doc: ReportDocument) -> Safe:
    """Each budget that was set: its limit, the measured value, kept or broken, as its row of ``budgets.SPECS`` shows them."""
    broken = {v.budget: v for v in doc.violations}
    rows = []
    for name, value in doc.budgets.items():
        spec = SPECS.get(name) or BudgetSpec(name, str, "")  # a budget this version does not know: as written
        measured = spec.show_measured(doc.at(spec.report_path) if spec.report_path else None, unit=doc.unit,
                                      per_response=doc.result.growth.per_response_bytes)
        text, style = spec.status(value, measured, broken.get(name))
        rows.append([Safe(f"<code>{esc(name)}</code>"), spec.show_limit(value), measured, _badge(text, style)])
    if not rows:
        return section("Budgets", '<p class="empty">No budgets: this crawl was measured, not judged.</p>')
    return section("Budgets", table(["budget", "limit", "measured", "status"], rows, cls="budgets"))


def violations_section(doc: ReportDocument) -> Safe:
    """The budgets the crawl broke, one sentence each."""
    if not doc.violations:
        return section("Violations", '<p class="empty">None.</p>')
    items = "".join(
        f'<li>{_badge("fails" if v.fails else "warns", "fail" if v.fails else "warn")}'
        f" <code>{esc(v.budget)}</code>: {esc(v.message)}</li>"
        for v in doc.violations
    )
    return section("Violations", f'<ul class="violations">{items}</ul>')


def growth_sites_section(result: CrawlResult) -> Safe:
    """Allocation sites that grew in the traced window, with their tracebacks."""
    if not result.top_growth:
        return section("Top growth sites", '<p class="empty">No allocation site grew in every traced interval'
                       " (a traced window opens only when the checkpoints look leaky).</p>")
    rows = []
    for rank, site in enumerate(result.top_growth, 1):
        trace = "\n".join(str(line) if str(line).startswith("File ") else "    " + str(line) for line in site.traceback)
        location = Safe(f"<details><summary><code>{esc(site.location)}</code></summary>"
                        f"<pre>{esc(trace) or 'no traceback'}</pre></details>")
        per = _number(site.bytes_per_response)
        rows.append([rank, location, "+" + size(site.size_diff_bytes), f"{_number(site.count_diff) or 0:+,.0f}",
                     "-" if per is None else f"{per:,.1f} B"])
    return section("Top growth sites", table(["#", "location (click for the traceback)", "size", "blocks", "per response"],
                                             rows, cls="sites"))


SIGNALS = {"traced": "traced memory", "heap": "heap memory", "rss": "RSS", "browser-uss": "the browser tree's USS"}


def _signal_values(signal: str, checkpoints: Sequence[Checkpoint]) -> list[int] | None:
    """The figure the verdict judged, at each checkpoint (``None`` when a checkpoint lacks it)."""
    readers: dict[str, Callable[[Checkpoint], int | None]] = {
        "traced": lambda c: c.traced_bytes, "heap": heap_estimate, "rss": lambda c: c.rss_bytes,
        "browser-uss": lambda c: c.browser_uss_bytes}
    pick = readers.get(signal)
    values = [pick(c) for c in checkpoints] if pick else []
    return [int(v) for v in values if v is not None] if pick and all(v is not None for v in values) else None


def growth_explanation(doc: ReportDocument) -> str:
    """What "growth per response" means on this page: which signal, raw or net, over which window."""
    growth = doc.result.growth
    unit = doc.unit[:-1]
    what = SIGNALS.get(growth.signal, "memory")
    if growth.signal == "browser-uss":
        return (f"growth per {unit}: the change of {what} between the first and the last judged checkpoint, divided by"
                f" the {unit}s between them")
    kind = "raw" if growth.verdict == verdicts.SCHEDULER_BACKLOG else "net"
    return (f"growth per {unit} ({kind}, the figure at the top): the change of {what} over the judged checkpoints, divided by"
            f" the {unit}s between them. raw = the change itself; net = raw less {format_size(REQUEST_ALLOWANCE)} for each"
            f" request the scheduler gained (plus a credit for each it gave back: what a queued request cost in this"
            f" crawl, {format_size(REQUEST_CREDIT)} to {format_size(MAX_REQUEST_CREDIT)}), since waiting"
            " requests explain that memory. A growing queue makes net lower than raw; a draining one, higher."
            + (" This crawl's verdict is a scheduler backlog, so the raw figure is shown." if kind == "raw" else ""))


def checkpoints_section(doc: ReportDocument, checkpoints: Sequence[Checkpoint]) -> Safe:
    """The drained checkpoints the verdict was judged on, with raw and net growth per interval."""
    if not checkpoints:
        return section("Checkpoints", '<p class="empty">No checkpoint was recorded.</p>')
    growth = doc.result.growth
    judged = judged_checkpoints(checkpoints)
    values = _signal_values(growth.signal, judged)
    spans = {id(i.end): i for i in intervals(judged, values)} if values is not None else {}
    judged_net = [_number(d) for d in growth.deltas_per_response]
    nets = {id(c): d for c, d in zip(judged[1:], judged_net, strict=False)} if len(judged_net) == len(judged) - 1 else {}
    judged_ids = {id(c) for c in judged}
    warm = warmup_responses(checkpoints[-1].responses)
    unit = doc.unit
    rows = []
    for c in checkpoints:
        phase = ("warm-up" if c.responses < warm else "judged" if id(c) in judged_ids
                 else "traced, not judged" if c.tracer_bytes else "merged (too short)")
        span = spans.get(id(c))
        refs = sorted(c.live_refs.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{name} {n:,}" for name, n in refs[:4]) + (f", +{len(refs) - 4} more" if len(refs) > 4 else "")
        odd = unexplained_refs(c)
        rows.append([f"{c.responses:,}", f"{c.t_seconds:.1f}", format_size(c.rss_bytes), size(heap_estimate(c)),
                     size(c.traced_bytes), f"{c.scheduled:,}",
                     "-" if span is None else size(span.raw_per_response),
                     size(nets[id(c)]) if id(c) in nets else "-" if span is None else size(span.net_per_response),
                     shown or "-", ", ".join(f"{k} {v:,}" for k, v in odd.items()) or "-",
                     "yes" if c.drained else Safe(_badge("no", "warn")), f"{c.cost_seconds * 1000:,.0f}", phase])
    headers = [unit, "time (s)", "RSS", "heap", "traced", "scheduler", f"raw growth/{unit[:-1]}",
               f"net growth/{unit[:-1]}", "live Scrapy objects", "unexplained objects", "drained", "cost (ms)", "phase"]
    signal = SIGNALS.get(growth.signal, growth.signal or "-")
    note = f"Signal judged: {signal}; rule: {growth.rule or '-'}. {growth_explanation(doc)}"
    return section("Checkpoints", Safe(f'<div class="scroll">{table(headers, rows, cls="checkpoints")}</div>'), note=note)


def counts_section(title: str, counts: Mapping[Any, object], headers: Sequence[str], empty: str) -> Safe:
    """A two-column table of counts by name."""
    if not counts:
        return section(title, f'<p class="empty">{esc(empty)}</p>')
    return section(title, table(headers, [[k, count(v)] for k, v in counts.items()], cls="counts"))


def live_objects_section(result: CrawlResult) -> Safe:
    """Scrapy objects still alive after the crawl closed, and what holds them (gc referrer paths) when known."""
    paths = {r.class_name: r.path for r in result.retention}
    if not result.live_refs:
        return section("Live Scrapy objects after close",
                       '<p class="empty">None: every Scrapy object tracked by trackref was freed.</p>')
    rows = [[name, count(n), Safe(f"<code>{esc(paths[name])}</code>") if paths.get(name) else "-"]
            for name, n in result.live_refs.items()]
    return section("Live Scrapy objects after close", table(["class", "live", "held by"], rows, cls="counts"))


def _seconds(value: object) -> str:
    number = _number(value)
    if number is None:
        return "-"
    if number == 0:
        return "0 s"
    return f"{number * 1000:,.1f} ms" if number < 1 else f"{number:,.2f} s"


def _sizes_table(result: CrawlResult) -> str:
    sizes = result.response_sizes
    if not sizes.count:
        return '<p class="empty">No response sizes recorded.</p>'
    rows = [["responses", count(sizes.count)], ["p50", size(sizes.p50_bytes)], ["p95", size(sizes.p95_bytes)],
            ["p99", size(sizes.p99_bytes)], ["max", size(sizes.max_bytes)], ["total", size(sizes.total_bytes)]]
    suggestion = result.suggested_maxsize
    note = ""
    if suggestion is not None and _number(suggestion.download_maxsize) is not None:
        limit = int(_number(suggestion.download_maxsize) or 0)
        note = (f'<p class="note">Suggested <code>DOWNLOAD_MAXSIZE = {limit:,}</code> ({esc(size(limit))}:'
                f" {esc(suggestion.rule)}); it would have dropped {esc(count(suggestion.would_drop))}"
                " responses of this crawl.</p>")
    return table(["response body size (after decompression)", ""], rows, cls="counts") + note


def dropped_section(doc: ReportDocument) -> Safe:
    """Responses the crawl lost, with why; DOWNLOAD_WARNSIZE warnings; the size distribution and a DOWNLOAD_MAXSIZE."""
    dropped = doc.result.dropped
    total = int(_number(doc.figure("dropped_count")) or len(dropped))
    warned = _number(doc.figure("warnsize_warnings"))
    summary = (f'<p class="note">{total:,} responses dropped'
               + (f", {len(dropped):,} listed" if total > len(dropped) else "")
               + ("" if warned is None else f"; {warned:,.0f} over DOWNLOAD_WARNSIZE (kept)") + ".</p>")
    if dropped:
        rows = [[Safe(f'<code class="url">{esc(d.url)}</code>'), d.reason, size(d.size_bytes)] for d in dropped]
        listing = table(["URL", "reason", "size seen"], rows)
    else:
        listing = Safe('<p class="empty">None recorded.</p>')
    return section("Dropped responses", Safe(summary + listing + _sizes_table(doc.result)))


def backpressure_section(doc: ReportDocument) -> Safe:
    """Scraper backpressure, scheduler backlog, retries and download latency."""
    ratio = _number(doc.figure("active_size_ratio"))
    per = _number(doc.figure("scheduled_per_response"))
    latency = doc.result.download_latency
    figure = doc.figure
    rows: list[list[object]] = [
        ["max active size / SCRAPER_SLOT_MAX_ACTIVE_SIZE",
         f"{size(figure('max_active_size'))} / {size(figure('max_active_size_limit'))}"
         + ("" if ratio is None else f" ({ratio:.0%})")],
        ["time in backout", _seconds(figure("backout_seconds"))],
        ["max scheduled (of which on disk)", f"{count(figure('max_scheduled'))} ({count(figure('max_disk_scheduled'))})"],
        ["scheduler growth per response (to its peak)", "-" if per is None else f"{per:,.2f}"],
        ["retries (gave up)", f"{count(figure('retries'))} ({count(figure('retries_max_reached'))})"],
        ["download latency p50 / p95 / p99 / max",
         " / ".join(_seconds(v) for v in (latency.p50_seconds, latency.p95_seconds, latency.p99_seconds, latency.max_seconds))],
        *_jobdir_and_media_rows(doc),
    ]
    return section("Backpressure and politeness", table(["", ""], rows, cls="env"))


def _jobdir_and_media_rows(doc: ReportDocument) -> list[list[object]]:
    """JOBDIR's peak disk use and the media pipelines' cache, when the crawl had them."""
    rows: list[list[object]] = []
    if _number(doc.figure("jobdir_disk")) is not None:
        rows.append(["JOBDIR on disk (peak)", size(doc.figure("jobdir_disk"))])
    media = doc.result.media
    if media is not None:
        rows.append([f"media pipeline cache: peak entries ({', '.join(map(str, media.pipelines))})",
                     f"{count(doc.figure('max_media_cached'))} ({count(media.failed_at_close)} failures at close)"])
        for kept in media.retained:
            rows.append([f"kept alive by failed media downloads: {count(kept.count)} {kept.class_name}",
                         Safe(f'<code>{esc(kept.path or "")}</code>')])
    return rows


def environment_section(doc: ReportDocument, header: Mapping[str, Any]) -> Safe:
    """Versions, machine and crawl settings, and Scrapy's stats."""
    env = {**doc.environment, **{f"stream {k}": v for k, v in header.items()}}
    body = table(["", ""], [[k, "-" if v is None else v] for k, v in env.items()], cls="env") if env else Safe("")
    stats = doc.result.stats
    if stats:
        body = Safe(body + "<details><summary>Scrapy stats</summary>"
                    + table(["stat", "value"], sorted(([k, v] for k, v in stats.items()), key=lambda kv: str(kv[0])))
                    + "</details>")
    return section("Environment", body or '<p class="empty">Not recorded.</p>')


# -- the page -----------------------------------------------------------------------------




def _span(start: str, end: str) -> str:
    """``88.8 → 103.5 MiB`` (the unit once when both share it)."""
    unit = start.rpartition(" ")[2]
    if start != "-" and end.endswith(" " + unit):
        start = start.rpartition(" ")[0]
    return f"{start} \u2192 {end}"


def _per_label(doc: ReportDocument) -> str:
    """``growth/response (net)``, ``growth/response (raw)`` or ``USS growth/page``: what the growth tile shows."""
    growth = doc.result.growth
    unit = doc.unit[:-1]
    if growth.signal == "browser-uss":
        return f"USS growth/{unit}"
    return f"growth/{unit} ({'raw' if growth.verdict == verdicts.SCHEDULER_BACKLOG else 'net'})"


def _figures(doc: ReportDocument) -> Safe:
    figure, browser, unit = doc.figure, doc.result.browser, doc.unit
    duration = _number(figure("duration_seconds"))
    figures = [
        (unit, count(figure("responses"))),
        *([] if browser and unit == "pages" else [("items", count(figure("items_scraped")))]),
        ("duration", "-" if duration is None else format_duration(duration)), ("peak RSS", size(figure("peak_rss"))),
        ("RSS start \u2192 end", _span(size(figure("start_rss")), size(figure("end_rss")))),
        ("RSS growth", ", ".join(filter(None, (size(figure("rss_growth")), result_warmup_note(doc.result))))),
        (_per_label(doc), size(doc.result.growth.per_response_bytes)),
        ("traced peak", size(figure("traced_peak"))),
    ]
    if browser:
        figures += [("browser PSS peak", size(browser.peak_pss_bytes)), ("browser USS at end", size(browser.end_uss_bytes)),
                    ("browser processes", count(browser.max_processes)), ("most pages open", count(browser.max_open_pages))]
    if unit != "pages":
        figures += [("max scheduled", count(figure("max_scheduled"))), ("max in flight", count(figure("max_inflight"))),
                    ("max active size", size(figure("max_active_size")))]
    figures.append(("finish reason", doc.result.finish_reason or "-"))
    cells = "".join(f'<div class="figure"><div class="label">{esc(k)}</div><div class="value">{esc(v)}</div></div>'
                    for k, v in figures)
    return Safe(f'<div class="figures">{cells}</div>')


def _where(doc: ReportDocument) -> Safe:
    """Where memory grew: the top allocation site with its source line, what holds live objects, the browser's biggest part."""
    result, unit = doc.result, doc.unit[:-1]
    found = {
        verdicts.SCHEDULER_BACKLOG: f"the scheduler: up to {count(doc.figure('max_scheduled'))} requests waiting"
        f" (about {format_size(REQUEST_ALLOWANCE)} each in memory)",
        verdicts.DOWNLOADER_ACTIVITY: f"downloads in flight: up to {count(doc.figure('max_inflight'))}, each buffering its body",
        verdicts.RESPONSE_PROCESSING: f"responses waiting for callbacks and pipelines: scraper active size up to"
        f" {size(doc.figure('max_active_size'))}",
    }.get(result.growth.verdict, "")
    parts = [esc(found)] if found else []
    sites = result.top_growth
    if sites:
        top = sites[0]
        code = source_line(top)  # the user's frame's own line, not the innermost (a library's) frame's
        per = _number(top.bytes_per_response)
        parts.append(f"<code>{esc(top.location)}</code>"
                     + (f" <code class=\"src\">{esc(code)}</code>" if code else "")
                     + f" +{esc(size(top.size_diff_bytes))}"
                     + ("" if per is None else f" ({esc(format_size(per))}/{unit})")
                     + (f"; then {esc(', '.join(str(x.location) for x in sites[1:3]))}" if len(sites) > 1 else ""))
    for kept in result.retention:
        holder = kept.path or "no module or class holds it within the search bounds"
        parts.append(f"{esc(count(kept.count))} {esc(kept.class_name)} alive after the crawl, held by <code>{esc(holder)}</code>")
    kinds = result.browser.pss_by_kind_at_peak if result.browser else None
    if kinds:
        ranked = sorted(((str(k), _number(v) or 0.0) for k, v in kinds.items()), key=lambda kv: -kv[1])
        parts.append("browser tree at its PSS peak: " + ", ".join(f"{esc(k)} {esc(format_size(v))}" for k, v in ranked[:4]))
    if not parts:
        return Safe('<span class="muted">no allocation site recorded: a traced window opens only when the checkpoints'
                    " look leaky (or with a traced_peak budget)</span>")
    return Safe("<br>".join(parts))


def _what_grew(doc: ReportDocument) -> str:
    """The verdict's reason without its fix (the fix has its own row)."""
    reason = (doc.result.growth.reason or "-").split(". Fix: ")[0]
    return re.sub(r"\bresponses\b", "pages", reason) if doc.unit == "pages" else reason  # a browser job's unit


def _changes(doc: ReportDocument) -> list[str]:
    """What to change: the cause and fix of each broken budget, the fix of the verdict."""
    verdict = doc.result.growth.verdict
    changes = []
    for v in doc.violations:
        cause = SPECS[v.budget].cause if v.budget in SPECS else ""
        if cause:
            changes.append(f"{v.budget}: {cause}")
        elif not v.of_verdict and v.budget not in (c.split(":")[0] for c in changes):
            changes.append(f"{v.budget}: {v.message}")
    if verdict in FIXES:
        lead = "" if any(v.of_verdict for v in doc.violations) else "if this growth matters: "
        changes.append(f"{verdict}: {lead}{FIXES[verdict]}")
    return changes


def glance(doc: ReportDocument) -> Safe:
    """Above the fold: did it fail, what grew, where, how much per response, what to change."""
    growth = doc.result.growth
    failing = [v.budget for v in doc.violations if v.fails]
    warned = [v.budget for v in doc.violations if not v.fails]
    checked = len(doc.budgets)
    if failing:
        outcome = _badge("failed", "fail") + esc(f" {len(failing)} budget{'s' if len(failing) > 1 else ''} broken: "
                                                 + ", ".join(failing) + (f"; warned: {', '.join(warned)}" if warned else ""))
    elif warned:
        outcome = _badge("passed with warnings", "warn") + esc(" " + ", ".join(warned))
    elif checked:
        outcome = _badge("passed", "pass") + esc(f" every budget kept ({checked} set)")
    else:
        outcome = _badge("measured", "muted") + esc(" no budget was set: measured, not judged")
    per = _number(growth.per_response_bytes)
    responses = _number(doc.figure("responses")) or 0
    rss_per = _number(doc.figure("rss_growth"))
    unit = doc.unit[:-1]
    signal = SIGNALS.get(growth.signal, "memory")
    kind = "" if growth.signal == "browser-uss" else (
        " raw" if growth.verdict == verdicts.SCHEDULER_BACKLOG else " net of the scheduler's share")
    per_text = ("not judged" if per is None else f"{format_size(per)} of {signal}{kind} {_after(growth)}") + (
        f"; RSS {format_size(rss_per / responses)}/{unit} over the whole run" if rss_per is not None and responses else "")
    detectable = _number(growth.detectable_per_response_bytes)
    if detectable is not None and growth.signal != "browser-uss":
        per_text += f"; this crawl would have caught a leak of {format_size(detectable)}/{unit} or more (95%)"
    if decided_by(growth) == "live-objects":  # the figures are memory's: say they did not decide, and what did
        per_text = (f"not what decided: live Scrapy objects rising at every drained checkpoint did"
                    f" ({growth.verdict}); memory: {per_text}")
    changes = _changes(doc)
    verdict = growth.verdict or "unknown"
    if not changes and verdict == verdicts.INCONCLUSIVE:
        changes = ["growth was not judged: " + ("render more pages, with `await job.checkpoint()` after each batch"
                                                if unit == "page" else "crawl more responses") + " (what grew says how many)"]
    change = (Safe("<ul>" + "".join(f"<li>{esc(c)}</li>" for c in changes) + "</ul>") if changes
              else Safe(f'<span class="muted">nothing: {"the budgets were kept" if checked else "no budget was set"}'
                        ' and memory levelled off</span>'))
    rows = [["did it fail?", Safe(outcome)],
            ["what grew", Safe(_badge(verdict, _verdict_kind(verdict)) + " " + _grew_with_trace(doc))],
            ["where", _where(doc)], [f"per {unit}", per_text], ["what to change", change]]
    return table(["", ""], rows, cls="glance")


def _grew_with_trace(doc: ReportDocument) -> str:
    """The verdict's reason, then a leak's trace (reports/tracehtml.py) in place of the holder's part of the sentence,
    its fingerprint and the known library leak it is."""
    trace = trace_of(doc.result)
    reason = _what_grew(doc)
    if trace is None:
        return esc(reason) + _fingerprint(doc)
    head = reason.split("; held by ")[0] if trace.source == "holder" else reason
    return (esc(head) + "<br>" + trace_html(trace, doc.result.growth.fingerprint) + _fingerprint(doc).removeprefix("<br>")
            + known_leak_html(doc.result.growth.known_leak))


def _fingerprint(doc: ReportDocument) -> str:
    """``leak fingerprint 3f2a...: holder ...; function ...; code ...`` under a leak verdict ('' for any other)."""
    growth = doc.result.growth
    if not growth.fingerprint:
        return ""
    basis = "; ".join(str(part) for part in growth.fingerprint_basis)
    return (f'<br><span class="muted">leak fingerprint <code class="fingerprint">{esc(growth.fingerprint)}</code>'
            + (f" from {esc(basis)}" if basis else "") + "</span>")


def _after(growth: Growth) -> str:
    """Where the per-response figure was measured: after the warm-up, or after a plateau's knot."""
    knot = re.search(r"levelled off at response ([\d,]+)", growth.reason) if decided_by(growth) == "plateau" else None
    return f"after response {knot.group(1)}, where it levelled off" if knot else "after the warm-up"


def _verdict_kind(verdict: str) -> str:
    """The badge colour of a verdict, from the vocabulary (a leak verdict is a failure, whatever its name)."""
    return verdicts.colour_of(verdict)


def _head(doc: ReportDocument, header: Mapping[str, Any], problems: Sequence[str], files: Sequence[str]) -> Safe:
    result = doc.result
    title = doc.test or doc.source or result.spider or header.get("spider") or "crawl"
    spider = result.spider or header.get("spider") or "?"
    kind = "browser job" if doc.unit == "pages" else "spider"
    parts = [f'<header><p class="kicker">pytest-crawlmem report &middot; {kind} <code>{esc(spider)}</code></p>',
             f"<h1>{esc(title)}</h1>",
             glance(doc)]
    if result.stopped_because:
        parts.append(f'<p class="banner warn">The crawl was stopped: {esc(result.stopped_because)}</p>')
    if doc.note:
        parts.append(f'<p class="note banner">{esc(doc.note)}</p>')
    errors = [str(e) for e in result.errors]
    shown = [p for p in [*problems, *doc.problems] if not any(p.endswith(e) for e in errors)]
    if errors or shown:
        items = "".join(f"<li>{esc(e)}</li>" for e in [*errors, *shown])
        parts.append(f'<div class="banner warn"><strong>Problems of the measurement</strong><ul>{items}</ul></div>')
    if files:
        links = " &middot; ".join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in files)
        parts.append(f'<p class="files">files: {links}</p>')
    parts.append(_figures(doc))
    parts.append("</header>")
    return Safe("".join(parts))


def parse_and_captures_section(result: CrawlResult) -> Safe:
    """Parse amplification, screenshot captures and the danger snapshot, when the crawl has them (issue 19)."""
    rows: list[list[object]] = []
    amp = result.parse_amplification
    if amp is not None and amp.count:
        ratios = f"p50 {amp.p50_ratio}x, p95 {amp.p95_ratio}x, max {amp.max_ratio}x"
        worst = f"{amp.worst[0].url} ({size(amp.worst[0].body_bytes)} body)" if amp.worst else " (- body)"
        skipped = f" ({count(amp.skipped)} more not measured: the reads' time share)" if amp.skipped else ""
        rows.append(["parse amplification", f"{ratios} over {count(amp.count)} callbacks{skipped}; held up to"
                     f" {size(amp.max_held_bytes)}", worst])
    shots = result.shots
    if shots is not None:
        verdicts = ", ".join(f"{count(n)} {v}" for v, n in shots.by_verdict.items())
        rows.append(["screenshot captures", f"{count(shots.captures)}: {verdicts}; {count(shots.billed)} billed,"
                     f" {size(shots.bytes_total)}", f"{count(_billed_mismatch(shots))} billed wrongly"])
    if result.danger is not None:
        rows.append(["danger snapshot", _danger_summary(result.danger), "danger.json, danger-diff.txt"])
    if not rows:
        return Safe("")
    return section("Parse, captures, danger", table(["figure", "value", "where"], rows))


def replay_copies_section(result: CrawlResult) -> Safe:
    """Responses and items of each replay copy against the original's, and the warning when copies fell short."""
    per_copy = result.replay_per_copy
    if len(per_copy) < 2:
        return Safe("")
    warning = copies_warning(per_copy, patterns=result.replay_rules, finish_reason=result.finish_reason)
    rows = [[c.copy, count(c.responses), count(c.items_yielded), count(c.items_scraped), count(c.items_dropped)]
            for c in shown_copies(per_copy)]
    rules = [[p.describe()] for p in result.replay_rules]
    body = table(["copy", "responses", "items yielded", "items through the pipelines", "items dropped"], rows)
    if rules:
        body = Safe(body + table(["the spider's URL patterns that name a recorded host"], rules))
    return section("Replay copies", body, note=per_copy_line(per_copy) + (f". WARNING: {warning}" if warning else ""))


def _billed_mismatch(shots: ShotSummary) -> int | None:
    """Captures billed wrongly (``None`` when a hand-edited report.json holds counts that cannot be added)."""
    try:
        return shots.billed_mismatch
    except (TypeError, AttributeError):
        return None


def render_html(
    doc: ReportDocument,
    samples: Sequence[Sample],
    checkpoints: Sequence[Checkpoint],
    *,
    header: Mapping[str, Any] | None = None,
    problems: Sequence[str] = (),
    files: Sequence[str] = (),
) -> str:
    """Return the whole ``report.html`` of one crawl as a string.

    ``doc`` is report.json read back (:class:`ReportDocument`); ``samples`` and ``checkpoints`` are those of
    samples.jsonl (when it has none, the checkpoints report.json keeps are drawn); ``problems`` are lines that
    could not be read; ``files`` are names to link to.
    """
    if is_browser_job(doc.result, samples):  # a browser job counts pages, not responses
        doc = replace(doc, unit="pages")
    marks = list(checkpoints) or list(doc.result.growth.checkpoints)
    status_counts = dict(sorted(doc.result.status_counts.items()))
    body = [
        _head(doc, header or {}, problems, files),
        chart_section(doc, samples, marks),
        budgets_section(doc),
        violations_section(doc),
        growth_sites_section(doc.result),
        checkpoints_section(doc, marks),
        live_objects_section(doc.result),
        counts_section("Responses by status", status_counts, ["status", "responses"], "None recorded."),
        dropped_section(doc),
        backpressure_section(doc),
        parse_and_captures_section(doc.result),
        replay_copies_section(doc.result),
        environment_section(doc, header or {}),
    ]
    return page(f"crawlmem: {doc.title}", "\n".join(body))

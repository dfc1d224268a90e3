"""Renders one crawl's ``report.html``: a self-contained page (inline SVG and CSS, no script, no network).

Pure: works from ``report.json``'s document and ``samples.jsonl``'s records, in any process.
Every string that came from a crawl (URLs, paths, source lines, exception text, test ids)
is escaped; the page also forbids scripts and remote loads in its Content-Security-Policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from .growth import heap_estimate, judged_checkpoints, unexplained_refs, warmup_responses
from .jsonl import checkpoint_from_json, is_number
from .models import Checkpoint
from .svgchart import Budget, Marker, Panel, Series, XAxis, count_tick, render_timeline, seconds_tick
from .units import format_size

COLORS = {"rss": "#0072b2", "traced": "#cc79a7", "heap": "#009e73", "scheduled": "#e69f00",
          "inflight": "#56b4e9", "active": "#7b61a8"}
SIZE_BUDGETS = {"peak_rss": "peak_rss", "rss_growth": "rss_growth", "traced_peak": "traced_peak",
                "max_active_size": "max_active_size", "jobdir_disk": "jobdir_disk"}
COUNT_BUDGETS = {"max_scheduled": "max_scheduled", "max_inflight": "max_inflight", "max_dropped": "dropped_count"}


class Safe(str):
    """Markup built here from escaped parts: inserted as is."""


def esc(value: object) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return value if isinstance(value, Safe) else escape(str(value), quote=True)


def _number(value: object) -> float | None:
    return float(value) if is_number(value) else None


def size(value: object) -> str:
    """A size for people, or ``-`` when it was not measured."""
    number = _number(value)
    return "-" if number is None else format_size(number)


def count(value: object) -> str:
    """A count with thousands separators, or ``-``."""
    number = _number(value)
    return "-" if number is None else f"{number:,.0f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, cls: str = "") -> Safe:
    """An HTML table; cells are escaped unless they are :class:`Safe`."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return Safe(f'<table class="{esc(cls)}">{thead}<tbody>{body}</tbody></table>')


def section(title: str, body: str, *, note: str = "") -> Safe:
    """A titled block of the page."""
    extra = f'<p class="note">{esc(note)}</p>' if note else ""
    anchor = "-".join(title.lower().split())
    return Safe(f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{extra}{body}</section>')


def _badge(text: str, kind: str) -> Safe:
    return Safe(f'<span class="badge {esc(kind)}">{esc(text)}</span>')


# -- the timeline -------------------------------------------------------------------------


def _at(records: Sequence[Mapping[str, Any]], x_key: str, y_key: str) -> list[tuple[float, float | None]]:
    return [(float(r[x_key]), _number(r.get(y_key))) for r in records]


def _checkpoint_title(c: Checkpoint) -> str:
    heap = heap_estimate(c)
    drained = "drained" if c.drained else "did not drain in time"
    return (f"checkpoint at {c.responses:,} responses, {c.t_seconds:.1f} s ({drained}): RSS {format_size(c.rss_bytes)},"
            f" heap {size(heap)}, scheduler {c.scheduled:,}")


def _warmup_x(total: int, samples: Sequence[Mapping[str, Any]], checkpoints: Sequence[Checkpoint], x_key: str) -> float | None:
    warm = warmup_responses(total)
    if x_key == "responses":
        return float(warm)
    times = [float(s["t_seconds"]) for s in samples if s["responses"] >= warm]
    times += [c.t_seconds for c in checkpoints if c.responses >= warm]
    return min(times, default=None)


def _budgets(budgets: Mapping[str, Any], names: Sequence[str], offset: float = 0.0) -> list[Budget]:
    found = []
    for name in names:
        value = _number(budgets.get(name))
        if value is not None:
            found.append(Budget(name, value + (offset if name == "rss_growth" else 0.0)))
    return found


def timeline(document: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], checkpoints: Sequence[Checkpoint],
             x_key: str) -> str:
    """The stacked timeline (memory, scheduler, in flight, scraper) against ``responses`` or ``t_seconds``."""
    budgets = document.get("budgets") or {}
    result = document.get("result") or {}
    cp_x = [float(c.responses if x_key == "responses" else c.t_seconds) for c in checkpoints]
    heap = Series("heap", "heap at checkpoints", COLORS["heap"], [(x, _number(heap_estimate(c))) for x, c in
                  zip(cp_x, checkpoints, strict=True)], dots=True, titles=[_checkpoint_title(c) for c in checkpoints])
    start_rss = _number(result.get("start_rss")) or 0.0
    panels = [
        Panel("Memory", "bytes", [Series("rss", "RSS", COLORS["rss"], _at(samples, x_key, "rss_bytes")),
                                  Series("traced", "traced (tracemalloc)", COLORS["traced"], _at(samples, x_key, "traced_bytes")),
                                  heap],
              _budgets(budgets, ["peak_rss", "rss_growth", "traced_peak"], start_rss)),
        Panel("Scheduler", "count", [Series("scheduled", "requests waiting", COLORS["scheduled"],
                                            _at(samples, x_key, "scheduled"))], _budgets(budgets, ["max_scheduled"])),
        Panel("In flight", "count", [Series("inflight", "downloads in flight", COLORS["inflight"],
                                            _at(samples, x_key, "inflight"))], _budgets(budgets, ["max_inflight"])),
        Panel("Scraper", "bytes", [Series("active", "active size (responses being processed)", COLORS["active"],
                                          _at(samples, x_key, "active_size_bytes"))], _budgets(budgets, ["max_active_size"])),
    ]
    total = checkpoints[-1].responses if checkpoints else int(_number(result.get("responses")) or 0)
    markers = [Marker(x, "checkpoint" if c.drained else "checkpoint undrained", _checkpoint_title(c))
               for x, c in zip(cp_x, checkpoints, strict=True)]
    warm = _warmup_x(total, samples, checkpoints, x_key) if total else None
    if warm is not None:
        markers.append(Marker(warm, "warmup", f"warm-up ends at {warmup_responses(total):,} responses: max(150, N/4)"))
    danger = result.get("danger")  # the danger snapshot (danger.json): where RSS crossed snapshot_at
    if isinstance(danger, Mapping) and is_number(danger.get(x_key)):
        markers.append(Marker(float(danger[x_key]), "danger", str(danger.get("summary") or "danger snapshot")))
    by_responses = x_key == "responses"
    axis = XAxis("responses processed" if by_responses else "seconds since the spider opened",
                 count_tick if by_responses else seconds_tick, shade_until=warm, markers=markers)
    caption = f"memory and queues of the crawl against {'responses' if by_responses else 'time'}"
    return render_timeline(panels, axis, caption=caption)


def chart_section(document: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], checkpoints: Sequence[Checkpoint]) -> Safe:
    """The timeline with its x-axis toggle (pure CSS) and legend."""
    if not samples and not checkpoints:
        return section("Timeline", '<p class="empty">No samples were recorded, so there is nothing to plot.</p>')
    total = checkpoints[-1].responses if checkpoints else 0
    warm = f"warm-up: first {warmup_responses(total):,} responses (max(150, N/4)), not judged" if total else "warm-up"
    legend = (
        f'<ul class="legend"><li><span class="swatch warmup"></span>{esc(warm)}</li>'
        '<li><span class="swatch checkpoint"></span>drained checkpoint (hover a dot for its figures)</li>'
        '<li><span class="swatch undrained"></span>checkpoint that did not drain in time</li>'
        '<li><span class="swatch budget"></span>budget</li>'
        + ('<li><span class="swatch danger"></span>danger snapshot (danger.json)</li>'
           if (document.get("result") or {}).get("danger") else "") + "</ul>"
    )
    body = (
        '<div class="chart">'
        '<input type="radio" name="xaxis" id="x-responses" checked><label for="x-responses">against responses</label>'
        '<input type="radio" name="xaxis" id="x-time"><label for="x-time">against time</label>'
        f'<div class="by-responses">{timeline(document, samples, checkpoints, "responses")}</div>'
        f'<div class="by-time">{timeline(document, samples, checkpoints, "t_seconds")}</div>'
        f"{legend}</div>"
    )
    return section("Timeline", body)


# -- the tables ---------------------------------------------------------------------------


def _measured(name: str, result: Mapping[str, Any], growth: Mapping[str, Any]) -> str:
    if name in SIZE_BUDGETS:
        return size(result.get(SIZE_BUDGETS[name]))
    if name in COUNT_BUDGETS:
        return count(result.get(COUNT_BUDGETS[name]))
    if name == "leak":
        per = _number(growth.get("per_response_bytes"))
        return f"{growth.get('verdict', '-')}" + ("" if per is None else f" ({format_size(per)}/response)")
    if name == "leak_per_response":
        per = _number(growth.get("per_response_bytes"))
        return "-" if per is None else f"{format_size(per)}/response"
    return "-"


def _limit(name: str, value: object) -> str:
    if name in SIZE_BUDGETS:
        return size(value)
    if name == "leak_per_response":
        return f"{size(value)}/response"
    if name in COUNT_BUDGETS:
        return count(value)
    return str(value)


def budgets_section(document: Mapping[str, Any]) -> Safe:
    """Each budget that was set: its limit, the measured value, kept or broken."""
    budgets = document.get("budgets") or {}
    result = document.get("result") or {}
    growth = result.get("growth") or {}
    broken = {v.get("budget"): v for v in document.get("violations") or [] if isinstance(v, Mapping)}
    rows = []
    for name, value in budgets.items():
        violation = broken.get(name)
        if violation is not None:
            status = _badge("broken", "fail") if violation.get("fails", True) else _badge("warned", "warn")
        elif name == "leak" and value == "off":
            status = _badge("not checked", "muted")
        elif name == "leak_per_response":
            status = _badge("threshold of leak", "muted")
        elif name not in SIZE_BUDGETS and name not in COUNT_BUDGETS and name != "leak":
            status = _badge("not checked", "muted")
        elif _measured(name, result, growth) == "-":
            status = _badge("not measured", "muted")
        else:
            status = _badge("kept", "pass")
        rows.append([Safe(f"<code>{esc(name)}</code>"), _limit(name, value), _measured(name, result, growth), status])
    if not rows:
        return section("Budgets", '<p class="empty">No budgets: this crawl was measured, not judged.</p>')
    return section("Budgets", table(["budget", "limit", "measured", "status"], rows, cls="budgets"))


def violations_section(document: Mapping[str, Any]) -> Safe:
    """The budgets the crawl broke, one sentence each."""
    violations = [v for v in document.get("violations") or [] if isinstance(v, Mapping)]
    if not violations:
        return section("Violations", '<p class="empty">None.</p>')
    items = "".join(
        f'<li>{_badge("fails" if v.get("fails", True) else "warns", "fail" if v.get("fails", True) else "warn")}'
        f' <code>{esc(v.get("budget", "?"))}</code>: {esc(v.get("message", ""))}</li>'
        for v in violations
    )
    return section("Violations", f'<ul class="violations">{items}</ul>')


def growth_sites_section(result: Mapping[str, Any]) -> Safe:
    """Allocation sites that grew in the traced window, with their tracebacks."""
    sites = [s for s in result.get("top_growth") or [] if isinstance(s, Mapping)]
    if not sites:
        return section("Top growth sites", '<p class="empty">No allocation site grew in every traced interval'
                       " (a traced window opens only when the checkpoints look leaky).</p>")
    rows = []
    for rank, site in enumerate(sites, 1):
        trace = "\n".join(str(line) if str(line).startswith("File ") else "    " + str(line)
                          for line in site.get("traceback") or [])
        location = Safe(f'<details><summary><code>{esc(site.get("location", "?"))}</code></summary>'
                        f"<pre>{esc(trace) or 'no traceback'}</pre></details>")
        per = _number(site.get("bytes_per_response"))
        rows.append([rank, location, "+" + size(site.get("size_diff_bytes")), f"{_number(site.get('count_diff')) or 0:+,.0f}",
                     "-" if per is None else f"{per:,.1f} B"])
    return section("Top growth sites", table(["#", "location (click for the traceback)", "size", "blocks", "per response"],
                                             rows, cls="sites"))


def checkpoints_section(result: Mapping[str, Any], checkpoints: Sequence[Checkpoint]) -> Safe:
    """The drained checkpoints the verdict was judged on."""
    if not checkpoints:
        return section("Checkpoints", '<p class="empty">No checkpoint was recorded.</p>')
    growth = result.get("growth") or {}
    judged = judged_checkpoints(checkpoints)
    judged_ids = {id(c): i for i, c in enumerate(judged)}
    deltas = list(growth.get("deltas_per_response") or [])
    warm = warmup_responses(checkpoints[-1].responses)
    rows = []
    for c in checkpoints:
        index = judged_ids.get(id(c))
        phase = "warm-up" if c.responses < warm else "judged" if index is not None else "merged"
        delta = deltas[index - 1] if index and len(deltas) == len(judged) - 1 else None
        refs = sorted(c.live_refs.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{name} {n:,}" for name, n in refs[:4]) + (f", +{len(refs) - 4} more" if len(refs) > 4 else "")
        odd = unexplained_refs(c)
        rows.append([f"{c.responses:,}", f"{c.t_seconds:.1f}", format_size(c.rss_bytes), size(heap_estimate(c)),
                     size(c.traced_bytes), f"{c.scheduled:,}", size(delta),
                     shown or "-", ", ".join(f"{k} {v:,}" for k, v in odd.items()) or "-",
                     "yes" if c.drained else Safe(_badge("no", "warn")), f"{c.cost_seconds * 1000:,.0f}", phase])
    headers = ["responses", "time (s)", "RSS", "heap", "traced", "scheduler", "growth per response (net)",
               "live Scrapy objects", "unexplained objects", "drained", "cost (ms)", "phase"]
    note = (f"signal judged: {growth.get('signal') or '-'}; rule: {growth.get('rule') or '-'}."
            " Growth per response is net of 4 KiB per request added to the scheduler.")
    return section("Checkpoints", Safe(f'<div class="scroll">{table(headers, rows, cls="checkpoints")}</div>'), note=note)


def counts_section(title: str, counts: object, headers: Sequence[str], empty: str) -> Safe:
    """A two-column table of counts by name."""
    if not isinstance(counts, Mapping) or not counts:
        return section(title, f'<p class="empty">{esc(empty)}</p>')
    return section(title, table(headers, [[k, count(v)] for k, v in counts.items()], cls="counts"))


def live_objects_section(result: Mapping[str, Any]) -> Safe:
    """Scrapy objects still alive after the crawl closed, and what holds them (gc referrer paths) when known."""
    live = result.get("live_refs")
    paths = {str(r.get("class")): r.get("path") for r in result.get("retention") or [] if isinstance(r, Mapping)}
    if not isinstance(live, Mapping) or not live:
        return section("Live Scrapy objects after close",
                       '<p class="empty">None: every Scrapy object tracked by trackref was freed.</p>')
    rows = [[name, count(n), Safe(f"<code>{esc(paths[name])}</code>") if paths.get(name) else "-"] for name, n in live.items()]
    return section("Live Scrapy objects after close", table(["class", "live", "held by"], rows, cls="counts"))


def _seconds(value: object) -> str:
    number = _number(value)
    if number is None:
        return "-"
    if number == 0:
        return "0 s"
    return f"{number * 1000:,.1f} ms" if number < 1 else f"{number:,.2f} s"


def _sizes_table(result: Mapping[str, Any]) -> str:
    sizes = result.get("response_sizes") or {}
    if not isinstance(sizes, Mapping) or not sizes.get("count"):
        return '<p class="empty">No response sizes recorded.</p>'
    rows = [["responses", count(sizes.get("count"))], ["p50", size(sizes.get("p50_bytes"))],
            ["p95", size(sizes.get("p95_bytes"))], ["p99", size(sizes.get("p99_bytes"))],
            ["max", size(sizes.get("max_bytes"))], ["total", size(sizes.get("total_bytes"))]]
    suggestion = result.get("suggested_maxsize")
    note = ""
    if isinstance(suggestion, Mapping) and _number(suggestion.get("download_maxsize")) is not None:
        limit = int(_number(suggestion.get("download_maxsize")) or 0)
        note = (f'<p class="note">Suggested <code>DOWNLOAD_MAXSIZE = {limit:,}</code> ({esc(size(limit))}:'
                f' {esc(suggestion.get("rule", ""))}); it would have dropped {esc(count(suggestion.get("would_drop")))}'
                " responses of this crawl.</p>")
    return table(["response body size (after decompression)", ""], rows, cls="counts") + note


def dropped_section(result: Mapping[str, Any]) -> Safe:
    """Responses the crawl lost, with why; DOWNLOAD_WARNSIZE warnings; the size distribution and a DOWNLOAD_MAXSIZE."""
    dropped = [d for d in result.get("dropped") or [] if isinstance(d, Mapping)]
    total = int(_number(result.get("dropped_count")) or len(dropped))
    warned = _number(result.get("warnsize_warnings"))
    summary = (f'<p class="note">{total:,} responses dropped'
               + (f", {len(dropped):,} listed" if total > len(dropped) else "")
               + ("" if warned is None else f"; {warned:,.0f} over DOWNLOAD_WARNSIZE (kept)") + ".</p>")
    if dropped:
        rows = [[Safe(f'<code class="url">{esc(d.get("url", ""))}</code>'), d.get("reason", ""), size(d.get("size_bytes"))]
                for d in dropped]
        listing = table(["URL", "reason", "size seen"], rows)
    else:
        listing = Safe('<p class="empty">None recorded.</p>')
    return section("Dropped responses", Safe(summary + listing + _sizes_table(result)))


def backpressure_section(result: Mapping[str, Any]) -> Safe:
    """Scraper backpressure, scheduler backlog, retries and download latency."""
    ratio = _number(result.get("active_size_ratio"))
    per = _number(result.get("scheduled_per_response"))
    latency = result.get("download_latency") or {}
    latency = latency if isinstance(latency, Mapping) else {}
    rows: list[list[object]] = [
        ["max active size / SCRAPER_SLOT_MAX_ACTIVE_SIZE",
         f"{size(result.get('max_active_size'))} / {size(result.get('max_active_size_limit'))}"
         + ("" if ratio is None else f" ({ratio:.0%})")],
        ["time in backout", _seconds(result.get("backout_seconds"))],
        ["max scheduled (of which on disk)", f"{count(result.get('max_scheduled'))} ({count(result.get('max_disk_scheduled'))})"],
        ["scheduler growth per response (to its peak)", "-" if per is None else f"{per:,.2f}"],
        ["retries (gave up)", f"{count(result.get('retries'))} ({count(result.get('retries_max_reached'))})"],
        ["download latency p50 / p95 / p99 / max",
         " / ".join(_seconds(latency.get(k)) for k in ("p50_seconds", "p95_seconds", "p99_seconds", "max_seconds"))],
        *_jobdir_and_media_rows(result),
    ]
    return section("Backpressure and politeness", table(["", ""], rows, cls="env"))


def _jobdir_and_media_rows(result: Mapping[str, Any]) -> list[list[object]]:
    """JOBDIR's peak disk use and the media pipelines' cache, when the crawl had them."""
    rows: list[list[object]] = []
    if _number(result.get("jobdir_disk")) is not None:
        rows.append(["JOBDIR on disk (peak)", size(result.get("jobdir_disk"))])
    media = result.get("media")
    if isinstance(media, Mapping):
        rows.append([f"media pipeline cache: peak entries ({', '.join(map(str, media.get('pipelines') or []))})",
                     f"{count(result.get('max_media_cached'))} ({count(media.get('failed_at_close'))} failures at close)"])
        for kept in media.get("retained") or []:
            if isinstance(kept, Mapping):
                rows.append([f"kept alive by failed media downloads: {count(kept.get('count'))} {kept.get('class', '?')}",
                             Safe(f'<code>{esc(kept.get("path") or "")}</code>')])
    return rows


def environment_section(document: Mapping[str, Any], header: Mapping[str, Any]) -> Safe:
    """Versions, machine and crawl settings, and Scrapy's stats."""
    env = {**(document.get("environment") or {}), **{f"stream {k}": v for k, v in header.items()}}
    body = table(["", ""], [[k, "-" if v is None else v] for k, v in env.items()], cls="env") if env else Safe("")
    stats = (document.get("result") or {}).get("stats") or {}
    if isinstance(stats, Mapping) and stats:
        body = Safe(body + "<details><summary>Scrapy stats</summary>"
                    + table(["stat", "value"], sorted(([k, v] for k, v in stats.items()), key=lambda kv: str(kv[0])))
                    + "</details>")
    return section("Environment", body or '<p class="empty">Not recorded.</p>')


# -- the page -----------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    """``9.3 s``, ``12.5 min``, ``5.6 h``."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:,.1f} h"


def _span(start: str, end: str) -> str:
    """``88.8 → 103.5 MiB`` (the unit once when both share it)."""
    unit = start.rpartition(" ")[2]
    if start != "-" and end.endswith(" " + unit):
        start = start.rpartition(" ")[0]
    return f"{start} \u2192 {end}"


def _figures(result: Mapping[str, Any]) -> Safe:
    growth = result.get("growth") or {}
    per = _number(growth.get("per_response_bytes"))
    duration = _number(result.get("duration_seconds"))
    figures = [
        ("responses", count(result.get("responses"))), ("items", count(result.get("items_scraped"))),
        ("duration", "-" if duration is None else _duration(duration)), ("peak RSS", size(result.get("peak_rss"))),
        ("RSS start \u2192 end", _span(size(result.get("start_rss")), size(result.get("end_rss")))),
        ("RSS growth", size(result.get("rss_growth"))), ("growth/response", size(per)),
        ("traced peak", size(result.get("traced_peak"))), ("max scheduled", count(result.get("max_scheduled"))),
        ("max in flight", count(result.get("max_inflight"))), ("max active size", size(result.get("max_active_size"))),
        ("finish reason", result.get("finish_reason") or "-"),
    ]
    cells = "".join(f'<div class="figure"><div class="label">{esc(k)}</div><div class="value">{esc(v)}</div></div>'
                    for k, v in figures)
    return Safe(f'<div class="figures">{cells}</div>')


def _verdict_kind(verdict: str) -> str:
    return {"steady": "pass", "retained-objects": "fail", "inconclusive": "muted"}.get(verdict, "warn")


def _head(document: Mapping[str, Any], header: Mapping[str, Any], problems: Sequence[str], files: Sequence[str]) -> Safe:
    result = document.get("result") or {}
    growth = result.get("growth") or {}
    verdict = str(growth.get("verdict") or result.get("verdict") or "unknown")
    violations = [v for v in document.get("violations") or [] if isinstance(v, Mapping)]
    failing = sum(1 for v in violations if v.get("fails", True))
    warned = len(violations) - failing
    if failing:
        outcome = _badge(f"{failing} budget{'s' if failing > 1 else ''} broken", "fail")
    elif warned:
        outcome = _badge(f"{warned} warning{'s' if warned > 1 else ''}", "warn")
    else:
        outcome = _badge("budgets kept", "pass") if document.get("budgets") else Safe("")
    title = document.get("test") or document.get("source") or result.get("spider") or header.get("spider") or "crawl"
    spider = result.get("spider") or header.get("spider") or "?"
    parts = [f'<header><p class="kicker">pytest-crawlmem report &middot; spider <code>{esc(spider)}</code></p>',
             f"<h1>{esc(title)}</h1>",
             f'<p class="verdict">{_badge(verdict, _verdict_kind(verdict))} {outcome} {esc(growth.get("reason") or "")}</p>']
    if result.get("stopped_because"):
        parts.append(f'<p class="banner warn">The crawl was stopped: {esc(result["stopped_because"])}</p>')
    if document.get("note"):
        parts.append(f'<p class="note banner">{esc(document["note"])}</p>')
    errors = [str(e) for e in result.get("errors") or []]
    shown = [p for p in problems if not any(p.endswith(e) for e in errors)]
    if errors or shown:
        items = "".join(f"<li>{esc(e)}</li>" for e in [*errors, *shown])
        parts.append(f'<div class="banner warn"><strong>Problems of the measurement</strong><ul>{items}</ul></div>')
    if files:
        links = " &middot; ".join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in files)
        parts.append(f'<p class="files">files: {links}</p>')
    parts.append(_figures(result))
    parts.append("</header>")
    return Safe("".join(parts))


def parse_and_captures_section(result: Mapping[str, Any]) -> Safe:
    """Parse amplification, screenshot captures and the danger snapshot, when the crawl has them (issue 19)."""
    rows: list[list[object]] = []
    amp = result.get("parse_amplification")
    if isinstance(amp, Mapping) and amp.get("count"):
        worst = (amp.get("worst") or [{}])[0]
        ratios = f"p50 {amp.get('p50_ratio')}x, p95 {amp.get('p95_ratio')}x, max {amp.get('max_ratio')}x"
        held = f"held up to {size(amp.get('max_held_bytes'))}"
        rows.append(["parse amplification", f"{ratios} over {count(amp.get('count'))} callbacks; {held}",
                     f"{worst.get('url', '')} ({size(worst.get('body_bytes'))} body)"])
    shots = result.get("shots")
    if isinstance(shots, Mapping):
        verdicts = ", ".join(f"{count(n)} {v}" for v, n in (shots.get("by_verdict") or {}).items())
        rows.append(["screenshot captures", f"{count(shots.get('captures'))}: {verdicts}; {count(shots.get('billed'))} billed,"
                     f" {size(shots.get('bytes_total'))}", f"{count(shots.get('billed_mismatch'))} billed wrongly"])
    danger = result.get("danger")
    if isinstance(danger, Mapping):
        rows.append(["danger snapshot", str(danger.get("summary", "")), "danger.json, danger-diff.txt"])
    if not rows:
        return Safe("")
    return section("Parse, captures, danger", table(["figure", "value", "where"], rows))


def render_html(
    document: Mapping[str, Any],
    samples: Sequence[Mapping[str, Any]],
    checkpoints: Sequence[Mapping[str, Any]],
    *,
    header: Mapping[str, Any] | None = None,
    problems: Sequence[str] = (),
    files: Sequence[str] = (),
) -> str:
    """Return the whole ``report.html`` of one crawl as a string.

    ``document`` is report.json's content; ``samples`` and ``checkpoints`` are the records
    of samples.jsonl (as read by :func:`pytest_crawlmem.jsonl.read_samples_jsonl`);
    ``problems`` are lines that could not be read; ``files`` are names to link to.
    """
    result = document.get("result") or {}
    records = list(checkpoints) or list((result.get("growth") or {}).get("checkpoints") or [])
    marks = [checkpoint_from_json(c) for c in records]
    title = document.get("test") or document.get("source") or result.get("spider") or "crawl"
    body = [
        _head(document, header or {}, problems, files),
        chart_section(document, samples, marks),
        budgets_section(document),
        violations_section(document),
        growth_sites_section(result),
        checkpoints_section(result, marks),
        live_objects_section(result),
        counts_section("Responses by status", result.get("status_counts"), ["status", "responses"], "None recorded."),
        dropped_section(result),
        backpressure_section(result),
        parse_and_captures_section(result),
        environment_section(document, header or {}),
    ]
    return page(f"crawlmem: {title}", "\n".join(body))


def page(title: str, body: str) -> str:
    """The document around ``body``: no script, nothing loaded from anywhere."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style></head>\n<body><main>\n{body}\n</main></body></html>\n"
    )

CSS = """
:root { --ink:#1d2430; --muted:#5f6b7a; --line:#dde3ea; --bg:#f6f8fa; --pass:#1e7d3a; --fail:#b42318; --warn:#a15c00; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
       font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width:1180px; margin:0 auto; padding:20px 24px 48px; }
header, section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px 20px; margin-bottom:16px; }
h1 { font-size:20px; margin:2px 0 8px; word-break:break-all; }
h2 { font-size:16px; margin:0 0 10px; }
.kicker { margin:0; color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.verdict { font-size:15px; margin:8px 0; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; color:#fff;
         vertical-align:1px; }
.badge.pass { background:var(--pass); } .badge.fail { background:var(--fail); } .badge.warn { background:var(--warn); }
.badge.muted { background:#7a8594; }
.banner { background:#fff7e6; border:1px solid #f0c36d; border-radius:6px; padding:8px 12px; }
.banner ul { margin:4px 0 0; padding-left:20px; }
.note { color:var(--muted); margin:0 0 8px; }
.files { color:var(--muted); font-size:13px; }
.figures { display:grid; grid-template-columns:repeat(6, 1fr); gap:8px; margin-top:12px; }
.figure { background:var(--bg); border-radius:6px; padding:6px 10px; }
.figure .label { color:var(--muted); font-size:11px; text-transform:uppercase; letter-spacing:.03em; }
.figure .value { font-size:15px; font-weight:600; font-variant-numeric:tabular-nums; }
table { border-collapse:collapse; width:100%; font-variant-numeric:tabular-nums; }
th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:12px; }
table.checkpoints td { font-size:12.5px; white-space:nowrap; padding:5px 6px; }
table.checkpoints th { padding:5px 6px; }
table.checkpoints td:nth-child(8), table.checkpoints td:nth-child(9) { white-space:normal; }
.scroll { overflow-x:auto; }
table.env, table.counts { width:auto; min-width:320px; }
code { font:12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; word-break:break-all; }
pre { background:var(--bg); padding:8px 10px; border-radius:6px; overflow-x:auto; font-size:12px; white-space:pre-wrap; }
details summary { cursor:pointer; }
.empty { color:var(--muted); margin:0; }
.violations { margin:0; padding-left:18px; }
.chart > input { position:absolute; opacity:0; }
.chart > label { display:inline-block; padding:3px 12px; border:1px solid var(--line); cursor:pointer; font-size:13px;
                 margin-right:-1px; }
.chart > label:first-of-type { border-radius:6px 0 0 6px; } .chart > label:last-of-type { border-radius:0 6px 6px 0; }
.chart > input:checked + label { background:var(--ink); color:#fff; border-color:var(--ink); }
.by-time { display:none; }
#x-time:checked ~ .by-time { display:block; } #x-time:checked ~ .by-responses { display:none; }
svg.timeline { width:100%; height:auto; display:block; margin-top:8px; font-family:system-ui, sans-serif; }
svg .panel-title { font-size:13px; font-weight:600; fill:var(--ink); }
svg .legend, svg .tick, svg .axis-label { font-size:11px; fill:var(--muted); }
svg .axis-label { font-size:12px; }
svg .plot { fill:#fff; stroke:var(--line); }
svg .grid { stroke:#eef1f4; }
svg .axis { stroke:#9aa5b1; }
svg .warmup { fill:#e9edf2; opacity:.7; }
svg .warmup-label { font-size:11px; fill:#7a8594; }
svg .marker { stroke:#9aa5b1; stroke-width:1; }
svg .marker.undrained { stroke:#e69f00; stroke-dasharray:4 3; }
svg .marker.warmup { stroke:#5f6b7a; stroke-dasharray:5 3; stroke-width:1.5; }
svg .marker.danger { stroke:#d55e00; stroke-width:2; }
.swatch.danger { border-left:2px solid #d55e00; width:1px; height:14px; margin:0 10px 0 8px; vertical-align:-3px; }
svg polyline.series { stroke-width:1.8; stroke-linejoin:round; }
svg .budget { stroke-dasharray:6 4; stroke-width:1.5; }
svg .budget-label { font-size:11px; fill:#c0392b; font-weight:600; }
svg .budget-note { font-size:10px; fill:#c0392b; }
ul.legend { list-style:none; padding:0; margin:6px 0 0; display:flex; gap:18px; flex-wrap:wrap; color:var(--muted);
            font-size:12px; }
.swatch { display:inline-block; width:18px; height:10px; margin-right:6px; vertical-align:-1px; }
.swatch.warmup { background:#e9edf2; border:1px solid #c9d1da; }
.swatch.checkpoint { border-left:1px solid #9aa5b1; width:1px; height:14px; margin:0 10px 0 8px; vertical-align:-3px; }
.swatch.undrained { border-left:2px dashed #e69f00; width:1px; height:14px; margin:0 10px 0 8px; vertical-align:-3px; }
.swatch.budget { border-top:2px dashed #c0392b; height:2px; vertical-align:3px; }
@media (max-width: 900px) { .figures { grid-template-columns:repeat(3, 1fr); } }
"""

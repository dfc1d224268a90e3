"""Budgets of the ``crawl_memory`` marker: parsing, precedence and checks (pure: no pytest, no Scrapy).

Each budget is one :class:`BudgetSpec` row of :data:`SPECS`: its parser, its help, the figure it is checked against
and how (``check``), and how report.html shows its limit, figure and status (``show_limit``, ``show_measured``,
``status``). ``check_budgets``, report.html, the ``--markers`` help and the docs' table all read the rows.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

from pytest_crawlmem.core import stops, verdicts
from pytest_crawlmem.core.declared import describe_limit, parse_expected_growth
from pytest_crawlmem.core.defaults import DEFAULT_LEAK_PER_RESPONSE
from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.core.tolerances import parse_compare_fail
from pytest_crawlmem.core.units import (
    UnitError,
    format_duration,
    format_size,
    parse_count,
    parse_ratio,
    parse_seconds,
    parse_size,
)


class _Ledger(Protocol):
    def describe_lost(self) -> str: ...


class ClusterFigures(Protocol):
    """What the cluster checks read of a crawl_cluster run (``core.cluster.ClusterResult``, which builds on this module)."""

    @property
    def lost(self) -> int: ...
    @property
    def ledger(self) -> _Ledger: ...
    @property
    def redis_peak_memory(self) -> int: ...
    @property
    def max_queue(self) -> int: ...
    @property
    def max_dupefilter(self) -> int: ...
    @property
    def cluster_rss(self) -> int: ...
    @property
    def workers(self) -> Sequence[CrawlResult]: ...
    @property
    def verdict(self) -> str: ...
    @property
    def reason(self) -> str: ...

LEAK_MODES = ("fail", "warn", "off")
LEAK_VERDICTS = verdicts.LEAKS


class BudgetError(ValueError):
    """A budget name or value that is not valid; the message names it and where it came from."""


def _parse_leak(value: object, *, source: str) -> str:
    if isinstance(value, str) and value in LEAK_MODES:
        return value
    raise UnitError(f"invalid leak mode {value!r} for {source}: expected one of 'fail', 'warn', 'off'")


#: How a budget's value is written and compared: each kind has one parser, one docs wording and one report format.
KINDS = ("size", "count", "seconds", "ratio", "mode", "tolerances", "declared")

#: How a row's checked figure reads in report.html: by its kind, ``reached`` (a threshold crossed or not: the figure
#: is where), ``verdict`` (the verdict, then the growth per unit), ``per-unit`` (a size per response).
SHOWS = ("kind", "reached", "verdict", "per-unit")

#: A budget's check: the violation of ``result`` against this row's limit in ``budgets`` (``None``: kept).
Check = Callable[["BudgetSpec", "Budgets", CrawlResult], "Violation | None"]
#: The same for a crawl_cluster run as a whole (``check_cluster``).
ClusterCheck = Callable[["BudgetSpec", "Budgets", "ClusterFigures"], "Violation | None"]


def _number(value: object) -> float | None:
    """A finite int or float (not a bool) as a float, else ``None`` (what report.json may hold instead)."""
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return float(value)
    return None


@dataclass(frozen=True)
class BudgetSpec:
    """One budget, in one row: its name, kind and parser, what it limits, the figure it is checked against and how,
    and how report.html renders it.

    ``figure`` is the CrawlResult attribute (a dotted path: ``peaks.max_inflight``) compared with the limit, ``label``
    how messages name it, and ``report`` where report.json's ``result`` keeps it (the figure's path unless given:
    ``max_scheduled`` is ``peaks.max_scheduled``; ``()`` when it has no one figure). ``check`` finds its violation
    (size and count rows with a figure: the figure over the limit); ``cause`` is why it breaks and what to change.
    """

    name: str
    parse: Callable[..., object]
    help: str
    enforced: bool = True
    kind: str = "mode"
    figure: str | None = None
    label: str = ""
    report: tuple[str, ...] | None = None
    positive: bool = False  # 0 is refused too (a tolerance of nothing)
    check: Check | None = None
    cluster: ClusterCheck | None = None  # its check on a crawl_cluster run as a whole
    cause: str = ""
    stop: str = ""  # the finish reason of a crawl this hard limit stopped (core.stops)
    danger: bool = False  # its violation carries the danger snapshot's summary
    shows: str = "kind"  # one of SHOWS
    kept: tuple[str, str] = ("kept", "pass")  # report.html's status when set and not broken: text, style
    off: str | None = None  # the value that turns its check off (report.html: "not checked")
    panel: str = ""  # the timeline panel its limit is drawn on (report.html), "" for none
    from_start: bool = False  # drawn at the start RSS plus the limit (a growth)

    @property
    def report_path(self) -> tuple[str, ...]:
        """Keys leading to the checked figure in report.json's ``result``, and attributes of the CrawlResult (``()``: none)."""
        if self.report is not None:
            return self.report
        return tuple(CrawlResult.ALIASES.get(self.figure, self.figure).split(".")) if self.figure else ()

    def measure(self, result: CrawlResult) -> object:
        """The figure of ``result`` this budget is checked against (``None`` when not measured)."""
        value: object = result
        for step in (self.figure or self.name).split("."):
            value = getattr(value, step, None)
        return value

    def show_limit(self, value: object) -> str:
        """The limit as report.html shows it."""
        number = _number(value)
        if self.kind == "ratio":
            return f"{value}x"
        if self.kind == "declared":
            return describe_limit(value)
        if self.kind not in ("size", "count", "seconds"):
            return str(value) or "-"  # a hand-edited report's empty text shows as no limit, never an empty cell
        if number is None:
            return "-"
        text = format_size(number) if self.kind == "size" else format_duration(number) if self.kind == "seconds" else (
            f"{number:,.0f}")
        return text + ("/response" if self.shows == "per-unit" else "")

    def show_measured(self, value: object, *, unit: str = "responses", per_response: object = None) -> str:
        """The checked figure (``value``: what ``report_path`` reads) as report.html shows it; ``-``: not measured.

        A ``verdict`` row shows the growth ``per_response`` (per ``unit``) after the verdict.
        """
        if self.shows == "verdict":
            per = _number(per_response)
            return (f"{value}" or "-") + ("" if per is None else f" ({format_size(per)}/{unit[:-1]})")
        number = _number(value)
        if self.shows == "reached":
            return "not reached" if value is None else f"reached ({'-' if number is None else format_size(number)})"
        if not self.report_path or number is None:
            return "-"
        if self.shows == "per-unit":
            return f"{format_size(number)}/{unit[:-1]}"
        if self.kind == "ratio":
            return f"{number:.1f}x"
        if self.kind == "seconds":
            return format_duration(number)
        if self.kind == "size":
            return format_size(number) + (f" {self.label}" if self.stop and number else "")
        return f"{number:,.0f}"

    def status(self, value: object, measured: str, violation: Violation | None) -> tuple[str, str]:
        """report.html's status of this budget, set to ``value``: text and style (pass, fail, warn, muted)."""
        if violation is not None:
            return ("broken", "fail") if violation.fails else ("warned", "warn")
        if self.off is not None and value == self.off:
            return f"not checked ({self.name}={value!r})", "muted"
        if self.kept != ("kept", "pass") or measured != "-":
            return self.kept
        return "kept: not reached (nothing measured)", "pass"


@dataclass(frozen=True)
class Violation:
    """A budget the crawl broke, with a one-sentence message naming both numbers."""

    budget: str
    measured: float
    limit: float
    message: str
    fails: bool = True

    @property
    def of_verdict(self) -> bool:
        """The growth verdict's own violation (its fix is the verdict's, not a row's ``cause``)."""
        spec = SPECS.get(self.budget)
        return spec is not None and spec.shows == "verdict"


def _over(spec: BudgetSpec, budgets: Budgets, result: CrawlResult) -> Violation | None:
    """A size or count budget: the figure its row names, of ``result``, over the test's limit."""
    limit, measured = getattr(budgets, spec.name), spec.measure(result)
    if limit is None or measured is None or measured <= limit:
        return None
    if spec.kind == "size":
        message = f"{spec.label} was {format_size(measured)}, over the budget {spec.name}={format_size(limit)}"  # type: ignore[arg-type]
    else:
        message = f"{spec.label} reached {measured:,}, over the budget {spec.name}={limit:,}"
    return Violation(spec.name, measured, limit, message + (f": {spec.cause}" if spec.cause else ""))  # type: ignore[arg-type]


def _peak_check(spec: BudgetSpec, budgets: Budgets, result: CrawlResult) -> Violation | None:
    """``peak_rss``: the peak over the limit, with where the process started; over it before the crawl, said so."""
    violation = _over(spec, budgets, result)
    if violation is None:
        return None
    if result.start_rss <= violation.limit:
        start, added = format_size(result.start_rss), format_size(result.peak_rss_above_start)
        return replace(violation, message=f"{violation.message} ({added} above the {start} the process held when the"
                                          " crawl began)")
    return replace(violation, message=f"{violation.message}: {_over_at_start(result)}")


def _over_at_start(result: CrawlResult) -> str:
    """Where the process stood before the crawl began, for a limit it was already over."""
    held = ("the interpreter, Scrapy and the project's imports: the budget is below what this crawl needs before it"
            " starts" if result.isolated else "what pytest, Scrapy and earlier tests in this process hold; use"
            " --crawlmem-isolate / crawl(isolate=True) to measure the crawl in a fresh process")
    where = "the crawl's fresh process" if result.isolated else "the process"
    return (f"{where} was already at {format_size(result.start_rss)} before the crawl began ({held}); the crawl itself"
            f" added {format_size(result.peak_rss_above_start)} above its start")


def _growth_check(spec: BudgetSpec, budgets: Budgets, result: CrawlResult) -> Violation | None:
    """``rss_growth``: the growth over the limit, with the RSS it started from and ended at."""
    violation = _over(spec, budgets, result)
    if violation is None:
        return None
    first = ("; this was the first crawl in this pytest process: what the project loads once and keeps (imports,"
             " module-level caches of its pipelines and middlewares) counts in its growth and in no later crawl's, so"
             " whichever test runs first pays it; use --crawlmem-isolate / crawl(isolate=True) to give every crawl the"
             " same start" if result.earlier_crawls == 0 else "")
    from pytest_crawlmem.core.warmup import result_warmup_note  # warmup builds on growth, which builds on these budgets' records

    warm = result_warmup_note(result)
    return replace(violation, message=f"{violation.message} (from {format_size(result.start_rss)} when the crawl"
                                      f" began to {format_size(result.end_rss)} at its end{', ' + warm if warm else ''})"
                                      f"{first}")


def _started_over(violation: Violation, result: CrawlResult) -> bool:
    """A ``peak_rss`` (or ``kill_at``) breach the process was already past before the crawl began: no line caused it."""
    return result.start_rss > violation.limit


def _stop_check(spec: BudgetSpec, budgets: Budgets, result: CrawlResult) -> Violation | None:
    """The harness stopped the crawl because it hit this hard limit (its row's ``stop`` reason)."""
    limit = getattr(budgets, spec.name)
    if limit is None or result.finish_reason != spec.stop:
        return None
    limit_text = format_size(limit) if spec.kind == "size" else f"{limit:g} s"
    message = (
        f"{result.stopped_because or spec.name}={limit_text}: the crawl was stopped after {result.responses:,} responses"
        f" and {result.duration_seconds:.1f} s (peak RSS {format_size(result.peak_rss)})"
    )
    if spec.kind == "size" and result.start_rss > limit:
        message += f": {_over_at_start(result)}"
    return Violation(spec.name, spec.measure(result), limit, message)  # type: ignore[arg-type]


def _amplification_check(limit: float | None, result: CrawlResult) -> Violation | None:
    """A callback held more than ``max_amplification`` times its response body while parsing."""
    amp = result.parse_amplification
    if limit is None or amp is None or amp.max_ratio is None or amp.max_ratio <= limit:
        return None
    worst = amp.worst[0] if amp.worst else None
    where = (f": {worst.url} ({format_size(worst.body_bytes)} body) held {format_size(worst.held_bytes)} while its callback"
             " parsed" if worst else "")
    over = sum(1 for page in amp.worst if page.ratio > limit)
    message = (f"parse amplification reached {amp.max_ratio:.1f}x, over the budget max_amplification={limit:g}x{where}"
               f" (p50 {amp.p50_ratio:.1f}x, p95 {amp.p95_ratio:.1f}x over {amp.count:,} callbacks; {over:,} of the"
               f" {len(amp.worst):,} worst pages over)")
    return Violation("max_amplification", amp.max_ratio, limit, message)


def _billing_check(limit: int | None, result: CrawlResult) -> Violation | None:
    """More screenshot captures were billed wrongly (billed and not clean, or clean and not billed) than allowed."""
    shots = result.shots
    if limit is None or shots is None or shots.billed_mismatch <= limit:
        return None
    from pytest_crawlmem.core.shots import describe_mismatch  # pure, reads only the summary

    message = (f"{shots.billed_mismatch:,} of {shots.captures:,} screenshot captures were billed wrongly, over the budget"
               f" billed_mismatch={limit:,}: {describe_mismatch(shots)}")
    return Violation("billed_mismatch", shots.billed_mismatch, limit, message)


def _dropped_check(limit: int | None, result: CrawlResult, shown: int = 3) -> Violation | None:
    """More responses were dropped (size limits) than ``max_dropped`` allows; names the first few."""
    measured = max(result.dropped_count, len(result.dropped))
    if limit is None or measured <= limit:
        return None
    urls = ", ".join(f"{d.url} ({d.reason}{f', {format_size(d.size_bytes)}' if d.size_bytes is not None else ''})"
                     for d in result.dropped[:shown])
    more = measured - min(shown, len(result.dropped))
    tail = f" and {more:,} more" if more > 0 else ""
    message = f"{measured:,} responses were dropped, over the budget max_dropped={limit:,}: {urls}{tail}"
    return Violation("max_dropped", measured, limit, message)


def _replay_misses_check(limit: int | None, result: CrawlResult, shown: int = 3) -> Violation | None:
    """More requests of a replayed crawl missed the recording than ``max_replay_misses`` allows; names the first few."""
    if limit is None or result.replay_misses <= limit:
        return None
    urls = ", ".join(result.replay_missed_urls[:shown])
    more = result.replay_misses - min(shown, len(result.replay_missed_urls))
    message = (f"{result.replay_misses:,} requests were not in the replay recording (answered 404), over the budget"
               f" max_replay_misses={limit:,}: {urls}" + (f" and {more:,} more" if more > 0 else ""))
    return Violation("max_replay_misses", result.replay_misses, limit, message)


def _unclosed_pages_check(result: CrawlResult) -> Violation | None:
    """Pages handed to callbacks were never closed: always a failure (the crawl hangs or holds ~20-40 MiB each)."""
    if result.finish_reason == stops.UNCLOSED_PAGES:
        return Violation("unclosed_pages", result.browser.unclosed_pages if result.browser else 0, 0, result.stopped_because)
    left = result.browser.unclosed_pages if result.browser else 0
    if not left:
        return None
    message = (
        f"{left:,} pages handed to callbacks (playwright_include_page=True) were still open when the spider closed:"
        " close each page in its callback (`await page.close()`) and in the errback"
    )
    return Violation("unclosed_pages", left, 0, message)


def _jobdir_check(limit: int | None, result: CrawlResult) -> Violation | None:
    """JOBDIR took more disk than ``jobdir_disk`` allows at some sample (a crawl without JOBDIR is not checked)."""
    measured = result.jobdir_disk
    if limit is None or measured is None or measured <= limit:
        return None
    message = (
        f"JOBDIR grew to {format_size(measured)} on disk, over the budget jobdir_disk={format_size(limit)}"
        " (its disk request queues hold every pending request; requests.seen, a fingerprint per request ever scheduled)"
    )
    return Violation("jobdir_disk", measured, limit, message)


def _leak_check(spec: BudgetSpec, budgets: Budgets, result: CrawlResult) -> Violation | None:
    """A leak verdict fails, warns or is ignored as ``leak`` says; ``leak="fail"`` warns when it could not judge."""
    growth = result.growth
    # never a silent pass: a warning that says why (a crawl without responses or stopped by a hard limit says so already)
    if budgets.leak == "fail" and growth.verdict == verdicts.INCONCLUSIVE and result.responses and not result.stopped_because:
        message = f"leak=\"fail\" could not judge this crawl's memory: {growth.reason}"
        return Violation(spec.name, growth.per_response_bytes or 0.0, 0.0, message, fails=False)
    if budgets.leak == "off" or growth.verdict not in LEAK_VERDICTS:
        return None
    per_response = growth.per_response_bytes or 0.0
    limit = float(budgets.leak_per_response or DEFAULT_LEAK_PER_RESPONSE)
    return Violation(spec.name, per_response, limit, f"{growth.verdict}: {growth.reason}", fails=budgets.leak == "fail")


#: A crawl with fewer responses than this measured nothing: it fails unless ``min_responses`` says otherwise.
DEFAULT_MIN_RESPONSES = 1


def nothing_measured(minimum: int | None, result: CrawlResult) -> Violation | None:
    """The crawl got fewer responses than ``minimum`` (default 1): say so, with what went wrong instead.

    A crawl the harness stopped (kill_at, timeout, pages never closed) is not judged here: its own budget says why.
    """
    limit = DEFAULT_MIN_RESPONSES if minimum is None else minimum
    if result.responses >= limit or result.stopped_because:
        return None
    prefix = "downloader/exception_type_count/"
    errors = {k[len(prefix):].rsplit(".", 1)[-1]: v for k, v in result.stats.items() if k.startswith(prefix)}
    why = ", ".join(f"{count:,} {name}" for name, count in sorted(errors.items())) or "no download error"
    message = (
        f"the crawl got {result.responses:,} responses, fewer than min_responses={limit:,}, so nothing was measured"
        f" (download errors: {why}; finish reason {result.finish_reason or 'unknown'!r}); check the start URLs, or"
        " set crawl_memory(min_responses=0) if a crawl without responses is what this test expects"
    )
    return Violation("min_responses", result.responses, limit, message)


def only_errors(result: CrawlResult) -> str | None:
    """A sentence when every response of the crawl had an HTTP error status (its figures describe error pages)."""
    statuses = result.status_counts
    if not statuses or any(status < 400 for status in statuses):
        return None
    counts = ", ".join(f"{count:,} x {status}" for status, count in sorted(statuses.items()))
    return (
        f"every response of the crawl was an HTTP error ({counts}): its memory figures describe error pages,"
        " not the pages the spider is written for"
    )


def _lost_check(spec: BudgetSpec, budgets: Budgets, result: ClusterFigures) -> Violation | None:
    """Requests scheduled in the cluster and never processed, over ``lost``: the ledger names them."""
    if budgets.lost is None or result.lost <= budgets.lost:
        return None
    message = (f"{result.lost:,} {'request was' if result.lost == 1 else 'requests were'} lost, over the budget"
               f" lost={budgets.lost:,}: {result.ledger.describe_lost()}")
    return Violation(spec.name, result.lost, budgets.lost, message)


def _redis_memory_check(spec: BudgetSpec, budgets: Budgets, result: ClusterFigures) -> Violation | None:
    """Redis's peak used_memory over ``redis_memory``, with the queue and dupefilter at their peaks."""
    if budgets.redis_memory is None or result.redis_peak_memory <= budgets.redis_memory:
        return None
    message = (f"Redis used {format_size(result.redis_peak_memory)} at its peak (queue up to {result.max_queue:,}"
               f" requests, dupefilter up to {result.max_dupefilter:,} fingerprints), over the budget"
               f" redis_memory={format_size(budgets.redis_memory)}")
    return Violation(spec.name, result.redis_peak_memory, budgets.redis_memory, message)


def _cluster_rss_check(spec: BudgetSpec, budgets: Budgets, result: ClusterFigures) -> Violation | None:
    """The workers' peak RSS summed over ``cluster_rss``, each worker's peak named."""
    if budgets.cluster_rss is None or result.cluster_rss <= budgets.cluster_rss:
        return None
    peaks = ", ".join(f"worker {i} {format_size(w.peak_rss)}" for i, w in enumerate(result.workers))
    message = (f"the workers' peak RSS summed to {format_size(result.cluster_rss)} ({peaks}), over the budget"
               f" cluster_rss={format_size(budgets.cluster_rss)}")
    return Violation(spec.name, result.cluster_rss, budgets.cluster_rss, message)


def _cluster_leak_check(spec: BudgetSpec, budgets: Budgets, result: ClusterFigures) -> Violation | None:
    """``leak="fail"`` that could judge no worker: a warning, said once for the cluster (never a silent pass)."""
    if budgets.leak != "fail" or result.verdict != verdicts.INCONCLUSIVE:
        return None
    return Violation(spec.name, 0.0, 0.0, f"leak=\"fail\" could not judge any worker's memory; {result.reason}",
                     fails=False)


def _cluster_queue_check(spec: BudgetSpec, budgets: Budgets, result: ClusterFigures) -> Violation | None:
    """``max_scheduled`` on the cluster's shared Redis queue."""
    if budgets.max_scheduled is None or result.max_queue <= budgets.max_scheduled:
        return None
    message = (f"the shared Redis queue reached {result.max_queue:,} requests, over the budget"
               f" max_scheduled={budgets.max_scheduled:,}")
    return Violation(spec.name, result.max_queue, budgets.max_scheduled, message)


def _row(name: str, kind: str, help: str, figure: str | None = None, label: str = "", **more: object) -> BudgetSpec:
    """A budget row whose parser is its kind's; a size or count row with a figure is checked on it (``_over``)."""
    if "check" not in more and figure is not None and kind in ("size", "count"):
        more["check"] = _over
    return BudgetSpec(name, _PARSERS[kind], help, kind=kind, figure=figure, label=label, **more)  # type: ignore[arg-type]


_PARSERS: dict[str, Callable[..., object]] = {
    "size": parse_size, "count": parse_count, "seconds": parse_seconds, "ratio": parse_ratio, "mode": _parse_leak,
    "tolerances": parse_compare_fail, "declared": parse_expected_growth,
}

#: Kept, for report.html, by the rows whose status is not "kept".
_NOT_STOPPED = ("kept: the crawl was not stopped", "pass")


def _checked(check: Callable[[Any, CrawlResult], Violation | None]) -> Check:
    """A row's check from a function of its limit and the result."""
    return lambda spec, budgets, result: check(getattr(budgets, spec.name), result)


def _budget(kind: str, help: str, figure: str | None = None, label: str = "", *, default: object = None,
            **more: object) -> Any:
    """A field of :class:`Budgets` (``None``: not set, unless ``default``) that carries its :class:`BudgetSpec` row:
    the arguments of :func:`_row` but the name, which is the field's."""
    return field(default=default, metadata={"row": (kind, help, figure, label, more)})


@dataclass(frozen=True)
class Budgets:
    """Resolved budgets of one test (``None`` = not set); sizes in bytes, time in seconds.

    Each field is one budget, declared with its row (:data:`SPECS` is read from them): adding a budget is adding a
    field here, with its figure if it is a new one. The order of the fields is the order ``check_budgets`` (and
    ``check_cluster``) report violations in.
    """

    peak_rss: int | None = _budget("size", "highest RSS of the process during the crawl (exact, from VmHWM)", "peak_rss",
                                   "peak RSS", danger=True, panel="rss", check=_peak_check)
    rss_growth: int | None = _budget("size", "RSS at the end of the crawl minus RSS at its start", "rss_growth",
                                     "RSS growth", panel="rss", from_start=True, check=_growth_check)
    traced_peak: int | None = _budget("size", "peak of Python allocations traced by tracemalloc during the crawl",
                                      "traced_peak", "traced peak", panel="traced")
    max_scheduled: int | None = _budget(
        "count", "most requests waiting in the scheduler", "max_scheduled", "the scheduler queue", panel="scheduled",
        cause="the spider discovers requests faster than they are downloaded, and the scheduler keeps every one in"
        " memory; fix: yield requests lazily from start() as they are needed, keep the queue on disk with JOBDIR, or"
        " bound the frontier (DEPTH_LIMIT, CLOSESPIDER_ITEMCOUNT)", cluster=_cluster_queue_check)
    max_active_size: int | None = _budget(
        "size", "largest scraper active_size (response bytes being processed)", "max_active_size",
        "scraper active size", panel="active", cause="responses pile up behind slow callbacks or pipelines (Scrapy"
        " backs out softly at SCRAPER_SLOT_MAX_ACTIVE_SIZE); fix: make callbacks and pipelines cheaper, or lower"
        " CONCURRENT_REQUESTS")
    max_inflight: int | None = _budget(
        "count", "most downloads in flight at once", "max_inflight", "downloads in flight", panel="inflight",
        cause="CONCURRENT_REQUESTS (and CONCURRENT_REQUESTS_PER_DOMAIN) allow this many downloads at once, each"
        " buffering its body; fix: lower them, or raise the budget if the memory is affordable")
    max_dropped: int | None = _budget("count", "most responses dropped (size limits, failed media)", "dropped_count",
                                      "dropped responses", check=_checked(_dropped_check))
    jobdir_disk: int | None = _budget("size", "most disk used by JOBDIR (file sizes summed; crawls without JOBDIR pass)",
                                      "jobdir_disk", "JOBDIR on disk", check=_checked(_jobdir_check))
    browser_pss: int | None = _budget("size", "peak summed PSS of the browser process tree (Playwright driver and"
                                      " Chromium)", "browser_pss", "the browser tree's peak PSS",
                                      report=("browser", "peak_pss_bytes"), panel="pss")
    max_open_pages: int | None = _budget("count", "most browser pages open at once", "max_open_pages",
                                         "open browser pages", report=("browser", "max_open_pages"), panel="pages")
    max_open_fds: int | None = _budget("count", "most file descriptors the crawl process held open at once (sampled)",
                                       "peaks.max_open_fds", "open file descriptors")
    max_replay_misses: int | None = _budget("count", "most requests a replayed crawl found nowhere in its recording"
                                            " (404)", "replay_misses", "replay misses",
                                            check=_checked(_replay_misses_check))
    kill_at: int | None = _budget("size", "hard ceiling: RSS (in a browser crawl, plus the browser tree's PSS) at which"
                                  " the crawl is stopped at once (the test fails)", "peak_rss", "peak RSS",
                                  stop=stops.KILL_AT, check=_stop_check, danger=True, kept=_NOT_STOPPED, panel="rss")
    timeout: float | None = _budget("seconds", "seconds after which the crawl is stopped (the test fails)",
                                    "duration_seconds", "duration", stop=stops.TIMEOUT, check=_stop_check,
                                    kept=_NOT_STOPPED)
    leak_per_response: int | None = _budget("size", "retained growth per response tolerated before a leak verdict",
                                            report=("growth", "per_response_bytes"), positive=True, shows="per-unit",
                                            kept=("threshold of leak", "muted"))
    leak: str = _budget("mode", "what a leak verdict does: 'fail' (default), 'warn' or 'off'", default="fail",
                        report=("verdict",), check=_leak_check, cluster=_cluster_leak_check, shows="verdict", off="off")
    expected_growth: tuple[tuple[str, int], ...] | None = _budget(
        "declared", "holders whose growth is by design, as a verdict names them, each with the growth per response it"
        " may have: {'spider.seen_ids': '600 B'} (ini: spider.seen_ids=600 B, ...); set aside from the leak judgement"
        " up to it, a leak past it", report=(), kept=("declared by design", "muted"))
    min_responses: int | None = _budget("count", "fewest responses a crawl must get (default 1: a crawl that measured"
                                        " nothing fails; 0 lets it pass)", "responses", "responses",
                                        check=_checked(nothing_measured))
    lost: int | None = _budget("count", "crawl_cluster: most requests scheduled and never processed", report=(),
                               cluster=_lost_check)
    redis_memory: int | None = _budget("size", "crawl_cluster: peak Redis used_memory (queue, dupefilter; the ledger"
                                       " left out)", report=(), cluster=_redis_memory_check)
    cluster_rss: int | None = _budget("size", "crawl_cluster: the workers' peak RSS summed", report=(),
                                      cluster=_cluster_rss_check)
    compare_fail: str | None = _budget("tolerances", "tolerances against --crawlmem-compare's baseline, e.g."
                                       " 'peak_rss:20%'", kept=("tolerance of --crawlmem-compare", "muted"))
    snapshot_at: int | None = _budget("size", "RSS at which the danger snapshot is taken once (danger.json; default 80%"
                                      " of kill_at, else of peak_rss); never fails a test", report=("danger", "rss_bytes"),
                                      shows="reached")
    max_amplification: float | None = _budget("ratio", "most memory a callback may hold while parsing, as a multiple"
                                              " of the response body (e.g. 8 or '8x')",
                                              report=("parse_amplification", "max_ratio"),
                                              check=_checked(_amplification_check))
    billed_mismatch: int | None = _budget("count", "most screenshot captures billed although not clean, or clean and"
                                          " not billed (X-Page-Verdict / X-Billed)", report=("shots", "billed_mismatch"),
                                          check=_checked(_billing_check))

    def set_values(self) -> dict[str, object]:
        """Return the budgets that are set, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


#: The budgets' rows, read from the fields of :class:`Budgets`, in their order.
SPECS: dict[str, BudgetSpec] = {
    f.name: _row(f.name, *f.metadata["row"][:4], **f.metadata["row"][4]) for f in fields(Budgets)
}

#: Why a queue budget breaks and what to change, appended to its message (the terminal and report.html show both).
CAUSES = {name: spec.cause for name, spec in SPECS.items() if spec.cause}


def parse_budget(name: str, value: object, *, source: str) -> object:
    """Parse one budget value; raise :class:`BudgetError` naming ``source`` if it is wrong."""
    spec = SPECS.get(name)
    if spec is None:
        known = ", ".join(sorted(n for n, s in SPECS.items() if s.enforced))
        close = difflib.get_close_matches(name, [n for n, s in SPECS.items() if s.enforced], n=1, cutoff=0.6)
        hint = f": did you mean {close[0]!r}?" if close else ""
        raise BudgetError(f"unknown budget {name!r} in {source}{hint} (known budgets: {known})")
    if not spec.enforced:
        raise BudgetError(
            f"budget {name!r} in {source} is not enforced by this version of pytest-crawlmem yet;"
            " remove it rather than rely on a limit that is not checked"
        )
    if _negative(value):
        raise BudgetError(f"invalid {name} {value!r} in {source}: must not be negative")
    try:
        parsed = spec.parse(value, source=f"{name} in {source}")
    except UnitError as exc:
        raise BudgetError(str(exc)) from exc
    if spec.positive and parsed == 0:
        raise BudgetError(
            f"invalid {name} {value!r} in {source}: must be above 0 (it is the growth per response tolerated before a"
            " leak verdict; to judge no leak at all, set leak='off')"
        )
    return parsed


def _negative(value: object) -> bool:
    """A negative number, or a string that starts with a minus sign (``"-5 MiB"``)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return value < 0
    return isinstance(value, str) and value.strip().startswith("-")


def resolve_budgets(
    marker_values: Iterable[tuple[Mapping[str, object], str]],
    defaults: Mapping[str, object],
) -> Budgets:
    """Merge budgets: marker values (closest first) override ``defaults`` (already parsed ini values).

    ``marker_values`` yields ``(kwargs, source)`` pairs, the closest marker first.
    """
    merged: dict[str, object] = dict(defaults)
    for kwargs, source in reversed(list(marker_values)):
        for name, value in kwargs.items():
            merged[name] = parse_budget(name, value, source=source)
    return Budgets(**merged)  # type: ignore[arg-type]


def check_budgets(budgets: Budgets, result: CrawlResult) -> list[Violation]:
    """Return every budget ``result`` broke (empty when it kept them all): pages a browser crawl left open (always a
    failure), then each row's check in the order of ``SPECS``."""
    checks = [_unclosed_pages_check(result)]
    checks += [spec.check(spec, budgets, result) for spec in SPECS.values() if spec.check is not None]
    return [_with_danger(v, result) for v in checks if v is not None]


#: Snapshot taken at this share of ``kill_at`` (else of ``peak_rss``) when ``snapshot_at`` is not set.
DEFAULT_SNAPSHOT_SHARE = 0.8


class BudgetLimits:
    """The limits a run reads from the ``budgets`` it carries whole (``CrawlOptions``, ``JobOptions``)."""

    budgets: Budgets

    @property
    def leak_per_response(self) -> int | None:
        """The growth per response (per page, for a browser job) judged a leak (``None``: the default)."""
        return self.budgets.leak_per_response

    @property
    def kill_at_bytes(self) -> int | None:
        """Memory at which the run is stopped (``None``: no ceiling)."""
        return self.budgets.kill_at

    @property
    def timeout_seconds(self) -> float | None:
        """Seconds after which the run is stopped (``None``: no limit)."""
        return self.budgets.timeout


def tracemalloc_frames(budgets: Budgets | None, configured: int) -> int:
    """Frames tracemalloc keeps: the session's setting, at least 1 when a ``traced_peak`` budget needs tracing."""
    return max(configured, 1) if budgets is not None and budgets.traced_peak is not None else configured


def snapshot_threshold(budgets: Budgets) -> int | None:
    """RSS at which to take the danger snapshot: ``snapshot_at``, else 80% of ``kill_at``, else of ``peak_rss``."""
    if budgets.snapshot_at is not None:
        return budgets.snapshot_at
    ceiling = budgets.kill_at if budgets.kill_at is not None else budgets.peak_rss
    return int(ceiling * DEFAULT_SNAPSHOT_SHARE) if ceiling is not None else None


def _with_danger(violation: Violation, result: CrawlResult) -> Violation:
    """A broken peak_rss or kill_at carries the danger snapshot's one-line summary."""
    spec = SPECS.get(violation.budget)
    if result.danger is None or spec is None or not spec.danger:
        return violation
    if _started_over(violation, result) or result.start_rss > result.danger.threshold_bytes:
        return violation  # crossed before the crawl began: the lines the snapshot's window saw did not cause it
    return replace(violation, message=f"{violation.message}; {result.danger.describe()} (danger.json)")

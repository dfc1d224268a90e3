"""The verdict rules: each reads the :class:`~pytest_crawlmem.core.evidence.Evidence` and returns a verdict or ``None``;
the ordered :data:`RULES` are run by ``growth.analyze``, and the first that returns a verdict decides (pure).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import pairwise

from pytest_crawlmem.core import verdicts as V
from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.evidence import (
    MAX_STATED_PER_RESPONSE,
    RELEASE_MIN_BYTES,
    STRONG_FACTOR,
    Evidence,
    intervals,
    judged_checkpoints,
    judged_signal,
    media_cache,
    no_leak_note,
    plateau_of,
    unexplained_refs,
)
from pytest_crawlmem.core.leaktrend import (
    LATER_SHARE,
    RUNNING_POWER_DRAWS,
    TREND_MIN_POINTS,
    TYPICAL_SHARE,
    Trend,
    measure_trend,
    unit_power,
)
from pytest_crawlmem.core.models import Checkpoint, Growth, Sample, heap_estimate
from pytest_crawlmem.core.plateau import Plateau
from pytest_crawlmem.core.schedule import (
    MIN_INTERVAL_RESPONSES,
    STRONG_MIN_GAP,
    STRONG_WARMUP_RESPONSES,
    responses_to_judge,
    responses_to_judge_strong,
    round_up,
    scheduled_points,
    warmup_responses,
)
from pytest_crawlmem.core.stages import (
    DOWNLOAD_EXCESS_BYTES,
    DOWNLOAD_EXCESS_FACTOR,
    MIN_DELTAS,
    downloader_activity,
    jobdir_at,
    kib,
    mib,
    processing_pressure,
)
from pytest_crawlmem.core.trend import t95

#: Live Scrapy objects of one class must reach this count to be proven retention (a handful kept by a
#: closure or a stats value is evidence, not a leak per response).
PROVEN_MIN_OBJECTS = 20


Rule = Callable[[Evidence], Growth | None]


def _close_note(ev: Evidence) -> str:
    """What the reason says of a close left out of the trend (empty when it was judged)."""
    if not ev.close_left_out:
        return ""
    if ev.released_at_close >= RELEASE_MIN_BYTES:
        released = f"released {kib(ev.released_at_close)} more than its queue held"
    elif ev.trend is None:
        released = "fell below the checkpoints taken while the crawl ran"
    else:
        released = "fell below the checkpoints taken while the crawl ran, after an attribution window that ran to the end"
    # what was let go of is not named: the holder, when one was found, is (a crawl stopped by its timeout lets go of
    # the requests it still had queued and in flight, whatever holds its leak)
    return (f"; the crawl's end {released} (left out of the trend): memory a crawl lets go of as it ends (requests"
            " still queued or in flight when it was stopped, a list passed on from request to request in request.meta"
            " or cb_kwargs) says nothing of its growth while it ran")


def _short_strong_leak(ev: Evidence) -> Growth | None:
    """A crawl too short for the regular trend: the strong trend after STRONG_WARMUP_RESPONSES."""
    if ev.trend is not None or ev.strong is None or not ev.strong.is_leak:
        return None
    t = ev.strong
    proven = _proven_retention(ev.checkpoints, ev.held_after_close)  # the evidence, as the regular trend gives it
    held = (f"; {proven.reason.partition('; memory ')[0]}" if proven else "") + _close_note(ev)
    return ev.growth(
        V.RETAINED_OBJECTS,
        f"{_grew(ev.signal, t)}; at least {STRONG_FACTOR}x the leak threshold, so {len(t.points)} drained checkpoints"
        f" after {STRONG_WARMUP_RESPONSES} responses are enough{held}",
        f"95% lower bound of the trend >= {t.threshold:g} B/response ({STRONG_FACTOR}x leak_per_response) of"
        f" {ev.signal} memory after {STRONG_WARMUP_RESPONSES} responses, net of the scheduler",
        t.net_slope,
    )


def _short_proven(ev: Evidence) -> Growth | None:
    """A crawl too short for the regular trend: Scrapy objects proven retained after it."""
    return _with_power(ev, _proven_retention(ev.checkpoints, ev.held_after_close)) if ev.trend is None else None


def _short_browser(ev: Evidence) -> Growth | None:
    """A short browser crawl: its memory is the browser's."""
    if ev.trend is not None or ev.browser is None:
        return None
    note = "" if ev.browser.verdict != V.STEADY else f"; Python's own memory is not judged: {_too_few(ev)}"
    return replace(ev.browser, reason=ev.browser.reason + note, checkpoints=ev.recorded or ev.checkpoints)


def _short_steady(ev: Evidence) -> Growth | None:
    """A crawl too short for the regular trend whose strong trend still bounds a leak under MAX_STATED_PER_RESPONSE."""
    if ev.trend is not None or ev.strong is None or not ev.bounded(ev.strong):
        return None
    t = ev.strong
    return ev.growth(
        V.STEADY,
        f"{ev.signal} memory grew {kib(t.net_slope)}/response over {t.window:,} responses after a warm-up of"
        f" {STRONG_WARMUP_RESPONSES}{ev.no_leak(t)}; for the {kib(ev.limits.leak_per_response)}/response threshold"
        f" itself, {_too_few(ev)}",
        f"95% upper bound of the trend after {STRONG_WARMUP_RESPONSES} responses; detectable <="
        f" {MAX_STATED_PER_RESPONSE} B/response", t.net_slope,
    )


def _too_few(ev: Evidence) -> str:
    """Why the regular trend was not judged: too few responses (and how many would do), or the checkpoints it lost."""
    needed = responses_to_judge(ev.limits.min_interval)
    if ev.total < needed:
        return f"{ev.total:,} responses are too few (about {needed:,} are needed)"
    warm = warmup_responses(ev.total)
    traced = sum(1 for c in ev.checkpoints if c.tracer_bytes and c.responses >= warm)
    lost = [f"{traced} read while the attribution window traced allocations"] if traced else []
    undrained = ev.undrained_after_warmup()
    lost += [f"{undrained} undrained"] if undrained else []
    lost += [f"those closer than {MIN_INTERVAL_RESPONSES} responses merged"]
    return (f"{ev.total:,} responses gave {len(ev.judged)} judged checkpoints after the warm-up of {warm:,}"
            f" ({', '.join(lost)}); {TREND_MIN_POINTS} are needed")


def _too_few_checkpoints(ev: Evidence) -> Growth | None:
    """``inconclusive``: too few drained checkpoints after the warm-up, saying why and what would do."""
    if ev.trend is not None:
        return None
    needed = responses_to_judge(ev.limits.min_interval)
    judged = len(ev.judged)
    undrained = ev.undrained_after_warmup()
    head = (f"{ev.total:,} responses gave {judged} drained checkpoint{'s' if judged != 1 else ''} after the warm-up of"
            f" {warmup_responses(ev.total):,} responses; {TREND_MIN_POINTS} are needed to judge growth")
    if undrained and ev.total >= needed:
        advice = (f": {undrained} checkpoint{'s' if undrained != 1 else ''} after the warm-up did not drain (downloads"
                  f" or callbacks were still in progress when the pause timed out, {name_of('drain_timeout_seconds')}) and"
                  " are not judged: let in-flight work finish (failing or slow downloads, DOWNLOAD_TIMEOUT) or raise"
                  " the drain timeout")
        held = next((c.held_by for c in reversed(ev.checkpoints) if c.held_by), "")
        if held:
            advice += f"; the last was held by the media pipelines' {held}"
    else:
        advice = f": crawl at least {needed:,} responses{_replay_note(ev, needed)}"
        if undrained:
            advice += f" ({undrained} checkpoints after the warm-up did not drain and are not judged)"
    strong = (f" (growth of {kib(STRONG_FACTOR * ev.limits.leak_per_response)}/response or more is judged from"
              f" {responses_to_judge_strong(ev.limits.min_interval):,})")
    if ev.strong is not None and not ev.limits.running:  # judged, too noisy for a bound a verdict can use
        strong = (f" (the trend after {STRONG_WARMUP_RESPONSES} responses, which judges growth of"
                  f" {kib(ev.strong.threshold)}/response or more, could only have caught a leak of"
                  f" {kib(ev.strong.detectable)}/response or more (95%), above the"
                  f" {kib(MAX_STATED_PER_RESPONSE)}/response a verdict needs)")
    growth = ev.growth(V.INCONCLUSIVE, head + advice + strong, "too-few-checkpoints")
    return replace(growth, responses_needed=needed if ev.total < needed else None)


def _trend_leak(ev: Evidence) -> Growth | None:
    """``retained-objects`` (or ``media-disk``: cached media failures hold it all) from the regular trend."""
    t = ev.trend
    if t is None:
        return None
    leak, signal = (t, ev.signal) if t.is_leak and ev.plateau is None else (None, ev.signal)  # a filled cache: no leak
    native = ""
    if leak is None and ev.signal == "traced" and all(c.heap_bytes is not None for c in ev.judged):
        heap = [int(heap_estimate(c) or 0) for c in ev.judged]
        heap_trend = measure_trend(ev.judged, heap, ev.credit, ev.limits.request_allowance, ev.limits.leak_per_response,
                                   LATER_SHARE)
        if heap_trend.is_leak and plateau_of(ev.checkpoints, ev.judged, heap, "heap", heap_trend, ev.limits,
                                           not ev.close_left_out) is None:
            leak, signal = heap_trend, "heap"
            native = (f", while traced memory grew {kib(t.net_slope)}/response: native memory that tracemalloc cannot"
                      " see (lxml trees, C extensions)")
    if leak is None:
        return None
    spans = intervals(ev.judged, ev.values if signal == ev.signal else heap, ev.limits.request_allowance, ev.credit)
    cached = media_cache(signal, ev.judged, spans, ev.limits.leak_per_response, ev.media, ev.media_failure_body_bytes)
    if cached is not None:
        return _with_power(ev, cached)
    held = f"; live Scrapy objects rising: {describe_counts(ev.rising)}" if ev.rising else ""
    proven = _proven_retention(ev.checkpoints, ev.held_after_close)
    held += f"; {proven.reason.partition('; memory ')[0]}" if proven else ""
    held += _close_note(ev)
    growth = ev.growth(
        V.RETAINED_OBJECTS, f"{_grew(signal, leak)}{native}{held}",
        f"95% lower bound of the trend > {leak.threshold:g} B/response of {signal} memory, net of the scheduler,"
        f", the later half still growing by {leak.later_share:g}x it and the typical interval by {TYPICAL_SHARE:g}x",
        leak.net_slope,
    )
    return replace(growth, signal=signal)


def _browser_state(ev: Evidence) -> Growth | None:
    """The browser tree grew with the pages."""
    if ev.browser is not None and ev.browser.verdict == V.BROWSER_STATE:
        return _with_power(ev, ev.browser)
    return None


def _cached_media(ev: Evidence) -> Growth | None:
    """Rising Scrapy objects all held by the media pipelines' cached failures."""
    if not ev.rising or ev.trend is None:
        return None
    return _with_power(ev, media_cache(ev.signal, ev.judged, ev.spans, ev.limits.leak_per_response, ev.media,
                                        ev.media_failure_body_bytes))


def _proven(ev: Evidence) -> Growth | None:
    """Scrapy objects that rose at every checkpoint and were held after the crawl."""
    return _with_power(ev, _proven_retention(ev.checkpoints, ev.held_after_close))


def _rising(ev: Evidence) -> Growth | None:
    """Live Scrapy objects that rose at every judged checkpoint, whatever the bytes."""
    if not ev.rising:
        return None
    memory = _memory_aside(ev.signal, ev.per_response, ev.limits.leak_per_response)
    return ev.growth(V.RETAINED_OBJECTS,
                     f"live Scrapy objects rose at every drained checkpoint: {describe_counts(ev.rising)}{memory}", RISING_RULE)


def _memory_aside(signal: str, per_response: float, threshold: float) -> str:
    """For a verdict the live objects decided: what memory itself did, when it alone shows no leak ('' when it does)."""
    if per_response >= threshold:
        return ""
    moved = "grew" if per_response >= 0 else "fell"
    return (f"; the objects decide, not the bytes: {signal or 'memory'} memory itself {moved} {kib(abs(per_response))}"
            f"/response, under the {kib(threshold)}/response threshold (each object is small beside the heap's own"
            " movement, and a drained crawl holds none of them)")


def _backlog(ev: Evidence) -> Growth | None:
    """Growth above the threshold that the scheduler's growing queue explains."""
    t = ev.trend
    if t is None or ev.judged[-1].scheduled <= ev.judged[0].scheduled:
        return None
    if t.raw_slope - t95(t.fit.df) * t.fit.se < ev.limits.leak_per_response:
        return None
    raw = (ev.values[-1] - ev.values[0])
    return ev.growth(
        V.SCHEDULER_BACKLOG,
        f"{ev.signal} memory grew {kib(raw)} over {t.window:,} responses while the scheduler grew from"
        f" {ev.judged[0].scheduled:,} to {ev.judged[-1].scheduled:,} requests: a backlog, not a leak",
        "growth explained by requests added to the scheduler", t.raw_slope,
    )


def _response_processing(ev: Evidence) -> Growth | None:
    """Sustained scraper backout."""
    pressure = processing_pressure(ev.samples, ev.limits.max_active_size)
    return ev.growth(V.RESPONSE_PROCESSING, pressure, "sustained scraper backout") if pressure else None


def _jobdir(ev: Evidence) -> Growth | None:
    """JOBDIR growing on disk in every judged interval."""
    disk = _jobdir_growth(ev.judged, ev.samples, ev.limits.disk_per_response)
    if not disk:
        return None
    return ev.growth(V.MEDIA_DISK, f"{disk}; {ev.signal} memory levelled off ({kib(ev.per_response)}/response)",
                     f"every interval >= {ev.limits.disk_per_response} B/response of JOBDIR disk use")


def _downloads(ev: Evidence) -> Growth | None:
    """Downloads in flight held the peak."""
    downloads = downloader_activity(ev.checkpoints, ev.samples, ev.response_sizes, ev.download_excess)
    if not downloads:
        return None
    return ev.growth(
        V.DOWNLOADER_ACTIVITY,
        f"{downloads}; memory at the drained checkpoints levelled off ({kib(ev.per_response)}/response)",
        f"median sampled RSS >= {DOWNLOAD_EXCESS_BYTES // 2**20} MiB above the drained checkpoints around it,"
        f" within {DOWNLOAD_EXCESS_FACTOR}x of median downloads in flight x mean body",
    )


def _steady(ev: Evidence) -> Growth | None:
    """No leak this crawl could have caught: it says the smallest it would have (95%)."""
    t = ev.trend
    if t is not None and ev.plateau is not None:
        return _levelled_off(ev, ev.plateau)
    if t is None or not ev.bounded(t):
        return None
    if t.net_slope < t.threshold:
        moved = f"{ev.signal} memory levelled off after the warm-up ({kib(t.net_slope)}/response over {t.window:,} responses)"
    else:  # above the threshold, yet not told from this crawl's noise, or not still growing in the later half or most
        # intervals (one or two steps)
        moved = (f"{ev.signal} memory grew {kib(t.net_slope)}/response over {t.window:,} responses after the warm-up"
                 f" (at least {kib(max(t.lower, 0.0))}/response at 95%, {kib(t.later_slope)}/response in the later half,"
                 f" {kib(t.typical_slope)}/response in the typical interval; a leak needs the first above"
                 f" {kib(t.threshold)}/response, the second at {kib(t.later_share * t.threshold)}/response and the third"
                 f" at {kib(TYPICAL_SHARE * t.threshold)}/response or more)")
    return ev.growth(
        V.STEADY,
        f"{moved}{ev.no_leak(t)}",
        f"95% lower bound of the trend <= {t.threshold:g} B/response; detectable <= {MAX_STATED_PER_RESPONSE} B/response",
    )


def _levelled_off(ev: Evidence, p: Plateau) -> Growth:
    """``steady`` for memory that filled and levelled off (a plateau): where, at what level, how flat after it."""
    before = _rise_before(p)
    released = (f"; the crawl's end released {kib(p.released_bytes)} more (left out of the flat part: memory the end let"
                " go of says nothing of the rate while it ran)") if p.released_bytes else ""
    power = f": {no_leak_note(ev.flat_trend)}" if ev.flat_trend is not None and not ev.limits.running else ""
    return ev.growth(
        V.STEADY,
        f"{ev.signal} memory filled to {mib(p.level_bytes)} and levelled off at response {p.at_responses:,}{before}:"
        f" {kib(p.flat.slope)}/response over the {p.flat_responses:,} responses after it (at most"
        f" {kib(p.flat.upper)}/response at 95%, under the {kib(ev.limits.leak_per_response)}/response threshold):"
        f" growth that stopped, as a bounded cache's does, not a leak{released}{power}",
        f"plateau: growth before response {p.at_responses} stopped; 95% upper bound of the trend after it <"
        f" {ev.limits.leak_per_response} B/response",
        p.flat.slope,
    )


def _rise_before(p: Plateau) -> str:
    """`` after rising 5.6 KiB/response from response 58``: the fill, from the warm-up's first drained checkpoint on."""
    if p.at_responses <= p.start_responses:
        return ""
    return f" after rising {kib(p.rise_per_response)}/response from response {p.start_responses:,}"


def _too_noisy(ev: Evidence) -> Growth | None:
    """``inconclusive``: the crawl's own noise cannot bound a leak under MAX_STATED_PER_RESPONSE."""
    t = ev.trend
    if t is None:
        return None
    moved = (f"{ev.signal} memory moved by {kib(t.noise_sd)} around its trend between drained checkpoints"
             f" ({kib(t.net_slope)}/response over {t.window:,} responses)")
    if ev.limits.running:  # no power simulated while the crawl runs
        return ev.growth(V.INCONCLUSIVE, f"{moved}: too noisy so far to bound a leak under"
                         f" {kib(MAX_STATED_PER_RESPONSE)}/response", f"detectable > {MAX_STATED_PER_RESPONSE} B/response"
                         f" ({RUNNING_POWER_DRAWS} simulated crawls, while the crawl runs)")
    needed = responses_for_power(t, ev.limits.min_interval, ev.total)
    more = f": crawl at least {needed:,} responses{_replay_note(ev, needed)}" if needed else ": a longer crawl would not"
    growth = ev.growth(
        V.INCONCLUSIVE,
        f"{moved}: this crawl could only have caught a leak of"
        f" {kib(t.detectable)}/response or more (95%), above the {kib(MAX_STATED_PER_RESPONSE)}/response a verdict"
        f" needs{more}",
        f"detectable > {MAX_STATED_PER_RESPONSE} B/response",
    )
    return replace(growth, responses_needed=needed)


#: The rules of the verdicts live Scrapy objects decide (their memory figures are not what decided them).
RISING_RULE = "live Scrapy objects rising at every drained checkpoint"


PROVEN_RULE = "live Scrapy objects rising at every checkpoint and held after the crawl (proven retention)"


#: A plateau's rule starts with this (``_levelled_off``).
PLATEAU_RULE = "plateau"


#: The rule of a holder declared by design that grew beyond its declaration (core/setaside.py).
DECLARED_RULE = "declared growth exceeded"


#: The one piece of evidence a verdict rests on, by its rule (the first that matches): a short name a status line or a
#: report prints beside the verdict, so the figures beside it are read as what they are.
EVIDENCE: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda rule: rule == "too-few-checkpoints", "checkpoints"),
    (lambda rule: rule.startswith(PLATEAU_RULE), "plateau"),
    (lambda rule: rule == DECLARED_RULE, "declared"),
    (lambda rule: rule in (RISING_RULE, PROVEN_RULE), "live-objects"),
    (lambda rule: "cached media failures" in rule, "media-cache"),
    (lambda rule: "browser" in rule, "browser"),
    (lambda rule: rule.startswith("growth explained by requests"), "scheduler"),
    (lambda rule: rule == "sustained scraper backout", "backout"),
    (lambda rule: "JOBDIR" in rule, "jobdir"),
    (lambda rule: rule.startswith("median sampled RSS"), "downloads"),
)


def decided_by(growth: Growth) -> str:
    """The evidence ``growth``'s verdict rests on: ``live-objects`` (its per-response and power figures are memory's,
    which did not decide it), ``plateau``, ``scheduler``, ``backout``, ``browser``, ... or ``memory`` (the trend of memory
    against responses, which its figures describe); '' for a verdict with no rule (an old report)."""
    if not growth.rule:
        return ""
    return next((name for matches, name in EVIDENCE if matches(growth.rule)), "memory")


#: The verdict rules, in order: the first that returns a verdict decides.
RULES: tuple[Rule, ...] = (
    _short_strong_leak, _short_proven, _short_browser, _short_steady, _too_few_checkpoints,
    _trend_leak, _browser_state, _cached_media, _proven, _rising, _backlog, _response_processing, _jobdir, _downloads,
    _steady, _too_noisy,
)


def responses_for_power(t: Trend, min_interval: int, total: int) -> int | None:
    """The fewest responses whose schedule would bring the detectable leak under MAX_STATED_PER_RESPONSE at this noise."""
    base = t.threshold + t.queue_slope + max(0.0, -t.upper)
    if base >= MAX_STATED_PER_RESPONSE:
        return None
    n = max(total, 1)
    for _ in range(60):
        n = int(n * 1.25) + 1
        xs = tuple(float(x) for x in scheduled_points(n, min_interval))
        if len(xs) >= TREND_MIN_POINTS and base + t.noise_sd * unit_power(xs) <= MAX_STATED_PER_RESPONSE:
            return round_up(n)
    return None


def with_undrained(growth: Growth, ev: Evidence) -> Growth:
    """``growth`` whose reason says, unless it said so of them all, that mid-crawl checkpoints did not drain and what
    would make them (the issue's 149-response browser crawl read only ``crawl at least ... responses``)."""
    middle = ev.checkpoints[1:-1]  # the opening and closing checkpoints are always drained
    undrained = sum(not c.drained for c in middle)
    if not undrained or (ev.undrained_after_warmup() == undrained and "did not drain" in growth.reason):
        return growth
    browser = any(c.open_pages is not None or c.browser_uss_bytes is not None for c in ev.checkpoints)
    fewer = "CONCURRENT_REQUESTS or PLAYWRIGHT_MAX_PAGES_PER_CONTEXT" if browser else "CONCURRENT_REQUESTS"
    return replace(growth, reason=(
        f"{growth.reason}; the checkpoints did not drain: {undrained} of {len(middle)} hit the drain timeout"
        f" ({name_of('drain_timeout_seconds')}) with downloads or callbacks still in progress and are not judged: they"
        f" drain when what is in flight finishes within the timeout (lower {fewer}, or raise the timeout)"))


def _with_power(ev: Evidence, growth: Growth | None) -> Growth | None:
    """``growth`` with this evidence's checkpoints and power (``None`` stays ``None``)."""
    if growth is None:
        return None
    return replace(growth, checkpoints=ev.recorded or ev.checkpoints, detectable_per_response_bytes=ev.stated_power)


def _grew(signal: str, t: Trend) -> str:
    """How the judged signal grew, with its bound and the scheduler's share."""
    share = t.queue_share  # under 0.05 KiB either way is no share ("explains 0.0 KiB")
    queue = (f", of which the scheduler's growing queue explains {kib(max(share, 0.0))}/response" if share > -51 else
             f", even though the draining scheduler queue freed about {kib(-share)}/response")
    return (f"{signal} memory grew {kib(t.net_slope * t.window)} over {t.window:,} responses"
            f" ({kib(t.net_slope)}/response, at least {kib(t.lower)}/response at 95% from {len(t.points)} drained"
            f" checkpoints){queue}")


def _replay_note(ev: Evidence, needed: int) -> str:
    """For a replayed crawl: the ``replay_copies`` that would give ``needed`` responses."""
    per_copy = ev.limits.responses_per_copy
    if not per_copy:
        return ""
    return f" (replay_copies={max(1, math.ceil(needed / per_copy))} of this {per_copy:,}-response recording)"


def _proven_retention(checkpoints: Sequence[Checkpoint], held: Mapping[str, int]) -> Growth | None:
    """``retained-objects`` for Scrapy objects that rose at every checkpoint and were still held after the crawl.

    The unexplained live count of the class (Requests beyond the scheduler's) must rise at every
    checkpoint from the opening one (merged like judged intervals), at least twice, and reach
    PROVEN_MIN_OBJECTS; ``held`` (from the crawl process) says a structure still held them after the end.
    A bounded cache stops rising once full and is never proven retention.
    """
    points = judged_checkpoints(checkpoints, 0, STRONG_MIN_GAP)
    if len(points) < 3:
        return None
    proven = {}
    for name, after in held.items():
        counts = [unexplained_refs(c).get(name, 0) for c in points]
        if after >= PROVEN_MIN_OBJECTS and all(b > a for a, b in pairwise(counts)):
            proven[name] = counts[-1] - counts[0]
    if not proven:
        return None
    picked = judged_signal(points)
    values = picked[1] if picked else [0] * len(points)
    window = max(points[-1].responses - points[0].responses, 1)
    spans = intervals(points, values)
    per_response = sum(i.net_bytes for i in spans) / window
    kept = ", ".join(f"{held[name]:,} {name}" for name in proven)
    return Growth(
        verdict=V.RETAINED_OBJECTS,
        reason=(
            f"live Scrapy objects rose at every drained checkpoint ({describe_counts(proven)}) and {kept} were still held"
            f" after the crawl ended; memory {'grew' if per_response >= 0 else 'fell'} {kib(abs(per_response))}/response"
            f" over {window:,} responses"
        ),
        rule=PROVEN_RULE,
        per_response_bytes=per_response,
        deltas_per_response=tuple(round(i.net_per_response, 1) for i in spans),
        signal=picked[0] if picked else "",
    )


def _jobdir_growth(judged: Sequence[Checkpoint], samples: Sequence[Sample], per_response: int) -> str:
    """Describe JOBDIR's disk use growing by ``per_response`` or more in every judged interval ('' if it did not)."""
    picked = jobdir_at(judged, samples)
    if picked is None or len(picked) < MIN_DELTAS + 1:
        return ""
    rates = [(b - a) / (cb.responses - ca.responses) for (a, ca), (b, cb) in pairwise(zip(picked, judged, strict=True))]
    if not all(r >= per_response for r in rates):
        return ""
    first, last = picked[0], picked[-1]
    window = judged[-1].responses - judged[0].responses
    peak = max((s.disk_scheduled for s in samples if s.disk_scheduled is not None), default=None)
    queued = f"; its disk request queue peaked at {peak:,} requests" if peak else ""
    return (
        f"JOBDIR grew on disk from {kib(first)} to {kib(last)} over {window:,} responses ({kib((last - first) / window)}"
        f"/response, at least {kib(min(rates))}/response in each of {len(rates)} drained intervals){queued}"
    )


def describe_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} +{n:,}" for name, n in counts.items())

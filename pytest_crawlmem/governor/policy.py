"""The memory governor's controller: learn what a request costs, choose the lever, decide once a tick (pure).

The crawl process (``governor/extension.py``) reads a :class:`Sample` each tick and applies the :class:`Decision`
:meth:`Policy.step` returns; nothing here knows Scrapy. The rules:

- Memory is explained as ``rss = fixed + cost_in_flight x in_flight + cost_queued x queued``; both costs are
  learned from the samples (exponentially weighted least squares, pulled toward a prior until the samples say
  otherwise); an in-flight request costs at least the mean body the scraper holds.
- Above ``high_share`` of the budget it acts on what grows: a backlog that explains the excess is spilled to disk
  and its start requests gated; otherwise concurrency is set from the headroom (``(setpoint - fixed) / cost``),
  never by blind steps. Below ``low_share``, for ``restore_ticks`` ticks in a row, it restores (hysteresis).
- Memory that is neither in flight nor queued (retained objects, the leak signature) it cannot free: it says so.
- At or over ``hard_share`` for ``close_ticks`` ticks in a row it closes the crawl (reason ``memory_budget``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Final

#: The close reason of a crawl the governor stopped near its hard limit (Scrapy's own is ``memusage_exceeded``).
from pytest_crawlmem.core.stops import MEMORY_BUDGET as MEMORY_BUDGET

#: The file of a governed crawl's decisions, beside CRAWLMEM_JSONL (as danger.json is); report.html draws them.
GOVERNOR_FILE: Final = "governor.json"
#: What a decision acts on.
IN_FLIGHT: Final = "in_flight"
BACKLOG: Final = "backlog"
RETAINED: Final = "retained"
RESTORE: Final = "restore"
CLOSE: Final = "close"
ITEMS: Final = "items"
KINDS: Final = (IN_FLIGHT, BACKLOG, RETAINED, RESTORE, CLOSE, ITEMS)
_MIB = 2**20
#: Growth since the first sample under which nothing is called retained (allocator noise, the first tick).
MIN_RETAINED_BYTES = 16 * _MIB
#: An in-flight request costs at least this many of its body: the download's buffer and the response's bytes.
BODY_COPIES = 2.0
#: A cap on the items inside the item pipelines this high or higher is lifted when the governor restores.
ITEM_CAP_LIFT = 4096


@dataclass(frozen=True)
class PolicyConfig:
    """The budget and the crawl's own limits (what the governor restores to)."""

    budget_bytes: int
    base_concurrency: int  # CONCURRENT_REQUESTS
    base_active_size: int  # SCRAPER_SLOT_MAX_ACTIVE_SIZE
    min_concurrency: int = 1
    high_share: float = 0.85  # act above this share of the budget
    low_share: float = 0.70  # restore below it
    hard_share: float = 0.95  # close when over it for close_ticks ticks
    close_ticks: int = 12
    close_after_seconds: float = 0.0  # ... spanning at least this long (ticks out of turn come up to 50 a second)
    start_concurrency: int | None = None  # begin here and ramp up while the headroom allows (None: from the headroom)
    start_request_bytes: float = 8 * _MIB  # what a request is assumed to cost until responses show their size
    restore_ticks: int = 3
    spill_min_queued: int = 200  # fewer queued requests than this are never spilled
    prior_in_flight_bytes: float = 256 * 1024
    prior_queued_bytes: float = 2 * 1024

    @property
    def setpoint_bytes(self) -> float:
        """Where a lowering aims: between the restore and the act thresholds."""
        return self.budget_bytes * (self.high_share + self.low_share) / 2


@dataclass(frozen=True)
class Sample:
    """What the crawl looks like at one tick."""

    rss_bytes: int
    in_flight: int  # downloads under way (downloader.active)
    queued: int  # requests the scheduler holds in memory (not those spilled to disk)
    active_bytes: int = 0  # bytes of responses the scraper holds (scraper.slot.active_size)
    active_responses: int = 0  # responses the scraper holds (len(scraper.slot.active))
    body_bytes: float = 0.0  # mean body of the latest responses (headers_received / response_received); 0: none yet
    collected: bool = True  # read right after a full garbage collection (else garbage may still be counted)
    t_seconds: float | None = None  # when it was read (time.monotonic()); None: the ticks alone count time
    high_bytes: int = 0  # the kernel's RSS high-water mark when it rose since the last sample (VmHWM), else 0
    items: int = 0  # items inside the item pipelines (scraper.slot.itemproc_size)
    item_bytes: float = 0.0  # mean payload of an item the spider yielded (sampled); 0: none seen
    items_per_response: float = 0.0  # items a response yields, on average
    downloading: int | None = None  # downloads under way (in_flight less the responses held); None: in_flight
    unparsed: int = 0  # responses received whose callback's output has not ended (their items are still to come)


@dataclass(frozen=True)
class Levers:
    """The settings the governor controls, as they stand."""

    concurrency: int
    max_active_size: int
    gate_start: bool = False  # stop reading start requests
    spill: bool = False  # new requests go to the disk queue
    item_cap: int = 0  # no request leaves the scheduler while this many items are inside the pipelines (0: no cap)


@dataclass(frozen=True)
class Decision:
    """One change of the levers (or a statement that nothing can be done), with the sentence that explains it."""

    kind: str
    levers: Levers
    message: str
    spill_now: int = 0  # requests to move from the memory queue to disk now
    close: bool = False


@dataclass(frozen=True)
class DecisionRecord:
    """One decision as the report keeps it: when, what, the levers after it and the sentence."""

    t_seconds: float
    responses: int
    kind: str
    rss_bytes: int
    concurrency: int
    max_active_size: int
    gate_start: bool
    spill: bool
    message: str
    browser_pss_bytes: int = 0  # the browser tree's PSS the browser lever saw (browser_context decisions)


def _solve3(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Solve the 3x3 system by Cramer's rule (a tick solves one: 2 us where elimination took 11 us); None when singular
    or not finite."""
    (a00, a01, a02), (a10, a11, a12), (a20, a21, a22) = a
    b0, b1, b2 = b
    c0, c1, c2 = a11 * a22 - a12 * a21, a10 * a22 - a12 * a20, a10 * a21 - a11 * a20
    det = a00 * c0 - a01 * c1 + a02 * c2
    scale = abs(a00 * a11 * a22) + abs(a01 * a12 * a20) + abs(a02 * a10 * a21)
    if not math.isfinite(det) or abs(det) <= 1e-12 * scale:
        return None
    x0 = (b0 * c0 - a01 * (b1 * a22 - a12 * b2) + a02 * (b1 * a21 - a11 * b2)) / det
    x1 = (a00 * (b1 * a22 - a12 * b2) - b0 * c1 + a02 * (a10 * b2 - b1 * a20)) / det
    x2 = (a00 * (a11 * b2 - b1 * a21) - a01 * (a10 * b2 - b1 * a20) + b0 * c2) / det
    return [x0, x1, x2]


@dataclass
class CostModel:
    """What an in-flight and a queued request cost, learned from samples (weighted least squares with a prior)."""

    prior_in_flight: float
    prior_queued: float
    forget: float = 0.98  # each new sample weighs 1/forget times the one before
    prior_samples: float = 2.0  # the prior weighs this many samples
    _s: list[list[float]] = field(default_factory=lambda: [[0.0] * 3 for _ in range(3)])
    _b: list[float] = field(default_factory=lambda: [0.0] * 3)
    _body: float = 0.0  # weighted mean body held by the scraper
    _body_weight: float = 0.0
    _costs: tuple[float, float] | None = None  # costs() since the last sample (a tick asks up to four times)

    def update(self, sample: Sample) -> None:
        """Add one sample."""
        self._costs = None
        x = (1.0, float(sample.in_flight), float(sample.queued))
        for i in range(3):
            self._b[i] = self.forget * self._b[i] + x[i] * sample.rss_bytes
            for j in range(3):
                self._s[i][j] = self.forget * self._s[i][j] + x[i] * x[j]
        body = sample.body_bytes
        if body <= 0 and sample.active_responses > 0:
            body = sample.active_bytes / sample.active_responses
        if body > 0:
            self._body = self.forget * self._body + body
            self._body_weight = self.forget * self._body_weight + 1.0

    @property
    def body_bytes(self) -> float:
        """The mean body of a response held by the scraper (0 before one was seen)."""
        return self._body / self._body_weight if self._body_weight else 0.0

    def costs(self) -> tuple[float, float]:
        """(bytes per in-flight request, bytes per queued request), both >= 0; the in-flight one >= two bodies."""
        if self._costs is None:
            self._costs = self._solve()
        return self._costs

    def _solve(self) -> tuple[float, float]:
        weight = self._s[0][0]
        if weight <= 0:
            return max(self.prior_in_flight, BODY_COPIES * self.body_bytes), self.prior_queued
        # the prior weighs prior_samples samples of the feature's spread (its variance: the intercept takes the mean)
        lam_f = self.prior_samples * max(1.0, self._s[1][1] / weight - (self._s[0][1] / weight) ** 2)
        lam_q = self.prior_samples * max(1.0, self._s[2][2] / weight - (self._s[0][2] / weight) ** 2)
        a = [row[:] for row in self._s]
        a[0][0] += 1e-6
        a[1][1] += lam_f
        a[2][2] += lam_q
        b = [self._b[0], self._b[1] + lam_f * self.prior_in_flight, self._b[2] + lam_q * self.prior_queued]
        theta = _solve3(a, b)
        if theta is None or not all(math.isfinite(v) for v in theta):
            return max(self.prior_in_flight, BODY_COPIES * self.body_bytes), self.prior_queued
        return max(theta[1], BODY_COPIES * self.body_bytes, 1.0), max(theta[2], 0.0)


@dataclass
class Policy:
    """The governor's state from tick to tick; :meth:`step` returns a decision when the levers should move."""

    config: PolicyConfig
    levers: Levers = field(init=False)
    model: CostModel = field(init=False)
    baseline_bytes: int | None = None  # RSS at the first sample: what the crawl cost before it crawled
    open_bytes: int = 0  # RSS at the open (:meth:`open`), nothing in flight: the least RSS not in flight
    _calm_ticks: int = 0
    _hard_ticks: int = 0
    _hard_since: float | None = None  # when the RSS went over the hard share (t_seconds of that sample)
    _retained_said: bool = False
    _pressed: bool = False  # the act share was passed once: from then on only calm ticks restore
    _cap_rss: int = 0  # RSS when the item cap was last set
    _items_high: int = 0  # the most items inside the pipelines since the item cap was set

    def __post_init__(self) -> None:
        start = self.config.start_concurrency or self.config.base_concurrency
        self.levers = Levers(min(start, self.config.base_concurrency), self.config.base_active_size)
        self.model = CostModel(self.config.prior_in_flight_bytes, self.config.prior_queued_bytes)

    def open(self, rss_bytes: int) -> list[Decision]:
        """Before the first request: the concurrency whose cautious cost fits the headroom (``start_request_bytes``).

        No response has shown its size yet, and every download of the first burst is under way before one does:
        a crawl of large pages at CONCURRENT_REQUESTS=64 would be over its budget before a tick could act. A
        budget with room for the whole burst starts at CONCURRENT_REQUESTS (no decision).
        """
        cfg = self.config
        self.baseline_bytes = self.open_bytes = rss_bytes
        if cfg.start_concurrency is not None:
            return []
        allowed = int((cfg.setpoint_bytes - rss_bytes) // cfg.start_request_bytes)
        start = max(cfg.min_concurrency, min(cfg.base_concurrency, allowed))
        if start >= cfg.base_concurrency:
            return []
        return self._move(start, IN_FLIGHT, (
            f"RSS {_mib(rss_bytes)} at the open: {_mib(max(0.0, cfg.setpoint_bytes - rss_bytes))} of headroom under"
            f" the {_mib(cfg.budget_bytes)} budget at {cfg.start_request_bytes / _MIB:,.0f} MiB a request until"
            f" responses show their size: concurrency {start} of {cfg.base_concurrency}"
        ))

    @property
    def governing(self) -> bool:
        """Whether any lever stands away from the crawl's own settings."""
        return self.levers != Levers(self.config.base_concurrency, self.config.base_active_size)

    @property
    def close_clock(self) -> bool:
        """Whether the close's clock runs: RSS over the close share at the last step with no items draining to explain
        it (once memory was called retained, still over the act share since)."""
        return self._hard_ticks > 0

    def _move(self, concurrency: int, kind: str, reason: str) -> list[Decision]:
        """Set the concurrency lever and return the one decision that says why."""
        self.levers = replace(self.levers, concurrency=concurrency)
        return [Decision(kind, self.levers, reason)]

    def step(self, sample: Sample) -> list[Decision]:
        """Learn from ``sample`` and return the decisions of this tick (most ticks: none)."""
        cfg = self.config
        if self.baseline_bytes is None:
            self.baseline_bytes = sample.rss_bytes
        self.model.update(sample)
        self._items_high = max(self._items_high, sample.items)
        rss, budget = sample.rss_bytes, cfg.budget_bytes
        pressure = max(rss, sample.high_bytes)  # a spike between two readings (a parse) counts as pressure, not to close
        # items held inside the pipelines drain by themselves while the engine's pulls are held: no reason to close
        draining = self.levers.item_cap > 0 and sample.items * sample.item_bytes >= rss - cfg.setpoint_bytes
        # once memory was called retained (a leak: nothing the governor moves frees it), a dip under the close share
        # (a trim's worth) neither restarts the close's clock nor lifts the pause while RSS stays over the act share:
        # a leak hovering at the line flapped paused / unpaused and closed after 9 s instead of 3
        over = rss >= (cfg.high_share if self._retained_said and self._hard_ticks else cfg.hard_share) * budget
        self._hard_ticks = self._hard_ticks + 1 if over and not draining else 0
        self._hard_since = (self._hard_since if self._hard_since is not None else sample.t_seconds) if self._hard_ticks else None
        self._calm_ticks = self._calm_ticks + 1 if rss <= cfg.low_share * budget else 0
        decisions: list[Decision] = []
        if self.levers.gate_start and sample.queued < self.levers.concurrency:
            self.levers = replace(self.levers, gate_start=False)  # a gate on an empty queue would starve the crawl
            decisions.append(Decision(
                BACKLOG, self.levers,
                f"{sample.queued:,} requests queued for concurrency {self.levers.concurrency}: start requests read again",
            ))
        if self._hard_ticks >= cfg.close_ticks and self._hard_seconds(sample) >= cfg.close_after_seconds:
            decisions.append(Decision(CLOSE, self.levers, self._close_message(sample), close=True))
        elif pressure >= cfg.high_share * budget:
            self._pressed = True
            decisions.extend(self._lower(replace(sample, rss_bytes=pressure)))
        elif not self._pressed and self.levers.concurrency < cfg.base_concurrency:
            decisions.extend(self._ramp(sample))
        elif self._calm_ticks >= cfg.restore_ticks and self.governing:
            decisions.extend(self._restore(sample))
        else:
            decisions.extend(self._forecast(sample))
        if not decisions:
            decisions.extend(self._cap_items(sample, forecast=True))
        return decisions

    def paused(self, sample: Sample) -> bool:
        """Whether no new download may start now: the crawl grew over the close share, whatever the cause (it stops a
        leak's growth before the close, and lets what is in flight and inside the pipelines drain). A crawl that
        opened over it is not paused: it would never start (it closes after ``close_after_seconds``). Once memory was
        called retained, it stays paused over the act share until the close."""
        cfg = self.config
        hard = cfg.hard_share * cfg.budget_bytes
        held = self._retained_said and self._hard_ticks > 0 and sample.rss_bytes >= cfg.high_share * cfg.budget_bytes
        return (sample.rss_bytes >= hard or held) and self.open_bytes < hard

    def _item_room(self, sample: Sample) -> int | None:
        """The cap on the items the pull hold counts (:func:`promised_items`: inside the pipelines, and what the
        requests pulled and not yet parsed will yield): those inside now and as many more as the headroom under the
        setpoint holds. None when no item showed its size.

        The requests pulled count against it, not only the downloads under way: counting the items inside alone,
        18 requests left the scheduler before the first of their 900 items reached the pipelines (1.12x the budget).
        """
        if sample.item_bytes <= 0 or sample.items_per_response <= 0:
            return None
        room = (self.config.setpoint_bytes - sample.rss_bytes) / sample.item_bytes
        return max(1, int(sample.items + room))

    def _cap_items(self, sample: Sample, *, forecast: bool) -> list[Decision]:
        """Cap the items inside the pipelines when their payload (with what the downloads under way will yield)
        would pass the act share; never raise a standing cap (restoring does)."""
        cfg = self.config
        cap = self._item_room(sample)
        if cap is None or sample.items < 1:
            return []
        downloading = sample.in_flight if sample.downloading is None else sample.downloading
        if forecast and sample.rss_bytes + coming_item_bytes(
                downloading + sample.unparsed, self.levers.concurrency, sample.items_per_response,
                sample.item_bytes) < cfg.high_share * cfg.budget_bytes:
            return []
        current = self.levers.item_cap
        if current:
            # a standing cap is lowered only when RSS grew past where it was set, and from the most items inside since
            # the cap stands (RSS holds them: items that drained leave their memory to the allocator, freed heap the
            # next items reuse). Following the items inside now, a cap went from 1,077 to 1 in 0.4 s and held the crawl
            # for 5 s, and another 1,131 -> 909 as RSS rose 231.4 -> 231.5 MiB with 900 of 1,150 items left inside
            if sample.rss_bytes <= self._cap_rss:
                return []
            room = (cfg.setpoint_bytes - sample.rss_bytes) / sample.item_bytes
            cap = max(1, int(max(self._items_high, sample.items) + room))
            if cap >= current:
                return []
        else:
            self._items_high = sample.items
        self._cap_rss = sample.rss_bytes
        self.levers = replace(self.levers, item_cap=cap)
        return [Decision(ITEMS, self.levers, (
            f"RSS {_mib(sample.rss_bytes)} with {sample.items:,} items inside the item pipelines at"
            f" {sample.item_bytes / 1024:,.0f} KiB each and {downloading} downloads under way yielding"
            f" {sample.items_per_response:,.1f} items each: requests leave the scheduler only while the items inside"
            f" the pipelines and those the requests pulled will yield are fewer than {cap:,}"
        ))]

    def _fixed(self, sample: Sample, cost_f: float, queue_bytes: float) -> float:
        """RSS that is neither in flight nor queued; never under the RSS at the open.

        A download under way has not received its body yet: subtracting its full cost from RSS would find room
        that its body is about to fill (a burst of 2 MiB pages ramped to 64 and passed its budget).
        """
        fixed = sample.rss_bytes - cost_f * sample.in_flight - queue_bytes
        return max(fixed, float(self.open_bytes))

    def wants_fresh_reading(self, sample: Sample) -> bool:
        """Whether this tick's decision counts on garbage being gone: a close, or calling memory retained.

        Not while the items inside the pipelines explain the excess: :meth:`step` then neither closes (the items drain,
        their pulls held by the item cap) nor judges retained memory (:meth:`_lower` stops before), so a collection
        would decide nothing; on a crawl of slow pipelines it was most of the governor's CPU.
        """
        cfg = self.config
        items_bytes = sample.items * sample.item_bytes
        if sample.rss_bytes >= cfg.hard_share * cfg.budget_bytes:  # as step's draining: no close while items drain
            return not (self.levers.item_cap > 0 and items_bytes >= sample.rss_bytes - cfg.setpoint_bytes)
        if sample.rss_bytes < cfg.high_share * cfg.budget_bytes or self._retained_said or self.baseline_bytes is None:
            return False
        if items_bytes >= max(sample.rss_bytes, sample.high_bytes) - cfg.setpoint_bytes:  # as _lower, on the pressure
            return False
        grown = sample.rss_bytes - self.baseline_bytes
        return grown >= MIN_RETAINED_BYTES and sample.in_flight <= 2 * cfg.min_concurrency

    def _allowed(self, sample: Sample, cost_f: float, cost_q: float = 0.0) -> int:
        """The concurrency whose in-flight memory, over what is not in flight (nor queued), reaches the setpoint."""
        fixed = self._fixed(sample, cost_f, cost_q * sample.queued)
        return int((self.config.setpoint_bytes - fixed) // cost_f)

    def _ramp(self, sample: Sample) -> list[Decision]:
        """Before any pressure: double concurrency from the start value while the requests in flight say it fits."""
        cfg = self.config
        current = self.levers.concurrency
        if self.model.body_bytes <= 0:  # no response held yet: downloads under way cost less than they will
            return []
        cost_f, cost_q = self.model.costs()
        allowed = self._allowed(sample, cost_f, cost_q)
        if max(cfg.min_concurrency, allowed) < current:  # the start was a guess: the sizes now shown say it does not fit
            lowered = max(cfg.min_concurrency, allowed)
            return self._move(lowered, IN_FLIGHT, (
                f"RSS {_mib(sample.rss_bytes)} with responses of {self.model.body_bytes / _MIB:,.1f} MiB, at"
                f" {cost_f / _MIB:,.2f} MiB a request in flight: the start does not fit the"
                f" {_mib(cfg.budget_bytes)} budget, concurrency {current} -> {lowered}"
            ))
        if sample.in_flight < current // 2:  # not that much demand: nothing to learn from, nothing to gain
            return []
        concurrency = min(cfg.base_concurrency, 2 * current, allowed)
        if concurrency <= current:
            return []
        return self._move(concurrency, RESTORE, (
            f"RSS {_mib(sample.rss_bytes)} with {sample.in_flight} in flight at {cost_f / _MIB:,.2f} MiB each: the"
            f" {_mib(cfg.budget_bytes)} budget has room, concurrency {current} -> {concurrency}"
        ))

    def _forecast(self, sample: Sample) -> list[Decision]:
        """Under the act share: lower concurrency before it is reached, when the requests in flight forecast it."""
        cfg = self.config
        cost_f, cost_q = self.model.costs()  # the backlog has its own lever: it takes no concurrency away
        current = self.levers.concurrency
        fixed = self._fixed(sample, cost_f, cost_q * sample.queued)
        if fixed + cost_f * current <= cfg.high_share * cfg.budget_bytes:  # full concurrency stays under the act share
            return []
        if self.levers.item_cap and sample.items_per_response * sample.item_bytes >= cost_f:
            # what a request in flight costs is what its response's items carry, and the item cap holds those: lowered
            # on it, small pages of 50 items of 128 KiB went to concurrency 1 as the crawl ended (4 s to ramp back)
            return []
        allowed = max(cfg.min_concurrency, self._allowed(sample, cost_f, cost_q))
        if allowed >= current or sample.in_flight < allowed:  # fits, or the crawl does not run that many
            return []
        return self._move(allowed, IN_FLIGHT, (
            f"RSS {_mib(sample.rss_bytes)} with {sample.in_flight} in flight at {cost_f / _MIB:,.2f} MiB each: at"
            f" concurrency {current} it would pass {cfg.high_share:.0%} of the {_mib(cfg.budget_bytes)} budget;"
            f" concurrency {allowed}"
        ))

    def _lower(self, sample: Sample) -> list[Decision]:
        """Over the act threshold: free what grows (the backlog first, then what is in flight)."""
        cfg = self.config
        cost_f, cost_q = self.model.costs()
        rss = sample.rss_bytes
        floor = 2 * self.levers.concurrency  # queued requests that keep the downloader busy
        excess = rss - cfg.setpoint_bytes
        decisions: list[Decision] = []
        spillable = max(0, sample.queued - floor)
        queue_bytes = cost_q * spillable
        levers = self.levers
        spill_now = 0
        if sample.queued > floor and not levers.gate_start:
            levers = replace(levers, gate_start=True)
        if spillable >= cfg.spill_min_queued:
            levers = replace(levers, spill=True)
            spill_now = spillable
        if levers != self.levers or spill_now:
            what = f"{spill_now:,} queued requests spilled to disk" if spill_now else "new requests spill to disk"
            if not levers.spill:
                what = "backlog below the spill threshold"
            decisions.append(Decision(
                BACKLOG, levers,
                f"RSS {_mib(rss)} over {cfg.high_share:.0%} of the {_mib(cfg.budget_bytes)} budget with"
                f" {sample.queued:,} requests queued ({cost_q / 1024:,.1f} KiB each): start requests paused, {what}",
                spill_now=spill_now,
            ))
            self.levers = levers
        if queue_bytes >= excess:
            return decisions  # the backlog explains the excess: concurrency is left alone
        decisions.extend(self._cap_items(sample, forecast=False))
        if sample.items * sample.item_bytes >= excess:
            return decisions  # the items inside the pipelines explain it: the cap holds the engine's pulls
        fixed = self._fixed(sample, cost_f, queue_bytes)
        allowed = int((cfg.setpoint_bytes - fixed) // cost_f)
        concurrency = max(cfg.min_concurrency, min(self.levers.concurrency, allowed))
        headroom = max(0.0, cfg.setpoint_bytes - fixed)
        floor_active = max(int(self.model.body_bytes), _MIB)
        active = max(floor_active, min(self.levers.max_active_size, int(headroom / 2)))
        if concurrency < self.levers.concurrency or active < self.levers.max_active_size:
            self.levers = replace(self.levers, concurrency=concurrency, max_active_size=active)
            decisions.append(Decision(
                IN_FLIGHT, self.levers,
                f"RSS {_mib(rss)} over {cfg.high_share:.0%} of the {_mib(cfg.budget_bytes)} budget with"
                f" {sample.in_flight} in flight at {cost_f / _MIB:,.2f} MiB each: concurrency {concurrency}"
                f" (headroom {_mib(headroom)}), scraper active size {_mib(active)}",
            ))
        decisions.extend(self._retained(sample, cost_f, cost_q))
        return decisions

    def _retained(self, sample: Sample, cost_f: float, cost_q: float) -> list[Decision]:
        """Memory neither in flight nor queued: say once that the governor cannot free it."""
        if self._retained_said or self.baseline_bytes is None or not sample.collected:
            return []
        grown = sample.rss_bytes - self.baseline_bytes
        unexplained = grown - cost_f * sample.in_flight - cost_q * sample.queued
        # only with (almost) nothing in flight: a response being parsed costs more than its learned cost says
        few_in_flight = sample.in_flight <= 2 * self.config.min_concurrency
        if grown < MIN_RETAINED_BYTES or unexplained < 0.5 * grown or not few_in_flight:
            return []
        self._retained_said = True
        return [Decision(
            RETAINED, self.levers,
            f"RSS {_mib(sample.rss_bytes)}: {_mib(unexplained)} of the {_mib(grown)} the crawl grew is neither"
            f" in flight nor queued (retained objects, the leak signature): the governor cannot free it",
        )]

    def _restore(self, sample: Sample) -> list[Decision]:
        """Under the restore threshold long enough: give back concurrency (from the headroom) and the backlog."""
        cfg = self.config
        cost_f, _ = self.model.costs()
        current = self.levers.concurrency
        allowed = self._allowed(sample, cost_f)
        concurrency = min(cfg.base_concurrency, max(current + 1, min(allowed, 2 * current)))
        active = min(cfg.base_active_size, max(self.levers.max_active_size * 2, self.levers.max_active_size + _MIB))
        item_cap = self._restored_item_cap(sample)
        levers = Levers(concurrency, active, gate_start=False, spill=False, item_cap=item_cap)
        self._calm_ticks = 0
        if levers == self.levers:  # the headroom gives nothing more: no decision to say (a capped crawl said it
            return []  # every 0.75 s)
        self.levers = levers
        return [Decision(
            RESTORE, self.levers,
            f"RSS {_mib(sample.rss_bytes)} under {cfg.low_share:.0%} of the {_mib(cfg.budget_bytes)} budget:"
            f" concurrency {current} -> {concurrency}, scraper active size {_mib(active)}, start requests read again"
            + (f", items inside the pipelines capped at {item_cap:,}" if item_cap else ""),
        )]

    def _restored_item_cap(self, sample: Sample) -> int:
        """The item cap a restore gives back: as many items as the headroom holds (never less than the cap standing),
        or doubled when no item showed its size; lifted (0) from ITEM_CAP_LIFT on. A cap doubled blindly let 1,728
        items of 128 KiB into the pipelines at 207 MiB of a 300 MiB budget: the crawl peaked at 1.10x."""
        current = self.levers.item_cap
        if current <= 0:
            return 0
        room = self._item_room(sample)
        raised = 2 * current if room is None else max(current, room)
        self._cap_rss = sample.rss_bytes
        return 0 if raised >= ITEM_CAP_LIFT else raised

    def _hard_seconds(self, sample: Sample) -> float:
        """How long the RSS has been over the hard share (infinite without timed samples: the ticks alone count)."""
        if sample.t_seconds is None or self._hard_since is None:
            return float("inf")
        return sample.t_seconds - self._hard_since

    def _close_message(self, sample: Sample) -> str:
        cfg = self.config
        held = self._hard_seconds(sample)
        span = f" ({held:.1f} s)" if held != float("inf") else ""
        stayed = f"stayed over {cfg.hard_share:.0%}" if not self._retained_said else (
            f"passed {cfg.hard_share:.0%} and, with memory retained, stayed over {cfg.high_share:.0%}")
        return (
            f"RSS {_mib(sample.rss_bytes)} {stayed} of the {_mib(cfg.budget_bytes)} budget"
            f" for {self._hard_ticks} ticks{span} with concurrency {self.levers.concurrency}: closing ({MEMORY_BUDGET})"
        )


def coming_item_bytes(pending_responses: int, concurrency: int, items_per_response: float, item_bytes: float) -> float:
    """What the items still to come may carry before a cap could hold them: those of the responses pulled and not yet
    parsed, and at least a full concurrency's worth (the engine pulls up to it while nothing is capped). Counting the
    downloads under way alone, small pages of 50 items of 128 KiB arrived faster than they were counted: the cap came
    at 1,250 items and 6-10 responses later the crawl stood at 1,600 (289-308 MiB of 300), paused while they
    drained, and the trim that followed gave back 213 MiB (10-12 ms, a third of the governor's CPU)."""
    return max(pending_responses, concurrency) * max(0.0, items_per_response) * max(0.0, item_bytes)


def promised_items(items: int, pending_responses: int, items_per_response: float) -> int:
    """What the item cap counts: the items inside the pipelines and those the ``pending_responses`` (requests pulled
    from the scheduler whose callbacks have not run: downloading, waiting at the download gate, queued in the
    scraper) will yield at ``items_per_response`` each."""
    return items + math.ceil(max(0, pending_responses) * max(0.0, items_per_response))


def _mib(num_bytes: float) -> str:
    return f"{num_bytes / _MIB:,.1f} MiB"


def undone_sentence(undone: dict[str, int]) -> str:
    """What a close without JOBDIR leaves uncrawled, and what still finishes, in one clause.

    ``undone`` holds ``queued_requests`` (spilled ones included), ``spilled_requests``, ``unread_start_requests``,
    ``start_counted`` (1: start() was read to its end; 0: it holds at least that many more), ``downloads`` and
    ``items_in_pipelines``.
    """
    queued, spilled = undone.get("queued_requests", 0), undone.get("spilled_requests", 0)
    unread = undone.get("unread_start_requests", 0)
    at_least = "" if undone.get("start_counted", 1) else "at least "
    parts = [f"{queued:,} queued request{'s' if queued != 1 else ''}"
             + (f" ({spilled:,} of them spilled to disk)" if spilled else "")]
    parts.append(f"{at_least}{unread:,} unread start request{'s' if unread != 1 else ''}")
    sentence = f"{' and '.join(parts)} are not crawled"
    downloads, items = undone.get("downloads", 0), undone.get("items_in_pipelines", 0)
    if downloads or items:
        sentence += f"; {downloads:,} downloads under way and {items:,} items inside the item pipelines finish first"
    return sentence


# -- admission by cost, before the parse ------------------------------------------------

#: The parse amplification assumed until a parse was measured: the body and its decoded text.
PARSE_PRIOR = 1.0
#: A parse of a body smaller than this teaches nothing (allocator noise outweighs it).
PARSE_MIN_BODY_BYTES = 256 * 1024
#: Weight of a lower amplification reading (a higher one is taken at once: the admission must not under-count).
PARSE_WEIGHT = 0.2
#: Parses measured one by one before the admission samples them: then one in PARSE_SAMPLE_EVERY, and every parse of a
#: body larger than any measured (the admission reserves room for the largest parse). Measuring each parse read RSS
#: twice a response: on 400 responses of 512 KiB, a fifth of the governor's CPU.
PARSE_LEARN = 8
PARSE_SAMPLE_EVERY = 4


@dataclass
class ParseCost:
    """The parse amplification the governor has seen: RSS a callback added, over its response's body (pure).

    A reading above the estimate is taken at once, a lower one pulls it down slowly (the allocator may reuse memory a
    parse freed, so a reading is a lower bound)."""

    amplification: float = PARSE_PRIOR
    readings: int = 0

    def observe(self, body_bytes: int, rise_bytes: int) -> None:
        """Learn from one callback: its response's body and what RSS rose by while it ran."""
        if body_bytes < PARSE_MIN_BODY_BYTES:
            return
        reading = max(0.0, rise_bytes / body_bytes)
        if self.readings == 0 or reading >= self.amplification:
            self.amplification = max(reading, PARSE_PRIOR) if self.readings == 0 else reading
        else:
            self.amplification = max(PARSE_PRIOR, (1 - PARSE_WEIGHT) * self.amplification + PARSE_WEIGHT * reading)
        self.readings += 1

    def cost(self, body_bytes: float) -> float:
        """What a response of ``body_bytes`` will cost once downloaded and parsed: its body and the parse."""
        return body_bytes * (1.0 + self.amplification)


@dataclass(frozen=True)
class Outstanding:
    """What the downloads let through will add to RSS: bodies on their way, and the largest parse still to come."""

    downloading: int  # downloads let through and not yet received
    announced_count: int  # ... of which the headers announced a size
    announced_bytes: int  # ... the sizes they announced
    mean_body_bytes: float  # the mean body seen (0: none yet)
    largest_body_bytes: float  # the largest body announced or held that is not parsed yet
    yield_bytes: float = 0.0  # what the items a response yields carry, on average (0: none seen)


def projected_bytes(rss_bytes: int, out: Outstanding, parse: ParseCost, *, one_more: bool) -> float:
    """RSS once the downloads under way (and ``one_more``) have arrived, yielded their items, and the largest of them
    is being parsed.

    Bodies on their way count twice (the download's buffer and the response's bytes), and each download the items a
    response yields; parses run one at a time in the reactor thread, so one parse is reserved: the largest body still
    to be parsed, times the amplification seen."""
    unknown = max(0, out.downloading - out.announced_count) + (1 if one_more else 0)
    coming = out.downloading + (1 if one_more else 0)
    bodies = BODY_COPIES * (out.announced_bytes + unknown * out.mean_body_bytes) + coming * out.yield_bytes
    largest = max(out.largest_body_bytes, out.mean_body_bytes if one_more else 0.0)
    return rss_bytes + bodies + parse.amplification * largest


def admits_by_cost(rss_bytes: int, out: Outstanding, parse: ParseCost, limit_bytes: float) -> bool:
    """Whether one more download fits ``limit_bytes`` by what it and those under way will cost (True before any
    response showed its size: the concurrency lever's cautious start governs then)."""
    if out.mean_body_bytes <= 0:
        return True
    return projected_bytes(rss_bytes, out, parse, one_more=True) <= limit_bytes


@dataclass(frozen=True)
class Unmeetable:
    """A request that alone costs more than the headroom under the budget."""

    url: str
    cost_bytes: int  # what it will add to RSS: announced, its body and its parse; measured, its parse
    rss_bytes: int  # the crawl's RSS with nothing else in flight (with the body, once measured)
    budget_bytes: int
    fits_bytes: int  # the least budget that would fit it: RSS now plus its cost
    basis: str  # "announced" (Content-Length) or "measured" (the body received)

    def sentence(self) -> str:
        """One sentence with both numbers and the cause."""
        return (f"{self.url} alone costs {_mib(self.cost_bytes)} ({self.basis} body"
                f" and its parse) against {_mib(max(0, self.budget_bytes - self.rss_bytes))} of headroom"
                f" (RSS {_mib(self.rss_bytes)} with nothing else in flight): the {_mib(self.budget_bytes)} budget"
                " cannot be met;"
                f" a budget of at least {_mib(self.fits_bytes)} would fit it")


def unmeetable(url: str, body_bytes: int, basis: str, rss_bytes: int, budget_bytes: int,
               parse: ParseCost) -> Unmeetable | None:
    """The statement that one request alone passes the budget, or None when it fits the headroom.

    ``basis`` "announced": the body is not in RSS yet (its cost is the body and its parse); "measured": it is (the
    parse alone is still to come)."""
    if body_bytes <= 0:
        return None
    cost = int(parse.cost(body_bytes) if basis == "announced" else parse.amplification * body_bytes)
    if cost <= budget_bytes - rss_bytes:
        return None
    fits = -(-(rss_bytes + cost) // _MIB) * _MIB  # rounded up to a MiB
    return Unmeetable(url, cost, rss_bytes, budget_bytes, fits, basis)

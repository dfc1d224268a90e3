"""Results, kill plans, verdicts and budget checks of a scrapy-redis cluster crawl (pure: no pytest, Scrapy or redis).

Runs in the pytest process. All sizes in bytes, times in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.assemble import RunFacts, assemble
from pytest_crawlmem.core.budgets import LEAK_VERDICTS, SPECS, Budgets, Violation, check_budgets
from pytest_crawlmem.core.ledger import Ledger
from pytest_crawlmem.core.models import CrawlResult, Growth, Peaks
from pytest_crawlmem.core.units import format_size

KILL_SIGNALS = ("KILL", "TERM")
#: scheduler-backlog: the shared queue peaked at this many requests or more ...
BACKLOG_MIN_REQUESTS = 1000
#: ... and at this share of every request scheduled (most of the frontier waited in Redis at once).
BACKLOG_SHARE = 0.5
#: Worker verdicts that describe memory held while the crawl runs, in the order they win.
WORKER_PRESSURE = verdicts.PRESSURE


class ClusterError(ValueError):
    """A crawl_cluster argument that is not valid; the message names it."""


@dataclass(frozen=True)
class KillPlan:
    """Which worker to stop, after how many of its responses, with which signal."""

    worker: int
    after_responses: int
    signal: str = "KILL"

    def describe(self) -> str:
        """``SIGKILL of worker 1 after 500 responses``."""
        return f"SIG{self.signal} of worker {self.worker} after {self.after_responses:,} responses"


def parse_kill(value: object, workers: int, *, source: str = "crawl_cluster(kill=...)") -> KillPlan | None:
    """Validate ``kill={"worker": i, "after_responses": n, "signal": "KILL"|"TERM"}``; ``None`` stays ``None``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ClusterError(f"invalid kill {value!r} in {source}: expected a dict with worker, after_responses, signal")
    unknown = set(value) - {"worker", "after_responses", "signal"}
    if unknown or "worker" not in value or "after_responses" not in value:
        raise ClusterError(f"invalid kill {dict(value)!r} in {source}: expected keys worker, after_responses"
                           f" and optionally signal{f'; unknown: {sorted(unknown)}' if unknown else ''}")
    worker, after, sig = value["worker"], value["after_responses"], value.get("signal", "KILL")
    if not isinstance(worker, int) or isinstance(worker, bool) or not 0 <= worker < workers:
        raise ClusterError(f"invalid kill worker {worker!r} in {source}: expected an index from 0 to {workers - 1}")
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ClusterError(f"invalid kill after_responses {after!r} in {source}: expected a count >= 0")
    if sig not in KILL_SIGNALS:
        raise ClusterError(f"invalid kill signal {sig!r} in {source}: expected 'KILL' or 'TERM'")
    return KillPlan(worker, after, str(sig))


@dataclass(frozen=True, slots=True)
class RedisSample:
    """One reading of the cluster's Redis by the coordinator."""

    t_seconds: float
    queue: int  # requests waiting in the shared queue
    used_memory_bytes: int  # Redis used_memory less the ledger's own keys
    dupefilter: int  # fingerprints in the dupefilter
    start_urls: int  # start URLs waiting in a RedisSpider's redis_key
    responses: int  # responses of all workers so far
    processed: int  # requests processed by all workers so far
    ledger_bytes: int = 0  # what the ledger's keys took (left out of used_memory_bytes)

    def to_json(self) -> dict[str, Any]:
        """Return the sample as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class WorkerEnd:
    """How one worker ended."""

    worker: int
    exit_code: int | None
    how: str  # "finished", "killed", "terminated", "crashed", "stopped"
    detail: str = ""
    responses_at_signal: int | None = None


@dataclass(frozen=True)
class ClusterResult:
    """What a cluster crawl measured; returned by the ``crawl_cluster`` fixture."""

    spider: str
    workers: tuple[CrawlResult, ...]
    redis_samples: tuple[RedisSample, ...]
    ledger: Ledger
    verdict: str
    reason: str
    duration_seconds: float
    ends: tuple[WorkerEnd, ...] = ()
    kill: KillPlan | None = None
    redis_peak_memory: int = 0
    report_dir: Path | None = None
    errors: tuple[str, ...] = ()  # what went wrong with the cluster itself (a planned failure that never fired, the deadline)

    @property
    def max_queue(self) -> int:
        """Most requests waiting in the shared Redis queue at any sample."""
        return max((s.queue for s in self.redis_samples), default=0)

    @property
    def max_dupefilter(self) -> int:
        """Most fingerprints in the dupefilter at any sample."""
        return max((s.dupefilter for s in self.redis_samples), default=0)

    @property
    def scheduled(self) -> int:
        """Requests pushed to the shared queue."""
        return self.ledger.scheduled

    @property
    def taken(self) -> int:
        """Requests popped from the shared queue by a worker."""
        return self.ledger.taken

    @property
    def processed(self) -> int:
        """Requests a worker finished (downloaded, callback and its output handled)."""
        return self.ledger.processed

    @property
    def lost(self) -> int:
        """Requests scheduled and never processed."""
        return self.ledger.lost

    @property
    def lost_urls(self) -> tuple[str, ...]:
        """URL of each lost request (a URL lost twice appears twice)."""
        return tuple(r.url for r in self.ledger.lost_urls)

    @property
    def processed_twice(self) -> int:
        """URLs the cluster processed more than once (retries not counted)."""
        return self.ledger.processed_twice

    @property
    def items_scraped(self) -> int:
        """Items of all workers."""
        return sum(w.items_scraped for w in self.workers)

    @property
    def responses(self) -> int:
        """Responses of all workers."""
        return sum(w.responses for w in self.workers)

    @property
    def replay_hits(self) -> int:
        """Responses of all workers the replay recording answered."""
        return sum(w.replay_hits for w in self.workers)

    @property
    def replay_missed_urls(self) -> tuple[str, ...]:
        """Distinct URLs of a replayed cluster that no recording entry answered (a URL two workers missed is one)."""
        return tuple(dict.fromkeys(u for w in self.workers for u in w.replay_missed_urls))

    @property
    def replay_misses(self) -> int:
        """Distinct requests of a replayed cluster not in the recording (as ``crawl()`` counts them, whichever worker asked)."""
        return len(self.replay_missed_urls)

    @property
    def cluster_rss(self) -> int:
        """Sum of the workers' peak RSS (what the machine must hold if their peaks meet)."""
        return sum(w.peak_rss for w in self.workers)

    @property
    def work_shares(self) -> tuple[float, ...]:
        """Each worker's share of the responses (0-1)."""
        total = self.responses
        return tuple(w.responses / total if total else 0.0 for w in self.workers)


def cluster_summary(result: ClusterResult) -> CrawlResult:
    """The cluster as one crawl, for the summary row, --junitxml and baselines: summed RSS, each peak the most a worker
    reached, the cluster verdict (assembled like every result: ``core.assemble``)."""
    workers = result.workers
    facts = RunFacts(
        spider=f"{result.spider} x{len(workers)}", duration_seconds=result.duration_seconds, finish_reason="cluster",
        start_rss=sum(w.start_rss for w in workers), end_rss=sum(w.end_rss for w in workers), peak_rss=result.cluster_rss,
        responses=result.responses, items_scraped=result.items_scraped, interval_seconds=0.0, errors=result.errors,
        report_dir=result.report_dir,
    )
    return assemble(facts, (), (), Growth(result.verdict, result.reason), peaks=cluster_peaks(result))


def cluster_peaks(result: ClusterResult) -> Peaks:
    """Each peak the most any worker reached, but the scheduler's: the shared queue's longest (workers read 0)."""
    peaks: dict[str, Any] = {}
    for spec in fields(Peaks):
        values = [getattr(w.peaks, spec.name) for w in result.workers if getattr(w.peaks, spec.name) is not None]
        if values:  # else the field's default (0, or None: no JOBDIR, no media pipeline)
            peaks[spec.name] = max(values)
    return replace(Peaks(**peaks), max_scheduled=result.max_queue)


def cluster_verdict(workers: Sequence[CrawlResult], samples: Sequence[RedisSample], ledger: Ledger) -> tuple[str, str]:
    """The cluster's verdict and its reason: a worker's leak first, then a backlog read from the Redis queue.

    Per-worker verdicts never credit the shared queue to a worker (the worker's scheduler length reads 0).
    """
    for index, worker in enumerate(workers):
        if worker.verdict in LEAK_VERDICTS:
            return worker.verdict, f"worker {index}: {worker.growth.reason}"
    peak = max((s.queue for s in samples), default=0)
    if peak >= BACKLOG_MIN_REQUESTS and ledger.scheduled and peak >= BACKLOG_SHARE * ledger.scheduled:
        at = max(samples, key=lambda s: s.queue)
        return verdicts.SCHEDULER_BACKLOG, (
            f"the shared Redis queue peaked at {peak:,} requests ({peak / ledger.scheduled:.0%} of the"
            f" {ledger.scheduled:,} scheduled) with Redis at {format_size(at.used_memory_bytes)}: the frontier was"
            " discovered much faster than the workers fetched it"
        )
    for verdict in WORKER_PRESSURE:
        for index, worker in enumerate(workers):
            if worker.verdict == verdict:
                return verdict, f"worker {index}: {worker.growth.reason}"
    judged = [(i, w) for i, w in enumerate(workers) if w.verdict != verdicts.INCONCLUSIVE]
    if judged and all(w.verdict == verdicts.STEADY for _, w in judged):
        skipped = len(workers) - len(judged)
        note = f" ({skipped} worker{'s' if skipped > 1 else ''} too short to judge)" if skipped else ""
        return verdicts.STEADY, f"every judged worker levelled off{note}; the shared queue peaked at {peak:,} requests"
    busiest = max(range(len(workers)), key=lambda i: workers[i].responses, default=None)
    why = (f": the busiest, worker {busiest} ({workers[busiest].responses:,} responses): {workers[busiest].growth.reason}"
           if busiest is not None else "")
    return verdicts.INCONCLUSIVE, f"no worker crawled long enough of its own to judge its growth{why}"


def check_cluster(budgets: Budgets, result: ClusterResult) -> list[Violation]:
    """Every cluster budget ``result`` broke, each row's ``cluster`` check in the order of ``budgets.SPECS``: the shared
    queue's max_scheduled, leak="fail" that could judge no worker (a warning), lost, redis_memory, cluster_rss."""
    found = [spec.cluster(spec, budgets, result) for spec in SPECS.values() if spec.cluster is not None]
    return [v for v in found if v is not None]


def check_worker(budgets: Budgets, index: int, worker: CrawlResult) -> list[Violation]:
    """The per-worker budgets (the crawl_memory ones) of worker ``index``, each message naming the worker.

    ``min_responses`` is the cluster's (a worker may find no work while the others crawl), and so is the
    warning that ``leak="fail"`` could not judge: one worker judged is enough (see :func:`check_cluster`).
    """
    return [Violation(v.budget, v.measured, v.limit, f"worker {index}: {v.message}", v.fails)
            for v in check_budgets(budgets, worker)
            if v.budget != "min_responses"
            and not (v.of_verdict and not v.fails and worker.verdict == verdicts.INCONCLUSIVE)]

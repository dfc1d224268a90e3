"""The request ledger of a scrapy-redis cluster: Redis key names and the settling arithmetic (pure: no pytest, Scrapy or redis).

Every request pushed to the shared queue is an *entry*, named by the SHA-1 of its serialized
form (the queue element). Workers record, in the same Redis script that moves the element,
that it was scheduled (pushed) or taken (popped, by which worker), and record it processed
when the engine is done with it (downloaded, callback and its output handled). At the end::

    scheduled = taken + removed from the queue (a flush) + left in the queue
    taken     = processed + lost in a worker (taken, never finished: the worker died)

and ``lost`` is everything scheduled that was not processed. Runs in the pytest process
(settling) and in the workers (key names).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PREFIX = "crawlmem:"


@dataclass(frozen=True)
class LedgerKeys:
    """Redis keys of the ledger (all under ``crawlmem:``, never touched by scrapy-redis)."""

    prefix: str = PREFIX

    @property
    def scheduled(self) -> str:
        """HASH entry -> times pushed."""
        return self.prefix + "scheduled"

    @property
    def urls(self) -> str:
        """HASH entry -> URL."""
        return self.prefix + "urls"

    def taken(self, worker: int) -> str:
        """HASH entry -> times popped by ``worker``."""
        return f"{self.prefix}taken:{worker}"

    def processed(self, worker: int) -> str:
        """HASH entry -> times ``worker`` finished it."""
        return f"{self.prefix}processed:{worker}"

    @property
    def retries(self) -> str:
        """SET of entries that were retries (``meta['retry_times']``): not counted as work done twice."""
        return self.prefix + "retries"

    @property
    def counts(self) -> str:
        """HASH ``taken:W`` / ``processed:W`` / ``responses:W`` -> count, for the coordinator's cheap reads."""
        return self.prefix + "counts"

    @property
    def events(self) -> str:
        """Counter bumped by every push, pop and finish: the coordinator's "nothing moved" check."""
        return self.prefix + "events"

    @property
    def ready(self) -> str:
        """HASH worker -> 1 once its spider went idle for the first time (its start requests are all out)."""
        return self.prefix + "ready"

    @property
    def flushes(self) -> str:
        """HASH worker -> elements its scheduler deleted from the queue when it closed (SCHEDULER_PERSIST=False)."""
        return self.prefix + "flushes"

    @property
    def done(self) -> str:
        """Set by the coordinator when the crawl is over: workers close their spiders."""
        return self.prefix + "done"

    def all_keys(self, workers: int) -> list[str]:
        """Every ledger key, for measuring the ledger's own Redis memory."""
        per_worker = [k for w in range(workers) for k in (self.taken(w), self.processed(w))]
        return [self.scheduled, self.urls, self.retries, self.counts, self.events, self.ready, self.flushes, *per_worker]


@dataclass(frozen=True, slots=True)
class LostRequest:
    """A request scheduled and never processed: its URL, and where it was lost."""

    url: str
    where: str  # "worker" (taken by a worker that never finished it), "queue" (deleted from the queue), "left", "start"
    worker: int | None = None

    def describe(self) -> str:
        """``URL (taken by worker 1, which never finished it)``."""
        how = {
            "worker": f"taken by worker {self.worker}, which never finished it",
            "queue": "deleted from the shared queue before any worker took it",
            "left": "still in the shared queue when the cluster ended",
            "start": "a start URL popped from the spider's redis_key and never scheduled",
        }[self.where]
        return f"{self.url} ({how})"

    def to_json(self) -> dict[str, Any]:
        """Return the entry as a JSON-ready dict."""
        return {"url": self.url, "where": self.where, "worker": self.worker}


@dataclass(frozen=True)
class LedgerState:
    """What the ledger keys held when every worker had stopped (read from Redis by the coordinator)."""

    scheduled: Mapping[str, int]
    urls: Mapping[str, str]
    taken: Mapping[int, Mapping[str, int]]
    processed: Mapping[int, Mapping[str, int]]
    retries: frozenset[str] = frozenset()
    left: Mapping[str, int] = field(default_factory=dict)  # entries still in the queue: entry -> copies
    seeded_urls: tuple[str, ...] = ()  # start URLs pushed to a RedisSpider's redis_key
    left_start_urls: tuple[str, ...] = ()  # of which still in the key at the end
    flushes: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Ledger:
    """Where every request of the cluster went; ``lost_urls`` names what was lost and how."""

    scheduled: int
    taken: int
    processed: int
    lost: int
    lost_in_workers: int
    removed_from_queue: int
    left_in_queue: int
    lost_start_urls: int
    lost_urls: tuple[LostRequest, ...]
    processed_twice: int
    twice_urls: tuple[str, ...]
    taken_by_worker: Mapping[int, int]
    processed_by_worker: Mapping[int, int]
    flushes: Mapping[int, int] = field(default_factory=dict)

    @property
    def balanced(self) -> bool:
        """Both identities hold: taken = processed + lost in workers; scheduled = taken + removed + left."""
        return (self.taken == self.processed + self.lost_in_workers
                and self.scheduled == self.taken + self.removed_from_queue + self.left_in_queue)

    def to_json(self) -> dict[str, Any]:
        """Return the ledger as a JSON-ready dict."""
        return {
            "scheduled": self.scheduled, "taken": self.taken, "processed": self.processed, "lost": self.lost,
            "lost_in_workers": self.lost_in_workers, "removed_from_queue": self.removed_from_queue,
            "left_in_queue": self.left_in_queue, "lost_start_urls": self.lost_start_urls,
            "lost_urls": [r.to_json() for r in self.lost_urls], "processed_twice": self.processed_twice,
            "twice_urls": list(self.twice_urls), "balanced": self.balanced,
            "taken_by_worker": {str(k): v for k, v in self.taken_by_worker.items()},
            "processed_by_worker": {str(k): v for k, v in self.processed_by_worker.items()},
            "flushes": {str(k): v for k, v in self.flushes.items()},
        }

    def describe_lost(self, shown: int = 5) -> str:
        """The first ``shown`` lost requests, and how many more."""
        named = "; ".join(r.describe() for r in self.lost_urls[:shown])
        more = self.lost - min(shown, len(self.lost_urls))
        return named + (f"; and {more:,} more" if more > 0 else "")


def _total(counts: Iterable[Mapping[str, int]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for by_entry in counts:
        total.update(by_entry)
    return total


def settle(state: LedgerState) -> Ledger:
    """Account for every request: processed, lost in a worker, deleted from the queue, left in it, or a lost start URL."""
    taken_total = _total(state.taken.values())
    processed_total = _total(state.processed.values())
    scheduled: Counter[str] = Counter(state.scheduled)
    for entry, times in taken_total.items():  # a push the ledger missed (made outside the hooks) still counts
        scheduled[entry] = max(scheduled[entry], times + state.left.get(entry, 0))
    lost: list[LostRequest] = []
    lost_in_workers = 0
    for worker in sorted(state.taken):
        done = state.processed.get(worker, {})
        for entry, times in sorted(state.taken[worker].items()):
            missing = times - done.get(entry, 0)
            if missing > 0:
                lost_in_workers += missing
                lost += [LostRequest(state.urls.get(entry, f"<entry {entry[:12]}>"), "worker", worker)] * missing
    removed = 0
    for entry, times in sorted(scheduled.items()):
        gone = times - taken_total[entry] - state.left.get(entry, 0)
        if gone > 0:
            removed += gone
            lost += [LostRequest(state.urls.get(entry, f"<entry {entry[:12]}>"), "queue")] * gone
    left = sum(state.left.values())
    lost += [LostRequest(state.urls.get(e, f"<entry {e[:12]}>"), "left") for e, n in sorted(state.left.items()) for _ in range(n)]
    scheduled_urls = set(state.urls.values())
    missing_starts = [u for u in state.seeded_urls if u not in scheduled_urls and u not in set(state.left_start_urls)]
    lost += [LostRequest(u, "start") for u in missing_starts]
    twice = _processed_twice(processed_total, state.urls, state.retries)
    processed = sum(processed_total.values())
    return Ledger(
        scheduled=sum(scheduled.values()),
        taken=sum(taken_total.values()),
        processed=processed,
        lost=lost_in_workers + removed + left + len(missing_starts),
        lost_in_workers=lost_in_workers,
        removed_from_queue=removed,
        left_in_queue=left,
        lost_start_urls=len(missing_starts),
        lost_urls=tuple(lost),
        processed_twice=len(twice),
        twice_urls=tuple(twice),
        taken_by_worker={w: sum(c.values()) for w, c in sorted(state.taken.items())},
        processed_by_worker={w: sum(c.values()) for w, c in sorted(state.processed.items())},
        flushes=dict(state.flushes),
    )


def _processed_twice(processed: Mapping[str, int], urls: Mapping[str, str], retries: frozenset[str]) -> list[str]:
    """URLs whose requests were processed more than once, not counting retries (work the cluster did twice)."""
    per_url: Counter[str] = Counter()
    for entry, times in processed.items():
        if entry not in retries and entry in urls:
            per_url[urls[entry]] += times
    return sorted(url for url, times in per_url.items() if times > 1)

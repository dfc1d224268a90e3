"""Runs a scrapy-redis cluster crawl: a private Redis, N isolated workers, the coordinator loop (pytest process, no pytest).

The coordinator seeds the start URLs, samples Redis, injects the planned worker failure, and
declares the crawl done when every live worker has sent out its start requests, none holds a
request it took, the shared queue and the start key are empty, and nothing moved between two
readings. Then it sets the done key (workers close their spiders), waits for them, reads the
ledger and stops Redis.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_crawlmem.cluster.redisserver import RedisServer, start_redis
from pytest_crawlmem.cluster.worker import entry_of
from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.cluster import ClusterError, ClusterResult, KillPlan, RedisSample, WorkerEnd, cluster_verdict
from pytest_crawlmem.core.defaults import settings_of
from pytest_crawlmem.core.ledger import Ledger, LedgerKeys, LedgerState, settle
from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.harness.isolated import IsolatedChild, check_child, child_result, launch_isolated, spec_for, stop_child
from pytest_crawlmem.measure.runner import CrawlOptions

WORKER_EXTENSION = "pytest_crawlmem.cluster.worker.ClusterWorkerExtension"
REDIS_SCHEDULER = "scrapy_redis.scheduler.Scheduler"
REDIS_DUPEFILTER = "scrapy_redis.dupefilter.RFPDupeFilter"
POLL_SECONDS = 0.05
SAMPLE_SECONDS = 0.2
#: Done needs the same quiet reading this far apart (a RedisSpider pops start URLs, then pushes them).
QUIET_SECONDS = 0.3
CLOSE_TIMEOUT_SECONDS = 30.0
DEFAULT_TIMEOUT_SECONDS = 900.0
GRACE_SECONDS = 2.0


@dataclass(frozen=True)
class ClusterOptions:
    """How to run and measure one cluster crawl."""

    workers: int = 3
    worker_options: CrawlOptions = field(default_factory=CrawlOptions)
    report_dir: Path | None = None
    kill: KillPlan | None = None

    @property
    def timeout_seconds(self) -> float | None:
        """The test's ``timeout`` budget, carried by the workers' options (``None``: DEFAULT_TIMEOUT_SECONDS)."""
        return self.worker_options.timeout_seconds


@dataclass(frozen=True)
class RedisKeys:
    """The scrapy-redis keys of one spider."""

    queue: str
    dupefilter: str
    start: str | None  # a RedisSpider's redis_key; None for other spiders
    start_kind: str = "list"  # list, set or zset (REDIS_START_URLS_AS_SET / _AS_ZSET)


def redis_keys(spider_cls: type, settings: Mapping[str, Any]) -> RedisKeys:
    """Work out the queue, dupefilter and start-URL keys scrapy-redis will use for ``spider_cls``."""
    from scrapy_redis import defaults
    from scrapy_redis.spiders import RedisMixin

    name = getattr(spider_cls, "name", None) or spider_cls.__name__
    queue = str(settings.get("SCHEDULER_QUEUE_KEY") or defaults.SCHEDULER_QUEUE_KEY) % {"spider": name}
    dupefilter = str(settings.get("SCHEDULER_DUPEFILTER_KEY") or defaults.SCHEDULER_DUPEFILTER_KEY) % {"spider": name}
    start = None
    kind = "list"
    if issubclass(spider_cls, RedisMixin):
        key = getattr(spider_cls, "redis_key", None) or settings.get("REDIS_START_URLS_KEY") or defaults.START_URLS_KEY
        start = str(key) % {"name": name}
        kind = ("set" if settings.get("REDIS_START_URLS_AS_SET")
                else "zset" if settings.get("REDIS_START_URLS_AS_ZSET") else "list")
    return RedisKeys(queue, dupefilter, start, kind)


#: Under the project's, the spider's and the test's settings: scrapy-redis unless they configure it themselves.
BASE_SETTINGS = {"SCHEDULER": REDIS_SCHEDULER, "DUPEFILTER_CLASS": REDIS_DUPEFILTER}


def worker_settings(user: Mapping[str, Any] | None, server: RedisServer, index: int) -> dict[str, Any]:
    """The test's settings for worker ``index``, pointed at the cluster's private Redis (whatever the project says)."""
    return {**dict(user or {}), "REDIS_URL": server.url, "REDIS_HOST": None, "REDIS_PORT": None,
            **settings_of(cluster_worker=index)}


def worker_options(options: ClusterOptions, index: int) -> CrawlOptions:
    """How worker ``index`` is measured: the cluster's options, its own report dir, scrapy-redis and the ledger."""
    return replace(options.worker_options, report_dir=_worker_dir(options.report_dir, index),
                   base_settings={**options.worker_options.base_settings, **BASE_SETTINGS},
                   extensions={**options.worker_options.extensions, WORKER_EXTENSION: 0})


def seed(client: Any, keys: RedisKeys, start_urls: list[str]) -> None:
    """Push a RedisSpider's start URLs to its redis_key, as JSON messages, in order."""
    if keys.start is None or not start_urls:
        return
    messages = [json.dumps({"url": u}) for u in start_urls]
    if keys.start_kind == "set":
        client.sadd(keys.start, *messages)
    elif keys.start_kind == "zset":
        client.zadd(keys.start, {m: -i for i, m in enumerate(messages)})
    else:
        client.rpush(keys.start, *messages)


def _length(client: Any, key: str | None) -> int:
    """Elements in a list, set or sorted set (0 when absent)."""
    if key is None:
        return 0
    kind = client.type(key)
    kind = kind.decode() if isinstance(kind, bytes) else kind
    return int({"zset": client.zcard, "list": client.llen, "set": client.scard}.get(kind, lambda _: 0)(key))


def _elements(client: Any, key: str | None) -> list[bytes]:
    """Every element of a list, set or sorted set."""
    if key is None:
        return []
    kind = client.type(key)
    kind = kind.decode() if isinstance(kind, bytes) else kind
    if kind == "zset":
        return list(client.zrange(key, 0, -1))
    if kind == "list":
        return list(client.lrange(key, 0, -1))
    if kind == "set":
        return list(client.smembers(key))
    return []


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ints(mapping: Mapping[Any, Any]) -> dict[str, int]:
    return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in mapping.items()}


class Coordinator:
    """Watches the workers and Redis, injects the planned failure, and decides when the crawl is done."""

    def __init__(self, server: RedisServer, keys: RedisKeys, children: list[IsolatedChild], kill: KillPlan | None) -> None:
        self.client = server.client()
        self.keys = keys
        self.ledger_keys = LedgerKeys()
        self.children = children
        self.kill = kill
        self.kill_fired_at: int | None = None
        self.samples: list[RedisSample] = []
        self.started = time.monotonic()
        self._quiet: tuple[int, float] | None = None  # (events, since) of the last reading that looked done
        self._next_sample = 0.0

    def counts(self) -> dict[str, int]:
        """``taken:W``, ``processed:W``, ``responses:W`` of every worker."""
        return _ints(self.client.hgetall(self.ledger_keys.counts))

    def step(self, grace: float) -> bool:
        """One turn: watch the children, fire the kill, sample; return whether the crawl is done."""
        alive = [check_child(c, grace) for c in self.children]
        counts = self.counts()
        self._maybe_kill(counts, alive)
        now = time.monotonic()
        if now >= self._next_sample:
            self._next_sample = now + SAMPLE_SECONDS
            self.sample(counts)
        return self._done(counts, alive, now)

    def _maybe_kill(self, counts: Mapping[str, int], alive: list[bool]) -> None:
        plan = self.kill
        if plan is None or self.kill_fired_at is not None or not alive[plan.worker]:
            return
        responses = counts.get(f"responses:{plan.worker}", 0)
        if responses >= plan.after_responses:
            self.kill_fired_at = responses
            os.kill(self.children[plan.worker].process.pid, signal.SIGKILL if plan.signal == "KILL" else signal.SIGTERM)

    def _done(self, counts: Mapping[str, int], alive: list[bool], now: float) -> bool:
        if not any(alive):  # every worker ended (killed, crashed, interrupted): nothing more can happen
            return True
        ready = {int(k) for k in _ints(self.client.hgetall(self.ledger_keys.ready))}
        busy = any(
            is_alive and (i not in ready or counts.get(f"taken:{i}", 0) != counts.get(f"processed:{i}", 0))
            for i, is_alive in enumerate(alive)
        )
        if busy or _length(self.client, self.keys.queue) or _length(self.client, self.keys.start):
            self._quiet = None
            return False
        events = int(self.client.get(self.ledger_keys.events) or 0)
        if self._quiet is None or self._quiet[0] != events:
            self._quiet = (events, now)
            return False
        return now - self._quiet[1] >= QUIET_SECONDS

    def sample(self, counts: Mapping[str, int]) -> None:
        """Read the queue, Redis memory (less the ledger's keys) and the dupefilter."""
        pipe = self.client.pipeline(transaction=False)
        ledger = self.ledger_keys.all_keys(len(self.children))
        for key in ledger:
            pipe.memory_usage(key)
        pipe.scard(self.keys.dupefilter)
        *usage, dupefilter = pipe.execute()
        ledger_bytes = sum(int(u or 0) for u in usage)
        used = int(self.client.info("memory")["used_memory"])
        self.samples.append(RedisSample(
            t_seconds=round(time.monotonic() - self.started, 3),
            queue=_length(self.client, self.keys.queue),
            used_memory_bytes=max(0, used - ledger_bytes),
            dupefilter=int(dupefilter or 0),
            start_urls=_length(self.client, self.keys.start),
            responses=sum(v for k, v in counts.items() if k.startswith("responses:")),
            processed=sum(v for k, v in counts.items() if k.startswith("processed:")),
            ledger_bytes=ledger_bytes,
        ))

    def read_ledger(self, seeded: list[str]) -> Ledger:
        """Settle the ledger from Redis (call once every worker has stopped)."""
        lk, c = self.ledger_keys, self.client
        workers = range(len(self.children))
        left = Counter(entry_of(e) for e in _elements(c, self.keys.queue))
        start_left = []
        for message in _elements(c, self.keys.start):
            try:
                start_left.append(str(json.loads(message)["url"]))
            except (ValueError, KeyError, TypeError):
                start_left.append(_text(message))
        state = LedgerState(
            scheduled=_ints(c.hgetall(lk.scheduled)),
            urls={_text(k): _text(v) for k, v in c.hgetall(lk.urls).items()},
            taken={w: _ints(c.hgetall(lk.taken(w))) for w in workers},
            processed={w: _ints(c.hgetall(lk.processed(w))) for w in workers},
            retries=frozenset(_text(m) for m in c.smembers(lk.retries)),
            left=dict(left),
            seeded_urls=tuple(seeded),
            left_start_urls=tuple(start_left),
            flushes={int(k): v for k, v in _ints(c.hgetall(lk.flushes)).items()},
        )
        return settle(state)

    def peak_memory(self) -> int:
        """The highest Redis memory sampled, less the ledger's keys."""
        return max((s.used_memory_bytes for s in self.samples), default=0)


def _end_of(index: int, child: IsolatedChild, plan: KillPlan | None, fired_at: int | None, stopped: bool) -> WorkerEnd:
    """Describe how worker ``index`` ended."""
    code = child.process.returncode
    if plan is not None and plan.worker == index and fired_at is not None:
        how = "killed" if plan.signal == "KILL" else "terminated"
        return WorkerEnd(index, code, how, f"SIG{plan.signal} after {fired_at:,} responses (planned)", fired_at)
    if child.killed:
        return WorkerEnd(index, code, "killed", child.killed)
    if stopped:
        return WorkerEnd(index, code, "stopped", "the coordinator stopped it at the cluster's deadline")
    return WorkerEnd(index, code, "finished" if code == 0 else "crashed", "" if code == 0 else f"exit code {code}")


def run_cluster(
    spider_cls: type,
    *,
    start_urls: list[str] | None,
    settings: Mapping[str, Any] | None,
    spider_kwargs: Mapping[str, Any],
    options: ClusterOptions,
) -> ClusterResult:
    """Run ``spider_cls`` on ``options.workers`` scrapy-redis workers against a private Redis; return what was measured."""
    try:
        spec_for(spider_cls, start_urls=None, settings=None, spider_kwargs={}, options=options.worker_options)
    except ValueError as exc:
        raise ClusterError(f"crawl_cluster runs every worker in a process of its own: {exc}") from None
    server = start_redis()
    children: list[IsolatedChild] = []
    errors: list[str] = []
    try:
        keys = redis_keys(spider_cls, {**(getattr(spider_cls, "custom_settings", None) or {}), **(settings or {})})
        urls = list(start_urls if start_urls is not None else getattr(spider_cls, "start_urls", []) or [])
        seeded = urls if keys.start is not None else []
        seed(server.client(), keys, seeded)
        with tempfile.TemporaryDirectory(prefix="crawlmem-cluster-") as tmp:
            for index in range(options.workers):
                worker_urls = None if keys.start is not None else (urls if index == 0 else [])
                spec = spec_for(spider_cls, start_urls=worker_urls, settings=worker_settings(settings, server, index),
                                spider_kwargs=spider_kwargs, options=worker_options(options, index))
                directory = Path(tmp) / f"worker-{index}"
                directory.mkdir()
                children.append(launch_isolated(spec, directory))
            coordinator = Coordinator(server, keys, children, options.kill)
            stopped = _run_to_done(coordinator, options, errors)
            stderr = _wait_for_workers(children)
            counts = coordinator.counts()
            name = str(getattr(spider_cls, "name", None) or spider_cls.__name__)
            results = [_counted(child_result(c, err, why=_why(i, options.kill, coordinator.kill_fired_at)),
                                counts.get(f"responses:{i}", 0), name)
                       for i, (c, err) in enumerate(zip(children, stderr, strict=True))]
            ledger = coordinator.read_ledger(seeded)
            ends = tuple(_end_of(i, c, options.kill, coordinator.kill_fired_at, stopped) for i, c in enumerate(children))
    finally:
        for child in children:
            if child.process.returncode is None:
                stop_child(child)
        server.close()
    verdict, reason = cluster_verdict(results, coordinator.samples, ledger)
    if options.kill is not None and coordinator.kill_fired_at is None:
        errors.append(f"the planned {options.kill.describe()} never fired: worker {options.kill.worker} got"
                      f" {results[options.kill.worker].responses:,} responses")
    return ClusterResult(
        spider=getattr(spider_cls, "name", spider_cls.__name__),
        workers=tuple(results),
        redis_samples=tuple(coordinator.samples),
        ledger=ledger,
        verdict=verdict,
        reason=reason,
        duration_seconds=round(time.monotonic() - coordinator.started, 3),
        ends=ends,
        kill=options.kill,
        redis_peak_memory=coordinator.peak_memory(),
        report_dir=options.report_dir,
        errors=tuple(errors),
    )


def _worker_dir(report_dir: Path | None, index: int) -> Path | None:
    return report_dir / f"worker-{index}" if report_dir is not None else None


def _counted(result: CrawlResult, responses: int, spider: str) -> CrawlResult:
    """A worker's result named by its spider, with the responses the ledger counted when its own stream lags.

    A killed worker's last sample is older than its last response, and a worker killed before it reported is
    rebuilt from its class: both read as the other workers do (the spider's name; one count everywhere).
    """
    if responses <= result.responses:
        return replace(result, spider=spider)
    growth = result.growth
    if growth.verdict == verdicts.INCONCLUSIVE:
        growth = replace(growth, reason=f"{responses:,} responses (its own samples stopped at {result.responses:,}"
                                        " when it ended), too few drained checkpoints to judge its growth")
    return replace(result, spider=spider, responses=responses, growth=growth)


def _why(index: int, plan: KillPlan | None, fired_at: int | None) -> str:
    if plan is not None and plan.worker == index and fired_at is not None:
        return f"worker {index} was stopped by the planned SIG{plan.signal} after {fired_at:,} responses"
    return ""


def _run_to_done(coordinator: Coordinator, options: ClusterOptions, errors: list[str]) -> bool:
    """Poll until the crawl is done (set the done key) or the deadline passes; return whether the deadline stopped it."""
    deadline = coordinator.started + (options.timeout_seconds or DEFAULT_TIMEOUT_SECONDS) + GRACE_SECONDS
    while not coordinator.step(GRACE_SECONDS):
        if time.monotonic() > deadline:
            coordinator.sample(coordinator.counts())
            errors.append(f"the cluster was still crawling after {deadline - coordinator.started:g} s: workers stopped")
            coordinator.client.set(coordinator.ledger_keys.done, 1)
            for child in coordinator.children:
                if child.process.poll() is None:
                    child.process.send_signal(signal.SIGTERM)
            return True
        time.sleep(POLL_SECONDS)
    coordinator.sample(coordinator.counts())  # the last reading, before the workers close (and may flush the queue)
    coordinator.client.set(coordinator.ledger_keys.done, 1)
    return False


def _wait_for_workers(children: list[IsolatedChild]) -> list[bytes]:
    """Wait for every worker to close its spider and exit (SIGTERM, then SIGKILL, past the close timeout)."""
    deadline = time.monotonic() + CLOSE_TIMEOUT_SECONDS
    termed = False
    while any(c.process.poll() is None for c in children):
        if time.monotonic() > deadline:
            if termed:
                break
            termed = True
            deadline = time.monotonic() + 5
            for child in children:
                if child.process.poll() is None:
                    child.process.send_signal(signal.SIGTERM)
        for child in children:
            check_child(child, GRACE_SECONDS)
        time.sleep(POLL_SECONDS)
    return [stop_child(c) for c in children]


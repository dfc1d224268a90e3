"""The Scrapy extension each cluster worker runs: records the request ledger in Redis, waits for the coordinator.

Enabled by ``crawl_cluster`` through ``CRAWLMEM_CLUSTER_WORKER`` (the worker's index). Runs in the
worker process, on the reactor thread:

- at ``spider_opened`` it wraps the scrapy-redis scheduler's queue so that each push and pop runs as
  one Lua script that also records the entry as scheduled or taken by this worker (a SIGKILL cannot
  fall between the two), and watches the engine's in-progress set to record each request processed;
- it keeps the spider open while idle (``DontCloseSpider``) until the coordinator sets the done key,
  then closes it with reason ``finished``;
- SIGTERM closes the spider gracefully with reason ``shutdown``, as ``scrapy crawl`` does (so the
  scheduler's ``close()`` runs, and with ``SCHEDULER_PERSIST=False`` deletes the shared queue).
"""

from __future__ import annotations

import hashlib
import logging
import signal
import threading
import weakref
from typing import Any

from scrapy import signals
from scrapy.exceptions import DontCloseSpider, NotConfigured

from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.ledger import LedgerKeys
from pytest_crawlmem.probes import readings as probes

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1

_PUSH = {
    "zset": "local added = redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])",
    "list": "local added = redis.call('LPUSH', KEYS[1], ARGV[2]) and 1",
}
_PUSH_TAIL = """
local entry = redis.sha1hex(ARGV[2])
if added > 0 then
  redis.call('HINCRBY', KEYS[2], entry, added)
  redis.call('HSETNX', KEYS[3], entry, ARGV[3])
end
redis.call('INCR', KEYS[4])
return added
"""
_POP = {
    "zset": "local data = redis.call('ZRANGE', KEYS[1], 0, 0)[1]\n"
            "if data then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, 0) end",
    "fifo": "local data = redis.call('RPOP', KEYS[1])",
    "lifo": "local data = redis.call('LPOP', KEYS[1])",
}
_POP_TAIL = """
if not data then return false end
redis.call('HINCRBY', KEYS[2], redis.sha1hex(data), 1)
redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
redis.call('INCR', KEYS[4])
return data
"""

_FINISH = """
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
if ARGV[3] == '1' then redis.call('SADD', KEYS[3], ARGV[1]) end
redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
redis.call('INCR', KEYS[4])
"""


def queue_kind(queue: Any) -> str | None:
    """``zset``/``fifo``/``lifo`` for scrapy-redis's own queue classes (push and pop not overridden), else ``None``."""
    from scrapy_redis import queue as rq

    for cls, kind in ((rq.PriorityQueue, "zset"), (rq.FifoQueue, "fifo"), (rq.LifoQueue, "lifo")):
        if isinstance(queue, cls) and type(queue).push is cls.push and type(queue).pop is cls.pop:
            return kind
    return None


def entry_of(data: bytes) -> str:
    """The ledger's name for a queue element: the SHA-1 of its bytes (what ``redis.sha1hex`` computes)."""
    return hashlib.sha1(data).hexdigest()


class LedgerQueue:
    """A scrapy-redis queue whose pushes and pops also write the ledger, atomically where the queue class is known."""

    def __init__(self, inner: Any, recorder: LedgerRecorder) -> None:
        self.inner = inner
        self.recorder = recorder
        self.kind = queue_kind(inner)
        server = inner.server
        if self.kind is not None:
            self._push = server.register_script(_PUSH["zset" if self.kind == "zset" else "list"] + _PUSH_TAIL)
            self._pop = server.register_script(_POP[self.kind] + _POP_TAIL)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self.inner)

    def push(self, request: Any) -> None:
        """Push ``request`` and record it scheduled (one script)."""
        keys = self.recorder.keys
        if self.kind is None:  # a queue class of the user's: push, then record (a kill in between loses the record)
            self.inner.push(request)
            self.recorder.scheduled(entry_of(self.inner._encode_request(request)), request.url)
            return
        data = self.inner._encode_request(request)
        self._push(keys=[self.inner.key, keys.scheduled, keys.urls, keys.events], args=[-request.priority, data, request.url])

    def pop(self, timeout: int = 0) -> Any:
        """Pop a request and record it taken by this worker (one script; blocking pops record just after)."""
        if self.kind is None or timeout > 0:
            request = self.inner.pop(timeout)
            if request is not None:
                self.recorder.taken(request, entry_of(self.inner._encode_request(request)), record=True)
            return request
        keys, worker = self.recorder.keys, self.recorder.worker
        data = self._pop(keys=[self.inner.key, keys.taken(worker), keys.counts, keys.events], args=[f"taken:{worker}"])
        if not data:
            return None
        request = self.inner._decode_request(data)
        self.recorder.taken(request, entry_of(data), record=False)
        return request

    def clear(self) -> None:
        """Delete the queue (the scheduler's flush), recording how many elements it held."""
        held = len(self.inner)
        self.inner.clear()
        self.recorder.flushed(held)


class LedgerRecorder:
    """Writes this worker's side of the ledger to Redis (reactor thread)."""

    def __init__(self, server: Any, worker: int, keys: LedgerKeys) -> None:
        self.server = server
        self.worker = worker
        self.keys = keys
        self.entries: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # request -> entry, while in progress
        self.responses = 0  # counted here, written with each finish and by the poll (not one write per response)
        self._responses_written = 0
        self._finish = server.register_script(_FINISH)

    def scheduled(self, entry: str, url: str) -> None:
        """Record a push made outside the scripts."""
        pipe = self.server.pipeline(transaction=True)
        pipe.hincrby(self.keys.scheduled, entry, 1).hsetnx(self.keys.urls, entry, url).incr(self.keys.events)
        pipe.execute()

    def taken(self, request: Any, entry: str, *, record: bool) -> None:
        """Remember which entry ``request`` is; record the pop when the script did not."""
        self.entries[request] = entry
        if record:
            pipe = self.server.pipeline(transaction=True)
            pipe.hincrby(self.keys.taken(self.worker), entry, 1).hincrby(self.keys.counts, f"taken:{self.worker}", 1)
            pipe.incr(self.keys.events).execute()

    def finished(self, request: Any) -> None:
        """The engine is done with ``request``: record it processed (a request not taken from the queue is ignored)."""
        entry = self.entries.pop(request, None)
        if entry is None:
            return
        keys = self.keys
        self._finish(keys=[keys.processed(self.worker), keys.counts, keys.retries, keys.events],
                     args=[entry, f"processed:{self.worker}", "1" if request.meta.get("retry_times") else "0",
                           f"responses:{self.worker}", self.responses])
        self._responses_written = self.responses

    def flushed(self, held: int) -> None:
        """Record that this worker's scheduler deleted the queue while it held ``held`` elements."""
        self.server.hincrby(self.keys.flushes, str(self.worker), held)

    def response(self) -> None:
        """Count a response (the coordinator's ``after_responses`` trigger reads it once written)."""
        self.responses += 1

    def write_responses(self) -> None:
        """Write the response count if it moved since the last write."""
        if self.responses != self._responses_written:
            self.server.hset(self.keys.counts, f"responses:{self.worker}", self.responses)
            self._responses_written = self.responses

    def ready(self) -> None:
        """This worker's start requests are all out (its spider went idle once)."""
        self.server.hset(self.keys.ready, str(self.worker), 1)

    def done(self) -> bool:
        """Whether the coordinator declared the crawl over."""
        return bool(self.server.exists(self.keys.done))


class ClusterWorkerExtension:
    """Ledger hooks, idle wait and graceful SIGTERM of one cluster worker."""

    def __init__(self, crawler: Any, worker: int, keys: LedgerKeys) -> None:
        self.crawler = crawler
        self.worker = worker
        self.keys = keys
        self.recorder: LedgerRecorder | None = None
        self.is_ready = False
        self.closing = False
        self._loop: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> ClusterWorkerExtension:
        """Build from ``CRAWLMEM_CLUSTER_WORKER``; raise NotConfigured without it."""
        worker = crawler.settings.get(name_of("cluster_worker"))
        if worker is None:
            raise NotConfigured(f"{name_of('cluster_worker')} is not set")
        ext = cls(crawler, int(worker), LedgerKeys())
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(ext.response_received, signal=signals.response_received)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, ext._on_sigterm)
        return ext

    def spider_opened(self, spider: Any) -> None:
        """Wrap the shared queue, watch requests finishing, start polling the done key."""
        from twisted.internet import task

        scheduler: Any = probes.scheduler_of(self.crawler)
        queue = getattr(scheduler, "queue", None)
        if queue is None or not hasattr(queue, "server"):
            raise RuntimeError(f"crawl_cluster needs the scrapy-redis scheduler; this crawl's is {type(scheduler).__name__}")
        self.recorder = LedgerRecorder(queue.server, self.worker, self.keys)
        scheduler.queue = LedgerQueue(queue, self.recorder)
        if not probes.watch_finished_requests(self.crawler, self.recorder.finished):
            raise RuntimeError("crawl_cluster cannot watch the engine's requests in progress on this Scrapy version")
        self._loop = task.LoopingCall(self._poll)
        self._loop.start(POLL_SECONDS, now=False)

    def spider_idle(self, spider: Any) -> None:
        """Keep the spider open until the coordinator says the crawl is over."""
        if self.recorder is None:
            return
        if not self.is_ready:
            self.is_ready = True
            self.recorder.ready()
        if not self.recorder.done():
            raise DontCloseSpider

    def response_received(self, response: Any, request: Any, spider: Any) -> None:
        """Count the response where the coordinator can see it."""
        if self.recorder is not None:
            self.recorder.response()

    def spider_closed(self, spider: Any, reason: str) -> None:
        """Stop polling."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def _poll(self) -> None:
        """Close the spider once the crawl is over and this worker is idle."""
        if self.closing or self.recorder is None:
            return
        try:
            self.recorder.write_responses()
            over = self.recorder.done() and probes.is_idle(self.crawler)
        except Exception as exc:  # Redis gone: the coordinator stopped it; the deadline closes us
            logger.warning("crawlmem cluster worker %d: cannot read the done key: %s", self.worker, exc)
            return
        if over:
            self.closing = True
            probes.close_spider(self.crawler, "finished")

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        """SIGTERM: close the spider gracefully (reason ``shutdown``), as ``scrapy crawl`` does."""
        from twisted.internet import reactor

        self.closing = True
        reactor.callFromThread(probes.close_spider, self.crawler, "shutdown")

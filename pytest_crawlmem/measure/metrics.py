"""Prometheus metrics of a running crawl, served by ``prometheus_client`` (the ``prometheus`` extra; crawl process).

Set ``CRAWLMEM_PROMETHEUS_PORT`` (0: any free port, logged) to serve ``/metrics`` from a thread of
the crawl process while it runs. Each scrape builds a :class:`pytest_crawlmem.measure.status.Status` in the
server's thread (nothing is computed between scrapes) from a registry of its own, so the
process's default registry and any other exporter the project runs are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.measure.status import Status

logger = logging.getLogger("pytest_crawlmem.extension")

INSTALL_HINT = "pip install 'pytest-crawlmem[prometheus]'"

#: (metric name, Status attribute, help, kind): gauges unless the kind is "counter".
FIGURES = (
    ("crawlmem_rss_bytes", "rss_bytes", "Resident set size of the crawl process", "gauge"),
    ("crawlmem_peak_rss_bytes", "peak_rss_bytes", "Highest RSS sampled since the crawl started", "gauge"),
    ("crawlmem_scheduled_requests", "scheduled", "Requests waiting in the scheduler", "gauge"),
    ("crawlmem_inflight_requests", "inflight", "Requests in the downloader", "gauge"),
    ("crawlmem_active_size_bytes", "active_size_bytes", "Bytes of responses held by the scraper", "gauge"),
    ("crawlmem_responses", "responses", "Responses received", "counter"),
    ("crawlmem_items", "items", "Items scraped", "counter"),
    ("crawlmem_retries", "retries", "Requests retried (retry/count)", "counter"),
    ("crawlmem_response_p50_bytes", "response_p50_bytes", "Median response body size", "gauge"),
    ("crawlmem_response_p95_bytes", "response_p95_bytes", "95th percentile of response body sizes", "gauge"),
    ("crawlmem_response_max_bytes", "response_max_bytes", "Largest response body", "gauge"),
    ("crawlmem_latency_p50_seconds", "latency_p50_seconds", "Median download latency", "gauge"),
    ("crawlmem_latency_p95_seconds", "latency_p95_seconds", "95th percentile of download latency", "gauge"),
    ("crawlmem_jobdir_bytes", "jobdir_bytes", "Bytes under JOBDIR", "gauge"),
    ("crawlmem_stream_bytes", "stream_bytes", "Bytes of the samples.jsonl stream on disk", "gauge"),
    ("crawlmem_checkpoints", "checkpoints",
     "Checkpoints taken, drained or not, the crawl's opening and closing ones included (see"
     " crawlmem_undrained_checkpoints)", "counter"),
    ("crawlmem_undrained_checkpoints", "undrained_checkpoints",
     f"Checkpoints that hit {name_of('drain_timeout_seconds')} before the crawl drained (not judged)", "counter"),
    ("crawlmem_leak_suspected", "leak_suspected",
     "1 while the drained checkpoints show the leak signature (retained-objects, browser-state), else 0", "gauge"),
    ("crawlmem_growth_per_response_bytes", "growth_per_response_bytes",
     "Memory growth per response the verdict measured over the drained checkpoints", "gauge"),
    ("crawlmem_browser_pss_bytes", "browser_pss_bytes", "Summed PSS of the browser process tree (browser crawls)",
     "gauge"),
    ("crawlmem_browser_open_pages", "open_pages", "Open browser pages (browser crawls)", "gauge"),
    ("crawlmem_browser_open_contexts", "open_contexts", "Open browser contexts (browser crawls)", "gauge"),
    ("crawlmem_checkpoint_pause_max_seconds", "checkpoint_pause_max_seconds", "Longest pause of a checkpoint", "gauge"),
    ("crawlmem_checkpoint_pause_seconds", "checkpoint_pause_total_seconds", "Time checkpoints paused the crawl", "counter"),
    ("crawlmem_timeline_span", "timeline_span", "Raw samples per kept sample of the bounded timeline", "gauge"),
    ("crawlmem_self_cpu_seconds", "self_cpu_seconds", "CPU time of the extension, checkpoints included", "counter"),
)


class MissingPrometheus(RuntimeError):
    """``CRAWLMEM_PROMETHEUS_PORT`` is set but ``prometheus_client`` is not installed."""


def require_prometheus() -> None:
    """Raise :class:`MissingPrometheus` naming the extra to install when prometheus_client is absent."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        message = f"{name_of('prometheus_port')} is set but prometheus_client is not installed: {INSTALL_HINT}"
        raise MissingPrometheus(message) from None


class _Collector:
    """A prometheus_client collector reading a fresh Status at every scrape (server thread)."""

    def __init__(self, read: Callable[[], Status], spider: str) -> None:
        self.read = read
        self.spider = spider

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        status = self.read()
        labels = ["spider"]
        for name, attribute, text, kind in FIGURES:
            value = getattr(status, attribute)
            if value is None:
                continue
            family: Any = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, text, labels=labels)
            family.add_metric([self.spider], float(value))
            yield family
        codes = CounterMetricFamily("crawlmem_responses_by_status", "Responses by HTTP status", labels=["spider", "status"])
        for code, count in sorted(status.status_counts.items()):
            codes.add_metric([self.spider, str(code)], float(count))
        yield codes


class MetricsServer:
    """The ``/metrics`` endpoint of one crawl: started when the spider opens, shut down when it closes."""

    def __init__(self, read: Callable[[], Status], *, port: int, addr: str, spider: str) -> None:
        self.read = read
        self.port = port
        self.addr = addr
        self.spider = spider
        self._server: Any = None
        self.registry: Any = None  # where other extensions of the crawl add their collectors (the memory governor)

    def start(self) -> int:
        """Serve the metrics; return the bound port (the one asked for, or a free one for 0)."""
        from prometheus_client import CollectorRegistry, start_http_server

        registry = self.registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self.read, self.spider))
        self._server, _thread = start_http_server(self.port, addr=self.addr, registry=registry)
        self.port = int(self._server.server_port)
        logger.info("crawlmem: Prometheus metrics on http://%s:%d/metrics", self.addr, self.port)
        return self.port

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

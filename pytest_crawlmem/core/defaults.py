"""Every ``CRAWLMEM_*`` setting of the Scrapy extension: default, meaning, measured cost (pure, any process).

The one table of the extension's settings, as Scrapy keeps ``default_settings.py``:
``CrawlMemExtension.from_crawler`` reads them once into a typed :class:`CrawlMemConfig`, test crawls
override some in ``runner.crawl_settings`` (the ``tests`` column) through :func:`settings_of`, and
``docs/production.md``'s table is generated from it (``python -m pytest_crawlmem.docgen``; tests/test_docs.py
keeps them equal). No other module spells a ``CRAWLMEM_*`` name, in a key or inside a message: they use
:func:`name_of` (tests/test_layers.py). A leaf of ``core``: it imports no other module of the package.
Defaults are production defaults: what a crawl that runs for days should pay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIB = 2**20
#: Responses between checkpoints up to growth.DENSE_UNTIL_RESPONSES; later ones are a third of the crawl so far apart (a
#: long crawl's trend has leverage enough).
CHECKPOINT_MIN_RESPONSES = 25
#: Retained growth per response judged a leak (the ``leak_per_response`` budget's default).
DEFAULT_LEAK_PER_RESPONSE = 1024
PREFIX = "CRAWLMEM_"


@dataclass(frozen=True)
class SettingSpec:
    """One ``CRAWLMEM_*`` setting: its default (``None``: derived, see ``what``), what it does, what it costs."""

    name: str
    default: bool | int | float | str | None
    kind: type
    what: str
    cost: str = ""
    tests: str = ""  # what test crawls use when it differs from the default
    minimum: float | None = None  # smallest valid value
    allow_zero: bool = False  # 0 (off) is valid too
    listed: bool = True  # in docs/production.md's table (False: a setting of a test helper, not of the extension)

    @property
    def attr(self) -> str:
        """Its attribute of :class:`CrawlMemConfig`: the name without ``CRAWLMEM_``, in lower case."""
        return self.name.removeprefix(PREFIX).lower()


SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("CRAWLMEM_ENABLED", False, bool, "turn the extension on"),
    SettingSpec("CRAWLMEM_INTERVAL_SECONDS", 1.0, float, "seconds between samples (RSS, queues) by the sampler thread",
                "sampler + status CPU 0.06-0.12% of the crawl's CPU at 1 s (soak; 0.09% over 100,000 responses);"
                " keeping and streaming a"
                " sample 11-20 us", tests="0.1 (--crawlmem-interval)", minimum=0.001),
    SettingSpec("CRAWLMEM_TIMELINE_SAMPLES", 4096, int,
                "samples kept in memory; at the bound neighbours are merged pairwise (peaks kept), halving the resolution",
                "a day at 1 s (86,400 samples): 1.0 MiB held, 1.9 MiB peak (unbounded: 31.9 MiB)",
                minimum=16, allow_zero=True),
    SettingSpec("CRAWLMEM_JSONL", None, str, "path of the samples.jsonl stream (none: no stream)",
                "~380 B a sample: 31 MiB a day at 1 s", tests="<report dir>/samples.jsonl"),
    SettingSpec("CRAWLMEM_JSONL_MAX_BYTES", 64 * MIB, int,
                "size budget of the stream on disk: past it, the file is rotated to a compacted history"
                " (<path>.1, the whole crawl at the timeline's resolution, peaks kept) and restarted",
                "a rotation rewrites the history (a full timeline: 0.17 s on a loaded machine) once per"
                " budget's worth of records (about 2 days at 1 s)",
                minimum=8 * MIB, allow_zero=True),
    SettingSpec("CRAWLMEM_CHECKPOINTS", True, bool,
                "drained checkpoints: pause the engine, let in-flight work finish, gc.collect(), read memory, resume",
                "each pauses the crawl: 14 in 6,000 responses paused it 4.5 s in all, 0.41 s at most; 21 in"
                " 100,000 paused it 7.6 s (0.5% of 25 min), 1.7 s at most with 33,000 requests queued (soak,"
                " loaded machine); O(log N) of them in N responses"),
    SettingSpec("CRAWLMEM_CHECKPOINT_MIN_RESPONSES", None, int,
                f"responses before the first checkpoint and least responses between two ({CHECKPOINT_MIN_RESPONSES};"
                " 20 for browser crawls);"
                " later intervals (past 300 responses) are a third of the responses so far; twice the least for 200"
                " responses after an attribution window", minimum=1),
    SettingSpec("CRAWLMEM_DRAIN_TIMEOUT_SECONDS", 5.0, float,
                "longest wait for in-flight work at a checkpoint before it is read undrained (and not judged)",
                "bounds a checkpoint's pause: the wait plus one gc.collect()", minimum=0.0),
    SettingSpec("CRAWLMEM_GC_FREEZE", False, bool,
                "freeze the objects that exist before the crawl out of the cyclic GC while it runs (gc.freeze())",
                "off in production: frozen objects are never collected, even once garbage;"
                " on, checkpoints' gc.collect() walk only the crawl's objects", tests="True"),
    SettingSpec("CRAWLMEM_LOG_INTERVAL_SECONDS", 60.0, float,
                "seconds between status lines (log) and crawlmem/status/* stats; 0: only at the close",
                "34-54 us a status (stats scan, percentiles, the line)", tests="0", minimum=0.0),
    SettingSpec("CRAWLMEM_PROMETHEUS_PORT", None, int,
                "serve Prometheus metrics on this port (0: any free port; unset: off); needs the prometheus extra",
                "one HTTP server thread; a scrape builds one status (34-54 us)", minimum=0.0),
    SettingSpec("CRAWLMEM_PROMETHEUS_ADDR", "127.0.0.1", str, "address the metrics server binds"),
    SettingSpec("CRAWLMEM_TRACEMALLOC_FRAMES", 0, int, "trace the whole crawl with tracemalloc at this depth (0: off)",
                "1 frame: ~1.9x the crawl's time; 10 frames: ~5.6x (DESIGN.md)",
                tests="--crawlmem-tracemalloc-frames", minimum=0.0),
    SettingSpec("CRAWLMEM_ATTRIBUTION_FRAMES", 4, int,
                "depth of the traced window opened when checkpoints look leaky (0: no attribution)",
                "paid only by a crawl that already looks leaky, for CRAWLMEM_ATTRIBUTION_RESPONSES", minimum=0.0),
    SettingSpec("CRAWLMEM_ATTRIBUTION_RESPONSES", 100, int, "length of that traced window, in responses", minimum=1),
    SettingSpec("CRAWLMEM_LEAK_PER_RESPONSE", DEFAULT_LEAK_PER_RESPONSE, int,
                "growth per response (bytes) that looks like a leak", tests="budget leak_per_response", minimum=1),
    SettingSpec("CRAWLMEM_EXPECTED_GROWTH", None, str,
                "holders whose growth is by design, 'HOLDER=SIZE, ...' (spider.seen_ids=600 B: a size per response):"
                " each is measured at every drained checkpoint and its growth set aside from the leak verdict up to"
                " SIZE, a leak past it (docs/budgets.md)",
                "a deep-size walk of each holder at each checkpoint, 256 entries of a larger container sampled",
                tests="budget expected_growth"),
    SettingSpec("CRAWLMEM_KILL_AT_BYTES", 0, int,
                "stop the crawl when RSS (plus the browser tree's PSS in a browser crawl) reaches this (0: off)",
                tests="budget kill_at", minimum=0.0),
    SettingSpec("CRAWLMEM_TIMEOUT_SECONDS", 0.0, float, "stop the crawl after this long (0: off)",
                tests="budget timeout", minimum=0.0),
    SettingSpec("CRAWLMEM_BROWSER", None, bool,
                "measure the browser tree (on when DOWNLOAD_HANDLERS name scrapy-playwright)"),
    SettingSpec("CRAWLMEM_BROWSER_DETAIL_SECONDS", 2.0, float,
                "least seconds between the sampler's PSS/USS reads of the browser tree (also read at every checkpoint)",
                "a smaps_rollup read per browser process; the tree's readings keep within 1% of the crawl process's CPU",
                minimum=0.0),
    SettingSpec("CRAWLMEM_STALL_SECONDS", 5.0, float,
                "stop a browser crawl waiting this long with full contexts and unclosed pages", minimum=0.0),
    SettingSpec("CRAWLMEM_MEDIA_FAILURES", False, bool, "count failed media downloads as dropped data", tests="True"),
    SettingSpec("CRAWLMEM_REPLAY_URL", None, str,
                "the replay site the replay download handler asks for every http(s) URL (docs/replay.md; unset: no replay)",
                "~0.2-0.45 ms of crawl CPU a response (benchmarks/replay_throughput.py)", tests="crawl(replay=...)"),
    SettingSpec("CRAWLMEM_REPLAY_COPIES", 1, int, "copies of the recording the replay copies middleware starts",
                tests="crawl(replay_copies=...)", minimum=1),
    SettingSpec("CRAWLMEM_REPLAY_ITEM_KEYS", None, str,
                "item fields the copies middleware makes distinct per copy, comma-separated (a string gains"
                " ~crawlmem-copyK), so a duplicates pipeline keyed on them lets the copies' items through",
                tests="crawl(replay_item_keys=...)"),
    SettingSpec("CRAWLMEM_STAND_IN", None, str,
                "origins the stand-in download handler fetches from a local copy of the site, a JSON object"
                " (crawlmem record --stand-in; docs/replay.md)", tests="unset"),
    SettingSpec("CRAWLMEM_SNAPSHOT_AT_BYTES", 0, int,
                "take the danger snapshot (danger.json beside CRAWLMEM_JSONL) when RSS first reaches this (0: off)",
                "nothing until then; then a trackref count and a traced window", tests="budget snapshot_at", minimum=0.0),
    SettingSpec("CRAWLMEM_DANGER_WINDOW_SECONDS", 1.0, float,
                "length of the danger snapshot's traced window (and at least 10 responses, at most 10 times as long)",
                "tracemalloc at CRAWLMEM_ATTRIBUTION_FRAMES for that window", minimum=0.001),
    SettingSpec("CRAWLMEM_AMPLIFICATION", True, bool,
                "measure parse amplification (needs the spider middleware the test runner adds)",
                "two mallinfo2 reads a callback step, each a walk of glibc's free lists: 3 us in a fresh process,"
                " 150-400 us after several long crawls in one; kept within CRAWLMEM_AMPLIFICATION_SHARE"),
    SettingSpec("CRAWLMEM_AMPLIFICATION_SHARE", 0.01, float,
                "the most of the crawl's time parse amplification's mallinfo2 reads may take: past it, callbacks go"
                " unmeasured (counted as skipped) until the share is met again; 0: measure every callback",
                "in an aged process, every callback measured: 1.6-2x the crawl's wall time; at 0.01: 0.98-0.99x",
                tests="0 with a max_amplification budget", minimum=0.0),
    SettingSpec("CRAWLMEM_CLUSTER_WORKER", None, int, "this scrapy-redis worker's index: turns on the cluster worker"
                " extension (the request ledger in Redis, docs/cluster.md)", "3 Redis round trips a request instead of"
                " scrapy-redis's 2; 60-90 us CPU and ~410 B of Redis a request", tests="set by crawl_cluster", minimum=0),
    SettingSpec("CRAWLMEM_BUDGET", None, str,
                "the memory governor's budget (docs/governor.md): a size ('300 MiB') or 'auto' (80% of the cgroup's"
                " memory limit); unset: no governor", tests="crawl(governor=...)"),
    SettingSpec("CRAWLMEM_GOVERNOR_INTERVAL_SECONDS", 0.25, float,
                "seconds between the governor's decisions (4x while no response arrives)",
                "a tick reads /proc/self/statm and the queues", minimum=0.01),
    SettingSpec("CRAWLMEM_GOVERNOR_MIN_CONCURRENCY", 1, int, "the least concurrency the governor sets", minimum=1),
    SettingSpec("CRAWLMEM_GOVERNOR_START_CONCURRENCY", 0, int,
                "start the governed crawl at this concurrency and double it each tick while the requests in flight"
                " say the budget has room, up to CONCURRENT_REQUESTS (0: from the headroom at the open, at 8 MiB a"
                " request until responses show their size; CONCURRENT_REQUESTS when that fits)",
                "small pages reach CONCURRENT_REQUESTS=64 from 8 in 3 ticks (0.75 s)", minimum=0),
    SettingSpec("CRAWLMEM_GOVERNOR_HIGH_SHARE", 0.85, float, "share of the budget over which the governor lowers",
                minimum=0.0001),
    SettingSpec("CRAWLMEM_GOVERNOR_LOW_SHARE", 0.70, float, "share of the budget under which it restores", minimum=0.0001),
    SettingSpec("CRAWLMEM_GOVERNOR_CLOSE_SHARE", 0.95, float,
                "share of the budget that, held 6 ticks, closes the crawl (reason memory_budget; JOBDIR resumes it)",
                minimum=0.0001),
    SettingSpec("CRAWLMEM_SLOW_PIPELINE_DELAY_MS", 0.0, float,
                "pytest_crawlmem.testing.SlowPipeline: each item waits this long, without blocking the reactor",
                minimum=0.0, listed=False),
    SettingSpec("CRAWLMEM_SLOW_PIPELINE_CPU_MS", 0.0, float,
                "pytest_crawlmem.testing.SlowPipeline: each item burns this much CPU, blocking the reactor",
                minimum=0.0, listed=False),
)

#: The defaults by name, as Scrapy's ``default_settings`` (``None``: derived from other settings, or off).
CRAWLMEM_DEFAULTS: Mapping[str, Any] = {spec.name: spec.default for spec in SETTINGS}
_BY_NAME = {spec.name: spec for spec in SETTINGS}
_BY_ATTR = {spec.attr: spec for spec in SETTINGS}


def name_of(attr: str) -> str:
    """The setting of a :class:`CrawlMemConfig` attribute (``"kill_at_bytes"`` -> ``CRAWLMEM_KILL_AT_BYTES``)."""
    try:
        return _BY_ATTR[attr].name
    except KeyError:
        raise KeyError(f"no {PREFIX}* setting {attr!r} in defaults.SETTINGS") from None


def settings_of(**values: Any) -> dict[str, Any]:
    """Scrapy settings from :class:`CrawlMemConfig` attributes: ``settings_of(kill_at_bytes=0)`` (the runner's)."""
    return {name_of(attr): value for attr, value in values.items()}


@dataclass(frozen=True)
class CrawlMemConfig:
    """Every ``CRAWLMEM_*`` setting of a crawl, read and checked once (crawl process); one attribute a row of
    :data:`SETTINGS`, named :attr:`SettingSpec.attr` (tests/test_settings_table.py keeps the two equal)."""

    enabled: bool
    interval_seconds: float
    timeline_samples: int
    jsonl: str | None
    jsonl_max_bytes: int
    checkpoints: bool
    checkpoint_min_responses: int  # unset: CHECKPOINT_MIN_RESPONSES, 20 for a browser crawl (from_settings)
    drain_timeout_seconds: float
    gc_freeze: bool
    log_interval_seconds: float
    prometheus_port: int | None
    prometheus_addr: str
    tracemalloc_frames: int
    attribution_frames: int
    attribution_responses: int
    leak_per_response: int
    expected_growth: str | None
    kill_at_bytes: int
    timeout_seconds: float
    browser: bool  # unset: on when DOWNLOAD_HANDLERS name scrapy-playwright (from_settings)
    browser_detail_seconds: float
    stall_seconds: float
    media_failures: bool
    replay_url: str | None
    replay_copies: int
    replay_item_keys: str | None
    stand_in: str | None
    snapshot_at_bytes: int
    danger_window_seconds: float
    amplification: bool
    amplification_share: float
    cluster_worker: int | None
    budget: str | None
    governor_interval_seconds: float
    governor_min_concurrency: int
    governor_start_concurrency: int
    governor_high_share: float
    governor_low_share: float
    governor_close_share: float
    slow_pipeline_delay_ms: float
    slow_pipeline_cpu_ms: float

    @classmethod
    def from_settings(cls, settings: Any, *, playwright: bool = False) -> CrawlMemConfig:
        """Read and check every setting from Scrapy ``settings`` (or a dict); ValueError naming a bad value.

        The derived ones are set here: ``browser`` unset is ``playwright`` (DOWNLOAD_HANDLERS name scrapy-playwright),
        ``checkpoint_min_responses`` unset is CHECKPOINT_MIN_RESPONSES, 20 for a browser crawl (~100x slower).
        """
        values = {_BY_NAME[name].attr: value for name, value in read_settings(settings).items()}
        if values["browser"] is None:
            values["browser"] = playwright
        if values["checkpoint_min_responses"] is None:
            values["checkpoint_min_responses"] = 20 if values["browser"] else CHECKPOINT_MIN_RESPONSES
        return cls(**values)

    @classmethod
    def of(cls, **values: Any) -> CrawlMemConfig:
        """The defaults with ``values`` (attributes) over them, checked as settings are (an extension without a crawler)."""
        return cls.from_settings(settings_of(**values))


def read_settings(settings: Any) -> dict[str, Any]:
    """Read every ``CRAWLMEM_*`` setting from Scrapy ``settings``; ValueError naming a bad value (crawl process)."""
    values: dict[str, Any] = {}
    for spec in SETTINGS:
        raw = settings.get(spec.name)
        values[spec.name] = spec.default if raw is None else _parse(spec, raw)
    jsonl_max, samples = values["CRAWLMEM_JSONL_MAX_BYTES"], values["CRAWLMEM_TIMELINE_SAMPLES"]
    if jsonl_max and (not samples or jsonl_max < 4 * samples * 512):
        raise ValueError(
            f"invalid CRAWLMEM_JSONL_MAX_BYTES {jsonl_max!r} from Scrapy settings: with CRAWLMEM_TIMELINE_SAMPLES"
            f" {samples} it must be at least {4 * samples * 512:,} (4 x 512 B a kept sample), and a bounded"
            " stream needs a bounded timeline"
        )
    return values


def _parse(spec: SettingSpec, raw: Any) -> Any:
    """One setting's value as its kind, checked against its minimum."""
    where = f"invalid {spec.name} {raw!r} from Scrapy settings"
    try:
        if spec.kind is bool:
            value: Any = _boolean(raw)
        elif spec.kind is str:
            value = str(raw)
        elif spec.kind is int:
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError(raw)
            value = int(raw) if not isinstance(raw, str) else int(raw.strip())
        else:
            value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected {spec.kind.__name__}") from None
    if spec.minimum is not None and not isinstance(value, (bool, str)):
        ok = value > 0 if spec.name == "CRAWLMEM_INTERVAL_SECONDS" else value >= spec.minimum
        if not ok and not (spec.allow_zero and value == 0):
            zero = " or 0 (off)" if spec.allow_zero else ""
            raise ValueError(f"{where}: expected at least {_number(spec.minimum)}{zero}")
    if spec.name == "CRAWLMEM_PROMETHEUS_PORT" and value > 65535:
        raise ValueError(f"{where}: expected a port, 0 to 65535")
    return value


def _number(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(raw)


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, int) and not isinstance(value, bool) and value >= MIB and value % MIB == 0:
        return f"{value // MIB} MiB"
    return repr(value) if isinstance(value, str) else str(value)


def settings_table() -> str:
    """The settings as a Markdown table (the one in docs/production.md)."""
    rows = ["| setting | default | test crawls | what it does | measured cost |", "|---|---|---|---|---|"]
    for spec in (spec for spec in SETTINGS if spec.listed):
        rows.append(f"| `{spec.name}` | {_shown(spec.default)} | {spec.tests or 'default'} | {spec.what} | {spec.cost or '-'} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(settings_table(), end="")

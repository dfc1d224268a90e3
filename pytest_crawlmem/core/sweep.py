"""Tuning sweeps: one workload under several settings variants, as a table, and the pick among them.

Pure (no pytest, no Scrapy): the ``crawl_sweep`` fixture (sweep_fixture.py) runs the crawls and
builds a :class:`SweepResult` from their results; the terminal summary rebuilds it from JSON.
All sizes are bytes, all times seconds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_crawlmem.core.models import SCHEMA_VERSION, CrawlResult, json_value
from pytest_crawlmem.core.stops import is_harness_stop
from pytest_crawlmem.core.units import format_size, parse_size

#: Figures ``best(key=...)`` can rank by, and whether higher is better.
RANK_KEYS: dict[str, bool] = {
    "responses_per_second": True,
    "items_per_second": True,
    "peak_rss": False,
    "rss_growth": False,
    "duration_seconds": False,
}
_KEY_WORDS = {"responses_per_second": "responses/s", "items_per_second": "items/s", "peak_rss": "lowest peak RSS",
              "rss_growth": "lowest RSS growth", "duration_seconds": "shortest duration"}

Variants = Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any]]
#: Variants run isolated unless the test says otherwise: in one process, each variant's peak
#: starts from the RSS the earlier ones left behind (docs/sweeps.md).
DEFAULT_ISOLATE = True


def name_variants(variants: Variants) -> list[tuple[str, dict[str, Any]]]:
    """Return ``(name, overrides)`` per variant, in order; a list of dicts is named from its keys and values.

    ``{"small": {"CONCURRENT_REQUESTS": 4}}`` keeps the name ``small``;
    ``[{"CONCURRENT_REQUESTS": 4}]`` is named ``CONCURRENT_REQUESTS=4``; ``{}`` is ``defaults``.
    Raises ``TypeError`` / ``ValueError`` for an empty sweep, a variant that is not a mapping,
    or two variants with the same name.
    """
    if isinstance(variants, Mapping):
        pairs = [(name, overrides) for name, overrides in variants.items()]
    elif isinstance(variants, Sequence) and not isinstance(variants, (str, bytes)):
        pairs = [(derived_name(overrides), overrides) for overrides in variants]
    else:
        raise TypeError(f"crawl_sweep variants must be a dict of name -> settings or a list of settings dicts, "
                        f"not {type(variants).__name__}")
    if not pairs:
        raise ValueError("crawl_sweep needs at least one variant")
    named: list[tuple[str, dict[str, Any]]] = []
    for name, overrides in pairs:
        if not isinstance(name, str) or not name:
            raise TypeError(f"crawl_sweep variant names must be non-empty strings, got {name!r}")
        if not isinstance(overrides, Mapping):
            raise TypeError(f"crawl_sweep variant {name!r} must be a dict of settings, not {type(overrides).__name__}")
        if name in {n for n, _ in named}:
            raise ValueError(f"crawl_sweep variant name {name!r} is used twice: give the variants distinct names")
        named.append((name, dict(overrides)))
    return named


def derived_name(overrides: Mapping[str, Any]) -> str:
    """Name a variant from its settings: ``CONCURRENT_REQUESTS=4 SCRAPER_SLOT_MAX_ACTIVE_SIZE=1048576``."""
    if not isinstance(overrides, Mapping):
        return repr(overrides)
    return " ".join(f"{key}={value}" for key, value in overrides.items()) or "defaults"


def _plain(value: Any) -> Any:
    """``value`` as JSON: containers kept, anything JSON cannot hold as its repr (a class, a function)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return json_value(value)
    return repr(value)


@dataclass(frozen=True)
class SweepRow:
    """One variant's figures: what it cost in memory, how fast it went, what it lost."""

    variant: str
    settings: Mapping[str, Any]
    peak_rss: int
    start_rss: int
    rss_growth: int
    per_response_bytes: float | None
    responses: int
    items: int
    dropped: int
    gave_up: int
    status_429: int
    status_503: int
    duration_seconds: float
    verdict: str
    finish_reason: str
    broken: tuple[str, ...] = ()
    report_dir: str | None = None

    @classmethod
    def of(cls, variant: str, settings: Mapping[str, Any], result: CrawlResult, broken: Sequence[str] = ()) -> SweepRow:
        """Summarize one variant's crawl; ``broken`` names the test budgets it broke."""
        dropped = max(result.dropped_count, len(result.dropped))
        return cls(
            variant=variant,
            settings=_plain(settings),
            peak_rss=result.peak_rss,
            start_rss=result.start_rss,
            rss_growth=result.rss_growth,
            per_response_bytes=json_value(result.growth.per_response_bytes),
            responses=result.responses,
            items=result.items_scraped,
            dropped=dropped,
            gave_up=result.retries_max_reached,
            status_429=int(result.status_counts.get(429, 0)),
            status_503=int(result.status_counts.get(503, 0)),
            duration_seconds=result.duration_seconds,
            verdict=result.verdict,
            finish_reason=result.finish_reason,
            broken=tuple(broken),
            report_dir=None if result.report_dir is None else str(result.report_dir),
        )

    @property
    def responses_per_second(self) -> float:
        """Throughput: responses over the crawl's wall time (0 for a crawl of no duration)."""
        return self.responses / self.duration_seconds if self.duration_seconds > 0 else 0.0

    @property
    def items_per_second(self) -> float:
        """Items scraped over the crawl's wall time."""
        return self.items / self.duration_seconds if self.duration_seconds > 0 else 0.0

    @property
    def stopped(self) -> bool:
        """Whether the harness stopped the crawl (kill_at, timeout, a killed isolated child)."""
        return is_harness_stop(self.finish_reason)  # never a pick

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict, throughput included."""
        return {
            "variant": self.variant,
            "settings": dict(self.settings),
            "peak_rss": self.peak_rss,
            "start_rss": self.start_rss,
            "rss_growth": self.rss_growth,
            "per_response_bytes": json_value(self.per_response_bytes),
            "responses": self.responses,
            "items": self.items,
            "dropped": self.dropped,
            "gave_up": self.gave_up,
            "status_429": self.status_429,
            "status_503": self.status_503,
            "duration_seconds": self.duration_seconds,
            "responses_per_second": round(self.responses_per_second, 3),
            "items_per_second": round(self.items_per_second, 3),
            "verdict": self.verdict,
            "finish_reason": self.finish_reason,
            "broken": list(self.broken),
            "report_dir": self.report_dir,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepRow:
        """Rebuild a row from :meth:`to_json` (derived figures are recomputed, unknown keys ignored)."""
        return cls(
            variant=str(data["variant"]),
            settings=dict(data.get("settings") or {}),
            peak_rss=int(data["peak_rss"]),
            start_rss=int(data.get("start_rss", 0)),
            rss_growth=int(data["rss_growth"]),
            per_response_bytes=data.get("per_response_bytes"),
            responses=int(data["responses"]),
            items=int(data["items"]),
            dropped=int(data.get("dropped", 0)),
            gave_up=int(data.get("gave_up", 0)),
            status_429=int(data.get("status_429", 0)),
            status_503=int(data.get("status_503", 0)),
            duration_seconds=float(data["duration_seconds"]),
            verdict=str(data.get("verdict", "")),
            finish_reason=str(data.get("finish_reason", "")),
            broken=tuple(data.get("broken") or ()),
            report_dir=data.get("report_dir"),
        )


@dataclass(frozen=True)
class Criteria:
    """What a pick must satisfy, and what it is ranked by."""

    max_peak_rss: int | None = None
    max_rss_growth: int | None = None
    require_complete: bool = True
    within_budgets: bool = True
    key: str | Callable[[SweepRow], float] = "responses_per_second"

    def __post_init__(self) -> None:
        if isinstance(self.key, str) and self.key not in RANK_KEYS:
            raise ValueError(f"unknown sweep key {self.key!r}: use one of {', '.join(RANK_KEYS)} or a function of a row")

    def score(self, row: SweepRow) -> float:
        """A number to maximize."""
        if callable(self.key):
            return float(self.key(row))
        value = float(getattr(row, self.key))
        return value if RANK_KEYS[self.key] else -value

    def describe(self) -> str:
        """The rule in words, for the summary and sweep.json."""
        if callable(self.key):
            name = getattr(self.key, "__name__", "")
            ranked = f"the highest {name if name.isidentifier() else 'key'}"
        else:
            word = _KEY_WORDS[self.key]
            ranked = f"the most {word}" if RANK_KEYS[self.key] else f"the {word}"
        rules = ["ran to the end"]
        if self.within_budgets:
            rules.append("kept the test's budgets")
        if self.max_peak_rss is not None:
            rules.append(f"peaked at or under {format_size(self.max_peak_rss)} RSS")
        if self.max_rss_growth is not None:
            rules.append(f"grew RSS by at most {format_size(self.max_rss_growth)}")
        if self.require_complete:
            rules.append("lost no data")
        listed = rules[0] if len(rules) == 1 else ", ".join(rules[:-1]) + " and " + rules[-1]
        return f"{ranked} among the variants that {listed}"

    def rejection(self, row: SweepRow, most_items: int) -> str:
        """Why ``row`` cannot be picked, in one clause per reason; empty when it can."""
        reasons: list[str] = []
        if not row.responses:
            reasons.append("it got no responses, so nothing was measured")
        if row.stopped:
            reasons.append(f"the harness stopped it ({row.finish_reason})")
        if self.within_budgets and row.broken:
            reasons.append(f"it broke the test's budgets: {', '.join(row.broken)}")
        if self.max_peak_rss is not None and row.peak_rss > self.max_peak_rss:
            reasons.append(f"peak RSS {format_size(row.peak_rss)} is over {format_size(self.max_peak_rss)}")
        if self.max_rss_growth is not None and row.rss_growth > self.max_rss_growth:
            reasons.append(f"RSS growth {format_size(row.rss_growth)} is over {format_size(self.max_rss_growth)}")
        if self.require_complete:
            if row.dropped:
                reasons.append(f"{row.dropped:,} responses were dropped by a size limit")
            if row.gave_up:
                reasons.append(f"{row.gave_up:,} requests were given up after retries")
            if row.items < most_items:
                reasons.append(f"it scraped {row.items:,} items, {most_items - row.items:,} fewer than the most complete variant")
        return "; ".join(reasons)


def _criteria(
    max_peak_rss: int | str | None,
    max_rss_growth: int | str | None,
    require_complete: bool,
    within_budgets: bool,
    key: str | Callable[[SweepRow], float],
) -> Criteria:
    return Criteria(
        max_peak_rss=None if max_peak_rss is None else parse_size(max_peak_rss, source="max_peak_rss"),
        max_rss_growth=None if max_rss_growth is None else parse_size(max_rss_growth, source="max_rss_growth"),
        require_complete=require_complete,
        within_budgets=within_budgets,
        key=key,
    )


@dataclass(frozen=True)
class Pick:
    """The variant a sweep picked (``None``: no variant qualified) and the rule it was picked by."""

    variant: str | None
    rule: str
    rejected: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepResult:
    """What a ``crawl_sweep`` measured: one :class:`SweepRow` per variant, in the order run.

    ``results`` holds each variant's full :class:`CrawlResult` (by variant name) in the test
    process; it is not part of the JSON. ``on_pick``, when set, is told every :meth:`best`
    choice (the fixture shows the test's last pick in the summary and sweep.json).
    """

    test_id: str
    rows: tuple[SweepRow, ...]
    isolated: bool = False
    results: Mapping[str, CrawlResult] = field(default_factory=dict, repr=False, compare=False)
    on_pick: Callable[[Pick], None] | None = field(default=None, repr=False, compare=False)

    def __iter__(self) -> Iterator[SweepRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, variant: str) -> SweepRow:
        """The row of the variant named ``variant``."""
        for row in self.rows:
            if row.variant == variant:
                return row
        raise KeyError(f"no variant {variant!r} in this sweep: {', '.join(r.variant for r in self.rows)}")

    def rejections(
        self,
        *,
        max_peak_rss: int | str | None = None,
        max_rss_growth: int | str | None = None,
        require_complete: bool = True,
        within_budgets: bool = True,
    ) -> dict[str, str]:
        """Why each variant that :meth:`best` would pass over cannot be picked, by variant name."""
        criteria = _criteria(max_peak_rss, max_rss_growth, require_complete, within_budgets, "responses_per_second")
        return self._rejections(criteria)

    def _rejections(self, criteria: Criteria) -> dict[str, str]:
        most_items = max((row.items for row in self.rows if not row.stopped), default=0)
        reasons = {row.variant: criteria.rejection(row, most_items) for row in self.rows}
        return {name: why for name, why in reasons.items() if why}

    def best(
        self,
        *,
        max_peak_rss: int | str | None = None,
        max_rss_growth: int | str | None = None,
        require_complete: bool = True,
        within_budgets: bool = True,
        key: str | Callable[[SweepRow], float] = "responses_per_second",
    ) -> SweepRow | None:
        """The fastest variant (by ``key``) within the memory limits that lost no data; ``None`` when none qualifies.

        A candidate got responses and was not stopped by the harness; with ``within_budgets`` it kept every
        budget of the test's ``crawl_memory`` marker; its peak RSS and RSS growth are at most
        ``max_peak_rss`` / ``max_rss_growth`` (bytes or ``"300 MiB"``); with
        ``require_complete`` it dropped no response to a size limit, gave up no request after
        retries and scraped as many items as the most complete variant. Among candidates the
        highest ``key`` wins (``responses_per_second`` by default; ``peak_rss``, ``rss_growth``
        and ``duration_seconds`` rank lowest first; a function of a row is maximized); ties
        go to the variant run first.
        """
        criteria = _criteria(max_peak_rss, max_rss_growth, require_complete, within_budgets, key)
        pick, row = self._pick(criteria)
        if self.on_pick is not None:
            self.on_pick(pick)
        return row

    def _pick(self, criteria: Criteria) -> tuple[Pick, SweepRow | None]:
        rejected = self._rejections(criteria)
        candidates = [row for row in self.rows if row.variant not in rejected]
        row = max(candidates, key=criteria.score) if candidates else None  # max keeps the first of equal scores
        return Pick(None if row is None else row.variant, criteria.describe(), rejected), row

    def default_pick(self) -> Pick:
        """What ``best()`` with no arguments picks: the fastest complete variant within the test's budgets."""
        return self._pick(Criteria())[0]

    def table(self, *, mark: str | None = None) -> str:
        """The sweep as a text table, one line per variant; ``mark`` (a variant name) gets a ``*``.

        Variants whose name is not their settings are followed by a legend of their settings.
        """
        header = ["variant", "peak RSS", "RSS growth", "growth/resp", "resp/s", "items", "dropped", "gave up",
                  "429", "503", "verdict", "budgets", "duration"]
        lines = [header] + [self._cells(row, mark) for row in self.rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        right = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12}
        text = ["  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                          for i, (cell, w) in enumerate(zip(line, widths, strict=True))).rstrip() for line in lines]
        legend = [f"{row.variant}: {json.dumps(dict(row.settings), default=str)}"
                  for row in self.rows if row.variant != derived_name(row.settings)]
        return "\n".join(text + legend)

    @staticmethod
    def _cells(row: SweepRow, mark: str | None) -> list[str]:
        per = row.per_response_bytes
        return [
            ("* " if row.variant == mark else "  ") + row.variant,
            format_size(row.peak_rss),
            format_size(row.rss_growth),
            "-" if per is None or not math.isfinite(per) else format_size(per),
            f"{row.responses_per_second:,.1f}",
            f"{row.items:,}",
            f"{row.dropped:,}",
            f"{row.gave_up:,}",
            f"{row.status_429:,}",
            f"{row.status_503:,}",
            row.verdict,
            "broken: " + ",".join(row.broken) if row.broken else "ok",
            f"{row.duration_seconds:.1f}s",
        ]

    def to_json(self, pick: Pick | None = None) -> dict[str, Any]:
        """The sweep as written to ``sweep.json``: rows, the pick (the default one unless given), why not the others."""
        pick = pick or self.default_pick()
        return {
            "schema_version": SCHEMA_VERSION,
            "test": self.test_id,
            "isolated": self.isolated,
            "variants": [row.to_json() for row in self.rows],
            "best": pick.variant,
            "best_rule": pick.rule,
            "rejected": dict(pick.rejected),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepResult:
        """Rebuild a sweep (without its CrawlResults) from :meth:`to_json`."""
        return cls(str(data["test"]), tuple(SweepRow.from_json(r) for r in data["variants"]), bool(data.get("isolated")))

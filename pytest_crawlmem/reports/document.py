"""report.json as typed records: the crawl's CrawlResult plus the report-level fields around it (any process, pure).

The one reader and writer of report.json's document: the report writer, report.html and ``crawlmem diff``
use :class:`ReportDocument`, never its keys. Reading never raises on content: a field of ``result`` that
cannot be read becomes a problem naming it, and a figure report.json does not hold as a number (an older
writer's report, a hand-edited one) is *not measured*: :meth:`ReportDocument.figure` gives ``None`` for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_crawlmem.core.budgets import Violation
from pytest_crawlmem.core.models import SCHEMA_VERSION, CrawlResult, Sample, json_value
from pytest_crawlmem.core.serial import upgraded
from pytest_crawlmem.reports.jsonl import is_number

#: The figures of ``result`` that CrawlResult holds as plain numbers (0 when absent): report.json must hold them as
#: numbers for them to be shown; absent, null or not a number, they are not measured ("-"), never a made-up 0.
FIGURES = (
    "responses", "items_scraped", "duration_seconds", "start_rss", "end_rss", "peak_rss", "rss_growth", "traced_peak",
    "max_scheduled", "max_inflight", "max_active_size", "backout_seconds", "dropped_count", "warnsize_warnings",
    "max_active_size_limit", "active_size_ratio", "max_disk_scheduled", "jobdir_disk", "max_media_cached",
    "scheduled_per_response", "retries", "retries_max_reached", "replay_hits", "replay_misses",
)

#: Where report.json's ``result`` holds each figure: its field (``peaks.max_scheduled``: read through the
#: attribute of the same name), or the key of a ``DERIVED`` one; reports of older writers are read upgraded.
FIGURE_PATHS: Mapping[str, tuple[str, ...]] = {
    name: tuple(CrawlResult.ALIASES.get(name, name).split(".")) for name in FIGURES
}


def at_path(data: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at ``path`` in nested report.json objects (``None`` when a step is missing)."""
    value: Any = data
    for step in path:
        value = value.get(step) if isinstance(value, Mapping) else None
    return value


def _without(data: Mapping[str, Any], path: Sequence[str]) -> dict[str, Any]:
    """``data`` (nested objects) without the key at ``path``."""
    out = dict(data)
    if len(path) == 1:
        out.pop(path[0], None)
    elif isinstance(out.get(path[0]), Mapping):
        out[path[0]] = _without(out[path[0]], path[1:])
    return out


@dataclass(frozen=True)
class ReportDocument:
    """One crawl's report.json: the result, the test, budgets and violations, the machine (pure)."""

    result: CrawlResult
    test: str | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)
    budgets: Mapping[str, Any] = field(default_factory=dict)  # the budgets that were set, by name, as report.json holds them
    violations: tuple[Violation, ...] = ()
    source: str | None = None  # the samples.jsonl a document was built from (no report.json)
    note: str = ""
    unmeasured: frozenset[str] = frozenset()  # FIGURES report.json does not hold as numbers
    problems: tuple[str, ...] = ()  # fields of report.json that could not be read
    unit: str = "responses"  # "pages" for a browser job

    @property
    def title(self) -> str:
        """What the report is about: the test id, else the file it was built from, else the spider."""
        return self.test or self.source or self.result.spider or "crawl"

    def figure(self, name: str) -> Any:
        """The result's figure ``name`` (one of :data:`FIGURES`), or ``None`` when the report does not hold it."""
        if name not in FIGURES:
            raise KeyError(f"{name!r} is not one of the figures report.json may lack (FIGURES): read the attribute")
        return None if name in self.unmeasured else getattr(self.result, name)

    def at(self, path: Sequence[str]) -> Any:
        """The result's attribute at ``path`` (report.json's keys), ``None`` for a figure not measured or a missing step."""
        for name, figure_path in FIGURE_PATHS.items():
            if tuple(path[:len(figure_path)]) == figure_path and name in self.unmeasured:
                return None
        value: Any = self.result
        for step in path:
            value = getattr(value, step, None) if value is not None else None
        return value

    def to_json(self) -> dict[str, Any]:
        """The document as report.json holds it (``source`` and ``note`` only when set)."""
        document: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "test": self.test}
        if self.source is not None:
            document["source"] = self.source
        if self.note:
            document["note"] = self.note
        document.update({
            "environment": dict(self.environment),
            "budgets": dict(self.budgets),
            "violations": [{"budget": v.budget, "measured": json_value(v.measured), "limit": json_value(v.limit),
                            "message": v.message, "fails": v.fails} for v in self.violations],
            "result": self.result.to_json(),
        })
        return document

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, samples: Sequence[Sample] = ()) -> ReportDocument:
        """Read report.json's document back (``data["result"]`` must be an object; anything else is tolerated)."""
        written = upgraded(CrawlResult, data["result"])
        result, problems = read_result(written, samples=tuple(samples))
        unmeasured = frozenset(name for name, path in FIGURE_PATHS.items() if not is_number(at_path(written, path)))
        test, source, note = data.get("test"), data.get("source"), data.get("note")
        environment, budgets = data.get("environment"), data.get("budgets")
        return cls(
            result=result,
            test=str(test) if test else None,
            environment=dict(environment) if isinstance(environment, Mapping) else {},
            budgets=dict(budgets) if isinstance(budgets, Mapping) else {},
            violations=tuple(_violation(v) for v in data.get("violations") or () if isinstance(v, Mapping)),
            source=str(source) if source else None,
            note=str(note) if note else "",
            unmeasured=unmeasured,
            problems=tuple(problems),
        )


def _violation(data: Mapping[str, Any]) -> Violation:
    """A violation as report.json holds it (a missing name is ``?``; ``fails`` unless it says otherwise)."""
    measured, limit = data.get("measured"), data.get("limit")
    return Violation(str(data.get("budget", "?")), measured if is_number(measured) else float("nan"),
                     limit if is_number(limit) else float("nan"), str(data.get("message", "")),
                     bool(data.get("fails", True)))


def read_result(data: Mapping[str, Any], *, samples: tuple[Sample, ...] = ()) -> tuple[CrawlResult, list[str]]:
    """``CrawlResult.from_json`` that never raises: each field that cannot be read is left out and named in a problem."""
    clean = upgraded(CrawlResult, data)
    for path in FIGURE_PATHS.values():
        value = at_path(clean, path)
        if value is not None and not is_number(value):
            clean = _without(clean, path)
    try:
        return CrawlResult.from_json(clean, samples=samples), []
    except Exception:  # a hand-edited report can hold anything: find the fields at fault
        pass
    problems = []
    clean = dict(clean)
    for key, value in list(clean.items()):
        try:
            CrawlResult.from_json({key: value})
        except Exception as exc:  # any error names the field
            del clean[key]
            problems.append(f"report.json: result.{key} cannot be read ({type(exc).__name__}: {exc}); not shown")
    return CrawlResult.from_json(clean, samples=samples), problems

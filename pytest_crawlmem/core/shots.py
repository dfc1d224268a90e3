"""Accounting of screenshot-API captures a crawl downloads: counts by verdict, billing, bytes (crawl process).

A capture is any response with an ``X-Page-Verdict`` header (the fixture site's ``/shot``
route, or a hosted screenshot service answering the same way); ``X-Billed`` says whether
it was billed. A capture is billed correctly when it is billed exactly when its verdict is
``clean``. Pure apart from duck-typed reads of a Scrapy response: no pytest, no Scrapy import.
"""

from __future__ import annotations

from typing import Any

from pytest_crawlmem.core.models import ShotMismatch, ShotSummary

VERDICT_HEADER = "X-Page-Verdict"
BILLED_HEADER = "X-Billed"
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})
#: Mismatched captures kept by URL (the count is exact).
MISMATCHES_KEPT = 20


def parse_billed(value: str | None) -> bool | None:
    """``True``/``False`` for an ``X-Billed`` value, ``None`` when it is missing or unreadable."""
    if value is None:
        return None
    text = value.strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


def _header(headers: Any, name: str) -> str | None:
    """A header's value as text (Scrapy's Headers return bytes), ``None`` if absent."""
    value = headers.get(name) if headers is not None else None
    if value is None:
        return None
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


class ShotLedger:
    """Counts the captures of one crawl as their responses arrive (reactor thread)."""

    def __init__(self) -> None:
        self.by_verdict: dict[str, int] = {}
        self.billed_by_verdict: dict[str, int] = {}
        self.bytes_total = 0
        self.max_bytes = 0
        self.replayed = 0
        self.unreadable_billing = 0
        self.mismatches: list[ShotMismatch] = []

    def response_received(self, response: Any, request: Any, spider: Any) -> None:
        """Scrapy's ``response_received`` signal: count the response if it is a capture."""
        verdict = _header(getattr(response, "headers", None), VERDICT_HEADER)
        if verdict is None:
            return
        if "cached" in (getattr(response, "flags", None) or ()):  # replayed by HttpCacheMiddleware: not a new capture
            self.replayed += 1
            return
        billed = parse_billed(_header(response.headers, BILLED_HEADER))
        self.add(response.url, verdict, billed, len(response.body))

    def add(self, url: str, verdict: str, billed: bool | None, size_bytes: int) -> None:
        """Count one capture; ``billed=None`` (unreadable ``X-Billed``) counts as not billed."""
        verdict = verdict.strip().lower() or "unknown"
        self.by_verdict[verdict] = self.by_verdict.get(verdict, 0) + 1
        if billed is None:
            self.unreadable_billing += 1
        if billed:
            self.billed_by_verdict[verdict] = self.billed_by_verdict.get(verdict, 0) + 1
        self.bytes_total += size_bytes
        self.max_bytes = max(self.max_bytes, size_bytes)
        if bool(billed) != (verdict == "clean") and len(self.mismatches) < MISMATCHES_KEPT:
            self.mismatches.append(ShotMismatch(url, verdict, bool(billed)))

    def summary(self) -> ShotSummary | None:
        """What was counted, or ``None`` when the crawl saw no capture."""
        if not self.by_verdict and not self.replayed:
            return None
        return ShotSummary(
            captures=sum(self.by_verdict.values()),
            by_verdict=dict(sorted(self.by_verdict.items())),
            billed=sum(self.billed_by_verdict.values()),
            billed_by_verdict=dict(sorted(self.billed_by_verdict.items())),
            bytes_total=self.bytes_total,
            max_bytes=self.max_bytes,
            replayed=self.replayed,
            unreadable_billing=self.unreadable_billing,
            mismatches=tuple(self.mismatches),
        )


def describe_mismatch(summary: ShotSummary, shown: int = 3) -> str:
    """``3 captures billed without a clean verdict (2 blank, 1 bot-check) and 1 clean captures not billed: URL (...), ...``."""
    parts = []
    if summary.billed_not_clean:
        kinds = ", ".join(f"{n:,} {v}" for v, n in summary.billed_by_verdict.items() if v != "clean" and n)
        parts.append(f"{summary.billed_not_clean:,} captures billed without a clean verdict ({kinds})")
    if summary.clean_not_billed:
        parts.append(f"{summary.clean_not_billed:,} clean captures not billed")
    examples = ", ".join(f"{m.url} ({m.verdict}, {'billed' if m.billed else 'not billed'})" for m in summary.mismatches[:shown])
    return " and ".join(parts) + (f": {examples}" if examples else "")

"""The governor's admission by cost, before the parse (crawl process, reactor thread).

A callback's spike (``json.loads(response.text)`` of a 20 MiB document: about 7x its body) falls between two of the
governor's readings; lowering concurrency afterwards does not undo it. :class:`CostAdmission` is asked by the
download gate (:class:`~pytest_crawlmem.governor.gates.DownloadGate`) before each download starts, and lets it
through only while RSS, the bodies of the downloads under way (announced by their Content-Length, else the mean
body) and one parse of the largest body not yet parsed (times the amplification measured on earlier callbacks) stay
under the act share (:func:`~pytest_crawlmem.governor.policy.admits_by_cost`). With nothing downloading it
always lets one through: the crawl never stalls, and a request that alone passes the budget is said
(:func:`~pytest_crawlmem.governor.policy.unmeetable`): one WARNING, ``crawlmem/governor/unmeetable`` and
``unmeetable`` in governor.json.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

from pytest_crawlmem.governor.policy import (
    BODY_COPIES,
    PARSE_LEARN,
    PARSE_MIN_BODY_BYTES,
    PARSE_SAMPLE_EVERY,
    Outstanding,
    ParseCost,
    Unmeetable,
    admits_by_cost,
    unmeetable,
)

logger = logging.getLogger("pytest_crawlmem.governor")
#: Requests named in governor.json's ``unmeetable`` (the stat counts them all).
UNMEETABLE_KEPT = 20


class CostAdmission:
    """Admits downloads by what they will cost; learns the parse amplification; says what cannot fit the budget."""

    def __init__(self, budget_bytes: int, limit_bytes: float, rss: Callable[[], int], stats: Any,
                 base_rss: Callable[[], int] | None = None, recent_rss: Callable[[], int] | None = None) -> None:
        self.budget_bytes = budget_bytes
        self.limit_bytes = limit_bytes  # the projection must stay under this (the act share)
        self.rss = rss  # RSS now: a parse's rise is measured with it
        #: RSS for an answer: a reading a few ms old and the bodies received since will do
        self.recent_rss = recent_rss or rss
        #: RSS with nothing in flight (the governor's reading at the open): what one request alone adds to
        self.base_rss = base_rss or rss
        self.stats = stats
        self.parse = ParseCost()
        self.mean_body_bytes = 0.0  # the governor's mean body (headers and responses)
        #: what a response's items carry (the governor's items a response x item payload)
        self.yielded: Callable[[], float] = lambda: 0.0
        self.downloading: Callable[[], int] = lambda: 0  # downloads let through the gate, not yet received
        self._announced: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # request -> Content-Length
        self._received: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # response -> body, unparsed
        self._parsing: dict[int, tuple[int, int]] = {}  # id(response) -> (body bytes, RSS as its callback began)
        self.holds = 0  # downloads held back by their cost
        self._largest_seen = 0  # the largest body announced or received so far (fits' bound)
        self._largest_parsed = 0  # the largest body whose parse was measured
        self._parses = 0  # parses of bodies large enough to measure
        self.unmet: list[Unmeetable] = []
        self.unmet_count = 0
        self._said: weakref.WeakSet[Any] = weakref.WeakSet()  # requests already named

    def outstanding(self) -> Outstanding:
        """The downloads under way and the largest body still to be parsed."""
        announced = list(self._announced.values())
        largest = max([*announced, *self._received.values()], default=0)
        return Outstanding(self.downloading(), len(announced), sum(announced), self.mean_body_bytes, float(largest),
                           self.yielded())

    def fits(self) -> bool:
        """Whether one more download fits by cost (the gate asks while something is downloading).

        First against a bound that needs no walk of the downloads under way: each of them, and one more, at the
        largest body seen; most downloads of a crawl far from its budget are admitted there."""
        rss = self.recent_rss()
        largest = max(self._largest_seen, self.mean_body_bytes)
        if self.mean_body_bytes > 0:
            coming = max(self.downloading(), len(self._announced)) + 1
            bound = rss + coming * (BODY_COPIES * largest + self.yielded()) + self.parse.amplification * largest
            if bound <= self.limit_bytes:
                return True
        if admits_by_cost(rss, self.outstanding(), self.parse, self.limit_bytes):
            return True
        self.holds += 1
        return False

    def headers(self, request: Any, body_length: int) -> None:
        """A download announced its size: count it as coming; say so if it alone cannot fit."""
        if body_length > 0:
            self._announced[request] = body_length
            self._largest_seen = max(self._largest_seen, body_length)
            self._check(request, body_length, "announced")

    def response(self, request: Any, response: Any, body_length: int) -> None:
        """A body arrived: it is in RSS now, its parse still to come."""
        self._announced.pop(request, None)
        if body_length > 0:
            self._received[response] = body_length
            self._largest_seen = max(self._largest_seen, body_length)
            self._check(request, body_length, "measured")

    @property
    def measuring(self) -> bool:
        """Whether a parse is being measured (a callback of a large body has begun and not ended)."""
        return bool(self._parsing)

    def parse_phase(self, response: Any, phase: int) -> None:
        """The start gate saw a callback begin (0), give its first output (1) or end (2): learn what the parse cost.

        The first PARSE_LEARN parses of bodies of PARSE_MIN_BODY_BYTES and more are measured, then one in
        PARSE_SAMPLE_EVERY and each of a body larger than any measured."""
        key = id(response)
        if phase == 0:
            body = self._received.pop(response, None)
            if body is None:
                body = len(getattr(response, "body", b"") or b"")
            if body < PARSE_MIN_BODY_BYTES:  # a smaller parse teaches nothing (ParseCost.observe): no RSS read
                return
            self._parses += 1
            if (self.parse.readings >= PARSE_LEARN and body <= self._largest_parsed
                    and self._parses % PARSE_SAMPLE_EVERY):
                return
            self._largest_parsed = max(self._largest_parsed, body)
            self._parsing[key] = (body, self.rss())
            return
        began = self._parsing.pop(key, None)
        if began is not None:
            self.parse.observe(began[0], self.rss() - began[1])

    def _check(self, request: Any, body_length: int, basis: str) -> None:
        """Say once when this request alone, over the crawl's RSS with nothing in flight, passes the budget. Not over
        RSS now: a crawl over its budget called a 20 KiB page unmeetable (and each check read RSS, a third of the
        governor's CPU on a crawl of small pages)."""
        base = self.base_rss()
        if body_length * (1.0 + self.parse.amplification) <= self.budget_bytes - base:
            return  # what unmeetable() says of it (announced: the body and its parse; measured: its parse over base + body)
        if request in self._said:
            return
        base += body_length if basis == "measured" else 0  # a measured body is in RSS already
        found = unmeetable(str(getattr(request, "url", "?")), body_length, basis, base, self.budget_bytes, self.parse)
        if found is None:
            return
        self._said.add(request)
        self.unmet_count += 1
        self.stats.set_value("crawlmem/governor/unmeetable", self.unmet_count)
        self.stats.max_value("crawlmem/governor/unmeetable_fits_bytes", found.fits_bytes)
        if len(self.unmet) < UNMEETABLE_KEPT:
            self.unmet.append(found)
        if self.unmet_count == 1:
            logger.warning("crawlmem governor: %s", found.sentence())
        else:
            logger.info("crawlmem governor: %s", found.sentence())

    def records(self) -> list[dict[str, Any]]:
        """The requests that could not fit, as governor.json keeps them."""
        return [vars(found) | {"sentence": found.sentence()} for found in self.unmet]


def payload_bytes(item: Any, depth: int = 2) -> int:
    """The bytes an item carries: its str and bytes values, one container deep (a cheap lower bound: a loop, not a
    generator, as it is called inside callbacks' output)."""
    if isinstance(item, _TEXT):
        return len(item)
    if depth <= 0:
        return 0
    if isinstance(item, (list, tuple)):
        values: Any = item
    else:
        values = getattr(item, "values", None)
        if values is None:
            return 0
        try:
            values = values()
        except TypeError:
            return 0
    total = 0
    try:
        for value in values:
            total += len(value) if isinstance(value, _TEXT) else payload_bytes(value, depth - 1) if depth > 1 else 0
    except TypeError:
        return 0
    return total


_TEXT = (bytes, bytearray, str)

"""Which samples the plugin's own checkpoints disturbed (crawl process).

A drained checkpoint holds the engine until the scraper is empty; once resumed, downloads start together and the
scraper fills again. Whether the scraper is over ``SCRAPER_SLOT_MAX_ACTIVE_SIZE`` meanwhile says what the plugin did,
not what the crawl does: such samples carry no backout reading. The refill ends when as many downloads as the pause
found in flight have landed and the scraper holds what it typically holds outside the pauses (the median of its
recent readings), or when it is over its limit again; after twice the drain at most. (Letting the crawl run free
4 x D after a drain of D seconds was tried: under load it dropped checkpoints short crawls need, and 8 detection
tests read inconclusive or steady on a fresh-clone CI run; it was taken out. Between checkpoints that come this
often the scraper may never reach the limit it would reach without them: core/backpressure.py also reads whether it
ever caught up.)
The reactor thread calls :meth:`paused` and :meth:`resumed`; the sampler thread :meth:`held`.
"""

from __future__ import annotations

import statistics
import time
from collections import deque

#: Readings outside pauses whose median is what the scraper typically holds.
TYPICAL_READINGS = 100


class PauseRefill:
    """The checkpoints' pause and refill, as the sampler must leave them out of the scraper's figures."""

    def __init__(self, interval_seconds: float) -> None:
        self.interval_seconds = interval_seconds
        self.is_paused = False
        self._until = 0.0  # monotonic: the refill ends by then at the latest (0: not refilling)
        self._inflight = 0  # downloads in flight when the pause began
        self._landed_at = 0  # the response count by which as many downloads started after the pause have landed
        self._typical: deque[int] = deque(maxlen=TYPICAL_READINGS)

    def paused(self, inflight: int | None) -> None:
        """A checkpoint holds the engine (reactor thread)."""
        self.is_paused = True
        self._inflight = inflight or 0

    def resumed(self, responses: int, pause_seconds: float) -> None:
        """The engine runs again after a pause of ``pause_seconds``, at ``responses`` responses."""
        now = time.monotonic()
        self._landed_at = responses + self._inflight
        self._until = now + max(2 * pause_seconds, self.interval_seconds)
        self.is_paused = False

    def held(self, active_size_bytes: int | None, backout: bool | None, responses: int) -> bool:
        """Whether a sample now is the plugin's doing (paused or refilling), not the crawl's (sampler thread)."""
        if self.is_paused:
            return True
        if self._until:
            typical = statistics.median(self._typical) if self._typical else 0
            back = backout or (responses >= self._landed_at and (active_size_bytes or 0) >= typical)
            if time.monotonic() < self._until and not back:
                return True
            self._until = 0.0  # the crawl's own regime again
        if active_size_bytes is not None:
            self._typical.append(active_size_bytes)
        return False

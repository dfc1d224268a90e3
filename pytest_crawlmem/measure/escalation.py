"""A stop that carries itself through: each step runs when the ones before it did not end the crawl (crawl process).

A harness stop (``timeout``, ``kill_at``, pages never closed) pauses the engine and closes the spider; a closing
spider waits for every download in flight, and a browser download waiting for a page slot never finishes. So a stop
under way escalates: every ``step_seconds`` that the crawl has not ended, the next step runs (a browser crawl's: close
every page, close every context, kill the browser), and the timeout, reached while a stop is under way, runs the
next step at once instead of being ignored. The steps and the test of "ended" are the caller's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

#: Seconds a step is given to end the crawl before the next one runs.
STEP_SECONDS = 1.5
#: Seconds between steps once the deadline (the timeout) has passed: the crawl is overdue, the steps hurry.
OVERDUE_STEP_SECONDS = 0.5

#: A step: a name and the action, which returns what it did (one clause: "closed 4 pages").
Step = tuple[str, Callable[[], str]]


class StopEscalation:
    """The steps of one stop, run in order on the reactor thread until ``ended()`` (start with :meth:`start`)."""

    def __init__(
        self,
        steps: Sequence[Step],
        *,
        ended: Callable[[], bool],
        call_later: Callable[..., Any],
        logger: logging.Logger,
        step_seconds: float = STEP_SECONDS,
        note: Callable[[str], object] | None = None,
    ) -> None:
        self.steps = list(steps)
        self.ended = ended
        self.call_later = call_later
        self.logger = logger
        self.step_seconds = step_seconds
        self.note = note  # where what each step did is recorded (the crawl's errors), besides the log
        self.done: list[str] = []  # what the steps that ran did, in order
        self._next = 0
        self._call: Any = None

    @property
    def started(self) -> bool:
        """Whether the stop is under way."""
        return self._call is not None or bool(self.done)

    def start(self) -> None:
        """Schedule the first step (the stop itself has been asked for)."""
        if self._call is None and not self.done:
            self._call = self.call_later(self.step_seconds, self.tick)

    def escalate(self, why: str) -> None:
        """Run the next step now, and the ones after it every :data:`OVERDUE_STEP_SECONDS` (``why``: what made the
        wait end early: the timeout, reached while the stop was under way)."""
        self.cancel()
        self.step_seconds = min(self.step_seconds, OVERDUE_STEP_SECONDS)
        self.tick(why)

    def tick(self, why: str = "") -> None:
        """Run the next step unless the crawl ended; schedule the one after."""
        self._call = None
        if self.ended() or self._next >= len(self.steps):
            return
        name, action = self.steps[self._next]
        self._next += 1
        try:
            did = action()
        except Exception as exc:  # a step that fails must not stop the ones after it
            did = f"{name} failed: {exc!r}"
        cause = why or f"the crawl had not stopped {self.step_seconds:g} s after the last step"
        line = f"stop under way: {cause}: {did}"
        self.done.append(did)
        self.logger.warning("crawlmem: %s", line)
        if self.note is not None:
            self.note(line)
        if self._next < len(self.steps):
            self._call = self.call_later(self.step_seconds, self.tick)

    def cancel(self) -> None:
        """Cancel the scheduled step, if any."""
        call, self._call = self._call, None
        if call is not None and call.active():
            call.cancel()

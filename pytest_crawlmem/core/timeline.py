"""A bounded timeline of samples at adaptive resolution that never loses a peak (pure: no pytest, no Scrapy).

Runs in the crawl process, fed by the sampler thread. While fewer than ``max_samples`` are
kept every sample is kept as taken. When the bound is reached, neighbouring samples are merged
pairwise (halving the resolution) and from then on every ``span`` raw samples are merged into
one before they are kept. A merged sample holds the **maximum** of every memory, queue and disk
figure of the samples it stands for, the time and counts of the one with the highest RSS, and
``span``, how many raw samples it stands for, so maxima (peak RSS, queue peaks) read from a
thinned timeline equal those of the full one. Shares of samples (the scraper's backout) are
weighted by ``span``; each kept sample's backout flag is chosen by error diffusion from the exact
count of raw samples in backout, so the weighted share of any prefix of the timeline is within
half a kept sample's span of the true one (a uniform 30% backout stays 30%, not 0% by majority).
Typical levels cannot be read from merged maxima: the RSS above the drained level (the
``downloader-activity`` verdict's median) is kept from every raw sample by :class:`DrainedExcess`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pytest_crawlmem.core.excess import DrainedExcess, ExcessSummary
from pytest_crawlmem.core.models import (
    PEAK_FIELDS as PEAK_FIELDS,  # merged by taking the larger of two readings (None when neither had one)
)
from pytest_crawlmem.core.models import Checkpoint, Sample

MIN_SAMPLES = 16
MIN_CHECKPOINTS = 8


def _larger(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b


def merge(a: Sample, b: Sample) -> Sample:
    """One sample standing for ``a`` then ``b``: peaks of both, time and counts of the one with the higher RSS.

    Its backout flag is ``None`` when neither knew, else provisional: :class:`Timeline` sets it from exact counts.
    """
    top = b if b.rss_bytes >= a.rss_bytes else a
    span = a.span + b.span
    backout = None if a.backout is None and b.backout is None else bool(a.backout or b.backout)
    peaks: dict[str, Any] = {name: _larger(getattr(a, name), getattr(b, name)) for name in PEAK_FIELDS}
    return replace(top, span=span, backout=backout, **peaks)


class Timeline:
    """The crawl's samples, at most ``max_samples`` of them (0: unbounded), thinned by pairwise merging.

    Not thread-safe by itself: :class:`pytest_crawlmem.probes.recording.Recording` holds a lock around it.
    """

    def __init__(self, max_samples: int = 0, max_checkpoints: int = 0) -> None:
        if max_samples and max_samples < MIN_SAMPLES:
            raise ValueError(f"invalid max_samples {max_samples}: expected 0 (unbounded) or at least {MIN_SAMPLES}")
        if max_checkpoints and max_checkpoints < MIN_CHECKPOINTS:
            raise ValueError(f"invalid max_checkpoints {max_checkpoints}: expected 0 (unbounded) or at least {MIN_CHECKPOINTS}")
        self.max_samples = max_samples
        self.max_checkpoints = max_checkpoints
        self.span = 1  # raw samples per kept sample, for samples arriving now
        self.raw_samples = 0  # every sample ever added
        self.checkpoints_added = 0
        self._kept: list[Sample] = []
        self._backouts: list[int] = []  # raw samples in backout behind each kept sample
        self._pending: Sample | None = None  # raw samples merged so far into the next kept one
        self._pending_backouts = 0
        self._true_backouts = 0  # raw samples in backout behind the kept ones
        self._shown_backouts = 0  # spans of the kept samples flagged in backout
        self._checkpoints: list[Checkpoint] = []
        self._excess = DrainedExcess()  # RSS above the drained level, from every raw sample

    def add(self, sample: Sample) -> None:
        """Keep ``sample`` (a raw one, ``span == 1``), merging as the resolution requires."""
        self.raw_samples += 1
        self._excess.add_sample(sample.rss_bytes, sample.inflight)
        backouts = sample.span if sample.backout else 0
        if self._pending is None:
            self._pending, self._pending_backouts = sample, backouts
        else:
            self._pending_backouts += backouts
            self._pending = merge(self._pending, sample)
        if self._pending.span >= self.span:
            self._keep(self._pending, self._pending_backouts)
            self._pending = None
            self._pending_backouts = 0
            if self.max_samples and len(self._kept) >= self.max_samples:
                self._halve()

    def _keep(self, sample: Sample, backouts: int) -> None:
        """Append a kept sample, flagging it in backout when that brings the shown count nearer the true one."""
        self._true_backouts += backouts
        if sample.backout is not None and sample.span > 1:
            flag = 2 * (self._true_backouts - self._shown_backouts) >= sample.span
            if flag != sample.backout:
                sample = replace(sample, backout=flag)
        if sample.backout:
            self._shown_backouts += sample.span
        self._kept.append(sample)
        self._backouts.append(backouts)

    def _halve(self) -> None:
        """Merge neighbouring kept samples pairwise and double the span of those to come."""
        kept, backouts = self._kept, self._backouts
        self._kept, self._backouts = [], []
        self._true_backouts = self._shown_backouts = 0
        for i in range(0, len(kept) - 1, 2):
            self._keep(merge(kept[i], kept[i + 1]), backouts[i] + backouts[i + 1])
        if len(kept) % 2:
            self._keep(kept[-1], backouts[-1])
        self.span *= 2

    def samples(self) -> list[Sample]:
        """The kept samples in time order, with the newest partly merged one last."""
        pending = self._pending
        if pending is None:
            return list(self._kept)
        if pending.backout is not None and pending.span > 1:
            flag = 2 * (self._true_backouts + self._pending_backouts - self._shown_backouts) >= pending.span
            pending = replace(pending, backout=flag)
        return [*self._kept, pending]

    def __len__(self) -> int:
        return len(self._kept) + (self._pending is not None)

    def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep a checkpoint; past ``max_checkpoints``, drop every other one between the first and the last four."""
        self.checkpoints_added += 1
        self._excess.add_checkpoint(checkpoint.rss_bytes)
        self._checkpoints.append(checkpoint)
        if self.max_checkpoints and len(self._checkpoints) > self.max_checkpoints:
            self._checkpoints = thin_checkpoints(self._checkpoints)

    def excess_summary(self) -> ExcessSummary | None:
        """Sampled RSS above the drained level around it, over every raw sample (thinning cannot bias it)."""
        return self._excess.summary()

    @property
    def checkpoints(self) -> list[Checkpoint]:
        """The kept checkpoints, in the order taken (the list itself: callers must not change it)."""
        return self._checkpoints


def thin_checkpoints(checkpoints: Sequence[Checkpoint], keep_last: int = 4) -> list[Checkpoint]:
    """Drop every other checkpoint, keeping the first and the last ``keep_last`` (the ones the verdict reads most)."""
    if len(checkpoints) <= keep_last + 2:
        return list(checkpoints)
    head, middle, tail = checkpoints[0], checkpoints[1:-keep_last], checkpoints[-keep_last:]
    return [head, *middle[1::2], *tail]


def weighted_share(samples: Sequence[Sample]) -> float | None:
    """Share of the raw samples behind ``samples`` that were in backout (``None`` when none knew)."""
    known = sum(s.span for s in samples if s.backout is not None)
    if not known:
        return None
    return sum(s.span for s in samples if s.backout) / known

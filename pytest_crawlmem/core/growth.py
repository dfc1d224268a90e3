"""Growth verdicts from drained checkpoints (pure: no pytest, no Scrapy).

The leak rule is a trend judgement over the drained checkpoints after the warm-up, using the crawl's own noise:
the least-squares slope of memory against responses (net of what the scheduler's queue holds, at the crawl's own
cost per queued request, and of an allowance for requests added to it) with a one-sided 95% bound from the
residuals. A leak is declared when the lower bound exceeds the threshold and the later half of the window still
grew by the threshold: one noisy interval moves the slope by its share and widens the bound, it cannot cancel a
sustained leak. The two largest steps are counted at the typical step (allocator ratchets are one-off steps) and
the later-half clause keeps a bounded cache that filled and levelled off from being called a leak.

Every verdict states its power: the smallest leak this crawl would have caught in 95% of runs like it
(``Growth.detectable_per_response_bytes``). ``steady`` says it; a crawl whose noise cannot bring it under
MAX_STATED_PER_RESPONSE is ``inconclusive`` and says how many responses would. A crawl too short for the regular
warm-up is judged by the same trend after STRONG_WARMUP_RESPONSES at STRONG_FACTOR (3) times the threshold, and by
Scrapy objects that rose at every checkpoint and were still held after the crawl ended (proven retention).

:func:`analyze` builds one :class:`~pytest_crawlmem.core.evidence.Evidence` from the checkpoints and runs the ordered
:data:`~pytest_crawlmem.core.rules.RULES`; the first rule that returns a verdict decides. The parts: ``schedule`` (when
checkpoints are taken, the warm-up), ``stages`` (browser, media, JOBDIR, downloads, processing pressure), ``evidence``
(what the checkpoints show, the trend and its power), ``rules`` (the verdict rules, in order). The names come from
:mod:`pytest_crawlmem.core.verdicts`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from pytest_crawlmem.core import verdicts as V
from pytest_crawlmem.core.defaults import CHECKPOINT_MIN_RESPONSES, DEFAULT_LEAK_PER_RESPONSE
from pytest_crawlmem.core.evidence import DEFAULT_DISK_PER_RESPONSE, REQUEST_ALLOWANCE, Limits, gather
from pytest_crawlmem.core.excess import ExcessSummary
from pytest_crawlmem.core.models import Checkpoint, Growth, MediaSummary, Sample, SizeDistribution
from pytest_crawlmem.core.rules import RULES, with_undrained
from pytest_crawlmem.core.stages import DEFAULT_BROWSER_PER_PAGE, MIN_DELTAS

STRONG_MIN_DELTAS = MIN_DELTAS


#: The fix that usually helps, per verdict (appended to the failure message); from the vocabulary.
FIXES = {name: v.fix for name, v in V.VERDICTS.items() if v.fix and name != V.INCONCLUSIVE}


#: After an attribution window closes, checkpoints come every POST_WINDOW_STEPS x CRAWLMEM_CHECKPOINT_MIN_RESPONSES for
#: this many responses. The window's traced checkpoints are not judged, and the trend after it is what tells a leak from
#: a cache that filled in it (``residue_after_rates``): on the sparse schedule a 609-response crawl kept 2 checkpoints
#: after its window (about 465 and the close), a 1 KiB/product keeper's rate over them read -0.2 to 0.75 KiB/response
#: (its queue drains and its close releases in that last interval), as a filled cache's did, so its residue was
#: over-corrected and 7 of 40 saved nested-dict keepers read ``steady`` (benchmarks/rejudge.py). A window opens only
#: when the checkpoints look like growth: none of the saved clean crawls but the filling cache's opened one.
POST_WINDOW_DENSE_RESPONSES = 200


class Analysis(TypedDict, total=False):
    """What a run's path knows for :func:`analyze` beyond its checkpoints, samples and threshold (each the parameter's
    type): ``assemble.judge`` passes it through, typed."""

    request_allowance: int
    max_active_size: int | None
    browser_per_page: int
    response_sizes: SizeDistribution | None
    media: MediaSummary | None
    media_failure_body_bytes: float
    disk_per_response: int
    held_after_close: Mapping[str, int] | None
    min_interval: int
    download_excess: ExcessSummary | None
    responses_per_copy: int | None
    running: bool


def analyze(
    checkpoints: Sequence[Checkpoint],
    samples: Sequence[Sample] = (),
    *,
    leak_per_response: int = DEFAULT_LEAK_PER_RESPONSE,
    request_allowance: int = REQUEST_ALLOWANCE,
    max_active_size: int | None = None,
    browser_per_page: int = DEFAULT_BROWSER_PER_PAGE,
    response_sizes: SizeDistribution | None = None,
    media: MediaSummary | None = None,
    media_failure_body_bytes: float = 0.0,
    disk_per_response: int = DEFAULT_DISK_PER_RESPONSE,
    held_after_close: Mapping[str, int] | None = None,
    min_interval: int = CHECKPOINT_MIN_RESPONSES,
    download_excess: ExcessSummary | None = None,
    responses_per_copy: int | None = None,
    running: bool = False,
) -> Growth:
    """Return the verdict for a crawl from its checkpoints (and samples for processing pressure).

    The :data:`RULES` run in order over one :class:`Evidence`: a short crawl's strong trend, proven retention,
    browser verdict, strong-trend bound, or too few checkpoints; then the regular trend's ``retained-objects`` (or
    ``media-disk`` when the media pipelines' cached failures hold all of the retained Scrapy objects),
    ``browser-state``, rising objects, ``scheduler-backlog``, ``response-processing``, ``media-disk`` (JOBDIR growing
    on disk), ``downloader-activity``, ``steady``, and ``inconclusive`` when the noise bounds no leak under
    MAX_STATED_PER_RESPONSE. ``response_sizes`` (the crawl's body sizes) is needed for ``downloader-activity``;
    ``media`` (the pipelines' cache at close) and ``media_failure_body_bytes`` (mean body of the failed media
    responses) for the media cache's explanation. ``held_after_close`` counts, per Scrapy class, the crawl's objects
    still alive after it ended that a module, class or library structure was shown to hold (proven retention).
    ``min_interval`` is the extension's CRAWLMEM_CHECKPOINT_MIN_RESPONSES (to say how many responses a judgement
    needs); ``responses_per_copy`` a replayed crawl's recording size (to say which ``replay_copies`` would do).
    ``download_excess`` is the timeline's running summary of RSS above the drained level (exact on a thinned one).
    ``running``: the crawl still runs (a production crawl's verdict so far), so its last checkpoint is no close.
    """
    limits = Limits(leak_per_response, request_allowance, max_active_size, browser_per_page, disk_per_response,
                    min_interval, responses_per_copy, running)
    ev = gather(checkpoints, samples, limits, media=media, media_failure_body_bytes=media_failure_body_bytes,
                held_after_close=dict(held_after_close or {}), response_sizes=response_sizes,
                download_excess=download_excess)
    for rule in RULES:
        growth = rule(ev)
        if growth is not None:
            return with_undrained(growth, ev)
    raise AssertionError("the last rule always decides")  # pragma: no cover

"""Declared growth set aside before the leak judgement, and named as a leak past its declaration (pure, any process).

Each drained checkpoint carries what every declared holder measured (``Checkpoint.declared_bytes``: its deep size as
tracemalloc counts it; ``declared_heap_bytes``: as the heap estimate counts it, a small object at pymalloc's mean
block). :func:`judge_declared` takes each holder's growth since the first checkpoint out of the judged memory, then
judges the rest with the usual rules (``growth.analyze``). A holder whose own growth per response, over the judged
checkpoints, is over its declaration is a leak named as such (``retained-objects``: "spider.seen_ids grew 2.1
KiB/response, over its declared 600 B/response"); only its declared share is set aside, so the rest of memory is
judged with its excess in. The reason of every verdict says what was set aside.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.declared import Declared, DeclaredGrowth, declared_of, set_aside_sentence
from pytest_crawlmem.core.evidence import judged_checkpoints
from pytest_crawlmem.core.models import Checkpoint, Growth, GrowthSite, Holder
from pytest_crawlmem.core.rules import DECLARED_RULE
from pytest_crawlmem.core.schedule import WARMUP_RESPONSES
from pytest_crawlmem.core.trend import slope_only
from pytest_crawlmem.core.units import format_size

#: A holder's rate is judged over drained checkpoints spanning at least this many responses.
MIN_SPAN_RESPONSES = WARMUP_RESPONSES


def _series(checkpoints: Sequence[Checkpoint], holder: str, *, heap: bool) -> list[int]:
    """The holder's bytes at each checkpoint (0 where it was not found: not created yet, or gone)."""
    return [int((c.declared_heap_bytes if heap else c.declared_bytes).get(holder, 0)) for c in checkpoints]


def _found(checkpoints: Sequence[Checkpoint], holder: str) -> bool:
    return any(holder in c.declared_bytes for c in checkpoints)


def holder_rate(checkpoints: Sequence[Checkpoint], holder: str, *, heap: bool) -> float | None:
    """The holder's growth per response over the judged checkpoints (least squares), ``None`` when they are too few
    or span under MIN_SPAN_RESPONSES."""
    judged = [c for c in judged_checkpoints(checkpoints) if c.declared_bytes or c.declared_heap_bytes]
    if len(judged) < 2 or judged[-1].responses - judged[0].responses < MIN_SPAN_RESPONSES:
        judged = [c for c in checkpoints if c.drained and not c.tracer_bytes and holder in c.declared_bytes]
        if len(judged) < 2 or judged[-1].responses - judged[0].responses < MIN_SPAN_RESPONSES:
            return None
    return slope_only([float(c.responses) for c in judged], [float(v) for v in _series(judged, holder, heap=heap)])


def traced_signal(checkpoints: Sequence[Checkpoint]) -> bool:
    """Whether the verdict will judge traced memory (every checkpoint traced), as ``growth._signal`` picks it."""
    return bool(checkpoints) and all(c.traced_bytes is not None for c in checkpoints)


def outcomes(checkpoints: Sequence[Checkpoint], declared: Declared) -> tuple[DeclaredGrowth, ...]:
    """Each declared holder's rate over the judged checkpoints against its declaration (``set_aside_bytes`` is filled
    by :func:`set_aside`)."""
    heap = not traced_signal(checkpoints)
    found = []
    for holder, size in declared:
        if not _found(checkpoints, holder):
            found.append(DeclaredGrowth(holder, size, found=False))
            continue
        rate = holder_rate(checkpoints, holder, heap=heap)
        found.append(DeclaredGrowth(holder, size, rate, over=rate is not None and rate > size))
    return tuple(found)


def set_aside(
    checkpoints: Sequence[Checkpoint], judged: Sequence[DeclaredGrowth],
) -> tuple[list[Checkpoint], tuple[DeclaredGrowth, ...]]:
    """The checkpoints with each declared holder's growth since the first one taken out of traced memory (its deep
    size), the heap and RSS (its heap view); a holder over its declaration gives up at most its declared share."""
    if not checkpoints:
        return [], tuple(judged)
    start = checkpoints[0].responses
    adjusted = list(checkpoints)
    result = []
    for outcome in judged:
        if not outcome.found:
            result.append(outcome)
            continue
        deep = _series(checkpoints, outcome.holder, heap=False)
        heap = _series(checkpoints, outcome.holder, heap=True)
        taken = 0
        for k, c in enumerate(adjusted):
            cap = outcome.declared_per_response_bytes * (c.responses - start) if outcome.over else None
            d_deep, d_heap = deep[k] - deep[0], heap[k] - heap[0]
            if cap is not None:
                d_deep, d_heap = min(d_deep, cap), min(d_heap, cap)
            adjusted[k] = replace(
                c, rss_bytes=c.rss_bytes - d_heap,
                heap_bytes=None if c.heap_bytes is None else c.heap_bytes - d_heap,
                traced_bytes=None if c.traced_bytes is None else c.traced_bytes - d_deep,
            )
            taken = d_deep if traced_signal(checkpoints) else d_heap
        result.append(replace(outcome, set_aside_bytes=int(taken)))
    return adjusted, tuple(result)


def judge_declared(
    checkpoints: Sequence[Checkpoint], declared: Declared, analyze: Callable[[Sequence[Checkpoint]], Growth],
) -> Growth:
    """The verdict of ``checkpoints`` with the declared holders' growth set aside (``analyze`` judges the rest).

    The growth keeps the checkpoints as measured; its ``declared`` says, per holder, what was set aside. A holder over
    its declaration makes the verdict ``retained-objects`` (rule ``DECLARED_RULE``), its figure the holder's rate.
    """
    if not declared:
        return analyze(checkpoints)
    adjusted, judged = set_aside(checkpoints, outcomes(checkpoints, declared))
    rest = analyze(adjusted)
    rest = replace(rest, checkpoints=tuple(checkpoints) if rest.checkpoints else (), declared=judged)
    over = [o for o in judged if o.over]
    aside = set_aside_sentence(judged)
    if not over:
        return replace(rest, reason=f"{rest.reason}; {aside}" if aside else rest.reason)
    worst = max(over, key=lambda o: (o.per_response_bytes or 0.0) - o.declared_per_response_bytes)
    sentence = "; ".join(o.describe_over() for o in over)
    besides = ""
    if verdicts.is_leak(rest.verdict) and rest.per_response_bytes is not None:
        besides = (f"; memory besides its declared share also grew {format_size(rest.per_response_bytes)}/response"
                   f" ({rest.verdict})")
    reason = (f"{sentence}: a holder declared by design grew beyond its declaration, and its growth past"
              f" {format_size(worst.declared_per_response_bytes)}/response is a leak{besides}"
              + (f"; {aside}" if aside else ""))
    return replace(rest, verdict=verdicts.RETAINED_OBJECTS, reason=reason, rule=DECLARED_RULE,
                   per_response_bytes=worst.per_response_bytes)


def _rank(holder: Holder, declared: Sequence[DeclaredGrowth]) -> int:
    """0: a holder over its declaration, 1: not declared, 2: within its declaration."""
    found = declared_of(holder.path, declared)
    return 1 if found is None else 0 if found.over else 2


def ordered_holders(holders: Sequence[Holder], declared: Sequence[DeclaredGrowth]) -> tuple[Holder, ...]:
    """The holders as a result lists them: one over its declaration first, then the others, then those within theirs."""
    return tuple(sorted(holders, key=lambda h: _rank(h, declared)))


def leak_evidence_of(
    holders: Sequence[Holder], sites: Sequence[GrowthSite], declared: Sequence[DeclaredGrowth],
) -> tuple[tuple[Holder, ...], tuple[GrowthSite, ...]]:
    """The holders and growth sites a leak's reason may name: not the holders within their declaration (the verdict is
    not about them), nor the growth sites of their keeping lines unless another holder stores there too."""
    ordered = ordered_holders(holders, declared)
    named = tuple(h for h in ordered if _rank(h, declared) < 2)
    aside = {h.line for h in ordered if _rank(h, declared) == 2 and h.line} - {h.line for h in named if h.line}
    return named, tuple(s for s in sites if s.location not in aside)

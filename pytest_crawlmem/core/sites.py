"""Which line a leak verdict names first, and how much of the growth is native (pure, any process).

The growth sites of the attribution window are allocation sites; the line to change is the one that stores into the
holder. :func:`keeping_first` puts that line first (the site at that line, or one made for it from what the holder's
entries cost), keeps the allocation sites below it as evidence, and never lets a request-creation line lead
(``response.follow``/``follow_all``: its growth is requests waiting in the scheduler, freed as they are crawled).
:func:`native_share` compares the heap's growth with what tracemalloc saw grow: the rest was allocated by C
extensions (libxml2 behind lxml, numpy, zlib, Pillow), and :func:`native_sentence` says so, naming the C-extension
objects among the holder's entries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pytest_crawlmem.core.models import GrowthSite, Holder

#: A line that builds requests: its growth is the scheduler's queue (and what hangs on queued requests), not a leak.
REQUEST_CREATION = re.compile(r"\.(follow|follow_all)\s*\(|\b(Request|FormRequest|JsonRequest|XmlRpcRequest)\s*\(")
#: Files on an allocating stack that build a request (the stack of a site whose source line is not the user's).
REQUEST_FILES = ("scrapy/http/request/", "scrapy/http/response/__init__.py")
#: The heap grew at least this share beyond what tracemalloc saw: the verdict says the growth is native.
NATIVE_SHARE = 0.5
#: A site is the scheduler's when the requests queued at the window's close hold at least this share of its growth.
QUEUED_SITE_SHARE = 0.5


@dataclass(frozen=True)
class KeptEvidence:
    """What the attribution window saw of a leak (bytes): tracemalloc's growth in it, and the first holder's entries."""

    responses: int  # the window's responses
    traced_bytes: int | None  # what tracemalloc saw grow over the window (None: not measured)
    holder: str = ""  # the first holder's path
    line: str | None = None  # the line that stores into it
    owners: tuple[tuple[str, int], ...] = ()  # C-extension types among its newest entries: (type, entries)
    sampled: int = 0  # entries looked at
    allocated_at: tuple[str, ...] = ()  # where its newest entries were allocated (most first)
    kept_per_response: float | None = None  # what tracemalloc saw the holder keep per response (its keeping line's site)

    @property
    def traced_per_response(self) -> float | None:
        """Traced growth per response in the window."""
        if self.traced_bytes is None or self.responses <= 0:
            return None
        return self.traced_bytes / self.responses


def source_line(site: GrowthSite) -> str:
    """The source text of the site's own frame in its traceback ('' when the traceback does not reach it).

    A traceback is ``File "path", line N`` then the source, innermost first; the site is the user's frame, which may
    be a few frames out (a library's line is innermost).
    """
    file, _, line = site.location.rpartition(":")
    lines = [str(x) for x in site.traceback]
    for i, text in enumerate(lines[:-1]):
        match = re.match(r'\s*File "(.*)", line (\d+)', text)
        if match and match.group(2) == line and (match.group(1).endswith(file) or file.endswith(match.group(1))):
            nxt = lines[i + 1]
            return "" if nxt.lstrip().startswith("File ") else nxt.strip()
    return ""


def is_request_creation(site: GrowthSite) -> bool:
    """Whether the site builds requests: its source calls ``follow``/``follow_all``/``Request(...)`` or its stack does."""
    if REQUEST_CREATION.search(source_line(site)):
        return True
    return any(part in str(line) for line in site.traceback if str(line).lstrip().startswith("File ")
               for part in REQUEST_FILES)


def is_queued_growth(site: GrowthSite, queued_bytes: int) -> bool:
    """Whether a site's growth is requests waiting in the scheduler (freed as they are crawled), not a leak.

    ``site`` is net of the queue (``queued_bytes``: what the requests queued at the window's close hold of it). A
    request-creation line is the queue's as soon as the queue holds any of it (what is left is what hangs on requests
    being crawled); any other line when the queue held at least :data:`QUEUED_SITE_SHARE` of its growth.
    """
    if queued_bytes <= 0:
        return False
    if is_request_creation(site):
        return True
    return queued_bytes >= QUEUED_SITE_SHARE * (max(site.size_diff_bytes, 0) + queued_bytes)


def net_of_queue(sites: Iterable[GrowthSite], queued: Mapping[str, int]) -> tuple[GrowthSite, ...]:
    """The growth sites without those whose growth is the scheduler's queue (:func:`is_queued_growth`): they are left
    out, not ranked last, so a line whose growth is queued requests never leads."""
    return tuple(s for s in sites if not is_queued_growth(s, queued.get(s.location, 0)))


def rank_sites(sites: Iterable[GrowthSite]) -> list[GrowthSite]:
    """Allocation sites best first: the user's code before a library's, within each request-creation lines last, by
    growth (a request-creation line leads only a crawl with no holder line and no other site of the user's code)."""
    return sorted(sites, key=lambda s: (s.in_user_code, not is_request_creation(s), s.size_diff_bytes), reverse=True)


def keeping_first(
    sites: Sequence[GrowthSite], holders: Sequence[Holder], kept: KeptEvidence | None = None,
    source: str = "",
) -> tuple[GrowthSite, ...]:
    """The growth sites with the line that stores into the first holder first, the allocation sites below it.

    The keeping line's site carries what the holder's entries cost: its own growth plus the growth of the sites that
    allocated them (``kept.allocated_at``); ``source`` is its source text when the window did not trace it.
    """
    ranked = rank_sites(sites)
    line = next((h.line for h in holders if h.line), None)
    if line is None:
        return tuple(ranked)
    own = next((s for s in ranked if s.location == line), None)
    allocators = [s for s in ranked if kept is not None and s.location in kept.allocated_at and s.location != line]
    size = (own.size_diff_bytes if own else 0) + sum(s.size_diff_bytes for s in allocators)
    responses = next((h.responses for h in holders if h.line == line), 0)
    per = (own.bytes_per_response if own else 0.0) + sum(s.bytes_per_response for s in allocators)
    if own is not None:
        first = replace(own, size_diff_bytes=size, bytes_per_response=round(per, 1))
    else:
        path, _, number = line.rpartition(":")
        first = GrowthSite(location=line, size_diff_bytes=size, count_diff=next(h.gained for h in holders if h.line == line),
                           bytes_per_response=round(per if per else (size / responses if responses else 0.0), 1),
                           traceback=(f'File "{path}", line {number}', f"    {source}") if source else (),
                           in_user_code=True)
    return (first, *[s for s in ranked if s.location != line])


def named_line(sites: Sequence[GrowthSite], holders: Sequence[Holder]) -> str:
    """The one line a leak verdict names first: the line storing into the first holder that has one, else the top
    growth site ('' when neither is known)."""
    line = next((h.line for h in holders if h.line), None)
    return line or (sites[0].location if sites else "")


def native_share(heap_per_response: float | None, traced_per_response: float | None) -> float | None:
    """The share of the heap's growth tracemalloc did not see (0-1), ``None`` when either figure is missing."""
    if heap_per_response is None or traced_per_response is None or heap_per_response <= 0:
        return None
    return min(1.0, max(0.0, 1.0 - traced_per_response / heap_per_response))


def leak_native_share(heap_per_response: float | None, kept: KeptEvidence | None) -> float | None:
    """The native share of a leak: the heap's growth beyond what tracemalloc saw its holder keep.

    Said only when something backs it: C-extension objects among the holder's entries, or the window's whole traced
    growth (which overstates the Python side right after tracing starts) also leaving most of the heap's growth unseen.
    Without a holder, the window's traced growth is the Python side.
    """
    if kept is None:
        return None
    whole = native_share(heap_per_response, kept.traced_per_response)
    if kept.kept_per_response is None or not kept.holder:
        return whole
    share = native_share(heap_per_response, kept.kept_per_response)
    if share is None or not (kept.owners or (whole is not None and whole >= NATIVE_SHARE)):
        return whole
    return share


def native_sentence(share: float | None, kept: KeptEvidence | None) -> str:
    """``; 94% of the growth is native: memory allocated by C extensions, invisible to tracemalloc (owned by ...)``.

    '' below :data:`NATIVE_SHARE`. The owners are the C-extension objects among the first holder's newest entries.
    """
    if share is None or share < NATIVE_SHARE:
        return ""
    text = f"; {share:.0%} of the growth is native: memory allocated by C extensions, invisible to tracemalloc"
    if kept is None or not kept.holder:
        return text
    stored = f", stored at {kept.line}" if kept.line else ""
    if kept.owners:
        owners = " and ".join(f"{name} ({count:,} of its {kept.sampled:,} newest entries)" for name, count in kept.owners[:2])
        return text + f"; owned by {owners} held in {kept.holder}{stored}"
    return text + f"; no object of a C extension among the {kept.sampled:,} newest entries of {kept.holder}{stored}"

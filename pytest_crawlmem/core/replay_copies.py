"""Replay copies that are checked: what each copy yielded, against the original (pure, any process).

A crawl replayed with ``replay_copies=N`` serves the recording N times, copy K under hosts ``crawlmem-copyK.<host>``.
Each copy should crawl what the original (copy 0) crawls; one that yields far fewer responses or items makes a long
crawl of one copy plus a handful of pages, and its verdict judges less than it seems. The crawl process counts
responses and items per copy (``crawl.replay_copies``); this module says whether the copies agree, why not, and what
to do. It also marks the item fields named by ``replay_item_keys`` per copy, so a project's duplicates filter lets
the copies' items through.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_crawlmem.core.replay import COPY_PREFIX
from pytest_crawlmem.core.serial import JsonRecord

#: A copy agrees with the original when its responses and items are at least this share of the original's.
AGREEMENT = 0.9
#: An int key of copy K becomes ``value + K * ID_STRIDE``: ids below it stay apart across copies and keep their type.
ID_STRIDE = 10**12
#: Copy numbers named in a message, as ranges (``1-4, 7``), before "and N more".
SHOWN_RANGES = 5


@dataclass(frozen=True, slots=True)
class CopyCount(JsonRecord):
    """What one copy of a replayed recording yielded: responses, items the spider yielded, items through the pipelines."""

    copy: int  # 0: the original hosts; K >= 1: crawlmem-copyK.<host>
    responses: int = 0  # responses downloaded for this copy's URLs (hits and misses)
    items_yielded: int = 0  # items the spider yielded from this copy's responses
    items_scraped: int = 0  # of those, items through every item pipeline (Scrapy's item_scraped signal)
    items_dropped: int = 0  # items a pipeline dropped (item_dropped)


@dataclass(frozen=True, slots=True)
class HostPattern(JsonRecord):
    """A URL pattern of the spider that names a recorded host, and whether copies are matched on the recorded URL."""

    where: str  # "sitemap_rules", "rules[0] LinkExtractor allow", "attribute PRODUCT_URL"
    pattern: str
    host: str  # the recorded host it names
    adapted: bool  # True: the plugin matches it on the URL the copy copies (copies decide as the original does)

    def describe(self) -> str:
        """``sitemap_rules 'https://www\\.shop\\.example/p/' (names www.shop.example; copies matched on the recorded
        URL)``."""
        how = "copies matched on the recorded URL" if self.adapted else "the plugin cannot adapt it"
        return f"{self.where} {self.pattern!r} (names {self.host}; {how})"


# -- patterns that name a host ----------------------------------------------------------------------------------------

_ESCAPE = re.compile(r"\\(.)")
_LABEL = r"[a-z0-9-]"


def _literal(pattern: str) -> str:
    """The regex ``pattern``'s text with its escapes undone (``www\\.shop\\.example`` -> ``www.shop.example``)."""
    return _ESCAPE.sub(lambda m: m[1] if not m[1].isalnum() else " ", pattern).lower()


def named_host(pattern: str, hosts: Iterable[str]) -> str | None:
    """The recorded host ``pattern`` names (its name, or a suffix of two labels or more, as literal text), else ``None``."""
    text = _literal(pattern)
    best: tuple[int, str] | None = None
    for host in hosts:
        name = host.split(":")[0].lower()
        labels = name.split(".")
        for start in range(len(labels) - 1):
            suffix = ".".join(labels[start:])
            if re.search(rf"(?<!{_LABEL}){re.escape(suffix)}(?!{_LABEL})", text):
                if best is None or len(suffix) > best[0]:
                    best = (len(suffix), host)
                break
    return best[1] if best else None


# -- copies against the original --------------------------------------------------------------------------------------


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _span(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def copies_text(numbers: Sequence[int]) -> str:
    """Copy numbers as ranges: ``copies 1-4, 7`` (``copy 3`` for one), the first SHOWN_RANGES ranges."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:SHOWN_RANGES]]
    more = f" and {len(runs) - SHOWN_RANGES:,} more ranges" if len(runs) > SHOWN_RANGES else ""
    return ("copy " if len(numbers) == 1 else "copies ") + ", ".join(parts) + more


def _fewer_responses(per_copy: Sequence[CopyCount]) -> list[CopyCount]:
    """Copies (K >= 1) with fewer than AGREEMENT of the original's responses."""
    base = per_copy[0]
    return [c for c in per_copy[1:] if c.responses < AGREEMENT * base.responses]


def _fewer_yielded(per_copy: Sequence[CopyCount]) -> list[CopyCount]:
    """Copies (K >= 1) whose pages gave the spider fewer than AGREEMENT of the original's items."""
    base = per_copy[0]
    return [c for c in per_copy[1:] if c.items_yielded < AGREEMENT * base.items_yielded]


def _held_back(per_copy: Sequence[CopyCount]) -> list[CopyCount]:
    """Copies (0 too) whose items the pipelines held back: fewer through them than AGREEMENT of the fullest copy's, or,
    with items dropped, all the copies' items together about one copy's worth (a filter shared by the copies lets each
    item through once, whichever copy brings it first)."""
    fullest = max(c.items_scraped for c in per_copy)
    uneven = [c for c in per_copy if c.items_scraped < AGREEMENT * fullest]
    dropped = sum(c.items_dropped for c in per_copy)
    one_copy = max(c.items_yielded for c in per_copy)
    if dropped and sum(c.items_scraped for c in per_copy) <= (2 - AGREEMENT) * one_copy:
        return [c for c in per_copy if c.items_dropped]
    return uneven


def short_copies(per_copy: Sequence[CopyCount]) -> list[CopyCount]:
    """The copies that fell short of the original: fewer responses, fewer items yielded, or items held back by the
    pipelines (:func:`copies_warning` says which and why)."""
    if len(per_copy) < 2 or per_copy[0].copy != 0:
        return []
    return _fewer_responses(per_copy) or _fewer_yielded(per_copy) or _held_back(per_copy)


def shown_copies(per_copy: Sequence[CopyCount], most: int = 20) -> list[CopyCount]:
    """The copies a table shows: the original, the copies that fell short, then the first others, ``most`` in all."""
    short = short_copies(per_copy)
    named = {c.copy for c in short}
    rest = [c for c in per_copy[1:] if c.copy not in named]
    return sorted([*per_copy[:1], *short, *rest][:most], key=lambda c: c.copy)


def per_copy_line(per_copy: Sequence[CopyCount]) -> str:
    """``3 copies: the original (copy 0) 11 responses, 10 items; copies 1-2: 10-11 responses, 9-10 items each``."""
    base, rest = per_copy[0], per_copy[1:]
    line = (f"{len(per_copy):,} copies: the original (copy 0) {_plural(base.responses, 'response')},"
            f" {_plural(base.items_scraped, 'item')}")
    if not rest:
        return line
    responses, items = [c.responses for c in rest], [c.items_scraped for c in rest]
    each = " each" if len(rest) > 1 else ""
    dropped = sum(c.items_dropped for c in per_copy)
    tail = f" ({_plural(dropped, 'item')} dropped by the pipelines)" if dropped else ""
    return (f"{line}; {copies_text([c.copy for c in rest])}: {_span(responses)} response{'' if max(responses) == 1 else 's'},"
            f" {_span(items)} item{'' if max(items) == 1 else 's'}{each}{tail}")


def _shortfall(short: Sequence[CopyCount], total: int) -> str:
    """``copies 1-2 of 3 got 1 response and 0 items each``, or the first few figures when they differ."""
    named = f"{copies_text([c.copy for c in short])} of {total:,}"
    figures = {(c.responses, c.items_scraped) for c in short}
    if len(figures) == 1:
        responses, items = figures.pop()
        each = " each" if len(short) > 1 else ""
        return f"{named} got {_plural(responses, 'response')} and {_plural(items, 'item')}{each}"
    shown = "; ".join(f"copy {c.copy}: {_plural(c.responses, 'response')}, {_plural(c.items_scraped, 'item')}"
                      for c in short[:3])
    return f"{named} got fewer ({shown}{'; ...' if len(short) > 3 else ''})"


def _fewer_responses_cause(patterns: Sequence[HostPattern], hosts: Sequence[str]) -> str:
    fixed = [p for p in patterns if not p.adapted]
    if fixed:
        p = fixed[0]
        others = f" (and {_plural(len(fixed) - 1, 'other pattern')})" if len(fixed) > 1 else ""
        return (f"the spider's {p.where} {p.pattern!r} names the recorded host {p.host}, which copies"
                f" ({COPY_PREFIX}K.{p.host}) do not match, and the plugin cannot adapt it{others} (it matches"
                " sitemap_rules, sitemap_follow and LinkExtractor allow/deny on the recorded URL, nothing else); test it"
                " on pytest_crawlmem.replay.original_url(url), or let it accept any subdomain"
                f" ((?:[\\w-]+\\.)?{re.escape(p.host)})")
    host = hosts[0] if hosts else "the recorded host"
    return (f"the spider's own code compares hosts or URLs with the recorded host {host} (urlparse(url).netloc == ...,"
            f" url.startswith('https://{host}/')), so it treats the copies' pages ({COPY_PREFIX}K.{host}) as foreign, or"
            " state kept between copies (a seen-set of ids or paths, a page counter on the spider) stops them; compare"
            " pytest_crawlmem.replay.original_url(url) and key such state on pytest_crawlmem.replay.copy_of(response)"
            " too, or replay with replay_copies=1 and a longer recording")


def _spread(per_copy: Sequence[CopyCount], figure: str) -> str:
    """``copy 0: 4, copies 1-2: 3 each`` for one figure of each copy (the first few distinct values)."""
    groups: dict[int, list[int]] = {}
    for c in per_copy:
        groups.setdefault(getattr(c, figure), []).append(c.copy)
    parts = [f"{copies_text(numbers)}: {value:,}{' each' if len(numbers) > 1 else ''}"
             for value, numbers in list(groups.items())[:4]]
    return ", ".join(parts) + ("; ..." if len(groups) > 4 else "")


def copies_warning(per_copy: Sequence[CopyCount], *, patterns: Sequence[HostPattern] = (), hosts: Sequence[str] = (),
                   finish_reason: str = "finished") -> str | None:
    """The warning for copies that yielded far fewer responses or items than the original, naming the likely cause and
    what to do; ``None`` when the copies agree within 10% (or there are no copies)."""
    if len(per_copy) < 2 or per_copy[0].copy != 0:
        return None
    base, total = per_copy[0], len(per_copy)
    original = (f"the original (copy 0) {_plural(base.responses, 'response')} and"
                f" {_plural(base.items_scraped, 'item')}")
    stopped = finish_reason.startswith("closespider") or finish_reason not in ("finished", "")
    early = (f"the crawl stopped early ({finish_reason}), so the copies crawled last were cut short; raise that limit"
             " by the number of copies, or lift it under replay")
    short = _fewer_responses(per_copy)
    if short:
        cause = early if stopped else _fewer_responses_cause(patterns, hosts)
        return f"replay copies fell short of the original: {_shortfall(short, total)}, {original}; likely cause: {cause}"
    short = _fewer_yielded(per_copy)
    if short:
        per = [c.items_yielded for c in short]
        cause = early if stopped else (
            f"the spider yielded {_span(per)} items for the copies' pages against {base.items_yielded:,} for the"
            " original's: state kept between copies (a seen-set of ids read from the page, on the spider) holds them"
            " back; key it on pytest_crawlmem.replay.copy_of(response) too")
        return (f"replay copies fell short of the original: {copies_text([c.copy for c in short])} of {total:,} got as"
                f" many responses as the original but fewer items; likely cause: {cause}")
    short = _held_back(per_copy)
    if not short:
        return None
    yielded, scraped = sum(c.items_yielded for c in per_copy), sum(c.items_scraped for c in per_copy)
    dropped = sum(c.items_dropped for c in per_copy)
    head = (f"replay copies' items did not all reach the end of the item pipelines: of the {yielded:,} items the"
            f" {total:,} copies yielded, {scraped:,} went through ({_spread(per_copy, 'items_scraped')})")
    if dropped:
        cause = (f"an item pipeline dropped {dropped:,} of the copies' {yielded:,} items, about every copy's but one"
                 " copy's worth: a duplicates filter keyed on a field read from the page (the copies' items carry the"
                 " original's ids) lets each item through once, whichever copy brings it first; pass"
                 " crawl(..., replay_item_keys=[the fields it keys on]) so that each copy's items arrive as new ones")
    else:
        cause = "an item pipeline failed for some copies' items (Scrapy's item_error): read the log"
    return f"{head}; likely cause: {cause}"


def auto_line(copies: int, entries: int, per_copy: Sequence[CopyCount], *, wanted: int) -> str:
    """What ``replay_copies="auto"`` chose, for how many responses, and what the crawl got."""
    got = sum(c.responses for c in per_copy)
    line = (f'replay_copies="auto" chose {copies:,} {"copy" if copies == 1 else "copies"} of the'
            f" {entries:,}-response recording for {wanted:,} responses and got {got:,}")
    short = short_copies(per_copy)
    if short:
        return f"{line}: {copies_text([c.copy for c in short])} fell short (see the warning)"
    if got >= AGREEMENT * wanted or not per_copy or not per_copy[0].responses:
        return f"{line} (every copy within 10% of the original)"
    base = per_copy[0].responses
    return (f"{line}: each copy crawls {base:,} of the recording's {entries:,} responses;"
            f" replay_copies={math.ceil(wanted / base):,} would reach {wanted:,}")


# -- item keys marked per copy ----------------------------------------------------------------------------------------


def check_item_keys(keys: object) -> tuple[str, ...]:
    """``crawl(replay_item_keys=...)`` as a tuple of field names, or ValueError naming the value."""
    if keys is None:
        return ()
    if isinstance(keys, (str, bytes)) or not isinstance(keys, (list, tuple)) \
            or not all(isinstance(k, str) and k for k in keys):
        raise ValueError(f"invalid replay_item_keys {keys!r}: expected a list of item field names, such as ['sku']")
    return tuple(keys)


def copy_mark(copy: int) -> str:
    """The text appended to a string key of copy ``copy``'s items: ``~crawlmem-copy3``."""
    return f"~{COPY_PREFIX}{copy}"


def mark_key(value: Any, copy: int) -> Any:
    """``value`` of an item key, made distinct for copy ``copy`` (copy 0: unchanged); a string gains ``~crawlmem-copyK``,
    an int ``K * ID_STRIDE``, a list or tuple each element; other values stay as they are."""
    if not copy or value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value + copy_mark(copy)
    if isinstance(value, bytes):
        return value + copy_mark(copy).encode()
    if isinstance(value, int):
        return value + copy * ID_STRIDE
    if isinstance(value, (list, tuple)):
        return type(value)(mark_key(v, copy) for v in value)
    return value

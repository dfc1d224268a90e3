"""Replay copies in the crawl process: responses and items counted per copy, the spider's URL rules matched on the
recorded URL, and item keys made distinct per copy.

Copy K of a recording is served under hosts ``crawlmem-copyK.<host>``. A spider whose ``sitemap_rules``,
``sitemap_follow`` or ``LinkExtractor(allow=..., deny=...)`` patterns name the recorded host would match none of a
copy's URLs; :func:`adapt_spider_rules` wraps those compiled patterns (on the spider's own copies of its rules, never
the class's) so that they test the URL the copy copies: each copy then decides what the original decides, page for
page. URL patterns kept elsewhere on the spider class are found by :func:`attribute_patterns` and reported.
"""

from __future__ import annotations

import copy as copying
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_crawlmem.core.replay import COPY_PREFIX, copy_of, original_url
from pytest_crawlmem.core.replay_copies import CopyCount, HostPattern, mark_key, named_host

RESPONSES, YIELDED, SCRAPED, DROPPED = range(4)
#: Attributes of a spider class that are URLs or rules the plugin handles itself (or that name no URL pattern).
_HANDLED = frozenset({"name", "start_urls", "allowed_domains", "sitemap_urls", "sitemap_rules", "sitemap_follow", "rules",
                      "custom_settings", "sitemap_alternate_links"})


def _recorded(url: str) -> str:
    return original_url(url) if COPY_PREFIX in url else url


class OnRecordedUrl:
    """A compiled URL pattern of the spider that tests the URL a copy copies (copy 0's URLs as they are)."""

    __slots__ = ("wrapped",)

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.wrapped = pattern

    def search(self, string: str, *args: Any) -> re.Match[str] | None:
        """``re.Pattern.search`` on the recorded URL."""
        return self.wrapped.search(_recorded(string), *args)

    def match(self, string: str, *args: Any) -> re.Match[str] | None:
        """``re.Pattern.match`` on the recorded URL."""
        return self.wrapped.match(_recorded(string), *args)

    def fullmatch(self, string: str, *args: Any) -> re.Match[str] | None:
        """``re.Pattern.fullmatch`` on the recorded URL."""
        return self.wrapped.fullmatch(_recorded(string), *args)

    @property
    def pattern(self) -> str:
        """The pattern's text, as the spider wrote it."""
        return self.wrapped.pattern

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def __repr__(self) -> str:
        return f"OnRecordedUrl({self.wrapped!r})"


def _wrapped(pattern: Any) -> Any:
    return pattern if isinstance(pattern, OnRecordedUrl) or not hasattr(pattern, "search") else OnRecordedUrl(pattern)


def _text(pattern: Any) -> str:
    return str(getattr(pattern, "pattern", pattern))


def adapt_spider_rules(spider: Any) -> list[tuple[str, str]]:
    """Make ``spider``'s sitemap rules and link extractors' allow/deny patterns test the recorded URL; return
    ``(where, pattern)`` of each pattern adapted. Only the spider's own lists are replaced: its class is untouched."""
    adapted: list[tuple[str, str]] = []
    for attr, where in (("_cbs", "sitemap_rules"), ("_follow", "sitemap_follow")):
        entries = getattr(spider, attr, None)
        if not isinstance(entries, list):
            continue
        if attr == "_cbs":
            setattr(spider, attr, [(_wrapped(r), c) for r, c in entries])
            adapted += [(where, _text(r)) for r, _ in entries]
        else:
            setattr(spider, attr, [_wrapped(r) for r in entries])
            adapted += [(where, _text(r)) for r in entries]
    for index, rule in enumerate(getattr(spider, "_rules", None) or ()):
        extractor: Any = getattr(rule, "link_extractor", None)
        if not all(isinstance(getattr(extractor, name, None), list) for name in ("allow_res", "deny_res")):
            continue
        own = copying.copy(extractor)  # the class's Rule objects share their extractor: the spider gets its own
        own.allow_res = [_wrapped(r) for r in extractor.allow_res]
        own.deny_res = [_wrapped(r) for r in extractor.deny_res]
        rule.link_extractor = own
        adapted += [(f"rules[{index}] LinkExtractor {kind}", _text(r))
                    for kind in ("allow", "deny") for r in getattr(extractor, f"{kind}_res")]
    return adapted


def attribute_patterns(spider_cls: type) -> list[tuple[str, str]]:
    """``(where, text)`` of the strings and compiled patterns on ``spider_cls`` (and its own bases, not Scrapy's) that
    the plugin does not adapt: a URL or pattern there may name the recorded host."""
    found: list[tuple[str, str]] = []
    for cls in spider_cls.__mro__:
        if cls.__module__.split(".")[0] in ("scrapy", "builtins"):
            continue
        for name, value in vars(cls).items():
            if name.startswith("__") or name in _HANDLED:
                continue
            values = value if isinstance(value, (list, tuple)) else (value,)
            for item in values:
                if isinstance(item, (str, re.Pattern)):
                    found.append((f"attribute {name}", _text(item)))
    return found


@dataclass
class CopyTally:
    """Responses and items of each copy, and the spider's URL patterns (crawl process; the reactor thread only)."""

    copies: int = 1
    counts: dict[int, list[int]] = field(default_factory=dict)
    hosts: dict[str, None] = field(default_factory=dict)  # recorded hosts the crawl asked for, first seen first
    adapted: list[tuple[str, str]] = field(default_factory=list)
    unadapted: list[tuple[str, str]] = field(default_factory=list)

    def count(self, copy: int, what: int) -> None:
        """Count one response (or item yielded, scraped, dropped) of copy ``copy``."""
        row = self.counts.get(copy)
        if row is None:
            row = self.counts[copy] = [0, 0, 0, 0]
        row[what] += 1

    def per_copy(self) -> tuple[CopyCount, ...]:
        """Every copy's figures, copy 0 first (a copy that got nothing has zeros)."""
        last = max([self.copies - 1, *self.counts])
        return tuple(CopyCount(k, *self.counts.get(k, (0, 0, 0, 0))) for k in range(last + 1))

    def host_patterns(self) -> tuple[HostPattern, ...]:
        """The spider's patterns that name a recorded host the crawl asked for, adapted ones first."""
        found = []
        for adapted, entries in ((True, self.adapted), (False, self.unadapted)):
            for where, text in entries:
                host = named_host(text, self.hosts)
                if host is not None:
                    found.append(HostPattern(where, text, host, adapted))
        return tuple(found)


def mark_item(item: Any, keys: Sequence[str], copy: int) -> None:
    """Make the fields ``keys`` of copy ``copy``'s ``item`` distinct from the original's (:func:`mark_key`)."""
    from itemadapter import ItemAdapter

    adapter = ItemAdapter(item)
    for key in keys:
        value = adapter.get(key)
        if value is not None:
            adapter[key] = mark_key(value, copy)


def copy_of_response(response: Any) -> int:
    """The copy a response (or request) belongs to; 0 without one."""
    url = getattr(response, "url", None)
    return copy_of(url) if isinstance(url, str) else 0

"""Known leaks of Scrapy and its libraries: leaks that live in a library rather than the team's code (data, pure).

As LeakCanary keeps a list of the Android SDK's and libraries' leaks, each with the versions it applies to, a leak
verdict that matches an entry here is reported as a known library leak, with the entry's upstream issue, apart from
the team's own (``core/libleaks.py`` matches; docs/ci.md says how). An entry is listed only when its facts were
checked: where the library keeps it, the versions it was read or measured in, and the issue that tracks it upstream.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_crawlmem.core.serial import JsonRecord


@dataclass(frozen=True, slots=True)
class KnownLeak:
    """One known leak of a library: where it is kept, the versions it applies to and its upstream issue."""

    key: str  # a short stable name: ``scrapy-media-cache``
    library: str  # the distribution whose installed version is checked (``scrapy``)
    versions: str  # the versions it applies to, a PEP 440 specifier set (``>=2.13.4,<2.20``)
    summary: str  # what is kept, by what, until when
    issue: str  # the upstream issue's URL
    #: Regular expressions (``re.search``) on a holder's or a retention path: what holds the leak.
    paths: tuple[str, ...]
    #: Files of the library, from its package folder (``scrapy/pipelines/media.py``), one of which a growth site of the
    #: leak outside the team's code must be in; empty: the path alone identifies it.
    files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class KnownLeakMatch(JsonRecord):
    """A leak verdict that is a known leak of a library: the entry, the installed version it was checked against and
    what matched (report.json's ``growth.known_leak``)."""

    key: str
    library: str
    installed: str  # the library's version when the result was made
    versions: str  # the entry's range, which ``installed`` is in
    summary: str
    issue: str
    matched: str  # the path (or file) the entry's pattern matched

    def describe(self) -> str:
        """``known library leak scrapy-media-cache (scrapy 2.19.0, in >=2.13.4,<2.20): ...; upstream: URL``."""
        return (f"known library leak {self.key} ({self.library} {self.installed}, in {self.versions}): {self.summary};"
                f" upstream: {self.issue}")


#: Scrapy's media pipelines (FilesPipeline, ImagesPipeline) cache every download's result in
#: ``MediaPipeline.SpiderInfo.downloaded`` (``info.downloaded[fp] = result`` in scrapy/pipelines/media.py) for as long as
#: the spider runs; a failure is cached as a Twisted Failure. The cache is in the sources of every release from 2.13.4
#: (the lowest this plugin supports) to 2.19.0 and on Scrapy's main branch; that the cached failures keep their Request
#: and Response alive until the spider closes was measured on 2.19.0 (tests/test_media.py: the path
#: ``FilesPipeline.spiderinfo.downloaded[fingerprint] -> Failure .value -> ... -> HtmlResponse``). Upstream: the cache
#: without a bound is scrapy/scrapy#939 (open); #3813 (Scrapy 1.7) cut one route from a failure to its Response.
#: The range stops before 2.20: a release not checked yet is not assumed to keep it.
SCRAPY_MEDIA_CACHE = KnownLeak(
    key="scrapy-media-cache",
    library="scrapy",
    versions=">=2.13.4,<2.20",
    summary="Scrapy's media pipelines cache every download's result, failed ones with their Request and Response,"
            " until the spider closes",
    issue="https://github.com/scrapy/scrapy/issues/939",
    paths=(r"\.spiderinfo\.downloaded\b", r"\binfo\.downloaded\b"),
)

#: Every known library leak, checked in this order.
KNOWN_LEAKS: tuple[KnownLeak, ...] = (SCRAPY_MEDIA_CACHE,)

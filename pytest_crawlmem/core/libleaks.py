"""Which leak verdicts are known leaks of a library (core/known_leaks.py) rather than the team's own (pure).

A leak is the team's own when the holder its verdict names has a line of the team's code storing into it. Otherwise it
is a known library leak when an entry's path pattern matches what holds it (the holder's path, else the paths that keep
Scrapy objects alive after the crawl, the media pipelines' cached failures included), one of its growth sites outside
the team's code lies in one of the entry's files (when the entry names files), and the library's installed version is
in the entry's range. The caller reads the installed version (``version_of``): this module reads nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from pytest_crawlmem.core import known_leaks
from pytest_crawlmem.core.known_leaks import KnownLeak, KnownLeakMatch

if TYPE_CHECKING:
    from pytest_crawlmem.core.models import GrowthSite, Holder, MediaSummary, RetentionPath

#: The installed version of a distribution (``None`` when it is not installed).
VersionReader = Callable[[str], "str | None"]


def applies(entry: KnownLeak, installed: str | None) -> bool:
    """Whether ``entry`` applies to the installed version of its library (never when it is not installed or either
    version does not parse). Pre-releases count as what they will be released as."""
    if installed is None:
        return False
    try:
        return SpecifierSet(entry.versions, prereleases=True).contains(Version(installed))
    except (InvalidSpecifier, InvalidVersion):
        return False


def known_leak(
    *, holders: Sequence[Holder] = (), retention: Sequence[RetentionPath] = (), sites: Sequence[GrowthSite] = (),
    media: MediaSummary | None = None, version_of: VersionReader | None = None,
    entries: Iterable[KnownLeak] | None = None,
) -> KnownLeakMatch | None:
    """The known library leak a leak verdict is (``None``: the team's own, or not known). ``entries``: the list to check
    (the package's, :data:`known_leaks.KNOWN_LEAKS`, read when called); ``version_of`` reads a library's installed
    version (without it, nothing is known)."""
    if version_of is None:
        return None
    holder = next((h for h in holders if h.line), holders[0] if holders else None)
    if holder is not None and holder.line:
        return None  # the team's code stores into its holder
    paths = [holder.path] if holder is not None else [r.path for r in retention if r.path]
    paths += [r.path for r in (media.retained if media is not None else ()) if r.path]
    library_files = [s.location.rpartition(":")[0] for s in sites if not s.in_user_code]
    for entry in known_leaks.KNOWN_LEAKS if entries is None else entries:
        matched = next((p for p in paths if any(re.search(pattern, p) for pattern in entry.paths)), None)
        if matched is None or (entry.files and not any(_in_file(f, entry.files) for f in library_files)):
            continue
        installed = version_of(entry.library)
        if applies(entry, installed):
            return KnownLeakMatch(entry.key, entry.library, installed or "", entry.versions, entry.summary, entry.issue,
                                  matched)
    return None


def _in_file(location: str, files: Sequence[str]) -> bool:
    """Whether a growth site's file is one of ``files`` (package-relative: ``scrapy/pipelines/media.py`` matches itself
    and ``/venv/lib/python3.11/site-packages/scrapy/pipelines/media.py``)."""
    path = location.replace("\\", "/")
    return any(path == f or path.endswith("/" + f) for f in files)

"""Known library leaks: the package's list, version ranges and matching (pure), then a real crawl whose leak lives in a
"library" (a module the test places in a folder named like a site-packages package, with its own dist-info)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from spiders_source import CATALOG_SPIDER

from pytest_crawlmem.core.known_leaks import KNOWN_LEAKS, SCRAPY_MEDIA_CACHE, KnownLeak
from pytest_crawlmem.core.leakset import Leak, diff_leaks, format_diff
from pytest_crawlmem.core.libleaks import applies, known_leak
from pytest_crawlmem.core.models import GrowthSite, Holder, MediaSummary, RetentionPath
from pytest_crawlmem.reports import cli

#: The path measure/media.py gives an object a media pipeline's cached failure keeps (tests/test_media.py, Scrapy 2.19).
MEDIA_PATH = "FilesPipeline.spiderinfo.downloaded[fingerprint] -> Failure .value -> FileException -> frame -> HtmlResponse"
MEDIA = MediaSummary(pipelines=("FilesPipeline",), cached_at_close=40, failed_at_close=20,
                     retained=(RetentionPath("HtmlResponse", 20, MEDIA_PATH), RetentionPath("Request", 20, MEDIA_PATH)))


def versions(**installed: str):
    return installed.get


def test_every_listed_leak_is_grounded_checkable_and_named_once():
    assert len({entry.key for entry in KNOWN_LEAKS}) == len(KNOWN_LEAKS)
    for entry in KNOWN_LEAKS:
        SpecifierSet(entry.versions)  # parses
        assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", entry.issue), entry.issue
        assert entry.paths and all(re.compile(p) for p in entry.paths)
    assert SCRAPY_MEDIA_CACHE in KNOWN_LEAKS


@pytest.mark.parametrize(("installed", "expected"), [
    ("2.13.4", True), ("2.19.0", True), ("2.19.3", True), ("2.16.0", True), ("2.20.0rc1", False), ("2.13.3", False),
    ("2.20.0", False), ("3.0", False), (None, False), ("not a version", False),
])
def test_an_entry_applies_only_to_the_versions_of_its_range(installed, expected):
    assert applies(SCRAPY_MEDIA_CACHE, installed) is expected


def test_the_media_caches_failures_match_on_the_scrapy_versions_it_applies_to():
    found = known_leak(media=MEDIA, version_of=versions(scrapy="2.19.0"))
    assert found is not None and found.key == "scrapy-media-cache" and found.installed == "2.19.0"
    assert found.issue == "https://github.com/scrapy/scrapy/issues/939" and found.matched == MEDIA_PATH
    assert "known library leak scrapy-media-cache (scrapy 2.19.0, in >=2.13.4,<2.20)" in found.describe()
    assert known_leak(media=MEDIA, version_of=versions(scrapy="2.20.0")) is None  # not checked on that release
    assert known_leak(media=MEDIA, version_of=versions()) is None  # Scrapy not installed
    assert known_leak(media=MEDIA) is None  # no version read: nothing is known
    kept = RetentionPath("Request", 20, "class s.Spider .kept -> list[20] [0] -> Request")
    assert known_leak(retention=[kept], version_of=versions(scrapy="2.19.0")) is None  # the team's own path
    assert known_leak(retention=[kept], media=MEDIA, version_of=versions(scrapy="2.19.0")) is not None


def test_a_holder_the_teams_code_stores_into_is_never_a_library_leak():
    holder = Holder("pipeline FilesPipeline.spiderinfo.downloaded -> dict[40]", 40, 60, "pipelines.py:12")
    assert known_leak(holders=[holder], media=MEDIA, version_of=versions(scrapy="2.19.0")) is None
    assert known_leak(holders=[Holder(holder.path, 40, 60)], version_of=versions(scrapy="2.19.0")) is not None


LIBRARY = KnownLeak(key="leakylib-cache", library="leakylib", versions=">=1.0,<2", summary="leakylib keeps every item",
                    issue="https://github.com/example/leakylib/issues/7", paths=(r"^pipeline CachingPipeline\._kept\b",),
                    files=("leakylib/__init__.py",))


def test_an_entry_naming_files_needs_a_growth_site_of_the_library_in_one_of_them():
    holder = Holder("pipeline CachingPipeline._kept -> dict[300]", 120, 130)
    inside = GrowthSite("/tmp/t/lib/site-packages/leakylib/__init__.py:9", 90_000, 20, 800.0, in_user_code=False)
    mine = GrowthSite("leakylib/__init__.py:9", 90_000, 20, 800.0, in_user_code=True)  # a file of the team's code
    other = GrowthSite("/tmp/t/lib/site-packages/otherlib/__init__.py:9", 90_000, 20, 800.0, in_user_code=False)
    found = known_leak(holders=[holder], sites=[inside], version_of=versions(leakylib="1.4.0"), entries=[LIBRARY])
    assert found is not None and found.key == "leakylib-cache"
    for sites in ([mine], [other], []):
        assert known_leak(holders=[holder], sites=sites, version_of=versions(leakylib="1.4.0"), entries=[LIBRARY]) is None
    assert known_leak(holders=[holder], sites=[inside], version_of=versions(leakylib="2.0"), entries=[LIBRARY]) is None


def test_new_leaks_list_library_leaks_apart_and_never_as_new():
    own, library = Leak("aa", "t.py::a"), Leak("bb", "t.py::b", library="known library leak x: upstream: URL")
    diff = diff_leaks([], [own, library])
    assert diff.new == (own,) and diff.library == (library,) and diff.has_new
    assert not diff_leaks([], [library]).has_new
    lines = format_diff(diff_leaks([], [library]), "c", "t")
    assert "no new leak" in lines[3] and lines[-1] == "  library bb leak in t.py::b: known library leak x: upstream: URL"


# -- a real crawl whose leak lives in a "library" ------------------------------------------------

LIBRARY_MODULE = '''
class CachingPipeline:
    """Keeps 8 KiB per item for the whole crawl: a leak of the library, not of the team's code."""

    def __init__(self):
        self._kept = {}

    def process_item(self, item, spider=None):
        self._kept[len(self._kept)] = b"z" * 8192
        return item
'''
CONFTEST = '''
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "lib" / "site-packages"))

from pytest_crawlmem.core import known_leaks  # noqa: E402

_PATH = (r"^pipeline CachingPipeline\\._kept\\b",)
known_leaks.KNOWN_LEAKS = (
    known_leaks.KnownLeak("leakylib-old", "leakylib", "<1.0", "an older leakylib", "https://github.com/example/leakylib/issues/1",
                          _PATH, ("leakylib/__init__.py",)),
    known_leaks.KnownLeak("leakylib-cache", "leakylib", ">=1.0,<2", "leakylib's CachingPipeline keeps every item",
                          "https://github.com/example/leakylib/issues/7", _PATH, ("leakylib/__init__.py",)),
    *known_leaks.KNOWN_LEAKS,
)
'''
SUITE = '''
import pytest
import scrapy

''' + CATALOG_SPIDER + '''

LIBRARY = {"ITEM_PIPELINES": {"leakylib.CachingPipeline": 300}}


@pytest.mark.crawl_memory(leak="fail")
def test_library(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=30&per_page=20")], settings=LIBRARY)


@pytest.mark.crawl_memory(leak="fail")
def test_clean(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=20")])
'''
_RUN: dict[str, tuple[pytest.RunResult, Path] | BaseException] = {}


@pytest.fixture
def library_run(pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    """One inner session (run by the first test that asks): the library's leak and a clean crawl."""
    if "run" not in _RUN:
        try:
            site = pytester.path / "lib" / "site-packages"
            (site / "leakylib").mkdir(parents=True)
            (site / "leakylib" / "__init__.py").write_text(LIBRARY_MODULE)
            (site / "leakylib-1.4.0.dist-info").mkdir()
            (site / "leakylib-1.4.0.dist-info" / "METADATA").write_text(
                "Metadata-Version: 2.1\nName: leakylib\nVersion: 1.4.0\n")
            (pytester.path / "conftest.py").write_text(CONFTEST)
            (pytester.path / "test_suite.py").write_text(SUITE)
            outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-v", "test_suite.py",
                                                    timeout=900)
            _RUN["run"] = (outcome, pytester.path)
        except BaseException as exc:
            _RUN["run"] = exc
            raise
    found = _RUN["run"]
    if isinstance(found, BaseException):
        raise found
    return found


def growth_of(root: Path, test: str) -> dict:
    return json.loads((root / ".crawlmem" / f"test_suite.py__{test}" / "report.json").read_text())["result"]["growth"]


def test_a_leak_kept_by_a_library_is_reported_as_known_with_its_issue(library_run):
    outcome, root = library_run
    growth = growth_of(root, "test_library")
    assert growth["verdict"] == "retained-objects", growth["reason"]
    assert growth["fingerprint_basis"] == ["holder pipeline CachingPipeline._kept -> dict"]
    known = growth["known_leak"]
    assert (known["key"], known["installed"], known["versions"]) == ("leakylib-cache", "1.4.0", ">=1.0,<2")
    assert known["issue"] == "https://github.com/example/leakylib/issues/7"
    assert [hop["reference"] for hop in growth["leak_trace"]["hops"]][:2] == ["pipeline CachingPipeline", "._kept"]
    assert growth_of(root, "test_clean")["known_leak"] is None
    outcome.assert_outcomes(passed=1, failed=1)  # leak="fail" still fails: the leak is real, and known
    text = outcome.stdout.str()
    line = "known library leak leakylib-cache (leakylib 1.4.0, in >=1.0,<2): leakylib's CachingPipeline keeps every item;"
    failure = text.split("crawl_memory budget broken:", 1)[1]
    assert "crawl_memory leak trace (<- fingerprint: what fingerprint" in failure
    assert f"crawl_memory {line}" in failure
    assert f"test_suite.py::test_library: {line}" in text.split("crawl memory =", 1)[1]  # under the summary table


def test_diff_new_leaks_lists_a_library_leak_apart_and_exits_0(library_run, capsys):
    _, root = library_run
    reports = root / ".crawlmem"
    status = cli.main(["diff", "--new-leaks", str(reports / "test_suite.py__test_clean"),
                       str(reports / "test_suite.py__test_library")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "no new leak" in out and "1 known library leak in the treatment" in out, out
    assert re.search(r"^  library [0-9a-f]{16} retained-objects in test_suite.py::test_library .*leakylib-cache", out,
                     re.MULTILINE), out

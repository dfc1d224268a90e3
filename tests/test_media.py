"""Media pipelines: failed media downloads are dropped data, and what Scrapy 2.19's media cache keeps alive.

Real crawls with Scrapy's FilesPipeline against the fixture site's ``/media/`` routes, in a subprocess (pytester).
"""

from __future__ import annotations

import json

import pytest

from pytest_crawlmem.core.assemble import media_evidence
from pytest_crawlmem.core.dropped import MEDIA_FAILED, DropLedger
from pytest_crawlmem.core.models import MediaSummary, RetentionPath
from pytest_crawlmem.measure.media import media_failed_reason, watch_pipeline

SPIDERS = '''
import scrapy

REFUSED = "http://127.0.0.1:1/refused.jpg"  # nothing listens on port 1: connection refused


class MediaItems(scrapy.Spider):
    """One item per product page; its file_urls mix good media, missing media (404) and a refused connection."""

    name = "media_items"
    products = 20
    good = True  # each item has a good file (and item 5 a refused one)
    missing_every = 4  # every 4th item also has a missing one
    extra = ""  # a path every item also wants

    async def start(self):
        for i in range(1, int(self.products) + 1):
            yield scrapy.Request(self.base + f"/catalog/product/{i}")

    def parse(self, response):
        i = int(response.url.rsplit("/", 1)[1])
        urls = [self.base + f"/media/{i}.jpg?kb=8"] if self.good else []
        if i % int(self.missing_every) == 0:
            urls.append(self.base + f"/media/missing/{i}.jpg")
        if i == 2 and self.good:
            urls.append(self.base + "/media/missing/4.jpg")  # the same missing file as item 4: downloaded once
        if i == 5 and self.good:
            urls.append(REFUSED)
        if self.extra:
            urls.append(self.base + self.extra)
        yield {"id": i, "file_urls": urls}
'''

TESTS = '''
import json

import pytest
from spiders import REFUSED, MediaItems

MISSING = [4, 8, 12, 16, 20]


def settings(tmp_path):
    return {"ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1}, "FILES_STORE": str(tmp_path / "files"),
            "FEEDS": {str(tmp_path / "items.jsonl"): {"format": "jsonlines"}}, "RETRY_TIMES": 1}


def test_failed_media(crawl, fixture_site, tmp_path):
    result = crawl(MediaItems, base=fixture_site.base_url, settings=settings(tmp_path))
    assert result.items_scraped == 20
    stored = sorted((tmp_path / "files" / "full").iterdir())
    assert len(stored) == 20 and all(p.stat().st_size == 8 * 1024 for p in stored)
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sum(len(item["files"]) for item in items) == 20  # only the good files are in the items

    by_url = {d.url: d for d in result.dropped}
    missing = {fixture_site.url(f"/media/missing/{i}.jpg") for i in MISSING}
    assert set(by_url) == missing | {REFUSED}, result.dropped
    assert result.dropped_count == len(result.dropped) == 6  # /media/missing/4.jpg, wanted twice, is downloaded once
    for url in missing:
        assert by_url[url].reason == "media download failed (404)" and by_url[url].size_bytes > 0
    assert by_url[REFUSED].reason == "media download failed (DownloadConnectionRefusedError)"  # Scrapy 2.19's class
    assert by_url[REFUSED].size_bytes is None

    media = result.media
    assert media.pipelines == ("FilesPipeline",)
    assert (media.cached_at_close, media.failed_at_close) == (26, 6)
    assert result.max_media_cached == 26
    kept = {r.class_name: r for r in media.retained}
    # one request per failed URL, plus item 2's request for the failure it shares with item 4, plus the retry's copy of
    # the refused request (held by download_async's frame); one response per 404 (the refused download had none)
    assert (kept["Request"].count, kept["HtmlResponse"].count) == (6 + 1 + 1, 5)
    assert kept["HtmlResponse"].path.startswith("FilesPipeline.spiderinfo.downloaded[fingerprint] -> Failure .value")
    assert " -> frame " in kept["HtmlResponse"].path and kept["HtmlResponse"].path.endswith(" -> HtmlResponse")
    closing = result.growth.checkpoints[-1]
    assert closing.live_refs.get("Request") == 8 and closing.live_refs.get("HtmlResponse") == 5  # trackref agrees
    # once the crawler is let go, the pipeline and its cache go with it: nothing is left after the crawl
    assert "Request" not in result.live_refs and "HtmlResponse" not in result.live_refs


def test_oversized_media(crawl, fixture_site, tmp_path):
    oversized = "/oversized/1?kb=2048&mode=declared"
    result = crawl(MediaItems, base=fixture_site.base_url, products=1, extra=oversized,
                   settings={**settings(tmp_path), "DOWNLOAD_MAXSIZE": 2**20})
    assert [(d.url, d.reason, d.size_bytes) for d in result.dropped] == [
        (fixture_site.url(oversized), "download_maxsize (declared)", 2 * 2**20)]  # counted once, by the middleware
    assert result.media.failed_at_close == 1


@pytest.mark.crawl_memory(max_dropped=0)
def test_max_dropped_names_failed_media(crawl, fixture_site, tmp_path):
    crawl(MediaItems, base=fixture_site.base_url, products=4, settings=settings(tmp_path))


@pytest.mark.crawl_memory(leak="fail", max_dropped=1000)
def test_many_failed_media(crawl, fixture_site, tmp_path):
    result = crawl(MediaItems, base=fixture_site.base_url, products=700, good=False, missing_every=1,
                   settings=settings(tmp_path))
    assert result.dropped_count == 700 and result.media.failed_at_close == 700
    # the retained Requests and responses are all the cache's: media-disk, which leak="fail" does not fail
    assert result.verdict == "media-disk", result.growth.reason
    assert "the 700 failures FilesPipeline cached keep 700 Request and 700 HtmlResponse alive" in result.growth.reason
'''


def test_a_files_pipeline_crawl_counts_failed_media_and_shows_what_the_cache_keeps_alive(pytester: pytest.Pytester):
    pytester.makepyfile(spiders=SPIDERS, test_media_crawl=TESTS)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", timeout=300)
    outcome.assert_outcomes(passed=3, failed=1)
    outcome.stdout.fnmatch_lines([
        "*test_max_dropped_names_failed_media FAILED*",
        "*test_many_failed_media PASSED*",
        "*crawl_memory budget broken: 1 responses were dropped, over the budget max_dropped=0:"
        " http://127.0.0.1:*/media/missing/4.jpg (media download failed (404), *)*",
    ])
    report_dir = pytester.path / ".crawlmem" / "test_media_crawl.py__test_failed_media"
    page = (report_dir / "report.html").read_text()
    assert "kept alive by failed media downloads: 8 Request" in page and "FilesPipeline.spiderinfo.downloaded" in page
    report = json.loads((report_dir / "report.json").read_text())["result"]
    assert report["media"]["pipelines"] == ["FilesPipeline"] and report["media"]["failed_at_close"] == 6
    assert report["peaks"]["max_media_cached"] == 26 and len(report["dropped"]) == 6


class _Response:
    status = 404
    body = b"not here"


class _Request:
    url = "http://site/media/missing/1.jpg"


class _Pipeline:
    """Stands in for a MediaPipeline: media_downloaded rejects what is not a 200, media_failed raises."""

    def media_downloaded(self, response, request, info, *, item=None):
        if response.status != 200:
            raise ValueError("download-error")
        return {"url": request.url}

    def media_failed(self, failure, request, info):
        raise RuntimeError("failed")


class _Failure:
    def __init__(self, value: BaseException) -> None:
        self.value = value


def test_a_rejected_download_is_recorded_once_though_scrapy_hands_it_to_media_failed_too():
    pipeline, ledger, request = _Pipeline(), DropLedger(), _Request()
    assert watch_pipeline(pipeline, ledger) and not watch_pipeline(pipeline, ledger)  # wrapped once
    with pytest.raises(ValueError, match="download-error") as raised:
        pipeline.media_downloaded(_Response(), request, None, item={})
    with pytest.raises(RuntimeError):
        pipeline.media_failed(_Failure(raised.value), request, None)
    assert [(d.url, d.reason, d.size_bytes) for d in ledger.dropped] == [(_Request.url, "media download failed (404)", 8)]
    with pytest.raises(RuntimeError):  # another request's download error is its own failure
        pipeline.media_failed(_Failure(ConnectionError()), _Request(), None)
    assert [d.reason for d in ledger.dropped] == ["media download failed (404)", "media download failed (ConnectionError)"]


def test_download_errors_are_recorded_by_type_and_size_limit_drops_are_left_to_the_middlewares():
    from scrapy.exceptions import DownloadCancelledError, IgnoreRequest

    pipeline, ledger = _Pipeline(), DropLedger()
    watch_pipeline(pipeline, ledger)
    for error in (TimeoutError("took too long"), DownloadCancelledError("maxsize"), IgnoreRequest("offsite")):
        with pytest.raises(RuntimeError):
            pipeline.media_failed(_Failure(error), _Request(), None)
    assert [d.reason for d in ledger.dropped] == [f"{MEDIA_FAILED} (TimeoutError)"]


def test_a_200_rejected_by_the_pipeline_names_its_reason():
    assert media_failed_reason(200, ValueError("empty-content")) == "media download failed (empty-content)"
    assert media_failed_reason(503, ValueError("download-error")) == "media download failed (503)"


def test_a_leak_verdict_names_what_the_cached_media_failures_keep_alive():
    summary = MediaSummary(("FilesPipeline",), 10, 4, (RetentionPath("Request", 4, "FilesPipeline.spiderinfo... -> Request"),
                                                       RetentionPath("HtmlResponse", 4, None)))
    assert media_evidence(summary) == (
        "; 4 failed media downloads keep 4 Request and 4 HtmlResponse alive until the crawl ends"
        " (Scrapy caches each failure with its traceback): FilesPipeline.spiderinfo... -> Request"
    )
    assert media_evidence(MediaSummary(("FilesPipeline",), 10, 0, ())) == ""
    assert media_evidence(None) == ""
